"""Hard execution guarantees: property tests with a simulated backend, degradation, override, logging."""

import json
import logging
import signal
import threading
import time

import pytest
from fault_server import FaultServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfit_jupyter import Agent, ExecutionGuarantees
from memfit_jupyter.agent import Run
from memfit_jupyter.errors import ModelCallError
from memfit_jupyter.llm.backend import Completion, LiteLLMBackend, import_litellm
from memfit_jupyter.llm.tokens import estimate_message_tokens
from memfit_jupyter.reliability.deadline import DeadlineExceeded
from memfit_jupyter.reliability.guarantees import DURATION_TOLERANCE_S, OverrideRefused

REPLIES = {
    "reflection": {"summary": "noted"},
    "spin": {"is_spinning": False},
    "triage": {"entities": []},
    "tags": {"tags": []},
    "summary": {"summary": "earlier steps"},
    "lesson": {"lesson": "check"},
}


class SimClock:
    """Simulated seconds: the backend moves it by each call's latency."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class SimBackend:
    """A Backend (llm/backend.py protocol) whose calls cost, take time and fail as a plan says.

    Like a real provider it stops at ``max_tokens`` and gives up at ``timeout``, except for the
    ``late`` fault: a reply that comes after the timeout anyway (an HTTP client's timeout applies
    per phase), which only the budget's deadline cuts off.  The time it takes moves the simulated
    clock instead of sleeping.
    """

    def __init__(self, plan, clock, prices):
        self.plan, self.clock, self._prices, self.n = plan, clock, prices, 0

    def complete(self, model, messages, *, max_tokens, timeout, metadata):
        latency, tokens, fault, action = self.plan[self.n % len(self.plan)]
        self.n += 1
        if fault == "late":
            latency, fault = latency + (timeout or 0.0), None  # past its timeout, then a reply
        elif timeout is not None and latency > timeout:
            self.clock.t += timeout
            raise ModelCallError("timeout", f"no reply within {timeout:.3f} s")
        self.clock.t += latency
        if fault:
            raise ModelCallError(fault, f"simulated {fault}")
        purpose = metadata.get("memfit_purpose", "action")
        if purpose == "action":
            reply = ({"thought": "t", "action_type": "delegate", "tool": "sub_query",
                      "params": {"question": "what is it?", "samples": action}} if action
                     else {"thought": "t", "action_type": "compute", "tool": "python", "params": {"code": "1 + 1"}})
        elif purpose == "sample":
            reply = {"answer": f"answer {tokens % 3}", "confidence": 0.7, "reasoning": ["because"]}
        else:
            reply = REPLIES.get(purpose, {})
        if max_tokens is not None:
            tokens = min(tokens, max_tokens)
        prompt = estimate_message_tokens(messages)
        p_in, p_out = self._prices
        return Completion(json.dumps(reply), prompt, tokens, prompt * p_in + tokens * p_out)

    def prices(self, model):
        return self._prices

    def context_window(self, model):
        return None

    def forget(self, run_key):
        pass


call = st.tuples(
    st.floats(0.0, 3.0),                                   # latency, simulated seconds
    st.integers(1, 4000),                                  # completion tokens the model would write
    st.sampled_from([None] * 6 + ["rate_limit", "server_error", "timeout", "late", "bad_request"]),
    st.sampled_from([0, 0, 1, 3]),                         # action: python, or sub_query with K samples
)


def sim_deadline(clock):
    """The budget's deadline on the simulated clock: a call that ran past it is cut off there."""

    def runner(fn, seconds):
        start = clock.t
        try:
            value = fn()
        finally:
            late = clock.t - start > seconds
            if late:
                clock.t = start + seconds
        if late:
            raise DeadlineExceeded(seconds)
        return value

    return runner


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=st.lists(call, min_size=1, max_size=30),
       max_cost=st.floats(0.0005, 0.05), max_duration=st.floats(0.5, 20.0), max_recursive=st.integers(0, 6),
       price_out=st.floats(1e-7, 5e-5))
def test_no_run_ends_over_its_limits(tmp_path_factory, plan, max_cost, max_duration, max_recursive, price_out):
    clock = SimClock()
    g = ExecutionGuarantees(max_cost_usd=max_cost, max_duration_seconds=max_duration,
                            max_recursive_calls=max_recursive)
    agent = Agent(model="sim/model", guarantees=g, max_iterations=15, memory=False,
                  workdir=tmp_path_factory.mktemp("w"))
    run = Run(agent, "keep working", backend=SimBackend(plan, clock, (price_out / 4, price_out)))
    run.budget.clock, run.budget.started = clock, clock()
    run.budget.runner = sim_deadline(clock)
    result = run.run()
    spent = run.budget.spent
    assert spent.cost_usd <= max_cost + 1e-12
    assert run.budget.recursive_calls <= max_recursive
    assert run.budget.elapsed() <= max_duration + 1e-9  # simulated time: no tolerance needed
    assert result.status in ("degraded", "failed", "spin_exit", "done")
    if result.status == "degraded":
        assert result.plan is not None and result.plan.cost_usd == pytest.approx(spent.cost_usd)
    calls = [e for e in run.trace()["events"] if e["type"] == "model_call"]
    assert sum(c["cost_usd"] for c in calls) == pytest.approx(spent.cost_usd)
    for c in calls:  # a call cut off at its deadline is charged the worst case of its capped request
        if "abandoned" in (c["error"] or ""):
            assert c["cost_usd"] >= c["max_tokens"] * price_out


class SleepyBackend(SimBackend):
    """A provider that really takes its time and ignores the timeout it is given."""

    def __init__(self, plan, prices, stop):
        super().__init__(plan, SimClock(), prices)
        self.stop = stop

    def complete(self, model, messages, *, max_tokens, timeout, metadata):
        latency = self.plan[self.n % len(self.plan)][0]
        self.stop.wait(latency)  # real seconds, whatever the timeout says
        return super().complete(model, messages, max_tokens=max_tokens, timeout=None, metadata=metadata)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(latencies=st.lists(st.floats(0.0, 0.6), min_size=1, max_size=6), max_duration=st.floats(0.1, 0.4))
def test_wall_clock_deadline_is_hard(tmp_path_factory, latencies, max_duration):
    """Real time, real threads: no run ends over max_duration_seconds by more than the tolerance."""
    stop = threading.Event()
    plan = [(latency, 50, None, 0) for latency in latencies]
    agent = Agent(model="sim/model", guarantees=ExecutionGuarantees(max_duration_seconds=max_duration),
                  max_iterations=10, memory=False, workdir=tmp_path_factory.mktemp("w"))
    run = Run(agent, "keep working", backend=SleepyBackend(plan, (1e-6, 4e-6), stop))
    try:
        result = run.run()
    finally:
        stop.set()  # let the abandoned calls' threads end
    assert result.duration_s <= max_duration + DURATION_TOLERANCE_S
    assert run.budget.spent.cost_usd <= agent.guarantees.max_cost_usd
    if any(latency > max_duration for latency in latencies[:1]):
        first = next(e for e in run.trace()["events"] if e["type"] == "model_call")
        assert first["error_kind"] == "timeout" and "abandoned" in first["error"] and first["cost_usd"] > 0


def test_time_limit_holds_against_a_slow_real_server(tmp_path):
    import_litellm()  # seconds of import would count against the budget
    server = FaultServer().start()
    try:
        server.script("slow", ["slow:30"])  # a reply that would come far too late
        opts = {"openai/slow": {"api_base": server.api_base, "api_key": "k"}}
        agent = Agent(model="openai/slow", guarantees=ExecutionGuarantees(max_duration_seconds=1.0),
                      memory=False, workdir=tmp_path, tools=["finish"])
        run = Run(agent, "anything", backend=LiteLLMBackend(opts))
        result = run.run()
    finally:
        server.stop()
    assert result.status == "degraded" and "time limit" in result.reason
    assert result.duration_s <= 1.0 + DURATION_TOLERANCE_S
    calls = [e for e in run.trace()["events"] if e["type"] == "model_call"]
    assert calls and all(c["timeout_s"] <= 1.0 for c in calls)
    assert calls[-1]["error_kind"] == "timeout"


def test_interrupt_cancels_a_call_that_never_answers(tmp_path):
    """Interrupt Kernel (SIGINT) breaks the wait for a hung call at once; the run is cancelled."""
    import_litellm()
    server = FaultServer().start()
    main = threading.main_thread().ident
    stop = threading.Event()

    def interrupt_once_the_call_is_in_flight():
        # Interrupt Kernel while the request hangs at the server (a fixed delay could land in the
        # run's own start-up on a slow machine, where it tests something else)
        while not stop.is_set() and server.requests["hang"] < 1:
            time.sleep(0.01)
        if not stop.is_set():
            time.sleep(0.2)
            signal.pthread_kill(main, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_once_the_call_is_in_flight, daemon=True)
    try:
        server.script("hang", ["slow:30"])
        opts = {"openai/hang": {"api_base": server.api_base, "api_key": "k"}}
        agent = Agent(model="openai/hang", memory=False, workdir=tmp_path, tools=["finish"])
        run = Run(agent, "anything", backend=LiteLLMBackend(opts))
        interrupter.start()
        result = run.run()
    finally:
        stop.set()
        server.stop()
    assert result.status == "cancelled" and result.duration_s < 10  # the server would answer after 30 s
    call = [e for e in run.trace()["events"] if e["type"] == "model_call"][-1]
    assert call["ok"] is False and call["error_kind"] == "cancelled"
    assert agent.breakers.metrics()["primary"]["total_failures"] == 0  # not the provider's fault


def test_budget_burn_degrades_with_a_plan_and_override_needs_confirmation(tmp_path, caplog):
    agent = Agent(model="memfit/budget-burn", workdir=tmp_path, memory=False)
    run = agent.start("Summarise each of the four chapters in book/, then give an overall summary.")
    with caplog.at_level(logging.WARNING, logger="memfit_jupyter"):
        result = run.run()
    assert result.status == "degraded"
    assert result.cost_usd <= 1.0
    plan = result.plan
    assert "cost limit" in plan.reason and plan.partial_result.startswith("Chapter ")
    assert any("override" in r for r in plan.recommendations)
    assert plan.calls == result.calls and plan.cost_usd == pytest.approx(result.cost_usd)
    violations = [e for e in run.trace()["events"] if e["type"] == "guarantee" and e["violated"]]
    assert violations and violations[0]["limit"] == "max_cost_usd" and violations[0]["cost_usd"] <= 1.0
    assert any("guarantee violated" in r.message and "max_cost_usd" in r.getMessage() for r in caplog.records)
    assert [e["type"] for e in run.trace()["events"]][-2:] == ["degradation", "run_end"]

    with pytest.raises(OverrideRefused, match="confirm=True"):
        run.override(max_cost_usd=3.0)
    assert run.status == "degraded" and run.done
    with pytest.raises(ValueError, match="not above"):
        run.override(confirm=True, max_cost_usd=0.5)
    with pytest.raises(ValueError, match="unknown limit"):
        run.override(confirm=True, max_tokens=5)

    run.override(confirm=True, max_cost_usd=3.0)
    overrides = [e for e in run.trace()["events"] if e["type"] == "guarantee" and e.get("override")]
    assert overrides[0]["confirmed"] is True and overrides[0]["limits"]["max_cost_usd"] == 3.0
    result = run.run()
    assert result.status == "done" and 1.0 < result.cost_usd <= 3.0
    with pytest.raises(OverrideRefused, match="'done'"):
        run.override(confirm=True, max_cost_usd=5.0)


def test_recursive_limit_cuts_a_fan_out_and_the_run_degrades(tmp_path):
    agent = Agent(model="memfit/disagree", samples=6, workdir=tmp_path, memory=False,
                  guarantees=ExecutionGuarantees(max_recursive_calls=4))
    run = agent.start("In which year was the Peace of Westphalia signed?")
    result = run.run()
    assert result.status == "degraded" and "recursive" in result.reason
    assert run.budget.recursive_calls == 4
    assert any("max_recursive_calls" in r for r in result.plan.recommendations)
    synthesis = [e for e in run.trace()["events"] if e["type"] == "synthesis"]
    assert len(synthesis[0]["samples"]) == 4  # the samples that did run are kept and combined
    assert result.plan.partial_result  # the partial synthesis is the best answer so far


@pytest.mark.parametrize("settings, calls", [
    ({}, 1),  # MINIMAL reflection calls no model; triage waits for the run's end
    ({"reflection": "none", "memory": False}, 1),
    ({"reflection": "auto"}, 2),
    ({"reflection": "standard", "memory_triage": "events"}, 3),
    ({"reflection": "minimal", "memory_triage": "events"}, 2),
])
def test_the_estimate_counts_the_calls_an_iteration_makes(tmp_path, settings, calls):
    run = Agent(model="memfit/demo", workdir=tmp_path, **settings).start("add up data.txt")
    assert run.estimate()["calls_per_iteration"] == calls
