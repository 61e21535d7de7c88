"""What the live views share about a moving run: how often they redraw, how many rows they keep,
and how a run's warnings and log lines become its events (``captured_logs``)."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ..run import Run

#: The live view re-renders at most this often, in milliseconds (``MemfitMagics.throttle_ms``).
THROTTLE_MS = 100
#: Iteration rows the live view keeps in the page (``MemfitMagics.max_live_cards``).
MAX_LIVE_CARDS = 100


@contextmanager
def captured_logs(run: Run) -> Iterator[None]:
    """While a run moves, its warnings and log lines become ``log`` events of the run (so the
    view shows them, and the saved trace keeps them) instead of a stderr block in the cell."""
    inside = False

    def record(level: str, logger: str, message: str) -> None:
        nonlocal inside
        if inside:
            return
        inside = True
        try:
            run.emit("log", level=level, logger=logger, message=message[:2000])
        finally:
            inside = False

    class Handler(logging.Handler):
        def emit(self, r: logging.LogRecord) -> None:
            try:
                record(r.levelname, r.name, r.getMessage())
            except Exception:  # a log line must never break the run
                pass

    handler = Handler(logging.WARNING)
    package = logging.getLogger("memfit_jupyter")
    package.addHandler(handler)
    with warnings.catch_warnings():  # the filters stay as they are: only where warnings go changes
        def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
            record("WARNING", category.__name__, str(message))

        warnings.showwarning = show
        try:
            yield
        finally:
            package.removeHandler(handler)
