"""The reflection pipeline in whole runs: levels, model calls, timeline wording, cache, memory, faults."""

from __future__ import annotations

import dataclasses
import json

from memfit_jupyter import Agent
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.reflection import ReflectionExtension
from memfit_jupyter.reflection.pipeline import memory_query
from memfit_jupyter.tools import BUILTIN_TOOLS


def start(scenario, tmp_path, **kw):
    # No long-term memory unless a test asks: runs stay isolated and make no triage calls.
    kw.setdefault("memory", False)
    return Agent(model=f"memfit/{scenario}", workdir=tmp_path, **kw).start(load_scenario(scenario).task)


def events(run, type_):
    return [e for e in run.events if e.type == type_]


def calls(run, purpose):
    return [e for e in events(run, "model_call") if e["purpose"] == purpose]


def test_minimal_is_a_record_without_a_model_call(tmp_path):
    run = start("demo", tmp_path)
    assert run.run().status == "done"
    reflections = events(run, "reflection")
    assert [e["level_name"] for e in reflections] == ["MINIMAL"] * 3
    assert not calls(run, "reflection")
    assert not [t for t in run.timeline.entries if t.kind == "reflection"]
    fields = {"level", "level_name", "trigger", "action_type", "tool", "success", "summary", "suggestions",
              "impact", "memory_used", "ok", "error"}
    assert set(reflections[0].fields()) == fields


def test_failure_gets_critical_reflection_in_the_seeds_words(tmp_path):
    run = start("spin-demo", tmp_path)
    run.step()
    reflection = events(run, "reflection")[0]
    assert (reflection["level"], reflection["level_name"], reflection["ok"]) == (4, "CRITICAL", True)
    assert reflection["trigger"].startswith("failure")
    assert reflection["suggestions"] and reflection["impact"]["negative_effects"]
    assert calls(run, "reflection")[0]["tier"] == "primary"
    text = next(t.content for t in run.timeline.entries if t.kind == "reflection")
    assert text.startswith("✗ [CRITICAL REFLECTION] Action 'read' FAILED")
    assert "MANDATORY RECOMMENDATIONS FOR FUTURE ACTIONS:\n1. Read the error message" in text
    # the next action prompt carries it, in the timeline and in the cached reflections
    prompt = json.dumps(run.next_prompt())
    assert "CRITICAL REFLECTION" in prompt and "Your recent self-reflections" in prompt


def test_requested_level_gives_a_success_reflection(tmp_path):
    run = start("healthy-long", tmp_path)
    assert run.run().status == "done"
    deep = [e for e in events(run, "reflection") if e["level_name"] != "MINIMAL"]
    assert [(e.iteration, e["level_name"]) for e in deep] == [(9, "DEEP")]
    assert deep[0]["impact"]["side_effects"] == ["changed lines 3-4 of report/summary.md"]
    text = next(t.content for t in run.timeline.entries if t.kind == "reflection")
    assert text.startswith("✓ [REFLECTION] Action 'edit' EXECUTED SUCCESSFULLY")


def test_forced_level_wins_and_complex_tools_get_deep(tmp_path):
    forced = start("demo", tmp_path / "forced", reflection="standard")
    assert forced.run().status == "done"
    # every action but the final answer gets a STANDARD model reflection, on the fast tier
    assert [e["level_name"] for e in events(forced, "reflection")] == ["STANDARD", "STANDARD", "MINIMAL"]
    assert len(calls(forced, "reflection")) == 2
    assert events(forced, "reflection")[0]["trigger"] == "forced: reflection=standard"

    heavy = dataclasses.replace(BUILTIN_TOOLS["python"], complex=True)
    run = start("demo", tmp_path / "complex", extra_tools=[heavy])
    assert run.run().status == "done"
    assert [e["level_name"] for e in events(run, "reflection")] == ["MINIMAL", "DEEP", "MINIMAL"]


def test_cache_keeps_the_three_most_recent(tmp_path):
    run = start("spin-demo", tmp_path)
    assert run.run().status == "done"
    ext = next(e for e in run.extensions if isinstance(e, ReflectionExtension))
    assert [r.iteration_num for r in ext.reflector.cache] == [4, 5, 6]
    assert len(ext.reflections) == 6
    section = ext.system_sections(run)[0]
    assert "iteration 4" in section and "iteration 3" not in section
    # the last action call (iteration 6) saw the reflections of iterations 3 to 5
    sent = run.last_prompt[0]["content"]
    assert "iteration 3, action 'read' with shell, CRITICAL" in sent
    assert "iteration 5, action 'read' with read_file, MINIMAL: succeeded." in sent
    assert "iteration 2," not in sent


def test_a_failing_reflection_or_spin_analysis_leaves_the_run_going(tmp_path):
    run = start("reflection-faults", tmp_path)
    result = run.run()
    assert result.status == "done", result.reason
    reflections = events(run, "reflection")
    assert [(e.iteration, e["ok"]) for e in reflections[:3]] == [(1, False), (2, False), (3, True)]
    assert reflections[0]["error"].startswith("timeout")
    assert reflections[1]["error"].startswith("server_error")
    # the failure line still reaches the model, without invented recommendations
    first = next(t.content for t in run.timeline.entries if t.kind == "reflection")
    assert first.startswith("✗ [CRITICAL REFLECTION] Action 'read' FAILED")
    assert "MANDATORY" not in first
    # the layer-2 call timed out: layer 1's finding stands and the loop is still broken
    layer2 = next(e for e in events(run, "spin") if e["layer"] == 2)
    assert layer2["is_spinning"] is True and "spin analysis call failed (timeout" in layer2["reason"]
    assert any(t.kind == "logic_spin_warning" for t in run.timeline.entries)


def test_memory_query_and_depth_by_level(tmp_path):
    class Found:
        def __init__(self, content):
            self.content = content

    class Recorder:
        """Stands in for a store: records the searches a reflection makes."""

        def __init__(self):
            self.searches = []

        def search(self, query, bytes_limit=None):
            self.searches.append((query, bytes_limit))
            return [Found("Last time `cat summary.txt` failed, the file was under reports/.")]

    for forced, depth in (("standard", 2048), ("deep", 5120), ("critical", 10240), ("minimal", None)):
        run = start("spin-demo", tmp_path / forced, reflection=forced)
        run.services["memory"] = Recorder()  # the memory service, replaced
        run.step()
        searches = run.memory.searches
        if depth is None:
            assert searches == [] and events(run, "reflection")[0]["memory_used"] == []
            continue
        query, limit = searches[0]
        assert limit == depth
        assert query == "action 'read' execution analysis failure success pattern exit code 1"
        assert events(run, "reflection")[0]["memory_used"] == [
            "Last time `cat summary.txt` failed, the file was under reports/."]


def test_memory_query_on_success_has_no_error():
    from memfit_jupyter.reflection import ActionReflection

    ok = ActionReflection(action_type="read", action_params={}, execution_time=0.0, iteration_num=1,
                          success=True)
    assert memory_query(ok) == "action 'read' execution analysis failure success pattern"


def test_replay_repeats_reflections_and_spins(tmp_path):
    run = start("spin-demo", tmp_path)
    run.run()
    replayed = Agent.replay(run.trace(), workdir=tmp_path)
    replayed.run()
    keep = ("reflection", "spin")
    original = [e.to_dict() for e in run.events if e.type in keep]
    again = [e.to_dict() for e in replayed.events if e.type in keep]
    assert again == original
