"""notebooks/does_it_help.ipynb runs headless in a fresh kernel: the saved benchmark figures, a
tiny live evaluation on the scripted model, and the stopping curve of the real runs."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
_spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
execute = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute)

pytestmark = pytest.mark.kernel


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text") or "")
        parts.append((o.get("data") or {}).get("text/plain", ""))
        parts.append((o.get("data") or {}).get("text/html", ""))
    return "".join("".join(p) if isinstance(p, list) else p for p in parts)


def test_does_it_help_executes_and_shows_its_tables(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("does_it_help.ipynb", "does_it_help.json", "does_it_help_defaults.json", "does_it_help_recall.json",
                 "spin_stopping.json"):
        shutil.copy(NOTEBOOKS / name, folder / name)
    nb = execute.execute(folder / "does_it_help.ipynb", workdir=folder, timeout=180)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not any(o.get("output_type") == "error" for c in code for o in c.get("outputs", []))
    texts = [_text(c) for c in code]
    assert "48 tasks" in texts[0] and "'easy': 12" in texts[0]
    assert "<svg" in texts[1] and "smollm2-135m-instruct" in texts[1]
    assert "easy" in texts[2] and "passed" in texts[2]  # the calibration per family and tier
    live = texts[4]  # the live evaluation: both tasks under both variants, each with its verdict
    assert "arith-sum" in live and "fix-add" in live and "pytest test_add.py" in live
    assert "warnings=3" in texts[6] and "repetition rules" in texts[6]
    assert "gpt-5-mini/mini-swe-agent-2.2" in texts[7]
    # the defaults as they ship: the table and the pairs that chose bare's actions
    assert "same_first" in texts[8] and "'max_iterations': '8'" in texts[8] and "<svg" in texts[8]
    assert "recall" in texts[9] and "recalled" in texts[9]  # memory across tasks
