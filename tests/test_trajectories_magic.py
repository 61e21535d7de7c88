"""``%memfit_load`` in a real kernel (nbclient): an imported run in the run view, analysed or
not, bound to a name; bad paths and files are one line of error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kernel_cells import execute, outputs

pytestmark = pytest.mark.kernel

RUN_MIME = "application/vnd.memfit.run+json"
SAMPLES = Path(__file__).parent.parent / "memfit_jupyter" / "trajectories" / "samples"

CELLS = {
    "load": "%load_ext memfit_jupyter",
    "plain": "%memfit_load mini_swe_v1.traj.json --name raw",
    "analyzed": "%memfit_load openhands_events.json --analyze --name seen",
    "after": "print(raw['source']['format'], 'analysis' in raw, seen['analysis']['warnings'] > 0)",
    "saved": "import json; json.dump(seen, open('seen.json', 'w'))\n%memfit_load seen.json --quiet",
    "missing": "%memfit_load nope.json",
    "bad": "%memfit_load bad.json",
    "deep": "%memfit_load deep.json",
    "v99": "%memfit_load v99.json",
    "judge": "%memfit_load mini_swe_v1.traj.json --judge memfit/spin-demo",
}


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("load")
    for name in ("mini_swe_v1.traj.json", "openhands_events.json"):
        shutil.copy(SAMPLES / name, workdir / name)
    (workdir / "bad.json").write_text('{"hello": "world"}')
    (workdir / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (workdir / "v99.json").write_text(json.dumps({"version": 99, "task": "t", "events": []}))
    return execute(CELLS, workdir)


def errors(outs):
    return [o for o in outs if o.output_type == "error"]


def test_an_imported_run_shows_as_a_saved_run(nb):
    outs = outputs(nb, "plain")
    assert not errors(outs)
    summary, run = outs[0], outs[1]
    assert summary.data["text/plain"].startswith("mini-swe-agent run, 11 steps, status done")
    trace = run.data[RUN_MIME]
    assert trace["source"]["format"] == "mini-swe-agent" and trace["version"] == 1
    assert "memfit-summary" in run.data["text/html"] and "parse_version" in run.data["text/html"]
    assert not any(e["type"] == "spin" for e in trace["events"])


def test_analyze_puts_the_findings_on_the_run(nb):
    outs = outputs(nb, "analyzed")
    assert not errors(outs)
    assert "analysis:" in outs[0].data["text/plain"] and "monologue" in outs[0].data["text/plain"]
    trace = outs[1].data[RUN_MIME]
    spins = [e for e in trace["events"] if e["type"] == "spin"]
    assert spins and all(e["analysis"] for e in spins)
    assert "mini-swe-agent False True" in "".join(o.text for o in outputs(nb, "after") if o.output_type == "stream")


def test_a_saved_trace_loads_back(nb):
    outs = outputs(nb, "saved")
    assert not errors(outs)
    assert outs[0].data["text/plain"].startswith("openhands run, 11 steps")
    assert outs[1].data[RUN_MIME]["analysis"]["steps"] == 11


@pytest.mark.parametrize("cell, needle", [
    ("missing", "no trajectory file at nope.json"),
    ("bad", "unknown trajectory format"),
    ("judge", "--judge needs --analyze"),
    ("deep", "deep.json nests deeper than JSON can be read here"),
    ("v99", "has trace version 99; this memfit reads version 1"),
])
def test_bad_input_is_one_line(nb, cell, needle):
    outs = outputs(nb, cell)
    text = "".join(o.get("text", "") for o in outs if o.output_type == "stream").strip()
    assert text.startswith("UsageError: %memfit_load: ") and needle in text and "\n" not in text
    assert not [o for o in outs if o.output_type == "display_data"]  # nothing half-shown
