"""The typed records of the reference design (docs/MECHANISMS.md), and the run's own records.

These are plain dataclasses with no dependencies so that they load in
microseconds and serialise with ``dataclasses.asdict``.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("done", "failed", "degraded", "spin_exit", "cancelled", "escalated")


class ReflectionLevel(enum.IntEnum):
    """How hard to think about an action that just ran (docs/MECHANISMS.md §1.1)."""

    NONE = 0
    MINIMAL = 1
    STANDARD = 2
    DEEP = 3
    CRITICAL = 4

    @classmethod
    def parse(cls, value: str | int | ReflectionLevel) -> ReflectionLevel:
        if isinstance(value, cls):
            return value
        if isinstance(value, int):
            return cls(value)
        try:
            return cls[str(value).strip().upper()]
        except KeyError:
            names = ", ".join(level.name.lower() for level in cls)
            raise ValueError(f"unknown reflection level {value!r}; choose one of: {names}") from None


class SynthesisStrategy(enum.StrEnum):
    """How recursive results are combined (MECHANISMS.md §4.2)."""

    WEIGHTED = "weighted"
    CONSENSUS = "consensus"
    DIVERSE = "diverse"


#: The head of the timeline's queue after a flush: the summary of what was flushed.
SUMMARY_TAG = "[summary so far]"


@dataclass(slots=True)
class Entry:
    """One entry of the timeline, what the model sees of the past (``timeline.Timeline``)."""

    kind: str  # task, action, observation, reflection, logic_spin_warning, note, summary, ...
    iteration: int
    content: str
    role: str = "user"


@dataclass(slots=True)
class ToolResult:
    """What a tool gave back. ``ok=False`` is a failed action: it always gets reflected on."""

    output: str = ""
    ok: bool = True
    error: str | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ActionRecord:
    """One iteration: the action the model chose and what came of it."""

    iteration: int
    thought: str
    action_type: str
    tool: str
    params: dict[str, Any]
    output: str = ""
    ok: bool = True
    error: str | None = None
    duration_s: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def observation(self) -> str:
        return self.output if self.ok else f"ERROR: {self.error}\n{self.output}".rstrip()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class BudgetMetrics:
    """What something cost (the budget of MECHANISMS.md §4.3, as §4.1 uses it)."""

    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    duration_s: float = 0.0

    def add(self, other: BudgetMetrics) -> None:
        self.cost_usd += other.cost_usd
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.calls += other.calls
        self.duration_s += other.duration_s


@dataclass(slots=True)
class RecursiveResult:
    """The result of a recursive (sub-query) call (MECHANISMS.md §4.1)."""

    content: str
    confidence: float
    reasoning_trace: list[str] = field(default_factory=list)
    cost: BudgetMetrics = field(default_factory=BudgetMetrics)


@dataclass(slots=True)
class GracefulDegradationPlan:
    """What a user gets when a run stops short (MECHANISMS.md §4.4)."""

    reason: str
    partial_result: str | None
    explanation: str
    recommendations: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    duration_s: float = 0.0
    calls: int = 0
    iterations: int = 0
    tried: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class RunResult:
    """How a run ended."""

    status: str
    answer: str | None
    reason: str
    iterations: int
    cost_usd: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    duration_s: float
    plan: GracefulDegradationPlan | None = None

    @property
    def ok(self) -> bool:
        return self.status == "done"
