"""Prompt templates.  Every prompt the engine sends is built here."""

from __future__ import annotations

import json
from collections.abc import Iterable

ACTION_SYSTEM = """You are an agent working on a task, one action at a time.
Each turn, reply with exactly one JSON object and nothing else:
{{"thought": "<why this action>", "action_type": "<a short verb: explore, read, compute, edit, answer, ...>", "tool": "<tool name>", "params": {{...}}}}

Tools:
{tools}

Call finish with the answer when the task is done. The observations of your past actions follow the task.
Working directory: {workdir}"""


def action_system(tools: Iterable, workdir: str, sections: Iterable[str] = ()) -> str:
    text = ACTION_SYSTEM.format(tools="\n".join(t.describe() for t in tools), workdir=workdir)
    extra = [s for s in sections if s]
    if extra:
        text += "\n\n" + "\n\n".join(extra)
    return text


def action_message(thought: str, action_type: str, tool: str, params: dict) -> str:
    return json.dumps({"thought": thought, "action_type": action_type, "tool": tool, "params": params},
                      ensure_ascii=False)


def observation_message(tool: str, ok: bool, output: str, error: str | None) -> str:
    if ok:
        return f"Observation ({tool}):\n{output}" if output else f"Observation ({tool}): (no output)"
    body = f"Observation ({tool}) FAILED: {error}"
    return body + (f"\n{output}" if output else "")


def json_system(purpose: str, instructions: str, fields: str) -> str:
    """The system message of a non-action call: what to do and the JSON to reply with."""
    return f"{instructions}\n\nReply with one JSON object and nothing else, with the fields: {fields}."
