"""``Trace.load``, the one reader of traces, and what it refuses: each bad trace is one line of
error in the CLI, ``Agent.replay`` and ``load_trajectory`` (never a traceback, an "internal
error" run or a silent replay), and a good one reads the same from a dict, a file or a saved
output."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import warnings

import pytest

from memfit_jupyter import Agent, load_trajectory
from memfit_jupyter import events as ev
from memfit_jupyter.replay import Recording
from memfit_jupyter.trace import Trace, TraceError, TraceWarning
from memfit_jupyter.trajectories import TrajectoryFormatError

TASK = "what is the total of the numbers in data.txt?"
DEEP = 100_000


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    run = Agent(model="memfit/demo", workdir=tmp_path_factory.mktemp("run"), memory=False).start(TASK)
    run.run()
    return json.loads(json.dumps(run.trace()))


def _first(trace, kind):
    return next(e for e in trace["events"] if e["type"] == kind)


#: name: (how the good trace is spoiled, what the one line says)
PROBES = {
    "an event that is a string": (lambda t: t["events"].insert(2, "hello"), 'event 2 is str "hello"'),
    "an observation output of 123": (lambda t: _first(t, "observation").update(output=123),
                                     "(observation): output must be string"),
    "a max_cost_usd of 'lots'": (lambda t: t["settings"].update(max_cost_usd="lots"),
                                 "settings.max_cost_usd must be number"),
    "version 99": (lambda t: t.update(version=99), "has trace version 99; this memfit reads version 1"),
    "version 2": (lambda t: t.update(version=2), "has trace version 2;"),
    "version banana": (lambda t: t.update(version="banana"), 'has trace version "banana";'),
    "an unknown event type": (lambda t: t["events"].insert(3, {"type": "frobnicate", "iteration": 1, "ts": 0.1}),
                              "event 3 has the type 'frobnicate', which this memfit does not know"),
}


def spoiled(good, name):
    trace = copy.deepcopy(good)
    PROBES[name][0](trace)
    return trace


def deep_text(good) -> str:
    """The good trace with 100,000 nested brackets in its settings (written as text: no JSON
    library writes that deep)."""
    text = json.dumps(good)
    at = text.index('"settings": {') + len('"settings": {')
    return text[:at] + '"deep": ' + "[" * DEEP + "]" * DEEP + ", " + text[at:]


def _cli(*args, cwd):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "memfit_jupyter", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.parametrize("name", [*PROBES, "100k nested brackets"])
def test_the_cli_refuses_a_bad_trace_with_one_line(name, good, tmp_path):
    text = deep_text(good) if name == "100k nested brackets" else json.dumps(spoiled(good, name))
    (tmp_path / "bad.json").write_text(text)
    out = _cli("replay", "bad.json", cwd=tmp_path)
    assert out.returncode == 2, (out.returncode, out.stdout[-300:], out.stderr[-300:])
    assert "Traceback" not in out.stderr and out.stderr.strip().count("\n") == 0, out.stderr[-500:]
    expected = "nests deeper than JSON can be read" if name == "100k nested brackets" else PROBES[name][1]
    assert out.stderr.startswith("error: bad.json") and expected in out.stderr, out.stderr


@pytest.mark.parametrize("name", PROBES)
def test_agent_replay_refuses_a_bad_trace_before_it_runs(name, good):
    with pytest.raises(TraceError) as caught:
        Agent.replay(spoiled(good, name))
    assert PROBES[name][1] in str(caught.value) and "\n" not in str(caught.value)


def test_nesting_too_deep_is_refused_from_a_dict_too(good):
    trace = copy.deepcopy(good)
    nested: list = []
    for _ in range(DEEP):
        nested = [nested]
    trace["settings"]["deep"] = nested
    with pytest.raises(TraceError, match="nests more than 100 levels deep"):
        Trace.load(trace)


def test_load_trajectory_refuses_deep_nesting_and_bad_versions_with_one_line(good, tmp_path):
    (tmp_path / "deep.json").write_text(deep_text(good))
    with pytest.raises(TrajectoryFormatError, match="nests deeper than JSON can be read") as caught:
        load_trajectory(tmp_path / "deep.json")
    assert "\n" not in str(caught.value)
    (tmp_path / "v99.json").write_text(json.dumps(spoiled(good, "version 99")))
    with pytest.raises(TrajectoryFormatError, match="has trace version 99"):
        load_trajectory(tmp_path / "v99.json")


def test_an_unknown_event_type_is_a_visible_warning_for_the_views(good):
    trace = spoiled(good, "an unknown event type")
    with pytest.warns(TraceWarning, match=r"frobnicate ×1"):
        read = Trace.load(trace, unknown="warn")
    assert read.data["events"][3]["type"] == "frobnicate"  # kept for the generic card
    assert len(read.events) == len(good["events"]) and read.warnings
    with pytest.warns(TraceWarning, match="frobnicate"):
        loaded = load_trajectory(trace)  # %memfit_load shows it, and says so
    assert loaded["events"][3]["type"] == "frobnicate"


def test_a_good_trace_reads_the_same_from_a_dict_a_file_and_a_saved_output(good, tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(good, indent=1))
    saved_output = {"output_type": "display_data",
                    "data": {"application/vnd.memfit.run+json": good, "text/plain": "memfit run"}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reads = [Trace.load(good), Trace.load(path), Trace.load(str(path)), Trace.load(saved_output),
                 Trace.load(saved_output["data"])]
    for read in reads:
        assert read.data == good
        assert [e.to_dict() for e in read.events] == good["events"]  # every event through its class
    kinds = {type(e) for e in reads[0].events}
    assert {ev.RunStart, ev.ModelCall, ev.Action, ev.Observation, ev.RunEnd} <= kinds
    assert reads[0].of_type(ev.RunEnd)[0].status == good["status"] == "done"


def test_the_header_of_a_big_trace_is_read_without_its_events(good, tmp_path):
    big = copy.deepcopy(good)
    big["events"] = [*big["events"], *[dict(_first(good, "note"), text=f"note {i} ] }} \" [")
                                       for i in range(2000)]]
    big["analysis"] = {"steps": 3}  # a field after the events is found too
    path = tmp_path / "big.json"
    path.write_text(json.dumps(big))
    header = Trace.read_header(path)
    assert header == {**{k: v for k, v in big.items() if k != "events"}, "events": len(big["events"])}
    path.write_text(json.dumps(spoiled(good, "version 99")))
    with pytest.raises(TraceError, match="has trace version 99"):
        Trace.read_header(path)


def test_a_replay_takes_the_scenario_s_files_from_the_note_s_field(good):
    note = _first(good, "note")
    assert note["files"] == ["data.txt"]
    renamed = copy.deepcopy(good)
    _first(renamed, "note")["text"] = "the scenario's files are in place"  # the words are for people
    assert Recording(renamed).tools().placed == ["data.txt"]
    old = copy.deepcopy(good)  # a trace written before notes named their files
    del _first(old, "note")["files"]
    assert Recording(old).tools().placed == ["data.txt"]
    assert Trace.load(old).events[1] == ev.Note(iteration=0, ts=note["ts"], text=note["text"])


def test_a_file_that_is_not_json_says_where_once(tmp_path):
    (tmp_path / "cut.json").write_text('{"version": 1, "task": "unterminated')
    with pytest.raises(TraceError) as caught:
        Trace.load(tmp_path / "cut.json")
    assert "(Unterminated string starting at line 1, column 24)" in str(caught.value)
    with pytest.raises(TrajectoryFormatError) as caught:
        load_trajectory(tmp_path / "cut.json")
    assert "at at" not in str(caught.value) and "starting at line 1" in str(caught.value)


def test_two_traces_that_cannot_be_written_are_both_kept(good, tmp_path, capsys):
    from memfit_jupyter.__main__ import write_trace

    saved = []
    for answer in ("first", "second"):
        assert write_trace({**good, "answer": answer}, str(tmp_path / "no-dir" / "run.json")) == 2
        saved.append(capsys.readouterr().err.strip().rsplit(" written to ", 1)[1])
    assert saved[0] != saved[1]
    assert [json.loads(open(p).read())["answer"] for p in saved] == ["first", "second"]
    for p in saved:
        os.unlink(p)


def test_a_saved_notebook_with_one_run_is_read_and_with_two_refused(good, tmp_path, monkeypatch, capsys):
    import nbformat

    from memfit_jupyter.__main__ import main

    def notebook(runs: int):
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("%%memfit_task\nadd up data.txt", outputs=[
            nbformat.v4.new_output("display_data", data={"application/vnd.memfit.run+json": good,
                                                         "text/plain": "memfit run"})]) for _ in range(runs)]
        path = tmp_path / f"runs{runs}.ipynb"
        nbformat.write(nb, path)
        return path

    assert Trace.load(notebook(1)).data == good
    with pytest.raises(TraceError, match="is a notebook with 2 memfit runs in its outputs: one is needed"):
        Trace.load(notebook(2))
    # the CLI in this process (test_replay.py runs it in a new interpreter)
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "runs1.ipynb"]) == 0
    assert "status: done" in capsys.readouterr().out
