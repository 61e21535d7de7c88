"""Write tests/fixtures/saved_runs.ipynb: a notebook whose outputs are saved memfit runs.

Each run is a real engine run on a scripted model, displayed as ``%%memfit_task``
saves it (``memfit_jupyter.jupyter.display.bundle``: the run payload plus
``text/plain`` and ``text/html``).  The memory ranking is a real search of a
real store.  Two cells carry payloads that are wrong on purpose, and one holds
an event of every catalogued type (labextension/test/fixtures/catalogue.json).

    python tests/browser/make_saved_runs.py          # rewrite the fixture
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "saved_runs.ipynb"
CATALOGUE = ROOT / "labextension" / "test" / "fixtures" / "catalogue.json"
RUN_MIME = "application/vnd.memfit.run+json"

#: (scenario, task) of each saved run, in notebook order.
RUNS = [
    ("demo", "what is the total of the numbers in data.txt?"),
    ("spin-demo", "what is the total of the numbers in data.txt?"),
    ("outage", "what is the total of the numbers in data.txt?"),
    ("disagree", "which file holds the numbers to add?"),
    ("context-overflow", "what is the total of the numbers in data.txt?"),
]


def _run_bundle(scenario: str, task: str) -> tuple[dict, dict]:
    from memfit_jupyter import Agent
    from memfit_jupyter.jupyter.display import bundle

    with tempfile.TemporaryDirectory() as tmp:
        run = Agent(model=f"memfit/{scenario}", workdir=tmp).start(task)
        run.run()
        return bundle(run)


def _trace_bundle(trace: object) -> tuple[dict, dict]:
    """A bundle for a hand-made payload; its HTML fallback says only what it is."""
    data = {RUN_MIME: trace, "text/plain": "memfit run (saved)",
            "text/html": "<p>memfit run (saved): open in JupyterLab to see it</p>"}
    return data, {}


def _memory_bundle() -> dict:
    from memfit_jupyter.jupyter.memory_widget import bundle, ranking_payload
    from memfit_jupyter.memory.store import MemoryStore

    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / ".memfit")
        try:
            store.add("CSV exports from the billing system use semicolons, not commas",
                      tags=["csv", "billing"])
            store.add("The quarterly report lives in data/reports and Q4 arrives late",
                      tags=["reports"])
            store.add("Parse dates as ISO 8601; the CSV has a UTC offset", tags=["csv", "dates"])
            query = "csv semicolons"
            return bundle(ranking_payload(store.search(query, k=5), query=query))
        finally:
            store.close()


def _output(data: dict, metadata: dict):
    import nbformat

    return nbformat.v4.new_output("display_data", data=data, metadata=metadata)


def build() -> object:
    import nbformat

    logging.disable(logging.WARNING)  # breaker and scenario notes are not the point here
    cells = [nbformat.v4.new_markdown_cell(
        "# Saved memfit runs\n\nEvery output below was saved from a run; JupyterLab renders "
        "them with no kernel.")]
    for scenario, task in RUNS:
        cell = nbformat.v4.new_code_cell(f"%%memfit_task --model memfit/{scenario}\n{task}")
        cell.outputs = [_output(*_run_bundle(scenario, task))]
        cells.append(cell)
    cell = nbformat.v4.new_code_cell("%memfit_memory search csv semicolons")
    cell.outputs = [_output(_memory_bundle(), {})]
    cells.append(cell)
    catalogue = json.loads(CATALOGUE.read_text())
    cell = nbformat.v4.new_code_cell("# every event type of the catalogue, and one it does not know")
    cell.outputs = [_output(*_trace_bundle(catalogue))]
    cells.append(cell)
    future = dict(catalogue, version=99)
    cell = nbformat.v4.new_code_cell("# a run saved by a newer memfit")
    cell.outputs = [_output(*_trace_bundle(future))]
    cells.append(cell)
    cell = nbformat.v4.new_code_cell("# a damaged payload")
    cell.outputs = [_output(*_trace_bundle({"version": 1, "task": "half a run"}))]
    cells.append(cell)
    # No kernelspec nor language on purpose: the notebook is for reading, and JupyterLab
    # asks before it starts a kernel for it.
    return nbformat.v4.new_notebook(cells=cells, metadata={})


def main() -> int:
    import nbformat

    nb = build()
    nbformat.validate(nb)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, FIXTURE)
    print(f"wrote {FIXTURE.relative_to(ROOT)} ({len(nb.cells)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
