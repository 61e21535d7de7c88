"""What a ``%%memfit_task`` cell outputs: one bundle per run, live while the kernel runs it.

The bundle is the durable record: ``application/vnd.memfit.run+json``
(``run.trace()``), a short static ``text/html`` summary and ``text/plain``.  It
is shown when the run starts, carries a display id and is updated each time
the run settles (end of the cell, a click, a later ``run.step()``).  Its
metadata names the live widget's model (``live_widget``); the JupyterLab
extension draws the run live from that model while it exists, and from the
saved trace otherwise.  No output holds a widget view, so a notebook reopened
with no kernel shows every run, never "model not found".  The metadata also
lists the run's forks, each with its trace (``forks``), so the run view's tree
of forks reopens with the notebook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..secrets import redact_obj
from . import RUN_MIME
from .capture import MAX_LIVE_CARDS, THROTTLE_MS, captured_logs
from .html import render_html, render_text

if TYPE_CHECKING:
    from ..run import Run
    from .ipython import OutputHandle
    from .widget import RunWidget

#: Displays whose run may still move (step mode, approvals, overrides): settled after each cell.
_LIVE: list[RunDisplay] = []


def bundle(run: Run, *, quiet: bool = False, widget_id: str | None = None,
           forks: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (data, metadata) of a run's output; ``forks``: its saved forks (``SavedFork``)."""
    return trace_bundle(run.trace(), quiet=quiet, widget_id=widget_id, forks=forks)


def trace_bundle(trace: dict[str, Any], *, quiet: bool = False, widget_id: str | None = None,
                 forks: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (data, metadata) that show a trace: the run MIME type, text and HTML.  Every string
    of every part goes through the redaction (an output is saved with the notebook)."""
    data = {RUN_MIME: trace, "text/plain": render_text(trace, quiet=quiet),
            "text/html": render_html(trace, quiet=quiet)}
    metadata = {RUN_MIME: {"version": trace.get("version"), "live_widget": widget_id, "quiet": quiet,
                           "forks": list(forks or [])}}
    return redact_obj(data), redact_obj(metadata)


class RunDisplay:
    """The output of one run in one cell, and (unless quiet) its live widget."""

    def __init__(self, run: Run, *, quiet: bool = False, step: bool = False, throttle_ms: int = THROTTLE_MS,
                 max_cards: int = MAX_LIVE_CARDS):
        self.run = run
        self.quiet = quiet
        self.handle: OutputHandle | None = None
        self._seen: tuple[int, tuple[tuple[str, int], ...]] | None = None
        self.widget: RunWidget | None = None
        if not quiet:
            from .widget import RunWidget

            self.widget = RunWidget(run, step=step, throttle_ms=throttle_ms, max_cards=max_cards,
                                    on_settle=self.update_bundle)
        _LIVE.append(self)

    def show_bundle(self) -> None:
        """Put the output in the current cell (once); later changes update it in place."""
        if self.handle is not None:
            return
        from .ipython import display_updatable

        data, metadata = self._bundle()
        self._seen = self._state()
        self.handle = display_updatable(data, metadata)

    def _bundle(self) -> tuple[dict[str, Any], dict[str, Any]]:
        widget_id = self.widget.model.model_id if self.widget is not None else None
        forks = None
        if self.run.forks:
            from .fork_view import ForkTree

            tree = self.widget.forks if self.widget is not None else ForkTree(self.run)
            forks = tree.entries(self.widget.fork_widgets() if self.widget is not None else {}, traces=True)
        return bundle(self.run, quiet=self.quiet, widget_id=widget_id, forks=forks)

    def _state(self) -> tuple[int, tuple[tuple[str, int], ...]]:
        """What the saved output shows: the run's events and each fork's."""
        return len(self.run.events), tuple((c.id, len(c.events)) for c in self.run.forks)

    def update_bundle(self) -> None:
        if self.handle is None or self._state() == self._seen:
            return
        data, metadata = self._bundle()
        self._seen = self._state()
        self.handle.update(data, raw=True, metadata=metadata)

    def settle(self) -> None:
        """Bring the live view and the saved bundle up to date with the run."""
        if self.widget is not None:
            self.widget.settle()
        else:
            self.update_bundle()


class CompareDisplay:
    """One output comparing two runs (``memfit_jupyter.compare``), live while they go: its metadata
    names each side's live widget model (``live_widgets``), so the extension draws each side live
    from it while the kernel runs it, and the saved comparison once the kernel has gone.  Call
    ``update()`` as the runs move; the last update is the saved record."""

    def __init__(self, views: tuple[RunDisplay, RunDisplay], labels: tuple[str, str]):
        self.views = views
        self.labels = labels
        self.handle: OutputHandle | None = None

    def _bundle(self) -> tuple[dict[str, Any], dict[str, Any]]:
        from ..study.compare import COMPARE_MIME, compare

        # Traces, not runs: compare() would run a run that has not started to its end.
        data = compare(*(v.run.trace() for v in self.views), labels=self.labels)._repr_mimebundle_()
        ids = [v.widget.model.model_id if v.widget is not None else None for v in self.views]
        return data, {COMPARE_MIME: {"version": data[COMPARE_MIME].get("version"), "live_widgets": ids}}

    def show(self) -> None:
        """Put the comparison in the current cell (once); later updates change it in place."""
        from .ipython import display_updatable

        if self.handle is None:
            data, metadata = self._bundle()
            self.handle = display_updatable(data, metadata)

    def update(self) -> None:
        """Refresh the comparison's table and saved traces (each side's live view streams itself)."""
        if self.handle is None:
            self.show()
            return
        data, metadata = self._bundle()
        self.handle.update(data, raw=True, metadata=metadata)


def settle_all(*_args: Any) -> None:
    """``post_run_cell`` hook: a ``run.step()`` in a later cell shows up in its run's output."""
    for display in list(_LIVE):
        if display.handle is not None and display._state() != display._seen:
            try:
                display.settle()
            except Exception:  # a display must never break the person's cell
                import logging

                logging.getLogger("memfit_jupyter").exception("refreshing a memfit display failed")
    # A finished run moves no more, except a degraded one that may be overridden; a shown one may
    # still gain forks (``%memfit fork``, ``run.fork`` in a later cell), which its tree lists.
    _LIVE[:] = [d for d in _LIVE if not (d.run.done and d.run.status != "degraded") or d.handle is None
                or d._state() != d._seen or d.widget is not None]


def show(run: Run, *, step: bool = False, quiet: bool = False, throttle_ms: int = THROTTLE_MS,
         max_cards: int = MAX_LIVE_CARDS) -> RunDisplay:
    """Show a ``Run`` from the Python API as ``%%memfit_task`` does: one output, live while it
    runs, kept as the saved record.  With ``step=True`` nothing runs yet; otherwise the run goes
    to its end here.  Warnings raised meanwhile go into the run (and its view), not to stderr.
    The live view keeps the newest ``max_cards`` iteration rows in the page (0: all); the older
    ones fold into one line that brings them back.

    >>> from memfit_jupyter import Agent
    >>> from memfit_jupyter.jupyter.display import show
    >>> view = show(Agent(model="memfit/demo").start("add up data.txt"))   # doctest: +SKIP
    """
    view = RunDisplay(run, quiet=quiet, step=step, throttle_ms=throttle_ms, max_cards=max_cards)
    if not quiet:
        view.show_bundle()
    if not step and not run.done:
        with captured_logs(run):
            try:
                if view.widget is not None:
                    view.widget.run_to_end()
                else:
                    run.run()
            except KeyboardInterrupt:  # between two steps: the engine catches the rest
                run.cancel("interrupted by the person")
    view.settle()
    view.show_bundle()
    return view
