"""The reflection decision tree and the pure spin detectors, at their boundaries."""

from __future__ import annotations

import pytest

from memfit_jupyter.records import ActionRecord, ReflectionLevel, ToolResult
from memfit_jupyter.reflection import ReflectionConfig, decide_level, same_action_type_spin
from memfit_jupyter.reflection import detectors as d
from memfit_jupyter.tools import BUILTIN_TOOLS, Param, Tool


def rec(i, action_type="read", tool="shell", params=None, ok=True, output="out", error=None, **data):
    return ActionRecord(iteration=i, thought="", action_type=action_type, tool=tool,
                        params=params if params is not None else {"command": f"cmd {i}"},
                        output=output, ok=ok, error=error, data=data)


def history(n, **kw):
    return [rec(i, **kw) for i in range(1, n + 1)]


def level(records, **kw):
    return decide_level(records[-1], records, **kw)[0]


# --- layer 1 -------------------------------------------------------------------------
def test_layer1_fires_at_n_not_at_n_minus_1():
    assert not same_action_type_spin(history(2), 3)
    assert same_action_type_spin(history(3), 3)
    same = {"params": {"command": "cmd"}}  # the same step, the same output: no progress
    assert d.layer1(history(3, **same), 3).consecutive_count == 3
    assert d.layer1(history(2, **same), 3) is None
    assert not same_action_type_spin(history(3), 4)
    assert same_action_type_spin(history(4), 4)


def test_layer1_needs_same_type_and_same_tool():
    mixed_tool = history(2) + [rec(3, tool="python", params={"code": "1"})]
    mixed_type = history(2) + [rec(3, action_type="list")]
    assert not same_action_type_spin(mixed_tool, 3)
    assert not same_action_type_spin(mixed_type, 3)


def test_layer1_ignores_unusable_replies_between_actions():
    records = history(2) + [rec(3, action_type="invalid_reply", tool="", ok=False, error="x"), rec(4)]
    assert same_action_type_spin(records, 3)


# --- the decision tree ---------------------------------------------------------------
def test_simple_success_is_minimal():
    assert decide_level(rec(1), [rec(1)]) == (ReflectionLevel.MINIMAL, "default: a simple action that succeeded")


def test_failure_is_critical_even_when_a_lower_level_is_asked_for():
    failed = rec(1, ok=False, error="exit code 1", requested_reflection="minimal")
    assert level([failed]) == ReflectionLevel.CRITICAL


def test_spin_after_iteration_5_is_standard_but_not_at_5():
    at5 = [rec(i) for i in range(3, 6)]
    at6 = [rec(i) for i in range(4, 7)]
    assert level(at5) == ReflectionLevel.MINIMAL
    assert level(at6) == ReflectionLevel.STANDARD
    assert "iteration 6 > 5" in decide_level(at6[-1], at6)[1]
    # no spin at iteration 6: minimal
    varied = [rec(4), rec(5, action_type="list"), rec(6)]
    assert level(varied) == ReflectionLevel.MINIMAL
    # the threshold is configurable
    assert level(at6, iteration_threshold=6) == ReflectionLevel.MINIMAL


def test_requested_level_and_tool_level():
    assert level([rec(1, requested_reflection="deep")]) == ReflectionLevel.DEEP
    asking = Tool("probe", "", {}, lambda ctx: ToolResult(), reflection_level=ReflectionLevel.STANDARD)
    assert level([rec(1, tool="probe")], tool=asking) == ReflectionLevel.STANDARD
    # the action's own request beats its tool's; "none" and nonsense are no request
    assert level([rec(1, tool="probe", requested_reflection="critical")], tool=asking) == ReflectionLevel.CRITICAL
    assert level([rec(1, requested_reflection="none")]) == ReflectionLevel.MINIMAL
    assert level([rec(1, requested_reflection="very deep")]) == ReflectionLevel.MINIMAL
    # a request beats the spin branch
    spin = [rec(i) for i in range(4, 6)] + [rec(6, requested_reflection="deep")]
    assert level(spin) == ReflectionLevel.DEEP


def test_complex_tool_is_deep():
    heavy = Tool("train", "", {"epochs": Param("int")}, lambda ctx, epochs: ToolResult(), complex=True)
    assert level([rec(1, tool="train")], tool=heavy) == ReflectionLevel.DEEP
    assert level([rec(1, tool="read_file")], tool=BUILTIN_TOOLS["read_file"]) == ReflectionLevel.MINIMAL


def test_forced_level_wins_over_everything():
    failed = rec(1, ok=False, error="boom")
    assert level([failed], forced=ReflectionLevel.MINIMAL) == ReflectionLevel.MINIMAL
    assert level([rec(1)], forced=ReflectionLevel.DEEP) == ReflectionLevel.DEEP
    assert decide_level(rec(1), [rec(1)], forced=ReflectionLevel.STANDARD)[1] == "forced: reflection=standard"


# --- config --------------------------------------------------------------------------
def test_config_rejects_bad_values_with_one_line():
    with pytest.raises(ValueError, match="unknown detector.*nope"):
        ReflectionConfig(detectors={"nope": False})
    with pytest.raises(ValueError, match="unknown reflection level"):
        ReflectionConfig(reflection="loud")
    with pytest.raises(ValueError, match="spin_threshold"):
        ReflectionConfig(spin_threshold=1)
    with pytest.raises(ValueError, match="max_consecutive_spin_warnings"):
        ReflectionConfig(max_consecutive_spin_warnings=-1)
    assert ReflectionConfig().memory_bytes == {2: 2048, 3: 5120, 4: 10240}
