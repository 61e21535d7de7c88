"""The failure diary: a real pytest oracle, lessons in memory, escalation, learning across sessions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.context.diary import failures, run_oracle, task_kind
from memfit_jupyter.memory import MemoryStore

TASK = "Write slugify(text) in slug.py so that tests_slug.py passes."
ORACLE = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -q -p no:cacheprovider tests_slug.py"
LESSON_MARK = "collapse runs of whitespace"


def _trials(run):
    return [e for e in run.events if e.type == "trial"]


@pytest.fixture(scope="module")
def first_session(tmp_path_factory):
    """One run of the diary scenario against the real pytest oracle, with its own memory store."""
    root = tmp_path_factory.mktemp("diary")
    workdir, memory = root / "work", root / "memory"
    workdir.mkdir()
    run = Agent(model="memfit/diary", workdir=workdir, memory=str(memory), oracle=ORACLE,
                max_trials=3).start(TASK)
    result = run.run()
    run.memory.close()
    return SimpleNamespace(run=run, result=result, workdir=workdir, memory=memory)


def test_first_trial_fails_the_real_oracle_and_the_lesson_fixes_the_second(first_session):
    run, result = first_session.run, first_session.result
    assert result.status == "done", result.reason
    first, second = _trials(run)
    assert (first["trial"], first["max_trials"], first["passed"]) == (1, 3, False)
    # The verdict is pytest's own: its exit code and its output, not the model's opinion.
    assert "exit code 1" in first["oracle_output"] and "1 failed" in first["oracle_output"]
    assert "test_punctuation_and_runs_of_spaces" in first["oracle_output"]
    assert LESSON_MARK in first["lesson"]  # the scripted reflection answered the oracle output it was shown
    assert second["passed"] is True and second["lesson"] is None and "2 passed" in second["oracle_output"]
    lesson_calls = [e for e in run.events if e.type == "model_call" and e["purpose"] == "lesson"]
    assert len(lesson_calls) == 1
    # The failed finish is a failed action; trial 2 started with a fresh queue and the lesson in view.
    finishes = [r for r in run.records if r.tool == "finish"]
    assert [r.ok for r in finishes] == [False, True]
    assert any(e.content.startswith("[TRIAL 2/3]") and LESSON_MARK in e.content for e in run.timeline.entries)
    assert first["lesson"] in run.last_prompt[0]["content"]
    assert any("slug.py" in e.content for e in run.context.tiers.recall)
    # The file on disk really passes now.
    check = subprocess.run(ORACLE, shell=True, cwd=first_session.workdir, capture_output=True)
    assert check.returncode == 0


def test_the_lesson_is_stored_under_the_failures_namespace(first_session):
    with MemoryStore(first_session.memory) as store:
        diary = store.failures("pytest")
        assert len(diary) == 1
        assert set(diary[0].tags) >= {"failures", "failures:pytest"}
        assert diary[0].content.startswith("Lesson: slugify must drop punctuation")
        assert TASK in diary[0].potential_questions
        frame = failures(store)
        assert frame.columns == ["id", "kind", "lesson", "task", "oracle", "created_at"]
        assert frame.height == 1 and frame["kind"][0] == "pytest" and frame["task"][0] == TASK
        assert LESSON_MARK in frame["lesson"][0] and "1 failed" in frame["oracle"][0]
        assert failures(store, "make").height == 0


SESSION = textwrap.dedent("""
    import json, sys
    from memfit_jupyter import Agent
    from memfit_jupyter.context.diary import failures
    workdir, memory, oracle, task = sys.argv[1:5]
    run = Agent(model="memfit/diary", workdir=workdir, memory=memory, oracle=oracle, max_trials=3).start(task)
    result = run.run()
    out = {"status": result.status,
           "trials": [e.to_dict() for e in run.events if e.type == "trial"],
           "retrieved": [e.to_dict() for e in run.events if e.type == "memory" and e["op"] == "failures"],
           "diary": failures(run.memory).to_dicts()}
    print("RESULT " + json.dumps(out))
""")


@pytest.mark.slow
def test_a_new_process_finds_the_lesson_and_passes_on_the_first_trial(first_session, tmp_path):
    script = tmp_path / "session2.py"
    script.write_text(SESSION)
    workdir = tmp_path / "fresh"
    workdir.mkdir()
    proc = subprocess.run([sys.executable, str(script), str(workdir), str(first_session.memory), ORACLE, TASK],
                          capture_output=True, text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, proc.stderr[-2000:]
    out = json.loads(line.removeprefix("RESULT "))
    assert out["status"] == "done"
    assert [(t["trial"], t["passed"]) for t in out["trials"]] == [(1, True)]
    (retrieved,) = out["retrieved"]
    assert retrieved["query"] == TASK and len(retrieved["results"]) == 1
    assert LESSON_MARK in retrieved["results"][0]["content"]
    assert len(out["diary"]) == 1  # nothing new to learn: the diary did not grow


def test_escalates_after_the_last_trial_with_a_python_check(tmp_path):
    calls = []

    def never(run):
        calls.append(run.iteration)
        return False, "the expected output file is missing; token=sk-abcdefghijklmnopqrstuvwxyz"

    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False, oracle=never, max_trials=2).start(
        "What is the total of the numbers in data.txt?")
    result = run.run()
    assert result.status == "escalated"
    assert "after 2 trial(s)" in result.reason and "a person should decide" in result.reason
    trials = _trials(run)
    assert [(t["trial"], t["passed"]) for t in trials] == [(1, False), (2, False)]
    assert len(calls) == 2  # the oracle judged every finish; nothing else did
    assert all("sk-abcdefghij" not in t["oracle_output"] for t in trials)
    assert all(t["lesson"] for t in trials)
    trace = json.loads(json.dumps(run.trace()))
    assert trace["status"] == "escalated"
    # A replay gets the verdicts from the recording: the check is not called again.
    replayed = Agent.replay(trace, workdir=tmp_path / "elsewhere")
    assert replayed.run().status == "escalated" and len(calls) == 2
    assert json.dumps(replayed.trace()["events"]) == json.dumps(trace["events"])


def test_the_oracle_can_answer_in_several_shapes(tmp_path):
    run = SimpleNamespace(agent=SimpleNamespace(workdir=tmp_path))
    assert run_oracle(lambda: True, run) == (True, "the check passed")
    assert run_oracle(lambda r: {"passed": False, "output": "no"}, run) == (False, "no")
    assert run_oracle(lambda r: SimpleNamespace(passed=True, output="fine"), run) == (True, "fine")
    passed, text = run_oracle(lambda r: 1 / 0, run)
    assert not passed and "ZeroDivisionError" in text
    passed, text = run_oracle("echo out; echo err >&2; exit 3", run)
    assert not passed and "exit code 3" in text and "out" in text and "err" in text
    assert run_oracle("true", run)[0]


@pytest.mark.parametrize("oracle, kind", [
    ("pytest -q tests_x.py", "pytest"),
    (f"{sys.executable} -m pytest -q t.py", "pytest"),
    ("PYTHONPATH=. make check", "make"),
    (lambda run: True, "python-check"),
])
def test_task_kind_comes_from_the_oracle(oracle, kind):
    assert task_kind(SimpleNamespace(oracle=oracle)) == kind
    assert task_kind(SimpleNamespace(oracle=oracle, task_kind="Web Scraping")) == "web-scraping"


def test_max_trials_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="max_trials"):
        Agent(model="memfit/demo", workdir=tmp_path, oracle="true", max_trials=0).start("x")


def test_a_diary_without_an_oracle_is_refused_at_once(tmp_path):
    from memfit_jupyter.context.diary import FailureDiary

    with pytest.raises(ValueError, match="needs an oracle"):
        FailureDiary(Agent(model="memfit/demo", workdir=tmp_path, memory=False))
    assert FailureDiary(Agent(model="memfit/demo", workdir=tmp_path, memory=False), oracle="true").oracle == "true"
    for empty in ("", "  "):  # ``sh -c ""`` exits 0: every trial would pass
        with pytest.raises(ValueError, match="oracle is an empty command"):
            Agent(model="memfit/demo", workdir=tmp_path, memory=False, oracle=empty).start("x")


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs.  A killed process whose parent is gone is a zombie
    until init reaps it, which some containers' init never does: a zombie runs nothing."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: what kill said
        return True
    return state not in ("Z", "X")


def gone(pid: int) -> bool:
    """Whether ``pid`` stopped running, given the moments a killed process takes to end."""
    for _ in range(200):
        if not running(pid):
            return True
        time.sleep(0.05)
    return False


def test_an_oracle_that_runs_too_long_is_killed_with_what_it_started(tmp_path):
    """The oracle's shell and the children it started are one process group, killed whole: a
    ``sleep`` the command left in the background does not run on after the timeout."""
    run = SimpleNamespace(agent=SimpleNamespace(workdir=tmp_path))
    pid_file = tmp_path / "child.pid"
    command = f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}; sleep 60 >/dev/null 2>&1"
    passed, text = run_oracle(command, run, timeout_s=2)
    assert not passed and "the oracle timed out after 2 s" in text
    child = int(pid_file.read_text())
    assert gone(child), f"the oracle's child {child} still runs"


def test_an_oracle_command_the_shell_cannot_find_escalates_at_the_first_finish(tmp_path):
    """Exit code 127 "not found" judges nothing: no lesson is drawn from it (no model call) and no
    more trials are spent; the run escalates with the shell's line, and a replay agrees."""
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False, oracle="no-such-oracle-command --check",
                max_trials=3).start("What is the total of the numbers in data.txt?")
    result = run.run()
    assert result.status == "escalated"
    assert "the oracle command could not be run" in result.reason and "no-such-oracle-command" in result.reason
    trials = _trials(run)
    assert [(t["trial"], t["passed"], t["lesson"]) for t in trials] == [(1, False, None)]
    assert [e.purpose for e in run.events if e.type == "model_call"] == ["action"] * 3  # no lesson call
    trace = json.loads(json.dumps(run.trace()))
    replayed = Agent.replay(trace, workdir=tmp_path / "elsewhere")
    assert replayed.run().status == "escalated"
    assert json.dumps(replayed.trace()["events"]) == json.dumps(trace["events"])
