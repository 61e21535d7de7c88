"""Live export: spans leave while the run goes, and neither the export nor a collector in
trouble holds the run up.

``attach(run, otel)`` subscribes a ``LiveExport`` to the run.  On the run's own
thread an event only goes into an inbox (a deque append: the event objects are
the run's record anyway, so nothing is copied).  The export's own thread maps
the inbox to spans (``SpanBuilder``) and ends them into the SDK's
``BatchSpanProcessor``, a bounded queue (``max_queue``, default 2048, or
``OTEL_BSP_MAX_QUEUE_SIZE``) that the SDK's thread sends to the collector.

Why the mapping is not done on the run's thread, and is paced: a run is
Python code holding the GIL, so every microsecond the export spends, on any
thread, is a microsecond the run waits.  While the run goes, the export
thread uses at most ``cpu_share`` (default 2 %) of the process's CPU time, its
mapping and the exporter's encoding counted together (of a quarter of the wall
time when the process is idle); what it could not map yet waits in the inbox
and is mapped at full speed once ``run_end`` has arrived.  On a
real model (seconds per call) the export keeps up at once; on the scripted
models, which answer in microseconds, spans trail the run.

A collector that is down, refusing or slow never makes anything wait: an
export request gives up after ``timeout`` (default ``DEFAULT_TIMEOUT_S``
unless ``OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT`` says otherwise), and after a
failed batch the next ones are not sent for a cooldown that doubles with
each failure (``sdk.CountingExporter``), so no retries pile up.  Lost spans
are counted:

- a batch the exporter could not deliver (or did not send, cooling down): all its spans;
- spans pushed out of the full queue or still queued when the last flush gave up
  (``FINAL_FLUSH_S``): whatever was ended and never reached the exporter.

The person is told as ``note`` events of the run (``source="otel"``): while
it goes, at the first loss and each time the count has doubled since; once
the last flush after ``run_end`` is over, one note with the final count (the
spans lost in that flush included), emitted then from the export thread, so
it follows ``run_end`` in the trace.  ``stats()`` gives the counts at any
time, ``wait()`` the final ones.  At interpreter exit an unfinished flush gets
a bounded wait (``EXIT_WAIT_S``).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from ..secrets import package_logger, refresh_env_secrets
from ..version import __version__
from . import conventions, sdk
from .saved import TRACER_NAME
from .spans import SpanBuilder

log = package_logger()

DEFAULT_MAX_QUEUE = 2048
#: Seconds an export request may take (retries included) unless the environment or timeout= say.
DEFAULT_TIMEOUT_S = 3.0
#: Share of the process's CPU time the export may use while its run goes (mapping + encoding).
DEFAULT_CPU_SHARE = 0.02
#: While the process is idle (a run waiting for its model) the share applies to this much of the
#: wall time, so that spans keep leaving when the run uses little CPU.
IDLE_FLOOR = 0.25
#: How often the export thread maps what has arrived (seconds; a smaller schedule_delay wins).
MAP_INTERVAL_S = 0.2
#: Events mapped between two looks at the CPU budget (a few milliseconds of work at most).
CHUNK = 16
#: CPU seconds of credit the export may save up while the run is idle.
CREDIT_CAP_S = 0.02
#: How long the last flush after run_end may take before the spans still queued count as lost.
FINAL_FLUSH_S = 15.0
#: How long interpreter exit waits for live exports still flushing (all together).
EXIT_WAIT_S = 5.0
_LIVE: weakref.WeakKeyDictionary[Any, LiveExport] = weakref.WeakKeyDictionary()
_FLUSHING: set[threading.Thread] = set()
_CLOSE = object()  # in the inbox: end whatever is open (a run that will not reach run_end)
_atexit_registered = False


@dataclass(frozen=True)
class ExportStats:
    """Counts of a live export.  ``dropped`` = lost to failed or unsent batches + never exported
    from the queue."""

    destination: str
    spans: int          # spans mapped so far (all of the run's once finished)
    exported: int       # delivered to the collector (or written to the file)
    dropped: int
    pending: int        # waiting in the queue or being sent
    failed_batches: int  # batches sent that the collector did not take
    finished: bool      # the run ended and the last flush is over
    last_error: str     # the exporter's last word on a failed batch
    waiting: int = 0    # events not mapped to spans yet
    skipped_batches: int = 0  # batches not sent (cooldown after a failure): their spans are dropped


class LiveExport:
    """Exports ``run``'s events as spans while it runs; see the module docstring.

    ``endpoint`` (OTLP/HTTP, ``/v1/traces`` added to a base URL) or ``path`` (OTLP/JSON lines);
    with neither, ``OTEL_EXPORTER_OTLP_ENDPOINT``.  ``schedule_delay`` (seconds between
    batches) and ``max_queue`` default to the SDK's ``OTEL_BSP_*`` settings; ``cpu_share``
    paces the export while the run goes (1.0: no pacing).
    """

    def __init__(self, run: Any, *, endpoint: str | None = None, path: str | Path | None = None,
                 content: bool | None = None, headers: dict[str, str] | None = None,
                 timeout: float | None = None, max_queue: int | None = None,
                 schedule_delay: float | None = None, resource_attributes: dict[str, Any] | None = None,
                 cpu_share: float = DEFAULT_CPU_SHARE):
        if endpoint and path:
            raise ValueError("give endpoint= or path=, not both")
        if not 0 < cpu_share <= 1:
            raise ValueError(f"cpu_share is a share of the time, in (0, 1], not {cpu_share!r}")
        inner: SpanExporter
        if path is not None:  # appended to: one file can log a session's runs
            file = Path(path).resolve()
            if not file.parent.is_dir():
                raise FileNotFoundError(f"cannot write {file}: no folder {file.parent}")
            self.destination = str(file)
            inner = sdk.FileExporter(file)
        else:
            url = sdk.traces_url(endpoint)
            if url is None:
                raise ValueError("nowhere to export: give an endpoint (http://host:port) or a file path, "
                                 "or set OTEL_EXPORTER_OTLP_ENDPOINT")
            self.destination = url
            if timeout is None and not any(os.environ.get(f"OTEL_EXPORTER_OTLP_{s}TIMEOUT") for s in ("", "TRACES_")):
                timeout = DEFAULT_TIMEOUT_S
            inner = sdk.http_exporter(url, headers, timeout)
        self._counter = sdk.CountingExporter(inner, cooldown=path is None)
        if max_queue is None:
            max_queue = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or DEFAULT_MAX_QUEUE)
        self.max_queue = max_queue
        self.cpu_share = cpu_share
        self._interval = MAP_INTERVAL_S if schedule_delay is None else min(MAP_INTERVAL_S, schedule_delay)
        self._processor = BatchSpanProcessor(
            self._counter, max_queue_size=max_queue, max_export_batch_size=min(512, max_queue),
            schedule_delay_millis=None if schedule_delay is None else schedule_delay * 1000)
        self._provider, ids = sdk.provider(resource_attributes)
        self._provider.add_span_processor(self._processor)
        sdk.install_quiet()
        refresh_env_secrets()
        wall0 = time.time_ns() - int(getattr(run, "elapsed", 0.0) * 1e9)
        header = {"run_id": run.id, "model": run.agent.model, "started_at": run.started_at,
                  "task": run.task}
        self._builder = SpanBuilder(self._provider.get_tracer(TRACER_NAME, __version__), ids,
                                    header=header, wall0_ns=wall0,
                                    content=conventions.capture_content(content), redacted=True)
        self._run = weakref.ref(run)
        self._inbox: deque[Any] = deque()
        self._over = threading.Event()     # run_end (or close) is in the inbox
        self._finished = threading.Event()  # ... and the last flush is over
        self._told = 0        # the loss count the last note gave
        self._due = 0         # a loss count the run's thread should tell at its next event
        self._telling = False
        self._dropped_at_end = 0
        self._flushing = False
        self._final: ExportStats | None = None
        self._thread = threading.Thread(target=self._work, name="memfit-otel", daemon=True)
        self.unsubscribe = run.subscribe(self)
        _LIVE[run] = self
        self._thread.start()

    # --- the subscriber: the run's thread does no more than this ----------------------------
    def __call__(self, event: Any) -> None:
        self._inbox.append(event)
        if event["type"] == "run_end":
            self.unsubscribe()
            self._end()
        elif self._due > self._told and not self._telling:
            self._tell_during()

    def _tell_during(self) -> None:
        run = self._run()
        dropped = self._told = self._due
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

    def _end(self) -> None:
        if not self._flushing:
            self._flushing = True
            _FLUSHING.add(self._thread)
            _register_atexit()
        self._over.set()

    # --- the export's thread ------------------------------------------------------------
    def _work(self) -> None:
        sdk.keep_own([])  # "Queue full, dropping Span" (once per span) is counted, not printed
        credit, last, last_cpu, exporter_cpu = 0.0, time.monotonic(), time.process_time(), 0.0
        try:
            while True:
                if not self._over.is_set():
                    self._over.wait(self._interval)
                while self._inbox:
                    pacing = not self._over.is_set() and self.cpu_share < 1
                    if pacing:  # the share is of the process's CPU time (of the wall time when idle)
                        now, cpu = time.monotonic(), time.process_time()
                        spent = self._counter.cpu_s - exporter_cpu
                        exporter_cpu += spent
                        earned = max(cpu - last_cpu, IDLE_FLOOR * (now - last)) * self.cpu_share
                        credit = min(CREDIT_CAP_S, credit + earned) - spent
                        last, last_cpu = now, cpu
                        if credit <= 0:  # over budget: wait until it is earned back (or the run ends)
                            self._over.wait(-credit / self.cpu_share + 0.001)
                            continue
                    started = time.thread_time()
                    self._map(CHUNK)
                    if pacing:
                        credit -= time.thread_time() - started
                    self._watch_losses()
                if self._over.is_set() and not self._inbox:
                    break
            self._dropped_at_end = self._dropped(final=False)
            # The SDK's shutdown takes no time limit: it runs on a thread of its own, and what it
            # has not delivered after FINAL_FLUSH_S counts as lost (a late delivery is not counted).
            flush = threading.Thread(target=self._provider.shutdown, name="memfit-otel-flush", daemon=True)
            flush.start()
            flush.join(FINAL_FLUSH_S)
        except Exception:  # the run is over or going on; a broken exporter must not surface in it
            log.debug("OpenTelemetry live export failed", exc_info=True)
        finally:
            self._final = self._stats(final=True)
            self._finished.set()
            _FLUSHING.discard(self._thread)
            self._tell_final()

    def _map(self, count: int) -> None:
        builder, inbox = self._builder, self._inbox
        for _ in range(count):
            if not inbox:
                return
            event = inbox.popleft()
            if event is _CLOSE:
                builder.close()
            else:
                builder.feed(event)

    def _watch_losses(self) -> None:
        dropped = self._dropped(final=False)
        if dropped and dropped >= 2 * max(self._told, self._due, 0.5):
            self._due = dropped

    def _tell_final(self) -> None:
        stats = self.stats()
        run = self._run()
        if run is None or stats.dropped == 0 or not stats.finished:
            return
        after = max(0, stats.dropped - self._dropped_at_end)
        why = f" (last error: {stats.last_error})" if stats.last_error else ""
        try:
            run.emit("note", text=f"OpenTelemetry export: {stats.dropped} of {stats.spans} span(s) lost, "
                                  f"{after} of them in the last flush after the run ended; the collector "
                                  f"at {self.destination} did not take them{why}.",
                     source="otel")
        except Exception:
            log.debug("could not tell the run about the lost spans", exc_info=True)

    # --- counts -------------------------------------------------------------------------
    def _dropped(self, final: bool) -> int:
        c = self._counter
        if final:  # whatever was not delivered when the last flush ended or gave up
            return self._builder.spans_ended - c.exported
        unsent = self._builder.spans_ended - c.started
        return c.failed + max(0, unsent - self.max_queue)

    def stats(self) -> ExportStats:
        """The counts now (final once ``finished``)."""
        return self._final if self._final is not None else self._stats(final=False)

    def _stats(self, final: bool) -> ExportStats:
        c = self._counter
        dropped = self._dropped(final)
        pending = 0 if final else max(0, self._builder.spans_ended - c.exported - dropped)
        return ExportStats(self.destination, self._builder.spans_ended, c.exported, dropped, pending,
                           c.failed_batches, final, c.last_error, len(self._inbox), c.skipped_batches)

    # --- the end ------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> ExportStats:
        """Wait (at most ``timeout`` s) for the last flush after the run ended; the counts."""
        if self._over.is_set():
            self._thread.join(timeout)
        return self.stats()

    def close(self, timeout: float | None = None) -> ExportStats:
        """End the export now (a run that will not reach ``run_end``): open spans end, the rest
        is flushed; returns the counts."""
        if not self._over.is_set():
            self.unsubscribe()
            self._inbox.append(_CLOSE)
            self._end()
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
