"""A real model's context window: asked of its server, kept for replays, or asked of the person;
and the tiers keep the prompt inside it with room for the reply."""

import json
import socket

import pytest
from fault_server import FaultServer

from memfit_jupyter import Agent
from memfit_jupyter.context import TieredContext
from memfit_jupyter.llm.served import served_window

FINISH = json.dumps({"thought": "nothing to do", "action_type": "finish", "tool": "finish",
                     "params": {"answer": "42"}})


@pytest.fixture
def server():
    s = FaultServer(context_window=6000).start()
    yield s
    s.stop()


def closed_port_base() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


def test_the_window_is_asked_of_the_server(server):
    assert served_window(server.api_base, "openai/anything") == 6000
    assert served_window(closed_port_base(), "openai/anything") is None


def test_a_server_behind_a_login_in_its_url_is_asked_with_that_login(server):
    import base64

    with_login = server.api_base.replace("http://", "http://me:p%40ss@")
    assert served_window(with_login, "openai/anything") == 6000
    assert server.get_auth[-1] == "Basic " + base64.b64encode(b"me:p@ss").decode()
    # With a key too, the login still goes: the model calls (openai's client on httpx) send the
    # URL's login and not the key, and the server is asked as they ask it.
    assert served_window(with_login, "openai/anything", api_key="sk-proxykey0123456789") == 6000
    assert server.get_auth[-1] == "Basic " + base64.b64encode(b"me:p@ss").decode()


def test_a_live_run_takes_the_servers_window_and_its_replay_measures_against_the_same(server, tmp_path):
    server.script("local", [f"ok:{FINISH}"])
    agent = Agent(model="openai/local", api_base=server.api_base, structured="text", tools=["finish"],
                  reflection="none", memory=False, workdir=tmp_path)
    run = agent.start("say 42")
    assert run.run().status == "done"
    assert {e.window for e in run.events if e.type == "context"} == {6000}
    trace = run.trace()
    replayed = Agent.replay(trace)  # offline: no server to ask
    replayed.run()
    assert json.dumps(replayed.trace()["events"]) == json.dumps(trace["events"])


@pytest.fixture
def silent_server():
    """A server on loopback that answers every request 404: it says nothing of its window."""
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        do_POST = do_GET

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_a_live_model_with_no_known_window_refuses_to_start_with_one_line(tmp_path, silent_server):
    base = silent_server
    run = Agent(model="openai/nowhere-known", api_base=base, memory=False, workdir=tmp_path).start("x")
    result = run.run()
    assert result.status == "failed" and result.calls == 0
    assert result.reason.startswith("the context window of openai/nowhere-known is unknown")
    assert "--context-window N" in result.reason and base in result.reason and "\n" not in result.reason
    given = Agent(model="openai/nowhere-known", api_base=base, memory=False, workdir=tmp_path,
                  context_window=4096, max_iterations=1, reflection="none").start("x")
    given.run()
    assert {e.window for e in given.events if e.type == "context"} == {4096}


def test_the_reply_reserve_and_the_providers_count_bring_the_flush_forward():
    tiers = TieredContext(window=4096)
    assert tiers.watermark(3500) == "warning"
    tiers.reserve = 1024  # a real model: its reply must fit beside the prompt
    assert tiers.watermark(3000) == "warning" and tiers.watermark(3100) == "flush"
    tiers.calibrate([{"role": "user", "content": "x" * 4000}], provider_tokens=2 * (1000 + 4))
    assert tiers.scale == pytest.approx(2.0)  # the provider counts twice what the counter does
    assert tiers.watermark(1600) == "flush" and tiers.watermark(1400) == "ok"
