"""A streamed litellm call: each piece of the reply goes to ``on_delta`` as it arrives.

The pieces are the reply's text, or in tools mode the call's arguments (which
are the reply).  The final response is rebuilt from the chunks by litellm's
``stream_chunk_builder``, so the usage (asked for with ``include_usage``),
the cost and the finish reason come out as from an unstreamed call.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any


def stream_completion(litellm: ModuleType, kwargs: dict[str, Any], on_delta: Callable[[str], None]) -> Any:
    """``litellm.completion(**kwargs, stream=True)``, fed to ``on_delta``; the assembled response."""
    chunks = []
    stream = litellm.completion(**kwargs, stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        chunks.append(chunk)
        for choice in getattr(chunk, "choices", None) or ():
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            piece = getattr(delta, "content", None) or ""
            for call in getattr(delta, "tool_calls", None) or ():
                function = getattr(call, "function", None)
                piece += getattr(function, "arguments", None) or ""
            if piece:
                on_delta(piece)
    response = litellm.stream_chunk_builder(chunks, messages=kwargs.get("messages"))
    if response is None:
        raise litellm.APIConnectionError(message="the stream ended before any reply",
                                         llm_provider="", model=kwargs.get("model", ""))
    return response
