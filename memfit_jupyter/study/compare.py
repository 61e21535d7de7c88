"""Two runs side by side: ``memfit_jupyter.compare(a, b)``.

``a`` and ``b`` are ``Run`` objects or traces (``run.trace()``, a saved
``application/vnd.memfit.run+json`` payload).  The result names the outcome,
iterations, cost and time of each, where the two diverged (the first iteration
whose action differs) and how often each mechanism fired; in a notebook it
shows as ``application/vnd.memfit.compare+json``, which the JupyterLab
extension draws as a table and the two runs next to each other.

>>> from memfit_jupyter import Agent, compare
>>> on = Agent(model="memfit/spin-demo").start("add up data.txt")
>>> off = Agent(model="memfit/spin-demo", spin_threshold=99).start("add up data.txt")
>>> cmp = compare(on, off, labels=("spin detection on", "off"))   # doctest: +SKIP
>>> cmp.diverged_at                                               # doctest: +SKIP
3
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from ..events import Action
from ..jupyter.html import fmt_value
from ..jupyter.state import RunFacts, facts
from ..secrets import redact_obj
from ..trace import Trace

COMPARE_MIME = "application/vnd.memfit.compare+json"


def _trace(x: Any) -> Trace:
    if not isinstance(x, dict | str | Path) and not callable(getattr(x, "trace", None)):
        raise TypeError(f"compare() takes runs or traces, got {type(x).__name__}")
    return Trace.load(x, unknown="warn")


def _actions(trace: Trace) -> dict[int, str]:
    """``tool(params)`` of each iteration's action (the last one, if an iteration had several)."""
    out: dict[int, str] = {}
    for e in trace.of_type(Action):
        params = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, default=str)}"
                           for k, v in sorted(e.params.items()))
        out[int(e.iteration or 0)] = f"{e.tool or '(no tool)'}({params})"
    return out


@dataclass
class Comparison:
    """The comparison of two runs; ``rows`` are (label, kind, value a, value b)."""

    labels: tuple[str, str]
    traces: tuple[dict[str, Any], dict[str, Any]]
    facts: tuple[RunFacts, RunFacts]
    #: The first iteration whose action differs (None when both took the same actions).
    diverged_at: int | None
    #: The two actions at that iteration.
    diverged_actions: tuple[str, str] | None

    @property
    def rows(self) -> list[tuple[str, str, Any, Any]]:
        a, b = self.facts
        rows: list[tuple[str, str, Any, Any]] = [
            ("outcome", "text", a.status, b.status),
            ("answer", "text", a.answer, b.answer),
            ("iterations", "count", a.iterations, b.iterations),
            ("cost", "money", a.cost_usd, b.cost_usd),
            ("model calls", "count", a.calls, b.calls),
            ("tokens", "count", a.tokens, b.tokens),
            ("duration", "seconds", a.duration_s, b.duration_s),
        ]
        ma, mb = a.mechanisms(), b.mechanisms()
        rows += [(name, "count", ma[name], mb[name]) for name in ma if ma[name] or mb[name]]
        return rows

    def payload(self) -> dict[str, Any]:
        diverged = None
        if self.diverged_at is not None and self.diverged_actions is not None:
            diverged = {"iteration": self.diverged_at, "a": self.diverged_actions[0],
                        "b": self.diverged_actions[1]}
        return {"version": 1, "labels": list(self.labels), "runs": list(self.traces),
                "rows": [{"label": label, "kind": kind, "values": [va, vb]}
                         for label, kind, va, vb in self.rows],
                "diverged": diverged}

    def _text(self) -> str:
        width = max(len(r[0]) for r in self.rows)
        lines = [f"{'':{width}}  {self.labels[0]}  |  {self.labels[1]}"]
        for label, kind, va, vb in self.rows:
            lines.append(f"{label:{width}}  {fmt_value(kind, va, 60)}  |  {fmt_value(kind, vb, 60)}")
        if self.diverged_at is not None and self.diverged_actions:
            lines.append(f"diverged at iteration {self.diverged_at}: {self.diverged_actions[0]} vs "
                         f"{self.diverged_actions[1]}")
        else:
            lines.append("the two runs took the same actions")
        return "\n".join(lines)

    def _html(self) -> str:
        head = (f"<tr><th></th><th>{escape(self.labels[0])}</th><th>{escape(self.labels[1])}</th></tr>")
        body = "".join(f"<tr><th style='text-align:left'>{escape(label)}</th><td>{escape(fmt_value(kind, va))}</td>"
                       f"<td>{escape(fmt_value(kind, vb))}</td></tr>" for label, kind, va, vb in self.rows)
        if self.diverged_at is not None and self.diverged_actions:
            where = (f"diverged at iteration {self.diverged_at}: <code>{escape(self.diverged_actions[0])}</code>"
                     f" vs <code>{escape(self.diverged_actions[1])}</code>")
        else:
            where = "the two runs took the same actions"
        return (f'<div class="memfit-compare-summary"><b>memfit compare</b>'
                f'<table style="border-collapse:collapse">{head}{body}</table><div>{where}</div></div>')

    def to_html(self, path: Any) -> Any:
        """Write this comparison as one offline HTML file with the full interactive view
        (``memfit_jupyter.jupyter.report``); returns the path."""
        from ..jupyter.report import write_report

        return write_report(self, path)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle = {COMPARE_MIME: self.payload(), "text/html": self._html(), "text/plain": self._text()}
        return dict(redact_obj(bundle))

    def __repr__(self) -> str:
        return str(redact_obj(self._text()))  # printed and saved with the notebook, as the bundle is


def compare(a: Any, b: Any, *, labels: tuple[str, str] = ("A", "B")) -> Comparison:
    """Compare two runs (or traces).  A run that has not started yet is run to its end first."""
    runs = []
    for x in (a, b):
        if not isinstance(x, dict) and getattr(x, "status", None) == "pending" and callable(getattr(x, "run", None)):
            x.run()
        runs.append(_trace(x))
    ta, tb = runs
    acts_a, acts_b = _actions(ta), _actions(tb)
    diverged_at = None
    pair = None
    for i in sorted(set(acts_a) | set(acts_b)):
        if acts_a.get(i) != acts_b.get(i):
            diverged_at, pair = i, (acts_a.get(i, ""), acts_b.get(i, ""))
            break
    return Comparison(labels=(str(labels[0]), str(labels[1])), traces=(ta.data, tb.data),
                      facts=(facts(ta), facts(tb)),
                      diverged_at=diverged_at, diverged_actions=pair)


class _CallableModule(types.ModuleType):
    """``memfit_jupyter.compare`` names both this module and its function; once the module is
    imported (``from memfit_jupyter.compare import Comparison``) the package attribute is the
    module, so the module answers calls too."""

    def __call__(self, *args: Any, **kwargs: Any) -> Comparison:
        return compare(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
