"""Settings of the breakers and synthesis, with the defaults of docs/MECHANISMS.md §4."""

from __future__ import annotations

from dataclasses import dataclass


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
        if self.failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if self.recovery_timeout <= 0:
            raise ValueError("recovery_timeout must be a positive number of seconds")
