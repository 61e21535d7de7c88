"""``memfit/<scenario>``: a litellm custom provider that answers from a scenario script.

It is registered like any other provider, so cost accounting, timeouts and
exception mapping run through litellm unchanged.  Importing this module
imports litellm; only ``backend.py`` does so, on the first model call.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import litellm
from litellm.exceptions import InternalServerError, RateLimitError, Timeout
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import ChatCompletionMessageToolCall, Function, ModelResponse

from .scenarios import Reply, Scenario, load_scenario, scenario_names
from .tokens import estimate_tokens, messages_text

if TYPE_CHECKING:
    import httpx
    from litellm.llms.custom_httpx.http_handler import HTTPHandler

PROVIDER = "memfit"


class ScriptedLLM(CustomLLM):
    """Replies from a scenario; which reply depends on the purpose, the prompt and the call count."""

    def __init__(self) -> None:
        super().__init__()
        self._counts: dict[tuple[str, str, int, str], int] = defaultdict(int)
        self._lock = threading.Lock()

    def forget(self, run_key: str) -> None:
        """Drop the call counts of a finished run."""
        with self._lock:
            for key in [k for k in self._counts if k[0] == run_key]:
                del self._counts[key]

    def advance(self, model: str, messages: list[dict[str, Any]], metadata: dict[str, Any]) -> None:
        """Move a run's place in the script as if this call had been answered (a fork's recorded
        prefix: the call is answered from the recording, and the script goes on from there)."""
        purpose = metadata.get("memfit_purpose", "action")
        self._pick(load_scenario(model.split("/", 1)[-1]), purpose, lambda: messages_text(messages),
                   str(metadata.get("memfit_run", "")))

    def _pick(self, scenario: Scenario, purpose: str, prompt_of: Callable[[], str], run_key: str) -> Reply:
        prompt: str | None = None  # made only for a rule that reads it (a long run's prompt is long)
        for index, rule in enumerate(scenario.rules.get(purpose, ())):
            if rule.when or rule.unless:
                prompt = prompt_of() if prompt is None else prompt
                if not rule.matches(prompt):
                    continue
            with self._lock:
                # Keyed by scenario too: a primary and a fallback tier on two scenarios keep their own counts.
                n = self._counts[(run_key, purpose, index, scenario.name)]
                reply = rule.reply_at(n)
                if reply is None:
                    continue
                self._counts[(run_key, purpose, index, scenario.name)] = n + 1
            return reply
        return Reply(text="{}")

    def completion(self, model: str, messages: list[dict[str, Any]], api_base: str,
                   custom_prompt_dict: dict[str, Any], model_response: ModelResponse,
                   print_verbose: Callable[..., Any], encoding: Any, api_key: str | None,
                   logging_obj: Any, optional_params: dict[str, Any], acompletion: bool | None = None,
                   litellm_params: dict[str, Any] | None = None,
                   logger_fn: Callable[..., Any] | None = None, headers: dict[str, str] | None = None,
                   timeout: float | httpx.Timeout | None = None,
                   client: HTTPHandler | None = None) -> ModelResponse:
        name = model.split("/", 1)[-1]
        scenario = load_scenario(name)
        metadata = (litellm_params or {}).get("metadata") or {}
        purpose = metadata.get("memfit_purpose", "action")
        run_key = str(metadata.get("memfit_run", ""))
        prompt = messages_text(messages)
        reply = self._pick(scenario, purpose, lambda: prompt, run_key)
        timeout_s = float(timeout) if isinstance(timeout, int | float) else None
        if reply.delay_s:
            if timeout_s is not None and reply.delay_s >= timeout_s:
                time.sleep(timeout_s)
                raise Timeout(message=f"scripted reply took longer than {timeout_s:g} s",
                                      model=model, llm_provider=PROVIDER)
            time.sleep(reply.delay_s)
        if reply.fault == "rate_limit":
            raise RateLimitError(message="scripted rate limit (429)", llm_provider=PROVIDER, model=model)
        if reply.fault == "server_error":
            raise InternalServerError(message="scripted server error (500)", llm_provider=PROVIDER, model=model)
        if reply.fault == "timeout":
            time.sleep(min(reply.hang_s, timeout_s) if timeout_s else reply.hang_s)
            raise Timeout(message="scripted timeout", model=model, llm_provider=PROVIDER)
        if reply.fault == "malformed":
            text = '{"thought": "unterminated'
        elif reply.fault == "empty":
            text = ""
        else:
            text = reply.text or ""
        completion_tokens = reply.completion_tokens or estimate_tokens(text)
        max_tokens = optional_params.get("max_tokens")
        finish: Literal["stop", "length", "tool_calls"] = "stop"
        if max_tokens and completion_tokens > max_tokens:
            # A real model stops at max_tokens: the reply is cut, and so is the bill.
            text = text[: max_tokens * 4]
            completion_tokens = max_tokens
            finish = "length"
        tools = optional_params.get("tools")
        message = model_response.choices[0].message
        if tools:
            # Tools mode: the reply is the arguments of a call to the one function offered.
            name = tools[0]["function"]["name"]
            message.content = None
            message.tool_calls = [ChatCompletionMessageToolCall(
                id=f"call_{purpose}", type="function", function=Function(name=name, arguments=text))]
            finish = "tool_calls" if finish == "stop" else finish
        else:
            message.content = text
        model_response.choices[0].finish_reason = finish
        model_response.model = model
        prompt_tokens = estimate_tokens(prompt)
        usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                              total_tokens=prompt_tokens + completion_tokens)
        # ModelResponse declares no usage field (it is an extra of the pydantic model): set it
        # the way litellm's own providers do.
        setattr(model_response, "usage", usage)  # noqa: B010
        return model_response


HANDLER = ScriptedLLM()
_registered = False


def register() -> None:
    """Register the provider and every scenario's prices with litellm (idempotent)."""
    global _registered
    if _registered:
        return
    litellm.custom_provider_map = [
        *[p for p in litellm.custom_provider_map if p.get("provider") != PROVIDER],
        {"provider": PROVIDER, "custom_handler": HANDLER},
    ]
    litellm.utils.custom_llm_setup()
    prices = {}
    for name in scenario_names():
        s = load_scenario(name)
        prices[s.model] = {
            "input_cost_per_token": s.input_cost_per_token,
            "output_cost_per_token": s.output_cost_per_token,
            "cache_creation_input_token_cost": 0.0,
            "cache_read_input_token_cost": 0.0,
            "litellm_provider": PROVIDER,
            "mode": "chat",
            "max_input_tokens": s.context_window,
            "max_tokens": s.context_window,
        }
    litellm.register_model(prices)
    _registered = True
