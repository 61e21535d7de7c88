"""The OpenTelemetry SDK parts: provider, ids, resource, exporters, and where spans go.

Everything the standard ``OTEL_*`` environment variables configure is left to
the SDK and the OTLP/HTTP exporter, which read them themselves:
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
``..._HEADERS``, ``..._TIMEOUT``, ``..._COMPRESSION``, ``..._CERTIFICATE``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_SERVICE_NAME``, ``OTEL_BSP_*``,
``OTEL_SPAN_*_LIMIT`` and ``OTEL_TRACES_SAMPLER``.  An explicit argument wins
over its variable.  ``OTEL_EXPORTER_OTLP_PROTOCOL`` may only say
``http/protobuf`` (the one protocol exported here).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from ..secrets import redact
from . import otlp_json

SERVICE = "memfit-jupyter"
TRACES_PATH = "/v1/traces"


class PlannedIds(IdGenerator):  # type: ignore[misc]  # an SDK class: the otel extra is read as untyped (pyproject.toml)
    """Hands out the ids ``SpanBuilder`` chose for the next span (random when none was set)."""

    def __init__(self) -> None:
        self.trace_id: int | None = None
        self.span_id: int | None = None
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        span_id, self.span_id = self.span_id, None
        return span_id or self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        return self.trace_id or self._random.generate_trace_id()


def resource(extra: Mapping[str, Any] | None = None) -> Resource:
    """``service.name`` memfit-jupyter unless ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``
    or ``extra`` say otherwise (Phoenix files spans under ``openinference.project.name``)."""
    from ..version import __version__

    found = Resource.create(dict(extra or {}))
    if str(found.attributes.get("service.name", "unknown_service")).startswith("unknown_service"):
        found = found.merge(Resource({"service.name": SERVICE}))
    return found.merge(Resource({"service.version": __version__}))


def provider(extra_resource: Mapping[str, Any] | None = None) -> tuple[TracerProvider, PlannedIds]:
    ids = PlannedIds()
    # No atexit hook of its own: a live export flushes in the background when its run ends
    # and live.py waits a bounded time at exit, so a collector that is down never holds up exit.
    return TracerProvider(resource=resource(extra_resource), id_generator=ids,
                          shutdown_on_exit=False), ids


def traces_url(endpoint: str | None) -> str | None:
    """The OTLP/HTTP traces URL for ``endpoint`` (a base URL gets ``/v1/traces``), or from the
    environment; None when neither names one."""
    check_protocol()
    if not endpoint:
        signal = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        if signal:
            return _checked(signal)
        endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        if not endpoint:
            return None
    url = _checked(endpoint)
    if not urlparse(url).path.rstrip("/").endswith(TRACES_PATH):
        url = url.rstrip("/") + TRACES_PATH
    return url


def _checked(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"not an OTLP/HTTP endpoint: {url!r} (expected http://host:port, "
                         "e.g. http://127.0.0.1:6006 for Phoenix)")
    return url


def check_protocol() -> None:
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = os.environ.get(name, "").strip()
        if value and value != "http/protobuf":
            raise ValueError(f"{name}={value!r}: memfit exports OTLP over HTTP (http/protobuf); "
                             "unset it or set it to http/protobuf and use the collector's HTTP port")


def http_exporter(url: str, headers: Mapping[str, str] | None = None,
                  timeout: float | None = None) -> SpanExporter:
    """The official OTLP/HTTP exporter (headers, timeout, TLS from ``OTEL_EXPORTER_OTLP_*`` unless given)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=url, headers=dict(headers) if headers else None, timeout=timeout)


class FileExporter(SpanExporter):  # type: ignore[misc]  # an SDK class: the otel extra is read as untyped (pyproject.toml)
    """Appends each batch to a file as one OTLP/JSON line (see ``otlp_json``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            with self._lock:
                otlp_json.write(spans, self.path, append=True)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


_local = threading.local()
#: Loggers whose records about memfit's own exports are kept instead of printed: the SDK's
#: batch queue ("Queue full, dropping Span", once per span) and the OTLP exporter (retries,
#: failures).  Printed from the export thread they would land in whatever notebook cell runs
#: then; memfit counts its losses and tells them as a run event instead.
_QUIET_PREFIXES = ("opentelemetry.exporter", "opentelemetry.sdk._shared_internal")


class _KeepOwn(logging.Filter):
    """Keeps (in the current thread's sink) the records logged while memfit exports."""

    def filter(self, record: logging.LogRecord) -> bool:
        sink = getattr(_local, "sink", None)
        if sink is None:
            return True
        if len(sink) < 5:
            sink.append(redact(record.getMessage()).splitlines()[0][:300])
        return False


_KEEP_OWN = _KeepOwn()


def install_quiet() -> None:
    """Put the filter on the SDK's and exporters' loggers (the ones that exist by now)."""
    names = [n for n in logging.root.manager.loggerDict if n.startswith(_QUIET_PREFIXES)]
    for name in {*names, "opentelemetry.sdk._shared_internal"}:
        logger = logging.getLogger(name)
        if _KEEP_OWN not in logger.filters:
            logger.addFilter(_KEEP_OWN)


def keep_own(sink: list[str] | None) -> None:
    """From now on this thread's SDK and exporter records go to ``sink`` (None: printed again).
    The cheap form of ``quiet`` for the per-event path."""
    _local.sink = sink


@contextmanager
def quiet(sink: list[str]) -> Iterator[list[str]]:
    """While inside, this thread's SDK and exporter records go to ``sink`` (the first five)."""
    previous = getattr(_local, "sink", None)
    _local.sink = sink
    try:
        yield sink
    finally:
        _local.sink = previous


class CountingExporter(SpanExporter):  # type: ignore[misc]  # an SDK class: the otel extra is read as untyped (pyproject.toml)
    """Delegates to ``inner`` and counts what it took (``started``), delivered and lost, and the
    CPU time its exports took (``cpu_s``, for the live export's pacing).

    With ``cooldown``, a failed batch (collector down, refusing, too slow) stops sending for
    ``COOLDOWN_S`` seconds, doubling with each failure in a row up to ``COOLDOWN_MAX_S``: batches
    in that time are counted as lost without a request (``skipped_batches``), so a collector in
    trouble costs one request per cooldown instead of a train of retries, and the last flush
    after a run is quick when nobody is listening.
    """

    COOLDOWN_S = 1.0
    COOLDOWN_MAX_S = 30.0

    def __init__(self, inner: SpanExporter, *, cooldown: bool = False) -> None:
        self.inner = inner
        self.started = 0
        self.exported = 0
        self.failed = 0
        self.failed_batches = 0
        self.skipped_batches = 0
        self.last_error = ""
        self.cpu_s = 0.0
        self._cooldown = cooldown
        self._pause = 0.0
        self._resume_at = 0.0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            self.started += len(spans)
            if self._cooldown and time.monotonic() < self._resume_at:
                self.failed += len(spans)
                self.skipped_batches += 1
                return SpanExportResult.FAILURE
        said: list[str] = []
        cpu0 = time.thread_time()
        try:
            with quiet(said):
                result = self.inner.export(spans)
        except Exception as exc:  # an exporter that raises has lost the batch all the same
            said, result = [redact(f"{type(exc).__name__}: {exc}")[:300]], SpanExportResult.FAILURE
        with self._lock:
            self.cpu_s += time.thread_time() - cpu0
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
                self._pause = 0.0
            else:
                self.failed += len(spans)
                self.failed_batches += 1
                self.last_error = said[0] if said else "the exporter gave no reason"
                self._pause = min(self.COOLDOWN_MAX_S, self._pause * 2 or self.COOLDOWN_S)
                self._resume_at = time.monotonic() + self._pause
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flushed: bool = self.inner.force_flush(timeout_millis)
        return flushed
