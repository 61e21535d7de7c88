"""A real small model end to end: SmolLM2-135M-Instruct on llama.cpp's server at 127.0.0.1.

``%%memfit_task --model openai/<alias> --api-base http://127.0.0.1:PORT/v1`` in a real kernel:
schema-valid actions from replies nobody here wrote, the tool run, reflection and triage
calls, the reply streaming into the widget, the trace, an offline replay of the recorded
run byte for byte, and Interrupt Kernel in the middle of a generation.  Kept few and short:
the model writes about 40 tokens a second on one thread of a shared machine.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request

import nbformat
import pytest
from local_model import ALIAS, LocalModel, missing
from nbclient import NotebookClient

RUN_MIME = "application/vnd.memfit.run+json"
TASK = "Read the file missing.txt and say what it holds."

pytestmark = [pytest.mark.local_model, pytest.mark.kernel,
              pytest.mark.skipif(missing() is not None, reason=str(missing()))]


@pytest.fixture(scope="session")
def local_model(tmp_path_factory):
    with LocalModel.start(log_dir=tmp_path_factory.mktemp("llama")) as lm:
        yield lm


def kernel_env():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": repo + (os.pathsep + path if path else ""), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def cells(base):
    return {
        "load": "%load_ext memfit_jupyter",
        "run": (f"%%memfit_task --model openai/{ALIAS} --api-base {base} --structured schema "
                "--max-iterations 1 --tools read_file,finish --reflection standard --memory-triage end --max-duration 600 "
                f"--name run1\n{TASK}"),
        "facts": (
            "import json\n"
            "t = run1.trace()\n"
            "calls = [e for e in t['events'] if e['type'] == 'model_call']\n"
            "print('FACTS ' + json.dumps({'status': t['status'], 'iterations': t['totals']['iterations'],\n"
            "  'purposes': sorted({c['purpose'] for c in calls}),\n"
            "  'modes': sorted({c['structured'] for c in calls}),\n"
            "  'actions_ok': [c['ok'] for c in calls if c['purpose'] == 'action'],\n"
            "  'tools': [e['tool'] for e in t['events'] if e['type'] == 'action'],\n"
            "  'observations': sum(e['type'] == 'observation' for e in t['events']),\n"
            "  'tokens': [c['completion_tokens'] for c in calls if c['ok']],\n"
            "  'calls': t['totals']['calls']}))"),
        "replay": (
            "from memfit_jupyter import Agent\n"
            "replayed = Agent.replay(run1.trace())\n"
            "replayed.run()\n"
            "print('REPLAY', json.dumps(replayed.trace()['events']) == json.dumps(run1.trace()['events']),\n"
            "      replayed.status == run1.status)"),
        "stream": (
            "from memfit_jupyter.events import ModelDelta\n"
            "from memfit_jupyter.jupyter.widget import RunWidget\n"
            f"a = Agent(model='openai/{ALIAS}', api_base='{base}', structured='schema', tools=['finish'],\n"
            "          max_iterations=1, reflection='none', memory=False)\n"
            "r = a.start('Say hello, then finish.')\n"
            "w = RunWidget(r, throttle_ms=0)\n"
            "seen = []\n"
            "r.subscribe(lambda e: seen.append(e.chars), ModelDelta)\n"
            "r.run()\n"
            "print('STREAM', json.dumps({'deltas': len(seen), 'shown': w.streamed,\n"
            "      'in_trace': any(e['type'] == 'model_delta' for e in r.trace()['events']),\n"
            "      'reply_chars': len(next(e['reply'] for e in r.trace()['events'] if e['type'] == 'model_call'))}))"),
    }


@pytest.fixture(scope="module")
def nb(local_model, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("kernel")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(src, metadata={"name": name})
                      for name, src in cells(local_model.api_base).items()]
    client = NotebookClient(notebook, timeout=900, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return notebook


def outputs(nb, name):
    return next(c.outputs for c in nb.cells if c.metadata.get("name") == name)


def printed(nb, name, tag):
    for o in outputs(nb, name):
        if o.output_type == "stream":
            for line in o.text.splitlines():
                if line.startswith(tag + " "):
                    return line[len(tag) + 1:]
        if o.output_type == "error":
            raise AssertionError(f"{o.ename}: {o.evalue}")
    raise AssertionError(f"no {tag} line in {name}: {outputs(nb, name)}")


def test_a_real_model_drives_the_magic_with_schema_valid_actions(nb):
    facts = json.loads(printed(nb, "facts", "FACTS"))
    assert facts["modes"] == ["schema"]
    assert facts["actions_ok"] and all(facts["actions_ok"])  # every action reply parsed and validated
    assert set(facts["tools"]) <= {"read_file", "finish"} and facts["observations"] >= 1
    # the forced reflection follows a tool's observation; a model that finishes at once ends the run first
    reflected = {"reflection"} if set(facts["tools"]) - {"finish"} else set()
    assert {"action", "triage"} | reflected <= set(facts["purposes"])
    # one call per purpose seen: an action and the memory triage, plus the reflection when one was due
    assert all(t > 0 for t in facts["tokens"]) and facts["calls"] >= 2 + len(reflected)
    assert facts["status"] in ("done", "failed")
    saved = [o for o in outputs(nb, "run") if o.output_type == "display_data" and RUN_MIME in o.data]
    assert len(saved) == 1
    trace = saved[0].data[RUN_MIME]
    assert trace["settings"]["api_base"].startswith("http://127.0.0.1:")
    assert trace["settings"]["structured"] == "schema"


def test_the_recorded_run_replays_offline_byte_for_byte(nb):
    assert printed(nb, "replay", "REPLAY") == "True True"


def test_the_reply_streams_into_the_widget_and_stays_out_of_the_trace(nb):
    stream = json.loads(printed(nb, "stream", "STREAM"))
    assert stream["deltas"] >= 1 and stream["shown"] >= 1 and not stream["in_trace"]
    assert stream["reply_chars"] > 0


def _generating(base):
    """Whether the server is writing a reply (past the prompt: some tokens are out)."""
    with urllib.request.urlopen(base.rsplit("/v1", 1)[0] + "/slots", timeout=2) as r:
        slots = json.loads(r.read())
    return any(s.get("is_processing") and any(t.get("n_decoded", 0) > 3 for t in s.get("next_token") or ())
               for s in slots)


def test_interrupt_kernel_mid_generation_cancels_the_run(local_model, tmp_path):
    """Interrupt Kernel while the server is generating: the run ends cancelled, the call is recorded."""
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, **kernel_env()}
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env)
    try:
        kc.execute_interactive("%load_ext memfit_jupyter", timeout=60)
        code = (f"%%memfit_task --model openai/{ALIAS} --api-base {local_model.api_base} --structured text "
                "--max-iterations 1 --tools finish --reflection none --no-memory --name cut\n"
                "Write a long story about a lighthouse keeper, then finish.")
        msg_id = kc.execute(code)
        deadline = time.monotonic() + 120
        while not _generating(local_model.api_base):
            assert time.monotonic() < deadline, "the server never started generating"
            time.sleep(0.1)
        time.sleep(0.5)  # a few more tokens, drained into the run by the streaming pump
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kc.get_shell_msg(timeout=60)
        out = []
        kc.execute_interactive(
            "import json\nt = cut.trace()\nc = [e for e in t['events'] if e['type'] == 'model_call']\n"
            "print('CUT ' + json.dumps({'status': cut.status, 'kinds': [e['error_kind'] for e in c],"
            " 'partial': [len(e.get('partial_reply') or '') for e in c]}))",
            timeout=60, output_hook=lambda m: out.append(m["content"].get("text", "")))
        line = next(x for x in "".join(out).splitlines() if x.startswith("CUT "))
        facts = json.loads(line[4:])
        assert facts["status"] == "cancelled"
        assert facts["kinds"][-1] == "cancelled"
        assert facts["partial"][-1] > 0  # the partial reply is recorded
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_tiers_keep_every_prompt_inside_the_window_the_server_reports(local_model, tmp_path):
    """No --context-window: the window is the one llama-server was started with (4,096), asked of
    the server; a main context of ~5,000 tokens is flushed before the call, never refused."""
    from memfit_jupyter import Agent
    from memfit_jupyter import events as ev

    agent = Agent(model=local_model.model, api_base=local_model.api_base, structured="schema", tools=["finish"],
                  max_iterations=1, reflection="none", memory=False, workdir=tmp_path)
    run = agent.start("Say in one line what the ledger notes are about, then finish.")
    run.llm.max_output_tokens = 160  # short replies: the model writes ~40 tokens a second here
    for part in range(8):  # ~650 tokens each, by the server's count
        lines = [f"ledger {part}.{i}: account {i * 37 % 101} paid {i * 13 % 977} coins to account {i * 7 % 89}."
                 for i in range(40)]
        run.emit(ev.Note(text="\n".join(lines), timeline="append"))
    run.run()
    calls = [e for e in run.events if e.type == "model_call"]
    contexts = [e for e in run.events if e.type == "context"]
    assert {e.window for e in contexts} == {4096}
    assert any(e.watermark == "flush" for e in contexts)
    assert [c.error_kind for c in calls if c.error_kind == "context_window"] == []
    assert calls and all(c.prompt_tokens < 4096 for c in calls if c.ok)
    assert {c.purpose for c in calls} >= {"summary", "action"}
