"""Provider failures say what happened: each kind from a real HTTP server on 127.0.0.1, through litellm.

A refused or missing key and an unknown model end the run at once in one line, open no
breaker and write nothing to memory; a 429 waits for its Retry-After; a prompt over the
context window flushes the tiered context and is sent again; a content refusal is an unusable
reply that no breaker counts and no memory keeps.
"""

import json

import pytest
from fault_server import FaultServer

from memfit_jupyter import Agent, MemoryStore
from memfit_jupyter.reliability.guarantees import ExecutionGuarantees


def act(tool, **params):
    return "ok:" + json.dumps({"thought": f"use {tool}", "action_type": "compute", "tool": tool,
                               "params": params})


FINISH = act("finish", answer="fine")


@pytest.fixture(scope="module")
def server():
    s = FaultServer().start()
    yield s
    s.stop()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")


def run_with(server, tmp_path, name, script, **kwargs):
    server.script(name, script)
    kwargs.setdefault("memory", tmp_path / "mem")
    kwargs.setdefault("reflection", "none")  # every call the script answers is an action or a triage
    agent = Agent(model=f"openai/{name}", api_base=server.api_base, workdir=tmp_path,
                  tools=["python", "finish"], **kwargs)
    run = agent.start("compute something")
    return agent, run, run.run()


def calls(run):
    return [e for e in run.trace()["events"] if e["type"] == "model_call"]


def untouched(agent):
    m = agent.breakers.metrics()["primary"]
    return m["state"] == "CLOSED" and m["failures"] == 0 and m["total_failures"] == 0


def test_missing_key_ends_the_run_at_once_naming_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent = Agent(model="openai/gpt-4o-mini", workdir=tmp_path, memory=tmp_path / "mem", tools=["finish"])
    run = agent.start("say hello")
    result = run.run()
    assert result.status == "failed" and result.iterations == 1
    assert "OPENAI_API_KEY" in result.reason and ".env" in result.reason and "\n" not in result.reason
    (call,) = calls(run)
    assert call["error_kind"] == "auth"
    assert untouched(agent)
    assert not [e for e in run.trace()["events"] if e["type"] in ("memory", "error")]
    with MemoryStore(tmp_path / "mem") as store:
        assert len(store) == 0


def test_refused_key_401_ends_the_run_at_once(server, tmp_path, key):
    agent, run, result = run_with(server, tmp_path, "refused", ["401", FINISH])
    assert result.status == "failed" and "refused the API key" in result.reason
    assert "OPENAI_API_KEY" in result.reason and "\n" not in result.reason
    assert server.requests["refused"] == 1 and [c["error_kind"] for c in calls(run)] == ["auth"]
    assert untouched(agent)
    with MemoryStore(tmp_path / "mem") as store:
        assert len(store) == 0


def test_unknown_model_404_ends_the_run_at_once(server, tmp_path, key):
    agent, run, result = run_with(server, tmp_path, "nosuch", ["404", FINISH])
    assert result.status == "failed" and "unknown model 'openai/nosuch'" in result.reason
    assert server.requests["nosuch"] == 1 and untouched(agent)


def test_rate_limit_waits_for_retry_after_then_goes_on(server, tmp_path, key):
    agent, run, result = run_with(server, tmp_path, "limited", ["429:0.2", FINISH], memory=False)
    assert result.status == "done" and server.requests["limited"] == 2
    waits = [e for e in run.trace()["events"] if e["type"] == "note" and "Retry-After" in e["text"]]
    assert len(waits) == 1 and "waiting 0.2 s" in waits[0]["text"]
    m = agent.breakers.metrics()["primary"]
    assert m["failure_kinds"] == {"rate_limit": 1} and m["state"] == "CLOSED"


def test_rate_limit_longer_than_the_time_left_is_not_waited_for(server, tmp_path, key):
    agent, run, result = run_with(server, tmp_path, "slowlimit", ["429:30", "429:30", "429:30", FINISH],
                                  memory=False, guarantees=ExecutionGuarantees(max_duration_seconds=20))
    assert not [e for e in run.trace()["events"] if e["type"] == "note" and "Retry-After" in e["text"]]
    kinds = [c["error_kind"] for c in calls(run)]
    assert kinds[:3] == ["rate_limit"] * 3
    # a rate limit says the tier is unhealthy: three in a row open its breaker
    assert agent.breakers.metrics()["primary"]["transitions"][0]["to"] == "OPEN"
    assert result.status == "failed"


def test_context_window_exceeded_flushes_the_context_and_retries_once(server, tmp_path, key):
    summary = "ok:" + json.dumps({"summary": "Five numbers were computed."})
    script = [act("python", code=f"print({i} * 1000)") for i in range(5)] + ["context", summary, FINISH]
    agent, run, result = run_with(server, tmp_path, "overflow", script, memory=False)
    # five actions, the one over the window, the flush's summary, the action sent again
    assert result.status == "done" and server.requests["overflow"] == 8
    flushes = [e for e in run.trace()["events"] if e["type"] == "context" and e["watermark"] == "flush"]
    assert len(flushes) == 1 and flushes[0]["evicted"] > 0 and "context window" in flushes[0]["reason"]
    assert [c["error_kind"] for c in calls(run) if not c["ok"]] == ["context_window"]
    # the retried prompt is shorter: the flushed entries went to recall behind a summary
    bodies = server.bodies["overflow"]
    assert len(json.dumps(bodies[-1]["messages"])) < len(json.dumps(bodies[-3]["messages"]))
    assert untouched(agent)


def test_content_policy_is_an_unusable_reply_that_nothing_keeps(server, tmp_path, key):
    agent, run, result = run_with(server, tmp_path, "policy", ["policy", FINISH])
    assert result.status == "done"
    kinds = [c["error_kind"] for c in calls(run) if c["purpose"] == "action"]
    assert kinds == ["content_policy", None]
    m = agent.breakers.metrics()["primary"]
    assert m["failures"] == 0 and m["not_counted"] == 1
    with MemoryStore(tmp_path / "mem") as store:
        kept = [r.content for r in store.search("safety system rejected request", k=20)]
    assert not [c for c in kept if "safety" in c or "could not be used" in c]


def test_a_bad_reply_is_not_a_lesson_about_the_task(server, tmp_path, key):
    """Malformed model output (the engine's trouble) is never stored as a failure of the task."""
    bad = "ok:I think I should run some code first."
    agent, run, result = run_with(server, tmp_path, "chatty", [bad, bad, bad, FINISH])  # 1 + 2 re-asks
    assert result.status == "done"
    triaged = [e for e in run.trace()["events"] if e["type"] == "memory" and e["op"] == "triage"]
    assert [e["iteration"] for e in triaged] == [2]  # the finish only, not the unusable reply
    with MemoryStore(tmp_path / "mem") as store:
        kept = [r.content for r in store.search("reply could not be used JSON", k=20)]
    assert not [c for c in kept if "could not be used" in c or "SYSTEM" in c]


def test_a_provider_litellm_does_not_know_is_one_line_without_litellm_words(tmp_path):
    agent = Agent(model="nosuchprovider/foo", workdir=tmp_path, memory=False, tools=["finish"])
    result = agent.start("say hello").run()
    assert result.status == "failed"
    assert result.reason == ("unknown model 'nosuchprovider/foo': litellm knows no provider for it "
                             "(use provider/model, e.g. openai/gpt-4o-mini, or memfit/<scenario> offline)")


def test_a_server_that_is_not_listening_ends_the_run_at_once_saying_it_is_unreachable(tmp_path):
    """A wrong port in api_base: the first call is refused and the run ends there, saying so,
    rather than after max_iterations with the refusal only in the events."""
    from otel_servers import closed_port

    base = f"http://127.0.0.1:{closed_port()}/v1"
    agent = Agent(model="openai/local", api_base=base, workdir=tmp_path, memory=False, tools=["finish"],
                  reflection="none", max_iterations=5)
    run = agent.start("say hello")
    result = run.run()
    assert result.status == "failed"
    assert result.reason == (f"the server at {base} is unreachable (connection refused) for openai/local: "
                             "is it running, and is the address right?")
    (call,) = calls(run)
    assert call["error_kind"] == "unreachable"


def test_an_unreachable_primary_with_a_fallback_model_does_not_end_the_run_at_once(server, tmp_path, key):
    """Another model to go to: the refusal counts toward the primary's breaker, as a server error
    does, instead of ending the run at the first call."""
    from otel_servers import closed_port

    server.script("fallback", [FINISH])
    agent = Agent(model="openai/local", fallback_model="openai/fallback",
                  api_base={"primary": f"http://127.0.0.1:{closed_port()}/v1", "fallback": server.api_base},
                  workdir=tmp_path, memory=False, tools=["finish"], reflection="none", max_iterations=6)
    run = agent.start("say hello")
    result = run.run()
    kinds = [c["error_kind"] for c in calls(run)]
    assert kinds[:2] == ["unreachable", "unreachable"]
    assert not result.reason.startswith("the server at")
    assert agent.breakers.metrics()["primary"]["total_failures"] >= 2
