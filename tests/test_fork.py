"""Forks: a recorded prefix (no model called, no tool run) and a live suffix with a change; the
child's trace names its parent and replays byte for byte; bad input is one line, nothing made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memfit_jupyter import Agent, load_trajectory, scenarios
from memfit_jupyter.fork import ForkError
from memfit_jupyter.live import LiveTools
from memfit_jupyter.llm.backend import LiteLLMBackend
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.replay import CLOCK_FIELDS

FIXTURES = Path(__file__).parent / "fixtures"
TIMES = {"ts", *CLOCK_FIELDS}


class SpyBackend:
    """The world's backend, counting its calls and noting what had happened before the first."""

    def __init__(self, tools: SpyTools, stop: bool = False):
        self.inner = LiteLLMBackend()
        self.tools = tools
        self.stop = stop
        self.run = None
        self.calls = 0
        self.first: dict | None = None

    def complete(self, model, messages, **kw):
        if self.first is None:
            self.first = {"iteration": self.run.iteration, "tools_run": self.tools.executed,
                          "events": len(self.run.events)}
        if self.stop:  # no local server here: the fork stops at its first live call, as a person would
            raise KeyboardInterrupt
        self.calls += 1
        return self.inner.complete(model, messages, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class SpyTools(LiveTools):
    """The world's tools, counting the ones that run."""

    executed = 0

    def __call__(self, run, iteration, act, tool):
        if tool is not None and not getattr(tool, "internal", False):
            self.executed += 1
        return super().__call__(run, iteration, act, tool)


def _untimed(events):
    return [{k: v for k, v in e.items() if k not in TIMES} for e in events]


def _parent(name, workdir, memory=False, **kw):
    extra = {"oracle": "false", "max_trials": 2, **kw} if name == "diary" else kw
    workdir.mkdir(parents=True, exist_ok=True)
    run = Agent(model=f"memfit/{name}", workdir=workdir, memory=memory, **extra).start(
        load_scenario(name).task or "do the task")
    run.run()
    return run


def _spied_fork(parent, at, tmp_path, **changes):
    tools = SpyTools()
    backend = SpyBackend(tools)
    child = Agent.fork(parent, at, workdir=tmp_path / f"fork{at}", backend=backend, tools=tools, **changes)
    backend.run = child
    return child, backend, tools


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_a_fork_of_every_scenario_replays_its_prefix_without_calling_anything(name, tmp_path):
    parent = _parent(name, tmp_path / "parent")
    last = parent.iteration
    at = max(1, (last + 1) // 2 + (1 if last > 2 else 0))
    recorded = json.dumps(parent.trace()["events"])
    child, backend, tools = _spied_fork(parent, at, tmp_path, guidance="Check the task again before acting.")
    child.run()
    assert json.dumps(parent.trace()["events"]) == recorded  # the fork read the parent's events, never changed them
    before = [e.to_dict() for e in parent.events if (e.iteration or 0) < at]
    assert _untimed([e.to_dict() for e in child.events][:len(before)]) == _untimed(before)
    assert child.events[len(before)].TYPE == "fork"
    if backend.first is not None:  # the live part asked the model: nothing was called or run before
        assert backend.first["iteration"] >= at
        assert backend.first["tools_run"] == 0
        assert backend.first["events"] > len(before)
    trace = json.loads(json.dumps(child.trace()))
    assert trace["parent"]["run"] == parent.id and trace["parent"]["at"] == at
    again = Agent.replay(trace)
    again.run()
    assert [json.dumps(e.to_dict()) for e in again.events] == [json.dumps(e) for e in trace["events"]]
    assert parent.forks == [child]


@pytest.mark.parametrize("name", ["memory-lesson", "diary", "spin-demo"])
def test_a_fork_with_memory_replays_its_prefix_and_its_trace(name, tmp_path):
    _parent(name, tmp_path / "parent", memory=None)  # leaves memories that the second run finds
    parent = _parent(name, tmp_path / "parent", memory=None)
    at = max(1, parent.iteration // 2)
    recorded = json.dumps(parent.trace()["events"])
    child, backend, tools = _spied_fork(parent, at, tmp_path)
    child.run()
    assert json.dumps(parent.trace()["events"]) == recorded
    before = [e.to_dict() for e in parent.events if (e.iteration or 0) < at]
    assert _untimed([e.to_dict() for e in child.events][:len(before)]) == _untimed(before)
    if backend.first is not None:
        assert backend.first["tools_run"] == 0
    trace = json.loads(json.dumps(child.trace()))
    again = Agent.replay(trace)
    again.run()
    assert [json.dumps(e.to_dict()) for e in again.events] == [json.dumps(e) for e in trace["events"]]


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.glob("local_*_run.json")))
def test_a_fork_of_a_local_model_recording_reaches_its_first_live_call_untouched(fixture, tmp_path):
    trace = json.loads((FIXTURES / fixture).read_text())
    steps = max(e.get("iteration") or 0 for e in trace["events"])
    for at in range(1, steps + 1):
        tools = SpyTools()
        backend = SpyBackend(tools, stop=True)
        child = Agent.fork(trace, at, workdir=tmp_path / f"fork{at}", backend=backend, tools=tools)
        backend.run = child
        child.run()  # the spy cancels the run at its first live call
        before = [e for e in trace["events"] if (e.get("iteration") or 0) < at]
        assert _untimed([e.to_dict() for e in child.events][:len(before)]) == _untimed(before)
        assert backend.first is not None and backend.first["iteration"] == at
        assert backend.first["tools_run"] == 0 and child.status == "cancelled"


def test_guidance_at_the_step_goes_where_the_reflection_goes_and_the_trace_says_so(tmp_path):
    parent = _parent("spin-demo", tmp_path / "parent")
    child = parent.fork(3, guidance="Stop listing. Read the file and finish.", workdir=tmp_path / "child")
    child.run()
    (fork_event,) = [e for e in child.events if e.TYPE == "fork"]
    assert fork_event.iteration == 3 and fork_event.changes == {"guidance": "Stop listing. Read the file and finish."}
    entries = [e for e in child.timeline.entries if e.kind == "reflection" and e.iteration == 2]
    assert [e.content for e in entries] == ["Stop listing. Read the file and finish."]
    assert child.trace()["parent"]["changes"]["guidance"].startswith("Stop listing")


def test_a_fork_counts_the_parents_running_time_not_its_pauses(tmp_path):
    """A step-mode parent that waited for the person between steps: the child's duration (and its
    time limit) starts from the time the parent spent running, as the parent's own did."""
    import time

    task = load_scenario("demo").task
    Agent(model="memfit/demo", memory=False, workdir=tmp_path / "warm").start(task).run()  # the model client loaded
    parent = Agent(model="memfit/demo", memory=False, workdir=tmp_path / "parent").start(task)
    parent.step()
    time.sleep(1.0)  # the person reads the first step
    parent.step()
    parent.run()
    assert parent.result.duration_s < 1.0 <= parent.trace()["events"][-1]["ts"]
    child = parent.fork(3, workdir=tmp_path / "child")
    child.run()
    assert child.result.status == "done" and child.result.duration_s < 1.0


def test_a_replaced_action_runs_for_real_and_a_replaced_observation_does_not(tmp_path):
    parent = _parent("demo", tmp_path / "parent")
    acted = parent.fork(2, action={"tool": "write_file", "params": {"path": "made.txt", "content": "hi"}},
                        workdir=tmp_path / "acted")
    acted.run()
    assert (tmp_path / "acted" / "made.txt").read_text() == "hi"
    assert not (tmp_path / "parent" / "made.txt").exists()
    (call,) = [e for e in acted.events if e.TYPE == "model_call" and e.iteration == 2 and e.purpose == "action"]
    assert json.loads(call.reply)["tool"] == "write_file" and call.cost_usd == 0
    told = parent.fork(2, observation="42.0", workdir=tmp_path / "told")
    told.run()
    (obs,) = [e for e in told.events if e.TYPE == "observation" and e.iteration == 2]
    assert obs.output == "42.0" and obs.ok
    assert not any(e.TYPE == "observation" and e.iteration == 2 and e.tool == "python" and e.output != "42.0"
                   for e in told.events)


def test_memory_hits_replace_what_step_k_retrieves(tmp_path):
    parent = _parent("spin-demo", tmp_path / "parent", memory=None, reflection="auto")
    deep = [e for e in parent.events if e.TYPE == "reflection" and e.level >= 2]
    assert deep, "spin-demo reflects at STANDARD or above, which searches memory"
    at = deep[0].iteration
    child = parent.fork(at, memory_hits=["the answer is in notes.txt"], workdir=tmp_path / "child")
    child.run()
    (reflected,) = [e for e in child.events if e.TYPE == "reflection" and e.iteration == at]
    assert reflected.memory_used == ["the answer is in notes.txt"]
    later = [e for e in child.events if e.TYPE == "reflection" and e.iteration > at and e.level >= 2]
    assert all(e.memory_used != ["the answer is in notes.txt"] for e in later)


def test_settings_change_from_the_fork_step_on(tmp_path):
    parent = _parent("spin-demo", tmp_path / "parent")
    child = parent.fork(2, model="memfit/demo", reflection="none", max_iterations=4, workdir=tmp_path / "child")
    child.run()
    calls = [e for e in child.events if e.TYPE == "model_call"]
    assert {e.model for e in calls if e.iteration < 2} == {"memfit/spin-demo"}
    assert {e.model for e in calls if e.iteration >= 2} == {"memfit/demo"}
    assert not any(e.TYPE == "reflection" and e.iteration >= 2 for e in child.events)
    assert any(e.TYPE == "reflection" and e.iteration < 2 for e in child.events)
    assert child.trace()["settings"]["model"] == "memfit/demo"
    again = Agent.replay(json.loads(json.dumps(child.trace())))
    again.run()
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in child.events]


@pytest.mark.parametrize("changes, expected", [
    ({"at": 0}, "step 0 is outside the run"),
    ({"at": 99}, "step 99 is outside the run: it has steps 1.."),
    ({"at": "2"}, "at must be a step number"),
    ({"at": 2.0}, "at must be a step number (an int), got float"),
    ({"at": True}, "at must be a step number (an int), got bool"),
    ({"at": 2, "guidence": "x"}, "unknown change(s) guidence; known: step changes: guidance, reflection"),
    ({"at": 2, "guidance": 3}, "guidance must be text, got int"),
    ({"at": 2, "action": {"tool": "nope"}}, "unknown tool 'nope'; the run's tools:"),
    ({"at": 2, "action": "ls"}, 'action must be {"tool": NAME'),
    ({"at": 2, "memory_hits": "x"}, "memory_hits must be a list"),
    ({"at": 2, "max_iterations": 0}, "a setting of the fork is not valid: max_iterations must be at least 1"),
    ({"at": 2, "model": "not a model"}, "a setting of the fork is not valid"),
    ({"at": 2, "fallback_model": "nosuch/model"}, "unknown model 'nosuch/model': litellm knows no provider"),
    ({"at": 2, "memory": 42}, "memory must be one of overlay, write-through or a store"),
    ({"at": 2, "memory": "overlya"}, "memory must be one of overlay, write-through, a store or a store's folder; "
                                     "'overlya' is no folder"),
    ({"at": 2, "strategy": "bogus"}, "unknown synthesis strategy 'bogus'; choose one of: weighted, consensus"),
    ({"at": 2, "spin_threshold": "3"}, "spin_threshold must be an integer at least 2, got '3'"),
    ({"at": 2, "memory": "write-through"}, "memory='write-through' needs a run with memory; this one ran with memory off"),
    # the line quotes what was typed, redacted (it is shown and saved with the notebook)
    ({"at": 2, "model": "sk-proj-Qx7Lm2Np4Rt6Vw8Yz0Ab3Cd5"}, "unknown model '[REDACTED]': litellm knows no provider"),
    ({"at": 2, "action": {"tool": "sk-proj-Qx7Lm2Np4Rt6Vw8Yz0Ab3Cd5"}}, "unknown tool '[REDACTED]'; the run's tools:"),
    ({"at": 2, "memory": "/no/such/sk-proj-Qx7Lm2Np4Rt6Vw8Yz0Ab3Cd5"}, "'/no/such/[REDACTED]' is no folder"),
])
def test_bad_input_is_one_line_and_makes_nothing(changes, expected, tmp_path):
    parent = _parent("demo", tmp_path / "parent")
    before = json.dumps(parent.trace())
    files_before = sorted(p.name for p in (tmp_path / "parent").iterdir())
    changes = dict(changes)
    at = changes.pop("at")
    with pytest.raises(ForkError) as err:
        parent.fork(at, workdir=tmp_path / "child", **changes)
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "child").exists()
    assert json.dumps(parent.trace()) == before and parent.forks == []
    assert sorted(p.name for p in (tmp_path / "parent").iterdir()) == files_before


def _broken_events(trace):
    trace["events"][2] = "not an event"


def _step_as_text(trace):
    trace["events"][1]["iteration"] = "1"


def _bad_setting(trace):
    trace["events"][0]["settings"]["max_iterations"] = "many"


@pytest.mark.parametrize("damage, expected", [
    (_broken_events, "event 2 is str \"not an event\", not an object"),
    (_step_as_text, "event 1 (note): iteration must be integer"),
    (_bad_setting, "the run's recorded settings are not valid: max_iterations must be at least 1, got 'many'"),
    (lambda trace: trace.clear(), "is not a memfit trace: a JSON object with 'task' and 'events' is expected"),
])
def test_a_damaged_saved_trace_is_one_line_and_makes_nothing(damage, expected, tmp_path):
    parent = _parent("demo", tmp_path / "parent")
    trace = json.loads(json.dumps(parent.trace()))
    damage(trace)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(trace))
    for given in (trace, path):
        with pytest.raises(ForkError) as err:
            Agent.fork(given, 2, workdir=tmp_path / "child")
        assert expected in str(err.value) and "\n" not in str(err.value)
        assert not (tmp_path / "child").exists()
    path.write_text(json.dumps([trace]))  # JSON, but not a trace
    with pytest.raises(ForkError, match="not a memfit trace"):
        Agent.fork(path, 2, workdir=tmp_path / "child")


def _deep(levels):
    nested = {}
    for _ in range(levels):
        nested = {"a": nested}
    return nested


@pytest.mark.parametrize("damage, expected", [
    # blame tried every step up to the last one a trace names: this one took all the memory there was
    (lambda events: events[-1].update(iteration=10**15), "is at step 1000000000000000 after step"),
    (lambda events: events[3].update(iteration=-5), "is at step -5 after step"),
    (lambda events: events[3].update(iteration=True), "iteration must be integer"),
    (lambda events: events[3].update(data=_deep(5000)), "nests more than 100 levels deep"),  # was RecursionError
])
def test_a_saved_trace_is_read_as_a_replay_reads_it_before_a_fork_or_blame_uses_it(damage, expected, tmp_path):
    from memfit_jupyter import blame

    parent = _parent("premature-finish", tmp_path / "parent")
    trace = json.loads(json.dumps(parent.trace()))
    damage(trace["events"])
    for call in (lambda: Agent.fork(trace, 2, workdir=tmp_path / "child"),
                 lambda: blame(trace, workdir=tmp_path / "forks")):
        with pytest.raises(ForkError) as err:
            call()
        assert expected in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "child").exists() and not (tmp_path / "forks").exists()
    assert parent.forks == []


def test_a_step_read_from_a_dataframe_or_an_array_is_a_step(tmp_path):
    import numpy as np
    import polars as pl

    parent = _parent("demo", tmp_path / "parent")
    steps = pl.DataFrame({"step": [2, 3]})
    from_numpy = parent.fork(np.int64(2), workdir=tmp_path / "a")
    from_polars = parent.fork(steps["step"].to_numpy()[1], workdir=tmp_path / "b")
    assert type(from_numpy.parent["at"]) is int and from_numpy.parent["at"] == 2
    assert from_polars.parent["at"] == 3 and json.loads(json.dumps(from_polars.parent))["at"] == 3


def test_a_run_inside_its_step_cannot_be_forked(tmp_path):
    (tmp_path / "w").mkdir()
    run = Agent(model="memfit/demo", workdir=tmp_path / "w", memory=False).start("What is the total?")
    seen = []

    def try_fork(event):
        if event.TYPE == "observation" and event.iteration == 2 and not seen:
            with pytest.raises(ForkError, match="is executing a step") as err:
                run.fork(1, workdir=tmp_path / "child")
            seen.append(str(err.value))

    run.subscribe(try_fork)
    run.run()
    assert seen and not (tmp_path / "child").exists()
    with pytest.raises(ForkError, match="has not started"):
        Agent(model="memfit/demo", workdir=tmp_path / "w", memory=False).start("x").fork(1)


def test_an_imported_trajectory_cannot_be_forked_and_says_to_analyze(tmp_path):
    sample = Path(__file__).parent.parent / "memfit_jupyter" / "trajectories" / "samples" / "mini_swe_v2.traj.json"
    trace = load_trajectory(sample)
    with pytest.raises(ForkError, match=r"its prefix cannot be replayed with tools; analyze\(trace"):
        Agent.fork(trace, 1, workdir=tmp_path / "child")
    assert not (tmp_path / "child").exists()


def test_a_fork_from_a_saved_trace_file(tmp_path):
    parent = _parent("demo", tmp_path / "parent")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(parent.trace()))
    child = Agent.fork(path, 2, workdir=tmp_path / "child")
    child.run()
    assert child.result.status == "done" and child.parent["run"] == parent.id
    assert json.loads(path.read_text()) == json.loads(json.dumps(parent.trace()))


def test_a_replayed_run_forks_like_the_run_it_replays(tmp_path):
    parent = _parent("spin-demo", tmp_path / "parent")
    replayed = Agent.replay(json.loads(json.dumps(parent.trace())), workdir=tmp_path / "elsewhere")
    replayed.run()
    child = replayed.fork(3, guidance="Stop listing. Read the file and finish.", workdir=tmp_path / "child")
    child.run()
    direct = parent.fork(3, guidance="Stop listing. Read the file and finish.", workdir=tmp_path / "direct")
    direct.run()
    def events(run):  # the folders the two children were restored into differ, nothing else
        return _untimed([{**e.to_dict(), "workspace": {**e.workspace, "folder": ""}} if e.TYPE == "fork"
                         else e.to_dict() for e in run.events])

    assert events(child) == events(direct)
    assert replayed.forks == [child] and child.parent["run"] == parent.id
    assert not (tmp_path / "elsewhere").exists()


def test_a_replacement_reflection_is_written_as_the_pipeline_writes_one(tmp_path):
    parent = _parent("spin-demo", tmp_path / "parent")
    child = parent.fork(3, reflection={"summary": "Listing again will not help.",
                                       "suggestions": ["read report.txt", "then finish"]}, workdir=tmp_path / "child")
    child.run()
    (entry,) = [e for e in child.timeline.entries if e.kind == "reflection" and e.iteration == 2]
    assert "Listing again will not help." in entry.content
    assert "MANDATORY RECOMMENDATIONS FOR FUTURE ACTIONS:\n1. read report.txt\n2. then finish" in entry.content
    again = Agent.replay(json.loads(json.dumps(child.trace())))
    again.run()
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in child.events]
    with pytest.raises(ForkError, match="not both"):
        parent.fork(3, guidance="x", reflection={"summary": "y"}, workdir=tmp_path / "both")


def test_a_fork_keeps_the_configs_its_parent_was_given_whole(tmp_path):
    from memfit_jupyter.reflection import ReflectionConfig
    from memfit_jupyter.reliability.guards import GuardConfig

    # spin at the fourth repeat, not the third, and warned in the prompt: the parent turns at step 5
    whole = ReflectionConfig(spin_threshold=4, spin_warnings="prompt", cache_kinds="all")
    (tmp_path / "parent").mkdir()
    parent = Agent(model="memfit/spin-demo", workdir=tmp_path / "parent", memory=False, configs=[whole],
                   extensions=[GuardConfig.only("all")]).start(load_scenario("spin-demo").task)
    parent.run()
    assert parent.status == "done" and [e.iteration for e in parent.events if e.type == "spin"][0] == 4
    child, backend, _ = _spied_fork(parent, 6, tmp_path, guidance="Read reports/summary.txt and finish.")
    mine = child.agent.config.reflection
    assert (mine.spin_threshold, mine.spin_warnings, mine.cache_kinds) == (4, "prompt", "all")
    assert any(isinstance(e, GuardConfig) and e == GuardConfig.only("all") for e in child.agent.extensions)
    child.run()
    before = [e.to_dict() for e in parent.events if (e.iteration or 0) < 6]
    assert _untimed([e.to_dict() for e in child.events][:len(before)]) == _untimed(before)
    assert child.status == "done"


def _with_input(workdir: Path, **kw):
    """A run that found ``input.txt`` and recorded no snapshot (a trace from before them, or with
    them off): a fork at step 1 takes the files from the parent's folder."""
    from memfit_jupyter.workspace import WorkspaceConfig

    workdir.mkdir(parents=True)
    (workdir / "input.txt").write_text("the parent's input\n")
    return _parent("demo", workdir, extensions=[WorkspaceConfig(enabled=False)], **kw)


def test_a_fork_of_a_replay_takes_the_files_of_the_recorded_folder_not_of_the_current_one(tmp_path, monkeypatch):
    parent = _with_input(tmp_path / "parent")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "private.txt").write_text("not the run's\n")
    monkeypatch.chdir(elsewhere)
    replayed = Agent.replay(json.loads(json.dumps(parent.trace())))  # made here: its agent's folder is "."
    replayed.run()
    replayed.fork(1, workdir=tmp_path / "child")
    assert sorted(p.name for p in (tmp_path / "child").iterdir() if p.name != ".memfit") == ["data.txt", "input.txt"]
    with pytest.raises(ForkError, match="is inside the parent's working directory"):
        replayed.fork(1, workdir=tmp_path / "parent" / "inner")


def test_no_fork_writes_into_the_folder_of_any_run_it_comes_from(tmp_path, monkeypatch):
    parent = _parent("demo", tmp_path / "first")
    child = parent.fork(2, workdir=tmp_path / "child")
    child.run()
    saved = json.loads(json.dumps(child.trace()))
    for source in (child, saved):
        with pytest.raises(ForkError, match="is inside the first run's working directory") as err:
            Agent.fork(source, 3, workdir=tmp_path / "first" / "grandchild")
        assert "\n" not in str(err.value)
        with pytest.raises(ForkError, match=r"is inside the parent's working directory .*child"):
            Agent.fork(source, 3, workdir=tmp_path / "child" / "grandchild")  # a saved fork's own folder too
    assert not (tmp_path / "first" / "grandchild").exists() and not (tmp_path / "child" / "grandchild").exists()
    # the default folder is a temporary one: refused where that is inside the run's own
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "first"))
    with pytest.raises(ForkError, match="the temporary folder .* is inside the working directory"):
        parent.fork(2)
    assert sorted(p.name for p in (tmp_path / "first").iterdir() if p.name.startswith("memfit-fork")) == []
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ForkError, match="cannot make the fork's folder .*a-file/child: Not a directory"):
        parent.fork(2, workdir=tmp_path / "a-file" / "child")


def test_a_fork_asks_the_parents_approver_and_its_view_syncs_no_key(tmp_path):
    """The person who decides the parent's tool calls decides the child's live ones (without them a
    call the policy asks about was refused); the call waiting in the view is redacted, as the
    controls are synced to the page and saved with the notebook."""
    from memfit_jupyter.jupyter.widget import RunWidget

    key = "sk-proj-TYPED5Hj2Kl9Mn4Pq7Rs1Tu6Vw"
    asked: list[dict] = []
    parent = _parent("demo", tmp_path / "parent", approve=lambda call: asked.append(call) or True)
    assert parent.status == "done" and asked
    child = parent.fork(2, workdir=tmp_path / "child")
    before = len(asked)
    child.run()
    assert child.status == "done" and asked[before:] and [c["iteration"] for c in asked[before:]] == [2, 3][:len(asked) - before]
    assert not any("was not run" in str(e.get("error")) for e in child.trace()["events"] if e["type"] == "observation")

    # the first call approved, the next held for the person: the parent waits at step 2, and so does its fork
    waiting = _parent("demo", tmp_path / "waits", approve=lambda call: True if call["iteration"] == 1 else None)
    assert waiting.waiting_for_approval is not None
    child = waiting.fork(2, workdir=tmp_path / "child2",
                         action={"tool": "write_file", "params": {"path": "cfg.py", "content": f"api_key={key}"}})
    view = RunWidget(child, step=True)
    child.run()  # the recorded step 1, then step 2's call waits
    view.refresh_controls()
    approval = view.model.controls["approval"]
    assert child.waiting_for_approval is not None and approval["tool"] == "write_file"
    assert approval["params"]["content"] == "api_key=[REDACTED]" and key not in json.dumps(view.model.get_state())
    prompt_run = Agent(model="memfit/demo", workdir=tmp_path / "prompt", memory=False).start(f"sum data.txt; key {key}")
    stepped = RunWidget(prompt_run, step=True)
    stepped.refresh_controls()  # step mode shows the next prompt, the task in it
    assert "key [REDACTED]" in json.dumps(stepped.model.controls["prompt"]) and key not in json.dumps(stepped.model.get_state())


def test_exit_in_the_agents_python_ends_that_code_not_the_run_and_its_writes_are_recorded(tmp_path):
    parent = _parent("demo", tmp_path / "parent")
    code = "open('made.txt', 'w').write('x'); print('before'); import sys; sys.exit({})"
    for status, ok in (("3", False), ("0", True)):
        child = parent.fork(2, workdir=tmp_path / f"child{status}", max_iterations=2,
                            action={"tool": "python", "params": {"code": code.format(status)}})
        child.run()
        (seen,) = [e for e in child.events if e.TYPE == "observation" and e.iteration == 2]
        assert seen.ok is ok and seen.output.startswith("before") and child.status in ("done", "failed")
        assert (seen.error == "the code exited: sys.exit(3)") if not ok else not seen.error
        assert "made.txt" in seen.data["workspace"]["changed"]  # the step's record was made


@pytest.mark.parametrize("name, at, change", [
    ("spin-demo", 3, {"max_iterations": 6}),
    ("file-edits", 2, {"guidance": "write the summary before removing anything"}),
    ("file-edits", 2, {"model": "memfit/demo"}),
    ("spin-demo", 2, {"reflection": "deep"}),
])
def test_a_fork_of_a_fork_after_its_step_keeps_what_that_fork_changed(name, at, change, tmp_path):
    """Its prefix is the first fork's, the first fork's own change included (its fork event, the
    settings it switched, its guidance): from the run in hand, from its saved trace, and replayed;
    with no change of its own it ends as the first fork did."""
    parent = _parent(name, tmp_path / "parent")
    child = parent.fork(at, workdir=tmp_path / "child", **change)
    child.run()
    saved = json.loads(json.dumps(child.trace()))
    later = min(at + 2, child.iteration)
    for label, source in (("in-hand", child), ("saved", saved)):
        grandchild = Agent.fork(source, later, workdir=tmp_path / label)
        grandchild.run()
        events = [e.to_dict() for e in grandchild.events]
        prefix = [e.to_dict() for e in child.events if (e.iteration or 0) < later]
        assert _untimed(events[:len(prefix)]) == _untimed(prefix), label
        assert [e["at"] for e in events if e["type"] == "fork"] == [at, later], label
        assert (grandchild.status, grandchild.result.answer) == (child.status, child.result.answer), label
        again = Agent.replay(json.loads(json.dumps(grandchild.trace())))
        again.run()
        assert [json.dumps(e.to_dict()) for e in again.events] == [json.dumps(e) for e in events], label


def test_a_saved_run_names_its_oracle_and_a_fork_of_it_runs_that_oracle(tmp_path):
    """A diary run's trace names its oracle: its replay has it in the prompt even when no trial was
    judged yet, and a fork of the saved run runs the command (it ran the placeholder '(recorded)');
    a Python oracle, or one an older trace does not name, is one line asking for oracle=."""
    early = _parent("diary", tmp_path / "early", max_iterations=1)  # ends before its first trial
    assert early.trace()["oracle"] == {"command": "false"}
    again = Agent.replay(json.loads(json.dumps(early.trace())))
    again.run()
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in early.events]

    parent = _parent("diary", tmp_path / "parent")
    saved = json.loads(json.dumps(parent.trace()))
    trial = next(e["iteration"] for e in saved["events"] if e["type"] == "trial")
    child = Agent.fork(saved, trial, workdir=tmp_path / "child")
    child.run()
    judged = [e for e in child.events if e.TYPE == "observation" and e.tool == "finish" and e.iteration >= trial]
    assert judged and all(e.data["oracle"]["output"].startswith("$ false\nexit code 1") for e in judged)
    assert not any("(recorded)" in json.dumps(e.to_dict()) for e in child.events if (e.iteration or 0) >= trial)
    for recorded, expected in (({"callable": "check"}, "the Python function check"),
                               (None, "does not say what the run's oracle was")):
        older = {**saved, "oracle": recorded} if recorded else {k: v for k, v in saved.items() if k != "oracle"}
        with pytest.raises(ForkError, match=expected):
            Agent.fork(older, trial, workdir=tmp_path / "refused")
        assert Agent.fork(older, trial, workdir=tmp_path / f"given{bool(recorded)}", oracle="true").agent.oracle == "true"


def test_a_saved_trace_cannot_send_a_fork_to_a_server_this_process_never_called(tmp_path, monkeypatch):
    """A trace is a file from anywhere: one whose settings name a model server would have the fork
    send the person's key (litellm sends OPENAI_API_KEY to any api_base) and prompts there, and
    run the tools its replies pick.  Refused in one line, nothing made, nothing sent; given again
    (api_base=), the server is the person's and is called; once called, this process knows it."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from fault_server import FaultServer

    key = "sk-test-PLANTEDkey0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    server = FaultServer().start()
    try:
        parent = _parent("demo", tmp_path / "parent")
        saved = json.loads(json.dumps(parent.trace()))
        start = next(e for e in saved["events"] if e["type"] == "run_start")
        start["settings"]["api_base"] = server.api_base  # as a trace made elsewhere names its server
        path = tmp_path / "elsewhere.json"
        path.write_text(json.dumps(saved))
        before = path.read_bytes()
        with pytest.raises(ForkError) as refused:
            Agent.fork(path, 2, model="openai/scripted", workdir=tmp_path / "child")
        said = str(refused.value)
        assert "\n" not in said and f"{server.api_base} (api_base), a server this process has not called" in said
        assert f"api_base={server.api_base!r}" in said
        assert not (tmp_path / "child").exists() and path.read_bytes() == before
        assert server.post_auth == [] and server.get_auth == []  # not even a probe of its window
        # The person's say: the same server, given again, gets the call (and the key, as they chose).
        given = Agent.fork(path, 2, model="openai/scripted", api_base=server.api_base, workdir=tmp_path / "given")
        given.run()
        assert server.requests["scripted"] >= 1 and server.post_auth[0] == f"Bearer {key}"
        # Called now by this process: a fork of the saved trace goes there without being told again.
        again = Agent.fork(path, 2, model="openai/scripted", workdir=tmp_path / "again")
        assert again.agent.api_base == server.api_base
    finally:
        server.stop()


def test_a_fork_given_its_own_backend_does_not_vouch_for_the_trace_s_server(tmp_path):
    """A fork with a backend of the caller's never calls the trace's server, so it is not
    checked then; a fork of that child in hand, with the world's models, is."""
    parent = _parent("demo", tmp_path / "parent")
    saved = json.loads(json.dumps(parent.trace()))
    base = "http://192.0.2.11:8000/v1"  # TEST-NET-1: no machine answers there
    next(e for e in saved["events"] if e["type"] == "run_start")["settings"]["api_base"] = base
    child, _, _ = _spied_fork(saved, 2, tmp_path)
    child.run()
    assert child.agent.api_base == base
    with pytest.raises(ForkError, match=f"sends its model calls to {base} .api_base., a server this process"):
        Agent.fork(child, 3, workdir=tmp_path / "grandchild")
    assert Agent.fork(parent, 3, workdir=tmp_path / "own").agent.api_base is None  # a live run's: its own


def test_a_fork_of_a_saved_trace_s_child_before_its_step_checks_what_the_trace_names(tmp_path):
    """The child of a saved trace is in hand, but it starts from the trace's settings: a fork of it
    at a step before its own runs live with them (the trace's server, its tool policy), so they
    are checked as the trace's are, not taken as the process's own."""
    parent = _parent("demo", tmp_path / "parent", approve_tools="never")
    saved = json.loads(json.dumps(parent.trace()))
    base = "http://192.0.2.13:8000/v1"  # TEST-NET-1: no machine answers there
    next(e for e in saved["events"] if e["type"] == "run_start")["settings"]["api_base"] = base
    child = Agent.fork(saved, 3, workdir=tmp_path / "child", api_base=None)
    child.run()
    assert child.agent.api_base is None  # from its step: the person's say
    with pytest.raises(ForkError, match=f"sends its model calls to {base} .api_base., a server this process"):
        Agent.fork(child, 2, workdir=tmp_path / "refused", model="openai/scripted")
    assert not (tmp_path / "refused").exists()
    given = Agent.fork(child, 2, workdir=tmp_path / "given", model="openai/scripted", api_base=None)
    assert given.parent["changes"]["approve_tools"] == "auto"  # the trace's 'never' is not the person's either


def test_a_saved_trace_cannot_make_a_fork_run_an_oracle_command_this_process_never_ran(tmp_path):
    """A diary run's trace names its oracle command: a fork of the saved run runs it only when
    this process has run it (the parent's own run ran another one), else one line asks for it
    again and nothing is made; given again, it runs, and is known from then on."""
    parent = _parent("diary", tmp_path / "parent")
    saved = json.loads(json.dumps(parent.trace()))
    marker = tmp_path / "ran.txt"
    command = f"touch {marker}; false"  # what a trace from elsewhere could name
    saved["oracle"] = {"command": command}
    trial = next(e["iteration"] for e in saved["events"] if e["type"] == "trial")
    with pytest.raises(ForkError, match="the run's oracle is the command .*which this process has not run") as refused:
        Agent.fork(saved, trial, workdir=tmp_path / "child")
    assert f"oracle={command!r}" in str(refused.value) and not (tmp_path / "child").exists()
    child = Agent.fork(saved, trial, workdir=tmp_path / "given", oracle=command)
    child.run()
    assert marker.exists() and child.agent.oracle == command
    assert Agent.fork(saved, trial, workdir=tmp_path / "known").agent.oracle == command  # known now


def test_a_saved_trace_cannot_make_a_fork_run_shell_unasked_and_the_person_can(tmp_path, caplog):
    """A trace's tool policy is a file's say: approve_tools='never' in it would run the live
    model's shell calls unasked (its recorded steps, from anywhere, are in that model's prompts).
    A fork of it asks as the default does from its step, says so in one warning, and records
    the change; given by the person, the trace's policy runs as it did.  A run in hand keeps its own."""
    import logging
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from fault_server import FaultServer

    server = FaultServer().start()
    try:
        parent = _parent("demo", tmp_path / "parent", approve_tools="never")
        saved = json.loads(json.dumps(parent.trace()))
        marker = tmp_path / "ran.txt"
        real = {"model": "openai/scripted", "api_base": server.api_base,
                "action": {"tool": "shell", "params": {"command": f"touch {marker}"}}}
        with caplog.at_level(logging.WARNING, logger="memfit_jupyter"):
            child = Agent.fork(saved, 2, workdir=tmp_path / "child", **real)
            child.run()
            second = Agent.fork(saved, 3, workdir=tmp_path / "second", **real)  # said once per trace (blame forks many)
        assert not marker.exists(), "the trace's approve_tools='never' ran the shell call unasked"
        assert second.parent["changes"]["approve_tools"] == "auto"
        said = [r.getMessage() for r in caplog.records if "without asking" in r.getMessage()]
        assert len(said) == 1 and "runs python and shell without asking (approve_tools='never')" in said[0]
        assert "give approve_tools='never' (--approve-tools)" in said[0] and "\n" not in said[0]
        refused = next(e for e in child.trace()["events"] if e["type"] == "observation" and e["iteration"] == 2)
        assert not refused["ok"] and "shell was not run" in refused["error"]
        assert child.parent["changes"]["approve_tools"] == "auto"  # the trace says what the fork changed
        replayed = Agent.replay(json.loads(json.dumps(child.trace())), workdir=tmp_path / "replay")
        replayed.run()
        assert _untimed(replayed.trace()["events"]) == _untimed(child.trace()["events"])
        # The person's say: the trace's policy, given again, runs the call as the parent would have.
        given = Agent.fork(saved, 2, workdir=tmp_path / "given", approve_tools="never", **real)
        given.run()
        assert marker.exists()
        marker.unlink()
        # A policy as strict as the default, or stricter, is the trace's own: nothing changed.
        strict = json.loads(json.dumps(saved))
        next(e for e in strict["events"] if e["type"] == "run_start")["settings"]["approve_tools"] = "writes"
        kept = Agent.fork(strict, 2, workdir=tmp_path / "kept", **real)
        assert "approve_tools" not in kept.parent["changes"]
        # A run in hand is the person's own: its policy is theirs.
        own = Agent.fork(parent, 2, workdir=tmp_path / "own", **real)
        own.run()
        assert marker.exists() and "approve_tools" not in own.parent["changes"]
    finally:
        server.stop()


def test_a_fork_changes_the_tool_policy_from_its_step(tmp_path):
    """approve_tools= and sandbox= are settings a fork changes from its step on, like the others;
    a value that is not one is one line, and nothing is made."""
    parent = _parent("demo", tmp_path / "parent")
    child = Agent.fork(parent, 2, workdir=tmp_path / "child", approve_tools="always")
    child.run()
    assert child.agent.configs[type(child.agent.config.tool_policy)].approve_tools == "always"
    asked = [e for e in child.trace()["events"] if e["type"] == "approval"]
    assert asked and all(e["iteration"] >= 2 for e in asked)  # the prefix ran as recorded
    with pytest.raises(ForkError, match="a setting of the fork is not valid: sandbox must be one of"):
        Agent.fork(parent, 2, workdir=tmp_path / "bad", sandbox="chroot")
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("named", ["progress", "plan", "oracle"])
def test_a_trace_s_settings_cannot_name_a_file_or_command_of_the_person_s(named, tmp_path):
    """A trace records no plan, progress file or oracle among its settings: one that names them
    was edited, and a replay or fork of it would read that file into the prompts and write to it,
    or run that command.  Both refuse in one line; nothing is read, written or run."""
    from memfit_jupyter.trace import TraceError

    KEY = "sk-proj-PLANTEDkey0123456789abcdef"
    parent = _parent("demo", tmp_path / "parent")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "notes.md"
    victim.write_text("SECRET-LINE\n")
    marker = outside / "ran"
    value = {"progress": str(victim), "plan": str(outside / "features.json"), "oracle": f"touch {marker}; false # {KEY}"}[named]
    saved = json.loads(json.dumps(parent.trace()))
    saved["settings"][named] = value
    next(e for e in saved["events"] if e["type"] == "run_start")["settings"][named] = value
    with pytest.raises(TraceError) as replayed:
        Agent.replay(saved, workdir=tmp_path / "replay")
    with pytest.raises(ForkError) as forked:
        Agent.fork(saved, 2, workdir=tmp_path / "child")
    for said in (str(replayed.value), str(forked.value)):
        assert f"the trace's settings name {named}=" in said and "which no run's trace records" in said
        assert "\n" not in said and KEY not in said  # it quotes the trace: redacted
    assert victim.read_text() == "SECRET-LINE\n" and not marker.exists() and not (tmp_path / "child").exists()


def test_an_oracle_a_saved_trace_s_own_fork_record_sets_is_not_run_unless_given(tmp_path):
    """A fork's record in a trace makes its changes again at its step, the oracle among them: one
    the trace put there would be the child's agent's, and a fork of that child in hand would run
    it.  Refused in one line unless this process ran it; the person's oracle= goes instead."""
    parent = _parent("diary", tmp_path / "parent")
    saved = json.loads(json.dumps(parent.trace()))
    marker = tmp_path / "ran"
    command = f"touch {marker}; false"
    first = next(n for n, e in enumerate(saved["events"]) if e.get("iteration") == 1)
    saved["events"].insert(first, {"type": "fork", "iteration": 1, "ts": 0.0, "parent": "elsewhere", "at": 1,
                                   "changes": {"oracle": command}, "workspace": {}, "memory": "none"})
    trial = next(e["iteration"] for e in saved["events"] if e["type"] == "trial")
    with pytest.raises(ForkError, match="the fork at step 1 set the oracle to the command .*which this process has not run"):
        Agent.fork(saved, trial, workdir=tmp_path / "child")
    assert not (tmp_path / "child").exists()
    given = Agent.fork(saved, trial, workdir=tmp_path / "given", oracle="false")
    given.run()
    with pytest.raises(ForkError, match="the fork at step 1 set the oracle to"):
        Agent.fork(given, trial, workdir=tmp_path / "grandchild")  # the record is still the trace's word
    again = Agent.fork(given, trial, workdir=tmp_path / "again", oracle="false")
    again.run()
    assert not marker.exists() and again.agent.oracle == "false"


def test_a_fork_does_not_copy_a_folder_a_saved_trace_names_unless_it_is_the_person_s(tmp_path, monkeypatch):
    """A trace with no snapshot of the files its run found has its fork copy them from the folder
    the trace names, as it is now: a trace from anywhere naming a home folder would have its keys
    copied where the live model reads them.  Read only inside the working directory, or where a
    run of this process worked; else the fork starts empty and says why in one problem."""
    from memfit_jupyter.workspace import DATA_KEY

    parent = _parent("demo", tmp_path / "parent")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (home / "notes.txt").write_text("notes\n")
    saved = json.loads(json.dumps(parent.trace()))
    saved["workdir"] = str(home)
    for e in saved["events"]:  # as a trace whose run never wrote: no snapshot
        if e["type"] == "observation" and isinstance(e.get("data"), dict):
            e["data"].pop(DATA_KEY, None)
    monkeypatch.chdir(tmp_path / "parent")
    child = Agent.fork(saved, 2, workdir=tmp_path / "child")
    assert not (tmp_path / "child" / ".ssh").exists() and not (tmp_path / "child" / "notes.txt").exists()
    problems = child.parent["workspace"]["problems"]
    assert child.parent["workspace"]["exact"] is False and len(problems) == 1
    assert f"the parent's folder {home} is outside the working directory and no run of this process worked there" \
        in problems[0] and "os.chdir" in problems[0]
    with pytest.raises(ForkError, match="cannot be exact: no step wrote"):
        Agent.fork(saved, 2, workdir=tmp_path / "exact", exact=True)
    monkeypatch.chdir(tmp_path)  # the person's folder now: read
    mine = Agent.fork(saved, 2, workdir=tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "notes\n" and mine.parent["workspace"]["problems"] == []


def test_a_run_waiting_for_approval_of_its_first_call_can_be_forked(tmp_path):
    """Its one action has no tool output yet: that is the step it waits at, not a trace without
    recorded outputs (it was refused as an imported trajectory is)."""
    waiting = _parent("demo", tmp_path / "parent", approve=lambda call: None)
    assert waiting.waiting_for_approval is not None and waiting.iteration == 1
    for source in (waiting, json.loads(json.dumps(waiting.trace()))):
        child = Agent.fork(source, 1, workdir=tmp_path / f"child{isinstance(source, dict)}")
        assert child.parent["at"] == 1
    bare = json.loads(json.dumps(waiting.trace()))
    act = next(e for e in bare["events"] if e["type"] == "action")
    bare["events"] += [{**act, "iteration": 2}]
    with pytest.raises(ForkError, match="has no recorded tool outputs"):
        Agent.fork(bare, 1, workdir=tmp_path / "refused")
