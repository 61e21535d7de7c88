"""What every importer shares: the trace it builds and the error it raises.

An importer reads another agent's record of a run and writes the serialised
memfit trace (``{"version": 1, ..., "events": [...]}``, the same schema as
``Run.trace()``) through ``TraceBuilder``.  Each step of the other agent
becomes an ``action`` event and an ``observation`` event; a model reply, where
the source keeps one, becomes a ``model_call`` event before them.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ..errors import MemfitError
from ..tools import command_program as command_program

TRACE_VERSION = 1

#: The formats ``load_trajectory`` reads, as named in errors and in ``trace["source"]["format"]``.
FORMAT_NAMES = {
    "mini-swe-agent": "mini-swe-agent .traj.json (1.x text actions, 2.x tool calls)",
    "swe-agent": "SWE-agent .traj",
    "openhands": "OpenHands event-stream JSON",
    "otlp": "OpenTelemetry GenAI / OpenInference spans as OTLP/JSON",
    "memfit": "a memfit trace",
}


class TrajectoryFormatError(MemfitError, ValueError):
    """The input is not a trajectory in any format that ``load_trajectory`` reads."""


def format_error(what: str) -> TrajectoryFormatError:
    """One line: what is wrong, and the formats that are read."""
    names = "; ".join(FORMAT_NAMES.values())
    return TrajectoryFormatError(f"{what}; load_trajectory reads: {names}")


def object_of(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a field some records leave out)."""
    return value if isinstance(value, dict) else {}


def text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") or part.get("content") or ""))
            else:
                parts.append(str(part))
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        return str(content.get("text") or content.get("content") or "")
    return str(content)


def tool_call(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The name and arguments of an OpenAI-style tool call.  Arguments that are not a JSON
    object (bad JSON, a list) are kept whole under ``arguments`` rather than lost."""
    fn = call.get("function") or {}
    raw = fn.get("arguments")
    try:
        args = json.loads(raw or "{}") if isinstance(raw, str) or raw is None else raw
    except ValueError:
        args = raw
    return str(fn.get("name") or ""), args if isinstance(args, dict) else {"arguments": args}


# --- what a shell command does ----------------------------------------------------------
# Imported agents mostly have one tool (bash).  The action type is derived from the
# program the command runs, so that the same verb means the same thing across sources.
_READ = {"cat", "head", "tail", "less", "more", "nl", "wc", "stat", "file", "diff", "git"}
_SEARCH = {"grep", "egrep", "rg", "ag", "find", "locate", "which", "ack", "fd"}
_LIST = {"ls", "tree", "pwd", "du"}
_RUN = {"python", "python3", "python2", "node", "bash", "sh", "make", "./", "java", "go", "cargo", "npm"}
_TEST = {"pytest", "tox", "nosetests"}
def classify_command(command: str) -> str:
    """An action type for a shell command: read, search, list, edit, test, run, submit or shell."""
    cmd = command or ""
    if "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in cmd or "MINI_SWE_AGENT_FINAL_OUTPUT" in cmd:
        return "submit"
    program = command_program(cmd)
    if program in ("sed", "perl") and re.search(r"(^|\s)-i", cmd) or program in ("patch", "applypatch"):
        return "edit"
    if re.search(r"(cat|tee)\s+(-a\s+)?>+\s*\S|>\s*[\w./-]+\.\w+\s*<<|<<\s*'?\"?EOF", cmd) and program in (
            "cat", "tee", "python", "python3", "printf", "echo"):
        return "edit"
    if program in ("python", "python3") and re.search(r"\.write(_text)?\(|open\([^)]*['\"]w", cmd):
        return "edit"
    if program in _TEST or re.search(r"-m\s+pytest|runtests\.py|manage\.py test|unittest", cmd):
        return "test"
    if program in ("sed", "awk") or program in _READ:
        return "read"
    if program in _SEARCH:
        return "search"
    if program in _LIST:
        return "list"
    if program in _RUN or program.startswith("python"):
        return "run"
    return "shell"


def exit_code_of(output: str) -> int | None:
    """The ``<returncode>N</returncode>`` (mini-swe-agent) in an observation, if any."""
    m = re.search(r"<returncode>\s*(-?\d+)\s*</returncode>", output or "")
    return int(m.group(1)) if m else None


class TraceBuilder:
    """Collects events and writes the serialised trace; nothing is returned half-built."""

    def __init__(self, fmt: str, *, task: str = "", model: str = "", run_id: str | None = None,
                 meta: dict[str, Any] | None = None):
        self.fmt = fmt
        self.task = task
        self.model = model
        self.run_id = run_id
        self.meta = dict(meta or {})
        self.events: list[dict[str, Any]] = []
        self.iteration = 0
        self.ts = 0.0
        self.tokens = [0, 0]
        self.cost = 0.0
        self.calls = 0

    def _event(self, type: str, **data: Any) -> dict[str, Any]:
        event = {"type": type, "iteration": self.iteration, "ts": round(self.ts, 6), **data}
        self.events.append(event)
        return event

    def note(self, text: str) -> None:
        self._event("note", text=text)

    def model_call(self, reply: Any, *, model: str | None = None, prompt_tokens: int = 0,
                   completion_tokens: int = 0, cost_usd: float = 0.0, latency_s: float = 0.0,
                   ok: bool = True, error: str | None = None, purpose: str = "action",
                   finish_reason: str | None = None) -> None:
        """One model reply, as the source recorded it (the reply is kept verbatim); ``finish_reason``
        is why its generation stopped, where the source says ("length": cut off at its cap)."""
        self.calls += 1
        self.tokens[0] += int(prompt_tokens or 0)
        self.tokens[1] += int(completion_tokens or 0)
        self.cost += float(cost_usd or 0.0)
        self._event("model_call", purpose=purpose, model=model or self.model, tier="primary", attempt=1, ok=ok,
                    prompt_tokens=int(prompt_tokens or 0), completion_tokens=int(completion_tokens or 0),
                    cost_usd=float(cost_usd or 0.0), latency_s=float(latency_s or 0.0), max_tokens=None,
                    timeout_s=None, reply=reply, error=error, error_kind=None if ok else "error",
                    **({"finish_reason": finish_reason} if finish_reason else {}))

    def step(self, *, thought: str, action_type: str, tool: str, params: dict[str, Any], output: str = "",
             ok: bool = True, error: str | None = None, duration_s: float = 0.0,
             data: dict[str, Any] | None = None, begin: bool = True) -> None:
        """One action and what came of it.  ``begin=False`` when ``model_call`` already opened it."""
        if begin:
            self.begin_step()
        self._event("action", thought=thought or "", action_type=action_type or "", tool=tool or "",
                    params=dict(params or {}), reflection=None)
        self.ts += float(duration_s or 0.0)
        self._event("observation", tool=tool or "", ok=bool(ok), output=output or "",
                    error=None if ok else (error or "error"), duration_s=float(duration_s or 0.0),
                    data=dict(data or {}))

    def begin_step(self) -> None:
        self.iteration += 1
        self.ts += 0.001

    def build(self, *, status: str, answer: str | None = None, reason: str = "",
              started_at: str | None = None) -> dict[str, Any]:
        if self.iteration == 0:
            raise format_error(f"no steps found in this {FORMAT_NAMES.get(self.fmt, self.fmt)} input")
        start = {"type": "run_start", "iteration": 0, "ts": 0.0, "task": self.task,
                 "tiers": {"primary": self.model, "fast": "", "fallback": ""},
                 "settings": {"model": self.model, "imported": self.fmt}, "tools": [], "extensions": []}
        self.ts += 0.001
        end = {"type": "run_end", "iteration": self.iteration, "ts": round(self.ts, 6), "status": status,
               "answer": answer, "reason": reason}
        events = [start, *self.events, end]
        run_id = self.run_id or hashlib.sha1(json.dumps(events[:8], sort_keys=True, default=str)
                                             .encode()).hexdigest()[:12]
        return {
            "version": TRACE_VERSION, "run_id": run_id, "task": self.task, "model": self.model,
            "tiers": {"primary": self.model, "fast": "", "fallback": ""}, "status": status, "answer": answer,
            "reason": reason, "started_at": started_at, "settings": {"model": self.model, "imported": self.fmt},
            "workdir": "", "limits": {},
            "totals": {"cost_usd": self.cost,
                       "tokens": {"prompt": self.tokens[0], "completion": self.tokens[1],
                                  "total": self.tokens[0] + self.tokens[1]},
                       "calls": self.calls, "iterations": self.iteration, "recursive_calls": 0,
                       "duration_s": round(self.ts, 6)},
            "source": {"format": self.fmt, **self.meta},
            "events": events,
        }
