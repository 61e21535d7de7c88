"""Prompt templates.  Every prompt the engine sends is built here.

An action prompt is laid out for providers' prompt caching: what stays the same from one
call to the next comes first (the system message: instructions, tools, working directory,
stable sections; then the task and the timeline, which only grows), and what changes every
iteration (``Extension.prompt_tail``: e.g. the cached reflections) comes last, so each call
repeats the previous call's prompt as its prefix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tools import Tool

ACTION_SYSTEM = """You are an agent working on a task, one action at a time.
Each turn, reply with exactly one JSON object and nothing else:
{{"thought": "<why this action>", "action_type": "<a short verb: explore, read, compute, edit, answer, ...>", "tool": "<tool name>", "params": {{...}}}}

Tools:
{tools}

Call finish with the answer when the task is done. The observations of your past actions follow the task.
Working directory: {workdir}"""


def action_system(tools: Iterable[Tool], workdir: str, sections: Iterable[str] = ()) -> str:
    text = ACTION_SYSTEM.format(tools="\n".join(t.describe() for t in tools), workdir=workdir)
    extra = [s for s in sections if s]
    if extra:
        text += "\n\n" + "\n\n".join(extra)
    return text


#: ``json.dumps(..., ensure_ascii=False)`` makes an encoder at every call: one, made once.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def action_message(thought: str, action_type: str, tool: str, params: dict[str, Any]) -> str:
    return _ENCODE({"thought": thought, "action_type": action_type, "tool": tool, "params": params})


def observation_message(tool: str, ok: bool, output: str, error: str | None) -> str:
    if ok:
        return f"Observation ({tool}):\n{output}" if output else f"Observation ({tool}): (no output)"
    body = f"Observation ({tool}) FAILED: {error}"
    return body + (f"\n{output}" if output else "")


def json_system(purpose: str, instructions: str, fields: str) -> str:
    """The system message of a non-action call: what to do and the JSON to reply with."""
    return f"{instructions}\n\nReply with one JSON object and nothing else, with the fields: {fields}."


def with_tail(messages: list[dict[str, str]], sections: Iterable[str]) -> list[dict[str, str]]:
    """``messages`` with the changing ``sections`` at the end: joined to the last message when it
    is the person's (roles keep alternating, as the timeline keeps them), else as a new one."""
    extra = [s for s in sections if s]
    if not extra:
        return messages
    text = "\n\n".join(extra)
    out = list(messages)
    if out and out[-1]["role"] == "user":
        out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + text}
    else:
        out.append({"role": "user", "content": text})
    return out
