"""The JupyterLab extension: its renderer unit tests (jest) on fresh engine traces, that
pip installed it enabled, and that the saved-runs fixture matches the payload contract."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABEXT = ROOT / "labextension"
FIXTURE = ROOT / "tests" / "fixtures" / "saved_runs.ipynb"
RUN_MIME = "application/vnd.memfit.run+json"
MEMORY_MIME = "application/vnd.memfit.memory+json"
BREAKDOWN_KEYS = {"r", "c", "t", "a", "p", "o", "e", "keyword_bonus", "semantic", "final"}
#: The traces the jest tests read, by scenario.
SCENARIOS = ("demo", "spin-demo", "outage", "disagree", "context-overflow", "bad-output",
             "unknown-tool")
#: Settings a scenario's trace is made with: spin-demo's scripted model turns around once its
#: prompt holds a spin warning (by default the warning is the person's only).
SCENARIO_SETTINGS = {"spin-demo": {"spin_warnings": "prompt"}}


def _jest() -> Path:
    jest = LABEXT / "node_modules" / ".bin" / "jest"
    if not jest.exists():
        jlpm = shutil.which("jlpm")
        if jlpm is None:
            pytest.fail("labextension/node_modules is missing and jlpm is not on PATH: "
                        "run `pip install -e .` (it installs and builds the extension)")
        subprocess.run([jlpm, "install"], cwd=LABEXT, check=True, capture_output=True)
    return jest


@pytest.mark.labextension
def test_renderer_unit_tests_pass_on_fresh_engine_traces(tmp_path):
    from memfit_jupyter import Agent

    logging.disable(logging.WARNING)
    try:
        for scenario in SCENARIOS:
            with tempfile.TemporaryDirectory() as work:
                run = Agent(model=f"memfit/{scenario}", workdir=work, **SCENARIO_SETTINGS.get(scenario, {})).start(
                    "what is the total of the numbers in data.txt?")
                run.run()
                (tmp_path / f"{scenario}.json").write_text(json.dumps(run.trace()))
    finally:
        logging.disable(logging.NOTSET)
    proc = subprocess.run([str(_jest()), "--ci", "--colors=false"], cwd=LABEXT,
                          env={**os.environ, "MEMFIT_TRACE_DIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=300)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, report[-6000:]
    summary = re.search(r"Tests:\s+(.*)", report)
    assert summary and "failed" not in summary.group(1) and "passed" in summary.group(1), report[-3000:]


@pytest.mark.labextension
def test_pip_install_enabled_the_extension():
    proc = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                          capture_output=True, text=True, timeout=120)
    listing = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    line = next((ln for ln in listing.splitlines() if "memfit-jupyter" in ln), None)
    assert line is not None, f"memfit-jupyter is not installed as a labextension:\n{listing}"
    assert "enabled" in line and "OK" in line, line


@pytest.mark.labextension
def test_built_extension_has_its_renderers_and_its_widget_of_this_version():
    import memfit_jupyter

    built = ROOT / "memfit_jupyter" / "labextension" / "package.json"
    assert built.exists(), "the labextension is not built: run `pip install -e .`"
    meta = json.loads(built.read_text())
    assert meta["name"] == "memfit-jupyter"
    assert meta["jupyterlab"]["_build"]["mimeExtension"]  # the renderers
    assert meta["jupyterlab"]["_build"]["extension"]  # the plugin that registers the live widget
    # the widget module the kernel names is the one the extension registers
    from memfit_jupyter.jupyter.widget import MODULE, RunModel

    assert MODULE == meta["name"]
    assert RunModel().get_state()["_model_module_version"] == f"^{meta['version']}"
    version_ts = (LABEXT / "src" / "version.ts").read_text()
    assert f"MODULE_VERSION = '{meta['version']}'" in version_ts
    assert (built.parent / meta["jupyterlab"]["_build"]["load"]).exists()
    source = json.loads((LABEXT / "package.json").read_text())
    assert source["version"] == memfit_jupyter.__version__ == meta["version"]
    [paths] = memfit_jupyter._jupyter_labextension_paths()
    assert paths == {"src": "labextension", "dest": meta["name"]}


def _outputs(nb: dict, mime: str) -> list[dict]:
    return [o["data"][mime] for c in nb["cells"] for o in c.get("outputs", []) if mime in o.get("data", {})]


def test_saved_runs_fixture_follows_the_payload_contract():
    import nbformat

    nb = nbformat.read(FIXTURE, as_version=4)
    nbformat.validate(nb)
    assert not {"kernelspec", "language_info"} & set(nb.metadata), "opening the fixture must not start a kernel"
    runs = _outputs(nb, RUN_MIME)
    assert len(runs) == 8
    for trace in runs[:6]:
        assert trace["version"] == 1
        for key in ("run_id", "task", "status", "totals", "limits", "events"):
            assert key in trace, key
    types = {e["type"] for trace in runs for e in trace.get("events", [])}
    assert {"reflection", "spin", "breaker", "synthesis", "memory", "context", "degradation"} <= types
    [ranking] = _outputs(nb, MEMORY_MIME)
    assert ranking["version"] == 1 and ranking["query"] == "csv semicolons"
    assert ranking["results"] and all(BREAKDOWN_KEYS <= set(r["breakdown"]) for r in ranking["results"])
    finals = [r["breakdown"]["final"] for r in ranking["results"]]
    assert finals == sorted(finals, reverse=True)
    assert all(r["score"] == r["breakdown"]["final"] for r in ranking["results"])
