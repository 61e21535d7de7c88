"""Circuit breakers per model tier (docs/MECHANISMS.md §4.5).

Each tier (primary, fast, fallback) has its own breaker::

    CLOSED ──(failure_threshold consecutive failures)──► OPEN
    OPEN ──(open period over; the first call to arrive is the probe)──► HALF_OPEN
    HALF_OPEN ──(probe succeeds)──► CLOSED
    HALF_OPEN ──(probe fails)──► OPEN, with the open period doubled

The open period starts at ``recovery_timeout`` and doubles after each failed
probe, up to ``max_open_period`` (default ten times ``recovery_timeout``);
it falls back to ``recovery_timeout`` once the tier closes again.

Which failures count.  The client reports each failed attempt with its kind
(``ModelCallError.kind``).  Faults of the provider count toward opening and
fail a probe: ``rate_limit``, ``timeout``, ``server_error`` (5xx, connection
errors, malformed replies), ``unreachable`` (connection refused) and ``other`` (an unknown kind counts, to be safe).
The kinds of ``llm.failures.NOT_TIER_HEALTH_KINDS`` do not: a 400, a prompt
over the context window or a content refusal is the provider answering that
our own request is wrong, and a refused key or an unknown model ends the run
at once (no other call could succeed); they neither add to nor reset the
consecutive failures, and a probe that gets one closes the circuit, since the
provider has shown that it answers.  Such failures are counted apart, as
``not_counted``.

Exactly one probe goes through: admission (``route``) and the outcome
(``record``) each take the set's lock, and while a probe is in flight every
other call to that tier is turned away at once and answered by another tier.
A probe whose outcome never comes back (the call was cancelled before it
reached the provider) frees its slot after ``probe_lease_s``.

Why not a library: pybreaker holds its lock while the guarded call runs, so
one slow call (the probe among them) blocks every other caller of the tier,
and circuitbreaker lets every waiting caller through once the timeout has
passed; both wrap a callable, whereas the LLM client asks where to send an
attempt (``route``), which must pick the fallback tier at admission time, and
reports its outcome afterwards (``record``).  The state machine is small
enough to own.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ModelCallError
from ..llm.failures import NOT_TIER_HEALTH_KINDS

if TYPE_CHECKING:
    from ..protocols import AgentView

log = logging.getLogger("memfit_jupyter")

TIERS = ("primary", "fast", "fallback")
#: Failure kinds that are not the provider's fault: they never open a circuit (module docstring).
NOT_COUNTED_KINDS = NOT_TIER_HEALTH_KINDS


def counts_as_failure(kind: str | None) -> bool:
    """Whether a failed attempt of ``kind`` counts toward opening the circuit (see the module docstring)."""
    return kind not in NOT_COUNTED_KINDS


class CircuitState(enum.StrEnum):
    """The states of a breaker (MECHANISMS.md §4.5)."""

    CLOSED = "CLOSED"
    OPEN = "OPEN"
    HALF_OPEN = "HALF_OPEN"


@dataclass(slots=True)
class FallbackResult:
    """What a call to an OPEN tier got instead, at once (MECHANISMS.md §4.5).

    ``answered_by`` is the tier that takes the call, or None when no tier could:
    then ``open_tiers`` says which tiers are open and when each is next probed
    (wall-clock epoch seconds).
    """

    requested_tier: str
    answered_by: str | None
    open_tiers: dict[str, float | None] = field(default_factory=dict)
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"requested_tier": self.requested_tier, "answered_by": self.answered_by,
                "open_tiers": dict(self.open_tiers), "message": self.message}


class CircuitOpenError(ModelCallError):
    """No tier could take the call; ``fallback`` says which are open and when they are probed."""

    def __init__(self, fallback: FallbackResult):
        super().__init__("circuit_open", fallback.message)
        self.fallback = fallback


class CircuitBreaker:
    """One tier's breaker.  Not thread-safe on its own: ``BreakerSet`` holds the lock."""

    def __init__(self, tier: str, model: str, failure_threshold: int, recovery_timeout: float,
                 max_open_period: float | None = None):
        self.tier = tier
        self.model = model
        self.failure_threshold = failure_threshold
        self.recovery_timeout = recovery_timeout
        self.max_open_period = max_open_period if max_open_period is not None else 10 * recovery_timeout
        self.state = CircuitState.CLOSED
        self.failures = 0  # consecutive failures while CLOSED (total failures in total_failures)
        self.total_failures = 0
        self.not_counted = 0  # failures of a kind that is not the provider's fault (bad_request)
        self.failure_kinds: dict[str, int] = {}
        self.successes = 0
        self.rejected = 0
        self.probes = 0
        self.open_period = recovery_timeout
        self.opened_at: float | None = None  # on the set's clock
        self.next_probe_at: float | None = None
        self.probe_started: float | None = None
        self.transitions: list[dict[str, Any]] = []
        self.last_error = ""


class BreakerSet:
    """The breakers of an agent's tiers, shared by all its runs.

    ``route(tier)`` says which tier an attempt goes to (or raises
    ``CircuitOpenError``); ``record(tier, ok)`` reports how it went.
    ``metrics()`` gives each tier's state and counters (MECHANISMS.md §4.5).

    >>> s = BreakerSet({"primary": "memfit/demo"}, failure_threshold=1, recovery_timeout=60)
    >>> s.record("primary", ok=False, error="boom")
    >>> s.metrics()["primary"]["state"]
    'OPEN'
    """

    def __init__(self, tiers: dict[str, str], *, failure_threshold: int = 3, recovery_timeout: float = 60.0,
                 max_open_period: float | None = None, probe_lease_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time):
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if recovery_timeout <= 0:
            raise ValueError("recovery_timeout must be a positive number of seconds")
        self.clock = clock
        self.wall = wall
        self.probe_lease_s = probe_lease_s if probe_lease_s is not None else max(120.0, 2 * recovery_timeout)
        self.breakers = {tier: CircuitBreaker(tier, model, failure_threshold, recovery_timeout, max_open_period)
                         for tier, model in tiers.items() if model}
        self.fallbacks: list[FallbackResult] = []
        self._lock = threading.Lock()
        self._listeners: list[Callable[..., Any]] = []

    # --- events -------------------------------------------------------------------------
    def subscribe(self, emit: Callable[..., Any]) -> Callable[[], None]:
        """Send breaker events to ``emit(type, **fields)`` (a run's ``emit``). Returns an unsubscribe."""
        self._listeners.append(emit)
        return lambda: self._listeners.remove(emit) if emit in self._listeners else None

    def _emit(self, pending: list[dict[str, Any]], emit: Callable[..., Any] | None) -> None:
        # Emitted outside the lock: a subscriber may be slow (a widget) or call back in.
        targets = [emit] if emit is not None else list(self._listeners)
        for fields in pending:
            for target in targets:
                try:
                    target("breaker", **fields)
                except Exception:
                    log.exception("breaker event subscriber failed")

    def _wall(self, t: float | None) -> float | None:
        return None if t is None else round(self.wall() + (t - self.clock()), 3)

    def _fields(self, b: CircuitBreaker) -> dict[str, Any]:
        return {"tier": b.tier, "model": b.model, "failures": b.failures, "successes": b.successes,
                "rejected": b.rejected, "opened_at": self._wall(b.opened_at),
                "next_probe_at": self._wall(b.next_probe_at)}

    def _move(self, b: CircuitBreaker, to: CircuitState, reason: str, now: float) -> dict[str, Any]:
        old = b.state
        b.state = to
        if to is CircuitState.OPEN:
            b.opened_at = now
            b.next_probe_at = now + b.open_period
        elif to is CircuitState.CLOSED:
            b.opened_at = b.next_probe_at = None
        b.transitions.append({"from": old.value, "to": to.value, "at": self._wall(now), "reason": reason})
        level = logging.WARNING if to is CircuitState.OPEN else logging.INFO
        log.log(level, "circuit breaker %s (%s): %s -> %s: %s", b.tier, b.model, old.value, to.value, reason)
        return {**self._fields(b), "from_state": old.value, "to_state": to.value, "reason": reason}

    # --- the two calls the LLM client makes ---------------------------------------------
    def route(self, tier: str, *, purpose: str = "", iteration: int = 0,
              emit: Callable[..., Any] | None = None) -> str:
        """The tier an attempt for ``tier`` goes to; ``CircuitOpenError`` when none can take it."""
        pending: list[dict[str, Any]] = []
        try:
            with self._lock:
                b = self.breakers.get(tier)
                if b is None:
                    return tier
                now = self.clock()
                if self._admit(b, now, pending):
                    return tier
                b.rejected += 1
                answered = self._alternative(tier)
                open_tiers = {t: self._wall(x.next_probe_at) for t, x in self.breakers.items()
                              if x.state is not CircuitState.CLOSED}
                if answered:
                    message = f"{tier} tier is {b.state.value}; the {answered} tier answers instead"
                else:
                    # The open period, not the time left: the message is part of the trace, and a
                    # replay (which runs faster) must say it the same way; ``open_tiers`` has the when.
                    when = ", ".join(f"{t} (open for {x.open_period:g} s, then one probe call)"
                                     for t, x in self.breakers.items() if x.state is not CircuitState.CLOSED)
                    message = f"no tier can take the call: open circuits: {when}"
                fallback = FallbackResult(tier, answered, open_tiers, message)
                self.fallbacks.append(fallback)
                del self.fallbacks[:-100]  # keep the recent ones only: the set lives as long as the agent
                log.warning("circuit breaker activation (%s, iteration %s): %s", purpose or "call", iteration, message)
                pending.append({**self._fields(b), "rejected": True, "rejected_count": b.rejected,
                                "fallback_tier": answered, "purpose": purpose, "reason": message,
                                "open_tiers": open_tiers, "state": b.state.value})
            if answered is None:
                raise CircuitOpenError(fallback)
            return answered
        finally:
            self._emit(pending, emit)

    def _admit(self, b: CircuitBreaker, now: float, pending: list[dict[str, Any]]) -> bool:
        if b.state is CircuitState.CLOSED:
            return True
        if b.state is CircuitState.HALF_OPEN:
            if b.probe_started is not None and now - b.probe_started < self.probe_lease_s:
                return False  # the one probe is in flight: everyone else is turned away
            b.probe_started = now  # the previous probe never reported back: this call probes
            b.probes += 1
            return True
        if b.next_probe_at is not None and now >= b.next_probe_at:
            pending.append(self._move(b, CircuitState.HALF_OPEN,
                                      f"open for {b.open_period:g} s: one probe call goes through", now))
            b.probe_started = now
            b.probes += 1
            return True
        return False

    def _alternative(self, tier: str) -> str | None:
        """Who answers for an open ``tier``: the fallback tier, else the primary, if CLOSED."""
        for other in ("fallback", "primary"):
            b = self.breakers.get(other)
            if other != tier and b is not None and b.state is CircuitState.CLOSED:
                return other
        return None

    def record(self, tier: str, ok: bool, error: str = "", *, kind: str | None = None,
               emit: Callable[..., Any] | None = None) -> None:
        """The outcome of an attempt that ``route`` sent to ``tier``; a failure's ``kind`` says if it counts."""
        pending: list[dict[str, Any]] = []
        with self._lock:
            b = self.breakers.get(tier)
            if b is None:
                return
            now = self.clock()
            if not ok:
                label = kind or "other"
                b.failure_kinds[label] = b.failure_kinds.get(label, 0) + 1
                b.last_error = (f"{kind}: " if kind else "") + error[:300]
            if ok or not counts_as_failure(kind):
                if ok:
                    b.successes += 1
                else:
                    b.not_counted += 1
                if b.state is CircuitState.HALF_OPEN:
                    b.probe_started = None
                    b.failures = 0
                    b.open_period = b.recovery_timeout
                    reason = ("the probe call succeeded" if ok else
                              f"the probe call got an answer ({kind}: {error[:120]}): the provider is up")
                    pending.append(self._move(b, CircuitState.CLOSED, reason, now))
                elif b.state is CircuitState.CLOSED and ok:
                    b.failures = 0
            else:
                b.total_failures += 1
                what = f"{kind}: {error[:120]}" if kind else error[:120]
                if b.state is CircuitState.HALF_OPEN:
                    b.probe_started = None
                    b.open_period = min(b.open_period * 2, b.max_open_period)
                    pending.append(self._move(b, CircuitState.OPEN,
                                              f"the probe call failed ({what}); open for "
                                              f"{b.open_period:g} s", now))
                elif b.state is CircuitState.CLOSED:
                    b.failures += 1
                    if b.failures >= b.failure_threshold:
                        pending.append(self._move(b, CircuitState.OPEN,
                                                  f"{b.failures} failures in a row (last: {what})", now))
                # A failure reported while OPEN came from a call admitted before the circuit opened.
        self._emit(pending, emit)

    # --- monitoring (MECHANISMS.md §4.5) --------------------------------------------------
    def state(self, tier: str) -> CircuitState | None:
        b = self.breakers.get(tier)
        return b.state if b else None

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Per tier: state, failures, successes, rejected calls, opened_at, next probe time, transitions."""
        with self._lock:
            now = self.clock()
            return {
                t: {"model": b.model, "state": b.state.value, "failures": b.failures,
                    "total_failures": b.total_failures, "not_counted": b.not_counted,
                    "failure_kinds": dict(b.failure_kinds), "successes": b.successes, "rejected": b.rejected,
                    "probes": b.probes, "opened_at": self._wall(b.opened_at),
                    "next_probe_at": self._wall(b.next_probe_at),
                    "next_probe_in_s": (None if b.next_probe_at is None
                                        else round(max(0.0, b.next_probe_at - now), 3)),
                    "open_period_s": b.open_period, "failure_threshold": b.failure_threshold,
                    "recovery_timeout": b.recovery_timeout, "last_error": b.last_error,
                    "transitions": [dict(x) for x in b.transitions]}
                for t, b in self.breakers.items()
            }

    def reset(self, tier: str | None = None) -> None:
        """Close ``tier``'s breaker (all of them with None) and clear its counters."""
        with self._lock:
            for t, b in self.breakers.items():
                if tier is None or t == tier:
                    self.breakers[t] = CircuitBreaker(t, b.model, b.failure_threshold, b.recovery_timeout,
                                                      b.max_open_period)


class RunBreakers:
    """A run's view of its agent's ``BreakerSet``: the same breakers, events into this run."""

    def __init__(self, shared: BreakerSet, emit: Callable[..., Any]):
        self.shared = shared
        self.emit = emit

    def route(self, tier: str, *, purpose: str = "", iteration: int = 0) -> str:
        return self.shared.route(tier, purpose=purpose, iteration=iteration, emit=self._emit_at(iteration))

    def record(self, tier: str, ok: bool, error: str = "", *, kind: str | None = None) -> None:
        self.shared.record(tier, ok, error, kind=kind, emit=self.emit)

    def _emit_at(self, iteration: int) -> Callable[..., Any]:
        return lambda type, **fields: self.emit(type, iteration=iteration or None, **fields)

    def metrics(self) -> dict[str, dict[str, Any]]:
        return self.shared.metrics()

    def state(self, tier: str) -> CircuitState | None:
        return self.shared.state(tier)

    @property
    def fallbacks(self) -> list[FallbackResult]:
        return self.shared.fallbacks


def breakers_for(agent: AgentView) -> BreakerSet:
    """The agent's breaker set, made on first use from its tiers and settings."""
    found: BreakerSet | None = agent.__dict__.get("_breakers")
    if found is None or {t: b.model for t, b in found.breakers.items()} != {k: v for k, v in agent.tiers.items() if v}:
        found = BreakerSet(agent.tiers, failure_threshold=agent.failure_threshold,
                           recovery_timeout=agent.recovery_timeout)
        agent.__dict__["_breakers"] = found
    return found
