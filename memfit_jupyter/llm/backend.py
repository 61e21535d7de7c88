"""Where model calls go: litellm (the real thing) or a recording (replay).

``LiteLLMBackend`` imports litellm on its first call, after setting
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that litellm never reaches for the
network to fetch its price list.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import ModelCallError, UnknownModelError


@dataclass(slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class Backend(Protocol):
    def complete(self, model: str, messages: list[dict], *, max_tokens: int | None,
                 timeout: float | None, metadata: dict[str, Any]) -> Completion: ...

    def prices(self, model: str) -> tuple[float, float]: ...

    def context_window(self, model: str) -> int | None: ...

    def forget(self, run_key: str) -> None: ...


_litellm = None


def import_litellm():
    """Import litellm once, offline, quietly; register the scripted provider."""
    global _litellm
    if _litellm is None:
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        for name in ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router", "litellm"):
            logging.getLogger(name).setLevel(logging.ERROR)
        from . import provider

        provider.register()
        _litellm = litellm
    return _litellm


def _kind(exc: Exception) -> str:
    litellm = import_litellm()
    if isinstance(exc, litellm.RateLimitError):
        return "rate_limit"
    if isinstance(exc, litellm.Timeout):
        return "timeout"
    if isinstance(exc, litellm.AuthenticationError):
        return "auth"
    if isinstance(exc, litellm.BadRequestError):
        return "bad_request"
    if isinstance(exc, litellm.InternalServerError | litellm.ServiceUnavailableError | litellm.APIConnectionError):
        return "server_error"
    return "other"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def check_model(model: str) -> None:
    """Fail early and clearly on a model no provider serves."""
    if model.startswith("memfit/"):
        from .scenarios import load_scenario

        load_scenario(model.split("/", 1)[1])
        return
    litellm = import_litellm()
    try:
        litellm.get_llm_provider(model)
    except Exception:
        raise UnknownModelError(
            f"unknown model {model!r}: litellm knows no provider for it "
            "(use provider/model, e.g. openai/gpt-4o-mini, or memfit/<scenario> offline)"
        ) from None


class LiteLLMBackend:
    def __init__(self, model_options: dict[str, dict[str, Any]] | None = None):
        #: Per-model keyword arguments for litellm (e.g. api_base, api_key of a local server).
        self.model_options = dict(model_options or {})

    def complete(self, model, messages, *, max_tokens, timeout, metadata):
        litellm = import_litellm()
        kwargs: dict[str, Any] = {**self.model_options.get(model, {}), "model": model, "messages": messages,
                                  "num_retries": 0, "max_retries": 0, "metadata": metadata}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = litellm.completion(**kwargs)
        except Exception as exc:
            kind = _kind(exc)
            if kind == "bad_request" and "LLM Provider NOT provided" in str(exc):
                raise UnknownModelError(f"unknown model {model!r}: litellm knows no provider for it") from None
            raise ModelCallError(kind, _first_line(exc)) from None
        text = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        cost = (getattr(response, "_hidden_params", {}) or {}).get("response_cost")
        if cost is None:
            try:
                cost = litellm.completion_cost(completion_response=response)
            except Exception:
                cost = 0.0
        return Completion(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=float(cost or 0.0),
        )

    def prices(self, model):
        if model.startswith("memfit/"):
            from .scenarios import load_scenario

            s = load_scenario(model.split("/", 1)[1])
            return s.input_cost_per_token, s.output_cost_per_token
        litellm = import_litellm()
        try:
            info = litellm.get_model_info(model)
            return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0)
        except Exception:
            return 0.0, 0.0

    def context_window(self, model):
        if model.startswith("memfit/"):
            from .scenarios import load_scenario

            return load_scenario(model.split("/", 1)[1]).context_window
        litellm = import_litellm()
        try:
            info = litellm.get_model_info(model)
            return int(info.get("max_input_tokens") or info.get("max_tokens") or 0) or None
        except Exception:
            return None

    def forget(self, run_key):
        if _litellm is not None:
            from .provider import HANDLER

            HANDLER.forget(run_key)


class ReplayBackend:
    """Answers each call with the next recorded reply of the same purpose, so a run replays
    offline, byte for byte, and a reply never goes to a call of another kind."""

    def __init__(self, model_calls: Iterable[dict[str, Any]], prices: dict[str, tuple[float, float]] | None = None,
                 windows: dict[str, int] | None = None):
        self._queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        for call in model_calls:
            self._queues[call.get("purpose", "action")].append(call)
        self._prices = prices or {}
        self._windows = windows or {}

    def complete(self, model, messages, *, max_tokens, timeout, metadata):
        purpose = metadata.get("memfit_purpose", "action")
        queue = self._queues.get(purpose)
        if not queue:
            raise ModelCallError("other", f"the recording has no more {purpose} replies")
        call = queue.popleft()
        if call.get("error_kind"):
            raise ModelCallError(call["error_kind"], call.get("error") or "recorded failure")
        return Completion(
            text=call.get("reply") or "",
            prompt_tokens=int(call.get("prompt_tokens", 0)),
            completion_tokens=int(call.get("completion_tokens", 0)),
            cost_usd=float(call.get("cost_usd", 0.0)),
        )

    def prices(self, model):
        return self._prices.get(model, (0.0, 0.0))

    def context_window(self, model):
        return self._windows.get(model)

    def forget(self, run_key):
        pass
