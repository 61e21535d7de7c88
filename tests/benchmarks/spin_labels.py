"""The scripted label rule: where a real run loops, decided with hindsight over the whole run.

A loop is repetition without progress that goes on.  Its *start* is the first
step that repeats an earlier one without progress (so a detector cannot know
before it); its *end* is the last step of the repetition.  Kinds, tried in
this order on each run (a step belongs to at most one loop):

``rerun``      edit, rerun, same result: a check (a run/test step) is run again
               with the same normalised command after at least one edit, at most
               6 steps later, with the same result as the run before (the same
               normalised output, or both failing with the same error line) and a
               failing-looking output; at least 2 such cycles in a row (3 runs).
``repeat``     the same step (tool and normalised parameters) with the same
               normalised output, 3 or more times, each at most 3 steps after the
               one before, with no edit in between.
``same_error`` 3 or more failing steps in a row, not all the same step, whose
               error lines (normalised) are the same.
``revert``     edits that undo edits: a small edit puts back text an earlier edit of
               the same file replaced (or wrote before), twice or more within 8 steps.
``monologue``  3 or more replies in a row with no observation (messages to itself,
               or replies the agent's harness rejected as malformed).
``alternation``  two different steps taking turns, A B A B A B, each with the same
               output as its last occurrence.

Healthy runs are the resolved runs with no loop.  The rule uses what the whole
run shows (how long a repetition goes on, how the run ended); the detectors
see only the past.  Its weaknesses are written in spin_eval.py's report.
"""

from __future__ import annotations

from dataclasses import dataclass

from memfit_jupyter.reflection.progress import (
    action_key,
    edit_info,
    error_signature,
    is_check,
    is_edit,
    looks_failing,
    normalise_output,
    reverts,
)

RERUN_GAP = 6
REPEAT_GAP = 3


@dataclass
class Loop:
    kind: str
    start: int  # step index (0-based, in the run's records)
    end: int
    key: str = ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, "start": self.start, "end": self.end, "key": self.key[:200]}


def _same_result(a, b) -> bool:
    if normalise_output(a.output) == normalise_output(b.output):
        return True
    sa, sb = error_signature(a.output), error_signature(b.output)
    return bool(sa) and sa == sb and looks_failing(a) and looks_failing(b)


def _occurrences(records, pred) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        if pred(r):
            out.setdefault(action_key(r), []).append(i)
    return out


def _rerun_loops(records) -> list[Loop]:
    loops = []
    for key, idx in _occurrences(records, is_check).items():
        chain: list[int] = []  # indices of reruns that repeated the result, in a row
        for a, b in zip(idx, idx[1:], strict=False):
            between = records[a + 1:b]
            cycle = (b - a <= RERUN_GAP and any(is_edit(r) for r in between)
                     and _same_result(records[a], records[b]) and looks_failing(records[b]))
            if cycle:
                chain.append(b)
                continue
            if len(chain) >= 2:
                loops.append(Loop("rerun", chain[0], chain[-1], key))
            chain = []
        if len(chain) >= 2:
            loops.append(Loop("rerun", chain[0], chain[-1], key))
    return loops


def _repeat_loops(records) -> list[Loop]:
    loops = []
    for key, idx in _occurrences(records, lambda r: r.action_type not in ("invalid_reply", "message")).items():
        chain = [idx[0]]
        for a, b in zip(idx, idx[1:], strict=False):
            same = (b - a <= REPEAT_GAP and not any(is_edit(r) for r in records[a + 1:b])
                    and normalise_output(records[a].output) == normalise_output(records[b].output))
            if same:
                chain.append(b)
                continue
            if len(chain) >= 3:
                loops.append(Loop("repeat", chain[1], chain[-1], key))
            chain = [b]
        if len(chain) >= 3:
            loops.append(Loop("repeat", chain[1], chain[-1], key))
    return loops


def _same_error_loops(records) -> list[Loop]:
    loops, i = [], 0
    while i < len(records):
        sig = error_signature(records[i].output) if not records[i].ok else ""
        j = i + 1
        while sig and j < len(records) and not records[j].ok and error_signature(records[j].output) == sig:
            j += 1
        if sig and j - i >= 3 and len({action_key(r) for r in records[i:j]}) > 1:
            loops.append(Loop("same_error", i + 1, j - 1, sig))
        i = max(j, i + 1)
    return loops


def _monologue_loops(records) -> list[Loop]:
    loops, i = [], 0
    quiet = {"message", "invalid_reply"}
    while i < len(records):
        j = i
        while j < len(records) and records[j].action_type in quiet and not records[j].data.get("final"):
            j += 1
        if j - i >= 3:
            loops.append(Loop("monologue", i + 1, j - 1, records[i].action_type))
        i = max(j, i + 1)
    return loops


def _alternation_loops(records) -> list[Loop]:
    loops, i = [], 0
    keys = [action_key(r) for r in records]
    outs = [normalise_output(r.output) for r in records]
    while i + 5 < len(records):
        a, b = keys[i], keys[i + 1]
        j = i + 2
        while j < len(records) and keys[j] == keys[j - 2] and outs[j] == outs[j - 2]:
            j += 1
        if a != b and j - i >= 6:
            loops.append(Loop("alternation", i + 2, j - 1, f"{a} <-> {b}"))
            i = j
        else:
            i += 1
    return loops


def _revert_loops(records) -> list[Loop]:
    loops: list[Loop] = []
    edits = [(i, e) for i, r in enumerate(records) if (e := edit_info(r)) is not None]
    chain: list[int] = []
    for n, (i, e) in enumerate(edits):
        earlier = [x for j, x in edits[:n] if i - j <= 8]
        if e.small and reverts(e, earlier) and (not chain or i - chain[-1] <= 8):
            chain.append(i)
            continue
        if len(chain) >= 2:
            loops.append(Loop("revert", chain[0], chain[-1], e.path))
        chain = [i] if e.small and reverts(e, earlier) else []
    if len(chain) >= 2:
        loops.append(Loop("revert", chain[0], chain[-1], edits[-1][1].path))
    return loops


def label(records) -> list[Loop]:
    """The loops of one run (see module doc), sorted by start, none overlapping."""
    taken: set[int] = set()
    out = []
    for finder in (_rerun_loops, _repeat_loops, _revert_loops, _alternation_loops, _same_error_loops,
                   _monologue_loops):
        for loop in sorted(finder(records), key=lambda x: x.start):
            span = set(range(loop.start, loop.end + 1))
            if span & taken:
                continue
            taken |= span
            out.append(loop)
    return sorted(out, key=lambda x: x.start)
