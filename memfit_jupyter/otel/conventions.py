"""The names memfit's spans carry: OpenTelemetry GenAI conventions, OpenInference, ``memfit.*``.

Checked against the GenAI semantic conventions (``gen-ai-spans.md`` and
``gen-ai-agent-spans.md``, status Development, the release after semconv
1.41 that moved them to their own repository):

============  ===========  ========  ==========================================================
span          name         kind      required attributes
============  ===========  ========  ==========================================================
run           invoke_agent INTERNAL  gen_ai.operation.name, gen_ai.provider.name (the agent runs
              memfit                 in process: "invoke agent internal span")
model call    chat {model} CLIENT    gen_ai.operation.name, gen_ai.provider.name
tool call     execute_tool INTERNAL  gen_ai.operation.name, gen_ai.tool.name
              {tool}
iteration     iteration N  INTERNAL  (not a GenAI operation: memfit.iteration,
                                     openinference.span.kind CHAIN)
============  ===========  ========  ==========================================================

``error.type`` is conditionally required (set whenever the operation ended in
an error, with the span status ERROR); ``gen_ai.request.model``,
``gen_ai.agent.name`` and ``gen_ai.conversation.id`` are conditionally
required when available, and always are here.  Message content
(``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.tool.call.arguments`` / ``result``) is opt-in.  Phoenix ranks
OpenInference's ``openinference.span.kind`` above its own guess, so every span
carries it too.

This module imports nothing heavy: the mapping's vocabulary is plain data.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ..secrets import redact

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"
SPAN_KIND = "openinference.span.kind"

#: The agent's name in ``gen_ai.agent.name`` and in the root span's name.
AGENT = "memfit"

#: Required attributes per ``gen_ai.operation.name`` (None: the iteration span, not a GenAI
#: operation).  Tests validate every exported span against this table.
REQUIRED: dict[str | None, tuple[str, ...]] = {
    "invoke_agent": (OPERATION, PROVIDER, AGENT_NAME, CONVERSATION_ID, REQUEST_MODEL, SPAN_KIND),
    "chat": (OPERATION, PROVIDER, REQUEST_MODEL, CONVERSATION_ID, SPAN_KIND),
    "execute_tool": (OPERATION, TOOL_NAME, SPAN_KIND),
    None: ("memfit.iteration", SPAN_KIND),
}
#: OpenInference span kinds per operation.
OPENINFERENCE_KIND = {"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL", None: "CHAIN"}

#: litellm provider prefixes whose GenAI well-known ``gen_ai.provider.name`` is spelled otherwise.
_PROVIDERS = {
    "gemini": "gcp.gemini", "vertex_ai": "gcp.vertex_ai", "vertex_ai_beta": "gcp.vertex_ai",
    "bedrock": "aws.bedrock", "azure": "azure.ai.openai", "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai", "xai": "x_ai", "watsonx": "ibm.watsonx.ai", "moonshot": "moonshot_ai",
    "text-completion-openai": "openai", "cohere_chat": "cohere",
}
#: A bare model name (no ``provider/``) is routed by litellm from its prefix.
_BARE = (("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
         ("chatgpt", "openai"), ("claude", "anthropic"), ("gemini", "gcp.gemini"),
         ("command", "cohere"), ("mistral", "mistral_ai"), ("deepseek", "deepseek"))

#: The opt-in that the GenAI conventions name for message content.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Content and finding texts are cut to this many characters (the SDK's own
#: OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT applies on top).
MAX_TEXT = 4000


def provider_and_model(model: str | None) -> tuple[str, str]:
    """``gen_ai.provider.name`` and ``gen_ai.request.model`` of a litellm model string.

    >>> provider_and_model("openai/gpt-4o-mini")
    ('openai', 'gpt-4o-mini')
    >>> provider_and_model("memfit/spin-demo")
    ('memfit', 'spin-demo')
    """
    model = (model or "").strip()
    if "/" in model:
        prefix, name = model.split("/", 1)
        return _PROVIDERS.get(prefix, prefix), name
    for start, provider in _BARE:
        if model.startswith(start):
            return provider, model
    return "_OTHER", model or "unknown"


def capture_content(option: bool | None) -> bool:
    """Whether message content goes into spans: the ``content=`` option, else the conventions'
    environment opt-in.  Off unless someone said yes."""
    if option is not None:
        return bool(option)
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def text(value: Any, limit: int = MAX_TEXT) -> str:
    """A redacted, bounded string for an attribute."""
    string = redact(value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False))
    return string if len(string) <= limit else string[: limit - 1] + "…"


def same(value: Any, limit: int = MAX_TEXT) -> str:
    """A bounded string for an attribute, for text that was redacted already (a live run's
    events are redacted when they are emitted)."""
    string = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return string if len(string) <= limit else string[: limit - 1] + "…"


def flat(prefix: str, value: Any, out: dict[str, Any], depth: int = 0,
         clean: Callable[..., str] = text) -> dict[str, Any]:
    """Flatten a JSON-like value into OTel attribute values under ``prefix``.

    OTel attributes are scalars or homogeneous lists of scalars: a dict becomes dotted
    keys (one level: a dict inside it becomes JSON), lists of scalars stay lists, anything
    else becomes a JSON string; strings go through ``clean`` (redacted and bounded).  None
    and empty values are left out.  (Each attribute costs the SDK a validation pass:
    deeper flattening made events dearer for no query a backend can make of them.)
    """
    if value is None or value == "" or value == [] or value == {}:
        return out
    if isinstance(value, bool | int | float):
        out[prefix] = value
    elif isinstance(value, str):
        out[prefix] = clean(value)
    elif isinstance(value, dict) and depth < 1:
        for key, item in value.items():
            flat(f"{prefix}.{key}", item, out, depth + 1, clean)
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        out[prefix] = [clean(v, 500) for v in value[:50]]
    elif all(isinstance(v, bool) for v in value) if isinstance(value, list | tuple) else False:
        out[prefix] = list(value[:200])
    elif isinstance(value, list | tuple) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        out[prefix] = list(value[:200])
    else:
        out[prefix] = clean(value)
    return out


def messages(role: str, content: Any, finish_reason: str | None = None) -> str:
    """One message in the conventions' JSON shape (``parts`` of type text), redacted."""
    message: dict[str, Any] = {"role": role, "parts": [{"type": "text", "content": text(content)}]}
    if finish_reason:
        message["finish_reason"] = finish_reason
    return json.dumps([message], ensure_ascii=False)
