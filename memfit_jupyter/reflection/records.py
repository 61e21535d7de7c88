"""The records that reflection and spin detection produce (docs/MECHANISMS.md §1-2).

Plain dataclasses with the reference design's fields (snake_case, as its JSON tags
spell them), plus a few fields the trace and the widget need (tool, trigger,
summary, memory_used, layer, detector).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class EnvironmentalImpact:
    """Stage 2: what an action did to its environment (MECHANISMS.md §1.3)."""

    state_changes: list[str] = field(default_factory=list)
    resource_usage: dict[str, Any] = field(default_factory=dict)
    side_effects: list[str] = field(default_factory=list)
    positive_effects: list[str] = field(default_factory=list)
    negative_effects: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ActionReflection:
    """Stage 1 onwards: one reflection on one action (MECHANISMS.md §1.3)."""

    action_type: str
    action_params: dict[str, Any]
    execution_time: float
    iteration_num: int
    success: bool
    error_message: str = ""
    environmental_impact: EnvironmentalImpact | None = None
    suggestions: list[str] = field(default_factory=list)
    reflection_level: str = "MINIMAL"
    reflection_timestamp: str = ""
    is_spinning: bool = False
    spin_reason: str = ""
    # Beyond the reference design: what the trace and the widget show.
    tool: str = ""
    trigger: str = ""
    summary: str = ""
    memory_used: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class SpinDetectionResult:
    """What a spin detector found (MECHANISMS.md §2), with the layer or detector that found it."""

    is_spinning: bool
    reason: str = ""
    suggestions: list[str] = field(default_factory=list)
    next_actions: list[str] = field(default_factory=list)
    action_type: str = ""
    consecutive_count: int = 0
    #: 1, 2, 3 or "detector".
    layer: int | str = 1
    #: The detector's name: same_action_type, logic_spin, code_modify, repeat_observation, ...
    detector: str = ""
    #: Layer 2 only: the model judged that the task moves forward despite the repetition.
    is_task_progressing: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
