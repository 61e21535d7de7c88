"""The trace of a run: its settings, totals and events, as one JSON-serialisable dict.

The schema of this dict is generated from the event classes (``schema.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run import Run

#: The version of the serialised format (``application/vnd.memfit.run+json``).
TRACE_VERSION = 1


def trace_of(run: Run) -> dict[str, Any]:
    """``run`` as the ``application/vnd.memfit.run+json`` payload (``Run.trace()``)."""
    spent = run.budget.spent
    g = run.budget.guarantees  # the run's own: an override may have raised them
    return {
        "version": TRACE_VERSION,
        "run_id": run.id,
        "task": run.task,
        "model": run.agent.model,
        "tiers": run.agent.tiers,
        "status": run.status,
        "answer": run.result.answer if run.result else None,
        "reason": run.result.reason if run.result else "",
        "started_at": run.started_at,
        "settings": run.agent.settings(),
        "workdir": run.prompt_workdir,
        "limits": {"max_cost_usd": g.max_cost_usd, "max_duration_seconds": g.max_duration_seconds,
                   "max_recursive_calls": g.max_recursive_calls,
                   "max_iterations": run.agent.max_iterations},
        "totals": {
            "cost_usd": spent.cost_usd,
            "tokens": {"prompt": spent.prompt_tokens, "completion": spent.completion_tokens,
                       "total": spent.prompt_tokens + spent.completion_tokens, **_cached(run)},
            "calls": spent.calls,
            "iterations": run.iteration,
            "recursive_calls": run.budget.recursive_calls,
            "duration_s": (run.result.duration_s if run.result else run.elapsed),
            **_unpriced(run),
        },
        "events": [e.to_dict() for e in run.events],
        **_family(run),
    }


def _family(run: Run) -> dict[str, Any]:
    """``parent`` (the fork this run is) and ``forks`` (its children made in this process), when
    there are any: a run tree can be drawn from saved traces alone (``fork.py``)."""
    out: dict[str, Any] = {}
    if run.parent:
        out["parent"] = run.parent
    if run.forks:
        from .fork import fork_summary

        out["forks"] = fork_summary(run)
    return out


def _cached(run: Run) -> dict[str, int]:
    """``{"cached": n}``: the prompt tokens providers served from their prompt caches, when any
    call reported some (absent otherwise, so traces of providers that say nothing stay as they were)."""
    n = sum(getattr(e, "cached_tokens", 0) or 0 for e in run.events if e.TYPE == "model_call")
    return {"cached": n} if n else {}


def _unpriced(run: Run) -> dict[str, list[str]]:
    """``{"unpriced": [model, ...]}``: the models called that have no known price, whose calls
    cost counts as $0 (absent when every model has one, so priced runs' traces stay as they were)."""
    prices = getattr(run.llm.backend, "prices", None)
    if prices is None:
        return {}
    models = dict.fromkeys(str(getattr(e, "model", "")) for e in run.events if e.TYPE == "model_call")
    unpriced = []
    for model in models:
        try:
            price_in, price_out = prices(model)
        except Exception:  # a backend that cannot say: the price is not known
            price_in = price_out = 0.0
        if not (price_in or price_out):
            unpriced.append(model)
    return {"unpriced": unpriced} if unpriced else {}
