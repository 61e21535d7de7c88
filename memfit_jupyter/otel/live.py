"""Live export: spans leave while the run goes, and a collector in trouble never holds it up.

``attach(run, otel)`` subscribes a ``LiveExport`` to the run.  On the run's
own thread each event is mapped to spans (``SpanBuilder``: microseconds); an
ended span goes into the SDK's ``BatchSpanProcessor``, a bounded queue
(``max_queue``, default 2048, or ``OTEL_BSP_MAX_QUEUE_SIZE``) that a
background thread sends to the collector.  When the collector is down,
refusing or slow, batches fail or the queue fills and new spans push out the
oldest: nothing waits.  Lost spans are counted:

- a batch the exporter could not deliver: all of its spans;
- spans pushed out of the full queue: whatever was handed to the queue and
  never reached the exporter (exact once the export has finished; while the
  run goes, the part beyond what a full queue can hold).

The first loss, and each time the count has doubled since, is told to the
person as a ``note`` event of the run (``source="otel"``); ``stats()`` gives
the counts at any time, ``wait()`` the final ones.  When ``run_end`` arrives
the remaining spans are flushed from a background thread; at interpreter
exit an unfinished flush gets a bounded wait (``EXIT_WAIT_S``).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import BatchSpanProcessor

from .. import __version__
from ..secrets import package_logger, refresh_env_secrets
from . import conventions, sdk
from .saved import TRACER_NAME
from .spans import SpanBuilder

log = package_logger()

DEFAULT_MAX_QUEUE = 2048
#: How long interpreter exit waits for live exports still flushing (all together).
EXIT_WAIT_S = 5.0
_LIVE: weakref.WeakKeyDictionary[Any, LiveExport] = weakref.WeakKeyDictionary()
_FLUSHING: set[threading.Thread] = set()
_atexit_registered = False


@dataclass(frozen=True)
class ExportStats:
    """Counts of a live export.  ``dropped`` = lost to failed batches + pushed out of the queue."""

    destination: str
    spans: int          # spans the run has produced so far
    exported: int       # delivered to the collector (or written to the file)
    dropped: int
    pending: int        # waiting in the queue or being sent
    failed_batches: int
    finished: bool      # the run ended and the last flush is over
    last_error: str     # the exporter's last word on a failed batch


class LiveExport:
    """Exports ``run``'s events as spans while it runs; see the module docstring.

    ``endpoint`` (OTLP/HTTP, ``/v1/traces`` added to a base URL) or ``path`` (OTLP/JSON lines);
    with neither, ``OTEL_EXPORTER_OTLP_ENDPOINT``.  ``schedule_delay`` (seconds between
    batches) and ``max_queue`` default to the SDK's ``OTEL_BSP_*`` settings.
    """

    def __init__(self, run: Any, *, endpoint: str | None = None, path: str | Path | None = None,
                 content: bool | None = None, headers: dict[str, str] | None = None,
                 timeout: float | None = None, max_queue: int | None = None,
                 schedule_delay: float | None = None, resource_attributes: dict[str, Any] | None = None):
        if endpoint and path:
            raise ValueError("give endpoint= or path=, not both")
        url = None if path else sdk.traces_url(endpoint)
        if path is None and url is None:
            raise ValueError("nowhere to export: give an endpoint (http://host:port) or a file path, "
                             "or set OTEL_EXPORTER_OTLP_ENDPOINT")
        if path is not None:  # appended to: one file can log a session's runs
            path = Path(path).resolve()
            if not path.parent.is_dir():
                raise FileNotFoundError(f"cannot write {path}: no folder {path.parent}")
        self.destination = str(path) if path is not None else str(url)
        inner = sdk.FileExporter(path) if path is not None else sdk.http_exporter(url, headers, timeout)
        self._counter = sdk.CountingExporter(inner)
        if max_queue is None:
            max_queue = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or DEFAULT_MAX_QUEUE)
        self.max_queue = max_queue
        self._processor = BatchSpanProcessor(
            self._counter, max_queue_size=max_queue, max_export_batch_size=min(512, max_queue),
            schedule_delay_millis=None if schedule_delay is None else schedule_delay * 1000)
        self._provider, ids = sdk.provider(resource_attributes)
        self._provider.add_span_processor(self._processor)
        sdk.install_quiet()
        self._said: list[str] = []
        refresh_env_secrets()
        wall0 = time.time_ns() - int(getattr(run, "elapsed", 0.0) * 1e9)
        header = {"run_id": run.id, "model": run.agent.model, "started_at": run.started_at,
                  "task": run.task}
        self._builder = SpanBuilder(self._provider.get_tracer(TRACER_NAME, __version__), ids,
                                    header=header, wall0_ns=wall0,
                                    content=conventions.capture_content(content), redacted=True)
        self._run = weakref.ref(run)
        self._told = 0
        self._telling = False
        self._flush: threading.Thread | None = None
        self._finished = threading.Event()
        self.unsubscribe = run.subscribe(self)
        _LIVE[run] = self

    # --- the subscriber -----------------------------------------------------------------
    def __call__(self, event: Any) -> None:
        kind = event["type"]
        sdk.keep_own(self._said)  # "Queue full, dropping Span" is counted, not printed
        try:
            self._builder.feed(event)
        finally:
            sdk.keep_own(None)
        if kind == "run_end":
            self._finish()
        elif not self._telling and (self._counter.failed or
                                    self._builder.spans_ended - self._counter.started > self.max_queue):
            self._said.clear()
            self._tell_losses()

    def _tell_losses(self) -> None:
        dropped = self._dropped(final=False)
        if dropped == 0 or dropped < 2 * self._told:
            return
        run = self._run()
        self._told = dropped
        if run is None:
            return
        self._telling = True
        try:
            run.emit("note", text=f"OpenTelemetry export: {dropped} span(s) lost so far; the collector "
                                  f"at {self.destination} did not take them (down, refusing or too "
                                  "slow). The run goes on; later spans are still sent.",
                     source="otel")
        finally:
            self._telling = False

    # --- counts -------------------------------------------------------------------------
    def _dropped(self, final: bool) -> int:
        c = self._counter
        unsent = self._builder.spans_ended - c.started
        pushed_out = unsent if final else max(0, unsent - self.max_queue)
        return c.failed + pushed_out

    def stats(self) -> ExportStats:
        """The counts now (exact once ``finished``)."""
        final = self._finished.is_set()
        c = self._counter
        dropped = self._dropped(final)
        pending = 0 if final else max(0, self._builder.spans_ended - c.exported - dropped)
        return ExportStats(self.destination, self._builder.spans_ended, c.exported, dropped, pending,
                           c.failed_batches, final, c.last_error)

    # --- the end ------------------------------------------------------------------------
    def _finish(self) -> None:
        self.unsubscribe()
        thread = threading.Thread(target=self._shutdown, name="memfit-otel-flush", daemon=True)
        self._flush = thread
        _FLUSHING.add(thread)
        _register_atexit()
        thread.start()

    def _shutdown(self) -> None:
        try:
            self._provider.shutdown()
        except Exception:  # the run is over; a broken exporter must not surface in another cell
            log.debug("OpenTelemetry export shutdown failed", exc_info=True)
        finally:
            self._finished.set()
            _FLUSHING.discard(threading.current_thread())

    def wait(self, timeout: float | None = None) -> ExportStats:
        """Wait (at most ``timeout`` s) for the last flush after the run ended; the counts."""
        if self._flush is not None:
            self._flush.join(timeout)
        return self.stats()

    def close(self, timeout: float | None = None) -> ExportStats:
        """End the export now (a run that will not reach ``run_end``): open spans end, the rest
        is flushed; returns the counts."""
        if self._flush is None:
            self._builder.close()
            self._finish()
        return self.wait(timeout)


def _register_atexit() -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_wait_at_exit)
        _atexit_registered = True


def _wait_at_exit() -> None:
    deadline = time.monotonic() + EXIT_WAIT_S
    for thread in list(_FLUSHING):
        thread.join(max(0.0, deadline - time.monotonic()))


def options_for(otel: Any) -> dict[str, Any]:
    """``LiveExport`` options from what ``Agent(otel=...)`` / ``--otel`` accept: True (the
    ``OTEL_EXPORTER_OTLP_*`` endpoint), an ``http(s)://`` endpoint (any ``scheme://`` is read
    as one, and refused unless HTTP), a file path (OTLP/JSON lines), or a dict of options.  Raises ``ValueError`` (one line) when it names nowhere."""
    if isinstance(otel, dict):
        options = dict(otel)
    elif otel is True:
        options = {}
    elif isinstance(otel, str | Path):
        target = str(otel)
        options = {"endpoint" if "://" in target else "path": target}
    else:
        raise ValueError(f"otel= takes an endpoint, a file path, True or a dict, not {otel!r}")
    if options.get("endpoint") or not options.get("path"):
        if sdk.traces_url(options.get("endpoint")) is None:
            raise ValueError("OpenTelemetry export: no endpoint (give http://host:port or a file "
                             "path, or set OTEL_EXPORTER_OTLP_ENDPOINT)")
    elif not Path(options["path"]).parent.is_dir():
        raise FileNotFoundError(f"cannot write {options['path']}: no folder {Path(options['path']).parent}")
    return options


def attach(run: Any, otel: Any = True, **options: Any) -> LiveExport | None:
    """Export ``run`` live (``otel`` as in ``options_for``; keyword ``options`` override).
    None when ``otel`` is falsy or ``OTEL_SDK_DISABLED=true``."""
    if not otel or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    return LiveExport(run, **{**options_for(otel), **options})


def live_export_of(run: Any) -> LiveExport | None:
    """The live export attached to ``run``, if any (for ``stats()`` and ``wait()``)."""
    return _LIVE.get(run)
