"""Settings of SPEC-10's breakers and synthesis, with the seed's numbers as defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReliabilityConfig:
    """How the circuit breakers and recursive sampling behave (seed 001, SPEC-10).

    ``Agent(failure_threshold=..., recovery_timeout=..., strategy=..., samples=...)`` fill it;
    or give one whole: ``Agent(configs=[ReliabilityConfig(samples=5)])``.  The hard limits are
    ``ExecutionGuarantees`` (``guarantees=``).
    """

    #: Consecutive provider failures that open a tier's circuit (SPEC-10.22).
    failure_threshold: int = 3
    #: Seconds an open circuit waits before one probe call goes through (SPEC-10.23).
    recovery_timeout: float = 60.0
    #: How sampled answers are combined: weighted, consensus or diverse (SPEC-10.04).
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
