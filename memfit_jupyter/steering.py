"""A person's hold on a run between its steps: the approval gate and the paused clock.

The run's tool policy (``tool_policy.ToolPolicy``) says which tool calls need a person's
approval: by default the unconfined ones (shell, python) when the model is a real one, none
when it is scripted.  The agent's ``approve`` callback decides each of them: an answer
(``True``/``False``, or ``(ok, reason)``) decides at once; ``None`` means "ask the person": the
call waits in the gate (an ``Approval`` event, state ``waiting``), the run pauses, and
``Run.approve()`` decides it before the next step carries it out or records its rejection.  A
run without a callback has no way to ask: the call is refused (an ``Approval`` event, state
``rejected``), and the refusal, which says how to allow it, is the call's observation.  A replay
decides as its recording did.

Time spent paused, waiting for a person, is not held against ``max_duration_seconds``: the
run's clock counts only inside ``step()``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from . import events as ev
from .records import ToolResult


class Approvals:
    """The tool call waiting for a person's decision (``pending``) and that decision.

    ``emit`` records the gate's ``Approval`` events in the run's trace.
    """

    def __init__(self, emit: Callable[[ev.Event], Any]):
        self._emit = emit
        #: The iteration and action of the tool call held for the person, if any.
        self.pending: tuple[int, Any] | None = None
        #: ``(ok, reason)`` for the call about to run, once decided.
        self.decision: tuple[bool, str] | None = None
        #: The result of a rejection that is not the person's (nobody could be asked; a replay's
        #: recorded rejection), until the call is settled.
        self._rejection: ToolResult | None = None

    @property
    def waiting(self) -> bool:
        """A call is held and nobody has decided it yet: the run stops here until someone does."""
        return self.pending is not None and self.decision is None

    def waiting_call(self) -> dict[str, Any] | None:
        """What the held call would do (tool, params, thought, action type), or None."""
        if self.pending is None:
            return None
        return _described(self.pending[1])

    def decide(self, ok: bool, reason: str = "") -> None:
        """The person's decision on the held call."""
        if self.pending is None:
            raise RuntimeError("no tool call is waiting for approval")
        self.decision = (bool(ok), reason)

    def hold(self, i: int, act: Any, run: Any) -> bool:
        """Put iteration ``i``'s call through the gate of ``run``: True when it is held for a
        person, False when it may go to ``settle`` now (decided, or needing no approval)."""
        recorded = getattr(run.clock, "events", None)
        if isinstance(recorded, list):  # a replay (replay.RecordedClock): as the recording decided
            return self._replayed(i, act, recorded, len(run.events))
        from .tool_policy import policy_of, real_model

        policy, tool = policy_of(run.agent), run.tools.get(act.tool)
        confined = {"real_model": real_model(run.agent), "sandboxed": run.tool_context.sandbox is not None}
        if not policy.asks(tool, **confined):
            return False
        approve = run.agent.approve
        if approve is None:  # nobody to ask: refused, and the observation says how to allow it
            refusal = policy.refusal(tool, **confined)
            self.decision = (False, refusal)
            self._rejection = ToolResult(ok=False, error=refusal)
            return False
        decision = approve({**_described(act), "iteration": i})
        if decision is None:
            self.pending = (i, act)
            self._emit(ev.Approval(state="waiting", tool=act.tool))
            return True
        self.decision = decision if isinstance(decision, tuple) else (bool(decision), "")
        return False

    def _replayed(self, i: int, act: Any, recorded: list[dict[str, Any]], index: int) -> bool:
        """The recording's approval of this call, from its event at ``index`` (the next the run
        emits): none, a decision, or a wait and the decision that followed it (which the replay
        takes at once).  A rejection's observation is the recorded one."""
        if index >= len(recorded) or recorded[index].get("type") != "approval":
            return False
        at = index
        if recorded[at].get("state") == "waiting":
            self._emit(ev.Approval(state="waiting", tool=act.tool))
            at = next((j for j in range(index + 1, len(recorded)) if recorded[j].get("type") == "approval"
                       and recorded[j].get("state") != "waiting"), -1)
            if at < 0:  # the recording ended waiting: so does the replay
                self.pending = (i, act)
                return True
        ok = recorded[at].get("state") == "approved"
        self.decision = (ok, str(recorded[at].get("reason") or ""))
        seen = next((e for e in recorded[at + 1:] if e.get("type") == "observation"), None)
        if not ok and seen is not None:
            self._rejection = ToolResult(output=seen.get("output") or "", ok=bool(seen.get("ok")),
                                         error=seen.get("error"), data=dict(seen.get("data") or {}))
        return False

    def settle(self, act: Any) -> ToolResult | None:
        """Empty the gate as ``act`` is carried out: the decision goes into the trace, and a
        rejection is the call's result (None: run the tool)."""
        self.pending = None
        decision, self.decision = self.decision, None
        rejection, self._rejection = self._rejection, None
        if decision is None:
            return None
        ok, reason = decision
        self._emit(ev.Approval(state="approved" if ok else "rejected", tool=act.tool, reason=reason))
        if ok:
            return None
        if rejection is not None:
            return rejection
        return ToolResult(ok=False, error="the person rejected this tool call" + (f": {reason}" if reason else ""))


def _described(act: Any) -> dict[str, Any]:
    """What a tool call would do, as the person (and the ``approve`` callback) sees it."""
    return {"tool": act.tool, "params": act.params, "thought": act.thought, "action_type": act.action_type}


class RunningClock:
    """Seconds a run has spent inside ``step()``: paused time does not count."""

    def __init__(self) -> None:
        self._active_s = 0.0
        self._since: float | None = None

    @contextlib.contextmanager
    def stepping(self) -> Iterator[None]:
        """Count the time of this block (once: a step inside a step is not counted twice)."""
        outer = self._since is None
        if outer:
            self._since = time.monotonic()
        try:
            yield
        finally:
            if outer and self._since is not None:
                self._active_s += time.monotonic() - self._since
                self._since = None

    def seconds(self) -> float:
        """The time counted so far, the current step's included."""
        since = self._since
        return self._active_s + (time.monotonic() - since if since is not None else 0.0)
