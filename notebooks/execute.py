"""Re-execute the demo notebooks headless and save them with their outputs.

    python notebooks/execute.py                  # every notebook in notebooks/
    python notebooks/execute.py quickstart memory

Each notebook runs in a fresh kernel whose working directory is notebooks/;
the notebooks themselves make a scratch folder for their files, so nothing is
left behind in the repository.  The scripted ``memfit/<scenario>`` models and,
in real_models, the local model on 127.0.0.1 (tests/local_model.py) where it can
run: no network, no keys.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CELL_TIMEOUT = 180


def notebooks(names: list[str]) -> list[Path]:
    """The notebooks named (``quickstart``, ``quickstart.ipynb`` or a path to one), or all of them."""
    if not names:
        return sorted(HERE.glob("*.ipynb"))
    paths = [HERE / Path(n if n.endswith(".ipynb") else n + ".ipynb").name for n in names]
    missing = [n for n, p in zip(names, paths, strict=True) if not p.exists()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(missing)}")
    return paths


def execute(path: Path, workdir: Path | None = None, timeout: int = CELL_TIMEOUT):
    """Run ``path`` in a fresh python3 kernel (cwd ``workdir``, default its folder); the executed
    notebook node is returned, the file is left untouched."""
    import nbformat
    from nbclient import NotebookClient

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir or path.parent)}})
    client.execute()
    return nb


def main(argv: list[str]) -> int:
    import nbformat

    for path in notebooks(argv):
        start = time.perf_counter()
        nb = execute(path)
        nbformat.write(nb, path)
        print(f"{path.name}: {len(nb.cells)} cells in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
