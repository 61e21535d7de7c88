"""Events in, OpenTelemetry spans out: one state machine for live runs and saved traces.

``SpanBuilder.feed(event)`` takes each event (a flat dict, or an object with
``to_dict()``) in the order the run emitted it and opens, annotates and ends
spans on an SDK tracer:

- the root ``invoke_agent memfit`` span is opened when the builder is made
  (at the run's start) and ended by ``run_end``;
- an ``iteration N`` span is opened by the first event of iteration N and
  ended by the first event of another iteration (or ``run_end``) at the time
  of its own last event;
- a ``chat {model}`` span per ``model_call`` (it ends when the event arrives;
  it began ``latency_s`` earlier); calls made while a tool runs (the samples
  of ``sub_query``) are children of that tool's span;
- an ``execute_tool {tool}`` span from each ``action`` to its ``observation``;
- every finding (reflection, spin, breaker, guarantee, synthesis, memory,
  context, degradation, ...) is a ``memfit.<type>`` span event on the
  innermost open span, and the ones worth filtering on are also ``memfit.*``
  attributes of their iteration and of the root.

Events of unknown types become ``memfit.<type>`` span events too, except
streaming deltas (``*_delta``): the whole reply arrives in ``model_call``.
Every string is redacted; message content only with ``content=True``.

Span ids are derived from the run id and the event's position, so a run
exported live and its saved trace exported later carry the same ids, and a
second export of one trace replaces rather than duplicates it in a backend
that keys spans by id.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.trace import Status, StatusCode

from . import conventions as C
from .conventions import flat, same, text

#: Statuses after which the root span is an error (``error.type`` is the status).
ERROR_STATUSES = ("failed", "spin_exit", "cancelled", "degraded")
#: Fields that are message content: exported only with ``content=True`` (and redacted).
CONTENT_FIELDS = {
    "run_start": ("task",), "run_end": ("answer",), "model_call": ("reply",),
    "action": ("thought", "params"), "observation": ("output", "data"),
    "synthesis": ("question", "answer", "samples", "clusters", "alternatives", "rationale", "choice"),
    "memory": ("query", "results"), "degradation": ("partial_result",),
    "trial": ("oracle_output",), "context": ("summary",),
}


def _event_dict(event: Any) -> dict[str, Any]:
    if isinstance(event, dict):
        return event
    to_dict = getattr(event, "to_dict", None)
    return to_dict() if callable(to_dict) else dict(event)


class SpanBuilder:
    """Feeds a run's events to an SDK ``tracer``; see the module docstring.

    ``wall0_ns`` is the wall-clock time (ns since the epoch) of the run's ``ts = 0``;
    ``header`` holds what is known before the first event: ``run_id``, ``model``,
    ``started_at`` (used for the ids), ``task``.  ``redacted=True`` says the events were
    redacted already (a live run's are, when emitted), so only the header is redacted here.
    """

    def __init__(self, tracer: Any, ids: Any, *, header: dict[str, Any], wall0_ns: int,
                 content: bool = False, redacted: bool = False):
        self._tracer = tracer
        self._clean = same if redacted else text
        self._ids = ids
        self._content = content
        self._wall0 = wall0_ns
        self._lock = threading.Lock()  # breaker events may come from a worker thread
        self.run_id = str(header.get("run_id") or "run")
        self._seed = f"{self.run_id}|{header.get('started_at') or ''}"
        self._provider, self._model = C.provider_and_model(header.get("model"))
        self._index = 0  # position of the next event
        self._iteration: int | None = None
        self._iter_span: Any = None
        self._iter_seq = 0
        self._iter_last = 0.0
        self._iter_spin: tuple[list[str], list[str]] = ([], [])  # this iteration's spin layers, detectors
        self._tool: Any = None
        self.open = True
        self.spans_ended = 0
        self._summary: dict[str, Any] = {"spins": 0, "breaker_transitions": [], "violations": 0,
                                         "reflection_max": -1, "input_tokens": 0,
                                         "output_tokens": 0, "cost_usd": 0.0, "calls": 0}
        self._ids.trace_id = int.from_bytes(self._digest("trace")[:16], "big") or 1
        attrs = {
            C.OPERATION: "invoke_agent", C.PROVIDER: self._provider, C.REQUEST_MODEL: self._model,
            C.AGENT_NAME: C.AGENT, C.CONVERSATION_ID: self.run_id,
            C.SPAN_KIND: C.OPENINFERENCE_KIND["invoke_agent"],
            "memfit.run_id": self.run_id, "memfit.model": text(header.get("model") or ""),
        }
        if content and header.get("task"):
            attrs[C.INPUT_MESSAGES] = C.messages("user", header["task"])
        self._root = self._start(f"invoke_agent {C.AGENT}", "run", attrs, 0.0, root=Context())

    # --- ids and time -------------------------------------------------------------------
    def _digest(self, key: str) -> bytes:
        return hashlib.sha256(f"{self._seed}|{key}".encode()).digest()

    def _ns(self, ts: float) -> int:
        return self._wall0 + int(round(max(ts, 0.0) * 1e9))

    def _start(self, name: str, key: str, attrs: dict[str, Any], ts: float, *,
               parent: Any = None, root: Any = None, client: bool = False) -> Any:
        self._ids.span_id = int.from_bytes(self._digest(key)[:8], "big") or 1
        context = root if parent is None else trace_api.set_span_in_context(parent)
        kind = trace_api.SpanKind.CLIENT if client else trace_api.SpanKind.INTERNAL
        start = self._ns(ts)
        if parent is not None:  # an event recorded at a call's end can predate its parent's start
            start = max(start, parent.start_time or 0)
        return self._tracer.start_span(name, context=context, kind=kind, attributes=attrs,
                                       start_time=start)

    def _end(self, span: Any, ts: float) -> None:
        span.end(end_time=max(self._ns(ts), span.start_time or 0))
        self.spans_ended += 1

    def _error(self, span: Any, kind: str, message: Any) -> None:
        span.set_attribute(C.ERROR_TYPE, kind)
        span.set_status(Status(StatusCode.ERROR, self._clean(message or kind, 300)))

    # --- feeding ------------------------------------------------------------------------
    def feed(self, event: Any) -> None:
        """Map one event (in emission order)."""
        e = _event_dict(event)
        with self._lock:
            if not self.open:
                return
            index = self._index
            self._index += 1
            kind = str(e.get("type") or "")
            ts = float(e.get("ts") or 0.0)
            if kind == "run_end":
                self._run_end(e, ts)
                return
            iteration = e.get("iteration")
            if kind in ("degradation", "run_start") or not iteration:
                self._root_event(kind, e, ts)
                return
            self._enter_iteration(int(iteration), self._start_ts(kind, e, ts))
            self._iter_last = max(self._iter_last, ts)
            handler = getattr(self, f"_on_{kind}", None)
            if handler is not None:
                handler(e, ts, index)
            elif not kind.endswith("_delta"):
                self._finding(kind, e, ts)

    @staticmethod
    def _start_ts(kind: str, e: dict[str, Any], ts: float) -> float:
        if kind == "model_call":
            return ts - float(e.get("latency_s") or 0.0)
        return ts

    def _enter_iteration(self, iteration: int, ts: float) -> None:
        if self._iteration == iteration and self._iter_span is not None:
            return
        self._close_iteration()
        self._iteration = iteration
        self._iter_seq += 1
        attrs = {"memfit.iteration": iteration, C.SPAN_KIND: C.OPENINFERENCE_KIND[None],
                 C.CONVERSATION_ID: self.run_id}
        self._iter_span = self._start(f"iteration {iteration}", f"it{self._iter_seq}", attrs, ts,
                                      parent=self._root)
        self._iter_spin = ([], [])
        self._iter_last = ts

    def _close_iteration(self) -> None:
        if self._tool is not None:  # an action whose observation never came
            self._tool.set_attribute("memfit.tool.unfinished", True)
            self._end(self._tool, self._iter_last)
            self._tool = None
        if self._iter_span is not None:
            self._end(self._iter_span, self._iter_last)
            self._iter_span = None

    def _innermost(self) -> Any:
        return self._tool or self._iter_span or self._root

    def _fields(self, kind: str, e: dict[str, Any]) -> dict[str, Any]:
        """The attributes of a ``memfit.<kind>`` span event: ``memfit.<field>`` per field."""
        hidden = () if self._content else CONTENT_FIELDS.get(kind, ())
        out: dict[str, Any] = {}
        for key, value in e.items():
            if key in ("type", "iteration", "ts") or key in hidden:
                continue
            flat(f"memfit.{key}", value, out, clean=self._clean)
        return out

    def _add_event(self, span: Any, kind: str, attrs: dict[str, Any], ts: float) -> None:
        span.add_event(f"memfit.{kind}", attributes=attrs, timestamp=self._ns(ts))

    def _finding(self, kind: str, e: dict[str, Any], ts: float, span: Any = None) -> None:
        self._add_event(span or self._innermost(), kind, self._fields(kind, e), ts)

    def _root_event(self, kind: str, e: dict[str, Any], ts: float) -> None:
        if kind == "run_start":
            root_attrs: dict[str, Any] = {}
            for key in ("tiers", "tools", "extensions", "settings"):
                flat(f"memfit.{key}", e.get(key), root_attrs, clean=self._clean)
            self._root.set_attributes(root_attrs)
            return
        if kind == "degradation":
            self._root.set_attribute("memfit.degradation.reason", self._clean(e.get("reason") or "", 500))
            if e.get("recommendations"):
                self._root.set_attribute("memfit.degradation.recommendations",
                                         [self._clean(r, 500) for r in e["recommendations"]])
        if not kind.endswith("_delta"):
            self._finding(kind, e, ts, span=self._root)

    # --- the event types with spans of their own ------------------------------------------
    def _on_model_call(self, e: dict[str, Any], ts: float, index: int) -> None:
        provider, model = C.provider_and_model(e.get("model"))
        prompt, completion = int(e.get("prompt_tokens") or 0), int(e.get("completion_tokens") or 0)
        # (the call's latency is the span's duration, its outcome the span's status)
        attrs: dict[str, Any] = {
            C.OPERATION: "chat", C.PROVIDER: provider, C.REQUEST_MODEL: model,
            C.CONVERSATION_ID: self.run_id, C.SPAN_KIND: C.OPENINFERENCE_KIND["chat"],
            C.INPUT_TOKENS: prompt, C.OUTPUT_TOKENS: completion,
            "memfit.purpose": str(e.get("purpose") or ""), "memfit.tier": str(e.get("tier") or ""),
            "memfit.attempt": int(e.get("attempt") or 1), "memfit.cost_usd": float(e.get("cost_usd") or 0.0),
        }
        if e.get("max_tokens"):
            attrs[C.REQUEST_MAX_TOKENS] = int(e["max_tokens"])
        reasons = e.get("finish_reasons") or ([e["finish_reason"]] if e.get("finish_reason") else None)
        if reasons:
            attrs[C.FINISH_REASONS] = [str(r) for r in reasons]
        if self._content and e.get("reply"):
            attrs[C.OUTPUT_MESSAGES] = C.messages("assistant", e["reply"], (reasons or [None])[0])
        span = self._start(f"chat {model}", f"ev{index}", attrs,
                           ts - float(e.get("latency_s") or 0.0),
                           parent=self._tool or self._iter_span, client=True)
        if not e.get("ok"):
            self._error(span, str(e.get("error_kind") or "_OTHER"), e.get("error"))
        self._end(span, ts)
        s = self._summary
        s["input_tokens"] += prompt
        s["output_tokens"] += completion
        s["cost_usd"] += float(e.get("cost_usd") or 0.0)
        s["calls"] += 1

    def _on_action(self, e: dict[str, Any], ts: float, index: int) -> None:
        if self._tool is not None:
            self._end(self._tool, ts)
        tool = str(e.get("tool") or "unknown")
        attrs: dict[str, Any] = {
            C.OPERATION: "execute_tool", C.TOOL_NAME: tool, C.TOOL_TYPE: "function",
            C.TOOL_CALL_ID: f"{self.run_id}-{e.get('iteration')}",
            C.SPAN_KIND: C.OPENINFERENCE_KIND["execute_tool"],
            "memfit.action_type": str(e.get("action_type") or ""),
        }
        if e.get("reflection"):
            attrs["memfit.reflection.requested"] = str(e["reflection"])
        if self._content:
            attrs[C.TOOL_ARGUMENTS] = self._clean(e.get("params") or {})
            if e.get("thought"):
                attrs["memfit.thought"] = self._clean(e["thought"])
        self._tool = self._start(f"execute_tool {tool}", f"ev{index}", attrs, ts, parent=self._iter_span)

    def _on_observation(self, e: dict[str, Any], ts: float, index: int) -> None:
        span = self._tool
        if span is None:  # no action: the model's reply could not be used
            data = e.get("data") or {}
            attrs = {C.ERROR_TYPE: str(data.get("error_kind") or "invalid_reply"),
                     "memfit.error": self._clean(e.get("error") or "", 500)}
            self._add_event(self._iter_span, "invalid_reply", attrs, ts)
            return
        span.set_attribute("memfit.ok", bool(e.get("ok")))
        if e.get("duration_s") is not None:
            span.set_attribute("memfit.duration_s", float(e["duration_s"]))
        data = e.get("data") or {}
        if "exit_code" in data:
            span.set_attribute("memfit.exit_code", int(data["exit_code"]))
        if data.get("final"):
            span.set_attribute("memfit.final", True)
        if self._content:
            span.set_attribute(C.TOOL_RESULT, self._clean(e.get("output") or ""))
            if data:
                span.set_attribute("memfit.data", self._clean(data))
        if not e.get("ok"):
            self._error(span, str(data.get("error_kind") or "tool_error"), e.get("error"))
        self._tool = None
        self._end(span, ts)

    def _on_approval(self, e: dict[str, Any], ts: float, index: int) -> None:
        self._finding("approval", e, ts)

    def _on_reflection(self, e: dict[str, Any], ts: float, index: int) -> None:
        level = int(e.get("level") or 0)
        self._iter_span.set_attributes({
            "memfit.reflection.level": level, "memfit.reflection.level_name": str(e.get("level_name") or ""),
            "memfit.reflection.trigger": self._clean(e.get("trigger") or "", 300)})
        self._summary["reflection_max"] = max(self._summary["reflection_max"], level)
        self._finding("reflection", e, ts, span=self._iter_span)

    def _on_spin(self, e: dict[str, Any], ts: float, index: int) -> None:
        if e.get("is_spinning", True):
            self._summary["spins"] += 1
            layers, detectors = self._iter_spin
            layers.append(str(e.get("layer")))
            detectors.append(str(e.get("detector") or ""))
            self._iter_span.set_attributes({"memfit.spin.detected": True, "memfit.spin.layers": layers,
                                            "memfit.spin.detectors": detectors})
        self._add_event(self._iter_span, "spin", self._fields("spin", e), ts)

    def _on_breaker(self, e: dict[str, Any], ts: float, index: int) -> None:
        if e.get("to_state"):
            self._summary["breaker_transitions"].append(
                f"{e.get('tier')}:{e.get('from_state')}->{e.get('to_state')}")
        self._add_event(self._innermost(), "breaker", self._fields("breaker", e), ts)

    def _on_guarantee(self, e: dict[str, Any], ts: float, index: int) -> None:
        if e.get("violated"):
            self._summary["violations"] += 1
        self._finding("guarantee", e, ts)

    def _on_memory(self, e: dict[str, Any], ts: float, index: int) -> None:
        fields = self._fields("memory", e)
        results = e.get("results") or []
        fields["memfit.hits"] = len(results)
        if results:
            fields["memfit.ids"] = [str(r.get("id")) for r in results]
            fields["memfit.scores"] = [float(r.get("score") or 0.0) for r in results]
        self._add_event(self._innermost(), "memory", fields, ts)

    def _on_synthesis(self, e: dict[str, Any], ts: float, index: int) -> None:
        fields = self._fields("synthesis", e)
        fields["memfit.sample_count"] = len(e.get("samples") or [])
        clusters = e.get("clusters") or []
        fields["memfit.cluster_count"] = len(clusters)
        if clusters:
            fields["memfit.cluster_shares"] = [float(c.get("share") or 0.0) for c in clusters]
        self._add_event(self._innermost(), "synthesis", fields, ts)

    # --- the end ------------------------------------------------------------------------
    def _run_end(self, e: dict[str, Any], ts: float) -> None:
        self._close_iteration()
        root, s = self._root, self._summary
        status = str(e.get("status") or "")
        attrs: dict[str, Any] = {
            "memfit.status": status, "memfit.reason": self._clean(e.get("reason") or "", 500),
            "memfit.iterations": int(self._iteration or 0), "memfit.calls": s["calls"],
            "memfit.usage.input_tokens": s["input_tokens"], "memfit.usage.output_tokens": s["output_tokens"],
            "memfit.cost_usd": round(s["cost_usd"], 6), "memfit.spin.count": s["spins"],
            "memfit.guarantee.violations": s["violations"],
            "memfit.breaker.opened": any(t.endswith("->OPEN") for t in s["breaker_transitions"]),
        }
        if s["breaker_transitions"]:
            attrs["memfit.breaker.transitions"] = list(s["breaker_transitions"])
        if s["reflection_max"] >= 0:
            attrs["memfit.reflection.max_level"] = s["reflection_max"]
        if self._content and e.get("answer"):
            attrs[C.OUTPUT_MESSAGES] = C.messages("assistant", e["answer"])
        root.set_attributes(attrs)
        if status in ERROR_STATUSES:
            self._error(root, status, e.get("reason"))
        self._end(root, ts)
        self.open = False

    def close(self, ts: float | None = None) -> None:
        """End whatever is still open (a trace that stops before ``run_end``)."""
        with self._lock:
            if not self.open:
                return
            last = self._iter_last if ts is None else ts
            self._close_iteration()
            self._root.set_attribute("memfit.unfinished", True)
            self._end(self._root, last)
            self.open = False

