"""Limits of the wrong kind fail where they are made, with one line naming the field and the value."""

import math

import pytest

from memfit_jupyter import Agent, ExecutionGuarantees
from memfit_jupyter.context import ContextConfig
from memfit_jupyter.reflection.config import ReflectionConfig
from memfit_jupyter.reliability.config import ReliabilityConfig


@pytest.mark.parametrize("field, value", [
    ("max_cost_usd", "0.5"), ("max_cost_usd", math.inf), ("max_cost_usd", math.nan), ("max_cost_usd", -1.0),
    ("max_cost_usd", 0), ("max_cost_usd", None), ("max_duration_seconds", math.nan),
    ("max_duration_seconds", math.inf), ("max_duration_seconds", -5), ("max_duration_seconds", "60"),
    ("max_recursive_calls", 2.5), ("max_recursive_calls", -1), ("max_recursive_calls", True),
])
def test_execution_guarantees_refuse_a_limit_of_the_wrong_kind(field, value):
    with pytest.raises(ValueError) as info:
        ExecutionGuarantees(**{field: value})
    message = str(info.value)
    assert message.startswith(f"{field} must be ") and message.endswith(f"got {value!r}")
    assert "\n" not in message


def test_good_limits_are_kept_as_given():
    g = ExecutionGuarantees(max_cost_usd=0.25, max_duration_seconds=3, max_recursive_calls=0)
    assert (g.max_cost_usd, g.max_duration_seconds, g.max_recursive_calls) == (0.25, 3, 0)


@pytest.mark.parametrize("config, field, value", [
    (ReliabilityConfig, "failure_threshold", math.nan), (ReliabilityConfig, "recovery_timeout", math.inf),
    (ReliabilityConfig, "samples", 0), (ReliabilityConfig, "shell_timeout_s", -1.0),
    (ContextConfig, "keep_last", -1), (ContextConfig, "max_trials", 1.5),
    (ContextConfig, "summary_input_chars", "lots"),
    (ReflectionConfig, "spin_threshold", "3"), (ReflectionConfig, "spin_threshold", 1),
    (ReflectionConfig, "spin_threshold", 2.5),
])
def test_other_settings_of_the_limits_refuse_the_wrong_kind(config, field, value):
    with pytest.raises(ValueError, match=f"^{field} must be .*got {value!r}$"):
        config(**{field: value})


def test_an_override_to_nan_is_refused_and_leaves_the_limits(tmp_path):
    run = Agent(model="memfit/budget-burn", workdir=tmp_path, memory=False,
                guarantees=ExecutionGuarantees(max_cost_usd=0.0005)).start("burn")
    assert run.run().status == "degraded"
    before = run.budget.guarantees
    with pytest.raises(ValueError, match="^max_cost_usd must be a finite number greater than 0, got nan$"):
        run.override(confirm=True, max_cost_usd=math.nan)
    assert run.budget.guarantees is before and run.status == "degraded"


@pytest.mark.parametrize("option", ["--max-cost inf", "--max-cost nan", "--max-duration nan", "--max-duration inf"])
def test_the_magic_turns_a_limit_of_the_wrong_kind_into_one_usage_line(tmp_path, monkeypatch, option):
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(tmp_path)
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext memfit_jupyter")
    result = shell.run_cell(f"%%memfit_task --model memfit/demo --no-memory --quiet --name r {option}\nAdd up data.txt")
    error = result.error_in_exec
    field = "max_cost_usd" if "cost" in option else "max_duration_seconds"
    assert isinstance(error, UsageError), error
    assert str(error).startswith(f"{field} must be a finite number") and "\n" not in str(error)
    assert "r" not in shell.user_ns  # no run was started


def test_an_unknown_synthesis_strategy_is_refused_when_the_agent_is_made_not_when_samples_are_paid_for(tmp_path):
    with pytest.raises(ValueError, match="^unknown synthesis strategy 'bogus'; choose one of: weighted, consensus, diverse$"):
        Agent(model="memfit/demo", workdir=tmp_path, memory=False, strategy="bogus")
    assert ReliabilityConfig(strategy="Consensus").strategy == "Consensus"  # read without case, as synthesis reads it
