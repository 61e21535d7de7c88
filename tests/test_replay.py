"""Replay as a backend: every shipped scenario replays byte for byte, with and without memory hits;
the CLI replays without writing, and says in one line what is wrong with its input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memfit_jupyter import Agent, scenarios
from memfit_jupyter.errors import LimitsExceeded
from memfit_jupyter.reliability.degradation import RECOMMENDATIONS

TASK = "do the task"


def _agent(name, workdir, memory):
    extra = {"oracle": "false", "max_trials": 2} if name == "diary" else {}
    return Agent(model=f"memfit/{name}", workdir=workdir, memory=memory, **extra)


def _replayed_events(recorded, workdir):
    replayed = Agent.replay(recorded, workdir=workdir)
    replayed.run()
    return [json.dumps(e.to_dict()) for e in replayed.events], replayed


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_every_scenario_replays_byte_for_byte_without_memory(name, tmp_path):
    run = _agent(name, tmp_path, False).start(TASK)
    run.run()
    recorded = json.loads(json.dumps(run.trace()))
    events, replayed = _replayed_events(recorded, tmp_path / "elsewhere")
    assert events == [json.dumps(e) for e in recorded["events"]]
    assert replayed.result.status == run.result.status
    assert not (tmp_path / "elsewhere").exists() or not any((tmp_path / "elsewhere").iterdir())


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_every_scenario_replays_byte_for_byte_with_memory_hits(name, tmp_path):
    _agent(name, tmp_path, None).start(TASK).run()  # the first run leaves memories ...
    run = _agent(name, tmp_path, None).start(TASK)  # ... that the second one finds
    run.run()
    recorded = json.loads(json.dumps(run.trace()))
    events, _ = _replayed_events(recorded, tmp_path / "elsewhere")
    assert events == [json.dumps(e) for e in recorded["events"]]
    assert not (tmp_path / "elsewhere" / ".memfit").exists()  # a replay opens no store


def test_a_replay_reproduces_memory_search_hits_and_the_tags_call(tmp_path):
    # the model's triage, so that the task search has the model pick its tags
    Agent(model="memfit/memory-lesson", workdir=tmp_path, memory_triage="end").start(TASK).run()
    run = Agent(model="memfit/memory-lesson", workdir=tmp_path, memory_triage="end").start(TASK)
    run.run()
    hits = [e for e in run.events if e.type == "memory" and e["op"] == "task_search"]
    assert hits and hits[0]["results"], "the second run should find the first run's memories"
    assert any(e.type == "model_call" and e["purpose"] == "tags" for e in run.events)
    events, replayed = _replayed_events(json.loads(json.dumps(run.trace())), tmp_path / "elsewhere")
    again = [e for e in replayed.events if e.type == "memory" and e["op"] == "task_search"]
    assert again[0].to_dict() == hits[0].to_dict()


def test_limits_exceeded_names_its_limit_and_the_plan_follows_from_it(tmp_path):
    run = _agent("budget-burn", tmp_path, False).start(TASK)
    result = run.run()
    assert result.status == "degraded"
    (violation,) = [e for e in run.events if e.type == "guarantee" and e.get("violated")]
    assert violation["limit"] == "max_cost_usd"
    assert result.plan.recommendations[0] == RECOMMENDATIONS["max_cost_usd"]
    err = LimitsExceeded("the words say time but the limit is cost", limit="max_cost_usd")
    plan = run.degradation_plan(err.reason, limit=err.limit)
    assert plan.recommendations[0] == RECOMMENDATIONS["max_cost_usd"]
    assert not any("duration" in r for r in plan.recommendations)


def _cli(*args, cwd):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "memfit_jupyter", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.slow  # python -m memfit_jupyter in a new process, more than once
def test_cli_replay_leaves_its_input_unchanged_and_writes_only_when_told(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    made = _cli("run", "add up data.txt", "--no-memory", "--trace", "run.json", cwd=work)
    assert made.returncode == 0, made.stderr
    before = (work / "run.json").read_bytes()
    listing = sorted(p.name for p in work.iterdir())
    replayed = _cli("replay", "run.json", cwd=work)
    assert replayed.returncode == 0, replayed.stderr
    assert (work / "run.json").read_bytes() == before
    assert sorted(p.name for p in work.iterdir()) == listing
    told = _cli("replay", "run.json", "--trace", "again.json", cwd=work)
    assert told.returncode == 0, told.stderr
    assert json.loads((work / "again.json").read_text())["events"] == json.loads(before)["events"]


@pytest.mark.slow  # a new process each
@pytest.mark.parametrize("content,expected", [
    (None, "error: no such file: missing.json"),
    ("hello", "is not a memfit trace: not JSON (Expecting value at line 1, column 1)"),
    ("[1, 2]", "is not a memfit trace: a JSON object with 'task' and 'events' is expected"),
])
def test_cli_replay_of_bad_input_says_one_line(tmp_path, content, expected):
    if content is not None:
        (tmp_path / "missing.json").write_text(content)
    out = _cli("replay", "missing.json", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and expected in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.slow  # python -m memfit_jupyter in a new process, more than once
def test_cli_run_with_a_trace_path_that_cannot_be_written_keeps_the_trace(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    out = _cli("run", "add up data.txt", "--no-memory", "--trace", "../missing-dir/run.json", cwd=work)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: cannot write the trace to ../missing-dir/run.json")
    saved = line.rsplit(" written to ", 1)[1]
    trace = json.loads(open(saved).read())
    assert trace["status"] == "done" and trace["events"]
    os.unlink(saved)


@pytest.mark.slow  # python -m memfit_jupyter in a new process, twice
def test_cli_replay_written_over_its_input_on_a_full_disk_leaves_the_input_whole(tmp_path):
    """``replay run.json --trace run.json`` where the disk takes only half the file (a file size
    limit stands for a full disk): the recorded trace was cut in half before; now it is as it was,
    and the error is one line."""
    import resource
    import signal

    work = tmp_path / "work"
    work.mkdir()
    made = _cli("run", "add up data.txt", "--no-memory", "--trace", "run.json", cwd=work)
    assert made.returncode == 0, made.stderr
    before = (work / "run.json").read_bytes()
    listing = sorted(p.name for p in work.iterdir())
    half = len(before) // 2

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) rather than killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (half, half))

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "memfit_jupyter", "replay", "run.json", "--trace", "run.json"],
                         cwd=work, capture_output=True, text=True, env=env, timeout=300, preexec_fn=small_disk)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: cannot write the trace to run.json (File too large), nor to "), line
    assert (work / "run.json").read_bytes() == before
    assert sorted(p.name for p in work.iterdir()) == listing  # nothing half-written is left
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("memfit-trace-")]


def test_a_model_with_no_known_price_is_named_in_the_totals(tmp_path):
    """The local model's recording: its calls cost $0 because no price is known, and the trace says so
    rather than letting the view show a free run; a priced scripted run's totals do not name any."""
    recorded = json.loads((Path(__file__).resolve().parent.parent / "notebooks" / "recorded_run.json").read_text())
    replayed = Agent.replay(recorded, workdir=tmp_path)
    replayed.run()
    totals = replayed.trace()["totals"]
    assert totals["unpriced"] == [recorded["model"]] and totals["cost_usd"] == 0
    run = _agent("demo", tmp_path / "priced", False).start(TASK)
    run.run()
    assert "unpriced" not in run.trace()["totals"] and run.trace()["totals"]["cost_usd"] > 0


def test_a_run_whose_action_call_was_abandoned_at_its_time_limit_replays_to_the_same_end(tmp_path):
    """The recorded reproduction of a real local-model run (3 iterations, 90 s): its action call
    was abandoned at the deadline and the run ended degraded.  A replay once asked for replies the
    recording does not have and ended failed at max_iterations; it must stop at the recorded limit,
    and the CLI's replay must say it did not part from the recording."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parent / "fixtures" / "replay_after_time_limit.json"
    recorded = json.loads(path.read_text())
    assert recorded["events"][-1]["status"] == "degraded"
    events, replayed = _replayed_events(recorded, tmp_path / "replay_dir")
    assert [json.loads(e) for e in events] == recorded["events"]  # recorded by an earlier build: key order aside
    assert replayed.status == "degraded"
    assert replayed.result.reason == "time limit of 90 s reached before a model call"
    cli = subprocess.run([sys.executable, "-m", "memfit_jupyter", "replay", str(path)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0 and "status: degraded" in cli.stdout, cli.stdout + cli.stderr


def test_a_real_run_cut_short_by_its_time_limit_replays_byte_for_byte(tmp_path):
    """A local-model run whose action call was abandoned at its deadline mid-stream and whose time
    limit then ended it: the replay streams the recorded partial reply again and stops at the
    recorded time limit, though replaying takes a fraction of a second."""
    recorded = json.loads((Path(__file__).resolve().parent / "fixtures" / "local_deadline_run.json").read_text())
    assert any(e.get("partial_reply") for e in recorded["events"] if e["type"] == "model_call")
    assert any(e["type"] == "guarantee" and e.get("limit") == "max_duration_seconds" for e in recorded["events"])
    events, replayed = _replayed_events(recorded, tmp_path)
    assert events == [json.dumps(e) for e in recorded["events"]]
    assert replayed.status == recorded["status"] == "degraded"


def test_a_real_run_whose_triage_kept_nothing_replays_byte_for_byte(tmp_path):
    """A local-model run whose second triage reply held no usable entity ("{}"), so nothing was
    added then: the third triage's ids still replay as recorded, not the empty batch's."""
    recorded = json.loads((Path(__file__).resolve().parent / "fixtures" / "local_empty_triage_run.json").read_text())
    triages = [e for e in recorded["events"] if e["type"] == "memory" and e["op"] == "triage"]
    assert [bool(e["added"]) for e in triages] == [True, False, True]
    events, replayed = _replayed_events(recorded, tmp_path)
    assert events == [json.dumps(e) for e in recorded["events"]]
    assert replayed.status == recorded["status"]


def test_a_trace_claiming_more_duplicates_than_its_triage_had_items_replays_without_making_them(tmp_path):
    """A trace is a file from anywhere: a triage that says 10**12 of its items were duplicates
    made a list that long before the replay began (MemoryError, or the machine's memory).  Now
    the replay answers as a store would, one id or None an item, and says where it differs."""
    run = _agent("demo", tmp_path / "run", None).start(TASK)
    run.run()
    recorded = json.loads(json.dumps(run.trace()))
    (triage,) = [i for i, e in enumerate(recorded["events"]) if e["type"] == "memory" and e["op"] == "triage"]
    assert recorded["events"][triage]["duplicates"] == 0 and len(recorded["events"][triage]["added"]) == 1
    recorded["events"][triage]["duplicates"] = 10**12
    events, replayed = _replayed_events(recorded, tmp_path / "replay")
    assert replayed.status == recorded["status"]
    differ = [i for i, (a, b) in enumerate(zip(events, recorded["events"], strict=True)) if a != json.dumps(b)]
    assert differ == [triage] and json.loads(events[triage])["duplicates"] == 0


def test_a_calls_timeout_is_the_recorded_one_however_long_the_replay_took_to_reach_it():
    """A call's timeout is the time the run had left then: a replay that reached the call later
    than the run did (a cold start) still shows the recorded figure."""
    from memfit_jupyter.event_base import from_dict
    from memfit_jupyter.replay import RecordedClock

    recorded = json.loads((Path(__file__).resolve().parent / "fixtures" / "local_empty_triage_run.json").read_text())
    index, call = next((i, e) for i, e in enumerate(recorded["events"]) if e["type"] == "model_call")
    late = from_dict({**call, "timeout_s": call["timeout_s"] - 0.5})  # what a slower start works out
    RecordedClock(recorded["events"]).stamp(late, index, 0.0)
    assert late.to_dict() == call


def test_a_real_run_whose_last_search_was_refused_by_the_time_limit_replays_byte_for_byte(tmp_path):
    """A local-model run that finished with seconds to spare: the finish's memory search asked for
    its tag selection after the time limit, was refused and never ended (no memory event).  The
    replay's search is refused at the same point, and ends the same way."""
    recorded = json.loads((Path(__file__).resolve().parent / "fixtures" / "local_refused_search_run.json").read_text())
    kinds = [e["type"] for e in recorded["events"]]
    assert kinds[-3:] == ["guarantee", "error", "run_end"] and recorded["status"] == "done"
    events, replayed = _replayed_events(recorded, tmp_path)
    assert events == [json.dumps(e) for e in recorded["events"]]
    assert replayed.status == "done"


def test_a_run_refused_by_its_time_limit_after_a_captured_warning_replays_byte_for_byte(tmp_path):
    """A local-model run in a notebook cell: its action call was abandoned at the deadline, and the
    next call was refused by the time limit, whose warning the cell captured as a ``log`` event
    just before the ``guarantee`` one.  The replay (no cell, nothing captured) still stops at the
    limit and gives the recorded log line in its place."""
    recorded = json.loads((Path(__file__).resolve().parent / "fixtures" / "local_time_limit_log_run.json").read_text())
    kinds = [e["type"] for e in recorded["events"]]
    assert kinds.index("log") + 1 == kinds.index("guarantee")
    replayed = Agent.replay(recorded, workdir=tmp_path)
    replayed.run()
    assert [json.dumps(e.to_dict(), sort_keys=True) for e in replayed.events] == [
        json.dumps(e, sort_keys=True) for e in recorded["events"]]
    assert replayed.status == recorded["status"] == "degraded"
    assert replayed.result.reason == recorded["reason"]


def test_cli_replay_exits_non_zero_and_says_where_when_the_replay_diverges(tmp_path, monkeypatch, capsys):
    """A faithful replay exits 0 whatever the recorded status (here a degraded run); a recording
    whose events the replay does not give again exits 1 with one line naming the first event."""
    from memfit_jupyter.__main__ import main

    fixture = Path(__file__).resolve().parent / "fixtures" / "local_time_limit_log_run.json"
    monkeypatch.chdir(tmp_path)
    assert main(["replay", str(fixture)]) == 0
    faithful = capsys.readouterr()
    assert "status: degraded" in faithful.out and "diverged" not in faithful.err
    tampered = json.loads(fixture.read_text())
    action = next(i for i, e in enumerate(tampered["events"]) if e["type"] == "action")
    tampered["events"][action]["thought"] = "a thought the model never had"
    (tmp_path / "tampered.json").write_text(json.dumps(tampered))
    assert main(["replay", "tampered.json"]) == 1
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "diverged" in ln]
    assert line.startswith(f"error: the replay diverged from the recording: event {action} (action) differs in thought")


@pytest.mark.parametrize("fixture", sorted(p.name for p in (Path(__file__).resolve().parent / "fixtures").glob("local_*.json")))
def test_every_recorded_local_model_run_replays_byte_for_byte(fixture, tmp_path):
    """The local model's recorded runs, those the replay soak (tests/benchmarks/replay_soak.py)
    saved when their replay diverged included: each replays to the recorded events and status."""
    recorded = json.loads((Path(__file__).resolve().parent / "fixtures" / fixture).read_text())
    replayed = Agent.replay(recorded, workdir=tmp_path)
    replayed.run()
    assert [json.dumps(e.to_dict(), sort_keys=True) for e in replayed.events] == [
        json.dumps(e, sort_keys=True) for e in recorded["events"]]
    assert replayed.status == recorded["status"]


def _replayed(trace: dict) -> list[str]:
    again = Agent.replay(json.loads(json.dumps(trace)))
    again.run()
    return [json.dumps(e.to_dict()) for e in again.events]


def test_a_run_the_person_stopped_replays_to_the_same_stop(tmp_path):
    """Cancelled between two steps, or interrupted during a model call (Jupyter's stop button): the
    replay ends there, cancelled, with the recorded events (it went on past the recording)."""
    from memfit_jupyter.llm.backend import LiteLLMBackend
    from memfit_jupyter.run import Run

    (tmp_path / "p").mkdir()
    stopped = Agent(model="memfit/healthy-long", workdir=tmp_path / "p", memory=False).start("keep going")
    for _ in range(3):
        stopped.step()
    stopped.cancel()
    assert _replayed(stopped.trace()) == [json.dumps(e.to_dict()) for e in stopped.events]

    class StopButton(LiteLLMBackend):  # the person interrupts the third model call
        calls = 0

        def complete(self, *args, **kw):
            self.calls += 1
            if self.calls == 3:
                raise KeyboardInterrupt
            return super().complete(*args, **kw)

    (tmp_path / "q").mkdir()
    agent = Agent(model="memfit/healthy-long", workdir=tmp_path / "q", memory=False)
    interrupted = Run(agent, "keep going", backend=StopButton())
    interrupted.run()
    assert interrupted.status == "cancelled" and interrupted.result.reason == "interrupted by the person"
    assert _replayed(interrupted.trace()) == [json.dumps(e.to_dict()) for e in interrupted.events]


@pytest.mark.parametrize("name, go_on", [
    ("budget-burn", lambda run: run.override(confirm=True, max_cost_usd=3.0)),
    ("diary", lambda run: run.context.more_trials(run, 2)),
])
def test_a_run_the_person_had_go_on_replays_and_forks_as_it_went_on(name, go_on, tmp_path):
    """Degraded then overridden, or escalated then given more trials: the replay makes the same
    choice where the recording did (it stopped at the first end), and so does a fork's prefix."""
    (tmp_path / "p").mkdir()
    extra = {"oracle": "false", "max_trials": 2} if name == "diary" else {}
    run = Agent(model=f"memfit/{name}", workdir=tmp_path / "p", memory=False, **extra).start("do the task")
    run.run()
    first_end = run.iteration
    go_on(run)
    run.run()
    assert run.iteration > first_end
    events = [json.dumps(e.to_dict()) for e in run.events]
    assert _replayed(run.trace()) == events
    child = run.fork(first_end + 1, workdir=tmp_path / "child")
    child.run()
    assert (child.status, child.iteration) == (run.status, run.iteration)
    assert _replayed(child.trace()) == [json.dumps(e.to_dict()) for e in child.events]
