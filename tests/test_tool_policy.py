"""The tool policy: which tool calls wait for a person.  A real-model run (litellm against a real
OpenAI-compatible server on 127.0.0.1 that answers from a script) asks before shell and python,
and refuses them, saying how to allow them, where nobody can be asked; scripted runs are never
asked; a replay decides as its recording did; the magic asks through the widget."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from fault_server import FaultServer

from memfit_jupyter import Agent
from memfit_jupyter.tool_policy import ToolPolicy
from memfit_jupyter.tools import BUILTIN_TOOLS, ToolContext


@pytest.fixture(scope="module")
def server():
    s = FaultServer().start()
    yield s
    s.stop()


def reply(tool, **params):
    """The server's reply that makes the model call ``tool``."""
    return "ok:" + json.dumps({"thought": f"use {tool}", "action_type": "run", "tool": tool, "params": params})


def real_agent(server, name, script, workdir, **kwargs):
    """An agent on a real model (``openai/<name>`` at the loopback server), as a person would make it."""
    server.script(name, script)
    return Agent(model=f"openai/{name}", api_base=server.api_base, structured="text", workdir=workdir,
                 memory=False, **kwargs)


def of(run, type_):
    return [e for e in run.trace()["events"] if e["type"] == type_]


def test_policy_settings_are_checked_with_one_line_each():
    for bad, words in [("shel", "neither a kind"), ("never,shell", "cannot be combined"), ("", "empty"),
                       (" , ", "empty")]:
        with pytest.raises(ValueError, match=words) as info:
            ToolPolicy(approve_tools=bad)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="sandbox must be one of none, auto, bwrap"):
        ToolPolicy(sandbox="docker")
    with pytest.raises(ValueError, match="neither a kind"):
        Agent(model="memfit/demo", approve_tools="everything")
    assert ToolPolicy(approve_tools="unconfined,write_file").parts() == ("unconfined", "write_file")


def test_which_calls_each_policy_asks_about():
    def asked(approve_tools, real_model=True, sandboxed=False):
        policy = ToolPolicy(approve_tools=approve_tools)
        return sorted(n for n, t in BUILTIN_TOOLS.items()
                      if policy.asks(t, real_model=real_model, sandboxed=sandboxed))

    assert asked("auto") == ["python", "shell"]
    assert asked("auto", real_model=False) == []
    assert asked("auto", sandboxed=True) == []  # confined: nothing unconfined is left to ask about
    assert asked("unconfined") == asked("unconfined", real_model=False) == ["python", "shell"]
    assert asked("writes", sandboxed=True) == ["modify_code", "python", "shell", "write_file"]
    assert asked("always") == sorted(set(BUILTIN_TOOLS) - {"finish"})
    assert asked("never") == []
    assert asked("unconfined,read_file") == ["python", "read_file", "shell"]


def test_a_real_models_unconfined_call_with_nobody_to_ask_is_refused_and_says_how(server, tmp_path):
    """The probe of the hardening report: a scripted action wrote outside the folder.  With a real
    model and no way to ask, the shell call is not run; its refusal is the observation, reflected
    on, and says how to allow it."""
    outside = tmp_path / "outside.txt"
    work = tmp_path / "work"
    work.mkdir()
    agent = real_agent(server, "refused", [reply("shell", command=f"echo escaped > {outside}"),
                                           reply("finish", answer="done")], work, reflection="auto")
    run = agent.start("write a file")
    result = run.run()
    assert result.status == "done" and not outside.exists()
    (approval,) = of(run, "approval")
    (shell,) = [o for o in of(run, "observation") if o["tool"] == "shell"]
    assert approval["state"] == "rejected" and approval["reason"] == shell["error"]
    assert not shell["ok"] and "no way to ask" in shell["error"] and "\n" not in shell["error"]
    assert "approve_tools='auto' with a real model" in shell["error"] and "unconfined" in shell["error"]
    assert "approve_tools='never'" in shell["error"] and "sandbox='bwrap'" in shell["error"]
    reflection = [r for r in of(run, "reflection") if r["tool"] == "shell"]
    assert reflection and reflection[0]["level_name"] == "CRITICAL"
    # a replay decides as the recording did, byte for byte, refusal included
    replayed = Agent.replay(run.trace(), workdir=tmp_path / "replay")
    replayed.run()
    assert [json.dumps(e.to_dict()) for e in replayed.events] == [json.dumps(e) for e in run.trace()["events"]]


def test_a_real_model_waits_for_the_person_before_an_unconfined_call(server, tmp_path):
    """The default policy (what the magic passes, approve_tools='auto') with a way to ask: read_file
    goes through, shell waits in the gate until the person decides."""
    outside = tmp_path / "outside.txt"
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello\n")
    agent = real_agent(server, "gated", [reply("read_file", path="notes.txt"),
                                         reply("shell", command=f"echo approved > {outside}"),
                                         reply("finish", answer="done")], work,
                       approve=lambda call: None, approve_tools="auto")
    run = agent.start("copy the notes")
    run.run()
    assert not run.done and run.waiting_for_approval["tool"] == "shell"
    assert [o["tool"] for o in of(run, "observation")] == ["read_file"] and not outside.exists()
    run.approve(True)
    assert run.run().status == "done"
    assert outside.read_text() == "approved\n"
    assert [a["state"] for a in of(run, "approval")] == ["waiting", "approved"]
    replayed = Agent.replay(run.trace(), workdir=tmp_path / "replay")  # nobody to ask: the recording says
    replayed.run()
    assert [json.dumps(e.to_dict()) for e in replayed.events] == [json.dumps(e) for e in run.trace()["events"]]


def test_scripted_runs_are_never_asked_and_an_approve_callback_alone_is_asked_about_every_call(tmp_path):
    run = Agent(model="memfit/no-stop", workdir=tmp_path / "a", memory=False, max_iterations=4).start("fix greet")
    run.run()
    assert not of(run, "approval")
    shells = [o for o in of(run, "observation") if o["tool"] == "shell"]
    assert shells and shells[0]["ok"] and "OK" in shells[0]["output"]
    asked = []
    gated = Agent(model="memfit/demo", workdir=tmp_path / "b", memory=False,
                  approve=lambda call: asked.append(call["tool"]) or True).start("add up data.txt")
    assert gated.run().status == "done"
    tools = [a["tool"] for a in of(gated, "action")]
    assert asked == [t for t in tools if t != "finish"] and asked


def test_a_policy_given_whole_applies_to_scripted_runs_too(tmp_path):
    """approve_tools='writes' asks about the demo's python call; with nobody to ask it is refused."""
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                configs=[ToolPolicy(approve_tools="writes")]).start("add up data.txt")
    run.run()
    refused = [o for o in of(run, "observation") if o["tool"] == "python"]
    assert refused and not refused[0]["ok"] and "approve_tools='writes'" in refused[0]["error"]
    assert [a["state"] for a in of(run, "approval")] == ["rejected"] * len(refused)


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` is dead (or a zombie) within ``within_s``: a killed process is
    reaped a moment later, and on a loaded machine that moment can be long."""
    status = Path(f"/proc/{pid}/status")
    deadline = time.monotonic() + within_s
    while True:
        try:
            if "zombie" in status.read_text():
                return True
        except FileNotFoundError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_an_interrupted_command_takes_its_session_with_it(tmp_path):
    """Interrupt Kernel lands while a shell call runs: the command runs in its own session, which
    does not get the kernel's SIGINT, so the call kills it before the interrupt goes on."""
    ctx = ToolContext(workdir=tmp_path, shell_timeout_s=60.0)

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            BUILTIN_TOOLS["shell"](ctx, {"command": "echo $$ > shell.pid; sleep 300 & echo $! > child.pid; wait"})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    for name in ("shell.pid", "child.pid"):
        assert _gone(int((tmp_path / name).read_text())), f"{name}: the process outlived the interrupt"


def test_a_timed_out_command_takes_its_background_children_with_it(tmp_path):
    """A command that leaves a child in the background: at the timeout the child is killed with
    it (it used to go on running, unseen, after the call had ended)."""
    ctx = ToolContext(workdir=tmp_path, shell_timeout_s=1.0)
    result = BUILTIN_TOOLS["shell"](ctx, {"command": "sleep 300 & echo $! > child.pid; wait"})
    assert not result.ok and result.error == "command timed out after 1 s"
    assert _gone(int((tmp_path / "child.pid").read_text())), "the background child outlived its command"
    # a child that left the session holds the output pipes: the call still ends at its timeout
    result = BUILTIN_TOOLS["shell"](ctx, {"command": "setsid sleep 300 & echo $! > escaped.pid; wait"})
    assert result.error == "command timed out after 1 s"
    os.kill(int((tmp_path / "escaped.pid").read_text()), signal.SIGKILL)


# --- through the magic, in a real kernel ------------------------------------------------------
@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    from test_jupyter_comm import loaded_kernel

    yield from loaded_kernel(tmp_path_factory.mktemp("policy"))


@pytest.mark.kernel
def test_the_magic_holds_a_real_models_shell_call_for_the_widget(server, kernel, tmp_path):
    outside = tmp_path / "from_the_magic.txt"
    server.script("magic", [reply("shell", command=f"echo approved > {outside}"), reply("finish", answer="done")])
    kernel.execute(f"%%memfit_task --model openai/magic --api-base {server.api_base} --structured text "
                   "--no-memory --name gated\nwrite a file", timeout=180)
    assert kernel.value("gated.waiting_for_approval['tool']") == "'shell'"
    controls = kernel.controls()
    assert controls["status"] == "waiting for approval" and controls["buttons"] == ["approve", "reject", "abort"]
    assert not outside.exists()
    kernel.act("approve")
    assert kernel.value("gated.status") == "'done'" and outside.read_text() == "approved\n"
    # --quiet without --name: no widget and no Run to approve with, so nobody can be asked
    outside.unlink()
    server.script("quiet", [reply("shell", command=f"echo quiet > {outside}"), reply("finish", answer="done")])
    kernel.execute(f"%%memfit_task --model openai/quiet --api-base {server.api_base} --structured text "
                   "--no-memory --quiet\nwrite a file", timeout=180)
    quiet = kernel.json("[e.to_dict() for e in get_ipython().find_magic('memfit_task', 'cell').__self__"
                        ".last_run.events if e.type == 'approval']")
    assert [(a["state"], "no way to ask" in a["reason"]) for a in quiet] == [("rejected", True)]
    assert not outside.exists()


@pytest.mark.kernel
def test_the_magic_says_in_one_line_what_is_wrong_with_its_policy_options(kernel):
    def refused(line, words):
        reply_, _ = kernel.execute(f"%%memfit_task --model memfit/demo {line}\nadd up data.txt")
        assert reply_["content"]["status"] == "error" and reply_["content"]["ename"] == "UsageError"
        assert words in reply_["content"]["evalue"] and "\n" not in reply_["content"]["evalue"]

    refused("--approve --approve-tools writes", "--approve means --approve-tools always")
    refused("--approve-tools shel", "neither a kind")
    # a kernel whose PATH has no bwrap: --sandbox bwrap is refused before the run starts
    kernel.execute("import os as _os\nfrom memfit_jupyter.sandbox import bwrap_problem as _bp\n"
                   "_path = _os.environ['PATH']; _os.environ['PATH'] = '/nonexistent'; _bp.cache_clear()")
    try:
        refused("--sandbox bwrap", "sandbox='bwrap' was asked for and is not available")
    finally:
        kernel.execute("_os.environ['PATH'] = _path; _bp.cache_clear()")

