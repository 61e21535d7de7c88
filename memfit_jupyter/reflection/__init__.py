"""Adaptive self-reflection and spin detection (docs/MECHANISMS.md §1 and §2).

After every action the extension decides a reflection level (``levels``),
runs the five-stage pipeline (``pipeline``), runs the spin detectors
(``detectors``, ``spin``) and puts what it learned where the next model call
reads it: reflections and spin warnings in the timeline, the last three
informative reflections at the end of the next prompt (``ReflectionConfig.cache_kinds``,
``prompt_place``).  ``reflection="none"`` turns all of it off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..extension import Hooks
from ..records import ActionRecord, ReflectionLevel
from .config import DETECTORS, ReflectionConfig
from .levels import decide_level, same_action_type_spin
from .pipeline import Reflector
from .records import ActionReflection, EnvironmentalImpact, SpinDetectionResult
from .spin import SpinMonitor, SpinVerdict

if TYPE_CHECKING:
    from ..protocols import RunView

__all__ = [
    "DETECTORS", "ActionReflection", "EnvironmentalImpact", "ReflectionConfig", "ReflectionExtension",
    "SpinDetectionResult", "SpinMonitor", "SpinVerdict", "decide_level", "extension_for",
    "same_action_type_spin",
]


class ReflectionExtension(Hooks):
    """The run extension: reflection after each action, then spin detection."""

    def __init__(self, config: ReflectionConfig):
        self.config = config
        self.reflector = Reflector(config)
        self.spin = SpinMonitor(config)

    @property
    def reflections(self) -> list[ActionReflection]:
        """Every reflection of the run, in order."""
        return self.reflector.history

    def system_sections(self, run: RunView) -> list[str]:
        if self.config.prompt_place != "system":
            return []
        section = self.reflector.prompt_section(run)
        return [section] if section else []

    def prompt_tail(self, run: RunView) -> list[str]:
        if self.config.prompt_place != "end":
            return []
        section = self.reflector.prompt_section(run)
        return [section] if section else []

    def after_action(self, run: RunView, record: ActionRecord) -> None:
        cfg = self.config
        verdict = self.spin.detect(run, record)
        level, trigger = decide_level(record, run.records, tool=run.tools.get(record.tool), forced=cfg.forced,
                                      spin_threshold=cfg.spin_threshold,
                                      iteration_threshold=cfg.iteration_threshold)
        if record.ok and record.data.get("final") and level > ReflectionLevel.MINIMAL:
            # The run ends with this action: no later prompt could use a model's reflection.
            level, trigger = ReflectionLevel.MINIMAL, f"final answer: recorded only (was {trigger})"
        self.reflector.reflect(run, record, level, trigger, verdict.spinning)
        self.spin.apply(run, verdict)


def extension_for(run: RunView) -> ReflectionExtension | None:
    """The reflection extension of ``run``, or None when reflection is ``none``."""
    config = ReflectionConfig.from_agent(run.agent)
    if config.forced == ReflectionLevel.NONE:
        return None
    return ReflectionExtension(config)
