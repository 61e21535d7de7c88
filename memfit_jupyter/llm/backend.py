"""Where model calls go: litellm (the real thing) or a recording (replay).

``LiteLLMBackend`` imports litellm on its first call, after setting
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that litellm never reaches for the
network to fetch its price list.
"""

from __future__ import annotations

import sys
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from ..errors import ModelCallError, UnknownModelError
from ..known import note_server
from .loader import import_litellm as import_litellm
from .loader import litellm_loaded as litellm_loaded


@dataclass(slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    #: Why generation stopped: "stop", "length" (the max_tokens cap), "tool_calls", ...
    finish_reason: str | None = None
    #: Prompt tokens the provider served from its prompt cache, where it reports them.
    cached_tokens: int = 0


#: Gets each piece of a streamed reply as it arrives.
OnDelta = Callable[[str], None]


class Backend(Protocol):
    def complete(self, model: str, messages: list[dict[str, Any]], *, max_tokens: int | None,
                 timeout: float | None, metadata: dict[str, Any], request: dict[str, Any] | None = None,
                 on_delta: OnDelta | None = None) -> Completion: ...

    def prices(self, model: str) -> tuple[float, float]: ...

    def context_window(self, model: str) -> int | None: ...

    def forget(self, run_key: str) -> None: ...


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
        from .failures import unknown_model_message

        raise UnknownModelError(unknown_model_message(model)) from None


#: The key sent to a server at a custom api_base when no key is set: local servers need none,
#: but the OpenAI client refuses to send a request without one.
NO_KEY = "no-key"
#: The per-call timeout for a model at a custom api_base (see ``default_timeout``).
LOCAL_TIMEOUT_S = 300.0


class LiteLLMBackend:
    def __init__(self, model_options: dict[str, dict[str, Any]] | None = None):
        #: Per-model keyword arguments for litellm (e.g. api_base, api_key of a local server).
        self.model_options = dict(model_options or {})
        self._key_checked: set[str] = set()

    def _check_key(self, model: str, options: dict[str, Any]) -> dict[str, Any]:
        """Before the first call to ``model``: a missing key is one clear failure, not a 500."""
        if model.startswith("memfit/") or options.get("api_key"):
            return options
        litellm = import_litellm()
        try:
            env = litellm.validate_environment(model)
        except Exception:
            return options
        missing = list(env.get("missing_keys") or [])
        if not missing:
            return options
        if options.get("api_base"):
            return {**options, "api_key": NO_KEY}
        from .failures import missing_key_message

        raise ModelCallError("auth", missing_key_message(model, missing))

    def complete(self, model: str, messages: list[dict[str, Any]], *, max_tokens: int | None,
                 timeout: float | None, metadata: dict[str, Any], request: dict[str, Any] | None = None,
                 on_delta: OnDelta | None = None) -> Completion:
        litellm = import_litellm()
        options = self._check_key(model, self.model_options.get(model, {}))
        note_server(options.get("api_base"))  # a fork of this run's saved trace may call it again (known.py)
        kwargs: dict[str, Any] = {**options, "model": model, "messages": messages,
                                  "num_retries": 0, "max_retries": 0, "metadata": metadata,
                                  **(request or {})}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            if on_delta is not None and self.can_stream(model):
                from .streaming import stream_completion

                response = stream_completion(litellm, kwargs, on_delta)
            else:
                response = litellm.completion(**kwargs)
        except Exception as exc:
            from .failures import classify

            failure = classify(exc, model)
            message = failure.message
            if failure.kind == "unreachable":  # the address is the user's to check: name it
                from .failures import unreachable_message

                message = unreachable_message(model, options.get("api_base"))
            error = ModelCallError(failure.kind, message)
            error.retry_after = failure.retry_after
            raise error from None
        return completion_of(litellm, response)

    def prices(self, model: str) -> tuple[float, float]:
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

    def context_window(self, model: str) -> int | None:
        """The model's window: a scenario's, the server's own at a custom api_base (it knows
        best: litellm's figure for a name is not what a local server was started with), else litellm's."""
        if model.startswith("memfit/"):
            from .scenarios import load_scenario

            return load_scenario(model.split("/", 1)[1]).context_window
        options = self.model_options.get(model, {})
        if options.get("api_base"):
            from .served import served_window

            window = served_window(str(options["api_base"]), model, options.get("api_key"))
            if window:
                return window
        litellm = import_litellm()
        try:
            info = litellm.get_model_info(model)
            return int(info.get("max_input_tokens") or info.get("max_tokens") or 0) or None
        except Exception:
            return None

    def default_timeout(self, model: str, purpose: str | None = None) -> float | None:
        """A model behind a custom api_base is usually a local server on a shared CPU, far slower
        than a hosted one: its calls get ``LOCAL_TIMEOUT_S`` (the run's time limit still holds)."""
        return LOCAL_TIMEOUT_S if self.model_options.get(model, {}).get("api_base") else None

    def can_stream(self, model: str) -> bool:
        """Whether replies of ``model`` can stream (the scripted models answer whole)."""
        return not model.startswith("memfit/")

    def structured_mode(self, model: str, requested: str) -> str:
        from .structured import choose_mode

        return choose_mode(model, requested, bool(self.model_options.get(model, {}).get("api_base")))

    def advance(self, model: str, messages: list[dict[str, Any]], metadata: dict[str, Any]) -> None:
        """A call answered elsewhere (a fork's recorded prefix): a scripted model keeps its place in
        its script; a real model keeps no state between calls, so nothing happens."""
        if model.startswith("memfit/"):
            _handler().advance(model, messages, metadata)

    def forget(self, run_key: str) -> None:
        if litellm_loaded():
            from .provider import HANDLER

            HANDLER.forget(run_key)


def _handler() -> Any:
    """The scripted models' handler (``provider.HANDLER``) of the provider module loaded now;
    litellm is imported first when it is not (an ``import`` statement at every call costs more
    than this lookup, and a replayed step makes one)."""
    loaded: Any = sys.modules.get(f"{__package__}.provider")
    if loaded is None:
        import_litellm()
        from . import provider as loaded
    return loaded.HANDLER


def completion_of(litellm: ModuleType, response: Any) -> Completion:
    """A litellm response as a ``Completion``: the reply text (a tool call's arguments in tools mode)."""
    choice = response.choices[0]
    message = choice.message
    text = message.content or ""
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        text = calls[0].function.arguments or ""
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
        finish_reason=getattr(choice, "finish_reason", None),
        cached_tokens=cached_prompt_tokens(usage),
    )


def cached_prompt_tokens(usage: Any) -> int:
    """The prompt tokens the provider served from its prompt cache: OpenAI-style
    ``prompt_tokens_details.cached_tokens`` (llama.cpp's server too), or Anthropic's
    ``cache_read_input_tokens`` as litellm passes it on; 0 when the provider says nothing."""
    details = getattr(usage, "prompt_tokens_details", None)
    if isinstance(details, dict):
        from_details = details.get("cached_tokens")
    else:
        from_details = getattr(details, "cached_tokens", None)
    read = getattr(usage, "cache_read_input_tokens", None)
    if read is None and isinstance(usage, dict):
        read = usage.get("cache_read_input_tokens")
    return max(int(from_details or 0), int(read or 0))


class ReplayBackend:
    """Answers each call with the next recorded reply of the same purpose, so a run replays
    offline, byte for byte, and a reply never goes to a call of another kind."""

    def __init__(self, model_calls: Iterable[dict[str, Any]], prices: dict[str, tuple[float, float]] | None = None,
                 windows: dict[str, int] | None = None):
        self._queues: dict[str, deque[dict[str, Any]]] = defaultdict(deque)
        self._modes: dict[str, str] = {}
        for call in model_calls:
            model = call.get("model")
            if call.get("structured") and model:
                self._modes.setdefault(model, call["structured"])
            self._queues[call.get("purpose", "action")].append(call)
        self._prices = prices or {}
        self._windows = windows or {}
        self._streamed = {c.get("model") for q in self._queues.values() for c in q if c.get("partial_reply")}

    def complete(self, model: str, messages: list[dict[str, Any]], *, max_tokens: int | None,
                 timeout: float | None, metadata: dict[str, Any], request: dict[str, Any] | None = None,
                 on_delta: OnDelta | None = None) -> Completion:
        purpose = metadata.get("memfit_purpose", "action")
        queue = self._queues.get(purpose)
        if not queue:
            raise ModelCallError("other", f"the recording has no more {purpose} replies")
        call = queue.popleft()
        if call.get("error_kind"):
            if on_delta is not None and call.get("partial_reply"):
                on_delta(call["partial_reply"])  # what had streamed in before the call failed
            if call["error_kind"] == "cancelled":  # the person stopped the run during this call
                raise KeyboardInterrupt
            error = ModelCallError(call["error_kind"], call.get("error") or "recorded failure")
            # a call abandoned at its deadline was charged its worst case; the charge is worked
            # out again from the same cap, so only whether it was charged is taken from the recording
            error.abandoned = float(call.get("cost_usd") or 0.0) > 0
            raise error
        return Completion(
            text=call.get("reply") or "",
            prompt_tokens=int(call.get("prompt_tokens", 0)),
            completion_tokens=int(call.get("completion_tokens", 0)),
            cost_usd=float(call.get("cost_usd", 0.0)),
            finish_reason=call.get("finish_reason"),
            cached_tokens=int(call.get("cached_tokens", 0) or 0),
        )

    def prices(self, model: str) -> tuple[float, float]:
        return self._prices.get(model, (0.0, 0.0))

    def default_timeout(self, model: str, purpose: str | None = None) -> float | None:
        """The timeout the next recorded call of ``purpose`` had (the time left then is not the
        time left now, so the replay takes the recorded figure rather than working it out)."""
        queue = self._queues.get(purpose or "action")
        if queue and queue[0].get("timeout_s") is not None:
            return float(queue[0]["timeout_s"])
        return None

    def instant(self, model: str) -> bool:
        """Every reply is the recording's, given at once: there is no wait for a deadline to cut off
        (a recorded call abandoned at its deadline raises its recorded error)."""
        return True

    def can_stream(self, model: str) -> bool:
        """Whether a call of ``model`` must stream in the replay: where the recording kept what had
        streamed in before a call failed (``partial_reply``), the replay streams it again."""
        return model in self._streamed

    def structured_mode(self, model: str, requested: str) -> str:
        """The mode the recording used for ``model`` (a replay sends what the run sent)."""
        return self._modes.get(model) or ("text" if requested == "auto" else requested)

    def context_window(self, model: str) -> int | None:
        return self._windows.get(model)

    def forget(self, run_key: str) -> None:
        pass
