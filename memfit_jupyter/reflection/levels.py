"""Which reflection level an action gets: the decision tree of docs/MECHANISMS.md §1.2."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..records import ActionRecord, ReflectionLevel

#: The records that are not actions the model chose (an unusable reply).
NOT_AN_ACTION = "invalid_reply"


def actions(records: Sequence[ActionRecord]) -> list[ActionRecord]:
    """The records that are real actions (unusable replies left out)."""
    return [r for r in records if r.action_type != NOT_AN_ACTION]


def same_action_type_spin(records: Sequence[ActionRecord], threshold: int) -> bool:
    """Layer 1 (MECHANISMS.md §2.1): the last ``threshold`` actions share action type and tool."""
    history = actions(records)
    if threshold <= 0 or len(history) < threshold:
        return False
    last = history[-1]
    return all(r.action_type == last.action_type and r.tool == last.tool for r in history[-threshold:])


def requested_level(record: ActionRecord, tool: Any) -> tuple[ReflectionLevel, str] | None:
    """The level the action asked for, else the one its tool asks for, with who asked.

    NONE, or a name that is not a level, counts as no request.
    """
    asked = record.data.get("requested_reflection")
    if asked:
        try:
            level = ReflectionLevel.parse(asked)
        except ValueError:
            level = ReflectionLevel.NONE
        if level:
            return level, "the action"
    declared = getattr(tool, "reflection_level", None)
    if declared:
        return ReflectionLevel.parse(declared), f"tool {record.tool}"
    return None


def decide_level(record: ActionRecord, records: Sequence[ActionRecord], *, tool: Any = None,
                 forced: ReflectionLevel | None = None, spin_threshold: int = 3,
                 iteration_threshold: int = 5) -> tuple[ReflectionLevel, str]:
    """The level for ``record`` (the last of ``records``) and the trigger that chose it.

    A forced level wins; then an action that failed gets CRITICAL (no silent
    failures); then a level the action or its tool asks for; then, after
    ``iteration_threshold`` iterations, a same-action-type spin gets STANDARD;
    then a complex tool gets DEEP; anything else gets MINIMAL (a record, no model call).
    """
    if forced is not None:
        return forced, f"forced: reflection={forced.name.lower()}"
    if not record.ok:
        return ReflectionLevel.CRITICAL, "failure: the action ended in error"
    asked = requested_level(record, tool)
    if asked is not None:
        level, who = asked
        return level, f"requested: {who} asked for {level.name.lower()}"
    if record.iteration > iteration_threshold and same_action_type_spin(records, spin_threshold):
        return ReflectionLevel.STANDARD, (f"spin: iteration {record.iteration} > {iteration_threshold} and "
                                          f"{spin_threshold} actions in a row of type {record.action_type!r}")
    if getattr(tool, "complex", False):
        return ReflectionLevel.DEEP, f"complex: tool {record.tool} is marked complex"
    return ReflectionLevel.MINIMAL, "default: a simple action that succeeded"
