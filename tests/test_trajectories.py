"""Trajectory import: every format's sample round-trips into a memfit trace; bad input gets one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memfit_jupyter import TrajectoryFormatError, analyze, load_trajectory
from memfit_jupyter.study.analysis import records_of
from memfit_jupyter.trajectories import classify_command, command_program, detect_format

SAMPLES = Path(__file__).parent.parent / "memfit_jupyter" / "trajectories" / "samples"
CASES = {  # file: (format, status, steps, model)
    "mini_swe_v1.traj.json": ("mini-swe-agent", "done", 11, "sample-model-v1"),
    "mini_swe_v2.traj.json": ("mini-swe-agent", "failed", 11, "sample-model-v2"),
    "swe_agent.traj": ("swe-agent", "done", 10, ""),
    "openhands_events.json": ("openhands", "done", 11, "sample-oh-model"),
    "otlp_genai.json": ("otlp", "failed", 10, "sample-otel-model"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_sample_becomes_a_trace(name):
    fmt, status, steps, model = CASES[name]
    trace = load_trajectory(SAMPLES / name)
    assert trace["version"] == 1 and trace["source"]["format"] == fmt
    assert trace["source"]["path"].endswith(name)
    assert trace["status"] == status and trace["model"] == model
    types = [e["type"] for e in trace["events"]]
    assert types[0] == "run_start" and types[-1] == "run_end"
    assert types.count("action") == types.count("observation") == steps == trace["totals"]["iterations"]
    # every action is followed by its observation, in the same iteration
    for i, e in enumerate(trace["events"]):
        if e["type"] == "action":
            obs = trace["events"][i + 1]
            assert obs["type"] == "observation" and obs["iteration"] == e["iteration"]
    # the serialised form survives JSON, and a memfit trace loads as itself
    again = json.loads(json.dumps(trace))
    assert again == trace and load_trajectory(again) is again
    assert detect_format(again) == "memfit"


def test_the_source_fields_arrive_where_a_trace_keeps_them():
    trace = load_trajectory(SAMPLES / "mini_swe_v1.traj.json")
    records = records_of(trace)
    assert records[0].tool == "bash" and records[0].params == {"command": "grep -rn 'def parse_version' src"}
    assert records[0].thought == "Find where parse_version lives." and records[0].action_type == "search"
    assert records[3].action_type == "run" and not records[3].ok and records[3].error == "exit code 1"
    assert records[3].data["exit_code"] == 1 and "AssertionError" in records[3].output
    assert records[-1].action_type == "submit" and records[-1].data.get("final")
    calls = [e for e in trace["events"] if e["type"] == "model_call"]
    assert len(calls) == 11 and calls[0]["reply"].startswith("THOUGHT: Find where")
    assert calls[0]["prompt_tokens"] == 900 and trace["totals"]["tokens"]["completion"] == 40 * 10
    assert trace["answer"].startswith("diff --git")


def test_tool_call_trajectories_keep_the_calls_and_the_format_complaint():
    trace = load_trajectory(SAMPLES / "mini_swe_v2.traj.json")
    records = records_of(trace)
    reply = next(e for e in trace["events"] if e["type"] == "model_call")["reply"]
    assert reply["tool_calls"][0]["function"]["name"] == "bash"
    assert records[2].action_type == "edit" and records[2].params["command"].startswith("cat <<'EOF' > check.py")
    assert records[-1].action_type == "invalid_reply" and "No tool calls found" in records[-1].output
    assert trace["reason"] == "mini-swe-agent exit status: LimitsExceeded"


def test_swe_agent_edits_carry_their_line_range():
    records = records_of(load_trajectory(SAMPLES / "swe_agent.traj"))
    assert [r.tool for r in records[:4]] == ["search_dir", "open", "bash", "edit"]
    assert records[3].data["modify"] == {"start_line": 5, "end_line": 5,
                                         "content": "    return tuple(text.split('.')) "}
    assert not records[2].ok and records[2].error == "Traceback (most recent call last)"


def test_openhands_messages_errors_and_replies():
    trace = load_trajectory(SAMPLES / "openhands_events.json")
    records = records_of(trace)
    assert trace["task"].startswith("Fix parse_version")
    assert records[6].ok is False and records[6].error == "error observation"
    assert [r.action_type for r in records[7:10]] == ["message"] * 3
    assert all(r.data.get("no_observation") for r in records[7:10])
    assert records[-1].action_type == "submit"
    assert trace["totals"]["tokens"]["prompt"] == 1200 * 6


def test_otlp_spans_read_the_genai_and_memfit_attributes():
    trace = load_trajectory(SAMPLES / "otlp_genai.json")
    records = records_of(trace)
    assert trace["run_id"] == "otelsample01" and trace["task"].startswith("Fix parse_version")
    assert records[0].tool == "shell" and records[0].thought == "Find where parse_version lives."
    assert records[3].ok is False and records[3].error == "exit code 1"
    assert trace["totals"]["tokens"]["prompt"] == sum(800 + 40 * n for n in range(1, 11))
    # JSON lines of exports (a file exporter's output) read the same
    lines = SAMPLES / "otlp_genai.json"
    data = json.loads(lines.read_text())
    assert [e["type"] for e in load_trajectory([data])["events"]] == [e["type"] for e in trace["events"]]


def test_openinference_spans_are_read_too():
    def attr(k, v):
        return {"key": k, "value": {"stringValue": v}}
    spans = [{"name": "agent", "spanId": "1", "startTimeUnixNano": "1",
              "attributes": [attr("openinference.span.kind", "AGENT"), attr("input.value", "list the files")]},
             {"name": "llm", "spanId": "2", "startTimeUnixNano": "2",
              "attributes": [attr("openinference.span.kind", "LLM"), attr("llm.model_name", "m1"),
                             attr("output.value", "I will run ls")]},
             {"name": "tool", "spanId": "3", "startTimeUnixNano": "3",
              "attributes": [attr("openinference.span.kind", "TOOL"), attr("tool.name", "bash"),
                             attr("input.value", '{"command": "ls"}'), attr("output.value", "a.txt")]}]
    trace = load_trajectory({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    records = records_of(trace)
    assert trace["task"] == "list the files" and len(records) == 1
    assert records[0].params == {"command": "ls"} and records[0].output == "a.txt"
    assert records[0].thought == "I will run ls" and records[0].action_type == "list"


@pytest.mark.parametrize("content, needle", [
    ("this is not json {", "is not JSON"),
    ('{"hello": "world"}', "unknown trajectory format"),
    ('[1, 2, 3]', "unknown trajectory format"),
    ('{"messages": [{"role": "system", "content": "x"}], "info": {}}', "no steps found"),
    ('{"trajectory": [], "history": []}', "no steps found"),
    ('{"resourceSpans": []}', "no spans"),
    ('{"messages": [{"role": "system"}, {"role": "user", "content": "t"}, '
     '{"role": "assistant", "tool_calls": [{"function": 5}]}], "info": {}}', "malformed"),
])
def test_bad_files_give_one_line_naming_the_formats(tmp_path, content, needle):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TrajectoryFormatError) as info:
        load_trajectory(path)
    message = str(info.value)
    assert needle in message and "\n" not in message
    for name in ("mini-swe-agent", "SWE-agent", "OpenHands", "OTLP/JSON"):
        assert name in message


def test_missing_paths_and_unknown_format_names(tmp_path):
    with pytest.raises(TrajectoryFormatError, match="no trajectory file at"):
        load_trajectory(tmp_path / "nope.json")
    with pytest.raises(TrajectoryFormatError, match="unknown format 'yaml'"):
        load_trajectory(SAMPLES / "swe_agent.traj", format="yaml")
    with pytest.raises(TrajectoryFormatError, match="not an OpenHands event stream"):
        load_trajectory(SAMPLES / "swe_agent.traj", format="openhands")


@pytest.mark.parametrize("command, program, kind", [
    ("cd /testbed && grep -rn foo src", "grep", "search"),
    ("cat src/a.py", "cat", "read"),
    ("sed -n '10,20p' a.py", "sed", "read"),
    ("sed -i 's/a/b/' a.py", "sed", "edit"),
    ("cat <<'EOF' > t.py\nprint(1)\nEOF", "cat", "edit"),
    ("python -m pytest tests/test_a.py -q", "python", "test"),
    ("PYTHONPATH=. python repro.py", "python", "run"),
    ("# look first\nls -la", "ls", "list"),
    ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A", "echo", "submit"),
])
def test_shell_commands_get_their_program_and_an_action_type(command, program, kind):
    assert command_program(command) == program
    assert classify_command(command) == kind


def test_analyze_places_findings_after_the_observation_they_follow():
    trace = load_trajectory(SAMPLES / "openhands_events.json")
    out = analyze(trace)
    assert out is not trace and "analysis" not in trace
    events = out["events"]
    for i, e in enumerate(events):
        if e["type"] in ("spin", "reflection"):
            before = [x for x in events[:i] if x["type"] == "observation"]
            assert before and before[-1]["iteration"] == e["iteration"]
    assert out["analysis"]["steps"] == 11
    assert sum(1 for e in events if e["type"] == "reflection") == 11
    with pytest.raises(ValueError, match="unknown analysis setting"):
        analyze(trace, spin_treshold=4)
    with pytest.raises(ValueError, match="load_trajectory first"):
        analyze({"trajectory": []})


# --- rejected replies: mini-swe-agent stores the complaint, memfit sees an unusable reply ---------
SYSTEM = {"role": "system", "content": "You are a helpful assistant that can interact with a shell."}
TASK_MSG = {"role": "user", "content": "<pr_description>\nFix the bug.\n</pr_description>"}
NO_CALLS = ("No tool calls found in the response. Every response MUST include at least one tool call.")


def _v2_call(n, command, code=0, out="ok"):
    call = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
        {"command": command})}}
    return [{"role": "assistant", "content": None, "tool_calls": [call],
             "extra": {"response": {"usage": {"prompt_tokens": 100, "completion_tokens": 10}}}},
            {"role": "tool", "tool_call_id": f"c{n}",
             "content": f"<returncode>{code}</returncode>\n<output>\n{out}\n</output>"}]


def _rejection(text=NO_CALLS):
    return {"role": "user", "content": text, "extra": {"interrupt_type": "FormatError"}}


def _v2(messages, status="Submitted"):
    return {"info": {"exit_status": status, "submission": "", "mini_version": "2.2.4",
                     "config": {"model": {"model_name": "m2"}}},
            "messages": [SYSTEM, TASK_MSG, *messages], "trajectory_format": "mini-swe-agent-1.1",
            "instance_id": "t__rejected"}


def test_replies_that_2x_rejected_without_storing_them_become_invalid_reply_steps():
    # as mini-swe-agent 2.x writes it: the rejected reply is gone, only its complaint is kept
    data = _v2([*_v2_call(0, "ls"), _rejection(), *_v2_call(1, "cat a.py"), _rejection(), _rejection(),
                _rejection("Tool call error:\n<error>\nError parsing tool call arguments: Expecting value.\n"
                           "</error>"), *_v2_call(2, "python a.py", 1, "Traceback")])
    trace = load_trajectory(data)
    records = records_of(trace)
    assert [r.action_type for r in records] == ["list", "invalid_reply", "read", "invalid_reply",
                                                "invalid_reply", "invalid_reply", "run"]
    assert "No tool calls found" in records[1].output and not records[1].ok
    assert records[5].error.startswith("Tool call error")
    assert [r.params for r in records if r.tool] == [{"command": "ls"}, {"command": "cat a.py"},
                                                     {"command": "python a.py"}]
    calls = [e for e in trace["events"] if e["type"] == "model_call"]
    assert len(calls) == trace["totals"]["calls"] == 7 and [c["reply"] for c in calls].count(None) == 4
    # the tool result still answers its call, a complaint after it is the next reply's
    assert records[2].output.strip() == "ok" and records[2].ok

    analysis = analyze(trace)["analysis"]
    # by default a live run warns on the streak and goes on (max_bad_replies=0): nothing ends it
    assert analysis["bad_reply_streak"] == 3 and analysis["bad_reply_exit"] is None
    assert analysis["would_end"] is None
    fired = {f["detector"] for f in analysis["findings"] if f["confirmed"]}
    assert "empty_replies" in fired
    # with the first-built limit, it gives up at the third unusable reply in a row: step 6 here
    limited = analyze(trace, max_bad_replies=3)["analysis"]
    assert limited["bad_reply_exit"]["iteration"] == records[5].iteration
    assert "3 times in a row" in limited["bad_reply_exit"]["reason"]
    assert limited["would_end"] == {**limited["bad_reply_exit"], "by": "bad_replies"}


def test_two_rejections_in_a_row_do_not_end_a_run_and_a_valid_reply_resets_the_streak():
    data = _v2([_rejection(), _rejection(), *_v2_call(0, "ls"), _rejection(), _rejection(),
                *_v2_call(1, "cat a.py")])
    analysis = analyze(load_trajectory(data))["analysis"]
    assert analysis["steps"] == 6 and analysis["bad_reply_exit"] is None
    assert not any(f["detector"] == "empty_replies" and f["confirmed"] for f in analysis["findings"])


def test_1x_format_errors_keep_the_rejected_reply_and_count_in_the_streak():
    complaint = ("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\n\n"
                 "Please format your action in triple backticks as shown in <response_example>.")
    messages = [SYSTEM, TASK_MSG,
                {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls\n```"},
                {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"}]
    for n in range(3):
        messages += [{"role": "assistant", "content": f"THOUGHT: try {n}\n\n```bash\nls\n```\n```bash\npwd\n```"},
                     {"role": "user", "content": complaint}]
    trace = load_trajectory({"info": {"exit_status": "LimitsExceeded", "config": {"model": {"model_name": "m1"}}},
                             "messages": messages, "trajectory_format": "mini-swe-agent-1"})
    records = records_of(trace)
    assert [r.action_type for r in records] == ["list"] + ["invalid_reply"] * 3
    assert records[1].thought == "try 0" and "EXACTLY ONE" in records[1].output
    assert analyze(trace)["analysis"]["bad_reply_streak"] == 3
    assert analyze(trace, max_bad_replies=3)["analysis"]["bad_reply_exit"]["iteration"] == records[3].iteration


def test_a_memfit_trace_s_unusable_replies_are_steps_of_the_analysis_too():
    # memfit records an unusable reply as an observation with no action before it (run.py)
    events = [{"type": "run_start", "iteration": 0, "ts": 0.0, "task": "t", "extensions": [], "settings": {},
               "tiers": {}, "tools": []}]
    for i in range(1, 4):
        events.append({"type": "observation", "iteration": i, "ts": i, "tool": "", "ok": False, "output": "",
                       "error": "the reply was not JSON", "duration_s": 0.0, "data": {"error_kind": "format"}})
    events.append({"type": "run_end", "iteration": 3, "ts": 4.0, "status": "failed", "answer": None, "reason": ""})
    trace = {"version": 1, "task": "t", "events": events}
    records = records_of(trace)
    assert [r.action_type for r in records] == ["invalid_reply"] * 3
    assert records[0].error == "the reply was not JSON"
    assert analyze(trace)["analysis"]["bad_reply_exit"] is None  # replies the model gave: it goes on
    assert analyze(trace, max_bad_replies=3)["analysis"]["bad_reply_exit"]["iteration"] == 3
    # calls that reached no model end a live run at the third in a row, whatever max_bad_replies says
    for e in events:
        if e["type"] == "observation":
            e["data"] = {"error_kind": "timeout"}
    assert analyze(trace)["analysis"]["bad_reply_exit"]["iteration"] == 3


def test_analysis_refuses_a_max_bad_replies_that_is_not_a_count():
    trace = {"version": 1, "task": "t", "events": [{"type": "run_start", "iteration": 0, "ts": 0.0, "task": "t"}]}
    with pytest.raises(ValueError, match="max_bad_replies must be 0"):
        analyze(trace, max_bad_replies=-1)


def test_a_key_in_another_agents_run_stays_out_of_every_view_report_and_comparison(tmp_path, monkeypatch):
    """An imported run keeps what its tools printed: it is redacted when loaded, and a report or a
    comparison made from a trace dict that was not is redacted where it is written."""
    from memfit_jupyter import compare
    from memfit_jupyter.jupyter.report import write_report

    env_key, literal = "sk-proj-ENV2wQ8eR4tY6uI0oP3aS5dF", "sk-proj-LIT7zX1cV9bN3mK5jH2gF4dS"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    source = json.loads((SAMPLES / "mini_swe_v1.traj.json").read_text())
    source["messages"][2]["content"] = (f"THOUGHT: call it.\n\n```bash\ncurl -H 'X-Api: {literal}' "
                                        f"https://api.example.com && echo {env_key}\n```")
    path = tmp_path / "teammate.traj.json"
    path.write_text(json.dumps(source))
    trace = load_trajectory(path)
    assert "[REDACTED]" in json.dumps(trace)
    raw = json.loads(json.dumps(trace).replace("[REDACTED]", literal))  # a dict that never was redacted
    comparison = compare(raw, raw)
    shown = [json.dumps(trace), repr(comparison), json.dumps(comparison._repr_mimebundle_()),
             write_report(raw, tmp_path / "run.html").read_text(), comparison.to_html(tmp_path / "cmp.html").read_text()]
    for text in shown:
        assert literal not in text and env_key not in text
