"""shell and python in the bubblewrap sandbox, as real processes: a file planted outside the working
folder cannot be read nor written, home is hidden, there is no network and no secret of the
environment; the same commands unsandboxed can (so each check can fail).  Where the machine
cannot make a sandbox (tests/sandbox_setup.sh installs bubblewrap) these are skipped, saying why;
asking for one there is a one-line error."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from fault_server import FaultServer

from memfit_jupyter import Agent
from memfit_jupyter.sandbox import (
    SandboxUnavailableError,
    _warn_unconfined,
    bwrap_problem,
    sandbox_for,
)
from memfit_jupyter.tools import BUILTIN_TOOLS, ToolContext


@pytest.fixture
def sandbox():
    problem = bwrap_problem()
    if problem is not None:
        pytest.skip(problem)
    return sandbox_for("bwrap")


@pytest.fixture
def planted(tmp_path):
    """A secret beside the working folder and one in the home folder, and the working folder."""
    work = tmp_path / "work"
    work.mkdir()
    beside = tmp_path / "planted_secret.txt"
    beside.write_text("BESIDE-SECRET\n")
    home = Path.home() / f".memfit-sandbox-test-{uuid.uuid4().hex[:8]}"
    home.write_text("HOME-SECRET\n")
    yield work, beside, home
    home.unlink(missing_ok=True)


def shell(ctx, command):
    return BUILTIN_TOOLS["shell"](ctx, {"command": command})


def python(ctx, code):
    return BUILTIN_TOOLS["python"](ctx, {"code": code})


def test_a_sandboxed_shell_cannot_read_outside_its_folder(sandbox, planted):
    work, beside, home = planted
    command = f"cat {beside} {home}"
    unconfined = shell(ToolContext(workdir=work), command)
    assert "BESIDE-SECRET" in unconfined.output and "HOME-SECRET" in unconfined.output
    confined = shell(ToolContext(workdir=work, sandbox=sandbox), command)
    assert not confined.ok and "SECRET" not in confined.output
    assert "No such file or directory" in confined.output and confined.data["sandbox"] == "bwrap"
    if Path("/etc/shadow").exists() and "root:" in shell(ToolContext(workdir=work), "cat /etc/shadow").output:
        assert "root:" not in shell(ToolContext(workdir=work, sandbox=sandbox), "cat /etc/shadow").output
    listing = shell(ToolContext(workdir=work, sandbox=sandbox), f"ls -a {Path.home()} /work /opt 2>&1; true")
    assert home.name not in listing.output and "planted_secret" not in shell(
        ToolContext(workdir=work, sandbox=sandbox), f"ls {beside.parent} 2>&1; true").output


def test_a_sandboxed_shell_writes_only_in_its_folder(sandbox, planted):
    work, beside, home = planted
    escaped = beside.parent / "escaped.txt"
    ctx = ToolContext(workdir=work, sandbox=sandbox)
    result = shell(ctx, f"echo inside > inside.txt; echo out > {escaped}; echo out >> {home}; "
                        "echo sys > /usr/memfit-escaped 2>&1; echo done")
    assert (work / "inside.txt").read_text() == "inside\n"
    assert not escaped.exists() and home.read_text() == "HOME-SECRET\n"
    assert not Path("/usr/memfit-escaped").exists() and "Read-only file system" in result.output
    assert shell(ToolContext(workdir=work), f"echo out > {escaped}").ok and escaped.exists()  # unconfined can


def test_a_sandboxed_python_is_confined_too_and_shows_its_value(sandbox, planted):
    work, beside, _ = planted
    ctx = ToolContext(workdir=work, sandbox=sandbox)
    read = python(ctx, f"open({str(beside)!r}).read()")
    assert not read.ok and read.error.startswith("FileNotFoundError") and "SECRET" not in read.output
    assert python(ToolContext(workdir=work), f"open({str(beside)!r}).read()").output == "'BESIDE-SECRET\\n'"
    (work / "data.txt").write_text("12\n7\n23\n")
    done = python(ctx, "import os\nprint('lines:')\nos.system('wc -l < data.txt')\n"
                       "sum(float(x) for x in open('data.txt'))")
    assert done.ok and done.output == "lines:\n3\n42.0" and done.data == {"sandbox": "bwrap"}
    failed = python(ctx, "x = 1\n1 / 0")
    assert not failed.ok and failed.error == "ZeroDivisionError: division by zero"
    assert python(ctx, "x").error == "NameError: name 'x' is not defined"  # a fresh process per call


def test_a_sandbox_has_no_network_and_no_secret_of_the_environment(sandbox, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFIT_TEST_API_KEY", "sk-test-SANDBOX-SECRET")
    server = FaultServer().start()
    try:
        fetch = (f"import urllib.request\nurllib.request.urlopen({server.api_base!r} + '/chat/completions', "
                 "data=b'{}', timeout=5).status")
        assert python(ToolContext(workdir=tmp_path), fetch).output == "200"  # reachable from outside
        ctx = ToolContext(workdir=tmp_path, sandbox=sandbox)
        refused = python(ctx, fetch)
        assert not refused.ok and "URLError" in refused.error
        assert "SANDBOX-SECRET" in shell(ToolContext(workdir=tmp_path), "env").output
        env = shell(ctx, "env")
        assert env.ok and "SANDBOX-SECRET" not in env.output and "HOME=/tmp" in env.output
    finally:
        server.stop()


def test_a_sandboxed_run_is_not_asked_about_its_confined_calls(sandbox, tmp_path):
    """A real-model run with sandbox='bwrap': its shell call is confined, so the default policy runs
    it without asking; the observation says where it ran.  A scripted run gives its answer."""
    server = FaultServer().start()
    try:
        act = {"thought": "look", "action_type": "run", "tool": "shell", "params": {"command": "ls -a ~"}}
        finish = {**act, "tool": "finish", "params": {"answer": "done"}}
        server.script("boxed", [f"ok:{json.dumps(act)}", f"ok:{json.dumps(finish)}"])
        run = Agent(model="openai/boxed", api_base=server.api_base, structured="text", workdir=tmp_path,
                    memory=False, sandbox="bwrap").start("look around")
        assert run.run().status == "done"
        assert not [e for e in run.trace()["events"] if e["type"] == "approval"]
        (seen,) = [e for e in run.trace()["events"] if e["type"] == "observation" and e["tool"] == "shell"]
        assert seen["ok"] and {k: v for k, v in seen["data"].items() if k != "workspace"} == {"exit_code": 0, "sandbox": "bwrap"}
    finally:
        server.stop()
    demo = Agent(model="memfit/demo", workdir=tmp_path / "demo", memory=False, sandbox="bwrap").start("add up")
    assert demo.run().answer == "The numbers in data.txt add up to 42."


def test_asking_for_a_sandbox_where_there_is_none_is_one_line(tmp_path, monkeypatch, caplog):
    """No bwrap on the PATH: sandbox='bwrap' refuses to start the run, in one line; 'auto' runs
    unconfined and says so."""
    monkeypatch.setenv("PATH", str(tmp_path))
    bwrap_problem.cache_clear()
    _warn_unconfined.cache_clear()
    try:
        agent = Agent(model="memfit/demo", workdir=tmp_path, memory=False, sandbox="bwrap")
        with pytest.raises(SandboxUnavailableError) as info:
            agent.start("add up data.txt")
        message = str(info.value)
        assert "\n" not in message and "bubblewrap (bwrap) is not installed" in message
        assert sandbox_for("auto") is None and "sandbox='auto'" in caplog.text
        assert Agent(model="memfit/demo", workdir=tmp_path, memory=False, sandbox="auto").start("x").tool_context.sandbox is None
    finally:
        bwrap_problem.cache_clear()


def test_a_fork_of_a_sandboxed_run_runs_its_live_tools_in_the_sandbox(sandbox, planted, tmp_path):
    """From a run in hand and from its saved trace: the fork's live shell cannot read what the
    parent's could not (its tools ran unconfined, and a saved trace did not say it was sandboxed)."""
    import json

    work, beside, _ = planted
    parent = Agent(model="memfit/demo", workdir=work, memory=False, sandbox="bwrap").start(
        "What is the total of the numbers in data.txt?")
    parent.run()
    assert parent.status == "done" and parent.trace()["settings"]["sandbox"] == "bwrap"
    peek = {"tool": "shell", "params": {"command": "cat ../planted_secret.txt; echo read-it"}}
    for name, source in (("in-hand", parent), ("saved", json.loads(json.dumps(parent.trace())))):
        child = Agent.fork(source, 1, workdir=beside.parent / name, action=peek, max_iterations=1)
        assert child.tool_context.sandbox is not None, name
        child.run()
        (seen,) = [e for e in child.events if e.TYPE == "observation" and e.iteration == 1]
        assert "read-it" in (seen.output or "") and "BESIDE-SECRET" not in (seen.output or ""), name
