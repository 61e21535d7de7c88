"""Structured model calls: one purpose, one schema, bounded repair, every attempt recorded.

``LLMClient.call(purpose, messages)`` asks the model of a tier for a JSON
reply that fits the purpose's schema.  A reply that does not fit is first
repaired (code fences, text around the object, trailing commas); if it still
does not fit, the model is asked again with the validation error, at most
``max_format_retries`` times; then the call is recorded as failed.  Each
attempt is a ``model_call`` event carrying the reply, so a run can be
replayed.  Before each attempt the run's budget caps the output tokens and
the timeout, and the budget's deadline cuts the call off at that timeout; the
run charges its budget from the ``model_call`` events.

The schema goes out in the model's structured mode (``structured.py``: native
tool call, JSON schema or JSON in text).  Provider failures come back as kinds
(``failures.py``): a refused key or an unknown model ends the run at once
(``ProviderRejected``); a 429's Retry-After is waited for when the time budget
allows; a prompt over the context window is rebuilt once (``rebuild``, which
flushes the tiered context) and sent again.

A budget never buys a truncated reply: each purpose has a minimum useful
output size (``useful_tokens``: the caller's cap until the run has seen a reply
of that purpose, then 1.5 times the longest one, at least ``MIN_USEFUL_TOKENS``);
a call the budget cannot pay for at that size is not made, and the run
degrades before spending, with the work so far as its partial result.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ModelCallError
from ..secrets import StreamRedactor
from .backend import Backend, Completion
from .failures import FATAL_KINDS, MAX_RETRY_AFTER_S, ProviderRejected
from .tokens import estimate_message_tokens

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..reliability.guarantees import BudgetTracker
    from ..tools import Tool

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_TOKENS = 1024
#: Fewest output tokens that can carry a useful reply of each purpose, before the run has seen one.
MIN_USEFUL_TOKENS = {"action": 48, "reflection": 64, "spin": 32, "triage": 40, "tags": 16,
                     "sample": 32, "summary": 48, "lesson": 24}
#: A purpose's useful size is at least this times its longest reply so far in the run.
USEFUL_MARGIN = 1.5
#: Purposes whose reply streams into the run view (the others are short and not shown as they come).
STREAMED = frozenset({"action", "summary", "sample"})
#: How many 429s with a Retry-After one call waits through before it counts as failed.
MAX_RATE_LIMIT_WAITS = 2


@dataclass(slots=True)
class CallResult:
    purpose: str
    ok: bool
    value: Any = None  # the validated pydantic object
    raw: str = ""
    error: str | None = None
    error_kind: str | None = None
    model: str = ""
    tier: str = "primary"
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 0
    #: Set when the call was answered by another tier than the one asked (breaker fallback).
    fallback_from: str | None = None
    #: How the schema was sent: tools, schema or text.
    structured: str = "text"


class Breakers(Protocol):
    """What the client asks of the circuit breakers (``reliability/breakers.py``)."""

    def route(self, tier: str, *, purpose: str = ..., iteration: int = ...) -> str: ...

    def record(self, tier: str, ok: bool, error: str = ..., *, kind: str | None = ...) -> None: ...


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def extract_json(text: str) -> Any:
    """Parse the JSON object in a model reply, repairing the common slips. Raises ValueError."""
    text = (text or "").strip()
    if not text:
        raise ValueError("the reply was empty")
    try:  # the first candidate, the usual case: the repairs below are looked for only when it fails
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    candidates = [text]
    fenced = _FENCE.search(text)
    if fenced:
        candidates.append(fenced.group(1).strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for c in list(candidates):
        candidates.append(_TRAILING_COMMA.sub(r"\1", c))
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError:
            continue
    raise ValueError(f"the reply is not JSON: {text[:80]!r}")


#: The purposes' schemas (``schemas.SCHEMAS``), imported at the first call: it imports pydantic.
_SCHEMAS: dict[str, type[BaseModel]] | None = None


def _schemas() -> dict[str, type[BaseModel]]:
    global _SCHEMAS
    if _SCHEMAS is None:
        from .schemas import SCHEMAS

        _SCHEMAS = SCHEMAS
    return _SCHEMAS


def _schema_hint(schema: type[BaseModel]) -> str:
    props = schema.model_json_schema().get("properties", {})
    return ", ".join(props)


class LLMClient:
    """Calls models by tier (primary, fast, fallback) for one run."""

    def __init__(self, tiers: dict[str, str], backend: Backend, emit: Callable[..., Any],
                 run_key: str = "", budget: BudgetTracker | None = None,
                 breakers: Breakers | None = None, max_format_retries: int = 2,
                 default_timeout_s: float | None = None, structured: str = "auto",
                 stream: bool = True):
        from .structured import CHOICES

        if structured not in CHOICES:
            raise ValueError(f"structured must be one of {', '.join(CHOICES)}, got {structured!r}")
        self.tiers = {k: v for k, v in tiers.items() if v}
        self.backend = backend
        self.emit = emit
        self.run_key = run_key
        self.budget = budget
        self.breakers = breakers
        self.max_format_retries = max_format_retries
        self.default_timeout_s = default_timeout_s
        #: "auto", "tools", "schema" or "text" (``structured.py``); the mode per model is cached.
        self.structured = structured
        self._modes: dict[str, str] = {}
        #: The run's tools by name: the action schema names them and their parameters.
        self.tools: dict[str, Tool] | None = None
        #: Stream replies of the ``STREAMED`` purposes as ``model_delta`` events (real models).
        self.stream = stream
        #: A ceiling on every call's output tokens (None: the callers' own caps).  A slow local
        #: model writes ~40 tokens a second: a reply left to run to 1,024 tokens costs half a minute.
        self.max_output_tokens: int | None = None
        self._longest: dict[str, int] = {}
        self._requests: dict[tuple[str, str, tuple[str, ...], int | None], dict[str, Any]] = {}

    def mode_for(self, model: str) -> str:
        """The structured mode calls to ``model`` use."""
        mode = self._modes.get(model)
        if mode is None:
            chooser = getattr(self.backend, "structured_mode", None)
            mode = chooser(model, self.structured) if chooser else (
                "text" if self.structured == "auto" else self.structured)
            self._modes[model] = mode
        return mode

    def useful_tokens(self, purpose: str, cap: int | None) -> int:
        """The fewest output tokens worth paying for in a ``purpose`` call (module docstring):
        before the run has seen a reply of that purpose, the caller's whole cap (nothing says a
        shorter reply will do); then 1.5 times the longest one, at least the purpose's floor."""
        floor = MIN_USEFUL_TOKENS.get(purpose, 32)
        longest = self._longest.get(purpose)
        if longest is None:
            return cap if cap is not None else floor
        need = max(floor, math.ceil(USEFUL_MARGIN * longest))
        return need if cap is None else min(cap, need)

    def _learn(self, purpose: str, completion_tokens: int) -> None:
        if completion_tokens > self._longest.get(purpose, 0):
            self._longest[purpose] = completion_tokens

    def model_for(self, tier: str) -> str:
        return self.tiers.get(tier) or self.tiers["primary"]

    def call(self, purpose: str, messages: list[dict[str, Any]], *, tier: str = "primary", iteration: int = 0,
             max_tokens: int | None = DEFAULT_MAX_TOKENS,
             rebuild: Callable[[], list[dict[str, Any]] | None] | None = None) -> CallResult:
        """One structured call (module docstring).  ``rebuild()`` gives the messages again after
        the context is flushed, when the prompt is over the model's window (None: cannot)."""
        schema = (_SCHEMAS or _schemas())[purpose]
        if self.max_output_tokens is not None:
            max_tokens = self.max_output_tokens if max_tokens is None else min(max_tokens, self.max_output_tokens)
        if tier not in self.tiers:
            tier = "primary"
        messages = list(messages)
        result = CallResult(purpose=purpose, ok=False, tier=tier, model=self.model_for(tier))
        waits = 0
        attempt = 0
        format_attempts = 0
        while format_attempts <= self.max_format_retries:
            attempt += 1
            result.attempts = attempt
            try:
                completion, model, used_tier, mode = self._complete(purpose, messages, tier, iteration,
                                                                    attempt, max_tokens)
            except ModelCallError as exc:
                result.error, result.error_kind = str(exc), exc.kind
                if exc.kind in FATAL_KINDS or (exc.kind == "unreachable" and self._nowhere_else()):
                    raise ProviderRejected(exc.kind, str(exc)) from None
                retry_after = exc.retry_after
                if exc.kind == "rate_limit" and retry_after is not None and waits < MAX_RATE_LIMIT_WAITS \
                        and self._can_wait(retry_after):
                    waits += 1
                    self.emit("note", iteration=iteration, text=f"{result.model} is rate limited: waiting "
                              f"{retry_after:g} s as it asked (Retry-After), then trying again")
                    time.sleep(retry_after)
                    continue
                if exc.kind == "context_window" and rebuild is not None:
                    fresh, rebuild = rebuild(), None  # once only
                    if fresh:
                        messages = list(fresh)
                        continue
                return result
            result.model, result.raw, result.structured = model, completion.text, mode
            if used_tier != tier:
                result.fallback_from, result.tier = tier, used_tier
            result.cost_usd += completion.cost_usd
            result.prompt_tokens += completion.prompt_tokens
            result.completion_tokens += completion.completion_tokens
            format_attempts += 1
            try:
                data = extract_json(completion.text)
                result.value = schema.model_validate(data)
                result.ok, result.error, result.error_kind = True, None, None
                self._learn(purpose, completion.completion_tokens)
                return result
            except Exception as exc:  # ValueError or pydantic.ValidationError
                problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if hasattr(exc, "errors"):
                    problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
                if completion.finish_reason == "length":
                    problem = f"cut off at the {completion.completion_tokens}-token cap: {problem}"
                result.error, result.error_kind = f"reply does not fit the {purpose} schema: {problem}", "format"
                self.emit("format_error", iteration=iteration, purpose=purpose, attempt=attempt, error=result.error)
                messages = messages + [
                    {"role": "assistant", "content": completion.text[:2000]},
                    {"role": "user", "content": (
                        f"Your reply could not be used ({problem}). Reply again with one JSON object "
                        f"only, with the fields: {_schema_hint(schema)}.")},
                ]
        return result

    def _nowhere_else(self) -> bool:
        """Whether every tier names the same model: an unreachable server then fails every call."""
        return len({model for model in self.tiers.values() if model}) <= 1

    def _can_wait(self, seconds: float) -> bool:
        if seconds > MAX_RETRY_AFTER_S:
            return False
        if self.budget is None:
            return True
        from ..reliability.guarantees import MIN_CALL_SECONDS

        return self.budget.remaining_time() - seconds > 2 * MIN_CALL_SECONDS

    def _complete(self, purpose: str, messages: list[dict[str, Any]], tier: str, iteration: int,
                  attempt: int, max_tokens: int | None) -> tuple[Completion, str, str, str]:
        """One attempt at one tier (the breakers may route it elsewhere). Emits its model_call event."""
        if self.breakers is not None:
            tier = self.breakers.route(tier, purpose=purpose, iteration=iteration)
        model = self.model_for(tier)
        mode = self.mode_for(model)
        prompt_tokens = estimate_message_tokens(messages)
        timeout = self.default_timeout_s
        if timeout is None:  # not set for this client: the backend's for the model, else the default
            own = getattr(self.backend, "default_timeout", None)
            timeout = (own(model, purpose) if own is not None else None) or DEFAULT_TIMEOUT_S
        requested = max_tokens
        if self.budget is not None:
            max_tokens, timeout = self._capped(self.budget, purpose, prompt_tokens, model, max_tokens, timeout)
        request = self._request(purpose, mode, max_tokens)  # the schema fitted to the final cap
        started = time.perf_counter()
        metadata = {"memfit_purpose": purpose, "memfit_run": self.run_key}
        can_stream = getattr(self.backend, "can_stream", None)
        stream = _DeltaPump(self.emit, iteration, purpose, model) if (
            self.stream and purpose in STREAMED and can_stream is not None and can_stream(model)) else None
        common = {"model": model, "tier": tier, "attempt": attempt, "max_tokens": max_tokens,
                  "requested_max_tokens": requested, "structured": mode}

        # Only what is in use is passed on, so that a backend written for text calls keeps working.
        optional: dict[str, Any] = {}
        if request:
            optional["request"] = request
        if stream is not None:
            optional["on_delta"] = stream.push

        def send() -> Completion:
            return self.backend.complete(model, messages, max_tokens=max_tokens, timeout=timeout,
                                         metadata=metadata, **optional)

        try:
            # With a budget, the call is cut off at its timeout by the wall clock (reliability/deadline.py).
            instant = getattr(self.backend, "instant", None)
            if self.budget is None or (stream is None and instant is not None and instant(model)):
                completion = send()  # no wait to cut off: a recorded reply (a replay, a fork's prefix)
            elif stream is not None:
                completion = stream.run(self.budget, send, timeout)
            else:
                completion = self.budget.run_call(send, timeout)
        except (ModelCallError, KeyboardInterrupt) as exc:
            latency = time.perf_counter() - started
            interrupted = isinstance(exc, KeyboardInterrupt)
            if isinstance(exc, KeyboardInterrupt):
                kind, error = "cancelled", "interrupted by the person: the call was abandoned"
            else:
                kind, error = exc.kind, str(exc)
            charged = 0.0
            if self.budget is not None:
                if interrupted or (isinstance(exc, ModelCallError) and exc.abandoned):
                    # The abandoned call may still be billed: charge the most it can cost, which the
                    # cap above made affordable, so the cost limit holds whatever the provider does.
                    charged = self.budget.worst_case_cost(prompt_tokens, self.backend.prices(model), max_tokens)
            if self.breakers is not None and not interrupted:
                self.breakers.record(tier, ok=False, error=error, kind=kind)
            partial = stream.text() if stream is not None else None
            self.emit("model_call", iteration=iteration, purpose=purpose, **common,
                      ok=False, prompt_tokens=0, completion_tokens=0, cost_usd=charged, latency_s=latency,
                      timeout_s=round(timeout, 3), reply=None, error=error, error_kind=kind,
                      **({"partial_reply": partial} if partial else {}))
            raise
        latency = time.perf_counter() - started
        if stream is not None:
            stream.flush()
        if self.breakers is not None:
            self.breakers.record(tier, ok=True)
        extra = {}
        if completion.cached_tokens:
            extra["cached_tokens"] = completion.cached_tokens
        self.emit("model_call", iteration=iteration, purpose=purpose, **common,
                  ok=True, prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                  cost_usd=completion.cost_usd, latency_s=latency,
                  timeout_s=round(timeout, 3), reply=completion.text, error=None, error_kind=None,
                  finish_reason=completion.finish_reason, **extra)
        return completion, model, tier, mode

    def _request(self, purpose: str, mode: str, max_tokens: int | None = None) -> dict[str, Any]:
        """The litellm arguments that carry the schema in ``mode``; in ``schema`` mode its strings are
        bounded so that the longest reply fits in ``max_tokens`` (built once per purpose, mode and cap)."""
        if mode == "text":
            return {}
        key = (purpose, mode, tuple(self.tools or ()), max_tokens)
        request = self._requests.get(key)
        if request is None:
            from .schemas import SCHEMAS
            from .structured import fit_schema, request_for, wire_schema

            schema = wire_schema(purpose, SCHEMAS[purpose], self.tools, mode)
            if mode == "schema":  # a grammar-constrained decoder; tool calls are not held to maxLength
                schema = fit_schema(schema, max_tokens)
            request = request_for(mode, purpose, schema)
            self._requests[key] = request
        return request

    def _capped(self, budget: BudgetTracker, purpose: str, prompt_tokens: int, model: str,
                max_tokens: int | None, timeout: float) -> tuple[int | None, float]:
        """The budget's caps, refusing (LimitsExceeded) a call it cannot pay for at a useful size."""
        return budget.cap_model_call(prompt_tokens, self.backend.prices(model), max_tokens, timeout,
                                     min_tokens=self.useful_tokens(purpose, max_tokens))


class _DeltaPump:
    """Carries a streamed reply from the call's worker thread to the caller's thread, which emits
    it as throttled ``model_delta`` events (events are never emitted from another thread).

    The live view joins the events' pieces: each is the next part of the reply so far redacted
    whole (a key split between two pieces of the model's is redacted), its end held back while
    more text could still make it a key (``secrets.StreamRedactor``)."""

    INTERVAL_S = 0.25

    def __init__(self, emit: Callable[..., Any], iteration: int, purpose: str, model: str):
        import queue

        self.emit, self.iteration, self.purpose, self.model = emit, iteration, purpose, model
        self.queue: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.parts: list[str] = []
        self.redactor = StreamRedactor()

    def push(self, delta: str) -> None:  # on the worker thread
        self.queue.put(delta)

    def drain(self, final: bool = False) -> None:
        """Emit what more of the reply can be shown; all of it when ``final`` (the call ended)."""
        count = len(self.parts)
        while True:
            try:
                self.parts.append(self.queue.get_nowait())
            except Exception:
                break
        if len(self.parts) == count and not final:
            return
        piece = self.redactor.advance("".join(self.parts), final)
        if piece:
            # chars: the characters sent so far, so that the view's sum of pieces matches it
            self.emit("model_delta", iteration=self.iteration, purpose=self.purpose, model=self.model,
                      text=piece, chars=len(self.redactor.shown))

    def text(self) -> str:
        self.drain()
        return "".join(self.parts)

    def flush(self) -> None:
        self.drain(final=True)

    def run(self, budget: BudgetTracker, send: Callable[[], Completion], timeout: float) -> Completion:
        """``send()`` under the budget's deadline, draining deltas every ``INTERVAL_S`` meanwhile."""
        from ..reliability.deadline import call_with_deadline

        polled = getattr(budget, "runner", None) is call_with_deadline  # else a runner of the caller's
        if polled:
            limit = max(0.0, min(timeout, budget.remaining_time()))
            return call_with_deadline(send, limit, poll=self._tick)
        return budget.run_call(send, timeout)

    def _tick(self) -> None:
        import time as _time

        now = _time.monotonic()
        if now - getattr(self, "_last", 0.0) >= self.INTERVAL_S:  # throttled: a few events a second
            self._last = now
            self.drain()
