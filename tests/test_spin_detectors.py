"""The heuristic spin detectors (layer 3 and the named extras): N-1 does not fire, N does."""

from __future__ import annotations

from memfit_jupyter.records import ActionRecord
from memfit_jupyter.reflection import detectors as d


def rec(i, tool="shell", params=None, ok=True, output="same", error=None, action_type="run", **data):
    return ActionRecord(iteration=i, thought="", action_type=action_type, tool=tool,
                        params=params if params is not None else {"command": "ls"},
                        output=output, ok=ok, error=error, data=data)


def edit(i, start, end, ok=True):
    record = {"path": "a.py", "start_line": start, "end_line": end, "content": f"v{i}"}
    return rec(i, tool="modify_code", action_type="edit", ok=ok,
               params={"path": "a.py", "start": start, "end": end, "content": f"v{i}"}, modify=record)


def test_repeat_observation_boundary():
    assert d.repeat_observation([rec(1), rec(2)], 3) is None
    found = d.repeat_observation([rec(1), rec(2), rec(3)], 3)
    assert found.detector == "repeat_observation" and found.consecutive_count == 3
    # same action, different observation: no
    assert d.repeat_observation([rec(1), rec(2), rec(3, output="new")], 3) is None
    # same observation, different parameters: no
    assert d.repeat_observation([rec(1), rec(2), rec(3, params={"command": "pwd"})], 3) is None


def test_alternation_boundary():
    a = {"command": "git checkout a"}
    b = {"command": "git checkout b"}
    aba = [rec(1, params=a), rec(2, params=b), rec(3, params=a)]
    assert d.alternation(aba, 2) is None
    abab = aba + [rec(4, params=b)]
    assert d.alternation(abab, 2).detector == "alternation"
    assert d.alternation(abab + [rec(5, params=a)], 3) is None
    assert d.alternation(abab + [rec(5, params=a), rec(6, params=b)], 3) is not None
    # a repeated single action is not an alternation
    assert d.alternation([rec(i, params=a) for i in range(4)], 2) is None


def test_repeated_error_boundary():
    fails = [rec(i, ok=False, error="permission denied", params={"command": f"cat {i}"}) for i in range(3)]
    assert d.repeated_error(fails[:2], 3) is None
    assert "permission denied" in d.repeated_error(fails, 3).reason
    different = fails[:2] + [rec(9, ok=False, error="no such file")]
    assert d.repeated_error(different, 3) is None
    assert d.repeated_error(fails[:2] + [rec(9)], 3) is None


def test_empty_replies_boundary():
    bad = [rec(i, tool="", action_type="invalid_reply", ok=False, error="the reply was empty") for i in range(2)]
    assert d.empty_replies(bad[:1], 2) is None
    assert d.empty_replies(bad, 2).detector == "empty_replies"
    assert d.empty_replies([bad[0], rec(5), bad[1]], 2) is None


def test_code_modify_boundary():
    two = [edit(1, 10, 11), edit(2, 12, 12)]
    assert d.code_modify(two) is None
    three = two + [edit(3, 14, 16)]
    found = d.code_modify(three)
    assert found.layer == 3 and "lines 14-16" in found.reason
    # other actions between the edits do not break the run of edits
    assert d.code_modify([edit(1, 10, 10), rec(2), edit(3, 11, 11), rec(4), edit(5, 12, 12)]) is not None
    # but the check only runs on an edit
    assert d.code_modify(three + [rec(4)]) is None


def test_code_modify_region_and_size_limits():
    # the region: start and end both within 5 lines of the previous edit
    assert d.code_modify([edit(1, 10, 10), edit(2, 15, 15), edit(3, 20, 20)]) is not None
    assert d.code_modify([edit(1, 10, 10), edit(2, 16, 16), edit(3, 17, 17)]) is None
    # small: at most 3 lines
    assert d.code_modify([edit(1, 10, 12), edit(2, 10, 12), edit(3, 10, 12)]) is not None
    assert d.code_modify([edit(1, 10, 13), edit(2, 10, 12), edit(3, 10, 12)]) is None
    # failed edits changed nothing: they do not count
    assert d.code_modify([edit(1, 10, 10), edit(2, 10, 10, ok=False), edit(3, 10, 10)]) is None
    # configurable
    assert d.code_modify([edit(1, 10, 10), edit(2, 10, 10)], count=2) is not None
    assert d.code_modify([edit(1, 10, 10), edit(2, 18, 18), edit(3, 18, 18)], tolerance=8) is not None
