"""Settings of SPEC-10's breakers and synthesis, with the seed's numbers as defaults."""

from __future__ import annotations

from dataclasses import dataclass

from .limits import check_number


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
        check_number("failure_threshold", self.failure_threshold, at_least=1, integer=True)
        check_number("recovery_timeout", self.recovery_timeout, above=0)
        check_number("samples", self.samples, at_least=1, integer=True)
        check_number("shell_timeout_s", self.shell_timeout_s, above=0)
