"""Spin detection in whole runs of the scripted scenarios (real litellm provider, real files)."""

from __future__ import annotations

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.errors import SpinExit
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.reflection import ReflectionExtension, SpinDetectionResult, SpinVerdict


def start(scenario, tmp_path, **kw):
    # No long-term memory unless a test asks: runs stay isolated and make no triage calls.
    kw.setdefault("memory", False)
    # The decision tree and the layer-2 judge, which these tests are about (both off by default).
    kw.setdefault("reflection", "auto")
    kw["detectors"] = {"logic_spin": True, **kw.get("detectors", {})}
    # The warnings in the model's prompt, which the scripted models answer (the default shows them
    # to the person only).
    kw.setdefault("spin_warnings", "prompt")
    return Agent(model=f"memfit/{scenario}", workdir=tmp_path, **kw).start(load_scenario(scenario).task)


def events(run, type_):
    return [e for e in run.events if e.type == type_]


def fired(run):
    return [(e.iteration, e["detector"]) for e in events(run, "spin")]


def extension(run) -> ReflectionExtension:
    return next(e for e in run.extensions if isinstance(e, ReflectionExtension))


def test_spin_demo_breaks_out_with_reflection_on(tmp_path):
    run = start("spin-demo", tmp_path, memory=None)  # the defaults, long-term memory included
    result = run.run()
    assert result.status == "done", result.reason
    assert result.iterations == 6
    assert "Q3 revenue grew 12%" in result.answer
    spins = events(run, "spin")
    assert [(e["layer"], e["detector"]) for e in spins[:2]] == [(1, "same_action_type"), (2, "logic_spin")]
    assert {e.iteration for e in spins} == {3}
    warnings = [t for t in run.timeline.entries if t.kind == "logic_spin_warning"]
    assert len(warnings) == 1 and warnings[0].content.startswith("⚠️ [SPIN DETECTED]")
    assert "**Action type**: read" in warnings[0].content


def test_spin_demo_burns_to_max_iterations_with_reflection_none(tmp_path):
    run = start("spin-demo", tmp_path, reflection="none", max_iterations=8)
    result = run.run()
    assert result.status == "failed" and "max_iterations (8)" in result.reason
    assert result.iterations == 8
    assert not events(run, "spin") and not events(run, "reflection")
    assert not any(isinstance(e, ReflectionExtension) for e in run.extensions)


def test_no_detector_fires_on_demo_and_healthy_long(tmp_path):
    demo = start("demo", tmp_path / "demo")
    assert demo.run().status == "done"
    healthy = start("healthy-long", tmp_path / "healthy")
    result = healthy.run()
    assert result.status == "done" and result.iterations == 12
    assert fired(demo) == [] and fired(healthy) == []
    assert "north: 320 (71%)" in (tmp_path / "healthy" / "report" / "summary.md").read_text()


def test_logic_spin_layer_1_waits_for_no_progress_and_layer_2_confirms(tmp_path):
    run = start("logic-spin", tmp_path)
    result = run.run()
    assert result.status == "done" and result.answer == "Version 2.4.1 is going to be released."
    layer1 = [e.iteration for e in events(run, "spin") if e["layer"] == 1]
    layer2 = {e.iteration: e for e in events(run, "spin") if e["layer"] == 2}
    # the three productive reads bring new text each: layer 1 stays quiet, no model call is spent
    assert min(layer1) == 6 and not [e for e in events(run, "model_call") if e["purpose"] == "spin"
                                     and e.iteration < 6]
    # three guessed paths in a row fail the same way (the path aside): layer 1 fires, layer 2 confirms
    assert layer2[6]["is_spinning"] is True and layer2[6]["warning_count"] == 1
    assert layer2[7]["warning_count"] == 2
    assert {d for _, d in fired(run)} == {"same_action_type", "logic_spin"}
    warnings = [t.content for t in run.timeline.entries if t.kind == "logic_spin_warning"]
    assert "Change your approach" in warnings[0] and "SECOND WARNING" in warnings[1]
    assert "find . -name VERSION" in warnings[0]


def test_task_progressing_resets_the_warning_count(tmp_path):
    run = start("logic-spin", tmp_path, max_consecutive_spin_warnings=3)
    for _ in range(5):
        run.step()
    extension(run).spin.warnings = 2
    run.step()  # the third failed guess: layer 1 fires, and this time layer 2 sees a spin
    assert extension(run).spin.warnings == 3
    monitor = extension(run).spin
    progressing = SpinDetectionResult(is_spinning=False, layer=2, detector="logic_spin", is_task_progressing=True)
    monitor.analyse = lambda *_: progressing  # the judge now says the task moves on
    monitor.warnings = 2
    run.step()  # another failed guess: layer 1 fires again, layer 2 calls it progress
    assert extension(run).spin.warnings == 0
    assert events(run, "spin")[-1]["warning_count"] == 0


def test_a_judge_alone_warns_but_does_not_end_the_run(tmp_path):
    # logic-spin's loop is seen only by layer 1 and the judge: with one warning allowed, the
    # next confirmed spin would end the run, but no deterministic detector agrees: it warns again
    run = start("logic-spin", tmp_path, max_consecutive_spin_warnings=1, max_iterations=9)
    result = run.run()
    assert result.status == "failed" and "max_iterations (9)" in result.reason
    assert [e["warning_count"] for e in events(run, "spin") if e["layer"] == 2] == [1, 2, 3, 4]


def test_spin_exit_after_max_consecutive_warnings_when_the_evidence_repeats(tmp_path):
    run = start("spin-demo", tmp_path, max_consecutive_spin_warnings=1)
    monitor = extension(run).spin
    run.step()
    run.step()
    run.step()  # the third identical failing read: layer 1, layer 2, repeat_observation
    assert monitor.warnings == 1 and {d for _, d in fired(run)} >= {"repeat_observation"}
    evidence = SpinDetectionResult(is_spinning=True, layer="detector", detector="repeat_observation",
                                   reason="the same step gave the same output 4 times")
    with pytest.raises(SpinExit) as ended:
        monitor.apply(run, SpinVerdict(4, results=[evidence], confirmed=[evidence]))
    assert "after 1 spin warning" in str(ended.value) and len(ended.value.plan.tried) == 1
    assert ended.value.plan.tried[0].startswith("iteration 3: spin warning 1")


def test_repetition_rules_keep_the_first_build(tmp_path):
    # the first-built layer 1 fires on the productive reads too, and a judge alone can end the run
    run = start("logic-spin", tmp_path, extensions=[__import__("memfit_jupyter.reflection", fromlist=["x"])
                                                   .ReflectionConfig(reflection="auto", spin_rules="repetition",
                                                                     detectors={"logic_spin": True},
                                                                     max_consecutive_spin_warnings=1)])
    result = run.run()
    layer2 = {e.iteration: e for e in events(run, "spin") if e["layer"] == 2}
    assert layer2[3]["is_task_progressing"] is True
    assert result.status == "spin_exit" and result.iterations == 7
    assert run.trace()["status"] == "spin_exit"


def test_warnings_escalate_and_zero_means_never(tmp_path):
    run = start("demo", tmp_path, max_consecutive_spin_warnings=3)
    monitor = extension(run).spin
    found = SpinDetectionResult(is_spinning=True, layer="detector", detector="repeated_error",
                                action_type="read", reason="same error")
    for i in range(1, 4):
        monitor.apply(run, SpinVerdict(i, results=[found], confirmed=[found]))
    texts = [t.content for t in run.timeline.entries if t.kind == "logic_spin_warning"]
    assert "Change your approach" in texts[0]
    assert "SECOND WARNING" in texts[1]
    assert "FINAL WARNING" in texts[2] and "(warning 3 of 3)" in texts[2]
    with pytest.raises(SpinExit) as ended:
        monitor.apply(run, SpinVerdict(4, results=[found], confirmed=[found]))
    assert len(ended.value.plan.tried) == 3

    run2 = start("demo", tmp_path / "never")  # the default: 0, warn and never end
    never = extension(run2).spin
    for i in range(1, 12):
        never.apply(run2, SpinVerdict(i, results=[found], confirmed=[found]))
    assert never.warnings == 11


def test_quiet_iterations_reset_the_count(tmp_path):
    run = start("demo", tmp_path)
    monitor = extension(run).spin
    found = SpinDetectionResult(is_spinning=True, layer=1, detector="same_action_type")
    monitor.apply(run, SpinVerdict(1, results=[found], confirmed=[found]))
    for i in range(2, 2 + monitor.config.quiet_reset - 1):
        monitor.apply(run, SpinVerdict(i))
    assert monitor.warnings == 1
    monitor.apply(run, SpinVerdict(9))
    assert monitor.warnings == 0


def test_code_spin_is_caught_by_layer_3(tmp_path):
    run = start("code-spin", tmp_path)
    result = run.run()
    assert result.status == "done", result.reason
    assert fired(run) == [(5, "code_modify")]
    spin = events(run, "spin")[0]
    assert spin["layer"] == 3 and spin["consecutive_count"] == 3
    warning = next(t.content for t in run.timeline.entries if t.kind == "logic_spin_warning")
    assert "[CODE MODIFICATION SPIN WARNING]" in warning and "lines 3-3" in warning
    assert "Do not keep making small edits at the same place!" in warning
    assert "return sum(xs) / len(xs)" in (tmp_path / "stats.py").read_text()


def test_code_spin_detector_switched_off_burns(tmp_path):
    run = start("code-spin", tmp_path, detectors={"code_modify": False}, max_iterations=9)
    result = run.run()
    assert result.status == "failed" and result.iterations == 9
    assert fired(run) == []


def test_detectors_can_be_switched_off_by_name(tmp_path):
    # without layer 1, the exact-repeat detector still catches spin-demo's loop
    run = start("spin-demo", tmp_path / "a", detectors={"same_action_type": False})
    assert run.run().status == "done"
    assert {d for _, d in fired(run)} == {"repeat_observation"}
    # with both off, nothing does
    off = {"same_action_type": False, "repeat_observation": False, "repeated_error": False}
    run = start("spin-demo", tmp_path / "b", detectors=off, max_iterations=6)
    assert run.run().status == "failed"
    assert fired(run) == []


def test_unknown_detector_name_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="unknown detector"):
        start("demo", tmp_path, detectors={"same_action": False})


def test_a_reflection_config_among_the_extensions_sets_the_numbers(tmp_path):
    from memfit_jupyter.reflection import ReflectionConfig

    config = ReflectionConfig(spin_threshold=4, detectors={"repeat_observation": False, "repeated_error": False},
                              spin_warnings="prompt")
    run = start("spin-demo", tmp_path, extensions=[config])
    assert run.run().status == "done"
    assert {i for i, _ in fired(run)} == {4}
    assert events(run, "spin")[0]["consecutive_count"] == 4


@pytest.mark.parametrize("task", ["Keep counting until you are stopped.", "Count until stopped [slow]"])
def test_long_run_runs_to_max_iterations_under_the_default_reflection(tmp_path, task):
    """The load generator of long widget runs and interrupt tests counts for real: no detector
    may end it before max_iterations, fast or slow."""
    run = Agent(model="memfit/long-run", workdir=tmp_path, max_iterations=14, memory=False).start(task)
    result = run.run()
    assert (result.status, result.iterations) == ("failed", 14), result.reason
    assert not [e for e in run.events if e.type == "spin"]
    counted = sum(1 for r in run.records if r.tool == "python")
    assert counted >= 5 and (tmp_path / "count.txt").read_text() == "|" * counted + "\n"
