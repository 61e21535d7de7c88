"""The live progress of a sweep: a bar, the counts (done / running / failed / skipped), the
cost so far against the sweep's budget, an ETA, and the last runs that ended.

``SweepWidget.update`` is the sweep's ``on_progress`` callback: the sweep's scheduler
calls it on the kernel's main thread, so updates reach the browser while the cell runs.
A saved notebook keeps the last state as ``text/plain`` and ``text/html``.
"""

from __future__ import annotations

import html
from typing import Any

#: Colours of the bar's segments (done, failed, skipped), readable on light and dark themes.
COLOURS = {"done": "#54a24b", "failed": "#e45756", "skipped": "#bab0ac", "running": "#4c78a8"}


def _seconds(s: float | None) -> str:
    if s is None:
        return "…"
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def summary_text(p: Any) -> str:
    """One line: what the sweep has done and what it spent."""
    budget = f" of ${p.budget_usd:g}" if p.budget_usd is not None else ""
    state = "finished" if p.finished else f"ETA {_seconds(p.eta_s)}"
    resumed = f" ({p.resumed} resumed)" if p.resumed else ""
    return (f"sweep on {p.engine}: {p.done}/{p.total} done{resumed}, {p.running} running, {p.failed} failed, "
            f"{p.skipped} skipped · ${p.cost_usd:.4f}{budget} · {_seconds(p.elapsed_s)} elapsed · {state}")


def summary_html(p: Any) -> str:
    total = max(p.total, 1)
    segments = "".join(
        f'<div style="width:{100 * n / total:.2f}%;background:{COLOURS[k]}" title="{k}: {n}"></div>'
        for k, n in (("done", p.done), ("failed", p.failed), ("skipped", p.skipped), ("running", p.running))
        if n)
    bar = (f'<div style="display:flex;height:10px;border-radius:3px;overflow:hidden;'
           f'background:var(--jp-layout-color2,#eee);margin:4px 0">{segments}</div>')
    rows = "".join(
        f"<tr><td>{html.escape(str(name))}</td><td style='color:{COLOURS['done'] if status == 'done' else COLOURS['failed']}'>"
        f"{html.escape(str(status))}</td><td style='text-align:right'>${cost:.4f}</td></tr>"
        for name, status, cost in reversed(p.recent[-5:]))
    recent = f"<table style='font-size:90%'>{rows}</table>" if rows else ""
    return (f'<div class="memfit-sweep" style="font-family:var(--jp-ui-font-family,sans-serif)">'
            f"<div>{html.escape(summary_text(p))}</div>{bar}{recent}</div>")


class SweepWidget:
    """A live view of one sweep (ipywidgets), made and shown by ``sweep(progress="auto")``."""

    def __init__(self, total: int, engine: str):
        import ipywidgets as w

        self._html = w.HTML(value=html.escape(f"sweep on {engine}: {total} runs, starting…"))
        self.box = w.VBox([self._html])
        self._text = f"sweep on {engine}: {total} runs"

    def show(self) -> None:
        from .ipython import display

        display(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.box._repr_mimebundle_(**kwargs) or {}
        value = self._html.value
        bundle["text/plain"] = self._text
        bundle["text/html"] = value  # what a saved notebook shows without the widget state
        return bundle

    def update(self, progress: Any) -> None:
        """Show ``progress`` (a ``SweepProgress``)."""
        self._text = summary_text(progress)
        self._html.value = summary_html(progress)
