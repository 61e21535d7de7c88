"""The reflection pipeline in whole runs: levels, model calls, timeline wording, cache, memory, faults."""

from __future__ import annotations

import dataclasses
import json

from memfit_jupyter import Agent
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.reflection import ReflectionConfig, ReflectionExtension
from memfit_jupyter.reflection.pipeline import memory_query
from memfit_jupyter.tools import BUILTIN_TOOLS


def start(scenario, tmp_path, **kw):
    # No long-term memory unless a test asks: runs stay isolated and make no triage calls.
    kw.setdefault("memory", False)
    # The decision tree, which these tests are about (the default is MINIMAL: no model call).
    kw.setdefault("reflection", "auto")
    # Spin warnings in the model's prompt, which the scripted models answer (the default: the person's only).
    kw.setdefault("spin_warnings", "prompt")
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
    # the next action prompt carries it in the timeline; the cache does not repeat what is in view
    prompt = json.dumps(run.next_prompt())
    assert prompt.count("CRITICAL REFLECTION") == 1 and "Your recent self-reflections" not in prompt
    # the seed's cache (every reflection, in the system prompt) repeats it there too
    seed = start("spin-demo", tmp_path / "seed", configs=[ReflectionConfig(reflection="auto", cache_kinds="all",
                                                                     prompt_place="system")])
    seed.step()
    assert "Your recent self-reflections" in seed.next_prompt()[0]["content"]


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


def test_cache_keeps_the_three_most_recent_informative_ones_at_the_end(tmp_path):
    run = start("spin-demo", tmp_path)
    assert run.run().status == "done"
    ext = next(e for e in run.extensions if isinstance(e, ReflectionExtension))
    # iterations 1-3 failed (CRITICAL), 4-6 succeeded (MINIMAL): only the failures tell the model something
    assert [(r.iteration_num, r.reflection_level) for r in ext.reflector.cache] == [
        (1, "CRITICAL"), (2, "CRITICAL"), (3, "CRITICAL")]
    assert len(ext.reflections) == 6 and ext.system_sections(run) == []
    # their timeline text is still in view, so the section at the end of the prompt is empty
    assert ext.prompt_tail(run) == []
    # once the timeline no longer shows them (a flush moved them to recall), the cache brings them back
    run.timeline.replace_entries([e for e in run.timeline.entries if e.kind != "reflection"])
    tail = ext.prompt_tail(run)[0]
    assert tail.startswith("## Your recent self-reflections") and "iteration 1, action 'read' with shell" in tail
    assert run.next_prompt()[-1]["content"].endswith(tail)  # after the timeline, not in the system prompt
    assert tail not in run.next_prompt()[0]["content"]


def test_the_seeds_cache_keeps_every_reflection_in_the_system_prompt(tmp_path):
    run = start("spin-demo", tmp_path, configs=[ReflectionConfig(reflection="auto", cache_kinds="all",
                                                                 prompt_place="system", spin_warnings="prompt")])
    assert run.run().status == "done"
    ext = next(e for e in run.extensions if isinstance(e, ReflectionExtension))
    assert [r.iteration_num for r in ext.reflector.cache] == [4, 5, 6]
    section = ext.system_sections(run)[0]
    assert "iteration 4" in section and "iteration 3" not in section and ext.prompt_tail(run) == []
    # the last action call (iteration 6) saw the reflections of iterations 3 to 5
    sent = run.last_prompt[0]["content"]
    assert "iteration 3, action 'read' with shell, CRITICAL" in sent
    assert "iteration 5, action 'read' with read_file, MINIMAL: succeeded." in sent
    assert "iteration 2," not in sent


def test_a_reflection_prompt_shows_the_action_once(tmp_path):
    from memfit_jupyter.reflection import pipeline

    seen = []
    original = pipeline.reflection_messages
    try:
        pipeline.reflection_messages = lambda *a, **k: seen.append(original(*a, **k)) or seen[-1]
        run = start("healthy-long", tmp_path)
        assert run.run().status == "done"
    finally:
        pipeline.reflection_messages = original
    [messages] = seen  # one DEEP reflection, at iteration 9
    user = messages[1]["content"]
    assert "Thought: Add the shares to the report lines." in user
    assert user.count("replaced lines 3..4 of report/summary.md") == 1  # not again in the recent timeline
    assert "[action #8]" in user and "[action #9]" not in user
    assert "resource_usage" not in user and "changed lines 3-4" in user


def test_a_failing_reflection_or_spin_analysis_leaves_the_run_going(tmp_path):
    run = start("reflection-faults", tmp_path, detectors={"logic_spin": True})
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
