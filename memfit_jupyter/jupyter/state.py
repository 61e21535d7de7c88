"""What a person sees of a run, folded from its events.

``RunState.apply(event)`` takes one event (as its flat dict) and updates the
iteration cards and panels it touches, returning the names of the parts that
changed (``"header"``, ``"card:3"``, ``"spin"``...).  The live widget re-renders
only those parts; the static HTML folds a saved trace the same way.  So the
events stay the one source of truth for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Event types with their own panel or place on a card; any other type gets a generic card.
KNOWN_TYPES = frozenset({
    "run_start", "model_call", "format_error", "action", "observation", "approval", "note",
    "reflection", "spin", "guarantee", "breaker", "synthesis", "memory", "context",
    "degradation", "trial", "escalation", "error", "run_end",
})


@dataclass
class Card:
    """One iteration: the action, its observation, what it cost and what fired about it."""

    iteration: int
    thought: str = ""
    action_type: str = ""
    tool: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    observation: str | None = None
    ok: bool | None = None
    error: str | None = None
    duration_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    format_errors: int = 0
    approval: dict[str, Any] | None = None
    reflections: list[dict[str, Any]] = field(default_factory=list)
    spins: list[dict[str, Any]] = field(default_factory=list)
    others: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunState:
    """The fold of a run's events. ``apply`` returns the parts that changed."""

    task: str = ""
    model: str = ""
    tiers: dict[str, str] = field(default_factory=dict)
    status: str = "pending"
    answer: str | None = None
    reason: str = ""
    cards: dict[int, Card] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    spin: dict[str, Any] | None = None
    breakers: dict[str, dict[str, Any]] = field(default_factory=dict)
    synthesis: list[dict[str, Any]] = field(default_factory=list)
    memory: list[dict[str, Any]] = field(default_factory=list)
    context: dict[str, Any] | None = None
    degradation: dict[str, Any] | None = None
    guarantees: list[dict[str, Any]] = field(default_factory=list)
    trials: list[dict[str, Any]] = field(default_factory=list)
    approval: dict[str, Any] | None = None
    #: Events of unknown types that belong to no iteration: shown as generic cards.
    others: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=lambda: {
        "cost_usd": 0.0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "iterations": 0})

    @classmethod
    def from_events(cls, events: list[dict[str, Any]], **header: Any) -> RunState:
        state = cls(**header)
        for e in events:
            state.apply(e)
        return state

    def card(self, iteration: int) -> Card:
        card = self.cards.get(iteration)
        if card is None:
            card = self.cards[iteration] = Card(iteration)
            self.totals["iterations"] = max(self.totals["iterations"], iteration)
        return card

    def apply(self, e: dict[str, Any]) -> set[str]:
        """Fold one event in; the names of the parts that changed."""
        kind = e.get("type", "")
        it = int(e.get("iteration") or 0)
        handler = getattr(self, f"_on_{kind}", None) if kind in KNOWN_TYPES else None
        if handler is None:
            return self._on_unknown(e, it)
        return handler(e, it)

    # --- one method per event type ----------------------------------------------------
    def _on_run_start(self, e, it):
        self.task = e.get("task", self.task)
        self.tiers = dict(e.get("tiers") or self.tiers)
        self.model = self.tiers.get("primary", self.model)
        self.status = "running"
        return {"header"}

    def _on_model_call(self, e, it):
        t = self.totals
        t["calls"] += 1
        t["cost_usd"] += e.get("cost_usd") or 0.0
        t["prompt_tokens"] += e.get("prompt_tokens") or 0
        t["completion_tokens"] += e.get("completion_tokens") or 0
        if it <= 0:
            return {"gauges"}
        card = self.card(it)
        card.calls += 1
        card.cost_usd += e.get("cost_usd") or 0.0
        card.prompt_tokens += e.get("prompt_tokens") or 0
        card.completion_tokens += e.get("completion_tokens") or 0
        if not e.get("ok", True):
            card.others.append(e)
        return {"gauges", f"card:{it}"}

    def _on_format_error(self, e, it):
        self.card(it).format_errors += 1
        return {f"card:{it}"}

    def _on_action(self, e, it):
        card = self.card(it)
        card.thought = e.get("thought") or ""
        card.action_type = e.get("action_type") or ""
        card.tool = e.get("tool") or ""
        card.params = dict(e.get("params") or {})
        return {f"card:{it}", "gauges"}

    def _on_observation(self, e, it):
        card = self.card(it)
        card.observation = e.get("output") or ""
        card.ok = bool(e.get("ok"))
        card.error = e.get("error")
        card.duration_s = e.get("duration_s")
        if not card.tool and not card.ok:
            card.action_type = card.action_type or "invalid_reply"
        return {f"card:{it}"}

    def _on_approval(self, e, it):
        self.approval = e if e.get("state") == "waiting" else None
        if it > 0:
            self.card(it).approval = e
        return {"controls", f"card:{it}"} if it > 0 else {"controls"}

    def _on_note(self, e, it):
        self.notes.append(str(e.get("text", "")))
        return {"notes"}

    def _on_reflection(self, e, it):
        self.card(it).reflections.append(e)
        return {f"card:{it}"}

    def _on_spin(self, e, it):
        if e.get("is_spinning", True):
            # Several detectors may fire on one iteration: the banner keeps the model's analysis
            # (layer 2, with next actions) over a heuristic's one-line finding.
            current = self.spin
            if not (current and current.get("iteration") == it and current.get("next_actions")
                    and not e.get("next_actions")):
                self.spin = e
        if it > 0:
            self.card(it).spins.append(e)
        return {"spin", f"card:{it}"}

    def _on_guarantee(self, e, it):
        self.guarantees.append(e)
        return {"gauges"}

    def _on_breaker(self, e, it):
        tier = e.get("tier") or "primary"
        chip = self.breakers.setdefault(tier, {"tier": tier, "state": "CLOSED", "rejected": 0})
        if e.get("rejected"):
            chip["rejected"] = chip.get("rejected", 0) + 1
            chip["fallback_tier"] = e.get("fallback_tier")
        if e.get("to_state"):
            chip["state"] = e["to_state"]
        for key in ("model", "failures", "successes", "opened_at", "next_probe_at", "reason"):
            if e.get(key) is not None:
                chip[key] = e[key]
        return {"breakers"}

    def _on_synthesis(self, e, it):
        self.synthesis.append(e)
        return {"synthesis"}

    def _on_memory(self, e, it):
        self.memory.append(e)
        return {"memory"}

    def _on_context(self, e, it):
        self.context = e
        return {"context"}

    def _on_degradation(self, e, it):
        self.degradation = e
        return {"degradation"}

    def _on_trial(self, e, it):
        self.trials.append(e)
        return {"trials"}

    def _on_escalation(self, e, it):
        # The person's answer to an escalated run goes in the failure-diary panel, after the trials.
        self.trials.append(e)
        return {"trials", "controls"}

    def _on_error(self, e, it):
        self.errors.append(e)
        return {"errors"}

    def _on_run_end(self, e, it):
        self.status = e.get("status") or self.status
        self.answer = e.get("answer")
        self.reason = e.get("reason") or ""
        self.approval = None
        return {"header", "controls", "gauges"}

    def _on_unknown(self, e, it):
        if it > 0:
            self.card(it).others.append(e)
            return {f"card:{it}"}
        self.others.append(e)
        return {"others"}
