"""OTLP/JSON: the spans as an ``ExportTraceServiceRequest`` in the protocol's JSON encoding.

The official encoder (``opentelemetry-exporter-otlp-proto-common``) builds the
protobuf message; protobuf's JSON mapping then gives everything OTLP/JSON
asks for (lowerCamelCase names, integer enums, 64-bit integers as decimal
strings) except the ids, which OTLP/JSON writes as hex where protobuf writes
base64, so those are rewritten.  Why not the SDK's JSON file exporter
(``opentelemetry-exporter-otlp-json-file``): it is a beta whose only release
pins ``opentelemetry-exporter-otlp-common`` to the release before the one the
OTLP/HTTP exporter requires, so the two cannot be installed together.

A file holds one request per line (the OpenTelemetry file exporter's JSON
Lines layout): ``export(trace, path=...)`` writes a single line, a live export
one line per batch.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(node: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        if node.get(key):
            node[key] = base64.b64decode(node[key]).hex()


def encode(spans: Sequence[Any]) -> dict[str, Any]:
    """The OTLP/JSON ``ExportTraceServiceRequest`` of SDK ``ReadableSpan`` objects."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    for resource_spans in request.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                _hex_ids(span)
                for link in span.get("links", ()):
                    _hex_ids(link)
    return request


def write(spans: Sequence[Any], path: str | Path, *, append: bool = False) -> Path:
    """Write the spans as one OTLP/JSON line to ``path`` (appended, or replacing the file)."""
    path = Path(path)
    line = json.dumps(encode(spans), ensure_ascii=False, separators=(",", ":"))
    with path.open("a" if append else "w", encoding="utf-8") as f:
        f.write(line + "\n")
    return path


def read(path: str | Path) -> list[dict[str, Any]]:
    """The spans of an OTLP/JSON file (one request per line, or one JSON document), flattened:
    each span dict gains ``resource`` (its resource attributes as a plain dict)."""
    raw = Path(path).read_text(encoding="utf-8")
    try:
        requests = [json.loads(raw)]
    except json.JSONDecodeError:
        requests = [json.loads(line) for line in raw.splitlines() if line.strip()]
    spans = []
    for request in requests:
        for resource_spans in request.get("resourceSpans", ()):
            resource = attributes(resource_spans.get("resource", {}).get("attributes", ()))
            for scope_spans in resource_spans.get("scopeSpans", ()):
                for span in scope_spans.get("spans", ()):
                    spans.append({**span, "resource": resource})
    return spans


def value(v: dict[str, Any]) -> Any:
    """The Python value of an OTLP/JSON ``AnyValue``."""
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [value(x) for x in v["arrayValue"].get("values", ())]
    if "kvlistValue" in v:
        return attributes(v["kvlistValue"].get("values", ()))
    return None


def attributes(kvs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """OTLP/JSON key-value list as a plain dict."""
    return {kv["key"]: value(kv.get("value", {})) for kv in kvs}

