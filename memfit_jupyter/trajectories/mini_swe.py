"""mini-swe-agent ``.traj.json``: 1.x (one bash block in the reply's text) and 2.x (tool calls).

Both keep the whole conversation in ``messages``: the system prompt, the task
(the first user message), then per step an assistant reply and the
observation (a ``user`` message in 1.x, ``tool`` messages in 2.x).  A reply
that breaks the format gets a ``user`` message with the complaint instead of
an observation: it is imported as an ``invalid_reply`` step, as memfit
records an unusable reply.  1.x keeps the rejected reply before its complaint;
2.x raises the format error while parsing the reply, so only the complaint is
stored ("No tool calls found in the response...", ``extra.interrupt_type``
``FormatError``), often several in a row: each is one ``invalid_reply`` step
with the model call that produced it (its reply unknown, ``None``), so that a
streak is seen as a live memfit run would see it.  ``info.exit_status`` says
how the run ended.
"""

from __future__ import annotations

import re
from typing import Any

from .common import (
    TraceBuilder,
    classify_command,
    exit_code_of,
    format_error,
    object_of,
    text_of,
    tool_call,
)

FORMAT = "mini-swe-agent"
#: The action block mini-swe-agent 1.x accepts (its default action pattern: a bash fence).
_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.S)
#: What mini-swe-agent says to a reply it could not use (both versions).
_FORMAT_COMPLAINTS = ("EXACTLY ONE", "No tool calls found", "format", "FormatError")
#: The complaints of a format error that mini-swe-agent stores without the reply (2.x: the
#: tool-call parser's and the text parser's errors); narrower than ``_FORMAT_COMPLAINTS``
#: because nothing before such a message says a reply was rejected.
_REJECTIONS = ("No tool calls found in the response", "EXACTLY ONE action", "Expected exactly 1 action",
               "Error parsing tool call arguments", "Missing 'command' argument", "Unknown tool '")


def looks_like(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("messages"), list)
            and (str(data.get("trajectory_format", "")).startswith("mini-swe-agent")
                 or ("info" in data and any(isinstance(m, dict) and m.get("role") == "system"
                                            for m in data["messages"][:2]))))


def _usage(message: dict[str, Any]) -> tuple[int, int, str]:
    response = (message.get("extra") or {}).get("response") or {}
    usage = response.get("usage") or {}
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), str(
        response.get("model") or "")


def _thought(text: str) -> str:
    text = _BLOCK.sub("", text or "").strip()
    return re.sub(r"^THOUGHT:\s*", "", text).strip()


def _observation(text: str) -> tuple[str, bool, str | None, dict[str, Any]]:
    code = exit_code_of(text)
    m = re.search(r"<output>\n?(.*?)</output>", text, re.S)
    out = m.group(1) if m else text
    exc = re.search(r"<exception>(.*?)</exception>", text, re.S)
    if re.search(r"timed out|TimeoutExpired", text[:400]) and code is None:
        return out, False, "timed out", {"timeout": True}
    data: dict[str, Any] = {} if code is None else {"exit_code": code}
    if exc:
        data["exception"] = exc.group(1).strip()
    ok = code in (None, 0) and not exc
    return out, ok, None if ok else f"exit code {code}" if code is not None else "exception", data


def _is_complaint(message: dict[str, Any]) -> bool:
    extra = message.get("extra") or {}
    if extra.get("interrupt_type") == "FormatError":
        return True
    text = text_of(message.get("content"))
    return "<returncode>" not in text and any(c in text[:300] for c in _FORMAT_COMPLAINTS)


def _is_rejection(message: dict[str, Any]) -> bool:
    """A ``user`` message that stands for a reply mini-swe-agent rejected and did not store."""
    if message.get("role") != "user":
        return False
    if (message.get("extra") or {}).get("interrupt_type") == "FormatError":
        return True
    text = text_of(message.get("content"))
    return "<returncode>" not in text and any(r in text[:600] for r in _REJECTIONS)


def _rejected_step(b: TraceBuilder, message: dict[str, Any], model: str) -> None:
    """One unusable reply known only by its complaint: a model call and an ``invalid_reply`` step."""
    extra = message.get("extra") or {}
    reply = extra.get("model_response")  # 2.x's text parser keeps the rejected text here
    complaint = text_of(message.get("content"))
    b.begin_step()
    b.model_call(reply if isinstance(reply, str) else None, model=model)
    b.step(thought=_thought(reply) if isinstance(reply, str) else "", action_type="invalid_reply", tool="",
           params={}, output=complaint, ok=False, error=_first_line(complaint), begin=False)


def _first_line(text: str) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line[:200] or "the reply was rejected"


def convert(data: dict[str, Any], *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    if not looks_like(data):
        raise format_error("not a mini-swe-agent trajectory (no messages with a system prompt)")
    info = data.get("info") or {}
    config = object_of(info.get("config"))
    model = str((config.get("model") or {}).get("model_name") or "")
    messages = [m for m in data["messages"] if isinstance(m, dict)]
    task = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    b = TraceBuilder(FORMAT, task=task, model=model, run_id=data.get("instance_id"),
                     meta={"version": str(data.get("trajectory_format") or "mini-swe-agent-1"),
                           "instance_id": data.get("instance_id"), "exit_status": info.get("exit_status"),
                           "mini_version": info.get("mini_version"), **(meta or {})})
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages))
    i = first_user + 1
    while i < len(messages):
        msg = messages[i]
        if msg.get("role") != "assistant":
            if _is_rejection(msg):  # a reply mini-swe-agent rejected without storing it (2.x)
                _rejected_step(b, msg, model)
            i += 1
            continue
        text = text_of(msg.get("content"))
        pt, ct, reply_model = _usage(msg)
        calls = msg.get("tool_calls") or []
        reply: Any = text if not calls else {"content": text or None, "tool_calls": calls}
        b.begin_step()
        b.model_call(reply, model=reply_model or model, prompt_tokens=pt, completion_tokens=ct)
        # the messages that answer this reply: tool results, or one user message
        j = i + 1
        answers: list[dict[str, Any]] = []
        while j < len(messages) and messages[j].get("role") in ("tool", "user", "exit"):
            nxt = messages[j]
            if calls and nxt.get("role") != "tool":
                # a complaint answers these calls only when one of them has no result; otherwise it
                # is the next reply's rejection, and the main loop takes it
                answered = {m.get("tool_call_id") for m in answers}
                if not (nxt.get("role") == "user" and _is_complaint(nxt)
                        and any(c.get("id") not in answered for c in calls)):
                    break
            answers.append(nxt)
            j += 1
            if answers[-1].get("role") in ("user", "exit"):
                break
        if calls:
            by_id = {m.get("tool_call_id"): m for m in answers if m.get("role") == "tool"}
            complaint = next((m for m in answers if m.get("role") == "user" and _is_complaint(m)), None)
            for n, call in enumerate(calls):
                name, args = tool_call(call)
                command = str(args.get("command", ""))
                result = by_id.get(call.get("id"))
                out, ok, err, extra = _observation(text_of(result.get("content")) if result else "")
                if result is None and complaint is not None:
                    out, ok, err, extra = text_of(complaint.get("content")), False, "format error", {}
                if n:
                    b.begin_step()
                b.step(thought=_thought(text), action_type=classify_command(command) if command else "tool",
                       tool=name or "bash", params=args,
                       output=out, ok=ok, error=err, data=extra, begin=False)
        else:
            blocks = _BLOCK.findall(text)
            answer = answers[-1] if answers else None
            answer_text = text_of(answer.get("content")) if answer else ""
            if len(blocks) != 1 or (answer is not None and _is_complaint(answer) and answer.get("role") == "user"):
                b.step(thought=_thought(text), action_type="invalid_reply", tool="", params={},
                       output=answer_text, ok=False, error="the reply did not hold exactly one bash block",
                       begin=False)
            else:
                command = blocks[0].strip()
                final = (answer is not None and answer.get("role") == "exit") or (
                    classify_command(command) == "submit" and "<returncode>" not in answer_text)
                if final:
                    # the final submission: mini-swe-agent ends the run instead of answering
                    out, ok, err, extra = answer_text, True, None, {"final": True}
                else:
                    out, ok, err, extra = _observation(answer_text)
                b.step(thought=_thought(text), action_type=classify_command(command), tool="bash",
                       params={"command": command}, output=out, ok=ok, error=err, data=extra, begin=False)
        i = j
    exit_status = str(info.get("exit_status") or "")
    status = "done" if exit_status.lower() == "submitted" else "failed"
    return b.build(status=status, answer=info.get("submission") or None,
                   reason=f"mini-swe-agent exit status: {exit_status or 'unknown'}")
