"""OpenHands event stream JSON (a list of events, or ``{"events"|"history": [...]}``), and the
LLM completion logs that OpenHands' published SWE-bench runs keep.

An action event has ``action`` and ``args``; an observation has
``observation``, ``content``, ``extras`` and ``cause`` (the id of its action).
The first user message is the task.  An agent ``message`` with no observation
is a step of its own (what OpenHands' monologue check looks at); a context
condensation is a ``condense`` step.  Where an action carries
``tool_call_metadata.model_response``, that reply becomes a ``model_call``.
"""

from __future__ import annotations

import re
from typing import Any

from .common import TraceBuilder, classify_command, format_error, object_of, text_of, tool_call

FORMAT = "openhands"
_SKIP_ACTIONS = {"system", "change_agent_state", "null", "recall", "condensation_request"}
_SKIP_OBS = {"agent_state_changed", "null", "recall", "user_rejected"}
_TOOLS = {"run": "bash", "run_ipython": "ipython", "read": "read", "write": "write", "edit": "edit",
          "browse": "browser", "browse_interactive": "browser", "mcp": "mcp", "delegate": "delegate"}
_KINDS = {"read": "read", "write": "edit", "edit": "edit", "browse": "browse", "browse_interactive": "browse",
          "run_ipython": "run", "delegate": "delegate", "think": "think", "message": "message",
          "finish": "submit", "condensation": "condense", "mcp": "tool"}


def events_of(data: Any) -> list[dict[str, Any]] | None:
    if isinstance(data, dict):
        for key in ("events", "history"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
    # OpenHands events name their source and carry args (actions) or extras/cause (observations)
    if isinstance(data, list) and data and all(isinstance(e, dict) for e in data) and any(
            ("action" in e or "observation" in e) and ("source" in e or "args" in e or "extras" in e)
            for e in data[:20]):
        return data
    return None


def looks_like(data: Any) -> bool:
    return events_of(data) is not None or is_completion_log(data)


def _reply(event: dict[str, Any]) -> tuple[Any, int, int, str] | None:
    meta = event.get("tool_call_metadata") or {}
    response = meta.get("model_response") if isinstance(meta, dict) else None
    if not isinstance(response, dict):
        return None
    choices = response.get("choices") or [{}]
    message = (choices[0] or {}).get("message") if isinstance(choices[0], dict) else None
    usage = response.get("usage") or {}
    return (message if message is not None else response, int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0), str(response.get("model") or ""))


def _params(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    keep = {k: v for k, v in args.items() if k not in ("thought", "security_risk", "confirmation_state",
                                                      "hidden", "is_confirmed", "timeout", "blocking",
                                                      "impl_source", "image_urls", "wait_for_response")}
    return keep


def convert(data: Any, *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    if is_completion_log(data):
        return convert_completion_log(data, meta=meta)
    events = events_of(data)
    if events is None:
        raise format_error("not an OpenHands event stream (no events with action or observation)")
    by_cause: dict[str, dict[str, Any]] = {}
    for e in events:
        if "observation" in e and e.get("cause") is not None:
            by_cause.setdefault(str(e["cause"]), e)
    task = next((text_of((e.get("args") or {}).get("content") or e.get("message")) for e in events
                 if e.get("action") == "message" and e.get("source") == "user"), "")
    b = TraceBuilder(FORMAT, task=task, meta=dict(meta or {}))
    seen_task = False
    used: set[int] = set()
    for e in events:
        if "action" in e:
            kind = str(e.get("action"))
            args = object_of(e.get("args"))
            if kind in _SKIP_ACTIONS:
                continue
            if e.get("source") == "user":
                if kind == "message" and not seen_task:
                    seen_task = True
                elif kind == "message":
                    b.note(f"user: {text_of(args.get('content') or e.get('message'))}")
                continue
            b.begin_step()
            reply = _reply(e)
            if reply is not None:
                message, pt, ct, model = reply
                b.model_call(message, model=model, prompt_tokens=pt, completion_tokens=ct)
                b.model = b.model or model
            obs = by_cause.get(str(e.get("id")))
            if obs is not None:
                used.add(id(obs))
            thought = text_of(args.get("thought") or (e.get("message") if kind in ("message", "think") else ""))
            if kind == "message":
                thought = text_of(args.get("content") or e.get("message"))
            action_type = classify_command(str(args.get("command", ""))) if kind == "run" else _KINDS.get(kind, kind)
            params = _params(kind, args)
            output, ok, err, extra = "", True, None, {}
            if obs is not None:
                output = text_of(obs.get("content"))
                extras = object_of(obs.get("extras"))
                code = (extras.get("metadata") or {}).get("exit_code") if isinstance(extras.get("metadata"), dict) \
                    else extras.get("exit_code")
                if code is not None:
                    extra["exit_code"] = code
                extra["observation"] = obs.get("observation")
                if obs.get("observation") == "error":
                    ok, err = False, "error observation"
                elif code not in (None, 0, -1):
                    ok, err = False, f"exit code {code}"
            elif kind in ("message", "think"):
                extra["no_observation"] = True
            if kind == "finish":
                extra["final"] = True
                output = output or text_of(args.get("final_thought") or args.get("outputs") or "")
            b.step(thought=thought, action_type=action_type, tool=_TOOLS.get(kind, ""), params=params,
                   output=output, ok=ok, error=err, data=extra, begin=False)
        elif "observation" in e and id(e) not in used:
            kind = str(e.get("observation"))
            if kind in _SKIP_OBS:
                continue
            if kind in ("agent_condensation", "condense"):
                b.step(thought="", action_type="condense", tool="", params={}, output=text_of(e.get("content")),
                       data={"observation": kind, "context_window": True})
            elif kind == "error":
                b.step(thought="", action_type="error", tool="", params={}, output=text_of(e.get("content")),
                       ok=False, error="error observation", data={"observation": kind})
    finished = any(e.get("action") == "finish" for e in events)
    last_state = next((str((e.get("extras") or {}).get("agent_state", "")) for e in reversed(events)
                       if e.get("observation") == "agent_state_changed"), "")
    status = "done" if finished else "failed"
    return b.build(status=status, reason=f"OpenHands: {'finished' if finished else last_state or 'no finish'}")


# --- OpenHands LLM completion logs ----------------------------------------------------------
# OpenHands' published SWE-bench runs keep, per instance, the last completion call:
# ``{"messages" | "fncall_messages": [...], "response" | "fncall_response": {...}, "kwargs"}``.
# The conversation holds every step (assistant tool calls, tool results) up to that call.
_EXIT = re.compile(r"\[Command finished with exit code (-?\d+)\]|\[The command completed with exit code (-?\d+)\.\]")


def is_completion_log(data: Any) -> bool:
    return isinstance(data, dict) and (isinstance(data.get("fncall_messages"), list) or (
        isinstance(data.get("messages"), list) and "response" in data and "kwargs" in data))


def _editor_kind(args: dict[str, Any]) -> str:
    command = str(args.get("command", ""))
    return "read" if command == "view" else "edit" if command in ("create", "str_replace", "insert",
                                                                   "undo_edit") else "tool"


def convert_completion_log(data: dict[str, Any], *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    messages = [m for m in (data.get("fncall_messages") or data.get("messages") or []) if isinstance(m, dict)]
    task = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    b = TraceBuilder(FORMAT, task=task, meta={"log": "llm-completion", **(meta or {})})
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    for m in messages:
        if m.get("role") != "assistant":
            continue
        calls = m.get("tool_calls") or []
        thought = text_of(m.get("content"))
        b.begin_step()
        b.model_call({"content": m.get("content"), "tool_calls": calls} if calls else thought)
        if not calls:
            b.step(thought=thought, action_type="message", tool="", params={}, data={"no_observation": True},
                   begin=False)
            continue
        for n, call in enumerate(calls):
            name, args = tool_call(call)
            result = results.get(call.get("id"))
            output = text_of(result.get("content")) if result else ""
            m_exit = _EXIT.search(output)
            code = int(next(g for g in m_exit.groups() if g is not None)) if m_exit else None
            ok = not (code not in (None, 0) or output.startswith(("ERROR:", "Error:")))
            if name == "execute_bash":
                kind, tool = classify_command(str(args.get("command", ""))), "bash"
            elif name == "str_replace_editor":
                kind, tool = _editor_kind(args), "str_replace_editor"
            elif name == "finish":
                kind, tool = "submit", ""
            else:
                kind, tool = _KINDS.get(name, "tool"), name
            extra: dict[str, Any] = {} if code is None else {"exit_code": code}
            if kind == "submit":
                extra["final"] = True
            if n:
                b.begin_step()
            b.step(thought=thought, action_type=kind, tool=tool, params=args, output=output, ok=ok,
                   error=None if ok else (f"exit code {code}" if code is not None else "error"), data=extra,
                   begin=False)
    response = data.get("fncall_response") or data.get("response")
    if isinstance(response, dict):
        choice = (response.get("choices") or [{}])[0]
        b.model_call(choice.get("message") if isinstance(choice, dict) else response, model=str(
            response.get("model") or ""))
    finished = any(tc.get("function", {}).get("name") == "finish" for m in messages for tc in m.get("tool_calls") or [])
    return b.build(status="done" if finished else "failed",
                   reason="OpenHands: finished" if finished else "OpenHands: the log ends without finish")
