"""Circuit breakers per tier, through litellm, against a real HTTP server on 127.0.0.1 that fails on script."""

import json
import threading

import pytest
from fault_server import FaultServer

from memfit_jupyter import Agent
from memfit_jupyter.agent import Run
from memfit_jupyter.llm.backend import LiteLLMBackend
from memfit_jupyter.llm.client import LLMClient
from memfit_jupyter.reliability.breakers import BreakerSet, CircuitState

SAMPLE = [{"role": "user", "content": "Which file holds the numbers?"}]
RECOVERY = 60.0


class ManualClock:
    """Time that moves only when the test says so: recovery timeouts without sleeping."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def advance(self, seconds):
        self.t += seconds


@pytest.fixture(scope="module")
def server():
    s = FaultServer().start()
    yield s
    s.stop()


def make(server, primary_script, fallback_script=("ok",), *, fallback=True, timeout=0.5, threshold=3):
    server.script("p", list(primary_script))
    server.script("f", list(fallback_script))
    opts = {m: {"api_base": server.api_base, "api_key": "test-key"} for m in ("openai/p", "openai/f")}
    tiers = {"primary": "openai/p", "fallback": "openai/f" if fallback else ""}
    clock = ManualClock()
    breakers = BreakerSet(tiers, failure_threshold=threshold, recovery_timeout=RECOVERY, clock=clock)
    events = []
    lock = threading.Lock()

    def emit(type, iteration=None, **fields):
        with lock:
            events.append({"type": type, **fields})

    breakers.subscribe(emit)
    client = LLMClient(tiers, LiteLLMBackend(opts), emit, run_key="t", breakers=breakers,
                       max_format_retries=0, default_timeout_s=timeout)
    return client, breakers, clock, events


def transitions(breakers, tier="primary"):
    return [(t["from"], t["to"]) for t in breakers.metrics()[tier]["transitions"]]


def test_every_transition_one_probe_fallback_and_metrics(server):
    client, breakers, clock, events = make(server, ["500", "429", "slow:3", "malformed", "ok"])
    kinds = [client.call("sample", SAMPLE).error_kind for _ in range(3)]
    assert kinds == ["server_error", "rate_limit", "timeout"]
    m = breakers.metrics()["primary"]
    assert m["state"] == "OPEN" and m["failures"] == 3 and m["next_probe_in_s"] == RECOVERY
    assert transitions(breakers) == [("CLOSED", "OPEN")]

    # OPEN: answered at once by the fallback tier; the primary's server sees nothing.
    result = client.call("sample", SAMPLE)
    assert result.ok and result.tier == "fallback" and result.fallback_from == "primary"
    assert result.value.answer == "ok"
    assert server.requests["p"] == 3 and server.requests["f"] == 1
    assert breakers.fallbacks[-1].answered_by == "fallback"

    # After recovery_timeout, one probe: it gets malformed JSON, so the circuit re-opens for twice as long.
    clock.advance(RECOVERY)
    assert client.call("sample", SAMPLE).ok is False
    assert server.requests["p"] == 4
    m = breakers.metrics()["primary"]
    assert m["state"] == "OPEN" and m["open_period_s"] == 2 * RECOVERY
    clock.advance(RECOVERY)  # not long enough any more
    assert client.call("sample", SAMPLE).tier == "fallback"
    assert server.requests["p"] == 4

    clock.advance(RECOVERY)
    probe = client.call("sample", SAMPLE)
    assert probe.ok and probe.tier == "primary" and probe.fallback_from is None
    assert server.requests["p"] == 5
    assert transitions(breakers) == [("CLOSED", "OPEN"), ("OPEN", "HALF_OPEN"), ("HALF_OPEN", "OPEN"),
                                     ("OPEN", "HALF_OPEN"), ("HALF_OPEN", "CLOSED")]
    m = breakers.metrics()
    assert m["primary"] | {"transitions": None} == m["primary"] | {
        "state": "CLOSED", "failures": 0, "total_failures": 4, "successes": 1, "rejected": 2, "probes": 2,
        "opened_at": None, "next_probe_at": None, "open_period_s": RECOVERY, "transitions": None}
    assert m["fallback"]["state"] == "CLOSED" and m["fallback"]["successes"] == 2
    # the same transitions are events, and each turned-away call is one
    moved = [(e["from_state"], e["to_state"]) for e in events if e["type"] == "breaker" and "to_state" in e]
    assert moved == transitions(breakers)
    turned_away = [e for e in events if e["type"] == "breaker" and e.get("rejected") is True]
    assert [e["fallback_tier"] for e in turned_away] == ["fallback", "fallback"]
    assert "test-key" not in json.dumps(events)


def test_exactly_one_probe_when_many_calls_wait(server):
    client, breakers, clock, _ = make(server, ["500", "500", "500", "slow:0.4", "ok"], timeout=5.0)
    for _ in range(3):
        client.call("sample", SAMPLE)
    assert breakers.state("primary") is CircuitState.OPEN
    clock.advance(RECOVERY)
    start = threading.Barrier(8)
    results = []

    def call():
        start.wait()
        results.append(client.call("sample", SAMPLE))

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert server.requests["p"] == 4  # exactly one probe reached the primary
    assert sorted(r.tier for r in results) == ["fallback"] * 7 + ["primary"]
    assert all(r.ok for r in results)
    assert breakers.state("primary") is CircuitState.CLOSED
    assert breakers.metrics()["primary"]["probes"] == 1


def test_no_tier_left_says_which_are_open_and_when(server):
    client, breakers, clock, _ = make(server, ["500"], fallback=False, threshold=2)
    client.call("sample", SAMPLE)
    client.call("sample", SAMPLE)
    result = client.call("sample", SAMPLE)
    assert not result.ok and result.error_kind == "circuit_open"
    assert "open circuits: primary (open for 60 s, then one probe call)" in result.error
    fb = breakers.fallbacks[-1]
    assert fb.answered_by is None and set(fb.open_tiers) == {"primary"} and fb.open_tiers["primary"] is not None
    assert server.requests["p"] == 2


def test_failure_kinds_decide_what_counts(server):
    """Provider faults count toward opening; a 400 (our own request is wrong) does not."""
    client, breakers, clock, events = make(server, ["500", "400", "400", "429", "500", "ok"])
    kinds = [client.call("sample", SAMPLE).error_kind for _ in range(3)]
    assert kinds == ["server_error", "bad_request", "bad_request"]
    m = breakers.metrics()["primary"]
    assert m["state"] == "CLOSED" and m["failures"] == 1 and m["not_counted"] == 2
    assert m["failure_kinds"] == {"server_error": 1, "bad_request": 2}
    assert m["last_error"].startswith("bad_request: ")
    assert client.call("sample", SAMPLE).error_kind == "rate_limit"
    assert client.call("sample", SAMPLE).error_kind == "server_error"
    m = breakers.metrics()["primary"]
    assert m["state"] == "OPEN" and m["failures"] == 3 and m["total_failures"] == 3
    assert "server_error: " in m["transitions"][-1]["reason"]

    # A probe answered with a 400 shows the provider is up: the circuit closes.
    server.script("p", ["400", "ok"])
    clock.advance(RECOVERY)
    assert client.call("sample", SAMPLE).error_kind == "bad_request"
    assert transitions(breakers)[-2:] == [("OPEN", "HALF_OPEN"), ("HALF_OPEN", "CLOSED")]
    assert client.call("sample", SAMPLE).ok
    failed = [e for e in events if e["type"] == "model_call" and not e["ok"]]
    assert [e["error_kind"] for e in failed] == ["server_error", "bad_request", "bad_request", "rate_limit",
                                                  "server_error", "bad_request"]


def test_a_run_keeps_calling_through_its_own_bad_requests(server, tmp_path):
    finish = json.dumps({"thought": "done", "action_type": "answer", "tool": "finish",
                         "params": {"answer": "fine"}})
    server.script("p", ["400", "400", f"ok:{finish}"])
    opts = {"openai/p": {"api_base": server.api_base, "api_key": "test-key"}}
    agent = Agent(model="openai/p", failure_threshold=2, workdir=tmp_path, memory=False, tools=["finish"])
    run = Run(agent, "say something", backend=LiteLLMBackend(opts))
    result = run.run()
    # two failures with threshold 2 would open the only tier; two 400s leave it closed, the third call answers
    assert result.status == "done" and result.answer == "fine" and server.requests["p"] == 3
    assert agent.breakers.metrics()["primary"]["state"] == "CLOSED"
    assert agent.breakers.metrics()["primary"]["not_counted"] == 2
    assert not any(e["type"] == "breaker" for e in run.trace()["events"])


def test_breaker_settings_are_checked():
    with pytest.raises(ValueError, match="failure_threshold"):
        BreakerSet({"primary": "memfit/demo"}, failure_threshold=0)
    with pytest.raises(ValueError, match="recovery_timeout"):
        BreakerSet({"primary": "memfit/demo"}, recovery_timeout=0)


def test_a_lost_probe_frees_its_slot_after_the_lease():
    clock = ManualClock()
    b = BreakerSet({"primary": "a", "fallback": "b"}, failure_threshold=1, recovery_timeout=10,
                   probe_lease_s=30, clock=clock)
    b.record("primary", ok=False, error="down")
    clock.advance(10)
    assert b.route("primary") == "primary"  # the probe, whose outcome never comes back
    assert b.route("primary") == "fallback"
    clock.advance(30)
    assert b.route("primary") == "primary"  # a new probe once the lease ran out


def test_a_run_falls_back_and_agent_breakers_span_runs(server, tmp_path):
    finish = json.dumps({"thought": "done", "action_type": "answer", "tool": "finish",
                         "params": {"answer": "from the fallback"}})
    server.script("p", ["500"])
    server.script("f", [f"ok:{finish}"])
    opts = {m: {"api_base": server.api_base, "api_key": "test-key"} for m in ("openai/p", "openai/f")}
    agent = Agent(model="openai/p", fallback_model="openai/f", failure_threshold=2, workdir=tmp_path,
                  memory=False, tools=["finish"])
    run = Run(agent, "say something", backend=LiteLLMBackend(opts))
    result = run.run()
    assert result.status == "done" and result.answer == "from the fallback"
    events = run.trace()["events"]
    assert any(e["type"] == "breaker" and e.get("to_state") == "OPEN" for e in events)
    assert any(e["type"] == "breaker" and e.get("rejected") is True and e["fallback_tier"] == "fallback"
               for e in events)
    assert agent.breakers.metrics()["primary"]["state"] == "OPEN"
    # the same breakers, read twice: all but the seconds to the next probe, which go on falling
    same = [{t: {k: v for k, v in m.items() if k != "next_probe_in_s"} for t, m in x.metrics().items()}
            for x in (run.breakers, agent.breakers)]
    assert same[0] == same[1] and run.breakers.shared is agent.breakers
    # the next run of the same agent goes to the fallback at once: the breaker outlives the run
    before = server.requests["p"]
    Run(agent, "again", backend=LiteLLMBackend(opts)).run()
    assert server.requests["p"] == before


def test_the_outage_demo_goes_through_the_whole_cycle_whatever_the_speed(tmp_path):
    """memfit/outage beside the slow memfit/backup fallback (0.5 s a call, longer than any open period
    here): the cycle cannot depend on how fast the machine runs the steps between calls."""
    run = Agent(model="memfit/outage", fallback_model="memfit/backup", recovery_timeout=0.2,
                memory=False, workdir=tmp_path).start("What is the total of the numbers in data.txt?")
    run.run()
    trace = run.trace()
    changes = [f"{e['from_state']}->{e['to_state']}" for e in trace["events"] if e["type"] == "breaker" and e.get("to_state")]
    assert changes == ["CLOSED->OPEN", "OPEN->HALF_OPEN", "HALF_OPEN->OPEN", "OPEN->HALF_OPEN", "HALF_OPEN->CLOSED"]
    calls = [(e["purpose"], e["tier"]) for e in trace["events"] if e["type"] == "model_call" and e["ok"]]
    assert any(tier == "fallback" for _, tier in calls) and calls[-1] == ("action", "primary")  # primary is back
    assert run.status == "done" and "42" in (run.best_answer() or "")
