"""The live run widget: the kernel half.  It sends events, never HTML.

The front end is the JupyterLab extension's TypeScript run view (the same code
that draws a saved run), registered as the widget ``MemfitRunModel`` of module
``memfit-jupyter``.  This half

- subscribes to the run and sends its serialized events in batches
  (``{"kind": "batch", "start": n, "events": [...], "head": {...}}``), at most
  every ``throttle_ms`` and at once for the events a person must see now;
  ``head`` is the trace without its events (totals, limits, status);
- sends the pieces of a reply as it streams in (``{"kind": "delta", "event":
  {model_delta fields}}``), throttled like the events and never part of the
  trace, so the view can show the thought as it is written;
- keeps ``controls`` (a synced dict: status, which buttons, the approval
  question, the diverse choices, the next prompt in step mode, the expected
  cost of an iteration, how many iteration rows the view keeps) up to date;
- runs the front end's actions (``{"action": "step"}``, ``"approve"``...), among them
  ``{"action": "fork", "fork": {...}}``: ``run.fork(...)`` at a step with the form's changes, the
  child run live in a widget of its own (listed in ``controls["forks"]``, drawn under the run);
  a fork that cannot be made is one line in ``controls["fork_error"]`` and makes nothing.

Browser clicks reach the kernel only once the running cell has ended, so the
Step, Continue, Approve and Override actions run iterations inside their own
handlers.  Nothing runs on a background thread: ipykernel 7 drops output sent
from threads, and the loop is synchronous on the kernel's main thread anyway.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as W
from traitlets import Dict, Unicode

from ..secrets import redact, redact_obj
from ..version import __version__
from .capture import MAX_LIVE_CARDS, THROTTLE_MS, captured_logs

log = logging.getLogger("memfit_jupyter")

MODULE = "memfit-jupyter"
#: Events sent at once, whatever the throttle: the person must see them now.
IMMEDIATE = frozenset({"run_start", "run_end", "approval", "spin", "degradation", "error", "escalation",
                       "log", "answer"})
#: The head (totals, status) is refreshed at most this often between immediate events.
HEAD_EVERY_S = 1.0
#: A Step click follows at most this many heartbeats in a row (a model that always asks for one).
MAX_HEARTBEAT_STEPS = 10
#: Trials that "Try N more trials" adds to an escalated run.
EXTRA_TRIALS = 2


class RunModel(W.DOMWidget):  # type: ignore[misc]  # ipywidgets ships no type hints
    """The widget model the front end draws (labextension/src/widgetmodel.ts)."""

    _model_name = Unicode("MemfitRunModel").tag(sync=True)
    _model_module = Unicode(MODULE).tag(sync=True)
    _model_module_version = Unicode(f"^{__version__}").tag(sync=True)
    _view_name = Unicode("MemfitRunView").tag(sync=True)
    _view_module = Unicode(MODULE).tag(sync=True)
    _view_module_version = Unicode(f"^{__version__}").tag(sync=True)
    controls = Dict().tag(sync=True)


def trace_head(run: Any) -> dict[str, Any]:
    """The trace without its events."""
    head: dict[str, Any] = run.trace()
    head.pop("events", None)
    return head


class RunWidget:
    """The live view of one ``Run``. ``model`` is the widget whose id the saved output names."""

    def __init__(self, run: Any, *, step: bool = False, throttle_ms: int = THROTTLE_MS,
                 on_settle: Callable[[], None] | None = None, extra_trials: int = EXTRA_TRIALS,
                 max_cards: int = MAX_LIVE_CARDS):
        self.run = run
        self.step_mode = step
        self.throttle_s = max(0, throttle_ms) / 1000.0
        self.on_settle = on_settle
        self.extra_trials = max(1, int(extra_trials))
        #: Iteration rows the live view keeps in the page; older ones fold into one line (0: all).
        self.max_cards = max(0, int(max_cards))
        #: Batches sent (one custom message each).
        self.renders = 0
        self._busy = False
        self._sent = 0
        self._last = 0.0
        self._head: dict[str, Any] = {}
        self._head_at = 0.0
        self._diary: dict[str, Any] | None = None
        #: What the run waits for that is not the model, shown next to its status (or None).
        self._note: str | None = None
        self.model = RunModel()
        self.model.on_msg(self._on_msg)
        self._unsubscribe = run.subscribe(self._on_event)
        from ..events import ModelDelta

        #: Pieces of streamed replies sent to the front end (``{"kind": "delta", "event": ...}``).
        self.streamed = 0
        #: Pieces the run streamed (more than ``streamed`` when the throttle joined some).
        self.deltas_seen = 0
        self._delta: dict[str, Any] | None = None
        self._delta_at = 0.0
        self._estimate: dict[str, Any] | None = None
        self._estimated_at: tuple[int, bool] | None = None
        self._unsubscribe_delta = run.subscribe(self._on_delta, ModelDelta)
        from .fork_view import ForkTree

        #: The widgets of the forks made from this view, by the child's run id.
        self.children: dict[str, RunWidget] = {}
        self.forks = ForkTree(run)
        self._fork_error: str | None = None
        self.flush(head=True)
        # No estimate yet: it may import litellm (seconds), and the view must show up first.
        self.refresh_controls(estimate=False)

    @property
    def root(self) -> RunModel:
        return self.model

    # --- events out ---------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        now = time.monotonic()
        immediate = event.type in IMMEDIATE
        if immediate or now - self._last >= self.throttle_s:
            self.flush(head=immediate or now - self._head_at >= HEAD_EVERY_S)

    def _on_delta(self, event: Any) -> None:
        """A piece of a reply as it streams in: sent on its own, outside the batches (it is not
        part of the trace), at most every ``throttle_ms``; pieces that come faster are joined."""
        self.deltas_seen += 1
        piece = event.to_dict()
        held = self._delta
        if held is not None and (held["iteration"], held["purpose"]) == (piece["iteration"], piece["purpose"]):
            piece["text"] = held["text"] + piece["text"]
        self._delta = piece
        now = time.monotonic()
        if now - self._delta_at < self.throttle_s:
            return
        # The events before the call first (the iteration's row exists), then the reply so far.
        if self._sent < len(self.run.events):
            self.flush(head=False)
        self.model.send({"kind": "delta", "event": piece})
        self._delta = None
        self._delta_at = now
        self.streamed += 1

    def flush(self, *, head: bool = True, start: int | None = None) -> None:
        """Send the events not sent yet (from ``start`` when the front end asks), with the head."""
        events = self.run.events
        first = self._sent if start is None else max(0, min(start, len(events)))
        if head:
            new_head = trace_head(self.run)
            self._head_at = time.monotonic()
        else:
            new_head = self._head
        if first == len(events) and new_head == self._head and start is None:
            return
        message: dict[str, Any] = {"kind": "batch", "start": first,
                                   "events": [e.to_dict() for e in events[first:]]}
        if new_head != self._head or start is not None:
            message["head"] = new_head
            self._head = new_head
        self.model.send(message)
        self._sent = max(self._sent, len(events))
        self._last = time.monotonic()
        self.renders += 1
        # After the events: the controls may say the run has ended, and the view must have its
        # last events by then (it stops following the newest step when the status says so).
        if head and start is None and self._busy and self._estimate_stale():
            self.refresh_controls()  # an iteration ended while the run goes: a fresh estimate

    # --- controls -------------------------------------------------------------------------
    def status_label(self) -> str:
        run = self.run
        if run.done:
            return str(run.status)
        if run.waiting_for_approval is not None:
            return "waiting for approval"
        if self._busy:
            return "running"
        if self.step_mode:
            return "paused"
        return str(run.status)

    def buttons(self) -> list[str]:
        run = self.run
        waiting = run.waiting_for_approval is not None
        live = not run.done and not self._busy
        shown = []
        if live and self.step_mode and not waiting:
            shown += ["step", "continue"]  # never while a tool call waits: Continue could not run it
        if live and waiting:
            shown += ["approve", "reject"]
        if live and (self.step_mode or waiting):
            shown.append("abort")
        if run.done and run.status == "degraded" and hasattr(run, "override") and not self._busy:
            shown.append("override")
        if self.escalation_open() and not self._busy:
            if self._can_add_trials():
                shown.append("more_trials")
            shown += ["open_diary", "stop"]
        return shown

    def _choices(self) -> list[dict[str, Any]]:
        if self._busy or not hasattr(self.run, "choose"):
            return []
        last = next((e for e in reversed(self.run.events) if e.type == "synthesis"), None)
        if last is None or last.get("strategy") != "diverse" or last.get("choice") is not None:
            return []
        out = []
        for index, alt in enumerate(last.get("alternatives") or []):
            text = alt.get("answer", alt) if isinstance(alt, dict) else alt
            out.append({"index": index, "answer": str(text)[:500]})
        return out

    def _prompt(self) -> list[dict[str, str]] | None:
        if not (self.step_mode and not self.run.done and not self._busy
                and self.run.waiting_for_approval is None):
            return None
        try:
            messages = self.run.next_prompt()
        except Exception as exc:  # a broken extension hook must not break the view
            messages = [{"role": "error", "content": f"{type(exc).__name__}: {exc}"}]
        # Redacted as the events are: the controls are synced to the page and saved with the notebook.
        return [{"role": str(m["role"]), "content": redact(str(m["content"]))} for m in messages]

    def _estimate_stale(self) -> bool:
        return self._estimated_at != (len(getattr(self.run, "records", ())), bool(self.run.done))

    def _cost_estimate(self) -> dict[str, Any] | None:
        """What the next iteration is expected to cost (``run.estimate()``), in the few figures the
        view shows; recomputed once per iteration.  None once the run has ended."""
        if not self._estimate_stale():
            return self._estimate
        self._estimated_at = (len(getattr(self.run, "records", ())), bool(self.run.done))
        self._estimate = None
        if self.run.done or not hasattr(self.run, "estimate"):
            return None
        try:
            e = self.run.estimate()
        except Exception as exc:  # an estimate must never break the view: say why it is missing
            self._estimate = {"error": redact(f"{type(exc).__name__}: {exc}")[:300]}
            return self._estimate
        self._estimate = {key: e.get(key) for key in (
            "model", "priced", "iteration_cost_usd", "iteration_worst_case_usd", "calls_per_iteration",
            "prompt_tokens", "iterations_affordable", "budget_left_usd")}
        return self._estimate

    def refresh_controls(self, *, estimate: bool = True) -> None:
        waiting = self.run.waiting_for_approval
        approval = None
        if waiting is not None:
            approval = redact_obj({"tool": waiting["tool"], "params": _jsonable(waiting["params"]),
                                   "thought": str(waiting.get("thought") or "")})
        limits = self.run.budget.guarantees if hasattr(self.run, "budget") else None
        controls = {
            "status": self.status_label(), "busy": self._busy, "buttons": self.buttons(),
            "approval": approval, "choices": self._choices(),
            "override_cost": round(limits.max_cost_usd * 2, 4) if limits is not None else None,
            "extra_trials": self.extra_trials, "diary": self._diary, "prompt": self._prompt(),
            "count": self._sent, "max_cards": self.max_cards, "note": self._note,
            "estimate": self._cost_estimate() if estimate else None,
            "forks": self.forks.entries(self.fork_widgets()), "fork_error": self._fork_error,
        }
        if controls != self.model.controls:
            self.model.controls = controls

    # --- actions in -----------------------------------------------------------------------
    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        action = content.get("action")
        if action == "sync":
            have = content.get("have")
            self.flush(start=have if isinstance(have, int) else 0)
            return
        handlers: dict[str, Callable[[], Any]] = {
            "step": self.on_step, "continue": self.on_continue, "abort": self.on_abort,
            "approve": lambda: self.on_approve(True), "reject": lambda: self.on_approve(False),
            "override": lambda: self.on_override(content.get("max_cost_usd")),
            "choose": lambda: self.on_choose(content.get("index")),
            "more_trials": self.on_more_trials, "open_diary": self.on_open_diary, "stop": self.on_stop,
        }
        if action == "fork":
            self.on_fork(content.get("fork"))
            return
        handler = handlers.get(action) if isinstance(action, str) else None
        if handler is not None:
            self._guarded(handler)

    def _guarded(self, action: Callable[[], Any]) -> None:
        """Run an action; what goes wrong is shown in the view, not lost in the log console."""
        if self._busy:
            return
        self._busy = True
        self.refresh_controls()
        try:
            with captured_logs(self.run):
                self.load_model_client()
                action()
        except KeyboardInterrupt:
            if not self.run.done:
                self.run.cancel("interrupted by the person")
        except Exception as exc:  # an event like any other: the trace keeps it, the view shows it
            self.run.emit("error", message=f"{type(exc).__name__}: {exc}")
        finally:
            self._busy = False
            self.settle()

    def run_to_end(self) -> None:
        """Run the loop in the cell that showed the widget (buttons wait meanwhile)."""
        self._busy = True
        try:
            self.load_model_client()
            self.refresh_controls()  # the estimate too: the view is on the page by now
            self.run.run()
        finally:
            self._busy = False

    def load_model_client(self) -> None:
        """Import the model client (litellm) before the first model call of the kernel, saying so
        in the view: it takes seconds, and the run would otherwise seem stuck in its setup."""
        if "litellm" in sys.modules:
            return
        self._note = "loading the model client (the first model call of this kernel imports litellm)"
        self.refresh_controls(estimate=False)
        try:
            from ..llm.backend import import_litellm

            import_litellm()
        finally:
            self._note = None
            self.refresh_controls(estimate=False)

    def settle(self) -> None:
        """Send everything now (end of a cell, an action or the run) and refresh the saved bundle."""
        self.flush(head=True)
        self.refresh_controls()
        if self.on_settle is not None:
            self.on_settle()

    def on_step(self) -> None:
        if self.run.done:
            return
        record = self.run.step()
        # The action asked to go on at once (request_heartbeat): the same click takes that step too.
        beats = 0
        while (record is not None and record.data.get("heartbeat") and not self.run.done
               and beats < MAX_HEARTBEAT_STEPS):
            beats += 1
            record = self.run.step()

    def on_continue(self) -> None:
        if self.run.waiting_for_approval is not None:
            return
        self.run.run()

    def on_abort(self) -> None:
        self.run.cancel("aborted from the widget")

    def on_approve(self, ok: bool) -> None:
        self.run.approve(ok, "" if ok else "rejected from the widget")
        self.run.step()
        if not self.step_mode and not self.run.done and self.run.waiting_for_approval is None:
            self.run.run()

    def on_override(self, max_cost_usd: Any) -> None:
        if isinstance(max_cost_usd, bool) or not isinstance(max_cost_usd, int | float) or max_cost_usd <= 0:
            raise ValueError(f"the new cost limit must be a positive number of US dollars, got {max_cost_usd!r}")
        self.run.override(confirm=True, max_cost_usd=float(max_cost_usd))
        if not self.run.done:
            self.run.run()

    def on_choose(self, index: Any) -> None:
        self.run.choose(index)

    # --- forks ---------------------------------------------------------------------------
    def fork_widgets(self) -> dict[str, str]:
        """The live widget model of each fork made from this view, by the child's run id."""
        return {run_id: w.model.model_id for run_id, w in self.children.items()}

    def on_fork(self, request: Any) -> Any:
        """"Fork from here": ``run.fork`` with the form's changes, then the child runs to its end
        in its own widget.  What stops a fork (bad input, a run still executing) is one line in
        ``controls["fork_error"]``; nothing is made then and the run's trace is untouched.
        Returns the child ``Run`` (None when none was made)."""
        from ..fork import ForkError
        from .fork_view import first_line, request_changes

        if self._fork_error is not None:  # a new attempt: the last one's line goes first
            self._fork_error = None
            self.refresh_controls()
        if self._busy:
            self._fork_error = f"run {self.run.id} is executing: fork it once it has stopped"
            self.refresh_controls()
            return None
        try:
            at, changes = request_changes(request)
            child = self.run.fork(at, **changes)
        except (ForkError, ValueError, TypeError) as exc:
            self._fork_error = first_line(exc)
            self.refresh_controls()
            return None
        self._fork_error = None
        widget = RunWidget(child, throttle_ms=int(self.throttle_s * 1000), max_cards=self.max_cards,
                           on_settle=self._child_settled)
        self.children[child.id] = widget
        self.settle()  # the tree lists the child and names its widget before it runs
        self._busy = True
        self.refresh_controls()
        try:
            with captured_logs(child):
                widget.run_to_end()
        except KeyboardInterrupt:
            if not child.done:
                child.cancel("interrupted by the person")
        except Exception as exc:  # the child's, not the parent's: its trace keeps it, its view shows it
            child.emit("error", message=f"{type(exc).__name__}: {exc}")
        finally:
            self._busy = False
            widget.settle()
            self.settle()
        return child

    def _child_settled(self) -> None:
        """A fork settled (its own action, a later cell): the tree and the saved output follow."""
        if self._busy:
            return  # the fork's own run: settled once it ends
        self.settle()

    # --- escalation (failure diary) -------------------------------------------------------
    def escalation_open(self) -> bool:
        """The run ended escalated and the person has not said yet whether to go on or stop."""
        run = self.run
        if not run.done or run.status != "escalated":
            return False
        for e in reversed(run.events):
            if e.type == "run_end":
                return True
            if e.type == "escalation" and e.get("choice") in ("more_trials", "stop"):
                return False
        return True

    def _diary_of(self) -> Any:
        return getattr(getattr(self.run, "context", None), "diary", None)

    def _can_add_trials(self) -> bool:
        return self._diary_of() is not None and callable(getattr(self.run.context, "more_trials", None))

    def on_more_trials(self) -> None:
        self._diary = None
        self.run.context.more_trials(self.run, self.extra_trials)
        if not self.step_mode:
            self.run.run()

    def on_open_diary(self) -> None:
        diary = self._diary_of()
        self.run.emit("escalation", choice="open_diary", extra_trials=0,
                      max_trials=getattr(diary, "max_trials", None))
        self._diary = {"lessons": [str(x) for x in getattr(diary, "lessons", []) or []],
                       "past": [str(x) for x in getattr(diary, "past", []) or []]}

    def on_stop(self) -> None:
        self._diary = None
        diary = self._diary_of()
        self.run.emit("escalation", choice="stop", extra_trials=0, max_trials=getattr(diary, "max_trials", None))

    def close(self) -> None:
        self._unsubscribe()
        self._unsubscribe_delta()
        self.model.close()


def _jsonable(value: Any) -> Any:
    """Tool parameters as JSON (the front end shows them as JSON text)."""
    import json

    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)
