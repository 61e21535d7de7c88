"""Spin detectors that ask for repetition *without progress*: pure functions of a run's steps.

``History`` derives, once per step, what the detectors compare: the step's
action key (tool and normalised parameters), its normalised output, its error
line, whether it is an edit or a check, and whether it made progress: a
non-edit step makes progress when its output (normalised; for a failure, with
the names it failed on folded away) was not seen in the last ``window`` steps,
when a check's status changed since its last run, or when it is a step not
taken in the window that succeeded (or a search, which rules a place out even
when it finds nothing).
Edits make no progress by themselves; the check after them shows whether they
did.  Each detector returns a ``SpinDetectionResult`` when it fires, else None.

==================  ===========================================================
same_action_type    layer 1: the last N steps share tool, action type and shell
                    program, none is an edit, and none after the first made progress
code_modify         layer 3: N small edits in the same region, each reverted or
                    followed by no check whose result changed
repeat_observation  the same step with the same output, N times, no edit between
edit_rerun          edit, rerun the same check, same failing result: N cycles
repeated_error      N failing steps in a row with the same normalised error line
alternation         A, B, A, B...: two steps taking turns with unchanged outputs
empty_replies       N replies in a row that were no usable action
monologue           N messages in a row with no observation (OpenHands' pattern)
context_window      N context condensations in a row, nothing between (OpenHands')
==================  ===========================================================
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..records import ActionRecord
from ..tools import command_program
from .levels import NOT_AN_ACTION
from .progress import (
    Edit,
    action_key,
    edit_info,
    error_signature,
    fold_names,
    is_check,
    is_edit,
    looks_failing,
    normalise_output,
    reverts,
    same_region,
    shell_command,
)
from .prompts import LAYER1_SUGGESTIONS
from .records import SpinDetectionResult

#: Detectors whose finding is deterministic evidence of a loop: only a verdict with one of them
#: can end a run (a layer-2 "spinning" alone warns).  ``empty_replies`` warns and never ends a
#: run: on recorded SWE-bench runs, streaks of rejected replies were as common on resolved runs
#: as on failed ones (docs/EVIDENCE.md); ``max_bad_replies`` is the setting that ends on them.
EVIDENCE = frozenset({"repeat_observation", "edit_rerun", "repeated_error", "code_modify", "alternation",
                      "monologue", "context_window"})
_QUIET = ("message",)


@dataclass(slots=True)
class Step:
    """One record and what the detectors derive from it."""

    index: int
    record: ActionRecord
    key: str
    type_key: str
    out: str
    error: str
    failing: bool
    edit: Edit | None
    check: bool
    progress: bool
    #: A check: whether its result differs from its previous run (None: it had not run before).
    changed: bool | None = None


@dataclass
class History:
    """The steps of a run, derived incrementally (``add`` once per new record)."""

    window: int = 10
    steps: list[Step] = field(default_factory=list)
    #: The edits among the steps, in order (so that a detector reads the last few without a walk).
    edits: list[Edit] = field(default_factory=list)
    _last_check: dict[str, Step] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[ActionRecord], window: int = 10) -> History:
        history = cls(window)
        for r in records:
            history.add(r)
        return history

    def add(self, record: ActionRecord) -> Step:
        out = normalise_output(record.output if record.ok else f"{record.error or ''}\n{record.output}")
        if not record.ok:
            out = fold_names(out)  # a failure says what failed; which name it failed on is no news
        command = shell_command(record)
        program = command_program(command) if command else ""
        edit = edit_info(record) if is_edit(record) else None
        check = is_check(record)
        step = Step(index=len(self.steps), record=record, key=action_key(record),
                    type_key=f"{record.tool}:{record.action_type}:{program}", out=out,
                    error=error_signature(record.output) if looks_failing(record) else "",
                    failing=looks_failing(record), edit=edit, check=check, progress=False)
        if not is_edit(record) and record.action_type not in (NOT_AN_ACTION, *_QUIET):
            window = self.steps[-self.window:]
            step.progress = out not in {s.out for s in window if s.edit is None}
            if (record.ok or record.action_type == "search") and step.key not in {s.key for s in window}:
                # a new question that got an answer is news even when the answer is not (a probe
                # printing True again); a new search that finds nothing still rules a place out
                step.progress = True
            previous = self._last_check.get(step.key)
            if check and previous is not None:
                step.changed = previous.out != out or previous.failing != step.failing
                if previous.failing != step.failing:
                    step.progress = True  # the check's status changed: something moved
        if check:
            self._last_check[step.key] = step
        if edit is not None:
            self.edits.append(edit)
        self.steps.append(step)
        return step

    def actions(self, last: int | None = None) -> list[Step]:
        """The steps that are actions (unusable replies left out); with ``last``, only the last
        ``last`` of them, found from the end (a detector per step must not walk the whole run)."""
        if last is None:
            return [s for s in self.steps if s.record.action_type != NOT_AN_ACTION]
        out: list[Step] = []
        for s in reversed(self.steps):
            if len(out) >= last:
                break
            if s.record.action_type != NOT_AN_ACTION:
                out.append(s)
        return out[::-1]


def _h(steps: History | Iterable[ActionRecord]) -> History:
    """Detectors take a ``History`` or, for one-off checks, a list of records."""
    return steps if isinstance(steps, History) else History.of(steps)


def _result(detector: str, layer: int | str, last: Step, count: int, reason: str, suggestions: list[str],
            next_actions: list[str] | None = None) -> SpinDetectionResult:
    return SpinDetectionResult(is_spinning=True, layer=layer, detector=detector,
                               action_type=last.record.action_type, consecutive_count=count, reason=reason,
                               suggestions=suggestions, next_actions=list(next_actions or []))


def layer1(h: History | Iterable[ActionRecord], threshold: int) -> SpinDetectionResult | None:
    """Layer 1: the last ``threshold`` steps share tool, action type and program, none is an
    edit, and none after the first brought new output or a changed status."""
    h = _h(h)
    steps = h.actions(threshold)
    if threshold < 2 or len(steps) < threshold:
        return None
    last = steps[-1]
    if any(s.type_key != last.type_key or s.edit is not None or is_edit(s.record)
           or s.record.action_type in _QUIET for s in steps):
        return None
    if any(s.progress for s in steps[1:]):
        return None
    return _result("same_action_type", 1, last, threshold,
                   f"{threshold} steps in a row of type {last.record.action_type!r} with tool "
                   f"{last.record.tool!r} and nothing new in their output", list(LAYER1_SUGGESTIONS))


def repeat_observation(h: History | Iterable[ActionRecord], threshold: int, gap: int = 3) -> SpinDetectionResult | None:
    """The newest step repeats an earlier one (same key, same output) ``threshold`` times in all,
    each within ``gap`` steps of the one before, with no edit between."""
    h = _h(h)
    steps = h.steps
    if threshold < 2 or not steps or steps[-1].edit is not None or steps[-1].record.action_type in (
            NOT_AN_ACTION, *_QUIET):
        return None
    last, count, at = steps[-1], 1, len(steps) - 1
    for j in range(len(steps) - 2, max(-1, len(steps) - 2 - gap * threshold), -1):
        s = steps[j]
        if s.edit is not None or is_edit(s.record):
            break
        if s.key == last.key:
            if s.out != last.out or at - j > gap:
                break
            count, at = count + 1, j
            if count >= threshold:
                return _result("repeat_observation", "detector", last, count,
                               f"the same {last.record.tool} step gave the same output {count} times",
                               ["Repeating a step that gave this output will give it again: change the "
                                "step or its parameters"])
    return None


def edit_rerun(h: History | Iterable[ActionRecord], cycles: int = 2, gap: int = 6) -> SpinDetectionResult | None:
    """Edit, rerun, same result: the newest step reruns a check after an edit and gets the same
    failing result as the run before, ``cycles`` times in a row."""
    h = _h(h)
    steps = h.steps
    if cycles < 1 or not steps or not steps[-1].check or not steps[-1].failing:
        return None
    last = steps[-1]
    runs = [s for s in steps[max(0, len(steps) - 1 - gap * (cycles + 1)):] if s.check and s.key == last.key]
    count = 0
    for before, after in zip(reversed(runs[:-1]), reversed(runs), strict=False):
        between = steps[before.index + 1:after.index]
        same = after.out == before.out or (after.error and after.error == before.error and before.failing)
        if after.index - before.index > gap or not any(s.edit is not None for s in between) or not same:
            break
        count += 1
        if count >= cycles:
            files = sorted({s.edit.path for s in steps[runs[-1 - count].index:] if s.edit and s.edit.path})
            return _result("edit_rerun", "detector", last, count + 1,
                           f"{count} edits{' to ' + ', '.join(files[:3]) if files else ''} left "
                           f"{last.record.tool} {shell_command(last.record)[:80]!r} failing the same way",
                           ["The edits do not reach the failure: read the failing output again and find "
                            "what it points at before the next edit",
                            "Check that the code the test runs is the code being edited"],
                           ["print or inspect the value the failure is about", "revert to a known state"])
    return None


def repeated_error(h: History | Iterable[ActionRecord], threshold: int) -> SpinDetectionResult | None:
    """``threshold`` failing steps in a row whose normalised error line is the same."""
    h = _h(h)
    steps = h.actions(threshold)
    if threshold < 2 or len(steps) < threshold:
        return None
    error = steps[-1].error
    if not error or any(s.record.ok or s.error != error for s in steps):
        return None
    return _result("repeated_error", "detector", steps[-1], threshold,
                   f"the same error {threshold} times in a row: {error[:200]}",
                   ["The error will not go away by itself: find out what causes it before acting again"])


def alternation(h: History | Iterable[ActionRecord], cycles: int) -> SpinDetectionResult | None:
    """Two different steps taking turns ``cycles`` times (A, B, A, B for 2), outputs unchanged."""
    h = _h(h)
    n = 2 * cycles
    steps = h.actions(n)
    if cycles < 2 or len(steps) < n:
        return None
    a, b = steps[0], steps[1]
    if a.key == b.key:
        return None
    for i, s in enumerate(steps):
        model = a if i % 2 == 0 else b
        if s.key != model.key or s.out != model.out:
            return None
    return _result("alternation", "detector", steps[-1], n,
                   f"two steps ({a.record.tool} and {b.record.tool}) took turns {cycles} times with "
                   "the same outputs", ["Going back and forth between two steps undoes the work: decide on "
                                        "one direction or try something new"])


def empty_replies(h: History | Iterable[ActionRecord], threshold: int) -> SpinDetectionResult | None:
    """The model gave no usable reply ``threshold`` times in a row."""
    h = _h(h)
    steps = h.steps[-threshold:]
    if threshold < 1 or len(steps) < threshold or any(s.record.action_type != NOT_AN_ACTION for s in steps):
        return None
    return _result("empty_replies", "detector", steps[-1], threshold,
                   f"no usable reply {threshold} times in a row (last: {steps[-1].record.error})",
                   ["Reply with exactly one action in the format the task asks for"])


def monologue(h: History | Iterable[ActionRecord], threshold: int = 3) -> SpinDetectionResult | None:
    """``threshold`` messages in a row with no observation: the agent talks to itself."""
    h = _h(h)
    steps = h.steps[-threshold:]
    if threshold < 2 or len(steps) < threshold:
        return None
    if any(s.record.action_type not in _QUIET or s.record.data.get("final") for s in steps):
        return None
    return _result("monologue", "detector", steps[-1], threshold,
                   f"{threshold} messages in a row with no action or observation between them",
                   ["Act: run a command or read a file instead of writing another message"])


def context_window(h: History | Iterable[ActionRecord], threshold: int = 3) -> SpinDetectionResult | None:
    """``threshold`` context condensations in a row with nothing between them."""
    h = _h(h)
    steps = h.steps[-threshold:]
    if threshold < 2 or len(steps) < threshold or any(s.record.action_type != "condense" for s in steps):
        return None
    return _result("context_window", "detector", steps[-1], threshold,
                   f"the context was condensed {threshold} times in a row and still does not fit",
                   ["Drop long outputs from the context or start a new run with a summary"])


def code_modify(h: History | Iterable[ActionRecord], *, count: int = 3, window: int = 10, tolerance: int = 5,
                small_lines: int = 3) -> SpinDetectionResult | None:
    """Layer 3: the last ``count`` edits (among the last ``window`` steps) are small, each in the
    region of the one before, and none led anywhere: between each edit and the next, a check
    gave the same result as its run before; or, with no check between them, the next edit
    put back earlier text or rewrote exactly the same place.  An edit followed by a check whose
    result changed (a debug print that printed something new) leads somewhere.  Checked only
    when the newest step is an edit."""
    h = _h(h)
    steps = h.steps
    if count < 2 or not steps or steps[-1].edit is None:
        return None
    edits = [(s, s.edit) for s in steps[-window:] if s.edit is not None][-count:]
    if len(edits) < count or any(e.lines > small_lines for _, e in edits):
        return None
    earlier = h.edits[-window:]  # not a walk of every step: this runs after each edit
    for (before, before_edit), (after, after_edit) in zip(edits, edits[1:], strict=False):
        if not same_region(before_edit, after_edit, tolerance):
            return None
        checks = [s for s in steps[before.index + 1:after.index] if s.check]
        if any(s.changed for s in checks):
            return None  # the edit led somewhere
        if not any(s.changed is False for s in checks):  # no check told: only the edits themselves can
            previous = [e for e in earlier if e is not after_edit]
            if not (reverts(after_edit, previous) or _same_place(before_edit, after_edit)):
                return None
    last, last_edit = edits[-1]
    where = (f"lines {last_edit.start}-{last_edit.end}" if last_edit.start is not None
             else f"the same lines of {last_edit.path or 'the file'}")
    return _result("code_modify", 3, last, count,
                   f"{count} small edits in a row near {where}, none of them changing what the checks "
                   "show: the code modification may be stuck in a loop",
                   ["Step back and explain what each edit was meant to change",
                    "Consider a different strategy: data, algorithm, API or library"],
                   ["read the whole function and the failing output before editing again"])


def _same_place(a: Edit, b: Edit) -> bool:
    """``b`` rewrites exactly what ``a`` changed: the same line range, or the text ``a`` wrote."""
    if a.start is not None and b.start is not None:
        return (a.start, a.end) == (b.start, b.end)
    return b.old is not None and " ".join(b.old.split()) == " ".join(a.new.split())
