"""Tiered context: watermarks, eviction to recall, recursive summaries, the memory tools."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.context import ContextConfig
from memfit_jupyter.context.tiers import PRESSURE_TAG, SUMMARY_TAG

TASK = "Read the nine regional ledgers and report the grand total."


def _started(tmp_path, steps=3, **kw):
    """A context-overflow run after a few steps, with a window too large to matter yet."""
    run = Agent(model="memfit/context-overflow", workdir=tmp_path, context_window=100_000, **kw).start(TASK)
    for _ in range(steps):
        run.step()
    return run, run.context.tiers


def _context_events(run, iteration):
    return [e for e in run.events if e.type == "context" and e.iteration == iteration]


def _pressure_entries(run):
    return [e for e in run.timeline.entries if e.content.startswith(PRESSURE_TAG)]


@pytest.mark.parametrize("where, expected", [
    ("under_70", "ok"), ("over_70", "warning"), ("under_100", "warning"), ("at_100", "flush"),
    ("over_100", "flush"),
])
def test_watermarks_at_their_edges(tmp_path, where, expected):
    run, tiers = _started(tmp_path)
    used = tiers.used_tokens(run)  # what the next iteration will measure: nothing changes in between
    window = {
        "under_70": 10 * used // 7 + 1,  # the smallest window with used/window < 0.70
        "over_70": (10 * used - 1) // 7,  # the largest window with used/window > 0.70
        "under_100": used + 1,
        "at_100": used,
        "over_100": used - 1,
    }[where]
    tiers.window = window
    ratio = used / window
    assert (ratio < 0.70) if where == "under_70" else (ratio > 0.70)
    entries_before = len(run.timeline)
    run.step()
    events = _context_events(run, 4)
    assert events[0]["used_tokens"] == used and events[0]["window"] == window
    assert events[0]["watermark"] == expected
    if expected == "ok":
        assert not _pressure_entries(run)
        assert len(events) == 1 and tiers.recall == []
    elif expected == "warning":
        assert len(_pressure_entries(run)) == 1
        assert f"{round(100 * used / window)}% full" in _pressure_entries(run)[0].content
        assert tiers.recall == [] and len(run.timeline) > entries_before
    else:
        assert events[0]["evicted"] > 0 and events[0]["recall_size"] == events[0]["evicted"]
        assert events[0]["summary"] and events[0]["summary"].startswith("SUMMARY-1")
        assert events[1]["used_tokens"] < used  # the second event is the gauge after the flush
        head = run.timeline.entries[1]
        assert head.kind == "summary" and head.content.startswith(f"{SUMMARY_TAG} SUMMARY-1")
        assert run.timeline.entries[0].kind == "task"


def test_the_warning_is_given_once_until_a_flush(tmp_path):
    run, tiers = _started(tmp_path)
    tiers.window = math.ceil(tiers.used_tokens(run) / 0.75)
    run.step()
    run.step()
    assert [e["watermark"] for e in run.events if e.type == "context"][3:] == ["warning", "warning"]
    assert len(_pressure_entries(run)) == 1


def test_configurable_watermarks(tmp_path):
    agent = Agent(model="memfit/context-overflow", workdir=tmp_path, context_window=100_000)
    agent.context_config = ContextConfig(warning_ratio=0.5, flush_ratio=0.9)
    run = agent.start(TASK)
    for _ in range(3):
        run.step()
    tiers = run.context.tiers
    assert tiers.config.warning_ratio == 0.5
    used = tiers.used_tokens(run)
    tiers.window = math.ceil(used / 0.6)
    run.step()
    assert _context_events(run, 4)[0]["watermark"] == "warning"
    with pytest.raises(ValueError, match="warning_ratio"):
        ContextConfig(warning_ratio=0.9, flush_ratio=0.8)


def test_overflow_scenario_warns_flushes_twice_and_keeps_everything_in_recall(tmp_path):
    run = Agent(model="memfit/context-overflow", workdir=tmp_path).start(TASK)
    result = run.run()
    assert result.status == "done" and "580" in result.answer
    events = [e for e in run.events if e.type == "context"]
    marks = [e["watermark"] for e in events]
    assert "warning" in marks
    flushes = [e for e in events if e["watermark"] == "flush"]
    assert len(flushes) >= 2
    assert all(e["window"] == 1800 for e in events)  # the scenario's window, from the model's info
    assert marks.index("warning") < marks.index("flush")
    tiers = run.context.tiers
    # Recall holds every evicted entry, the very objects, none twice.
    assert sum(e["evicted"] for e in flushes) == len(tiers.recall) == flushes[-1]["recall_size"]
    assert len({id(e) for e in tiers.recall}) == len(tiers.recall)
    # Every observation the agent ever saw is still somewhere: in view or in recall.
    kept = [e.content for e in tiers.recall] + [e.content for e in run.timeline.entries]
    observations = [e for e in run.events if e.type == "observation"]
    for obs in observations:
        if obs["output"]:
            assert any(obs["output"] in text for text in kept), obs["output"][:60]
    # The first ledger left the view but conversation_search found its total in recall.
    def north(entries):
        return [e for e in entries if e.content.startswith("Observation (read_file):\nNorth region")]

    assert not north(run.timeline.entries) and len(north(tiers.recall)) == 1
    search = next(o for o in observations if o["tool"] == "conversation_search")
    assert "TOTAL north: 120 crates" in search["output"]
    # The saved notes survived both flushes in the memory block.
    assert "north 120" in tiers.blocks["task_notes"].value
    assert "north 120" in run.last_prompt[0]["content"]


def test_the_second_summary_is_built_from_the_first(tmp_path):
    run = Agent(model="memfit/context-overflow", workdir=tmp_path).start(TASK)
    run.run()
    tiers = run.context.tiers
    first, second = tiers.summaries[:2]
    assert first.startswith("SUMMARY-1") and second.startswith("SUMMARY-2")
    # The second summary call was given the first summary as "previous", plus the newly evicted.
    assert f"[previous summary]\n{first}" in tiers.summary_prompts[1]
    assert "[previous summary]\n(none yet)" in tiers.summary_prompts[0]
    summary_calls = [e for e in run.events if e.type == "model_call" and e["purpose"] == "summary"]
    assert len(summary_calls) == len(tiers.summaries)
    flush_summaries = [e["summary"] for e in run.events if e.type == "context" and e["watermark"] == "flush"]
    assert flush_summaries[:2] == [first, second]
    heads = [e for e in run.timeline.entries if e.kind == "summary"]
    assert len(heads) == 1 and heads[0].content == f"{SUMMARY_TAG} {tiers.summary}"


def test_context_window_option_overrides_the_models(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, context_window=5000).start("add up data.txt")
    run.run()
    assert {e["window"] for e in run.events if e.type == "context"} == {5000}
    bad = Agent(model="memfit/demo", workdir=tmp_path, context_window=0).start("add up data.txt")
    result = bad.run()
    assert result.status == "failed" and "context_window must be a positive" in result.reason


def _call(run, tool, **params):
    return run.tools[tool](run.tool_context, params)


def test_core_memory_tools_edit_blocks_within_their_limits(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=None).start("add up data.txt")
    tiers = run.context.tiers
    ok = _call(run, "core_memory_append", label="task_notes", content="the file is data.txt")
    assert ok.ok and tiers.blocks["task_notes"].value == "the file is data.txt"
    assert "the file is data.txt" in run.system_prompt()
    ok = _call(run, "core_memory_replace", label="task_notes", old_content="data.txt",
               new_content="numbers.txt", request_heartbeat=True)
    assert ok.ok and ok.data["heartbeat"] and tiers.blocks["task_notes"].value == "the file is numbers.txt"
    too_long = _call(run, "core_memory_append", label="persona", content="x" * 1001)
    assert not too_long.ok and "limit is 1000" in too_long.error and tiers.blocks["persona"].value == ""
    unknown = _call(run, "core_memory_append", label="nope", content="x")
    assert not unknown.ok and "persona, task_notes" in unknown.error
    missing = _call(run, "core_memory_replace", label="persona", old_content="absent", new_content="y")
    assert not missing.ok and "does not contain" in missing.error
    secret = _call(run, "core_memory_append", label="persona", content="api_key=sk-abcdefghijklmnopqrstuvwx")
    assert secret.ok and "sk-abcdefghij" not in tiers.blocks["persona"].value


def test_archival_tools_say_so_when_there_is_no_store(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    for tool, params in (("archival_memory_insert", {"content": "x"}), ("archival_memory_search", {"query": "x"})):
        result = _call(run, tool, **params)
        assert not result.ok and result.error.startswith("archival memory is off")


def test_heartbeat_is_recorded_on_the_action(tmp_path):
    from memfit_jupyter.context import wants_heartbeat

    run = Agent(model="memfit/context-overflow", workdir=tmp_path).start(TASK)
    run.run()
    records = [r for r in run.records if r.tool == "core_memory_append"]
    assert records and all(wants_heartbeat(r) for r in records)
    assert not any(wants_heartbeat(r) for r in run.records if r.tool == "read_file")


def test_importing_the_context_package_stays_light():
    code = ("import sys, memfit_jupyter.context, memfit_jupyter.context.diary; "
            "bad = [m for m in ('litellm', 'IPython', 'ipywidgets', 'usearch', 'polars') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_an_overflowing_run_replays_byte_for_byte(tmp_path):
    import json

    run = Agent(model="memfit/context-overflow", workdir=tmp_path / "a", memory=False).start(TASK)
    run.run()
    recorded = json.loads(json.dumps(run.trace()))
    replayed = Agent.replay(recorded, workdir=tmp_path / "somewhere-else")
    replayed.run()
    assert json.dumps(replayed.trace()["events"]) == json.dumps(recorded["events"])
    assert replayed.context.tiers.summaries == run.context.tiers.summaries
    assert replayed.context.tiers.blocks["task_notes"].value == run.context.tiers.blocks["task_notes"].value


def test_incremental_token_count_equals_a_full_count_across_appends_and_replacements(tmp_path):
    from memfit_jupyter.context.tiers import TieredContext
    from memfit_jupyter.timeline import Entry

    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    tiers = TieredContext(window=100_000)

    def full() -> int:
        fresh = TieredContext(window=100_000)
        return fresh.used_tokens(run)

    for i in range(5):
        run.timeline.add("note", i, "x" * (10 * i + 3))
        assert tiers.used_tokens(run) == full()
    run.timeline.replace_entries([run.timeline.entries[0], Entry("summary", 5, "short")])
    assert tiers.used_tokens(run) == full()
    run.timeline.add("note", 6, "after the flush")
    assert tiers.used_tokens(run) == full()


def test_a_context_without_a_known_window_measures_nothing_and_never_flushes(tmp_path):
    from memfit_jupyter.context.tiers import TieredContext

    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    for i in range(4):
        run.timeline.add("note", i, "x" * 5000)
    tiers = TieredContext()  # the model's window is unknown
    assert tiers.check(run) == "ok"
    assert tiers.flush(run) == [] and tiers.recall == [] and tiers.summary is None
    assert len(run.timeline.entries) >= 4


def test_the_memory_section_names_only_the_tools_the_run_has(tmp_path):
    from memfit_jupyter import Agent

    every = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("x").next_prompt()[0]["content"]
    assert "edit with core_memory_append / core_memory_replace" in every and "archival_memory_search" in every
    few = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                tools=["shell", "read_file", "finish"]).start("x").next_prompt()[0]["content"]
    for name in ("core_memory", "conversation_search", "archival_memory", "Core memory", "<persona"):
        assert name not in few  # a small model copies the names of tools it does not have
    recall = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                   tools=["read_file", "finish", "conversation_search"]).start("x").next_prompt()[0]["content"]
    assert "Recall holds 0 evicted message(s): conversation_search." in recall and "archival" not in recall
