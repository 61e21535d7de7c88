"""Post-hoc analysis: reflection levels and spin findings put on a trace after the fact.

``analyze(trace, judge=None, **settings)`` replays the steps of any trace
(recorded by memfit, or imported with ``load_trajectory``) through the
reflection-level decision tree and every spin detector, exactly as a live run
would after each action, and returns a copy of the trace with the
``reflection`` and ``spin`` events placed at the step where they fired, plus
``trace["analysis"]``: the findings, the warnings a run would have given, and
the step where a run would have ended with ``spin_exit`` (the analysis goes on
past it, as the recorded run did), the step where the loop itself would have
given up (``bad_reply_exit``: ``MAX_CONSECUTIVE_FAILED_CALLS`` calls in a row that
reached no model, or ``max_bad_replies`` unusable replies in a row when it is set), the
longest streak of unusable replies (``bad_reply_streak``), and the earlier of the two
ends (``would_end``).

No model is called unless ``judge`` is given (a litellm model string, or a
callable ``judge(records, timeline_text) -> dict`` with ``is_spinning``,
``reason``, ``suggestions``, ``next_actions``, ``is_task_progressing``).
Without a judge, layer 2 is taken to confirm what layer 1 finds: the bound
under which the most runs would be ended.  ``settings`` are the fields of
``ReflectionConfig`` (``spin_threshold``, ``detectors``, ...) and ``max_bad_replies``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import fields
from types import SimpleNamespace
from typing import Any

from ..action_log import INVALID_REPLY
from ..errors import SpinExit
from ..events import Action, Event, Guidance, Observation, make
from ..records import ActionRecord, ReflectionLevel
from ..reflection.config import ReflectionConfig
from ..reflection.levels import decide_level
from ..reflection.spin import SpinMonitor
from ..run import gives_up
from ..timeline import Timeline
from ..trace import Trace, is_trace

#: Event types that analysis writes; those already in a trace are replaced.
ANALYSIS_TYPES = ("reflection", "spin")
_KEEP_CHARS = 2000


def records_of(trace: Any) -> list[ActionRecord]:
    """The trace's steps as ``ActionRecord``s: each action with the observation that followed it
    (``trace`` is anything ``Trace.load`` reads)."""
    return [_record(action, obs) for action, obs in _steps(Trace.load(trace, unknown="warn"))]


def _steps(trace: Trace) -> list[tuple[Action, Observation | None]]:
    """Each action with the observation that followed it (None when another action came first)."""
    steps: list[tuple[Action, Observation | None]] = []
    pending: Action | None = None
    for event in trace.events:
        if isinstance(event, Action):
            if pending is not None:
                steps.append((pending, None))
            pending = event
        elif isinstance(event, Observation) and pending is not None:
            steps.append((pending, event))
            pending = None
        elif isinstance(event, Observation):
            # no action before it: a reply that gave no usable action, as the live ActionLog records it
            unusable = Action(iteration=event.iteration, thought="", action_type=INVALID_REPLY, tool="", params={})
            steps.append((unusable, event))
    if pending is not None:
        steps.append((pending, None))
    return steps


def _record(action: Action, obs: Observation | None) -> ActionRecord:
    data = dict(obs.data) if obs is not None else {}
    ok = obs.ok if obs is not None else True
    if action.action_type in ("finish", "submit") and "final" not in data and ok:
        data["final"] = True
    return ActionRecord(
        iteration=int(action.iteration or 0), thought=action.thought, action_type=action.action_type,
        tool=action.tool, params=dict(action.params), output=obs.output if obs is not None else "",
        ok=ok, error=obs.error if obs is not None else None,
        duration_s=obs.duration_s if obs is not None else 0.0, data=data)


class _ModelJudge:
    """Layer 2 through the project's model client: the judge is a litellm model string."""

    def __init__(self, model: str, emit: Callable[..., Any]):
        from ..llm.backend import LiteLLMBackend
        from ..llm.client import LLMClient

        self.client = LLMClient({"primary": model}, LiteLLMBackend(), emit, run_key="analysis")

    def call(self, purpose: str, messages: list[dict[str, Any]], *, tier: str = "fast", iteration: int = 0,
             **_: Any) -> Any:
        return self.client.call(purpose, messages, tier=tier, iteration=iteration)


class _CallableJudge:
    """Layer 2 through a Python callable; its dict reply is read like the model's."""

    def __init__(self, fn: Callable[..., Any], replay: _Replay):
        self.fn = fn
        self.replay = replay

    def call(self, purpose: str, messages: list[dict[str, Any]], **_: Any) -> SimpleNamespace:
        reply = self.fn(list(self.replay.records), self.replay.timeline.text(max_chars=3000)) or {}
        value = SimpleNamespace(is_spinning=bool(reply.get("is_spinning")), reason=str(reply.get("reason", "")),
                                suggestions=list(reply.get("suggestions") or []),
                                next_actions=list(reply.get("next_actions") or []),
                                is_task_progressing=bool(reply.get("is_task_progressing", False)))
        return SimpleNamespace(ok=True, value=value, error=None, error_kind=None)


class _Replay:
    """What the spin monitor reads of a run, rebuilt from a trace."""

    def __init__(self, trace: dict[str, Any], judge: Any):
        self.task = str(trace.get("task") or "")
        self.records: list[ActionRecord] = []
        self.timeline = Timeline(self.task)
        self.out: dict[int, list[dict[str, Any]]] = {}
        self.iteration = 0
        #: The time of the step being analysed: the events placed after it carry it.
        self.ts = 0.0
        self.model_events: list[dict[str, Any]] = []
        self.llm: _CallableJudge | _ModelJudge | None
        if judge is None:
            self.llm = None
        elif callable(judge):
            self.llm = _CallableJudge(judge, self)
        else:
            self.llm = _ModelJudge(str(judge), self._emit_model)

    def _emit_model(self, type: str, iteration: int | None = None, **data: Any) -> None:
        self.emit(type, iteration=iteration, **data)

    def emit(self, event: Event | str, iteration: int | None = None, **data: Any) -> None:
        if isinstance(event, Event):  # a typed event: what the model is told goes to the timeline
            if isinstance(event, Guidance):
                self.timeline.add(event.kind, self.iteration if event.iteration is None else event.iteration,
                                  event.text)
                return
        else:  # through its class, so that what analysis writes fits the trace's schema
            event = make(event, iteration, **data)
        if event.iteration is None:
            event.iteration = self.iteration
        event.ts = self.ts
        self.out.setdefault(event.iteration, []).append({**event.to_dict(), "analysis": True})

    def degradation_plan(self, reason: str, tried: list[str] | None = None,
                         recommendations: list[str] | None = None) -> dict[str, Any]:
        return {"reason": reason, "tried": list(tried or []), "recommendations": list(recommendations or [])}


def _earliest(spin: dict[str, Any] | None, bad: dict[str, Any] | None) -> dict[str, Any] | None:
    """Where a live run would have ended first, and by which of the two ends."""
    ends = [{**e, "by": by} for by, e in (("spin_exit", spin), ("bad_replies", bad)) if e is not None]
    return min(ends, key=lambda e: e["iteration"]) if ends else None


def _config(settings: dict[str, Any]) -> ReflectionConfig:
    names = {f.name for f in fields(ReflectionConfig)}
    unknown = sorted(set(settings) - names)
    if unknown:
        raise ValueError(f"unknown analysis setting(s) {', '.join(unknown)}; settings are: {', '.join(sorted(names))}")
    return ReflectionConfig(**settings)


def analyze(trace: dict[str, Any], judge: Any = None, **settings: Any) -> dict[str, Any]:
    """A copy of ``trace`` with reflection and spin findings placed where they fired (see module doc)."""
    if not is_trace(trace):
        raise ValueError("analyze needs a memfit trace (a dict with events); "
                         "load other agents' runs with load_trajectory first")
    max_bad = settings.get("max_bad_replies", 0)
    if isinstance(max_bad, bool) or not isinstance(max_bad, int) or max_bad < 0:
        raise ValueError(f"max_bad_replies must be 0 (never end on them) or more, got {max_bad!r}")
    cfg = _config({k: v for k, v in settings.items() if k != "max_bad_replies"})
    read = Trace.load(trace, unknown="warn")
    trace = read.data
    replay = _Replay(trace, judge)
    monitor = SpinMonitor(cfg)
    steps = _steps(read)
    records = [_record(action, obs) for action, obs in steps]
    forced = cfg.forced
    exit_at: dict[str, Any] | None = None
    bad_exit: dict[str, Any] | None = None
    bad_streak = failed_calls = longest = 0
    findings: list[dict[str, Any]] = []
    for record, (action, obs) in zip(records, steps, strict=True):
        replay.iteration = record.iteration
        replay.ts = (obs or action).ts
        replay.records.append(record)
        # the loop's own limits, whatever the reflection settings: Run._bad_reply (a reply known
        # only as rejected, as imported runs keep them, is one the model gave)
        unusable = record.action_type == INVALID_REPLY
        bad_streak = bad_streak + 1 if unusable else 0
        longest = max(longest, bad_streak)
        no_model = unusable and record.data.get("error_kind") not in (None, "format")
        failed_calls = failed_calls + 1 if no_model else 0
        if bad_exit is None and gives_up(bad_streak, failed_calls, max_bad):
            bad_exit = {"iteration": record.iteration,
                        "reason": f"the model gave no usable reply {bad_streak} times in a row "
                                  f"(last: {record.error})"}
            replay.emit("note", text=f"analysis: a memfit run would have failed here: {bad_exit['reason']}")
        if replay.llm is not None:  # only a judge reads the timeline
            replay.timeline.add("action", record.iteration,
                                f"{record.action_type} {record.tool} {record.params}"[:_KEEP_CHARS])
            replay.timeline.add("observation", record.iteration, record.observation[:_KEEP_CHARS])
        if forced == ReflectionLevel.NONE:
            continue
        # the decision tree looks at the last few actions only; a tail keeps a long replay linear
        tail = replay.records[-(4 * cfg.spin_threshold + 20):]
        level, trigger = decide_level(record, tail, forced=forced, spin_threshold=cfg.spin_threshold,
                                      iteration_threshold=cfg.iteration_threshold)
        replay.emit("reflection", level=int(level), level_name=level.name, trigger=trigger,
                    action_type=record.action_type, tool=record.tool, success=record.ok, summary="",
                    suggestions=[], impact={}, memory_used=[], ok=True, error=None)
        verdict = monitor.detect(replay, record)
        try:
            monitor.apply(replay, verdict)
        except SpinExit as exc:
            # A live run would have ended here; the recorded run went on, and so does the analysis,
            # so that what it did next is still shown (and a later loop still found).
            if exit_at is None:
                exit_at = {"iteration": record.iteration, "reason": str(exc)}
                replay.emit("note", text=f"analysis: a memfit run would have ended here with spin_exit ({exc})")
        for r in verdict.results:
            findings.append({"iteration": record.iteration, "detector": r.detector, "layer": r.layer,
                             "is_spinning": r.is_spinning, "confirmed": r in verdict.confirmed,
                             "reason": r.reason})
    out = copy.copy(trace)
    events = []
    placed: set[int] = set()
    for event in trace["events"]:  # the serialised events (unknown types included), in order
        kind = event.get("type")
        if kind in ANALYSIS_TYPES:
            continue
        if kind == "run_end":
            for it in sorted(set(replay.out) - placed):
                events.extend(replay.out[it])
                placed.add(it)
        events.append(event)
        if kind == "observation":
            it = int(event.get("iteration") or 0)
            if it in replay.out and it not in placed:
                events.extend(replay.out[it])
                placed.add(it)
    for it in sorted(set(replay.out) - placed):
        events.extend(replay.out[it])
    out["events"] = events
    out["analysis"] = {
        "steps": len(records), "findings": findings,
        "warnings": sum(1 for f in findings if f["confirmed"]),
        "spin_exit": exit_at, "bad_reply_exit": bad_exit, "bad_reply_streak": longest,
        "would_end": _earliest(exit_at, bad_exit), "judge": None if judge is None else getattr(judge, "__name__", str(judge)),
        "settings": {k: v for k, v in settings.items()},
    }
    return out
