"""The stopping curve of spin_eval.py on small runs written here: a failed run that a live run
with ``max_bad_replies=3`` would have ended (three rejected replies in a row), a resolved run it
would not, a resolved run it would have ended; steps and tokens after the end, and the warning
ratio; and that by default the streaks end nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))

import spin_stopping  # noqa: E402

from memfit_jupyter import load_trajectory  # noqa: E402

NO_CALLS = "No tool calls found in the response. Every response MUST include at least one tool call."


def _traj(steps):
    """A mini-swe-agent 2.x trajectory: ``steps`` are commands, or None for a rejected reply."""
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Fix the bug."}]
    for n, cmd in enumerate(steps):
        if cmd is None:
            messages.append({"role": "user", "content": NO_CALLS, "extra": {"interrupt_type": "FormatError"}})
            continue
        call = {"id": f"c{n}", "type": "function", "function": {"name": "bash",
                                                              "arguments": json.dumps({"command": cmd})}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call],
                      "extra": {"response": {"usage": {"prompt_tokens": 90, "completion_tokens": 10}}}},
                     {"role": "tool", "tool_call_id": f"c{n}", "content": f"<returncode>0</returncode>\n"
                                                                           f"<output>\nout {n}\n</output>"}]
    return load_trajectory({"info": {"exit_status": "Submitted"}, "messages": messages,
                            "trajectory_format": "mini-swe-agent-1.1"})


def test_the_curve_counts_what_ending_early_saves_and_costs():
    healthy = [f"cat f{n}.py" for n in range(6)]
    runs = [
        # failed: three rejected replies at steps 3-5 (the loop gives up at step 5), then 4 more steps
        {"source": "a", "resolved": False, "trace": _traj(["ls", "cat a.py", None, None, None,
                                                           "cat b.py", "cat c.py", "cat d.py", "cat e.py"])},
        {"source": "a", "resolved": True, "trace": _traj(healthy)},
        # resolved, but it too had three rejections in a row before recovering: a live run loses it
        {"source": "b", "resolved": True, "trace": _traj(["ls", None, None, None, "cat a.py", "cat b.py"])},
    ]
    curves = spin_stopping.curve(runs, [("default", "x", {}), ("first-built", "x", {"max_bad_replies": 3})],
                                 by="source")
    default, p = curves["all"]
    # by default a streak of rejected replies warns and ends nothing: a live run keeps both runs
    assert default["failed_ended"] == 0 and default["resolved_ended"] == 0 and default["ended_by_bad_replies"] == 0
    assert default["failed_warned_pct"] == 100.0 and default["resolved_warned_pct"] == 50.0
    # with the first-built limit of three, the loop gives up on both
    assert p["failed_runs"] == 1 and p["resolved_runs"] == 2
    assert p["failed_ended"] == 1 and p["failed_steps_saved"] == 4
    assert p["failed_steps_saved_pct"] == round(100 * 4 / 9, 1)
    assert p["failed_tokens_saved"] == 4 * 100  # the four steps after the end, 100 tokens a call
    assert p["resolved_ended"] == 1 and p["resolved_ended_pct"] == 50.0 and p["resolved_steps_lost"] == 2
    assert p["ended_by_bad_replies"] == 2
    assert p["failed_warned_pct"] == 100.0 and p["resolved_warned_pct"] == 50.0 and p["warning_ratio"] == 2.0
    assert curves["a"][1]["resolved_ended"] == 0 and curves["b"][1]["resolved_ended"] == 1


def test_a_run_that_nothing_ends_saves_nothing():
    trace = _traj(["ls", "cat a.py"])
    from memfit_jupyter import analyze

    costs = spin_stopping.run_costs(trace, analyze(trace)["analysis"])
    assert costs == {"steps": 2, "tokens": 200, "ended": False, "ended_by": None, "steps_after": 0,
                     "tokens_after": 0, "warned": False}
    p = spin_stopping.point([(True, costs)])
    assert p["failed_runs"] == 0 and p["warning_ratio"] is None and p["failed_steps_saved_pct"] is None
