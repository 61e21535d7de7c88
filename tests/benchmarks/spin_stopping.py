"""The economics of stopping early, on recorded runs: what a memfit run's ends (``spin_exit``
after its warnings, and the loop's own end after ``max_bad_replies`` unusable replies in a row,
off by default, a point of the curve at 3) would have saved on failed runs, and what they would
have cost on resolved ones.

For each detector setting (a point of a curve over thresholds: the warnings given before
the exit, the layer-1 spin threshold), every run is replayed through ``analyze`` and
ended where a live run would have ended (``analysis["would_end"]``).  Per point:

- failed runs ended, and the steps and tokens after their end (what stopping saves);
- resolved runs ended (successes a live run would have lost), and their steps and tokens
  after the end;
- the share of failed and of resolved runs with at least one warning, and their ratio
  (how much more often a warning falls on a run that fails).

A step's tokens are those of the model calls of its iteration (imported traces keep them
where the source recorded usage; a run without any counts 0 tokens).  Used by
``spin_eval.py stopping``; ``tests/test_spin_stopping.py`` checks it on small runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memfit_jupyter import analyze
from memfit_jupyter.study.analysis import records_of

#: The curve's points: a name, the axis it belongs to, and the analysis settings.
#: The spin exit after the seed's 3 warnings (off by default): the other axes are measured with it.
SEED_EXIT = {"max_consecutive_spin_warnings": 3}
POINTS: list[tuple[str, str, dict[str, Any]]] = [
    *[(f"warnings={n}", "warnings before exit", {"max_consecutive_spin_warnings": n}) for n in (1, 2, 3, 5, 8)],
    *[(f"spin_threshold={n}", "spin threshold", {**SEED_EXIT, "spin_threshold": n}) for n in (4, 6)],
    ("repetition rules", "rules", {**SEED_EXIT, "spin_rules": "repetition"}),
    # the loop's first-built end: three unusable replies in a row fail the run
    ("max_bad_replies=3", "bad replies", {"max_bad_replies": 3}),
]


def run_costs(trace: Mapping[str, Any], analysis: Mapping[str, Any]) -> dict[str, Any]:
    """One run under one setting: its steps and tokens, and those after the step it would end at."""
    records = records_of(dict(trace))
    tokens_at: dict[int, int] = {}
    for e in trace.get("events") or ():
        if e.get("type") == "model_call":
            it = int(e.get("iteration") or 0)
            tokens_at[it] = tokens_at.get(it, 0) + int(e.get("prompt_tokens") or 0) + int(
                e.get("completion_tokens") or 0)
    end = analysis.get("would_end")
    end_it = end["iteration"] if end else None
    after = [r for r in records if end_it is not None and r.iteration > end_it]
    return {
        "steps": len(records), "tokens": sum(tokens_at.values()),
        "ended": end is not None, "ended_by": end["by"] if end else None,
        "steps_after": len(after), "tokens_after": sum(tokens_at.get(r.iteration, 0) for r in after),
        "warned": any(f["confirmed"] for f in analysis.get("findings") or ()),
    }


def _pct(n: float, d: float) -> float | None:
    return round(100.0 * n / d, 1) if d else None


def point(costs: list[tuple[bool, dict[str, Any]]]) -> dict[str, Any]:
    """The figures of one setting from ``(resolved, run_costs)`` of every run."""
    failed = [c for resolved, c in costs if not resolved]
    solved = [c for resolved, c in costs if resolved]
    f_warned = sum(c["warned"] for c in failed)
    s_warned = sum(c["warned"] for c in solved)
    f_rate, s_rate = _pct(f_warned, len(failed)), _pct(s_warned, len(solved))
    return {
        "failed_runs": len(failed), "resolved_runs": len(solved),
        "failed_ended": sum(c["ended"] for c in failed),
        "failed_steps_saved": sum(c["steps_after"] for c in failed),
        "failed_steps_saved_pct": _pct(sum(c["steps_after"] for c in failed), sum(c["steps"] for c in failed)),
        "failed_tokens_saved": sum(c["tokens_after"] for c in failed),
        "failed_tokens_saved_pct": _pct(sum(c["tokens_after"] for c in failed), sum(c["tokens"] for c in failed)),
        "resolved_ended": sum(c["ended"] for c in solved),
        "resolved_ended_pct": _pct(sum(c["ended"] for c in solved), len(solved)),
        "resolved_steps_lost": sum(c["steps_after"] for c in solved),
        "resolved_tokens_lost": sum(c["tokens_after"] for c in solved),
        "ended_by_bad_replies": sum(c["ended_by"] == "bad_replies" for _, c in costs),
        "failed_warned_pct": f_rate, "resolved_warned_pct": s_rate,
        "warning_ratio": round(f_rate / s_rate, 2) if f_rate is not None and s_rate else None,
    }


def curve(runs: Iterable[Mapping[str, Any]], points: list[tuple[str, str, dict[str, Any]]] | None = None,
          analyse: Callable[..., dict[str, Any]] = analyze, by: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every point of the curve over ``runs`` (each with ``trace`` and ``resolved``): under ``"all"``,
    and, with ``by`` (e.g. ``"source"``), for each value of that field too (each run analysed once)."""
    runs = list(runs)
    out: dict[str, list[dict[str, Any]]] = {}
    for name, axis, settings in points or POINTS:
        costs = [(r, run_costs(r["trace"], analyse(r["trace"], **settings)["analysis"])) for r in runs]
        groups: dict[str, list[tuple[bool, dict[str, Any]]]] = {"all": [(bool(r["resolved"]), c) for r, c in costs]}
        for r, c in costs:
            if by is not None:
                groups.setdefault(str(r[by]), []).append((bool(r["resolved"]), c))
        for group, members in groups.items():
            out.setdefault(group, []).append({"point": name, "axis": axis, "settings": settings, **point(members)})
    return out


def print_curve(points: list[dict[str, Any]], title: str) -> None:
    print(f"\n## {title}")
    print("| setting | failed ended | failed steps saved (%) | failed tokens saved (%) | resolved ended (%) "
          "| resolved steps lost | ended by 3 bad replies | warned: failed % / resolved % (ratio) |")
    print("|---|---|---|---|---|---|---|---|")
    for p in points:
        print(f"| {p['point']} | {p['failed_ended']}/{p['failed_runs']} | {p['failed_steps_saved']:,} "
              f"({p['failed_steps_saved_pct']}) | {p['failed_tokens_saved']:,} ({p['failed_tokens_saved_pct']}) "
              f"| {p['resolved_ended']}/{p['resolved_runs']} ({p['resolved_ended_pct']}) | "
              f"{p['resolved_steps_lost']:,} | {p['ended_by_bad_replies']} | {p['failed_warned_pct']} / "
              f"{p['resolved_warned_pct']} ({p['warning_ratio']}) |")
