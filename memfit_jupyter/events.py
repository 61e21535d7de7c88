"""Typed events: the single record of what a run did, as a person sees it.

Every event is a flat dict once serialised: ``type``, ``iteration``, ``ts``
(seconds since the run started) and the fields of its record.  The run's
event list *is* the trace; the widget, the HTML rendering and the saved
notebook output are all built from it.

Event catalogue.  Renderers (the live widget, the HTML fallback, the
JupyterLab extension) show each type below with its own panel and any other
type with a generic card that lists its fields.

==============  =====================================================================
run_start       task, tiers {primary, fast, fallback}, settings, tools, extensions
model_call      purpose, model, tier, attempt, ok, prompt_tokens, completion_tokens,
                cost_usd, latency_s, max_tokens, timeout_s, reply, error, error_kind
format_error    purpose, attempt, error (a reply that did not fit its schema)
action          thought, action_type, tool, params, reflection (level asked for or None)
observation     tool, ok, output, error, duration_s, data
approval        state (waiting | approved | rejected), tool, reason
note            text (guidance or a message placed in the timeline)
reflection      level (0-4), level_name, trigger, action_type, tool, success, summary,
                suggestions [str], impact {state_changes, side_effects, positive_effects,
                negative_effects, resource_usage}, memory_used [str], ok, error
spin            layer (1 | 2 | 3 | "detector"), detector, is_spinning, reason,
                suggestions [str], next_actions [str], action_type, consecutive_count,
                warning_count, is_task_progressing
guarantee       violated (bool), limit, message, cost_usd, elapsed_s, recursive_calls
                (also override: {override: true, confirmed, new limits})
breaker         tier, model, from_state, to_state (CLOSED | OPEN | HALF_OPEN), failures,
                successes, rejected, opened_at, next_probe_at, reason; or
                rejected: true with fallback_tier when a call was turned away
synthesis       strategy, question, samples [{answer, confidence, cluster}],
                clusters [{answer, weight, share, size, confidence}], answer,
                confidence, low_confidence (bool), alternatives [..] (diverse),
                choice (diverse, once the person chose), rationale
memory          op (search | insert | triage | task_search | failures), query,
                results [{id, content, score, breakdown {r, c, t, a, p, o, e,
                keyword_bonus, semantic, final}}], added [ids], bytes
context         used_tokens, window, ratio, watermark (ok | warning | flush),
                evicted, recall_size, summary
degradation     reason, partial_result, explanation, recommendations [str],
                cost_usd, duration_s, calls, iterations, tried [str]
trial           trial, max_trials, passed, oracle_output, lesson (failure diary)
escalation      choice (more_trials | open_diary | stop), extra_trials, max_trials (the
                person's answer to an escalated run)
error           message, traceback (an exception the loop caught and survived)
run_end         status, answer, reason
==============  =====================================================================

Memory rankings travel as ``application/vnd.memfit.memory+json``::

    {version: 1, query, bytes?, bytes_limit?,
     results: [{id, content, tags: [str], score,
                breakdown: {r, c, t, a, p, o, e, keyword_bonus, semantic, final}}]}

``score`` equals ``breakdown.final``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Fields whose values come from the wall clock; replay restores them from the
# recording so that replayed events compare equal byte for byte.
TIMING_FIELDS = ("ts", "latency_s", "duration_s")


@dataclass(slots=True)
class Event:
    type: str
    iteration: int
    ts: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "iteration": self.iteration, "ts": self.ts, **self.data}

    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return self.type
        if key == "iteration":
            return self.iteration
        if key == "ts":
            return self.ts
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default
