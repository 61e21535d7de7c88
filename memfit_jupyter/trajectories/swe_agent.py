"""SWE-agent ``.traj``: ``trajectory`` is a list of steps with ``action``, ``observation``,
``thought`` and the model's ``response``; ``history`` holds the conversation and
``info`` the exit status, submission and model stats.

SWE-agent's own commands (``open``, ``edit 10:12``, ``search_dir``, the
``str_replace_editor`` tool...) are named as the tool; anything else ran in bash.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .common import TraceBuilder, classify_command, format_error, text_of

FORMAT = "swe-agent"
_KINDS = {
    "open": "read", "goto": "read", "scroll_down": "read", "scroll_up": "read", "view": "read",
    "search_dir": "search", "search_file": "search", "find_file": "search", "find": "search",
    "edit": "edit", "insert": "edit", "create": "edit", "str_replace": "edit", "append": "edit",
    "submit": "submit", "exit_forfeit": "submit", "filemap": "read",
}
_EDITOR = ("str_replace_editor", "edit_anthropic")


def looks_like(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("trajectory"), list) and (
        "history" in data or "environment" in data or "info" in data)


def _tool_and_type(action: str) -> tuple[str, str, dict[str, Any]]:
    words = action.strip().split(None, 2)
    head = words[0] if words else ""
    params: dict[str, Any] = {"command": action.strip()}
    if head in _EDITOR and len(words) > 1:
        sub = words[1]
        return head, "read" if sub == "view" else _KINDS.get(sub, "edit"), params
    if head in _KINDS:
        return head, _KINDS[head], params
    return "bash", classify_command(action), params


def _modify(action: str) -> dict[str, Any] | None:
    m = re.match(r"\s*edit\s+(\d+):(\d+)\s*\n(.*?)(?:\nend_of_edit\s*)?$", action, re.S)
    if not m:
        return None
    return {"start_line": int(m.group(1)), "end_line": int(m.group(2)), "content": m.group(3)}


def _stats(info: dict[str, Any]) -> dict[str, Any]:
    stats = info.get("model_stats") or {}
    if isinstance(stats, str):  # some versions wrote the dict's repr
        try:
            stats = ast.literal_eval(stats)
        except (ValueError, SyntaxError):
            stats = {}
    return stats if isinstance(stats, dict) else {}


def _failed(observation: str) -> tuple[bool, str | None]:
    head = observation[:500]
    for marker in ("Traceback (most recent call last)", "command not found", "Your proposed edit has introduced",
                   "No such file or directory", "Error:", "ERROR:", "SyntaxError", "timed out"):
        if marker in head:
            return False, marker.rstrip(":")
    return True, None


def convert(data: dict[str, Any], *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    if not looks_like(data):
        raise format_error("not a SWE-agent trajectory (no trajectory list)")
    info = data.get("info") or {}
    history = [h for h in data.get("history") or [] if isinstance(h, dict)]
    task = next((text_of(h.get("content")) for h in history if h.get("role") == "user"), "")
    model = str((data.get("replay_config") or {}).get("agent", {}).get("model", {}).get("name", "")
                if isinstance(data.get("replay_config"), dict) else "")
    stats = _stats(info)
    b = TraceBuilder(FORMAT, task=task, model=model,
                     meta={"exit_status": info.get("exit_status"), "environment": data.get("environment"),
                           **(meta or {})})
    for step in data["trajectory"]:
        if not isinstance(step, dict):
            continue
        action = str(step.get("action") or "")
        observation = text_of(step.get("observation"))
        b.begin_step()
        b.model_call(step.get("response") if step.get("response") is not None else step.get("thought", ""),
                     model=model)
        tool, kind, params = _tool_and_type(action)
        data_: dict[str, Any] = {}
        modify = _modify(action)
        if modify is not None:
            data_["modify"] = modify
        if kind == "submit":
            data_["final"] = True
        ok, err = _failed(observation) if kind != "submit" else (True, None)
        try:
            duration = float(step.get("execution_time") or 0.0)
        except (TypeError, ValueError):
            duration = 0.0
        b.step(thought=text_of(step.get("thought")), action_type=kind if action else "invalid_reply", tool=tool,
               params=params, output=observation, ok=ok, error=err, duration_s=duration, data=data_,
               begin=False)
    b.calls = int(stats.get("api_calls") or b.calls)
    b.tokens = [int(stats.get("tokens_sent") or 0), int(stats.get("tokens_received") or 0)]
    b.cost = float(stats.get("instance_cost") or 0.0)
    exit_status = str(info.get("exit_status") or "")
    status = "done" if exit_status.lower().startswith("submitted") else "failed"
    return b.build(status=status, answer=info.get("submission") or None,
                   reason=f"SWE-agent exit status: {exit_status or 'unknown'}")
