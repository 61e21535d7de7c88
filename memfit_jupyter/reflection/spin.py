"""Spin detection across layers: layer 1 heuristics, layer 2 model analysis, layer 3 code edits,
and the extra named detectors; warnings that grow firmer, and the spin exit.

After each action ``SpinMonitor.detect`` runs every enabled detector and
returns a ``SpinVerdict``; ``SpinMonitor.apply`` then records the spin events
(the warning the person sees in the trace and the run view), with ``spin_warnings="prompt"``
writes the warning (``logic_spin_warning``) into the model's timeline too, or ends the run with
``SpinExit`` when ``max_consecutive_spin_warnings`` warnings have not broken the loop.

With ``spin_rules="progress"`` (the default) the detectors of ``detectors``
ask for repetition without progress; a layer-1 finding is a spin once layer 2
confirms it (if the layer-2 call fails, or there is no model to ask, layer 1
stands), and a run ends only on a verdict that holds deterministic evidence
(a finding of a detector in ``detectors.EVIDENCE``): a judge can warn,
evidence stops.  ``spin_rules="repetition"`` runs the detectors as first built
(``repetition_detectors``): they fire on repetition alone, and a layer-2 verdict alone can
end a run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import RunEnded, SpinExit
from ..events import Guidance
from ..records import ActionRecord
from . import detectors as d
from . import repetition_detectors as rep
from .config import ReflectionConfig
from .levels import actions
from .prompts import code_spin_text, spin_messages, spin_warning_text
from .records import SpinDetectionResult

if TYPE_CHECKING:
    from ..events import Event
    from ..protocols import TimelineView

#: A detector bound to the history it looks at: its finding, or None.
Check = Callable[[], SpinDetectionResult | None]


class SpinSubject(Protocol):
    """What the spin monitor reads of a run: a ``Run``, or ``analyze``'s replay of a trace."""

    @property
    def task(self) -> str: ...
    @property
    def records(self) -> list[ActionRecord]: ...
    @property
    def timeline(self) -> TimelineView: ...
    #: The layer-2 judge (``call(purpose, messages, ...)``), or None when there is none to ask.
    @property
    def llm(self) -> Any: ...

    def emit(self, event: Event | str, iteration: int | None = None, **fields: Any) -> Any: ...

    def degradation_plan(self, reason: str, tried: list[str] | None = None,
                         recommendations: list[str] | None = None) -> object: ...


@dataclass
class SpinVerdict:
    """What the detectors found after one action."""

    iteration: int
    #: Every detector that fired, and the layer-2 answer, in order.
    results: list[SpinDetectionResult] = field(default_factory=list)
    #: The findings that count as a spin (they earn a warning).
    confirmed: list[SpinDetectionResult] = field(default_factory=list)

    @property
    def spinning(self) -> SpinDetectionResult | None:
        return self.confirmed[0] if self.confirmed else None


class SpinMonitor:
    """The spin state of one run: warnings given, quiet iterations, what was tried."""

    def __init__(self, config: ReflectionConfig):
        self.config = config
        self.warnings = 0
        self.quiet = 0
        self.tried: list[str] = []
        self.history = d.History(window=getattr(config, "progress_window", 10))

    @property
    def repetition_rules(self) -> bool:
        return getattr(self.config, "spin_rules", "progress") == "repetition"

    def _history(self, records: list[ActionRecord]) -> d.History:
        """The derived steps, brought up to date with the run's records (one new step a call)."""
        h = self.history
        if len(h.steps) > len(records) or (h.steps and h.steps[-1].record is not records[len(h.steps) - 1]):
            h = self.history = d.History(window=h.window)  # the records were replaced: derive again
        for record in records[len(h.steps):]:
            h.add(record)
        return h

    # --- detection --------------------------------------------------------------------
    def detect(self, run: SpinSubject, record: ActionRecord) -> SpinVerdict:
        cfg = self.config
        verdict = SpinVerdict(record.iteration)
        records = run.records
        if not self.repetition_rules:
            h = self._history(records)
        if record.ok and record.data.get("final"):
            return verdict  # the run is finishing: nothing to break out of
        threshold = cfg.spin_threshold
        if cfg.enabled("same_action_type"):
            l1 = rep.layer1(records, threshold) if self.repetition_rules else d.layer1(h, threshold)
        else:
            l1 = None
        if l1 is not None:
            verdict.results.append(l1)
            if cfg.enabled("logic_spin"):
                l2 = self.analyse(run, record, l1)
                verdict.results.append(l2)
                if l2.is_task_progressing:
                    self.warnings = 0  # the model sees progress: start counting again
                elif l2.is_spinning:
                    verdict.confirmed.append(l2)
            else:
                verdict.confirmed.append(l1)
        for name, check in (self._repetition_checks(records) if self.repetition_rules else self._checks(h)):
            if cfg.enabled(name):
                found = check()
                if found is not None:
                    verdict.results.append(found)
                    verdict.confirmed.append(found)
        return verdict

    def _checks(self, h: d.History) -> list[tuple[str, Check]]:
        cfg = self.config
        threshold = cfg.spin_threshold
        return [
            ("code_modify", lambda: d.code_modify(h, count=cfg.code_spin_count, window=cfg.code_spin_window,
                                                  tolerance=cfg.region_tolerance, small_lines=cfg.small_edit_lines)),
            ("repeat_observation", lambda: d.repeat_observation(h, cfg.repeat_observation_threshold or threshold,
                                                                gap=getattr(cfg, "repeat_gap", 3))),
            ("edit_rerun", lambda: d.edit_rerun(h, cycles=getattr(cfg, "rerun_cycles", 2),
                                                gap=getattr(cfg, "rerun_gap", 6))),
            ("alternation", lambda: d.alternation(h, cfg.alternation_cycles)),
            ("repeated_error", lambda: d.repeated_error(h, cfg.repeated_error_threshold or threshold)),
            ("empty_replies", lambda: d.empty_replies(h, cfg.empty_replies_threshold)),
            ("monologue", lambda: d.monologue(h, getattr(cfg, "monologue_threshold", 3))),
            ("context_window", lambda: d.context_window(h, getattr(cfg, "context_window_threshold", 3))),
        ]

    def _repetition_checks(self, records: list[ActionRecord]) -> list[tuple[str, Check]]:
        cfg = self.config
        threshold = cfg.spin_threshold
        return [
            ("code_modify", lambda: rep.code_modify(records, count=cfg.code_spin_count, window=cfg.code_spin_window,
                                                     tolerance=cfg.region_tolerance,
                                                     small_lines=cfg.small_edit_lines)),
            ("repeat_observation", lambda: rep.repeat_observation(records, cfg.repeat_observation_threshold
                                                                   or threshold)),
            ("alternation", lambda: rep.alternation(records, cfg.alternation_cycles)),
            ("repeated_error", lambda: rep.repeated_error(records, cfg.repeated_error_threshold or threshold)),
            ("empty_replies", lambda: rep.empty_replies(records, cfg.empty_replies_threshold)),
        ]

    def analyse(self, run: SpinSubject, record: ActionRecord, l1: SpinDetectionResult) -> SpinDetectionResult:
        """Layer 2: the model judges the last N actions and the recent timeline. Never raises.

        With no model to ask (``run.llm`` is None, as in ``analyze`` without a judge),
        layer 1's finding stands, as when the call fails.
        """
        if getattr(run, "llm", None) is None:
            return SpinDetectionResult(
                is_spinning=True, layer=2, detector="logic_spin", action_type=l1.action_type,
                consecutive_count=l1.consecutive_count, suggestions=list(l1.suggestions),
                reason=f"no judge was asked; layer 1's finding stands: {l1.reason}")
        recent = actions(run.records)[-self.config.spin_threshold:]
        timeline = run.timeline.text(max_chars=self.config.timeline_chars)
        messages = spin_messages(run.task, recent, timeline)
        try:
            result = run.llm.call("spin", messages, tier="fast", iteration=record.iteration)
            error = None if result.ok else f"{result.error_kind or 'error'}: {result.error}"
        except RunEnded:
            raise
        except Exception as exc:
            result, error = None, f"{type(exc).__name__}: {exc}"
        if error is not None:
            return SpinDetectionResult(
                is_spinning=True, layer=2, detector="logic_spin", action_type=l1.action_type,
                consecutive_count=l1.consecutive_count, suggestions=list(l1.suggestions),
                reason=f"the spin analysis call failed ({error}); layer 1's finding stands: {l1.reason}",
            )
        reply = result.value
        return SpinDetectionResult(
            is_spinning=bool(reply.is_spinning), layer=2, detector="logic_spin", action_type=l1.action_type,
            consecutive_count=l1.consecutive_count, reason=reply.reason,
            suggestions=list(reply.suggestions), next_actions=list(reply.next_actions),
            is_task_progressing=bool(reply.is_task_progressing),
        )

    # --- response ---------------------------------------------------------------------
    def apply(self, run: SpinSubject, verdict: SpinVerdict) -> None:
        """Emit the events; warn in the timeline, or end the run when warnings did not help."""
        cfg = self.config
        exit_now = False
        if verdict.confirmed:
            self.quiet = 0
            evidence = self.repetition_rules or any(r.detector in d.EVIDENCE for r in verdict.confirmed)
            if cfg.max_consecutive_spin_warnings and self.warnings >= cfg.max_consecutive_spin_warnings \
                    and evidence:
                exit_now = True
            else:  # a judge's verdict with no deterministic evidence warns again, never ends the run
                self.warnings += 1
        elif not verdict.results:
            self.quiet += 1
            if cfg.quiet_reset and self.quiet >= cfg.quiet_reset:
                self.warnings = 0
        for r in verdict.results:
            run.emit("spin", iteration=verdict.iteration, layer=r.layer, detector=r.detector,
                     is_spinning=r.is_spinning, reason=r.reason, suggestions=list(r.suggestions),
                     next_actions=list(r.next_actions), action_type=r.action_type,
                     consecutive_count=r.consecutive_count, warning_count=self.warnings,
                     is_task_progressing=r.is_task_progressing)
        if not verdict.confirmed:
            return
        names = ", ".join(r.detector for r in verdict.confirmed)
        reasons = "; ".join(r.reason for r in verdict.confirmed if r.reason)
        if exit_now:
            reason = (f"spin: the loop went on after {self.warnings} spin warning(s) "
                      f"(iteration {verdict.iteration}, {names}: {reasons})")
            plan = run.degradation_plan(reason, tried=list(self.tried), recommendations=[
                "read the spin warnings in the trace: they say which actions repeated and why",
                "give the task more detail, or the information the agent kept looking for",
                "raise max_consecutive_spin_warnings (0 = never stop) or use a stronger model",
            ])
            raise SpinExit(reason, plan=plan)
        self.tried.append(f"iteration {verdict.iteration}: spin warning {self.warnings} ({names}): {reasons}")
        if cfg.spin_warnings != "prompt":
            return  # the spin events above are the warning, for the person: the model's prompt is as it was
        text = spin_warning_text(verdict.confirmed, self.warnings, cfg.max_consecutive_spin_warnings)
        code = next((r for r in verdict.confirmed if r.layer == 3), None)
        if code is not None:
            edit = rep.ModifyRecord.of(actions(run.records)[-1])
            if edit is not None:
                text += "\n\n" + code_spin_text(edit.start_line, edit.end_line, code.reason)
        run.emit(Guidance(kind="logic_spin_warning", iteration=verdict.iteration, text=text))
