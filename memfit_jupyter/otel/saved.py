"""Export a saved trace (or a finished run) as OpenTelemetry spans: to a file or a collector."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ..errors import MemfitError
from ..secrets import refresh_env_secrets
from ..trace import Trace
from . import conventions, otlp_json, sdk
from .spans import SpanBuilder

TRACER_NAME = "memfit_jupyter.otel"


class OtelExportError(MemfitError):
    """The collector did not take the spans (unreachable, refusing, or too slow)."""


@dataclass(frozen=True)
class ExportResult:
    """What an export did: how many spans, where they went, how many were lost."""

    spans: int
    exported: int
    dropped: int
    destination: str


def load_trace(trace: Any) -> dict[str, Any]:
    """A trace dict from a dict, a ``Run`` (its ``trace()``), a saved output or a path to a saved
    trace, read by ``Trace.load`` (one line of ``TraceError`` when it is not a good one)."""
    if isinstance(trace, str | Path) and not Path(trace).is_file():
        raise FileNotFoundError(f"no trace file at {trace}")
    return Trace.load(trace, unknown="warn").data


def _wall0_ns(trace: dict[str, Any]) -> int:
    started = trace.get("started_at")
    if started:
        try:
            return int(datetime.fromisoformat(str(started)).timestamp() * 1e9)
        except ValueError:
            pass
    duration = float((trace.get("totals") or {}).get("duration_s") or 0.0)
    return time.time_ns() - int(duration * 1e9)


def header_of(trace: dict[str, Any]) -> dict[str, Any]:
    """What the root span needs before the first event."""
    model = trace.get("model") or (trace.get("tiers") or {}).get("primary")
    return {"run_id": trace.get("run_id"), "model": model, "started_at": trace.get("started_at"),
            "task": trace.get("task")}


def spans(trace: Any, *, content: bool | None = None,
          resource_attributes: Mapping[str, Any] | None = None) -> list[Any]:
    """The SDK spans (``ReadableSpan``) of a trace, ended, in the order they ended."""
    trace = load_trace(trace)
    refresh_env_secrets()
    provider, ids = sdk.provider(resource_attributes)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    from ..version import __version__

    builder = SpanBuilder(provider.get_tracer(TRACER_NAME, __version__), ids, header=header_of(trace),
                          wall0_ns=_wall0_ns(trace), content=conventions.capture_content(content))
    for event in trace["events"]:
        builder.feed(event)
    builder.close()
    provider.shutdown()
    return list(memory.get_finished_spans())


def to_otlp_json(trace: Any, *, content: bool | None = None,
                 resource_attributes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The trace as one OTLP/JSON ``ExportTraceServiceRequest``."""
    return otlp_json.encode(spans(trace, content=content, resource_attributes=resource_attributes))


def export(trace: Any, *, endpoint: str | None = None, path: str | Path | None = None,
           content: bool | None = None, headers: Mapping[str, str] | None = None,
           timeout: float | None = None,
           resource_attributes: Mapping[str, Any] | None = None) -> ExportResult:
    """Export a trace as OpenTelemetry GenAI spans: an OTLP/JSON file or an OTLP/HTTP collector.

    ``trace`` is a trace dict, a ``Run`` or the path of a saved trace.  Give ``path`` (a file,
    written as one OTLP/JSON line) or ``endpoint`` (``http://host:port``, ``/v1/traces`` is
    added; Phoenix: ``http://127.0.0.1:6006``); with neither, ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (or ``..._TRACES_ENDPOINT``) names the collector, and ``OTEL_EXPORTER_OTLP_HEADERS`` /
    ``..._TIMEOUT`` apply unless ``headers`` / ``timeout`` are given.  Message content goes in
    only with ``content=True`` (or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``),
    redacted like everything else.  A collector that does not take the spans raises
    ``OtelExportError``.

    >>> export(run.trace(), path="run.otlp.json")                  # doctest: +SKIP
    >>> export("run.json", endpoint="http://127.0.0.1:6006")        # doctest: +SKIP
    """
    if endpoint and path:
        raise ValueError("give endpoint= or path=, not both")
    if path is not None:
        ended = spans(trace, content=content, resource_attributes=resource_attributes)
        target = Path(path)
        if not target.parent.is_dir():
            raise FileNotFoundError(f"cannot write {target}: no folder {target.parent}")
        otlp_json.write(ended, target)
        return ExportResult(len(ended), len(ended), 0, str(target))
    url = sdk.traces_url(endpoint)
    if url is None:
        raise ValueError("nowhere to export: give path= (a file) or endpoint= (a collector), "
                         "or set OTEL_EXPORTER_OTLP_ENDPOINT")
    ended = spans(trace, content=content, resource_attributes=resource_attributes)
    exporter = sdk.http_exporter(url, headers, timeout)
    sdk.install_quiet()
    with sdk.quiet([]) as messages:
        try:
            result = exporter.export(ended)
        finally:
            exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        why = messages[0] if messages else "no answer"
        raise OtelExportError(f"the collector at {url} did not take the {len(ended)} spans: {why}")
    return ExportResult(len(ended), len(ended), 0, url)
