"""A budget never buys a truncated reply: under any max_cost_usd, no reply the run paid for was cut
off by the budget's own cap; a call it cannot pay for at a useful size is not made."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfit_jupyter import Agent
from memfit_jupyter.reliability.guarantees import ExecutionGuarantees

SCENARIOS = ("budget-burn", "demo", "healthy-long", "context-overflow", "disagree")


def model_calls(run):
    return [e for e in run.trace()["events"] if e["type"] == "model_call"]


def cut_by_budget(call):
    """A reply that stopped at its cap where the cap was the budget's, not the caller's."""
    capped = call["max_tokens"] is not None and call["requested_max_tokens"] is not None \
        and call["max_tokens"] < call["requested_max_tokens"]
    return call["ok"] and capped and call.get("finish_reason") == "length"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(scenario=st.sampled_from(SCENARIOS), max_cost=st.floats(0.0001, 1.5),
       mode=st.sampled_from(["text", "schema", "tools"]))
def test_no_reply_is_cut_off_by_the_budget(tmp_path_factory, scenario, max_cost, mode):
    agent = Agent(model=f"memfit/{scenario}", guarantees=ExecutionGuarantees(max_cost_usd=max_cost),
                  workdir=tmp_path_factory.mktemp("w"), memory=False, structured=mode, max_iterations=12)
    run = agent.start("do the task")
    result = run.run()
    calls = model_calls(run)
    assert not [c for c in calls if cut_by_budget(c)]
    assert run.budget.spent.cost_usd <= max_cost + 1e-12
    assert result.status in ("done", "degraded", "failed", "spin_exit", "escalated")
    if result.status == "degraded" and "cost limit" in result.reason:
        assert "useful reply" in result.reason


def test_budget_burn_degrades_before_buying_a_cut_off_reply(tmp_path):
    """The case that broke: $0.02 cannot pay for one 1,000-token reply at $2e-4 a token: nothing is bought."""
    agent = Agent(model="memfit/budget-burn", guarantees=ExecutionGuarantees(max_cost_usd=0.02),
                  workdir=tmp_path, memory=False)
    run = agent.start("Summarise each of the four chapters in book/.")
    result = run.run()
    assert result.status == "degraded" and "useful reply" in result.reason
    assert model_calls(run) == [] and result.cost_usd == 0.0
    assert result.plan is not None and result.plan.cost_usd == 0.0


def test_a_tight_budget_stops_at_a_learned_size(tmp_path):
    """After a few replies the useful size is what the run has seen, not the whole cap: a budget
    that cannot pay for 1,024 tokens still buys replies it has seen fit."""
    probe = Agent(model="memfit/budget-burn", workdir=tmp_path / "p", memory=False).start("x")
    probe.run()
    per_call = max(c["cost_usd"] for c in model_calls(probe))
    agent = Agent(model="memfit/budget-burn", guarantees=ExecutionGuarantees(max_cost_usd=per_call * 2.7),
                  workdir=tmp_path / "r", memory=False, reflection="none")
    run = agent.start("x")
    result = run.run()
    calls = model_calls(run)
    assert result.status == "degraded" and len(calls) >= 1
    assert all(not cut_by_budget(c) for c in calls)
    assert result.plan.partial_result or result.plan.iterations >= 1


@pytest.mark.parametrize("mode", ["text", "schema", "tools"])
def test_the_whole_demo_runs_in_every_structured_mode(tmp_path, mode):
    run = Agent(model="memfit/demo", workdir=tmp_path, structured=mode, memory_triage="end").start(
        "what is the total of the numbers in data.txt?")
    result = run.run()
    calls = model_calls(run)
    assert result.status == "done" and "42" in result.answer
    assert {c["structured"] for c in calls} == {mode}
    assert {c["purpose"] for c in calls} >= {"action", "triage"}
    assert not [e for e in run.trace()["events"] if e["type"] == "format_error"]
