"""The demo notebooks, executed headless in a real kernel (nbclient), as CI runs them.

Each notebook runs once per test session from a temporary copy of notebooks/
(the committed notebooks are not modified), and the tests read the outputs of
its cells: the saved run bundles and their statuses, the tables, the plot,
not only that the cells ran.  ``python notebooks/execute.py`` refreshes the
committed copies the same way.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import nbformat
import pytest
from kernel_cells import text_of as outputs_text

from memfit_jupyter.memory.ranking import RankingConfig

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
RUN_MIME = "application/vnd.memfit.run+json"
COMPARE_MIME = "application/vnd.memfit.compare+json"
MEMORY_MIME = "application/vnd.memfit.memory+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

_spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOKS / "execute.py")
execute = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute)


@pytest.fixture(scope="session")
def copy_of_notebooks(tmp_path_factory):
    """notebooks/ copied to a temporary folder: the kernels run there, the originals stay as they are."""
    target = tmp_path_factory.mktemp("notebooks") / "notebooks"
    shutil.copytree(NOTEBOOKS, target, ignore=shutil.ignore_patterns(".work", ".ipynb_checkpoints"))
    return target


_executed: dict[str, nbformat.NotebookNode] = {}


def executed(name: str, folder: Path) -> nbformat.NotebookNode:
    if name not in _executed:
        path = folder / f"{name}.ipynb"
        _executed[name] = execute.execute(path, workdir=folder, timeout=120)
    return _executed[name]


def cell(nb, starts: str):
    """The code cell whose source starts with ``starts`` (exactly one)."""
    found = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(starts)]
    assert len(found) == 1, (starts, len(found))
    return found[0]


def text_of(c) -> str:
    """What a saved cell's outputs say (``kernel_cells.text_of``)."""
    return outputs_text(c.outputs)


def runs_in(c) -> list[dict]:
    """The run traces a cell saved (application/vnd.memfit.run+json, or both sides of a
    %memfit_demo comparison), in output order."""
    found = []
    for o in c.outputs:
        data = o.get("data", {})
        if RUN_MIME in data:
            found.append(data[RUN_MIME])
        elif c.source.startswith("%memfit_demo ") and COMPARE_MIME in data:
            found.extend(data[COMPARE_MIME]["runs"])
    return found


def no_errors(nb) -> None:
    errors = [(c.source[:60], o.ename) for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, errors


def test_every_committed_notebook_is_saved_with_outputs():
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, path.name
        assert sum(bool(c.outputs) for c in code) >= len(code) // 2, path.name
        assert not any(o.output_type == "error" for c in code for o in c.outputs), path.name


def test_quickstart(copy_of_notebooks):
    nb = executed("quickstart", copy_of_notebooks)
    no_errors(nb)
    demo = cell(nb, "%%memfit_task --model memfit/demo")
    assert not any(WIDGET_MIME in o.get("data", {}) for o in demo.outputs)  # the bundle is the live view
    (trace,) = runs_in(demo)
    assert trace["status"] == "done" and "42" in trace["answer"]
    assert [e["tool"] for e in trace["events"] if e["type"] == "action"] == ["read_file", "python", "finish"]
    # The --step run was moved by run.step() and run() in later cells: its saved output followed.
    (stepped,) = runs_in(cell(nb, "%%memfit_task --model memfit/spin-demo --reflection auto --spin-warnings prompt --step"))
    assert stepped["status"] == "done" and stepped["totals"]["iterations"] == 6
    assert "same_action_type (layer 1)" in text_of(cell(nb, "for _ in range(2):"))
    frame = cell(nb, "import json\nimport polars")
    assert "model_call" in text_of(frame) and "text/html" in frame.outputs[-1].data
    assert "same events as the recording: True" in text_of(cell(nb, "from memfit_jupyter import Agent"))


def test_failure_modes(copy_of_notebooks):
    from memfit_jupyter.study.catalogue import modes

    nb = executed("failure_modes", copy_of_notebooks)
    no_errors(nb)
    catalogued = modes()
    table = cell(nb, "table = catalogue()").outputs[-1].data["text/html"]
    assert all(m.id in table for m in catalogued)
    coverage = cell(nb, "from memfit_jupyter.catalogue import MAST").outputs[-1].data["text/html"]
    assert coverage.count("<tr>") >= 15 and "Disobey role specification" in coverage  # all 14 + header
    assert "code-edit-spin, logic-spin, monitor-call-faults, step-repetition" in coverage
    # One %memfit_demo line per mode of the catalogue, each with the two saved runs and the
    # table that holds them against what the scenario file states.
    demos = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%memfit_demo ")]
    assert sorted(c.source.split()[1] for c in demos) == sorted(m.id for m in catalogued)
    for m in catalogued:
        c = cell(nb, f"%memfit_demo {m.id} ")
        on, off = runs_in(c)
        assert (on["status"], off["status"]) == (m.on.expect["status"], m.off.expect["status"]), m.id
        assert on["model"] == off["model"] == f"memfit/{m.scenario}"
        verdict = c.outputs[-1].data["text/plain"].splitlines()
        assert [line.split(" ", 1)[0] for line in verdict] == ["on", "off"], m.id
        assert all(line.endswith("; as stated: yes") for line in verdict), (m.id, verdict)
        assert "as_stated" in c.outputs[-1].data["text/html"]
        assert m.name in c.outputs[0].data["text/plain"]
    # Step repetition in real runs: the scripted run analysed after the fact heads the table
    # (public trajectories are read only where MEMFIT_TRAJECTORIES points at some).
    real = cell(nb, "import os\nfrom pathlib import Path")
    assert "memfit/spin-demo, detection off (scripted)" in real.outputs[-1].data["text/html"]
    assert "public runs read" in text_of(real) or "no public trajectories in" in text_of(real)
    # The summary of every run, and the chart, built from them.
    summary = cell(nb, "from memfit_jupyter.jupyter.demo_magic import summary").outputs[-1].data["text/html"]
    assert all(m.id in summary for m in catalogued) and summary.count("<tr>") >= 2 * len(catalogued)
    (svg,) = [o.data["image/svg+xml"] for o in cell(nb, "from html import escape").outputs
              if "image/svg+xml" in o.get("data", {})]
    assert svg.startswith("<svg") and all(m.id in svg for m in catalogued)
    assert svg.count("<rect") >= 2 * len(catalogued)


def test_memory(copy_of_notebooks):
    nb = executed("memory", copy_of_notebooks)
    no_errors(nb)
    assert "a duplicate of a memory already kept" in text_of(cell(nb, "%memfit_memory add The quarterly report lives in reports/q3_summary.txt, not in"))
    assert "duplicate      -> None" in text_of(cell(nb, "from memfit_jupyter import MemoryStore"))
    search = cell(nb, "ranking = %memfit_memory search")
    (payload,) = [o.data[MEMORY_MIME] for o in search.outputs if MEMORY_MIME in o.get("data", {})]
    assert "q3_summary" in str(payload)
    frame = search.outputs[-1].data["text/html"]
    assert all(col in frame for col in ("keyword_bonus", "relevance", "final"))
    assert f"relevance x{RankingConfig().weight}" in cell(nb, "import polars as pl").outputs[-1].data["text/html"]
    first, second = runs_in(cell(nb, "%%memfit_task --model memfit/memory-lesson --reflection auto --quiet --name first")), \
        runs_in(cell(nb, "%%memfit_task --model memfit/memory-lesson --reflection auto --quiet --name second"))
    assert first[0]["status"] == second[0]["status"] == "done"
    learned = [e for e in first[0]["events"] if e["type"] == "memory" and e["op"] == "triage" and e["added"]]
    assert learned
    restart = text_of(cell(nb, "from jupyter_client.manager import start_new_kernel"))
    assert "memories in the store: 7" in restart and "best match: The numbers file of this project is numbers.txt" in restart


def test_synthesis(copy_of_notebooks):
    nb = executed("synthesis", copy_of_notebooks)
    no_errors(nb)
    syntheses = {}
    for strategy in ("weighted", "consensus", "diverse"):
        (trace,) = runs_in(cell(nb, f"%%memfit_task --model memfit/disagree --strategy {strategy}"))
        assert trace["status"] == "done"
        syntheses[strategy] = [e for e in trace["events"] if e["type"] == "synthesis"]
    (weighted,), (consensus,) = syntheses["weighted"], syntheses["consensus"]
    assert "1648" in weighted["answer"] and not weighted["low_confidence"]
    assert consensus["answer"] is None and consensus["low_confidence"]
    # The diverse run waited for a choice; the saved output follows the run, so it also holds the
    # choice that a later cell (diverse.choose(0)) made.
    offered, chosen = syntheses["diverse"]
    assert offered["answer"] is None and len(offered["alternatives"]) == 3
    assert "1648" in chosen["answer"] and chosen["answer"] in text_of(cell(nb, "chosen = diverse.choose(0)"))
    assert "the same samples in all three runs: True" in text_of(cell(nb, "import polars as pl"))
    assert "flagged: ['consensus']" in text_of(cell(nb, "flagged = "))


def test_guarantees(copy_of_notebooks):
    nb = executed("guarantees", copy_of_notebooks)
    no_errors(nb)
    (burn,) = runs_in(cell(nb, "%%memfit_task --model memfit/budget-burn"))
    # The saved output followed the override: the run went on to the end under the new limit.
    assert burn["status"] == "done" and 1.0 < burn["totals"]["cost_usd"] <= 3.0
    types = [e["type"] for e in burn["events"]]
    assert "degradation" in types and types.index("degradation") < len(types) - 2
    assert "refused: overriding a guarantee needs explicit confirmation" in text_of(cell(nb, "from memfit_jupyter.reliability"))
    (outage,) = runs_in(cell(nb, "from memfit_jupyter import Agent"))
    assert outage["status"] == "done"
    changes = [f"{e['from_state']}->{e['to_state']}" for e in outage["events"] if e["type"] == "breaker" and e.get("to_state")]
    assert changes[0] == "CLOSED->OPEN" and changes[-1] == "HALF_OPEN->CLOSED"
    assert "OPEN -&gt; HALF_OPEN" in cell(nb, "t0 = outage").outputs[-1].data["text/html"]


def test_long_horizon(copy_of_notebooks):
    nb = executed("long_horizon", copy_of_notebooks)
    no_errors(nb)
    (first,) = runs_in(cell(nb, "%%memfit_task --model memfit/plan-demo --plan features.json --progress progress.md --no-memory --step"))
    assert first["status"] == "running" and first["totals"]["iterations"] == 4  # dropped in the middle
    resumed = text_of(cell(nb, "written = "))
    assert "files written by the resumed run: ['farewell.py', 'README.txt']" in resumed
    assert "{'readme': True, 'greet': True, 'farewell': True}" in resumed
    (diary,) = runs_in(cell(nb, "%%memfit_task --model memfit/diary --oracle \"$ORACLE\" --max-trials 3"))
    trials = [e for e in diary["events"] if e["type"] == "trial"]
    assert diary["status"] == "done" and [t["passed"] for t in trials] == [False, True]
    assert "1 failed" in trials[0]["oracle_output"] and trials[0]["lesson"]
    assert "pytest" in cell(nb, "%config MemfitMagics.memory_path").outputs[-1].data["text/html"]
    assert text_of(cell(nb, "print(one_try.status")).startswith("escalated")


@pytest.mark.local_model
def test_real_models_drives_the_local_model_or_replays_its_recording(copy_of_notebooks):
    """Where a local model can run (tests/local_model.py) the notebook drives it for real; elsewhere it
    replays recorded_run.json, recorded from the same model.  Either way: schema-valid actions."""
    from memfit_jupyter.records import STATUSES

    nb = executed("real_models", copy_of_notebooks)
    no_errors(nb)
    assert "llama-server" in nb.cells[0].source and "recorded_run.json" in nb.cells[0].source
    found = text_of(cell(nb, "import json, os, sys, tempfile"))
    assert found.startswith(("local model: started llama-server", "local model: the server at",
                             "local model: not here")), found
    (trace,) = runs_in(cell(nb, "from memfit_jupyter import Agent"))
    assert trace["model"] == "openai/smollm2-135m-instruct" and trace["status"] in STATUSES
    calls = [e for e in trace["events"] if e["type"] == "model_call"]
    assert calls and {c["structured"] for c in calls} == {"schema"}
    assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in calls if c["ok"])
    assert not [e for e in trace["events"] if e["type"] == "format_error" and e["purpose"] == "action"]
    assert f"{len(calls)} calls" in text_of(cell(nb, "calls = "))
    replayed = text_of(cell(nb, "replay = show("))
    assert "same events: True" in replayed and "same status and answer: True" in replayed
    assert "no API key for openai/gpt-4o-mini: set OPENAI_API_KEY" in text_of(cell(nb, "os.environ.pop("))


def test_real_trajectories(copy_of_notebooks):
    nb = executed("real_trajectories", copy_of_notebooks)
    no_errors(nb)
    (loop,) = runs_in(cell(nb, "%memfit_load $loop_v1 --analyze"))
    assert loop["source"]["format"] == "mini-swe-agent"
    assert [e["detector"] for e in loop["events"] if e["type"] == "spin"][0] == "edit_rerun"
    assert "step  8  edit_rerun" in text_of(cell(nb, "def findings(trace):"))
    (oh,) = runs_in(cell(nb, "%memfit_load $events --analyze"))
    assert "monologue" in {e["detector"] for e in oh["events"] if e["type"] == "spin"}
    (fine,) = runs_in(cell(nb, "%memfit_load $healthy --analyze"))
    assert not [e for e in fine["events"] if e["type"] == "spin"] and fine["analysis"]["spin_exit"] is None
    assert "1045" in text_of(cell(nb, "import json\nfrom pathlib import Path"))
    assert "<svg" in cell(nb, "from IPython.display import HTML").outputs[-1].data["text/html"]


@pytest.mark.local_model
def test_time_travel(copy_of_notebooks):
    """The scripted sections, and the fork of a local-model run: driven for real where a local model
    can run, replayed from time_travel_local.json elsewhere; the checks hold on both paths."""
    from memfit_jupyter.records import STATUSES

    nb = executed("time_travel", copy_of_notebooks)
    no_errors(nb)
    (parent,) = runs_in(cell(nb, "%%memfit_task --model memfit/premature-finish"))
    assert parent["status"] == "done" and "295" not in parent["answer"]
    said = text_of(cell(nb, "child = run.fork(3"))
    assert "done | The total is 295 crates" in said and f"parent: {parent['run_id']} at step 3" in said
    replayed = text_of(cell(nb, "import json\nfrom memfit_jupyter import Agent"))
    assert "prefix equals the parent's: True" in replayed and "byte for byte: True" in replayed
    assert "first live event: fork" in replayed
    forks = text_of(cell(nb, "empty = run.fork(2"))
    assert forks.count("done") >= 3 and "295" in forks
    tree = text_of(cell(nb, "from pathlib import Path\nfrom memfit_jupyter import family")).splitlines()
    assert tree[0] == f"{parent['run_id']}  (no trace given)" and len(tree) == 4  # named by its three forks
    assert tree[1].startswith("├── at 2 observation='crates: 0' → ") and tree[3].startswith("└── at 3 ")
    assert sorted(line[4:].split(" → ")[0] for line in tree[2:]) == [  # the two at step 3: by run id
        "at 3 action='read_file(path=east.txt)'", "at 3 guidance='finish refused (premature_finish): the …'"]
    remembers = text_of(cell(nb, 'os.makedirs("lesson"'))
    assert "after the fork, the same: True" in remembers and "own store over lesson/lesson-memory" in remembers
    (listed,) = [o for o in cell(nb, "%memfit_memory --run noted list").outputs if MEMORY_MIME in o.get("data", {})]
    contents = [r["content"] for r in listed["data"][MEMORY_MIME]["results"]]
    assert "the numbers file is numbers.txt, one number a line" in contents and len(contents) >= 2  # and the run before's
    assert "diverged at iteration 3" in text_of(cell(nb, "from memfit_jupyter import compare"))
    blamed = text_of(cell(nb, "from memfit_jupyter import blame"))
    assert "<Blame step 3 " in blamed and "success" in blamed
    assert text_of(cell(nb, "import sys\nfrom pathlib import Path\n\nimport memfit_jupyter")).startswith(
        ("local model: smollm2-135m-instruct at http://127.0.0.1:", "local model: not here"))
    (shown,) = [o for o in cell(nb, "compare(local, local_child)").outputs if COMPARE_MIME in o.get("data", {})]
    parent, child = shown["data"][COMPARE_MIME]["runs"]
    assert parent["model"] == child["model"] == "openai/smollm2-135m-instruct"
    assert parent["status"] in STATUSES and child["status"] in STATUSES
    assert child["parent"]["run"] == parent["run_id"] and child["parent"]["at"] == 2
    assert child["parent"]["changes"]["action"]["params"] == {"path": "data_backup.txt"}
    steps = text_of(cell(nb, "if api_base:   # step 2 reads the backup"))
    assert "fork's step 1 is the parent's: True" in steps and "step 2: read_file {'path': 'data_backup.txt'}" in steps
    observed = [e for e in child["events"] if e["type"] == "observation" and e["iteration"] == 2]
    assert "alpha" in observed[0]["output"]  # the replaced action ran for real
    assert "premature-finish" in text_of(cell(nb, "from memfit_jupyter import catalogue"))
