"""Hard execution guarantees (docs/MECHANISMS.md §4.3).

Limits are hard: before every model call its output tokens and its timeout
are capped to what the remaining budget allows (the prompt's estimated tokens,
with a margin for tokenizers that count more than the estimate, times the
input price, plus the capped output), so a run cannot end over its cost
limit.  Time: every model call's timeout is capped to the time left, and the
call is cut off at that deadline by the wall clock (``deadline.py``: the HTTP
client's own timeout applies per phase and lets a call run seconds over);
an abandoned call is charged the worst-case cost of its capped request, which
the cost cap has already made affordable, so the cost limit stays hard too.
Every model call, tool call and recursive call is refused with less than
``MIN_CALL_SECONDS`` left, so a run ends over ``max_duration_seconds`` by at
most ``DURATION_TOLERANCE_S`` (the loop's own bookkeeping after the last
deadline), unless one tool call itself overruns: shell commands get a timeout
no longer than the time left, Python code cannot be cut short.

On exhaustion the run ends "degraded" with a ``GracefulDegradationPlan``;
``override(run, confirm=True, max_cost_usd=...)`` (``run.override``) raises a
limit and lets a degraded run go on.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import LimitsExceeded, MemfitError
from ..records import BudgetMetrics
from .deadline import call_with_deadline
from .limits import check_number

if TYPE_CHECKING:
    from ..protocols import RunView

T = TypeVar("T")

log = logging.getLogger("memfit_jupyter")

#: Fewer output tokens than this cannot carry a useful reply: stop instead.
MIN_OUTPUT_TOKENS = 16
#: A call gets no less time than this; less than that left means the budget is spent.
MIN_CALL_SECONDS = 0.05
#: How far past max_duration_seconds a run may end (see the module docstring): the wake-up of the
#: waiting thread after a model call's deadline and the loop's bookkeeping (events, the degradation
#: plan) on a loaded 2-core machine.  Before model calls had a wall-clock deadline this was 1.5 s:
#: a call capped to 1.7 s against a server that never answered returned after about 2.7 s.
DURATION_TOLERANCE_S = 0.25
#: Prompt tokens are estimated at four characters a token; real tokenizers may count more.
PROMPT_TOKEN_MARGIN = 1.2


@dataclass(frozen=True)
class ExecutionGuarantees:
    """The hard limits of a run (MECHANISMS.md §4.3).

    >>> ExecutionGuarantees(max_cost_usd=0.5, max_duration_seconds=60)
    ExecutionGuarantees(max_cost_usd=0.5, max_duration_seconds=60, max_recursive_calls=20)
    """

    #: Most a run may spend on model calls, in US dollars.
    max_cost_usd: float = 1.0
    #: Most a run may take, wall clock, in seconds.
    max_duration_seconds: float = 300.0
    #: Most recursive (sub-query) calls a run may make.
    max_recursive_calls: int = 20

    def __post_init__(self) -> None:
        # Here, not in each caller: a string, nan or inf would fail deep inside a run (or, nan,
        # compare false against every elapsed time and give a run with no limit at all).
        check_number("max_cost_usd", self.max_cost_usd, above=0)
        check_number("max_duration_seconds", self.max_duration_seconds, above=0)
        check_number("max_recursive_calls", self.max_recursive_calls, at_least=0, integer=True)


class BudgetTracker:
    """Spends a run's budget and refuses what would overrun it."""

    def __init__(self, guarantees: ExecutionGuarantees, clock: Callable[[], float] = time.monotonic,
                 on_violation: Callable[[str, dict[str, Any]], None] | None = None,
                 runner: Callable[[Callable[[], Any], float], Any] = call_with_deadline):
        self.guarantees = guarantees
        self.clock = clock
        #: ``runner(fn, seconds)`` runs a model call under a hard deadline (the clock's seconds).
        self.runner = runner
        self.started = clock()
        self.spent = BudgetMetrics()
        self.recursive_calls = 0
        self.on_violation = on_violation

    # --- what is left -----------------------------------------------------------------
    def elapsed(self) -> float:
        return self.clock() - self.started

    def remaining_cost(self) -> float:
        return self.guarantees.max_cost_usd - self.spent.cost_usd

    def remaining_time(self) -> float:
        return self.guarantees.max_duration_seconds - self.elapsed()

    def _violate(self, kind: str, message: str, **context: Any) -> None:
        context = {"limit": kind, **context, "cost_usd": round(self.spent.cost_usd, 6),
                   "elapsed_s": round(self.elapsed(), 3), "recursive_calls": self.recursive_calls}
        log.warning("guarantee violated: %s (%s)", message, context)
        if self.on_violation:
            self.on_violation(message, context)
        raise LimitsExceeded(message, limit=kind)

    # --- checks before each operation (MECHANISMS.md §4.3) ----------------------------
    def check_time(self, operation: str) -> float:
        left = self.remaining_time()
        if left < MIN_CALL_SECONDS:
            self._violate("max_duration_seconds",
                          f"time limit of {self.guarantees.max_duration_seconds:g} s reached before {operation}",
                          operation=operation)
        return left

    def check_recursive(self) -> None:
        self.check_time("a recursive call")
        if self.recursive_calls >= self.guarantees.max_recursive_calls:
            self._violate("max_recursive_calls",
                          f"limit of {self.guarantees.max_recursive_calls} recursive calls reached",
                          operation="recursive call")
        self.recursive_calls += 1

    def cap_model_call(self, prompt_tokens: int, prices: tuple[float, float],
                       max_tokens: int | None, timeout: float | None,
                       min_tokens: int = MIN_OUTPUT_TOKENS) -> tuple[int | None, float]:
        """The (max_tokens, timeout) a model call may use, or LimitsExceeded when fewer than
        ``min_tokens`` (the purpose's useful reply size) are affordable: never buy a cut-off reply."""
        left_s = self.check_time("a model call")
        timeout = left_s if timeout is None else min(timeout, left_s)
        price_in, price_out = prices
        left_usd = self.remaining_cost()
        prompt_cost = prompt_tokens * PROMPT_TOKEN_MARGIN * price_in
        if price_out > 0:
            affordable = int((left_usd - prompt_cost) / price_out)
            if affordable < max(MIN_OUTPUT_TOKENS, min_tokens):
                self._violate("max_cost_usd",
                              f"cost limit of ${self.guarantees.max_cost_usd:g} reached: "
                              f"${left_usd:.6f} left cannot pay for a useful reply "
                              f"({max(MIN_OUTPUT_TOKENS, min_tokens)} output tokens)",
                              operation="model call", prompt_tokens=prompt_tokens)
            max_tokens = affordable if max_tokens is None else min(max_tokens, affordable)
        elif left_usd <= 0:
            self._violate("max_cost_usd", f"cost limit of ${self.guarantees.max_cost_usd:g} reached",
                          operation="model call")
        return max_tokens, timeout

    def worst_case_cost(self, prompt_tokens: int, prices: tuple[float, float], max_tokens: int | None) -> float:
        """The most a model call capped by ``cap_model_call`` can cost: what an abandoned call is charged."""
        price_in, price_out = prices
        return prompt_tokens * PROMPT_TOKEN_MARGIN * price_in + (max_tokens or 0) * price_out

    def run_call(self, fn: Callable[[], T], timeout: float) -> T:
        """``fn()`` cut off at ``timeout`` or at the end of the time budget, whichever comes first.

        Raises ``deadline.DeadlineExceeded`` when cut off.
        """
        value: T = self.runner(fn, max(0.0, min(timeout, self.remaining_time())))
        return value

    def charge(self, what: str, fn: Callable[[], T]) -> T:
        """Start-up work of the run (importing litellm: seconds on a first call), charged to its
        clock: refused with too little time left, cut off at the end of the time budget (``fn``
        goes on on its worker and its result is kept for later runs), and checked again after.
        So even the first run of a process ends within its time limit."""
        from .deadline import DeadlineExceeded

        left = self.check_time(what)
        try:
            value: T = self.runner(fn, left)
        except DeadlineExceeded:
            self._violate("max_duration_seconds",
                          f"time limit of {self.guarantees.max_duration_seconds:g} s reached during {what}",
                          operation=what)
        self.check_time(f"the first step after {what}")
        return value

    def record_call(self, cost_usd: float, prompt_tokens: int, completion_tokens: int, latency_s: float) -> None:
        self.spent.add(BudgetMetrics(cost_usd, prompt_tokens, completion_tokens, 1, latency_s))


class OverrideRefused(MemfitError, PermissionError):
    """An override without explicit confirmation, or of a run that cannot go on."""


def load_model_library(run: RunView) -> None:
    """Import litellm for ``run`` if its calls go through litellm and it is not imported yet,
    charged to the run's time budget (``BudgetTracker.charge``)."""
    from ..llm.backend import LiteLLMBackend, import_litellm, litellm_loaded

    if isinstance(run.backend, LiteLLMBackend) and not litellm_loaded():
        run.budget.charge("loading litellm (the model library: once per process)", import_litellm)


_LIMITS = ("max_cost_usd", "max_duration_seconds", "max_recursive_calls")


def override(run: RunView, *, confirm: bool = False, **limits: Any) -> ExecutionGuarantees:
    """Raise a run's limits (MECHANISMS.md §4.3), with explicit confirmation; a degraded run goes on.

    >>> run.override(confirm=True, max_cost_usd=2.0)   # doctest: +SKIP
    """
    if confirm is not True:
        raise OverrideRefused("overriding a guarantee needs explicit confirmation: "
                              "run.override(confirm=True, max_cost_usd=...)")
    unknown = sorted(set(limits) - set(_LIMITS))
    if unknown:
        raise ValueError(f"unknown limit(s) {', '.join(unknown)}; limits are: {', '.join(_LIMITS)}")
    changes = {k: v for k, v in limits.items() if v is not None}
    if not changes:
        raise ValueError("say which limit to raise, e.g. run.override(confirm=True, max_cost_usd=2.0)")
    if run.status not in ("pending", "running", "degraded"):
        raise OverrideRefused(f"only a degraded or unfinished run can be overridden; this one is {run.status!r}")
    budget = run.budget
    spent = {"max_cost_usd": budget.spent.cost_usd, "max_duration_seconds": budget.elapsed(),
             "max_recursive_calls": budget.recursive_calls}
    previous = budget.guarantees
    raised: ExecutionGuarantees = dataclasses.replace(previous, **changes)  # checks each value
    for key, value in changes.items():
        if value <= spent[key]:
            raise ValueError(f"{key}={value:g} is not above what the run has already used ({spent[key]:g})")
    budget.guarantees = raised
    new = dataclasses.asdict(raised)
    message = "limits raised by the person: " + ", ".join(f"{k} {getattr(previous, k):g} -> {v:g}"
                                                            for k, v in changes.items())
    log.warning("guarantee override: %s (run %s, was %s)", message, run.id, run.status)
    run.emit("guarantee", violated=False, override=True, confirmed=True, limit=",".join(changes),
             message=message, limits=new, previous=dataclasses.asdict(previous),
             cost_usd=round(budget.spent.cost_usd, 6), elapsed_s=round(budget.elapsed(), 3),
             recursive_calls=budget.recursive_calls)
    if run.status == "degraded":
        # step() goes on from where the run stopped, under the new limits.
        run.reopen(f"[SYSTEM] The person raised the limits ({message}). Continue the task.")
    return raised
