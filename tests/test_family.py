"""The run tree from saved traces alone: files, folders, notebooks, dicts and runs in hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import nbformat
import pytest

from memfit_jupyter import Agent, compare, family
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.trace import TraceError

KEY = "sk-proj-FAMILYkey7Lm2Np4Rt6Vw8Yz0Ab"


def _runs(tmp_path):
    """A run, two forks of it (one changing the model), and a fork of the first fork."""
    run = Agent(model="memfit/premature-finish", workdir=tmp_path / "parent", memory=False).start(
        load_scenario("premature-finish").task)
    run.run()
    child = run.fork(3, guidance="finish refused (premature_finish): the task names east.txt, which has not "
                                 "been opened yet", workdir=tmp_path / "child")
    child.run()
    other = run.fork(2, observation=f"crates: 0 {KEY}", model="memfit/demo", workdir=tmp_path / "other")
    other.run()
    grand = child.fork(3, action={"tool": "read_file", "params": {"path": "east.txt"}}, workdir=tmp_path / "grand")
    grand.run()
    return run, child, other, grand


def _save(folder, **traces):
    folder.mkdir(parents=True, exist_ok=True)
    for name, trace in traces.items():
        (folder / f"{name}.json").write_text(json.dumps(trace))


def test_saved_traces_in_a_folder_make_the_tree(tmp_path):
    run, child, other, grand = _runs(tmp_path)
    saved = tmp_path / "saved"
    _save(saved, parent=run.trace(), child=child.trace(), other=other.trace())
    _save(saved / "deeper", grand=grand.trace())
    _save(saved / ".ipynb_checkpoints", parent=run.trace())  # a copy: not read again
    (saved / "package.json").write_text('{"name": "not a trace"}')  # another file: passed over
    damaged = json.dumps(child.trace())[:300]
    (saved / "damaged.json").write_text(damaged)  # a trace cut short: named

    fam = family(saved)
    assert list(fam.members) and {m.run for m, _ in fam.walk()} == {run.id, child.id, other.id, grand.id}
    lines = fam.lines()
    assert lines[0].startswith(f"{run.id}  done  3 steps  $") and lines[0].endswith(
        f"memfit/premature-finish  {saved / 'parent.json'}")
    assert lines[1].startswith(f"├── at 2 observation='crates: 0 [REDACTED]' model='memfit/demo' → {other.id}  ")
    assert re.search(r"\$\d\.\d{4}  memfit/demo  ", lines[1])  # the fork's model, named where it differs from its parent's
    assert lines[2].startswith(f"└── at 3 guidance='finish refused (premature_finish): the …' → {child.id}  ")
    assert "premature-finish" not in lines[2]
    assert lines[3].startswith(f"    └── at 3 action='read_file(path=east.txt)' → {grand.id}  ")
    assert lines[3].endswith(str(saved / "deeper" / "grand.json")) and len(lines) == 4
    assert KEY not in str(fam) and KEY not in fam._repr_html_()
    assert [p.split(":")[0] for p in fam.problems] == [str(saved / "damaged.json")]

    frame = fam.frame
    assert frame["run"].to_list() == [run.id, other.id, child.id, grand.id]
    assert frame["depth"].to_list() == [0, 1, 1, 2] and frame["at"].to_list() == [None, 2, 3, 3]
    assert frame["parent"].to_list() == [None, run.id, run.id, child.id]
    assert frame["status"].to_list() == [r.status for r in (run, other, child, grand)]
    # a member's whole trace, read when asked: the child replays byte for byte, and compares with its parent
    again = Agent.replay(fam.trace(child.id))
    again.run()
    assert [json.dumps(e.to_dict()) for e in again.events] == [json.dumps(e) for e in child.trace()["events"]]
    assert compare(fam.trace(run.id), fam.trace(child.id)).diverged_at == 3


def test_a_parent_s_trace_alone_names_its_forks_and_a_child_alone_its_parent(tmp_path):
    run, child, other, grand = _runs(tmp_path)
    fam = family(run.trace())
    assert [m.run for m, _ in fam.walk()] == [run.id, other.id, child.id]  # the forks made of it, by step
    assert fam.members[child.id].source is None and fam.members[child.id].status == child.status
    assert fam.lines()[2].endswith("(no trace given)")
    with pytest.raises(KeyError, match="known only from the traces of its family"):
        fam.trace(child.id)
    alone = family(grand.trace(), other.trace())  # their parents' traces were not given: named, the trees' roots
    assert alone.lines()[0] == f"{child.id}  (no trace given)" and alone.lines()[2] == f"{run.id}  (no trace given)"
    assert alone.lines()[1].startswith(f"└── at 3 action='read_file(path=east.txt)' → {grand.id}  done  ")
    assert alone.lines()[1].endswith("  memfit/premature-finish  <dict>")  # its parent's model is not known
    assert alone.frame["parent"].to_list() == [None, child.id, None, run.id]


def test_runs_in_hand_bring_their_forks_and_a_second_trace_of_a_run_is_named(tmp_path):
    run, child, other, grand = _runs(tmp_path)
    fam = family(run)
    assert [m.run for m, _ in fam.walk()] == [run.id, other.id, child.id, grand.id]
    assert fam.members[grand.id].source == "<run>" and fam.trace(grand.id)["parent"]["run"] == child.id
    replayed = Agent.replay(child.trace())  # a replay keeps its run's id
    replayed.run()
    twice = family(run, replayed)
    assert len(twice.members) == 4 and twice.problems == [f"<run>: run {child.id} again (read from <run>); "
                                                          "the first is kept"]


def test_a_notebook_s_saved_outputs_keep_the_tree(tmp_path):
    from memfit_jupyter.jupyter.display import bundle
    from memfit_jupyter.jupyter.fork_view import ForkTree
    from memfit_jupyter.trace import RUN_MIME

    run, child, other, grand = _runs(tmp_path)
    data, metadata = bundle(run, forks=ForkTree(run).entries({}, traces=True))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("a run and its forks"),
                      nbformat.v4.new_code_cell("%%memfit_task ...", outputs=[
                          nbformat.v4.new_output("display_data", data=data, metadata=metadata)])]
    path = tmp_path / "runs.ipynb"
    nbformat.write(notebook, path)
    assert metadata[RUN_MIME]["forks"]
    fam = family(path)
    assert [m.run for m, _ in fam.walk()] == [run.id, other.id, child.id, grand.id]  # the child's trace lists its own
    assert fam.members[run.id].source == f"{path} (cell 2)"
    assert fam.members[child.id].source == f"{path} (cell 2, a fork)"
    assert fam.trace(child.id)["events"] == json.loads(json.dumps(child.trace()))["events"]


def test_traces_that_name_each_other_as_parents_are_each_drawn_once(tmp_path):
    run, child, *_ = _runs(tmp_path)
    a, b = json.loads(json.dumps(run.trace())), json.loads(json.dumps(child.trace()))
    a.pop("forks"), b.pop("forks")
    a["parent"] = {"run": child.id, "at": 2, "changes": {"guidance": "made up"}}
    fam = family(a, b)
    assert sorted(m.run for m, _ in fam.walk()) == sorted([run.id, child.id]) and len(fam.lines()) == 2


@pytest.mark.parametrize("given, expected", [
    ("nowhere.json", "no such file or folder: nowhere.json"),
    (42, "family() takes trace files, folders, trace dicts and runs, got int"),
])
def test_bad_sources_are_one_line(given, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TraceError) as err:
        family(given)
    assert str(err.value) == expected


def _nested(levels):
    deep = {}
    for _ in range(levels):
        deep = {"a": deep}
    return deep


def test_a_trace_nested_too_deep_is_a_problem_not_a_recursion_error(tmp_path):
    """A fork's recorded change 900 levels deep (as deep as json.dumps writes; a dict given may be
    deeper still): the family names it, as Trace.load refuses it."""
    run, *_ = _runs(tmp_path)
    made = json.loads(json.dumps(run.trace()))
    made["parent"] = {"run": "elsewhere", "at": 1, "changes": {"guidance": _nested(900)}}
    (tmp_path / "deep.json").write_text(json.dumps(made))
    made["parent"]["changes"]["guidance"] = _nested(5000)
    for given, where in ((tmp_path / "deep.json", str(tmp_path / "deep.json")), (made, "<dict>")):
        fam = family(given)
        assert not fam.members and fam.problems == [f"{where}: it nests more than 100 levels deep"]


def test_a_file_named_that_is_not_a_trace_is_a_problem_not_an_error(tmp_path):
    (tmp_path / "notes.json").write_text("[1, 2]")
    fam = family(tmp_path / "notes.json")
    assert not fam.members and fam.problems and "is not a memfit trace" in fam.problems[0]
    assert str(fam).startswith("no memfit run")


@pytest.mark.slow  # python -m memfit_jupyter in a new process, twice
def test_cli_tree_prints_the_tree_of_a_folder(tmp_path, monkeypatch):
    run, child, other, grand = _runs(tmp_path)
    _save(tmp_path / "saved", parent=run.trace(), child=child.trace(), grand=grand.trace())
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-m", "memfit_jupyter", "tree", "saved"], cwd=tmp_path,
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    monkeypatch.chdir(tmp_path)
    assert out.stdout.splitlines() == family("saved").lines() != []
    assert [line.split("→ ")[-1].split()[0] for line in out.stdout.splitlines()[1:]] == [other.id, child.id, grand.id]
    missing = subprocess.run([sys.executable, "-m", "memfit_jupyter", "tree", "nowhere"], cwd=tmp_path,
                             capture_output=True, text=True, env=env, timeout=120)
    assert missing.returncode == 2 and missing.stderr.strip() == "error: no such file or folder: nowhere"
