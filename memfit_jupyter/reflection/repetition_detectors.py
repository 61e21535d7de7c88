"""The spin detectors as first built, which fire on repetition alone: pure functions of the
action records.

``ReflectionConfig(spin_rules="repetition")`` selects them.  Layer 1 fires on N
actions of the same type and tool, whatever they found; ``repeated_error``
compares the error status line; ``code_modify`` counts small same-region edits
whatever they led to.  On real runs they fire on most healthy runs, which is
why ``detectors.py`` asks for the absence of progress first.  Each returns a
``SpinDetectionResult`` when it fires, else None.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..records import ActionRecord
from .levels import NOT_AN_ACTION, actions, same_action_type_spin
from .prompts import LAYER1_SUGGESTIONS
from .records import SpinDetectionResult


def _key(record: ActionRecord) -> tuple[str, str]:
    return record.tool, json.dumps(record.params, sort_keys=True, default=str)


def layer1(records: Sequence[ActionRecord], threshold: int) -> SpinDetectionResult | None:
    """Layer 1: the last ``threshold`` actions share action type and tool."""
    if not same_action_type_spin(records, threshold):
        return None
    last = actions(records)[-1]
    return SpinDetectionResult(
        is_spinning=True, layer=1, detector="same_action_type", action_type=last.action_type,
        consecutive_count=threshold, suggestions=list(LAYER1_SUGGESTIONS),
        reason=f"{threshold} actions in a row of type {last.action_type!r} with tool {last.tool!r}",
    )


def repeat_observation(records: Sequence[ActionRecord], threshold: int) -> SpinDetectionResult | None:
    """The same action (tool and parameters) with the same observation, ``threshold`` times in a row."""
    history = actions(records)[-threshold:]
    if threshold < 2 or len(history) < threshold:
        return None
    first = history[0]
    if any(_key(r) != _key(first) or r.observation != first.observation for r in history[1:]):
        return None
    return SpinDetectionResult(
        is_spinning=True, layer="detector", detector="repeat_observation", action_type=first.action_type,
        consecutive_count=threshold,
        reason=f"the same {first.tool} call gave the same observation {threshold} times in a row",
        suggestions=["Repeating an action that gave this observation will give it again: change the "
                     "action or its parameters"],
    )


def alternation(records: Sequence[ActionRecord], cycles: int) -> SpinDetectionResult | None:
    """Two different actions (tool and parameters) taking turns: A, B, A, B for ``cycles`` = 2."""
    n = 2 * cycles
    history = actions(records)[-n:]
    if cycles < 2 or len(history) < n:
        return None
    a, b = _key(history[0]), _key(history[1])
    if a == b or any(_key(r) != (a if i % 2 == 0 else b) for i, r in enumerate(history)):
        return None
    return SpinDetectionResult(
        is_spinning=True, layer="detector", detector="alternation", action_type=history[-1].action_type,
        consecutive_count=n,
        reason=f"two actions ({a[0]} and {b[0]}) took turns {cycles} times without progress",
        suggestions=["Going back and forth between two actions undoes the work: decide on one "
                     "direction or try something new"],
    )


def repeated_error(records: Sequence[ActionRecord], threshold: int) -> SpinDetectionResult | None:
    """The same error, ``threshold`` actions in a row."""
    history = actions(records)[-threshold:]
    if threshold < 2 or len(history) < threshold or any(r.ok for r in history):
        return None
    error = history[0].error
    if any(r.error != error for r in history[1:]):
        return None
    return SpinDetectionResult(
        is_spinning=True, layer="detector", detector="repeated_error", action_type=history[-1].action_type,
        consecutive_count=threshold, reason=f"the same error {threshold} times in a row: {error}",
        suggestions=["The error will not go away by itself: find out what causes it before acting again"],
    )


def empty_replies(records: Sequence[ActionRecord], threshold: int) -> SpinDetectionResult | None:
    """The model gave no usable reply ``threshold`` times in a row."""
    history = list(records)[-threshold:]
    if threshold < 1 or len(history) < threshold or any(r.action_type != NOT_AN_ACTION for r in history):
        return None
    return SpinDetectionResult(
        is_spinning=True, layer="detector", detector="empty_replies", action_type=NOT_AN_ACTION,
        consecutive_count=threshold,
        reason=f"no usable reply {threshold} times in a row (last: {history[-1].error})",
        suggestions=["Reply with exactly one JSON object with the fields thought, action_type, tool, params"],
    )


@dataclass(slots=True)
class ModifyRecord:
    """One modify_code edit (MECHANISMS.md §2.3)."""

    start_line: int
    end_line: int
    content: str

    @classmethod
    def of(cls, record: ActionRecord) -> ModifyRecord | None:
        data = record.data.get("modify") if record.ok else None
        if not isinstance(data, dict):
            return None
        try:
            return cls(int(data["start_line"]), int(data["end_line"]), str(data.get("content", "")))
        except (KeyError, TypeError, ValueError):
            return None


def code_modify(records: Sequence[ActionRecord], *, count: int = 3, window: int = 10, tolerance: int = 5,
                small_lines: int = 3) -> SpinDetectionResult | None:
    """Layer 3: the last ``count`` modify_code edits (among the last ``window`` actions) are small
    (at most ``small_lines`` lines) and each lies within ``tolerance`` lines of the one before.

    It is checked only when the newest action is such an edit.
    """
    history = actions(records)
    if not history or ModifyRecord.of(history[-1]) is None:
        return None
    edits = [m for m in (ModifyRecord.of(r) for r in history[-window:]) if m is not None][-count:]
    if count < 2 or len(edits) < count:
        return None
    if any(e.end_line - e.start_line + 1 > small_lines for e in edits):
        return None
    for before, after in zip(edits, edits[1:], strict=False):
        if abs(after.start_line - before.start_line) > tolerance or abs(after.end_line - before.end_line) > tolerance:
            return None
    last = edits[-1]
    return SpinDetectionResult(
        is_spinning=True, layer=3, detector="code_modify", action_type=history[-1].action_type,
        consecutive_count=count,
        reason=(f"{count} small edits in a row near lines {last.start_line}-{last.end_line}: "
                "the code modification may be stuck in a loop"),
        suggestions=["Step back and explain what each edit was meant to change",
                     "Consider a different strategy: data, algorithm, API or library"],
        next_actions=["read the whole function and the failing output before editing again"],
    )
