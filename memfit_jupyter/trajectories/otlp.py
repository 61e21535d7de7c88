"""OpenTelemetry GenAI spans (and OpenInference spans) exported as OTLP/JSON.

Reads ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``, a list of
those, or JSON lines of them (what file exporters write).  Spans are ordered by
start time and read by what they are:

- ``invoke_agent`` (``gen_ai.operation.name``, or OpenInference kind AGENT): the
  run: task, model, status (``memfit.task``, ``memfit.status``, ``gen_ai.request.model``);
- ``chat`` / ``text_completion`` / ``generate_content`` (kind LLM): a model call,
  its reply from ``gen_ai.output.messages`` (or ``output.value``), its tokens
  from ``gen_ai.usage.*`` (or ``llm.token_count.*``); a call whose
  ``memfit.purpose`` is not ``action`` is kept as a model call of that purpose;
- ``execute_tool`` (kind TOOL): a step: ``gen_ai.tool.name``,
  ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``, the span status,
  and ``memfit.thought`` / ``memfit.action_type`` / ``memfit.ok`` / ``memfit.error``
  where a memfit exporter wrote them.

Span events named ``memfit.<type>`` (spin, reflection, note...) come back as
events of that type with their ``memfit.``-less attributes.
"""

from __future__ import annotations

import json
from typing import Any

from .common import TraceBuilder, classify_command, format_error, text_of

FORMAT = "otlp"
_CHAT = {"chat", "text_completion", "generate_content", "completion"}


def exports_of(data: Any) -> list[dict[str, Any]] | None:
    if isinstance(data, dict) and isinstance(data.get("resourceSpans"), list):
        return [data]
    if isinstance(data, list) and data and all(isinstance(d, dict) and isinstance(d.get("resourceSpans"), list)
                                               for d in data):
        return data
    return None


def looks_like(data: Any) -> bool:
    return exports_of(data) is not None


def value_of(v: Any) -> Any:
    """An OTLP ``AnyValue`` as a Python value (ints arrive as strings in OTLP/JSON)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [value_of(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return attrs_of((v["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attrs_of(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if isinstance(item, dict) and "key" in item:
            out[str(item["key"])] = value_of(item.get("value"))
    return out


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _first_reason(value: Any) -> str | None:
    """The first of ``gen_ai.response.finish_reasons`` (a list, or its JSON text in OTLP/JSON)."""
    value = _json(value) if isinstance(value, str) else value
    if isinstance(value, list | tuple) and value:
        return str(value[0])
    return str(value) if isinstance(value, str) and value else None


def _kind(span: dict[str, Any], attrs: dict[str, Any]) -> str:
    op = str(attrs.get("gen_ai.operation.name") or "")
    name = str(span.get("name") or "")
    oi = str(attrs.get("openinference.span.kind") or "").upper()
    if op == "invoke_agent" or oi == "AGENT" or name.startswith("invoke_agent"):
        return "agent"
    if op == "execute_tool" or oi == "TOOL" or name.startswith("execute_tool"):
        return "tool"
    if op in _CHAT or oi == "LLM" or name.split(" ", 1)[0] in _CHAT:
        return "chat"
    return ""


def _reply_text(reply: Any) -> str:
    if isinstance(reply, list):
        texts = []
        for message in reply:
            if isinstance(message, dict):
                for part in message.get("parts") or []:
                    if isinstance(part, dict) and part.get("type") == "text":
                        texts.append(str(part.get("content", "")))
                if "content" in message:
                    texts.append(text_of(message.get("content")))
        return "\n".join(t for t in texts if t)
    return text_of(reply)


def convert(data: Any, *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    exports = exports_of(data)
    if exports is None:
        raise format_error("not OTLP/JSON (no resourceSpans)")
    spans = []
    for export in exports:
        for rs in export["resourceSpans"]:
            for ss in (rs or {}).get("scopeSpans") or (rs or {}).get("instrumentationLibrarySpans") or []:
                for span in (ss or {}).get("spans") or []:
                    if isinstance(span, dict):
                        spans.append(span)
    if not spans:
        raise format_error("OTLP/JSON with no spans")
    spans.sort(key=lambda s: int(s.get("startTimeUnixNano") or 0))
    t0 = int(spans[0].get("startTimeUnixNano") or 0)
    root = next((s for s in spans if _kind(s, attrs_of(s.get("attributes"))) == "agent"), None)
    ra = attrs_of(root.get("attributes")) if root else {}
    task = str(ra.get("memfit.task") or _reply_text(_json(ra.get("gen_ai.input.messages"))) or ra.get(
        "input.value") or "")
    model = str(ra.get("gen_ai.request.model") or ra.get("llm.model_name") or "")
    b = TraceBuilder(FORMAT, task=task, model=model, run_id=ra.get("memfit.run_id") or ra.get("gen_ai.conversation.id"),
                     meta={"trace_id": spans[0].get("traceId"), **(meta or {})})
    pending = None  # the text of an action-choosing reply not yet followed by a tool span
    answer = None
    for span in spans:
        attrs = attrs_of(span.get("attributes"))
        kind = _kind(span, attrs)
        start, end = int(span.get("startTimeUnixNano") or t0), int(span.get("endTimeUnixNano") or 0)
        b.ts = max(b.ts, (start - t0) / 1e9)
        failed = int((span.get("status") or {}).get("code") or 0) == 2
        if kind == "chat":
            purpose = str(attrs.get("memfit.purpose") or "action")
            reply = _json(attrs.get("gen_ai.output.messages") or attrs.get("output.value")
                          or attrs.get("memfit.reply"))
            if purpose == "action":
                if pending is not None:
                    b.step(thought=pending, action_type="message", tool="", params={}, data={"no_observation": True},
                           begin=False)
                b.begin_step()
                pending = _reply_text(reply)
            b.model_call(reply, model=str(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
                                          or attrs.get("llm.model_name") or model),
                         prompt_tokens=int(attrs.get("gen_ai.usage.input_tokens")
                                           or attrs.get("llm.token_count.prompt") or 0),
                         completion_tokens=int(attrs.get("gen_ai.usage.output_tokens")
                                               or attrs.get("llm.token_count.completion") or 0),
                         cost_usd=float(attrs.get("memfit.cost_usd") or 0.0),
                         latency_s=max(0.0, (end - start) / 1e9) if end else 0.0, ok=not failed,
                         error=(span.get("status") or {}).get("message") if failed else None, purpose=purpose,
                         finish_reason=_first_reason(attrs.get("gen_ai.response.finish_reasons")))
        elif kind == "tool":
            tool = str(attrs.get("gen_ai.tool.name") or attrs.get("tool.name") or span.get("name", "").replace(
                "execute_tool ", ""))
            args = _json(attrs.get("gen_ai.tool.call.arguments") or attrs.get("input.value")
                         or attrs.get("tool.parameters") or {})
            params = args if isinstance(args, dict) else {"input": args}
            output = text_of(_json(attrs.get("gen_ai.tool.call.result") or attrs.get("output.value") or ""))
            ok = bool(attrs["memfit.ok"]) if "memfit.ok" in attrs else not failed
            error = attrs.get("memfit.error") or ((span.get("status") or {}).get("message") if not ok else None)
            command = params.get("command") if isinstance(params.get("command"), str) else ""
            action_type = str(attrs.get("memfit.action_type") or (classify_command(command) if command else "tool"))
            thought = str(attrs.get("memfit.thought") or pending or "")
            data_ = _json(attrs.get("memfit.data")) if attrs.get("memfit.data") else {}
            if isinstance(data_, dict) and data_.get("final"):
                answer = output
            b.step(thought=thought, action_type=action_type, tool=tool, params=params, output=output, ok=ok,
                   error=str(error) if error else None, duration_s=max(0.0, (end - start) / 1e9) if end else 0.0,
                   data=data_ if isinstance(data_, dict) else {}, begin=pending is None)
            pending = None
        for ev in span.get("events") or []:
            name = str((ev or {}).get("name") or "")
            if name.startswith("memfit.") and name not in ("memfit.action", "memfit.observation", "memfit.model_call"):
                fields = {k.removeprefix("memfit."): _json(v) for k, v in attrs_of(ev.get("attributes")).items()}
                fields.pop("type", None)
                fields.pop("iteration", None)
                b._event(name.removeprefix("memfit."), **fields)
    if pending is not None:
        b.step(thought=pending, action_type="message", tool="", params={}, data={"final": True, "no_observation": True},
               begin=False)
        answer = answer or pending
    status = str(ra.get("memfit.status") or ("failed" if root and int((root.get("status") or {}).get("code") or 0) == 2
                                             else "done"))
    return b.build(status=status, answer=ra.get("memfit.answer") or answer,
                   reason=str(ra.get("memfit.reason") or "imported from OTLP spans"))
