"""OpenHands' StuckDetector, re-implemented over memfit traces for the side-by-side evaluation.

Written from reading ``openhands/controller/stuck.py`` in OpenHands/OpenHands at commit
d6fab190bfb55f07cc380993b45ec4f781706a92 (2025-11-15); no code was taken from it.  Its five
checks, run after every step on the history so far (headless mode: user messages ignored):

1. the last 4 actions equal and the last 4 observations equal;
2. the last 3 actions equal and the last 3 observations error observations;
3. monologue: the last 3 agent messages equal, with no observation between them;
4. the last 6 actions and 6 observations repeat with period 2 (A, B, A, B, A, B);
5. 10 context condensations with nothing else between two of them.

Equality follows OpenHands' event equality: an action equals another when every field does
(tool, parameters and the thought text); two command outputs are equal when command and exit
code are (their text is not compared); other observations when their content is.  Only an
OpenHands error observation counts as an error observation.  When it fires, OpenHands stops
the run, so each firing counts as a warning and as an ending.
"""

from __future__ import annotations

from typing import Any


def _history(trace: dict[str, Any]) -> list[tuple[str, Any, dict]]:
    """(kind, comparable value, event) for each action/observation, in order."""
    out: list[tuple[str, Any, dict]] = []
    for e in trace.get("events") or []:
        if e.get("type") == "action":
            if e.get("action_type") == "invalid_reply":
                continue  # not an event in OpenHands' stream
            params = tuple(sorted((k, str(v)) for k, v in (e.get("params") or {}).items()))
            kind = "message" if e.get("action_type") == "message" else "action"
            out.append((kind, (e.get("tool"), e.get("action_type"), params, e.get("thought") or ""), e))
        elif e.get("type") == "observation":
            data = e.get("data") or {}
            if data.get("no_observation"):
                continue
            if data.get("observation") in ("agent_condensation", "condense") or data.get("context_window"):
                out.append(("condensation", None, e))
                continue
            if data.get("observation") == "error":
                out.append(("error", ("error", e.get("output")), e))
                continue
            command = None
            if e.get("tool") in ("bash", "shell", "execute_bash"):
                command = out[-1][1][2] if out and out[-1][0] == "action" else None
            if command is not None:
                code = data.get("exit_code", 0 if e.get("ok") else 1)
                out.append(("observation", ("cmd", command, code), e))
            else:
                out.append(("observation", ("content", e.get("output")), e))
    return out


def _is_obs(kind: str) -> bool:
    return kind in ("observation", "error", "condensation")


def is_stuck(history: list[tuple[str, Any, dict]]) -> str | None:
    """The loop type OpenHands would report on this history, or None."""
    if len(history) < 3:
        return None
    actions = [v for k, v, _ in reversed(history) if k in ("action", "message")][:6]
    observations = [(k, v) for k, v, _ in reversed(history) if _is_obs(k)][:6]
    if len(actions) >= 4 and len(observations) >= 4 and len(set(map(repr, actions[:4]))) == 1 \
            and len(set(map(repr, observations[:4]))) == 1:
        return "repeating_action_observation"
    if len(actions) >= 3 and len(observations) >= 3 and len(set(map(repr, actions[:3]))) == 1 \
            and all(k == "error" for k, _ in observations[:3]):
        return "repeating_action_error"
    messages = [(i, v) for i, (k, v, _) in enumerate(history) if k == "message"]
    if len(messages) >= 3:
        last3 = messages[-3:]
        if len({repr(v) for _, v in last3}) == 1 and not any(
                _is_obs(k) for k, _, _ in history[last3[0][0] + 1:last3[-1][0]]):
            return "monologue"
    if len(history) >= 6 and len(actions) == 6 and len(observations) == 6:
        a, o = [repr(x) for x in actions], [repr(x) for x in observations]
        if a[0] == a[2] == a[4] and a[1] == a[3] == a[5] and o[0] == o[2] == o[4] and o[1] == o[3] == o[5]:
            return "repeating_action_observation_pattern"
    if len(history) >= 10:
        cond = [i for i, (k, _, _) in enumerate(history) if k == "condensation"][-10:]
        if len(cond) >= 10 and any(b == a + 1 for a, b in zip(cond, cond[1:], strict=False)):
            return "context_window_error"
    return None


def first_stuck(trace: dict[str, Any]) -> tuple[int, str] | None:
    """The iteration at which OpenHands would stop the run, and the loop type; None if never."""
    history = _history(trace)
    seen: list[tuple[str, Any, dict]] = []
    for item in history:
        seen.append(item)
        if _is_obs(item[0]) or item[0] == "message":
            found = is_stuck(seen)
            if found:
                return int(item[2].get("iteration") or 0), found
    return None
