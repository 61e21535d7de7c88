"""The key facts of a run, read off its trace, for the static summaries.

The run is drawn (live and saved) by the JupyterLab extension from the events;
this module only counts what the short ``text/html`` and ``text/plain``
summaries and ``memfit_jupyter.compare`` name: how the run ended, what it
spent, and which mechanisms fired.  It keeps no state between events.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from ..records import ReflectionLevel
from ..trace import Trace

LEVEL_NAMES = tuple(level.name.lower() for level in ReflectionLevel)


@dataclass
class RunFacts:
    """What a reader of a run needs first, in numbers and short sentences."""

    run_id: str = ""
    task: str = ""
    model: str = ""
    status: str = "pending"
    answer: str | None = None
    reason: str = ""
    iterations: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    tokens: int = 0
    duration_s: float = 0.0
    #: (iteration, tool, ok) of every action taken.
    actions: list[tuple[int, str, bool | None]] = field(default_factory=list)
    #: Reflection levels that fired: "L2 standard" -> how many times.
    reflections: Counter[str] = field(default_factory=Counter)
    #: Reasons of the spin alerts, in order.
    spins: list[str] = field(default_factory=list)
    #: "primary CLOSED → OPEN" per breaker transition, in order.
    breakers: list[str] = field(default_factory=list)
    #: Limits reached (guarantee violations).
    limits: list[str] = field(default_factory=list)
    #: Strategies of the syntheses, and how many had low confidence.
    syntheses: list[str] = field(default_factory=list)
    low_confidence: int = 0
    trials: list[bool] = field(default_factory=list)
    degradation: str | None = None
    errors: list[str] = field(default_factory=list)
    #: Warnings and log lines raised during the run.
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def mechanisms(self) -> dict[str, int]:
        """How often each mechanism fired (the rows of a comparison)."""
        return {
            "reflections": sum(self.reflections.values()),
            "spin alerts": len(self.spins),
            "breaker transitions": len(self.breakers),
            "limits reached": len(self.limits),
            "syntheses": len(self.syntheses),
            "low-confidence syntheses": self.low_confidence,
            "oracle trials": len(self.trials),
            "failed actions": sum(1 for _, _, ok in self.actions if ok is False),
            "warnings": len(self.warnings),
        }


def level_label(level: Any) -> str:
    try:
        n = int(level)
    except (TypeError, ValueError):
        return f"reflection {level}"
    return f"L{n} {LEVEL_NAMES[n]}" if 0 <= n < len(LEVEL_NAMES) else f"L{n}"


def facts(trace: Trace | dict[str, Any]) -> RunFacts:
    """The facts of one trace (``Run.trace()``, a saved payload, or a ``Trace``).

    A summary shows what it can: events that do not fit their classes are not counted
    (``Trace.load(strict=False)``), and never stop it."""
    read = Trace.load(trace, strict=False)
    trace = read.data
    t = trace.get("totals") or {}
    tokens = t.get("tokens") or {}
    f = RunFacts(run_id=str(trace.get("run_id") or ""), task=str(trace.get("task") or ""),
                 model=str(trace.get("model") or ""), status=str(trace.get("status") or "pending"),
                 answer=trace.get("answer"), reason=str(trace.get("reason") or ""),
                 iterations=int(t.get("iterations") or 0), cost_usd=float(t.get("cost_usd") or 0.0),
                 calls=int(t.get("calls") or 0), tokens=int(tokens.get("total") or 0),
                 duration_s=float(t.get("duration_s") or 0.0))
    for e in read.events:
        if isinstance(e, ev.Action):
            f.actions.append((int(e.iteration or 0), e.tool, None))
        elif isinstance(e, ev.Observation) and f.actions and f.actions[-1][0] == e.iteration:
            i, tool, _ = f.actions[-1]
            f.actions[-1] = (i, tool, e.ok)
        elif isinstance(e, ev.Reflection):
            f.reflections[level_label(e.level)] += 1
        elif isinstance(e, ev.Spin) and e.is_spinning:
            f.spins.append(e.reason or "spinning")
        elif isinstance(e, ev.BreakerTransition) and e.to_state:
            f.breakers.append(f"{e.tier} {e.from_state or '?'} → {e.to_state}")
        elif isinstance(e, ev.GuaranteeViolated) and e.violated:
            f.limits.append(e.message or e.limit or "limit")
        elif isinstance(e, ev.Synthesis | ev.SynthesisChoice):
            f.syntheses.append(e.strategy or "?")
            f.low_confidence += bool(e.low_confidence)
        elif isinstance(e, ev.Trial):
            f.trials.append(e.passed)
        elif isinstance(e, ev.Degradation):
            f.degradation = e.reason
        elif isinstance(e, ev.Error):
            f.errors.append(e.message)
        elif isinstance(e, ev.Log):
            f.warnings.append(f"{e.level or 'LOG'}: {e.message}")
        elif isinstance(e, ev.Note):
            f.notes.append(e.text)
    return f
