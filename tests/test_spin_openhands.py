"""OpenHands' stuck-detector scenarios, as tests of memfit's named detectors.

The scenarios are the ones OpenHands' tests describe (tests/unit/controller/test_is_stuck.py
at commit d6fab190bfb55f07cc380993b45ec4f781706a92), written again here as memfit traces
and run through ``analyze``.  Where memfit decides differently on purpose, the test says so:
memfit asks for the absence of progress, and compares normalised outputs where OpenHands
compares exact events.
"""

from __future__ import annotations

from memfit_jupyter import analyze


def trace(*steps, notes_at=()):
    """A trace from (tool, action_type, params, output, ok, thought, data) steps; a user note
    is put before each step number in ``notes_at``."""
    events = [{"type": "run_start", "iteration": 0, "ts": 0.0, "task": "t", "tiers": {}, "settings": {},
               "tools": [], "extensions": []}]
    for i, (tool, kind, params, output, ok, thought, data) in enumerate(steps, 1):
        if i in notes_at:
            events.append({"type": "note", "iteration": i, "ts": 0.0, "text": "user: come on"})
        events.append({"type": "action", "iteration": i, "ts": 0.0, "thought": thought, "action_type": kind,
                       "tool": tool, "params": params, "reflection": None})
        events.append({"type": "observation", "iteration": i, "ts": 0.0, "tool": tool, "ok": ok, "output": output,
                       "error": None if ok else "error", "duration_s": 0.0, "data": data})
    events.append({"type": "run_end", "iteration": len(steps), "ts": 0.0, "status": "done", "answer": None,
                   "reason": ""})
    return {"version": 1, "task": "t", "events": events}


def cmd(command, output="", ok=True, thought="", **data):
    return ("bash", "run", {"command": command}, output, ok, thought, data)


def read(path, output):
    return ("read", "read", {"path": path}, output, True, "", {})


def message(text):
    return ("", "message", {"content": text}, "", True, text, {"no_observation": True})


def condensation():
    return ("", "condense", {}, "Trimming prompt to meet context window limitations", True, "",
            {"observation": "agent_condensation", "context_window": True})


def fired(t, **settings):
    """(iteration, detector) of every confirmed finding."""
    return [(f["iteration"], f["detector"]) for f in analyze(t, **settings)["analysis"]["findings"]
            if f["confirmed"]]


def test_a_history_too_short_is_not_stuck():
    assert fired(trace(cmd("ls", "file1.txt\nfile2.txt"))) == []


def test_the_same_command_and_output_repeated_is_stuck_and_a_user_message_does_not_reset_it():
    steps = [cmd("ls")] * 4
    assert fired(trace(*steps[:2])) == []
    found = fired(trace(*steps, notes_at=(3,)))
    assert (3, "repeat_observation") in found  # memfit: at the third, OpenHands at the fourth
    assert {d for _, d in found} >= {"repeat_observation"}


def test_the_same_command_with_errors():
    same = [cmd("invalid_command", "bash: invalid_command: command not found", ok=False, exit_code=127)] * 3
    assert (3, "repeat_observation") in fired(trace(*same))
    # OpenHands calls three failures of the same action stuck whatever their errors say; memfit
    # sees a different error as something new, and a changing error as progress
    varied = [cmd("invalid_command", text, ok=False) for text in
              ("Command not found", "Command still not found or another error", "Different error")]
    assert [d for _, d in fired(trace(*varied)) if d in ("repeat_observation", "repeated_error")] == []


def test_a_consistent_syntax_error_is_stuck_and_a_moving_one_is_not():
    def run(line):
        return cmd("python fix.py", f"  File \"fix.py\", line {line}\n    x = (1,\n"
                                    "SyntaxError: '(' was never closed", ok=False)
    same = fired(trace(run(3), run(3), run(3)))
    assert (3, "repeated_error") in same or (3, "repeat_observation") in same
    # line numbers are normalised: the same error at another line is still the same error
    assert (3, "repeated_error") in fired(trace(run(3), run(7), run(12)))
    other = cmd("python fix.py", "NameError: name 'y' is not defined", ok=False)
    assert [d for _, d in fired(trace(run(3), run(3), other)) if d == "repeated_error"] == []


def test_an_action_observation_pattern_every_other_step_is_stuck():
    ls, cat = cmd("ls", "file1.txt\nfile2.txt"), read("file1.txt", "File content")
    found = fired(trace(ls, cat, ls, cat, ls, cat, notes_at=(5,)))
    assert (6, "alternation") in found and (4, "alternation") not in found  # three full cycles


def test_varied_steps_are_not_stuck():
    steps = [cmd("ls", "file1.txt\nfile2.txt"), read("file1.txt", "File content"), cmd("pwd", "/home/user"),
             read("file2.txt", "Another file content"), cmd("pwd", "/home/user"),
             read("file2.txt", "Another file content")]
    assert fired(trace(*steps, notes_at=(5,))) == []


def test_a_monologue_is_stuck_until_an_observation_comes_between():
    steps = [message("Hi there!"), cmd("echo 42", "42", thought="I'm not stuck, he's stuck")] + [
        message("I'm doing well, thanks for asking.")] * 3
    assert (5, "monologue") in fired(trace(*steps))
    broken = steps[:4] + [cmd("storybook", "OK, I was stuck, but no more.")] + [
        message("I'm doing well, thanks for asking.")] * 2
    assert [d for _, d in fired(trace(*broken)) if d == "monologue"] == []


def test_a_monologue_needs_no_identical_text():
    # OpenHands compares the messages for equality; three different messages with nothing done
    # between them are the same loop to memfit
    steps = [message(f"Let me think about this some more ({n}).") for n in range(3)]
    assert (3, "monologue") in fired(trace(*steps))


def test_a_context_window_error_loop_is_stuck():
    assert (3, "context_window") in fired(trace(*[condensation()] * 10))
    assert fired(trace(condensation(), condensation())) == []


def test_condensations_with_other_steps_between_are_not_stuck():
    steps = []
    for i in range(10):
        steps.append(condensation())
        if i < 9:
            steps.append(cmd(f"ls {i}", "file1.txt\nfile2.txt"))
    assert [d for _, d in fired(trace(*steps)) if d == "context_window"] == []


def test_an_ended_run_has_its_exit_where_the_evidence_repeats():
    # with no judge, layer 2 confirms layer 1: the bound under which the most runs end
    t = trace(*[cmd("cat missing.txt", "cat: missing.txt: No such file or directory", ok=False)] * 8)
    exit_at = analyze(t, max_consecutive_spin_warnings=3)["analysis"]["spin_exit"]
    assert exit_at is not None and exit_at["iteration"] == 6  # warnings at 3, 4, 5; then the exit
    assert analyze(t)["analysis"]["spin_exit"] is None  # by default a run warns and goes on
    warned = {f["iteration"] for f in analyze(t)["analysis"]["findings"] if f["confirmed"]}
    assert warned == {3, 4, 5, 6, 7, 8}  # a warning at every step from the third on
