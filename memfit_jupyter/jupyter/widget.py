"""The live run widget: header, gauges, panels, iteration cards and controls.

It subscribes to the run's events and folds them into a ``RunState``; the
parts an event touched are marked dirty and re-rendered at most every
``throttle_ms`` (and always at the end of a cell, a click or the run), each
widget inside ``hold_sync`` so one change is one message.  Nothing runs on a
background thread: ipykernel 7 drops output sent from threads, and the loop
is synchronous on the kernel's main thread anyway.

Browser clicks reach the kernel only once the running cell has ended, so the
Step, Continue, Approve and Override buttons run iterations inside their own
callbacks.  A Step whose action asked for a heartbeat (``request_heartbeat``)
takes the next step at once too.  When the failure diary escalates a run, the
widget asks the person what to do: more trials (the run goes on), the diary's
lessons, or stop; the answer is an ``escalation`` event.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from html import escape
from typing import Any

from . import html as H
from .state import RunState

log = logging.getLogger("memfit_jupyter")

#: Events that re-render at once, whatever the throttle: the person must see them now.
CARDS_PER_CHUNK = 10
IMMEDIATE = frozenset({"run_start", "run_end", "approval", "spin", "degradation", "error", "escalation"})
#: A Step click follows at most this many heartbeats in a row (a model that always asks for one).
MAX_HEARTBEAT_STEPS = 10
#: Trials that "Try N more trials" adds to an escalated run.
EXTRA_TRIALS = 2


class RunWidget:
    """The live view of one ``Run``. ``root`` is the ipywidgets box to display."""

    def __init__(self, run: Any, *, step: bool = False, throttle_ms: int = 100, max_cards: int = 100,
                 on_settle: Callable[[], None] | None = None, extra_trials: int = EXTRA_TRIALS):
        import ipywidgets as W

        self.run = run
        self.step_mode = step
        self.throttle_s = max(0, throttle_ms) / 1000.0
        self.max_cards = max(1, max_cards)
        self.on_settle = on_settle
        self.renders = 0
        self._busy = False
        self._last = 0.0
        self._dirty: set[str] = set()
        self._cards: dict[int, Any] = {}
        self._order: deque[int] = deque()
        self._hidden = 0
        self._card_layout: Any = None
        self._card_style: Any = None
        self._confirming = False
        self.extra_trials = max(1, int(extra_trials))
        self.state = RunState(task=run.task, model=run.agent.model, tiers=dict(run.agent.tiers))
        self.limits = {"max_cost_usd": run.agent.guarantees.max_cost_usd,
                       "max_duration_seconds": run.agent.guarantees.max_duration_seconds,
                       "max_recursive_calls": run.agent.guarantees.max_recursive_calls,
                       "max_iterations": run.agent.max_iterations}

        def html(name: str) -> Any:
            return W.HTML(value="", layout=W.Layout(display="none"), _dom_classes=[f"memfit-{name}"])

        self.header = W.HTML(_dom_classes=["memfit-header"])
        self.gauges = W.HTML(_dom_classes=["memfit-gauges"])
        self.panels = {name: html(name) for name in (
            "notes", "breakers", "spin", "context", "degradation", "synthesis", "memory", "trials",
            "errors", "others", "escalation", "diary")}
        self.hidden_note = html("hidden")
        self.timeline = W.VBox(_dom_classes=["memfit-timeline"])

        def button(description: str, style: str, handler: Callable[[Any], None], tooltip: str = "") -> Any:
            b = W.Button(description=description, button_style=style, tooltip=tooltip,
                         layout=W.Layout(display="none", width="auto"))
            b.on_click(lambda _b: self._guarded(handler))
            return b

        self.step_button = button("Step", "primary", self.on_step, "run one iteration")
        self.continue_button = button("Continue", "success", self.on_continue, "run to the end")
        self.abort_button = button("Abort", "danger", self.on_abort, "end the run (status cancelled)")
        self.approve_button = button("Approve", "success", lambda: self.on_approve(True), "run this tool call")
        self.reject_button = button("Reject", "danger", lambda: self.on_approve(False),
                                    "do not run it; the agent sees the rejection")
        self.override_button = button("Override limits…", "warning", self.on_override,
                                      "continue past the limits (asks for confirmation)")
        self.override_cost = W.FloatText(description="max $", layout=W.Layout(display="none", width="160px"))
        self.confirm_button = button("Confirm override", "danger", self.on_confirm_override)
        self.cancel_button = button("Cancel", "", self.on_cancel_override)
        self.approval_text = html("approval")
        self.more_trials_button = button(f"Try {self.extra_trials} more trials", "warning", self.on_more_trials,
                                         "raise max_trials and go on with the lessons learned so far")
        self.diary_button = button("Open the diary", "info", self.on_open_diary, "show the lessons")
        self.stop_button = button("Stop", "", self.on_stop, "leave the run escalated")
        self.choices = W.HBox(layout=W.Layout(display="none"), _dom_classes=["memfit-choices"])
        self.controls = W.HBox([self.step_button, self.continue_button, self.abort_button,
                                self.approve_button, self.reject_button, self.override_button,
                                self.override_cost, self.confirm_button, self.cancel_button,
                                self.more_trials_button, self.diary_button, self.stop_button],
                               _dom_classes=["memfit-controls"])
        self.prompt_html = W.HTML()
        self.prompt = W.Accordion(children=[self.prompt_html], selected_index=None,
                                  layout=W.Layout(display="none"), _dom_classes=["memfit-prompt"])
        self.prompt.set_title(0, "next prompt (what the model will be sent)")
        p = self.panels
        self.root = W.VBox(
            [self.header, self.gauges, p["notes"], p["breakers"], p["context"], p["spin"], p["degradation"],
             self.approval_text, p["escalation"], self.controls, p["diary"], self.choices, self.prompt, self.hidden_note, self.timeline,
             p["synthesis"], p["memory"], p["trials"], p["others"], p["errors"]],
            _dom_classes=["memfit-run-widget"],
            layout=W.Layout(border="1px solid #e5e7eb", padding="6px"))
        for event in run.events:
            self._dirty |= self.state.apply(event.to_dict())
        self._unsubscribe = run.subscribe(self._on_event)
        self.flush()
        self.refresh_controls()

    # --- events and rendering -----------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        self._dirty |= self.state.apply(event.to_dict())
        now = time.monotonic()
        if event.type in IMMEDIATE or now - self._last >= self.throttle_s:
            self.flush()

    def status_label(self) -> str:
        run = self.run
        if run.done:
            return run.status
        if run.waiting_for_approval is not None:
            return "waiting for approval"
        if self.step_mode and not self._busy:
            return "paused" if run.status == "pending" or run.iteration else run.status
        return run.status

    def totals(self) -> dict[str, Any]:
        run = self.run
        spent = run.budget.spent
        return {"cost_usd": spent.cost_usd, "calls": spent.calls,
                "tokens": {"total": spent.prompt_tokens + spent.completion_tokens},
                "recursive_calls": run.budget.recursive_calls, "iterations": run.iteration,
                "duration_s": run.result.duration_s if run.result else (run.elapsed if run.status != "pending" else 0.0)}

    def flush(self) -> None:
        """Re-render what changed since the last render (and the gauges, whose clock moves)."""
        dirty, self._dirty = self._dirty, set()
        self._last = time.monotonic()
        self.renders += 1
        s = self.state
        label = self.status_label()
        if s.status != label:
            s.status = label
            dirty.add("header")
        if "header" in dirty:
            self._set(self.header, H.header_html(s))
        self._set(self.gauges, H.gauges_html(self.totals(), self.limits, s))
        renderers = {
            "notes": lambda: H.notes_html(s.notes), "breakers": lambda: H.breakers_html(s.breakers),
            "spin": lambda: H.spin_html(s.spin), "context": lambda: H.context_html(s.context),
            "degradation": lambda: H.degradation_html(s.degradation),
            "synthesis": lambda: H.synthesis_html(s.synthesis), "memory": lambda: H.memory_html(s.memory),
            "trials": lambda: H.trials_html(s.trials), "errors": lambda: H.errors_html(s.errors),
            "others": lambda: "".join(H.generic_html(e) for e in s.others),
        }
        for name, render in renderers.items():
            if name in dirty:
                self._set(self.panels[name], render())
        chunks = {(int(d.split(":", 1)[1]) - 1) // CARDS_PER_CHUNK for d in dirty if d.startswith("card:")}
        for chunk in sorted(c for c in chunks if c >= 0):
            self._render_chunk(chunk)
        if "synthesis" in dirty or "controls" in dirty or "header" in dirty:
            self.refresh_controls()

    @staticmethod
    def _set(widget: Any, value: str) -> None:
        display = "" if value else "none"
        if widget.value == value and widget.layout.display == display:
            return
        with widget.hold_sync():
            widget.value = value
        if widget.layout.display != display:
            widget.layout.display = display

    def _render_chunk(self, chunk: int) -> None:
        """Cards live in chunks of ``CARDS_PER_CHUNK`` per HTML widget: one widget per card would
        cost three comm opens (widget, layout, style) per iteration."""
        import ipywidgets as W

        first = chunk * CARDS_PER_CHUNK + 1
        cards = self.state.cards
        value = "".join(H.card_html(cards[i]) for i in range(first, first + CARDS_PER_CHUNK) if i in cards)
        widget = self._cards.get(chunk)
        if widget is not None:
            if widget.value != value:
                widget.value = value
            return
        if self._order and chunk < self._order[0]:
            return  # an old chunk that has already scrolled out of the live view
        kwargs = {}
        if self._card_layout is not None:  # shared by every chunk: fewer comm opens
            kwargs = {"layout": self._card_layout, "style": self._card_style}
        widget = self._cards[chunk] = W.HTML(value=value, _dom_classes=["memfit-cards"], **kwargs)
        self._card_layout, self._card_style = widget.layout, widget.style
        self._order.append(chunk)
        while len(self._order) * CARDS_PER_CHUNK > self.max_cards and len(self._order) > 1:
            old = self._order.popleft()
            self._cards.pop(old).close()
            self._hidden += CARDS_PER_CHUNK
        self.timeline.children = tuple(self._cards[k] for k in self._order)
        if self._hidden:
            self._set(self.hidden_note, f'<div style="{H.FONT};color:#6b7280">{self._hidden} earlier '
                                        "iteration(s) are not shown live; the saved output has them all</div>")

    # --- controls -------------------------------------------------------------------------
    def refresh_controls(self) -> None:
        run = self.run
        waiting = run.waiting_for_approval
        live = not run.done and not self._busy

        def show(widget: Any, visible: bool) -> None:
            want = "" if visible else "none"
            if widget.layout.display != want:
                widget.layout.display = want

        show(self.step_button, live and self.step_mode and waiting is None)
        show(self.continue_button, live and (self.step_mode or waiting is not None))
        show(self.abort_button, live and (self.step_mode or waiting is not None))
        show(self.approve_button, live and waiting is not None)
        show(self.reject_button, live and waiting is not None)
        if waiting is not None:
            self._set(self.approval_text, H.notes_html([
                f"approve the call {waiting['tool']}({escape(str(waiting['params']))[:300]})?"]))
        else:
            self._set(self.approval_text, "")
        can_override = run.done and run.status == "degraded" and hasattr(run, "override") and not self._busy
        show(self.override_button, can_override and not self._confirming)
        for w in (self.override_cost, self.confirm_button, self.cancel_button):
            show(w, can_override and self._confirming)
        asking = self.escalation_open() and not self._busy
        show(self.more_trials_button, asking and self._can_add_trials())
        show(self.diary_button, asking)
        show(self.stop_button, asking)
        self._set(self.panels["escalation"], H.notes_html([
            "The oracle still fails after the last trial. What now? More trials go on with the lessons "
            "learned so far; the diary shows them; Stop leaves the run escalated."]) if asking else "")
        self._refresh_choices()
        show_prompt = self.step_mode and live and waiting is None
        show(self.prompt, show_prompt)
        if show_prompt:
            self._set_prompt()

    def _set_prompt(self) -> None:
        try:
            messages = self.run.next_prompt()
        except Exception as exc:  # a broken extension hook must not break the view
            messages = [{"role": "error", "content": f"{type(exc).__name__}: {exc}"}]
        body = "".join(
            f'<div style="{H.FONT}"><b>{escape(m["role"])}</b><pre style="{H.MONO};white-space:pre-wrap;'
            f'margin:2px 0 6px 0">{escape(H._clip(m["content"], 12000))}</pre></div>' for m in messages)
        if self.prompt_html.value != body:
            self.prompt_html.value = body

    def _refresh_choices(self) -> None:
        import ipywidgets as W

        last = self.state.synthesis[-1] if self.state.synthesis else None
        offer = (last is not None and last.get("strategy") == "diverse" and last.get("alternatives")
                 and last.get("choice") is None and hasattr(self.run, "choose") and not self._busy)
        key = (id(last), bool(offer))
        if getattr(self, "_choices_key", None) == key:
            return
        self._choices_key = key
        if not offer:
            self.choices.layout.display = "none"
            return
        buttons = []
        for index, alt in enumerate(last["alternatives"]):
            text = alt.get("answer", alt) if isinstance(alt, dict) else alt
            b = W.Button(description=f"{index}: {str(text)[:40]}", tooltip=str(text)[:500],
                         layout=W.Layout(width="auto"))
            b.on_click(lambda _b, i=index: self._guarded(lambda: self.on_choose(i)))
            buttons.append(b)
        self.choices.children = [W.HTML("<b>Choose an alternative:</b>"), *buttons]
        self.choices.layout.display = ""

    def _guarded(self, action: Callable[[], Any]) -> None:
        """Run a button's action; show what went wrong instead of losing it in the log."""
        if self._busy:
            return
        self._busy = True
        self._dirty.add("header")
        self.refresh_controls()
        try:
            action()
        except KeyboardInterrupt:
            if not self.run.done:
                self.run.cancel("interrupted by the person")
        except Exception as exc:  # an event like any other: the trace keeps it, the view shows it
            self.run.emit("error", message=f"{type(exc).__name__}: {exc}")
        finally:
            self._busy = False
            self.settle()

    def settle(self) -> None:
        """Render everything now (end of a cell, a click or the run) and refresh the saved bundle."""
        self._dirty.add("header")
        self.flush()
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

    def on_override(self) -> None:
        self._confirming = True
        self.override_cost.value = round(self.limits["max_cost_usd"] * 2, 4)

    def on_cancel_override(self) -> None:
        self._confirming = False

    def on_confirm_override(self) -> None:
        self._confirming = False
        value = float(self.override_cost.value)
        self.run.override(confirm=True, max_cost_usd=value)
        self.limits["max_cost_usd"] = value
        self.state.degradation = None
        self._dirty.add("degradation")
        if not self.run.done:
            self.run.run()

    def on_choose(self, index: int) -> None:
        self.run.choose(index)

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

    def _diary(self) -> Any:
        return getattr(getattr(self.run, "context", None), "diary", None)

    def _can_add_trials(self) -> bool:
        return self._diary() is not None and callable(getattr(self.run.context, "more_trials", None))

    def on_more_trials(self) -> None:
        self._set(self.panels["diary"], "")
        self.run.context.more_trials(self.run, self.extra_trials)
        if not self.step_mode:
            self.run.run()

    def on_open_diary(self) -> None:
        diary = self._diary()
        lessons = list(getattr(diary, "lessons", []) or [])
        past = list(getattr(diary, "past", []) or [])
        self.run.emit("escalation", choice="open_diary", extra_trials=0,
                      max_trials=getattr(diary, "max_trials", None))
        self._set(self.panels["diary"], H.diary_html(lessons, past))

    def on_stop(self) -> None:
        self._set(self.panels["diary"], "")
        diary = self._diary()
        self.run.emit("escalation", choice="stop", extra_trials=0, max_trials=getattr(diary, "max_trials", None))

    def close(self) -> None:
        self._unsubscribe()
