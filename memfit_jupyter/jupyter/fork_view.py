"""The run view's "Fork from here", kernel half: what the form asks for, and the tree of forks.

The front end's form sends ``{"action": "fork", "fork": ForkRequest}`` (``protocol.py``): the step,
and the changes there as the person typed them.  ``request_changes`` turns that into the
arguments of ``run.fork(at, **changes)`` or says in one line why it cannot (``ForkError``), before
anything is made.  ``ForkTree.entries`` lists a run's forks for the view's tree: each child's step,
changes, outcome, cost, the live widget that streams it, and ``compare(parent, child)`` without
the two runs; the parent's saved output keeps the list with each child's trace
(``RunOutputMeta.forks``), so the tree reopens with no kernel.
"""

from __future__ import annotations

import json
from typing import Any

from ..fork import ForkError, fork_summary
from ..secrets import redact

#: The form's text fields, passed on as they are (stripped; empty ones left out).
TEXT_FIELDS = ("guidance", "observation", "model", "reflection")
#: The form's whole-number settings.
NUMBER_FIELDS = ("spin_threshold", "max_iterations")
#: Everything a ``ForkRequest`` may hold.
REQUEST_FIELDS = ("at", "tool", "params", *TEXT_FIELDS, *NUMBER_FIELDS)


def request_changes(request: Any) -> tuple[int, dict[str, Any]]:
    """The step and the ``run.fork`` changes a ``ForkRequest`` asks for.

    >>> request_changes({"at": 2, "guidance": " read it once ", "tool": "", "params": ""})
    (2, {'guidance': 'read it once'})
    >>> request_changes({"at": 2, "tool": "read_file", "params": '{"path": "data.txt"}'})
    (2, {'action': {'tool': 'read_file', 'params': {'path': 'data.txt'}}})
    """
    if not isinstance(request, dict):
        raise ForkError("a fork request is a dict with the step 'at' and the changes")
    unknown = sorted(set(request) - set(REQUEST_FIELDS))
    if unknown:
        raise ForkError(f"unknown field(s) {', '.join(unknown)} in the fork request; known: {', '.join(REQUEST_FIELDS)}")
    at = request.get("at")
    if isinstance(at, bool) or not isinstance(at, int):
        raise ForkError(f"the step to fork at must be a whole number, got {at!r}")
    changes: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = request.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ForkError(f"{name} must be text, got {type(value).__name__}")
        if value.strip():
            changes[name] = value.strip()
    for name in NUMBER_FIELDS:
        value = request.get(name)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 1:
            raise ForkError(f"{name} must be a whole number of at least 1, got {value!r}")
        changes[name] = int(value)
    action = _action(request.get("tool"), request.get("params"))
    if action is not None:
        changes["action"] = action
    return at, changes


def _action(tool: Any, params: Any) -> dict[str, Any] | None:
    tool = tool.strip() if isinstance(tool, str) else tool
    text = params.strip() if isinstance(params, str) else params
    if not tool and not text:
        return None
    if not isinstance(tool, str) or not tool:
        raise ForkError("the action's parameters need a tool to go with: choose the tool")
    if text is None or text == "":
        return {"tool": tool, "params": {}}
    if not isinstance(text, str):
        raise ForkError(f"the action's parameters must be JSON text, got {type(text).__name__}")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ForkError(f"the action's parameters are not JSON ({exc}): write them as "
                        '{"path": "data.txt"}') from None
    if not isinstance(value, dict):
        raise ForkError(f"the action's parameters must be a JSON object such as {{\"path\": \"data.txt\"}}, "
                        f"got {type(value).__name__}")
    return {"tool": tool, "params": value}


def first_line(exc: BaseException) -> str:
    """An exception as the one line the view shows (redacted: it may quote what was typed, and the
    view's controls are synced to the page and saved with the notebook)."""
    text = str(exc).strip()
    return redact(text.splitlines()[0]) if text else type(exc).__name__


class ForkTree:
    """A run's forks as the view's tree, with each comparison worked out once per change of either
    run (a comparison reads both traces whole)."""

    def __init__(self, run: Any):
        self.run = run
        self._compared: dict[str, tuple[tuple[int, int], dict[str, Any] | None]] = {}

    def entries(self, widgets: dict[str, str], *, traces: bool = False) -> list[dict[str, Any]]:
        """One ``ForkEntry`` per fork of the run (``SavedFork`` with ``traces``); ``widgets``
        maps a child's run id to the id of the live widget that streams it."""
        children = {child.id: child for child in self.run.forks}
        parent_trace: dict[str, Any] | None = None
        out = []
        for summary in fork_summary(self.run):
            child = children[summary["run"]]
            child_trace = child.trace() if traces else None
            key = (len(self.run.events), len(child.events))
            known = self._compared.get(child.id)
            if known is None or known[0] != key:
                if parent_trace is None:
                    parent_trace = self.run.trace()
                known = (key, _comparison(parent_trace, child_trace or child.trace(), int(summary["at"] or 0)))
                self._compared[child.id] = known
            entry = {"run": str(summary["run"]), "at": int(summary["at"] or 0), "changes": dict(summary["changes"]),
                     "status": str(summary["status"]),
                     "answer": None if summary["answer"] is None else str(summary["answer"]),
                     "cost_usd": float(summary["cost_usd"] or 0.0), "iterations": int(summary["iterations"] or 0),
                     "exact": bool(summary["exact"]), "live_widget": widgets.get(child.id),
                     "compare": known[1]}
            if traces:
                entry["trace"] = child_trace
            out.append(_jsonable(entry))
        return out


def _comparison(parent: dict[str, Any], child: dict[str, Any], at: int) -> dict[str, Any] | None:
    from ..study.compare import compare

    try:
        payload = compare(parent, child, labels=("this run", f"fork at step {at}")).payload()
    except Exception:  # a trace compare cannot read: the tree still lists the fork
        return None
    return {"labels": payload["labels"], "rows": payload["rows"], "diverged": payload["diverged"]}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
