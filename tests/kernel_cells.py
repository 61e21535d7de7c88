"""Cells run in a real kernel (nbclient), for the tests of the magics: each cell has a name,
its outputs are looked up by that name, and their text is read the way a person sees it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient


def execute(cells: dict[str, str], workdir: Path, timeout: int = 120) -> Any:
    """A notebook of ``cells`` (name: source) run in a fresh kernel in ``workdir``; errors stay in
    the outputs so that each test can read the cell it is about."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(src, metadata={"name": name}) for name, src in cells.items()]
    NotebookClient(notebook, timeout=timeout, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(workdir)}}).execute()
    notebook.metadata["workdir"] = str(workdir)
    return notebook


def outputs(notebook: Any, name: str) -> list[Any]:
    """The outputs of the cell called ``name``."""
    (cell,) = [c for c in notebook.cells if c.metadata.get("name") == name]
    return list(cell.outputs)


def text_of(outs: list[Any]) -> str:
    """What the outputs say: streams, error lines (``Name: value``) and plain-text results."""
    parts = []
    for o in outs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
        elif "text/plain" in o.get("data", {}):
            parts.append(o.data["text/plain"])
    return "\n".join(parts)
