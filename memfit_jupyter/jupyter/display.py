"""What a ``%%memfit_task`` cell outputs: the live widget and the saved bundle.

Two outputs, on purpose.  The live widget needs a kernel; a saved notebook
opened without one would show "model not found" in its place if the trace
rode in the same bundle.  So the trace goes in its own output, with
``application/vnd.memfit.run+json`` (``run.trace()``), ``text/plain`` and a
self-contained ``text/html``; it carries a display id and is updated after
every step, click and cell that moves the run.  Its metadata names the live
widget's model id, so a renderer can tell that a live view sits above it.
"""

from __future__ import annotations

from typing import Any

from . import RUN_MIME
from .html import render_html, render_text

#: Displays whose run may still move (step mode, approvals, overrides): settled after each cell.
_LIVE: list[RunDisplay] = []


def bundle(run: Any, *, quiet: bool = False, widget_id: str | None = None) -> tuple[dict, dict]:
    """The (data, metadata) of a run's saved output."""
    trace = run.trace()
    data = {RUN_MIME: trace, "text/plain": render_text(trace, quiet=quiet),
            "text/html": render_html(trace, quiet=quiet)}
    metadata = {RUN_MIME: {"version": trace.get("version"), "live_widget": widget_id, "quiet": quiet}}
    return data, metadata


class RunDisplay:
    """The outputs of one run in one cell: the live widget (unless quiet) and the bundle."""

    def __init__(self, run: Any, *, quiet: bool = False, step: bool = False, throttle_ms: int = 100,
                 max_cards: int = 100):
        self.run = run
        self.quiet = quiet
        self.handle: Any = None
        self._seen = -1
        self.widget = None
        if not quiet:
            from .widget import RunWidget

            self.widget = RunWidget(run, step=step, throttle_ms=throttle_ms, max_cards=max_cards,
                                    on_settle=self.update_bundle)
        _LIVE.append(self)

    def show_widget(self) -> None:
        if self.widget is not None:
            from IPython.display import display

            display(self.widget.root)

    def show_bundle(self) -> None:
        """Put the saved output in the current cell (once); later changes update it in place."""
        from IPython.display import display

        data, metadata = self._bundle()
        self._seen = len(self.run.events)
        self.handle = display(data, raw=True, metadata=metadata, display_id=True)

    def _bundle(self) -> tuple[dict, dict]:
        widget_id = self.widget.root.model_id if self.widget is not None else None
        return bundle(self.run, quiet=self.quiet, widget_id=widget_id)

    def update_bundle(self) -> None:
        if self.handle is None or len(self.run.events) == self._seen:
            return
        data, metadata = self._bundle()
        self._seen = len(self.run.events)
        self.handle.update(data, raw=True, metadata=metadata)

    def settle(self) -> None:
        """Bring the widget and the bundle up to date with the run."""
        if self.widget is not None:
            self.widget.settle()
        else:
            self.update_bundle()


def settle_all(*_args: Any) -> None:
    """``post_run_cell`` hook: a ``run.step()`` in a later cell shows up in its run's outputs."""
    for display in list(_LIVE):
        if display.handle is not None and len(display.run.events) != display._seen:
            try:
                display.settle()
            except Exception:  # a display must never break the person's cell
                import logging

                logging.getLogger("memfit_jupyter").exception("refreshing a memfit display failed")
    # A finished run moves no more, except a degraded one that may be overridden.
    _LIVE[:] = [d for d in _LIVE if not (d.run.done and d.run.status != "degraded") or d.handle is None
                or len(d.run.events) != d._seen]


def show(run: Any, *, step: bool = False, quiet: bool = False, throttle_ms: int = 100,
         max_cards: int = 100) -> RunDisplay:
    """Show a ``Run`` from the Python API as ``%%memfit_task`` does: the live widget now, and the
    saved bundle.  With ``step=True`` nothing runs yet; otherwise the run goes to its end here.

    >>> from memfit_jupyter import Agent
    >>> from memfit_jupyter.jupyter.display import show
    >>> view = show(Agent(model="memfit/demo").start("add up data.txt"))   # doctest: +SKIP
    """
    view = RunDisplay(run, quiet=quiet, step=step, throttle_ms=throttle_ms, max_cards=max_cards)
    view.show_widget()
    if not step and not run.done:
        try:
            run.run()
        except KeyboardInterrupt:  # between two steps: the engine catches the rest
            run.cancel("interrupted by the person")
    view.settle()
    view.show_bundle()
    return view
