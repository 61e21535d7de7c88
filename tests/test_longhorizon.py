"""Long-horizon work: plan and progress files, git checkpoints, resume after a SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.context.longhorizon import git_commit, load_plan, next_feature, write_atomic

TASK = "Build the features listed in features.json."


def _git(path, *args):
    return subprocess.run(["git", *args], cwd=path, capture_output=True, text=True, check=True).stdout


def _git_repo(path):
    _git(path, "init", "-q", ".")
    _git(path, "config", "user.email", "test@example.invalid")
    _git(path, "config", "user.name", "test")


def _agent(path, **kw):
    return Agent(model="memfit/plan-demo", workdir=path, plan="features.json", progress="progress.md", **kw)


def _plan(path):
    return {f["id"]: f["passes"] for f in json.loads((path / "features.json").read_text())}


def _written(run):
    return [e["params"]["path"] for e in run.events if e.type == "action" and e["tool"] == "write_file"]


def test_plan_goes_by_priority_marks_progress_and_checkpoints(tmp_path):
    _git_repo(tmp_path)
    run = _agent(tmp_path).start(TASK)
    result = run.run()
    assert result.status == "done", result.reason
    # priority 1 first: greet, then farewell, then readme; each exactly once
    assert _written(run) == ["greet.py", "farewell.py", "README.txt"]
    assert _plan(tmp_path) == {"readme": True, "greet": True, "farewell": True}
    lines = (tmp_path / "progress.md").read_text().splitlines()
    assert lines == ["done: greet — greet(name) returns 'Hello, <name>!'",
                     "done: farewell — farewell(name) returns 'Goodbye, <name>.'",
                     "done: readme — README.txt explains greet and farewell"]
    log = _git(tmp_path, "log", "--format=%s").splitlines()
    assert log == ["feat: readme", "feat: farewell", "feat: greet"]
    committed = _git(tmp_path, "show", "--name-only", "--format=", "HEAD~2").split()
    assert {"greet.py", "features.json", "progress.md"} <= set(committed)
    assert not any(p.startswith(".memfit") for p in _git(tmp_path, "ls-files").split())
    # each feature starts with a fresh queue; the old one is in recall
    assert any(e.type == "note" and e["text"].startswith("[NEXT FEATURE] greet passes (committed as ") for e in run.events)
    assert any("greet.py" in e.content for e in run.context.tiers.recall)
    assert not any("greet.py" in e.content for e in run.timeline.entries)


def test_works_without_git_and_says_nothing_is_left_on_a_second_run(tmp_path):
    first = _agent(tmp_path).start(TASK).run()
    assert first.status == "done"
    assert not (tmp_path / ".git").exists()
    again = _agent(tmp_path).start(TASK)
    result = again.run()
    assert result.status == "done" and "already pass" in result.answer
    assert not [e for e in again.events if e.type == "model_call"]
    assert len((tmp_path / "progress.md").read_text().splitlines()) == 3


SCRIPT = textwrap.dedent("""
    import sys, time
    from memfit_jupyter import Agent
    workdir, hang = sys.argv[1], sys.argv[2] == "hang"
    agent = Agent(model="memfit/plan-demo", workdir=workdir, plan="features.json", progress="progress.md")
    run = agent.start("Build the features listed in features.json.")
    writes = []
    def on(event):
        if event.type == "observation" and event["tool"] == "write_file":
            writes.append(event)
            print("WROTE", len(writes), flush=True)
            if hang and len(writes) == 2:   # in the middle of the second feature
                print("KILL ME", flush=True)
                time.sleep(120)
    run.subscribe(on)
    print("STATUS", run.run().status, flush=True)
""")


@pytest.mark.slow  # a child process killed and started again
def test_a_killed_run_resumes_from_the_files_and_redoes_nothing_that_passed(tmp_path):
    _git_repo(tmp_path)
    script = tmp_path.parent / f"{tmp_path.name}_plan_script.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path), "hang"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("KILL ME"):
                break
        assert lines[-1] == "KILL ME", (lines, proc.stderr.read() if proc.poll() is not None else "")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    # Killed in the middle of 'farewell': greet passed, farewell.py written but not marked.
    assert _plan(tmp_path) == {"readme": False, "greet": True, "farewell": False}
    assert (tmp_path / "farewell.py").exists()
    assert (tmp_path / "progress.md").read_text().splitlines() == [
        "done: greet — greet(name) returns 'Hello, <name>!'"]
    assert not list(tmp_path.glob(".*.memfit-tmp"))

    # A new process, the same call: it resumes from features.json, progress.md and git alone.
    resumed = _agent(tmp_path).start(TASK)
    result = resumed.run()
    assert result.status == "done", result.reason
    assert _written(resumed) == ["farewell.py", "README.txt"]  # greet is not redone
    resume_note = next(e for e in resumed.events if e.type == "note" and e["text"].startswith("[RESUME]"))
    assert "1 of 3 feature(s) pass (greet)" in resume_note["text"]
    assert "done: greet" in resume_note["text"] and "feat: greet" in resume_note["text"]
    assert _plan(tmp_path) == {"readme": True, "greet": True, "farewell": True}
    progress = (tmp_path / "progress.md").read_text().splitlines()
    assert [line.split(" — ")[0] for line in progress] == ["done: greet", "done: farewell", "done: readme"]
    assert _git(tmp_path, "log", "--format=%s").splitlines() == ["feat: readme", "feat: farewell", "feat: greet"]


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("[{\"id\": \"a\",}", "is not valid JSON"),
    ("{\"id\": \"a\"}", "must hold a JSON list"),
    ("[{\"desc\": \"x\"}]", "needs an 'id'"),
    ("[{\"id\": \"a\"}, {\"id\": \"a\"}]", "appears twice"),
    ("[{\"id\": \"a\", \"priority\": \"high\"}]", "not a number"),
])
def test_a_bad_plan_file_fails_the_run_with_one_clear_line(tmp_path, content, message):
    (tmp_path / "features.json").write_text(content) if content is not None else None
    agent = Agent(model="memfit/demo", workdir=tmp_path, plan="features.json", progress="progress.md")
    result = agent.start("do the plan").run()
    assert result.status == "failed" and message in result.reason
    assert "\n" not in result.reason


def test_priority_then_file_order_and_atomic_writes(tmp_path):
    features = [{"id": "b", "priority": 2, "passes": False}, {"id": "a", "priority": 1, "passes": True},
                {"id": "c", "priority": 2, "passes": False}]
    assert next_feature(features)["id"] == "b"
    features[0]["passes"] = True
    assert next_feature(features)["id"] == "c"
    features[2]["passes"] = True
    assert next_feature(features) is None
    path = tmp_path / "features.json"
    write_atomic(path, json.dumps(features))
    assert load_plan(path) == features
    assert [p.name for p in tmp_path.iterdir()] == ["features.json"]


def test_progress_alone_records_the_finished_task(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, progress="progress.md").start(
        "What is the total of the numbers in data.txt?")
    assert run.run().status == "done"
    assert (tmp_path / "progress.md").read_text().startswith("done: What is the total")


def test_the_magic_takes_plan_progress_and_context_window(tmp_path, monkeypatch):
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell()
    shell.run_cell("%load_ext memfit_jupyter")
    shell.run_cell("%%memfit_task --model memfit/plan-demo --plan features.json --progress done.md "
                   "--context-window 4000 --no-memory --quiet --name run\n" + TASK)
    run = shell.user_ns["run"]
    assert run.status == "done"
    assert {e["window"] for e in run.events if e.type == "context"} == {4000}
    assert len((tmp_path / "done.md").read_text().splitlines()) == 3
    bad = shell.run_cell("%%memfit_task --model memfit/demo --context-window 0\nx")
    assert isinstance(bad.error_in_exec, UsageError) and "--context-window" in str(bad.error_in_exec)


def test_a_refused_checkpoint_says_why_in_one_line(tmp_path):
    _git_repo(tmp_path)
    hook = tmp_path / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'checks are red' >&2\nexit 1\n")
    hook.chmod(0o755)
    (tmp_path / "a.txt").write_text("a\n")
    with pytest.raises(RuntimeError) as info:
        git_commit(tmp_path, "feat: a")
    assert str(info.value) == "checks are red"
