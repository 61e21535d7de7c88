"""Lean mechanisms: triage only when there is something to keep, a short English triage input,
action prompts that repeat the previous prompt as their prefix (prompt caching), cached prompt
tokens recorded, and the first-built choices still selectable."""

from __future__ import annotations

import json

import litellm
import pytest

from memfit_jupyter import Agent
from memfit_jupyter.llm.backend import completion_of
from memfit_jupyter.llm.prompts import action_message, observation_message, with_tail
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.memory import MemoryConfig, TriageConfig
from memfit_jupyter.memory.triage import TRIAGE_BRIEF, TRIAGE_SYSTEM, render_entries
from memfit_jupyter.reflection import ReflectionConfig
from memfit_jupyter.timeline import BAD_REPLY_NOTE, Timeline

FIRST_BUILT = [ReflectionConfig(cache_kinds="all", prompt_place="system"),
               MemoryConfig(triage_at="events", triage=TriageConfig(format="chinese", every=1))]


class Sent:
    """Passes every call on to the run's backend and keeps the messages it sent."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def complete(self, model, messages, **kwargs):
        self.calls.append((kwargs["metadata"]["memfit_purpose"], [dict(m) for m in messages]))
        return self.inner.complete(model, messages, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def of(self, purpose):
        return [m for p, m in self.calls if p == purpose]


def run_of(scenario, workdir, **kw):
    run = Agent(model=f"memfit/{scenario}", workdir=workdir, **kw).start(load_scenario(scenario).task)
    sent = run.llm.backend = Sent(run.llm.backend)
    run.run()
    return run, sent


def prompts_read(sent, run):
    """The action prompts a run sent, its own working directory aside."""
    return [[m["content"].replace(str(run.agent.workdir), "<workdir>") for m in p] for p in sent.of("action")]


def triaged(run):
    return [e.iteration for e in run.events if e.type == "model_call" and e["purpose"] == "triage"]


def test_triage_runs_when_there_is_something_to_keep(tmp_path):
    healthy, _ = run_of("healthy-long", tmp_path / "default", memory_triage="end")
    assert healthy.status == "done" and triaged(healthy) == [10, 12]  # every 10 iterations, and the finish
    five, _ = run_of("healthy-long", tmp_path / "five", configs=[MemoryConfig(triage_at="end", triage=TriageConfig(every=5))])
    assert triaged(five) == [5, 10, 12]
    seed, _ = run_of("healthy-long", tmp_path / "seed", configs=FIRST_BUILT)
    assert triaged(seed) == list(range(1, 13))  # as first built: after every iteration
    # what the defaults leave out costs tokens only: the run and its answer are the same
    assert healthy.result.answer == seed.result.answer and healthy.iteration == seed.iteration
    assert healthy.budget.spent.prompt_tokens < 0.8 * seed.budget.spent.prompt_tokens
    with pytest.raises(ValueError, match="every must be at least 1"):
        TriageConfig(every=0)


def test_a_failed_run_triages_the_steps_not_triaged_yet(tmp_path):
    run, sent = run_of("demo", tmp_path, max_iterations=2, memory_triage="end")
    assert run.status == "failed" and triaged(run) == [2]  # two healthy steps, then the limit
    [messages] = sent.of("triage")
    assert messages[1]["content"].endswith("-> 42.0\nFinished: no")  # the engine's reason is not a lesson
    cancelled = Agent(model="memfit/demo", workdir=tmp_path / "c", max_iterations=2,
                      memory_triage="end").start("add up data.txt")
    cancelled.step()
    cancelled.cancel()
    assert triaged(cancelled) == []  # a person's stop makes no call


def test_english_triage_reads_the_task_and_one_line_per_step(tmp_path):
    run, sent = run_of("demo", tmp_path / "en", memory_triage="end")
    [(system, user)] = [(m[0]["content"], m[1]["content"]) for m in sent.of("triage")]
    assert system == TRIAGE_BRIEF and len(TRIAGE_BRIEF) < len(TRIAGE_SYSTEM) / 1.5
    assert user.startswith(f"Task: {run.task}\n#1 read_file(path=\"data.txt\"): First I need")
    assert user.endswith('#3 finish(answer="The numbers in data.txt add up to 42."): The sum is 42.\nFinished: yes')
    assert user.count("add up to 42") == 1  # the finish's echo of its answer is left out
    seed, sent = run_of("demo", tmp_path / "seed", configs=FIRST_BUILT)
    systems = [m[0]["content"] for m in sent.of("triage")]
    assert systems == [TRIAGE_SYSTEM] * 3 and sent.of("triage")[0][1]["content"].startswith("ReAct迭代 1/")


def test_render_entries_in_both_formats():
    timeline = Timeline("add up data.txt")
    timeline.add("action", 1, action_message("Look first.", "read", "read_file", {"path": "data.txt"}), "assistant")
    timeline.add("observation", 1, observation_message("read_file", False, "", "no such file: data.txt"))
    timeline.add("note", 1, BAD_REPLY_NOTE.format(error="not JSON"))
    timeline.add("reflection", 1, "✗ [CRITICAL REFLECTION] Action 'read' FAILED")
    timeline.add("action", 2, action_message("Run it.", "compute", "python", {"code": "x = 1\nx"}), "assistant")
    timeline.add("observation", 2, observation_message("python", True, "1" * 500, None))
    english = render_entries(timeline.entries)
    lines = english.splitlines()
    assert lines[:4] == ['#1 read_file(path="data.txt"): Look first.', "-> FAILED: no such file: data.txt",
                         "[reflection] ✗ [CRITICAL REFLECTION] Action 'read' FAILED",
                         '#2 python(code="x = 1\\nx"): Run it.']
    assert lines[4].startswith("-> 111") and lines[4].endswith("[... 300 characters]")  # clipped
    assert "[SYSTEM]" not in english and "Task:" not in english  # the engine's notes, and the head
    seed = render_entries(timeline.entries, "chinese")
    assert seed.splitlines()[0].startswith('[action #1] {"thought": "Look first.", "action_type": "read"')
    assert "[observation #2] Observation (python):" in seed and "[SYSTEM]" not in seed


def prefix_extends(prompts):
    """For each action prompt after the first: whether it starts with the whole previous prompt."""
    def text(messages):
        return "".join(f"\x00{m['role']}\x00{m['content']}" for m in messages)

    return [text(b).startswith(text(a)) for a, b in zip(prompts, prompts[1:], strict=False)]


def test_each_action_prompt_repeats_the_previous_one_as_its_prefix(tmp_path):
    run, sent = run_of("healthy-long", tmp_path / "default")
    prompts = sent.of("action")
    assert len(prompts) == 12 and all(prefix_extends(prompts))
    # the first-built layout puts the changing reflections in the system prompt: the prefix breaks there
    seed, sent = run_of("healthy-long", tmp_path / "seed", configs=FIRST_BUILT)
    assert not any(prefix_extends(sent.of("action"))[1:])
    assert seed.result.answer == run.result.answer


def test_the_changing_part_goes_last():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "Task: t"}]
    assert with_tail(messages, []) is messages
    assert with_tail(messages, ["## now", ""]) == [messages[0], {"role": "user", "content": "Task: t\n\n## now"}]
    assert messages[1]["content"] == "Task: t"  # the timeline's own message is not changed
    after_reply = [*messages, {"role": "assistant", "content": "{}"}]
    assert with_tail(after_reply, ["## now"])[-1] == {"role": "user", "content": "## now"}


def _response(**usage):
    return litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": "{}"},
                                           "finish_reason": "stop"}],
                                 usage=litellm.Usage(prompt_tokens=100, completion_tokens=5, **usage))


def test_cached_prompt_tokens_are_read_from_either_usage_field():
    openai_style = _response(prompt_tokens_details={"cached_tokens": 64})
    assert completion_of(litellm, openai_style).cached_tokens == 64
    anthropic_style = _response(cache_read_input_tokens=80)
    assert completion_of(litellm, anthropic_style).cached_tokens == 80
    assert completion_of(litellm, _response()).cached_tokens == 0


def test_cached_tokens_reach_the_model_call_events_and_the_totals(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    run.run()
    trace = json.loads(json.dumps(run.trace()))
    assert "cached" not in trace["totals"]["tokens"]  # the scripted provider reports none
    calls = [e for e in trace["events"] if e["type"] == "model_call"]
    for i, call in enumerate(calls):
        call["cached_tokens"] = 100 * i  # as a provider with a prompt cache reports them
    replayed = Agent.replay(trace)
    replayed.run()
    again = replayed.trace()
    assert [e.get("cached_tokens") for e in again["events"] if e["type"] == "model_call"] == [None, 100, 200]
    assert again["totals"]["tokens"]["cached"] == 300


def test_a_spin_is_shown_to_the_person_and_the_model_s_prompts_stay_those_of_a_bare_run(tmp_path):
    limit = {"max_iterations": 6, "tools": ["shell", "read_file"]}  # as evaluate's tasks give them: no memory tools
    default, sent = run_of("spin-demo", tmp_path / "default", **limit)
    bare, bare_sent = run_of("spin-demo", tmp_path / "bare", reflection="none", memory=False, **limit)
    spins = [e for e in default.events if e.type == "spin" and e.is_spinning]
    assert spins and spins[0].iteration == 3  # the person sees the spin: trace, view, alerts
    assert not [e for e in bare.events if e.type == "spin"]
    assert prompts_read(sent, default) == prompts_read(bare_sent, bare)  # the model read exactly what bare's read
    assert default.status == bare.status == "failed"  # so it spins to the end as bare does
    # warnings in the prompt, as first built: the model reads them and turns around
    prompted, sent = run_of("spin-demo", tmp_path / "prompt", spin_warnings="prompt", **limit)
    assert prompted.status == "done" and any("[SPIN DETECTED]" in m[-1]["content"] for m in sent.of("action"))
    assert prompted.trace()["settings"]["spin_warnings"] == "prompt"
    with pytest.raises(ValueError, match="spin_warnings must be one of view, prompt"):
        Agent(model="memfit/spin-demo", spin_warnings="model")


def test_the_default_with_the_exit_reads_what_the_default_reads_until_it_ends_the_run(tmp_path):
    from memfit_jupyter.evaluate.variants import VARIANTS

    limit = {"max_iterations": 8, "tools": ["shell", "read_file"]}
    default, sent = run_of("spin-demo", tmp_path / "default", **limit)
    ended, ended_sent = run_of("spin-demo", tmp_path / "exit", **VARIANTS["default-exit"], **limit)
    assert default.status == "failed" and ended.status == "spin_exit"  # stopped early, on evidence
    assert len(ended_sent.of("action")) < len(sent.of("action"))
    # every prompt the ended run sent is the one the default sent at that step: only the stop differs
    assert prompts_read(ended_sent, ended) == prompts_read(sent, default)[:len(ended_sent.of("action"))]
