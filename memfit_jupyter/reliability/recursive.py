"""Recursive calls (docs/MECHANISMS.md §4.1): ``sub_query`` asks a model a sub-question, K times.

Each sample is one recursive call: it is checked against ``max_recursive_calls``
(and the time and cost limits) before it goes, on the fast tier when one is
configured.  Samples run one after another, not in a thread pool, because
each one's output-token cap depends on what the previous ones spent: that is
what keeps the cost limit hard.  The samples are scored (``confidence``) and
combined by the agent's strategy (``synthesis``) into a ``RecursiveResult``.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import TYPE_CHECKING

from ..errors import LimitsExceeded
from ..records import BudgetMetrics, RecursiveResult, ToolResult
from .confidence import Sample, Similarity, score
from .synthesis import Synthesis, synthesize

if TYPE_CHECKING:
    from ..protocols import RunView
    from ..tools import Tool, ToolContext

log = logging.getLogger("memfit_jupyter")

MAX_SAMPLES = 16
SAMPLE_INSTRUCTIONS = (
    "Answer the question on your own, briefly and directly. Give your reasoning as a list of "
    "short steps, and how confident you are that the answer is right, from 0 to 1."
)


def sample_messages(task: str, question: str) -> list[dict[str, str]]:
    from ..llm.prompts import json_system

    system = json_system("sample", SAMPLE_INSTRUCTIONS,
                         "answer (string), confidence (number 0-1), reasoning (list of strings)")
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"Context: the overall task is: {task}\n\nQuestion: {question}"}]


def _spent(run: RunView) -> BudgetMetrics:
    s = run.budget.spent
    return BudgetMetrics(s.cost_usd, s.prompt_tokens, s.completion_tokens, s.calls, s.duration_s)


def _diff(after: BudgetMetrics, before: BudgetMetrics) -> BudgetMetrics:
    return BudgetMetrics(round(after.cost_usd - before.cost_usd, 9), after.prompt_tokens - before.prompt_tokens,
                         after.completion_tokens - before.completion_tokens, after.calls - before.calls,
                         round(after.duration_s - before.duration_s, 6))


def sub_query(run: RunView, question: str, samples: int | None = None,
              strategy: str | None = None) -> tuple[RecursiveResult, Synthesis, LimitsExceeded | None]:
    """Ask ``question`` ``samples`` times and synthesise.  Returns the result, how it was combined,
    and the ``LimitsExceeded`` that cut the fan-out short (the run must then end), if any."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("sub_query needs a non-empty question")
    k = run.agent.samples if samples is None else samples
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SAMPLES:
        raise ValueError(f"samples must be an integer from 1 to {MAX_SAMPLES}, got {k!r}")
    tier = "fast" if run.agent.fast_model else "primary"
    messages = sample_messages(run.task, question.strip())
    before = _spent(run)
    got: list[Sample] = []
    stopped: LimitsExceeded | None = None
    for _ in range(k):
        try:
            run.budget.check_recursive()
            reply = run.llm.call("sample", messages, tier=tier, iteration=run.iteration)
        except LimitsExceeded as exc:
            stopped = exc
            break
        if reply.ok:
            v = reply.value
            got.append(Sample(answer=str(v.answer).strip(), stated=v.confidence, reasoning=list(v.reasoning),
                              attempts=reply.attempts, tier=reply.tier, routed_away=reply.fallback_from is not None))
        else:
            got.append(Sample(answer="", ok=False, attempts=reply.attempts, tier=reply.tier,
                              reasoning=[f"failed: {reply.error}"]))
    sim = Similarity()
    score(got, sim)
    synthesis = synthesize(got, strategy or run.agent.strategy, sim)
    trace = [f"{len(got)} of {k} sample(s) on the {tier} tier; {sum(s.ok for s in got)} usable",
             synthesis.rationale]
    if stopped is not None:
        trace.append(f"fan-out stopped early: {stopped.reason}")
    content = synthesis.answer if synthesis.answer is not None else synthesis.rationale
    result = RecursiveResult(content=content, confidence=round(synthesis.confidence, 4), reasoning_trace=trace,
                             cost=_diff(_spent(run), before))
    fields = synthesis.event_fields(question.strip())
    run.emit("synthesis", **fields, recursive_calls=run.budget.recursive_calls, cost=asdict(result.cost))
    if synthesis.low_confidence and any(s.ok for s in got):
        log.warning("low-confidence result (%.2f < 0.3) flagged for review: %r", synthesis.confidence, question)
    return result, synthesis, stopped


def render(result: RecursiveResult, synthesis: Synthesis) -> str:
    """What the agent sees of a sub-query's result."""
    flag = "LOW CONFIDENCE (flagged for review): " if synthesis.low_confidence else ""
    if synthesis.alternatives:
        lines = ["ALTERNATIVES (the samples disagree; the person chooses):"]
        lines += [f"{a['index']}. {a['answer']} (confidence {a['confidence']:.2f}, {a['size']} sample(s))"
                  for a in synthesis.alternatives]
        return flag + "\n".join(lines)
    if synthesis.no_consensus:
        return "NO CONSENSUS: " + synthesis.rationale
    return f"{flag}{result.content}\n(confidence {result.confidence:.2f}; {synthesis.rationale})"


class SubQueryTool:
    """The ``sub_query`` action.  Keeps a ``LimitsExceeded`` that the tool wrapper would swallow,
    for the extension to raise once the observation is recorded."""

    def __init__(self) -> None:
        self.stopped: LimitsExceeded | None = None

    def __call__(self, ctx: ToolContext, question: str, samples: int | None = None) -> ToolResult:
        if ctx.run is None:
            return ToolResult(ok=False, error="sub_query asks the run's models: it works only inside a run")
        try:
            result, synthesis, stopped = sub_query(ctx.run, question, samples)
        except LimitsExceeded as exc:  # raised before any sample (e.g. by the time check)
            self.stopped = exc
            return ToolResult(ok=False, error=f"sub_query stopped: {exc.reason}")
        self.stopped = stopped
        usable = [s for s in synthesis.samples if s.ok]
        data = {"recursive_result": asdict(result), "strategy": synthesis.strategy,
                "low_confidence": synthesis.low_confidence, "no_consensus": synthesis.no_consensus}
        if not usable:
            errors = "; ".join(s.reasoning[0] for s in synthesis.samples if s.reasoning)[:500]
            return ToolResult(ok=False, error=f"no sample gave a usable answer ({errors or 'none ran'})",
                              data=data)
        return ToolResult(output=render(result, synthesis), data=data)

    def tool(self) -> Tool:
        from ..tools import Param, Tool

        return Tool("sub_query", "ask a model a sub-question (K samples, combined by confidence); "
                                 "returns the answer with its confidence",
                    {"question": Param(), "samples": Param("int", "how many samples", required=False)}, self,
                    internal=True)
