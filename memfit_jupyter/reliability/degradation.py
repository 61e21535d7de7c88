"""The graceful degradation plan of a run that stopped short (docs/MECHANISMS.md §4.4).

Its recommendations follow from which limit ran out (``LimitsExceeded.limit``),
never from the wording of the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..records import GracefulDegradationPlan

if TYPE_CHECKING:
    from ..protocols import RunView

#: What to do next, by the limit that ran out.
RECOMMENDATIONS = {
    "max_cost_usd": "raise max_cost_usd (run.override(confirm=True, max_cost_usd=...)) or use a cheaper model",
    "max_duration_seconds": "raise max_duration_seconds or split the task into smaller ones",
    "max_recursive_calls": "raise max_recursive_calls or ask for fewer samples",
}
ALWAYS = "read the partial result and the trace before running again"


def recommendations_for(limit: str | None) -> list[str]:
    """The plan's recommendations when ``limit`` ran out (None: no limit, just the last one).

    >>> recommendations_for("max_recursive_calls")[0]
    'raise max_recursive_calls or ask for fewer samples'
    """
    first = RECOMMENDATIONS.get(limit or "")
    return [first, ALWAYS] if first else [ALWAYS]


def degradation_plan(run: RunView, reason: str, *, limit: str | None = None, tried: list[str] | None = None,
                     recommendations: list[str] | None = None) -> GracefulDegradationPlan:
    """What the person gets from ``run`` stopped for ``reason``: the best answer so far, what it
    cost, what was tried and what to do next."""
    spent = run.budget.spent
    return GracefulDegradationPlan(
        reason=reason, partial_result=run.best_answer(),
        explanation=f"The run stopped after {run.iteration} iteration(s): {reason}.",
        recommendations=list(recommendations) if recommendations is not None else recommendations_for(limit),
        cost_usd=spent.cost_usd, duration_s=run.elapsed, calls=spent.calls, iterations=run.iteration,
        tried=list(tried or []),
    )
