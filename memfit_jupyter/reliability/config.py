"""Settings of the breakers and synthesis, with the defaults of docs/MECHANISMS.md §4."""

from __future__ import annotations

from dataclasses import dataclass

from ..records import SynthesisStrategy
from .limits import check_number


@dataclass(frozen=True)
class ReliabilityConfig:
    """How the circuit breakers and recursive sampling behave (MECHANISMS.md §4.1-4.5).

    ``Agent(failure_threshold=..., recovery_timeout=..., strategy=..., samples=...)`` fill it;
    or give one whole: ``Agent(configs=[ReliabilityConfig(samples=5)])``.  The hard limits are
    ``ExecutionGuarantees`` (``guarantees=``).
    """

    #: Consecutive provider failures that open a tier's circuit (MECHANISMS.md §4.5).
    failure_threshold: int = 3
    #: Seconds an open circuit waits before one probe call goes through (MECHANISMS.md §4.5).
    recovery_timeout: float = 60.0
    #: How sampled answers are combined: weighted, consensus or diverse (MECHANISMS.md §4.2).
    strategy: str = "weighted"
    #: Samples per sub-query (1 = no fan-out).
    samples: int = 1
    #: Longest a shell command may run (less when the run has less time left).
    shell_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        check_number("failure_threshold", self.failure_threshold, at_least=1, integer=True)
        check_number("recovery_timeout", self.recovery_timeout, above=0)
        check_number("samples", self.samples, at_least=1, integer=True)
        # Checked here, not when the first synthesis runs: by then the samples are paid for.
        names = [s.value for s in SynthesisStrategy]
        if str(getattr(self.strategy, "value", self.strategy)).lower() not in names:
            raise ValueError(f"unknown synthesis strategy {self.strategy!r}; choose one of: {', '.join(names)}")
        check_number("shell_timeout_s", self.shell_timeout_s, above=0)
