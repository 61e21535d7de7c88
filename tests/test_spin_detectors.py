"""The spin detectors at their boundaries: N-1 does not fire, N does; progress stops them."""

from __future__ import annotations

from memfit_jupyter.records import ActionRecord
from memfit_jupyter.reflection import detectors as d
from memfit_jupyter.reflection import repetition_detectors as rep
from memfit_jupyter.reflection.progress import edit_info, error_signature, normalise_output, reverts


def rec(i, tool="shell", params=None, ok=True, output="same", error=None, action_type="run", thought="", **data):
    return ActionRecord(iteration=i, thought=thought, action_type=action_type, tool=tool,
                        params=params if params is not None else {"command": "ls"},
                        output=output, ok=ok, error=error, data=data)


def edit(i, start, end, ok=True, content=None):
    record = {"path": "a.py", "start_line": start, "end_line": end, "content": content or f"v{i}"}
    return rec(i, tool="modify_code", action_type="edit", ok=ok,
               params={"path": "a.py", "start": start, "end": end, "content": content or f"v{i}"}, modify=record)


def replace(i, old, new, path="a.py"):
    return rec(i, tool="str_replace_editor", action_type="edit", output=f"edited {path}",
               params={"command": "str_replace", "path": path, "old_str": old, "new_str": new})


def check(i, output="FAILED test_a - AssertionError: 1 != 2", ok=False, command="python -m pytest tests/test_a.py"):
    return rec(i, params={"command": command}, action_type="test", ok=ok, output=output,
               error=None if ok else "exit code 1")


# --- what counts as the same, and as new ------------------------------------------------------
def test_outputs_normalise_numbers_addresses_times_and_temp_paths():
    a = "at 0x7f3a21 in 0.53s 2024-01-02 10:11:12 /tmp/tmpab12/x.py:12"
    b = "at 0x55aa00 in 12.1s 2025-11-30 23:59:01 /tmp/tmpzz99/x.py:140"
    assert normalise_output(a) == normalise_output(b)
    assert normalise_output("3 passed") != normalise_output("3 failed")
    assert error_signature("Traceback ...\n  File x\nImportError: cannot import name 'f'") .startswith("ImportError")
    assert error_signature("") == "" and error_signature("grep found nothing") == ""


def test_progress_new_output_status_change_and_new_queries():
    h = d.History.of([rec(1, output="a"), rec(2, output="a"), rec(3, output="b")])
    assert [s.progress for s in h.steps] == [True, False, True]
    probes = [rec(1, params={"command": "python -c 'print(1 in [1])'"}, output="True"),
              rec(2, params={"command": "python -c 'print(2 in [1, 2])'"}, output="True")]
    assert d.History.of(probes).steps[1].progress  # a new question with an old answer is still news
    h = d.History.of([check(1), check(2, output="1 passed", ok=True)])
    assert h.steps[1].progress  # the check's status changed
    searches = [rec(i, action_type="search", params={"command": f"grep -rn name{i} src"}, ok=False, output="",
                    error="exit code 1") for i in range(3)]
    assert all(s.progress for s in d.History.of(searches).steps)  # each query rules a place out
    guesses = [rec(i, action_type="read", tool="read_file", params={"path": f"d{i}/VERSION"}, ok=False,
                   output="", error=f"no such file: d{i}/VERSION") for i in range(3)]
    assert [s.progress for s in d.History.of(guesses).steps] == [True, False, False]  # guessing paths is not
    assert not d.History.of([rec(1), replace(2, "a = 1", "a = 2")]).steps[1].progress  # edits alone never are


# --- layer 1 ----------------------------------------------------------------------------------
def test_layer1_needs_the_same_type_and_no_progress():
    same = [rec(i, action_type="read", params={"command": f"cat f{i}"}, ok=False, output="",
                error=f"cat: f{i}: No such file or directory") for i in range(3)]
    assert d.layer1(same[:2], 3) is None
    found = d.layer1(same, 3)
    assert found.detector == "same_action_type" and found.layer == 1 and "nothing new" in found.reason
    productive = [rec(i, action_type="read", params={"command": f"cat f{i}"}, output=text)
                  for i, text in enumerate(["def parse():", "class Version:", "import re"])]
    assert d.layer1(productive, 3) is None  # three reads that each found something: no spin
    assert rep.layer1(productive, 3) is not None  # the first-built layer 1 fires on them anyway
    other_program = same[:2] + [rec(9, action_type="read", params={"command": "head f9"}, ok=False, output="",
                                    error="head: f9: No such file or directory")]
    assert d.layer1(other_program, 3) is None
    edits = [replace(i, f"x{i}", f"x{i + 1}") for i in range(3)]
    assert d.layer1(edits, 3) is None  # edits are judged by the check after them, not by layer 1


# --- repeat_observation -----------------------------------------------------------------------
def test_repeat_observation_boundary():
    assert d.repeat_observation([rec(1), rec(2)], 3) is None
    found = d.repeat_observation([rec(1), rec(2), rec(3)], 3)
    assert found.detector == "repeat_observation" and found.consecutive_count == 3
    assert d.repeat_observation([rec(1), rec(2), rec(3, output="new")], 3) is None
    assert d.repeat_observation([rec(1), rec(2), rec(3, params={"command": "pwd"})], 3) is None
    # up to `gap` steps apart counts; an edit between breaks it
    spaced = [rec(1), rec(2, params={"command": "pwd"}), rec(3), rec(4, params={"command": "id"}), rec(5)]
    assert d.repeat_observation(spaced, 3, gap=3) is not None
    assert d.repeat_observation([rec(1), rec(2), replace(3, "a", "b"), rec(4)], 3) is None
    # the same command under another working directory prefix, and numbers that differ, are the same
    moved = [rec(1, output="took 0.1s"), rec(2, params={"command": "cd /repo && ls"}, output="took 0.3s"),
             rec(3, output="took 2.0s")]
    assert d.repeat_observation(moved, 3) is not None


# --- edit_rerun -------------------------------------------------------------------------------
def test_edit_rerun_fires_on_the_second_cycle_with_the_same_failure():
    steps = [check(1), replace(2, "a = 1", "a = 2"), check(3)]
    assert d.edit_rerun(steps, cycles=2) is None
    steps += [replace(4, "a = 2", "a = 3"), check(5)]
    found = d.edit_rerun(steps, cycles=2)
    assert found.detector == "edit_rerun" and found.consecutive_count == 3 and "a.py" in found.reason
    assert d.edit_rerun(steps[:3], cycles=1) is not None


def test_edit_rerun_stops_when_the_result_changes_or_nothing_was_edited():
    moving = [check(1), replace(2, "a", "b"), check(3, output="FAILED test_a - KeyError: 'x'"),
              replace(4, "b", "c"), check(5)]
    assert d.edit_rerun(moving, cycles=2) is None  # the failure moved: the edits reach something
    no_edit = [check(1), rec(2, action_type="read", params={"command": "cat a.py"}, output="code"), check(3),
               rec(4, action_type="read", params={"command": "cat b.py"}, output="more"), check(5)]
    assert d.edit_rerun(no_edit, cycles=2) is None
    passing = [check(1, ok=True, output="1 passed"), replace(2, "a", "b"), check(3, ok=True, output="1 passed"),
               replace(4, "b", "c"), check(5, ok=True, output="1 passed")]
    assert d.edit_rerun(passing, cycles=2) is None  # refining while the check passes is not a loop
    far = [check(1)] + [replace(i, f"a{i}", f"b{i}") for i in range(2, 9)] + [check(9)]
    assert d.edit_rerun(far + [replace(10, "x", "y"), check(11)], cycles=2, gap=6) is None


def test_edit_rerun_sees_a_script_that_prints_the_error_and_exits_zero():
    out = "Test case: remove a column\nError message: TimeSeries object is invalid - expected 'time'"
    steps = []
    for i in range(3):
        steps += [replace(2 * i, f"v{i}", f"v{i + 1}", path="core.py"),
                  check(2 * i + 1, output=out, ok=True, command="cd /workspace && python reproduce.py")]
    assert d.edit_rerun(steps, cycles=2) is not None


# --- repeated_error ---------------------------------------------------------------------------
def test_repeated_error_compares_the_error_output_not_the_status():
    def fail(i, out):
        return rec(i, ok=False, error="exit code 1", output=out, params={"command": f"python t{i}.py"})

    imports = [fail(i, f"Traceback (most recent call last):\n  File \"t{i}.py\", line {i}\n"
                       "ImportError: cannot import name 'f' from 'm'") for i in range(3)]
    assert d.repeated_error(imports[:2], 3) is None
    assert "ImportError" in d.repeated_error(imports, 3).reason
    # two empty greps and an ImportError share only the status line: not the same error
    greps = [rec(i, ok=False, error="exit code 1", output="", action_type="search",
                 params={"command": f"grep x{i}"}) for i in range(2)]
    assert d.repeated_error(greps + imports[:1], 3) is None
    assert rep.repeated_error(greps + [rec(5, ok=False, error="exit code 1")], 3) is not None
    assert d.repeated_error(imports[:2] + [fail(9, "KeyError: 'y'")], 3) is None


# --- alternation, replies, condensation -------------------------------------------------------
def test_alternation_boundary():
    a = {"command": "git checkout a"}
    b = {"command": "git checkout b"}
    aba = [rec(1, params=a, output="A"), rec(2, params=b, output="B"), rec(3, params=a, output="A")]
    assert d.alternation(aba, 2) is None
    abab = aba + [rec(4, params=b, output="B")]
    assert d.alternation(abab, 2).detector == "alternation"
    assert d.alternation(abab[:3] + [rec(4, params=b, output="B changed")], 2) is None  # progress
    assert d.alternation(abab + [rec(5, params=a, output="A")], 3) is None
    assert d.alternation([rec(i, params=a) for i in range(4)], 2) is None


def test_empty_replies_monologue_and_context_window_boundaries():
    bad = [rec(i, tool="", action_type="invalid_reply", ok=False, error="the reply was empty") for i in range(3)]
    assert d.empty_replies(bad[:2], 3) is None
    assert d.empty_replies(bad, 3).detector == "empty_replies"
    assert d.empty_replies([bad[0], bad[1], rec(5), bad[2]], 3) is None
    talk = [rec(i, tool="", action_type="message", params={}, output="", thought=f"thinking {i}",
                no_observation=True) for i in range(3)]
    assert d.monologue(talk[:2], 3) is None
    assert d.monologue(talk, 3).detector == "monologue"
    assert d.monologue(talk[:2] + [rec(9)] + talk[2:], 3) is None
    condense = [rec(i, tool="", action_type="condense", params={}, output="trimmed") for i in range(3)]
    assert d.context_window(condense[:2], 3) is None
    assert d.context_window(condense, 3).detector == "context_window"


# --- layer 3 ----------------------------------------------------------------------------------
def test_code_modify_boundary_on_unchecked_small_edits():
    two = [edit(1, 3, 3), edit(2, 3, 3)]
    assert d.code_modify(two) is None
    found = d.code_modify(two + [edit(3, 3, 3)])
    assert found.layer == 3 and "lines 3-3" in found.reason
    # reads between the edits do not break the run of edits
    assert d.code_modify([edit(1, 3, 3), rec(2, action_type="inspect"), edit(3, 3, 3),
                          rec(4, action_type="inspect"), edit(5, 3, 3)]) is not None
    assert d.code_modify(two + [edit(3, 3, 3), rec(4)]) is None  # checked only on an edit
    # nearby lines, never checked: nothing says they led nowhere (the first-built layer 3 fires anyway)
    nearby = [edit(1, 10, 11), edit(2, 12, 12), edit(3, 14, 16)]
    assert d.code_modify(nearby) is None
    assert "lines 14-16" in rep.code_modify(nearby).reason


def unchanged(*edits):
    """The edits with the same failing check run before and after each: none changed anything."""
    out = [check(99, output="FAIL: 5", command="python r.py")]
    for n, e in enumerate(edits):
        out.append(e)
        if n < len(edits) - 1:
            out.append(check(100 + n, output="FAIL: 5", command="python r.py"))
    return out


def test_code_modify_region_and_size_limits():
    assert d.code_modify(unchanged(edit(1, 10, 10), edit(2, 15, 15), edit(3, 20, 20))) is not None
    assert d.code_modify(unchanged(edit(1, 10, 10), edit(2, 16, 16), edit(3, 17, 17))) is None
    assert d.code_modify(unchanged(edit(1, 10, 12), edit(2, 10, 12), edit(3, 10, 12))) is not None
    assert d.code_modify(unchanged(edit(1, 10, 13), edit(2, 10, 12), edit(3, 10, 12))) is None
    assert d.code_modify(unchanged(edit(1, 10, 10), edit(2, 10, 10, ok=False), edit(3, 10, 10))) is None


def test_code_modify_spares_edits_that_lead_somewhere_and_catches_reverts():
    # debug prints added and removed near the same lines, each run showing something new: healthy
    debugging = [edit(1, 10, 10, content="print(a)"), check(2, output="a=1", ok=True, command="python r.py"),
                 edit(3, 11, 11, content="print(b)"), check(4, output="b=2", ok=True, command="python r.py"),
                 edit(5, 10, 11, content="")]
    assert d.code_modify(debugging) is None
    # the same edits with the check showing the same thing each time: a spin
    stuck = [edit(1, 10, 10, content="x - 1"), check(2, output="FAIL: 5", command="python r.py"),
             edit(3, 10, 10, content="x // 1"), check(4, output="FAIL: 5", command="python r.py"),
             edit(5, 10, 10, content="round(x)")]
    assert d.code_modify(stuck) is not None
    # text edits that put back what an earlier edit replaced
    flip = [replace(1, "j - pos - cols", "j - cols"), replace(2, "j - cols", "j - cols - pos + pos"),
            replace(3, "j - cols - pos + pos", "j - cols")]
    assert reverts(edit_info(flip[2]), [edit_info(flip[0]), edit_info(flip[1])])
    assert d.code_modify(flip) is not None


def test_evidence_detectors_are_the_deterministic_ones():
    assert "logic_spin" not in d.EVIDENCE and "same_action_type" not in d.EVIDENCE
    assert {"edit_rerun", "repeat_observation", "code_modify", "repeated_error"} <= d.EVIDENCE


def test_an_edit_with_no_end_or_a_broken_one_is_read_without_crashing():
    # recorded or imported steps may say less than the modify_code tool would
    def step(i, **params):
        return rec(i, tool="modify_code", action_type="edit", params={"path": "a.py", "start": 4, "content": "x",
                                                                       **params})

    assert (edit_info(step(1)).start, edit_info(step(1)).end) == (4, 4)  # no end: one line
    assert (edit_info(step(2, end=None)).start, edit_info(step(2, end=None)).end) == (4, 4)
    assert edit_info(step(3, end="six")) is None
    assert edit_info(rec(4, tool="modify_code", action_type="edit", params={},
                         modify={"path": "a.py", "start_line": 4})) is None
    history = [step(1, end=None), check(2), step(3, end=None), check(4), step(5, end=None)]
    assert d.code_modify(history) is not None  # three one-line edits at line 4, the check unchanged
