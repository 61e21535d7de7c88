"""Round trip: a run exported as OTLP/JSON reads back (with the trajectory importer) into a trace
whose timeline and findings are the original's."""

from __future__ import annotations

import pytest

from memfit_jupyter import Agent, otel
from memfit_jupyter.llm.scenarios import load_scenario

try:
    from memfit_jupyter import load_trajectory
except ImportError:  # the importer is another package's; without it there is nothing to read back
    pytest.skip("memfit_jupyter.load_trajectory is not available", allow_module_level=True)

#: What each finding must keep through the round trip.
FINDING_FIELDS = {
    "spin": ("layer", "detector", "reason", "is_spinning"),
    "reflection": ("level", "level_name", "trigger", "success"),
    "breaker": ("tier", "from_state", "to_state", "reason"),
    "synthesis": ("strategy", "confidence", "low_confidence"),
    "context": ("used_tokens", "window", "watermark"),
}


def findings(trace):
    """The findings with their fields, as a sorted list: span events travel on the span they
    happened in, so a reader that walks span by span may interleave two spans' findings."""
    return sorted(((e["type"], *(e.get(k) for k in FINDING_FIELDS[e["type"]]))
                   for e in trace["events"] if e["type"] in FINDING_FIELDS), key=repr)


def timeline(trace):
    steps = []
    for e in trace["events"]:
        if e["type"] == "action" and e["tool"]:
            steps.append(("action", e["tool"], e["action_type"], e["params"]))
        elif e["type"] == "observation" and e["tool"]:
            steps.append(("observation", e["tool"], e["ok"], e["output"]))
    return steps


@pytest.mark.parametrize("scenario", ["spin-demo", "outage"])
def test_an_exported_run_reads_back_with_its_timeline_and_findings(scenario, tmp_path):
    (tmp_path / "data.txt").write_text("1 2 3\n")
    kw = ({"fallback_model": "memfit/demo", "recovery_timeout": 0.05} if scenario == "outage"
          else {"spin_warnings": "prompt"})  # spin-demo turns around once warned in its prompt
    run = Agent(model=f"memfit/{scenario}", workdir=tmp_path, memory=False, **kw).start(
        load_scenario(scenario).task)
    run.run()
    original = run.trace()
    path = tmp_path / "run.otlp.json"
    otel.export(original, path=path, content=True)
    back = load_trajectory(path)
    assert back["status"] == original["status"]
    assert back["task"] == original["task"]
    assert back["totals"]["tokens"] == original["totals"]["tokens"]
    assert timeline(back) == timeline(original)
    assert findings(back) == findings(original)
    calls = [(e["purpose"], e["ok"], e["prompt_tokens"], e["completion_tokens"], e.get("finish_reason"))
             for e in original["events"] if e["type"] == "model_call"]
    assert any(c[-1] for c in calls)  # the scripted replies say why they stopped
    assert [(e["purpose"], e["ok"], e["prompt_tokens"], e["completion_tokens"], e.get("finish_reason"))
            for e in back["events"] if e["type"] == "model_call"] == calls
