"""Hard execution guarantees (SPEC-10.10 to 10.15).

Limits are hard: before every model call its output tokens and its timeout
are capped to what the remaining budget allows, so a run cannot end over its
cost limit, and ends over its time limit by at most the time one tool call
overruns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import LimitsExceeded
from ..records import BudgetMetrics

log = logging.getLogger("memfit_jupyter")

#: Fewer output tokens than this cannot carry a useful reply: stop instead.
MIN_OUTPUT_TOKENS = 16
#: A call gets no less time than this; less than that left means the budget is spent.
MIN_CALL_SECONDS = 0.05


@dataclass(frozen=True)
class ExecutionGuarantees:
    """The hard limits of a run (SPEC-10.11).

    >>> ExecutionGuarantees(max_cost_usd=0.5, max_duration_seconds=60)
    ExecutionGuarantees(max_cost_usd=0.5, max_duration_seconds=60, max_recursive_calls=20)
    """

    #: Most a run may spend on model calls, in US dollars.
    max_cost_usd: float = 1.0
    #: Most a run may take, wall clock, in seconds.
    max_duration_seconds: float = 300.0
    #: Most recursive (sub-query) calls a run may make.
    max_recursive_calls: int = 20


class BudgetTracker:
    """Spends a run's budget and refuses what would overrun it."""

    def __init__(self, guarantees: ExecutionGuarantees, clock: Callable[[], float] = time.monotonic,
                 on_violation: Callable[[str, dict], None] | None = None):
        self.guarantees = guarantees
        self.clock = clock
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

    def _violate(self, kind: str, message: str, **context) -> None:
        context = {"limit": kind, **context, "cost_usd": round(self.spent.cost_usd, 6),
                   "elapsed_s": round(self.elapsed(), 3), "recursive_calls": self.recursive_calls}
        log.warning("guarantee violated: %s (%s)", message, context)
        if self.on_violation:
            self.on_violation(message, context)
        raise LimitsExceeded(message)

    # --- checks before each operation (SPEC-10.12) ------------------------------------
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
                       max_tokens: int | None, timeout: float | None) -> tuple[int | None, float]:
        """The (max_tokens, timeout) a model call may use, or LimitsExceeded."""
        left_s = self.check_time("a model call")
        timeout = left_s if timeout is None else min(timeout, left_s)
        price_in, price_out = prices
        left_usd = self.remaining_cost()
        prompt_cost = prompt_tokens * price_in
        if price_out > 0:
            affordable = int((left_usd - prompt_cost) / price_out)
            if affordable < MIN_OUTPUT_TOKENS:
                self._violate("max_cost_usd",
                              f"cost limit of ${self.guarantees.max_cost_usd:g} reached: "
                              f"${left_usd:.6f} left cannot pay for another call",
                              operation="model call", prompt_tokens=prompt_tokens)
            max_tokens = affordable if max_tokens is None else min(max_tokens, affordable)
        elif left_usd <= 0:
            self._violate("max_cost_usd", f"cost limit of ${self.guarantees.max_cost_usd:g} reached",
                          operation="model call")
        return max_tokens, timeout

    def record_call(self, cost_usd: float, prompt_tokens: int, completion_tokens: int, latency_s: float) -> None:
        self.spent.add(BudgetMetrics(cost_usd, prompt_tokens, completion_tokens, 1, latency_s))
