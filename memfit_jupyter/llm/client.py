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
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ModelCallError
from .backend import Backend
from .tokens import estimate_message_tokens

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_TOKENS = 1024


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


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def extract_json(text: str) -> Any:
    """Parse the JSON object in a model reply, repairing the common slips. Raises ValueError."""
    text = (text or "").strip()
    if not text:
        raise ValueError("the reply was empty")
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


def _schema_hint(schema) -> str:
    props = schema.model_json_schema().get("properties", {})
    return ", ".join(props)


class LLMClient:
    """Calls models by tier (primary, fast, fallback) for one run."""

    def __init__(self, tiers: dict[str, str], backend: Backend, emit: Callable[..., Any],
                 run_key: str = "", budget=None, breakers=None, max_format_retries: int = 2,
                 default_timeout_s: float = DEFAULT_TIMEOUT_S):
        self.tiers = {k: v for k, v in tiers.items() if v}
        self.backend = backend
        self.emit = emit
        self.run_key = run_key
        self.budget = budget
        self.breakers = breakers
        self.max_format_retries = max_format_retries
        self.default_timeout_s = default_timeout_s

    def model_for(self, tier: str) -> str:
        return self.tiers.get(tier) or self.tiers["primary"]

    def call(self, purpose: str, messages: list[dict], *, tier: str = "primary", iteration: int = 0,
             max_tokens: int | None = DEFAULT_MAX_TOKENS) -> CallResult:
        from .schemas import SCHEMAS

        schema = SCHEMAS[purpose]
        if tier not in self.tiers:
            tier = "primary"
        messages = list(messages)
        result = CallResult(purpose=purpose, ok=False, tier=tier, model=self.model_for(tier))
        for attempt in range(1, self.max_format_retries + 2):
            result.attempts = attempt
            try:
                completion, model, used_tier = self._complete(purpose, messages, tier, iteration, attempt, max_tokens)
            except ModelCallError as exc:
                result.error, result.error_kind = str(exc), exc.kind
                return result
            result.model, result.raw = model, completion.text
            if used_tier != tier:
                result.fallback_from, result.tier = tier, used_tier
            result.cost_usd += completion.cost_usd
            result.prompt_tokens += completion.prompt_tokens
            result.completion_tokens += completion.completion_tokens
            try:
                data = extract_json(completion.text)
                result.value = schema.model_validate(data)
                result.ok, result.error, result.error_kind = True, None, None
                return result
            except Exception as exc:  # ValueError or pydantic.ValidationError
                problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                if hasattr(exc, "errors"):
                    problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
                result.error, result.error_kind = f"reply does not fit the {purpose} schema: {problem}", "format"
                self.emit("format_error", iteration=iteration, purpose=purpose, attempt=attempt, error=result.error)
                messages = messages + [
                    {"role": "assistant", "content": completion.text[:2000]},
                    {"role": "user", "content": (
                        f"Your reply could not be used ({problem}). Reply again with one JSON object "
                        f"only, with the fields: {_schema_hint(schema)}.")},
                ]
        return result

    def _complete(self, purpose, messages, tier, iteration, attempt, max_tokens):
        """One attempt at one tier (the breakers may route it elsewhere). Emits its model_call event."""
        if self.breakers is not None:
            tier = self.breakers.route(tier, purpose=purpose, iteration=iteration)
        model = self.model_for(tier)
        prompt_tokens = estimate_message_tokens(messages)
        timeout = self.default_timeout_s
        if self.budget is not None:
            max_tokens, timeout = self.budget.cap_model_call(
                prompt_tokens, self.backend.prices(model), max_tokens, timeout)
        started = time.perf_counter()
        metadata = {"memfit_purpose": purpose, "memfit_run": self.run_key}

        def send():
            return self.backend.complete(model, messages, max_tokens=max_tokens, timeout=timeout, metadata=metadata)

        try:
            # With a budget, the call is cut off at its timeout by the wall clock (reliability/deadline.py).
            completion = send() if self.budget is None else self.budget.run_call(send, timeout)
        except (ModelCallError, KeyboardInterrupt) as exc:
            latency = time.perf_counter() - started
            interrupted = isinstance(exc, KeyboardInterrupt)
            kind = "cancelled" if interrupted else exc.kind
            error = "interrupted by the person: the call was abandoned" if interrupted else str(exc)
            charged = 0.0
            if self.budget is not None:
                if interrupted or getattr(exc, "abandoned", False):
                    # The abandoned call may still be billed: charge the most it can cost, which the
                    # cap above made affordable, so the cost limit holds whatever the provider does.
                    charged = self.budget.worst_case_cost(prompt_tokens, self.backend.prices(model), max_tokens)
            if self.breakers is not None and not interrupted:
                self.breakers.record(tier, ok=False, error=error, kind=kind)
            self.emit("model_call", iteration=iteration, purpose=purpose, model=model, tier=tier, attempt=attempt,
                      ok=False, prompt_tokens=0, completion_tokens=0, cost_usd=charged, latency_s=latency,
                      max_tokens=max_tokens, timeout_s=round(timeout, 3), reply=None, error=error,
                      error_kind=kind)
            raise
        latency = time.perf_counter() - started
        if self.breakers is not None:
            self.breakers.record(tier, ok=True)
        self.emit("model_call", iteration=iteration, purpose=purpose, model=model, tier=tier, attempt=attempt,
                  ok=True, prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                  cost_usd=completion.cost_usd, latency_s=latency, max_tokens=max_tokens,
                  timeout_s=round(timeout, 3), reply=completion.text, error=None, error_kind=None)
        return completion, model, tier
