"""The reflection pipeline of docs/MECHANISMS.md §1.3, in five stages.

1. data collection: an ``ActionReflection`` of the action;
2. environmental impact (STANDARD and up): an ``EnvironmentalImpact``, measured here
   and completed by the model;
3. memory-augmented analysis (STANDARD and up): the memory is searched with the
   reflection's query, as deep as the level allows, and the model reflects;
4. timeline injection: a success or failure line and the MANDATORY
   RECOMMENDATIONS, where the next action call will read them;
5. caching: the most recent informative reflections go into the next prompt
   (``ReflectionConfig.cache_kinds="all"``: every one, as first built).

A reflection call that fails (timeout, server error, unusable reply) is recorded
in the ``reflection`` event with ``ok=False`` and the run goes on.
"""

from __future__ import annotations

import logging
from collections import deque
from datetime import UTC, datetime
from typing import Any

from .. import events as ev
from ..errors import RunEnded
from ..records import ActionRecord, ReflectionLevel
from .config import ReflectionConfig
from .prompts import reflection_messages, reflection_timeline_text
from .records import ActionReflection, EnvironmentalImpact, SpinDetectionResult

log = logging.getLogger("memfit_jupyter.reflection")

#: A memory used by a reflection is shown clipped to this many characters.
MEMORY_SHOWN_CHARS = 300


def memory_query(reflection: ActionReflection) -> str:
    """The seed's memory query for a reflection (1.3 stage 3)."""
    query = f"action '{reflection.action_type}' execution analysis failure success pattern"
    if not reflection.success and reflection.error_message:
        query += " " + reflection.error_message
    return query


def measure_impact(run: Any, record: ActionRecord) -> EnvironmentalImpact:
    """Stage 2, the part that needs no model: what the action visibly changed.

    Only deterministic values go here (no wall-clock times) so that a replayed
    run records the same impact.
    """
    final = bool(record.data.get("final")) and record.ok
    impact = EnvironmentalImpact(state_changes=["loop terminated" if final else "loop continued"])
    spent = run.budget.spent
    impact.resource_usage = {"output_chars": len(record.output or ""), "model_calls_so_far": spent.calls,
                             "cost_usd_so_far": round(spent.cost_usd, 6)}
    p = record.params
    if record.ok:
        if record.tool == "write_file":
            impact.side_effects.append(f"wrote {p.get('path')}")
        elif record.tool == "modify_code":
            impact.side_effects.append(f"changed lines {p.get('start')}-{p.get('end')} of {p.get('path')}")
        elif record.tool == "shell":
            impact.side_effects.append(f"ran the shell command {p.get('command')!r}")
        elif record.tool == "python":
            impact.side_effects.append("ran Python code in the shared namespace")
        if record.output:
            impact.positive_effects.append(f"new observation ({len(record.output)} characters)")
    else:
        impact.negative_effects.append(f"the action failed: {record.error}")
    return impact


def informative(reflection: ActionReflection, spins: bool = True) -> bool:
    """Whether a reflection tells the next action anything: what a model made of the action, a
    failure reflected on above MINIMAL, or a spin (when ``spins``: spin warnings go into the
    prompt).  A MINIMAL reflection, failed or not, repeats what the observation already says."""
    if reflection.summary or reflection.suggestions or (spins and reflection.is_spinning):
        return True
    return not reflection.success and reflection.reflection_level != ReflectionLevel.MINIMAL.name


def recent_timeline(entries: Any, iteration: int, max_chars: int, last: int = 8) -> str:
    """The last ``last`` timeline entries before the action reflected on, as text: the action
    and its observation are in the prompt already (``reflection_messages``), not twice."""
    window = [e for e in list(entries)[-last:]
              if not (e.iteration == iteration and e.kind in ("action", "observation"))]
    text = "\n".join(f"[{e.kind} #{e.iteration}] {e.content}" for e in window)
    return text[-max_chars:] if len(text) > max_chars else text


def _merge(into: list[str], more: list[str]) -> None:
    into.extend(m for m in more if m and m not in into)


class Reflector:
    """Runs the pipeline for one run and keeps its cache of recent reflections."""

    def __init__(self, config: ReflectionConfig):
        self.config = config
        self.cache: deque[ActionReflection] = deque(maxlen=max(0, config.cache_size))
        self.history: list[ActionReflection] = []

    def reflect(self, run: Any, record: ActionRecord, level: ReflectionLevel, trigger: str,
                spin: SpinDetectionResult | None = None) -> ActionReflection:
        # Stage 1: data collection.
        reflection = ActionReflection(
            action_type=record.action_type, action_params=dict(record.params),
            execution_time=record.duration_s, iteration_num=record.iteration, success=record.ok,
            error_message=record.error or "", reflection_level=level.name,
            reflection_timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
            is_spinning=bool(spin and spin.is_spinning), spin_reason=spin.reason if spin else "",
            tool=record.tool, trigger=trigger,
        )
        ok, error = True, None
        if level >= ReflectionLevel.STANDARD:
            # Stage 2: environmental impact.
            reflection.environmental_impact = measure_impact(run, record)
            # Stage 3: memory-augmented analysis.
            reflection.memory_used = self._search_memory(run, reflection, level)
            ok, error = self._analyse(run, record, level, reflection, spin)
            # Stage 4: timeline injection.
            run.emit(ev.Guidance(kind="reflection", iteration=record.iteration,
                                 text=reflection_timeline_text(reflection)))
        # Stage 5: caching (by default only what tells the next action something).
        if self.config.cache_kinds == "all" or informative(reflection, self.config.spin_warnings == "prompt"):
            self.cache.append(reflection)
        self.history.append(reflection)
        impact = reflection.environmental_impact or EnvironmentalImpact()
        run.emit(ev.Reflection(iteration=record.iteration, level=int(level), level_name=level.name,
                               trigger=trigger, action_type=record.action_type, tool=record.tool,
                               success=record.ok, summary=reflection.summary,
                               suggestions=list(reflection.suggestions), impact=impact.to_dict(),
                               memory_used=list(reflection.memory_used), ok=ok, error=error))
        return reflection

    def _search_memory(self, run: Any, reflection: ActionReflection, level: ReflectionLevel) -> list[str]:
        memory = getattr(run, "memory", None)
        limit = self.config.memory_bytes.get(int(level), 0)
        if memory is None or not limit:
            return []
        try:
            results = memory.search(memory_query(reflection), bytes_limit=limit)
            return [str(getattr(r, "content", r))[:MEMORY_SHOWN_CHARS] for r in results]
        except RunEnded:
            raise
        except Exception as exc:  # a broken memory must not stop the reflection
            log.warning("memory search for a reflection failed: %s", exc)
            return []

    def _analyse(self, run: Any, record: ActionRecord, level: ReflectionLevel,
                 reflection: ActionReflection, spin: SpinDetectionResult | None) -> tuple[bool, str | None]:
        """The model's part of stages 2 and 3. Never raises (but lets the run end on its limits)."""
        impact = reflection.environmental_impact or EnvironmentalImpact()
        timeline = recent_timeline(run.timeline.entries, record.iteration, self.config.timeline_chars)
        # What the model can judge: the effects seen so far (the run's spending is in the event).
        shown = {k: v for k, v in impact.to_dict().items() if v and k != "resource_usage"}
        messages = reflection_messages(run.task, record, level, shown, reflection.memory_used, timeline, spin)
        tier = "fast" if level == ReflectionLevel.STANDARD else "primary"
        error: str | None
        try:
            result = run.llm.call("reflection", messages, tier=tier, iteration=record.iteration)
        except RunEnded:
            raise
        except Exception as exc:
            result = None
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = None if result.ok else f"{result.error_kind or 'error'}: {result.error}"
        if result is None or not result.ok:
            return False, error
        reply = result.value
        reflection.summary = reply.summary
        reflection.suggestions = [s for s in reply.suggestions if s]
        _merge(impact.state_changes, reply.impact.state_changes)
        _merge(impact.side_effects, reply.impact.side_effects)
        _merge(impact.positive_effects, reply.impact.positive_effects)
        _merge(impact.negative_effects, reply.impact.negative_effects)
        if reply.is_spinning and not reflection.is_spinning:
            reflection.is_spinning, reflection.spin_reason = True, reply.spin_reason
        return True, None

    def prompt_section(self, run: Any = None) -> str:
        """The cached reflections as a section of the next action prompt.  With ``run``, in the
        "informative" cache, a reflection whose timeline text is still in view is not repeated."""
        shown = list(self.cache)
        if run is not None and self.config.cache_kinds != "all":
            in_view = {e.iteration for e in run.timeline.entries if e.kind == "reflection"}
            shown = [r for r in shown if r.iteration_num not in in_view]
        if not shown:
            return ""
        lines = ["## Your recent self-reflections (most recent last)"]
        for r in shown:
            outcome = "succeeded" if r.success else f"FAILED ({r.error_message})"
            line = f"- iteration {r.iteration_num}, action '{r.action_type}' with {r.tool}, {r.reflection_level}: {outcome}."
            if r.summary:
                line += f" {r.summary}"
            if r.suggestions:
                line += " Recommendations: " + "; ".join(r.suggestions)
            lines.append(line)
        return "\n".join(lines)
