"""Cheap token estimates, used before a call to cap it (and by the scripted models to bill)."""

from __future__ import annotations

from typing import Any


def estimate_tokens(text: str) -> int:
    """About four characters a token, rounded up: what the scripted models bill by."""
    return max(1, (len(text) + 3) // 4)


def messages_text(messages: list[dict[str, Any]]) -> str:
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return "\n".join(parts)


def estimate_message_tokens(messages: list[dict[str, Any]]) -> int:
    """``estimate_tokens(messages_text(messages))`` without building the joined string."""
    chars = len(messages) - 1 if messages else 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(str(c.get("text", ""))) for c in content if isinstance(c, dict))
    return max(1, (chars + 3) // 4)
