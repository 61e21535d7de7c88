"""The engine end to end with the scripted models: loop, statuses, trace, replay, bad input."""

import json
import subprocess
import sys

import pytest

from memfit_jupyter import Agent, ExecutionGuarantees, scenarios
from memfit_jupyter.errors import UnknownModelError, UnknownScenarioError, UnknownToolError


def events_of(run, type_):
    return [e for e in run.trace()["events"] if e["type"] == type_]


def test_import_loads_nothing_heavy():
    code = (
        "import sys, memfit_jupyter\n"
        "heavy = [m for m in ('litellm', 'IPython', 'ipywidgets', 'usearch') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_demo_finishes_with_the_scripted_answer(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    result = run.run()
    assert result.status == "done"
    assert result.answer == "The numbers in data.txt add up to 42."
    assert result.iterations == 3
    # the python step really ran: its observation is the computed sum
    python_obs = [e for e in events_of(run, "observation") if e["tool"] == "python"]
    assert python_obs[0]["output"] == "42.0"
    assert result.cost_usd > 0
    trace = run.trace()
    assert trace["status"] == "done"
    assert trace["totals"]["calls"] == len(events_of(run, "model_call"))
    assert trace["totals"]["cost_usd"] == pytest.approx(sum(e["cost_usd"] for e in events_of(run, "model_call")))
    json.dumps(trace)  # serialisable as it is


def test_step_runs_exactly_one_iteration(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    record = run.step()
    assert run.iteration == 1 and record.tool == "read_file" and record.ok
    assert "12" in record.output
    assert not run.done
    record = run.step()
    assert run.iteration == 2 and record.tool == "python"
    run.step()
    assert run.done and run.result.status == "done"
    with pytest.raises(RuntimeError):
        run.step()


def test_subscribers_see_each_event_as_it_happens(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    seen = []
    run.subscribe(lambda e: seen.append((e.type, len(run.events))))
    run.run()
    assert [t for t, _ in seen] == [e.type for e in run.events]
    # delivered one by one, not at the end
    assert [n for _, n in seen] == list(range(1, len(run.events) + 1))
    assert seen[0][0] == "run_start" and seen[-1][0] == "run_end"


def test_spin_demo_without_reflection_burns_to_max_iterations(tmp_path):
    run = Agent(model="memfit/spin-demo", workdir=tmp_path, memory=False, reflection="none",
                max_iterations=6).start("what does the summary say?")
    result = run.run()
    assert result.status == "failed"
    assert "max_iterations" in result.reason
    actions = events_of(run, "action")
    assert len(actions) == 6
    assert {(a["tool"], a["params"]["command"]) for a in actions} == {("shell", "cat summary.txt")}
    assert all(not o["ok"] for o in events_of(run, "observation"))


def test_bad_output_is_retried_then_recorded_and_the_loop_survives(tmp_path):
    run = Agent(model="memfit/bad-output", workdir=tmp_path, memory=False, reflection="none").start("add up")
    result = run.run()
    assert result.status == "done"
    errors = events_of(run, "format_error")
    assert len(errors) == 5  # two repaired away on the first call, three on the failed second call
    failed = [r for r in run.records if r.action_type == "invalid_reply"]
    assert len(failed) == 1 and not failed[0].ok
    assert "schema" in failed[0].error
    # every reply, good or bad, is kept for replay
    assert len(events_of(run, "model_call")) == 7


def _no_retries(agent, task="add up"):
    run = agent.start(task)
    run.llm.max_format_retries = 0  # each unusable reply is an unusable iteration
    return run


def test_unusable_replies_in_a_row_cost_iterations_and_fail_a_run_only_at_max_bad_replies(tmp_path):
    # with no re-asks the scenario gives two unusable replies, a good one, then three in a row
    run = _no_retries(Agent(model="memfit/bad-output", workdir=tmp_path / "a", memory=False, reflection="none"))
    assert run.run().status == "done"  # by default the loop goes on past the streak
    assert [r.action_type for r in run.records].count("invalid_reply") == 5
    assert run.iteration == 7
    limited = _no_retries(Agent(model="memfit/bad-output", workdir=tmp_path / "b", memory=False, reflection="none",
                                max_bad_replies=3))
    result = limited.run()
    assert result.status == "failed" and "no usable reply 3 times in a row" in result.reason
    assert limited.iteration == 6 and limited.trace()["settings"]["max_bad_replies"] == 3
    with pytest.raises(ValueError, match="max_bad_replies must be 0"):
        Agent(model="memfit/bad-output", max_bad_replies=-1)


def test_a_trace_recorded_before_max_bad_replies_replays_with_the_limit_its_run_had(tmp_path):
    run = _no_retries(Agent(model="memfit/bad-output", workdir=tmp_path / "a", memory=False, reflection="none",
                            max_bad_replies=3))
    run.run()
    recorded = json.loads(json.dumps(run.trace()))
    for settings in (recorded["settings"], recorded["events"][0]["settings"]):
        del settings["max_bad_replies"]  # as a trace of an earlier memfit holds them
    replayed = Agent.replay(recorded, workdir=tmp_path / "elsewhere")
    replayed.llm.max_format_retries = 0
    replayed.run()
    assert replayed.result.status == "failed" and replayed.iteration == 6
    # and records its settings as the trace did: the events are the recording's, byte for byte
    assert json.dumps(replayed.trace()["events"]) == json.dumps(recorded["events"])
    assert "max_bad_replies" not in replayed.trace()["settings"]


def test_a_trace_recorded_when_the_spin_judge_was_on_by_default_replays_with_the_judge(tmp_path):
    run = Agent(model="memfit/logic-spin", workdir=tmp_path / "a", memory=False, reflection="auto",
                detectors={"logic_spin": True}).start("find the version")
    run.run()
    assert run.trace()["settings"]["detectors"] == {"logic_spin": True}
    judged = [e for e in run.events if e.TYPE == "spin" and e.layer == 2]
    assert judged, "logic-spin's layer 1 fires and the judge is asked"
    recorded = json.loads(json.dumps(run.trace()))
    for settings in (recorded["settings"], recorded["events"][0]["settings"]):
        settings["detectors"] = {}  # as a trace of an earlier memfit holds them: every detector on
    replayed = Agent.replay(recorded, workdir=tmp_path / "elsewhere")
    replayed.run()
    assert [e for e in replayed.events if e.TYPE == "spin" and e.layer == 2]
    # the events are the recording's, byte for byte, its settings included
    assert json.dumps(replayed.trace()["events"]) == json.dumps(recorded["events"])
    assert replayed.trace()["settings"]["detectors"] == {}
    # a run made today with the same (empty) setting does not ask the judge
    today = Agent(model="memfit/logic-spin", workdir=tmp_path / "b", memory=False, reflection="auto",
                  detectors={}).start("find the version")
    today.run()
    assert today.trace()["settings"]["detectors"] == {"logic_spin": False}
    assert not [e for e in today.events if e.TYPE == "spin" and e.layer == 2]


def test_a_trace_recorded_before_triage_waited_for_the_end_replays_with_triage_at_events(tmp_path):
    run = Agent(model="memfit/memory-lesson", workdir=tmp_path / "a", reflection="auto",
                memory_triage="events").start("what is in numbers.txt?")
    run.run()
    at = [e.iteration for e in run.events if e.TYPE == "memory" and e.op == "triage"]
    assert len(at) == 2, "the failed read and the finish are triaged at once"
    recorded = json.loads(json.dumps(run.trace()))
    for settings in (recorded["settings"], recorded["events"][0]["settings"]):
        del settings["memory_triage"]  # as a trace of an earlier memfit holds them
    replayed = Agent.replay(recorded, workdir=tmp_path / "elsewhere")
    replayed.run()
    assert [e.iteration for e in replayed.events if e.TYPE == "memory" and e.op == "triage"] == at
    assert json.dumps(replayed.trace()["events"]) == json.dumps(recorded["events"])
    assert "memory_triage" not in replayed.trace()["settings"]


def test_replay_reproduces_the_events_byte_for_byte(tmp_path):
    for scenario in ("demo", "bad-output", "unknown-tool"):
        run = Agent(model=f"memfit/{scenario}", workdir=tmp_path / scenario, memory=False).start("task")
        run.run()
        recorded = json.loads(json.dumps(run.trace()))
        replayed = Agent.replay(recorded, workdir=tmp_path / "elsewhere")
        replayed.run()
        assert json.dumps(replayed.trace()["events"]) == json.dumps(recorded["events"])
        assert replayed.result.status == run.result.status


def test_unknown_scenario_names_the_available_ones():
    with pytest.raises(UnknownScenarioError) as err:
        Agent(model="memfit/nope")
    assert "demo" in str(err.value) and "spin-demo" in str(err.value)
    assert set(scenarios()) >= {"demo", "spin-demo", "bad-output", "unknown-tool"}


def test_unknown_model_ends_the_run_failed_with_a_clear_reason(tmp_path):
    run = Agent(model="no-such-provider-model-xyz", workdir=tmp_path, memory=False).start("task")
    result = run.run()
    assert result.status == "failed"
    assert "unknown model 'no-such-provider-model-xyz'" in result.reason
    assert events_of(run, "run_end") and not events_of(run, "error")  # one clear line, no traceback
    # found at the start, when the context tier asks for the model's window: no call is made
    assert events_of(run, "model_call") == []
    with pytest.raises(UnknownModelError):
        Agent(model="has spaces")


def test_unknown_tool_in_tools_is_an_error_listing_the_tools():
    with pytest.raises(UnknownToolError) as err:
        Agent(model="memfit/demo", tools=["python", "telepathy"])
    assert "telepathy" in str(err.value) and "read_file" in str(err.value)


def test_unknown_tool_from_the_model_is_an_observation(tmp_path):
    run = Agent(model="memfit/unknown-tool", workdir=tmp_path, memory=False).start("task")
    result = run.run()
    assert result.status == "done"
    first = run.records[0]
    assert not first.ok and "unknown tool 'web_search'" in first.error


def test_tools_restricts_the_set(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False, tools="read_file").start("task")
    result = run.run()
    # python is not allowed: the second step fails, and the agent still finishes
    assert run.records[1].tool == "python" and not run.records[1].ok
    assert "unknown tool 'python'" in run.records[1].error
    assert result.status == "done"


def test_file_tools_refuse_paths_outside_the_workdir(tmp_path):
    from memfit_jupyter.tools import BUILTIN_TOOLS, ToolContext

    ctx = ToolContext(workdir=tmp_path)
    (tmp_path.parent / "secret.txt").write_text("x")
    for tool, params in [("read_file", {"path": "../secret.txt"}),
                         ("write_file", {"path": "/etc/evil", "content": "x"}),
                         ("modify_code", {"path": "../secret.txt", "start": 1, "end": 1, "content": "y"})]:
        result = BUILTIN_TOOLS[tool](ctx, params)
        assert not result.ok and "outside the working directory" in result.error
    assert (tmp_path.parent / "secret.txt").read_text() == "x"


def test_invalid_tool_parameters_are_a_clear_observation(tmp_path):
    from memfit_jupyter.tools import BUILTIN_TOOLS, ToolContext

    ctx = ToolContext(workdir=tmp_path)
    bad = BUILTIN_TOOLS["modify_code"](ctx, {"path": "a.py", "start": "one", "end": 2, "content": ""})
    assert not bad.ok and "modify_code.start must be int" in bad.error
    missing = BUILTIN_TOOLS["shell"](ctx, {})
    assert not missing.ok and "missing required parameter 'command'" in missing.error


def test_tools_do_their_work(tmp_path):
    from memfit_jupyter.tools import BUILTIN_TOOLS, ToolContext

    ns = {}
    ctx = ToolContext(workdir=tmp_path, namespace=ns)
    assert BUILTIN_TOOLS["python"](ctx, {"code": "x = 6 * 7\nx"}).output == "42"
    assert ns["x"] == 42
    err = BUILTIN_TOOLS["python"](ctx, {"code": "1/0"})
    assert not err.ok and "ZeroDivisionError" in err.error
    assert BUILTIN_TOOLS["write_file"](ctx, {"path": "a.py", "content": "a\nb\nc\n"}).ok
    mod = BUILTIN_TOOLS["modify_code"](ctx, {"path": "a.py", "start": 2, "end": 2, "content": "B"})
    assert mod.ok and (tmp_path / "a.py").read_text() == "a\nB\nc\n"
    assert mod.data["modify"] == {"path": "a.py", "start_line": 2, "end_line": 2, "content": "B"}
    sh = BUILTIN_TOOLS["shell"](ctx, {"command": "cat a.py"})
    assert sh.ok and sh.output == "a\nB\nc\n"
    fail = BUILTIN_TOOLS["shell"](ctx, {"command": "cat nope"})
    assert not fail.ok and fail.data["exit_code"] != 0


def test_every_call_timeout_fits_the_time_left(tmp_path):
    agent = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                  guarantees=ExecutionGuarantees(max_duration_seconds=5.0))
    run = agent.start("task")
    run.run()
    calls = events_of(run, "model_call")
    assert calls and all(0 < c["timeout_s"] <= 5.0 for c in calls)
    assert all(c["max_tokens"] is not None for c in calls)


def test_secrets_never_reach_the_trace(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "abcd1234efgh5678ijkl")
    (tmp_path / "data.txt").write_text("token: sk-abcdefghijklmnopqrstuvwxyz123456 and abcd1234efgh5678ijkl")
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    run.run()
    text = json.dumps(run.trace())
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in text
    assert "abcd1234efgh5678ijkl" not in text
    assert "[REDACTED]" in text


def test_empty_task_is_refused():
    with pytest.raises(ValueError, match="task is empty"):
        Agent(model="memfit/demo").start("   ")


def test_all_is_complete_and_every_name_loads():
    import memfit_jupyter

    for name in memfit_jupyter.__all__:
        assert getattr(memfit_jupyter, name) is not None
    public = {n for n in memfit_jupyter._EXPORTS}
    assert public <= set(memfit_jupyter.__all__)


def test_tools_may_name_a_tool_that_an_extension_brings(tmp_path):
    agent = Agent(model="memfit/demo", workdir=tmp_path, memory=False, tools="read_file,python,sub_query")
    run = agent.start("task")
    assert set(run.tools) == {"read_file", "python", "sub_query", "finish"}


def test_replay_of_a_run_with_memory_gives_the_same_events(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path / "rec", memory_triage="end").start("task")  # memory on
    run.run()
    recorded = json.loads(json.dumps(run.trace()))
    assert any(e["purpose"] == "triage" for e in recorded["events"] if e["type"] == "model_call")
    replayed = Agent.replay(recorded, workdir=tmp_path / "elsewhere")
    replayed.run()
    assert json.dumps(replayed.trace()["events"]) == json.dumps(recorded["events"])
    assert not (tmp_path / "elsewhere" / ".memfit").exists()


def test_secrets_never_reach_the_logs(tmp_path, caplog):
    import logging

    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("task")
    with caplog.at_level(logging.INFO, logger="memfit_jupyter"):
        logging.getLogger("memfit_jupyter").warning("provider said: bad key %s", "sk-abcdefghijklmnopqrstuvwxyz1234")
    assert run is not None
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in caplog.text
    assert "bad key [REDACTED]" in caplog.text


@pytest.mark.parametrize("reply, expected", [
    ('{"tool": "finish", "params": {"answer": "6"}}', {"tool": "finish", "params": {"answer": "6"}}),
    ('  {"a": [1, 2]}  ', {"a": [1, 2]}),
    ('Here it is:\n```json\n{"a": 1}\n```', {"a": 1}),
    ('I will call {"a": 1} now', {"a": 1}),
    ('{"a": [1, 2,], }', {"a": [1, 2]}),
    ('```\n{"a": 1,}\n```', {"a": 1}),
])
def test_a_reply_is_read_as_json_whole_or_repaired(reply, expected):
    from memfit_jupyter.llm.client import extract_json

    assert extract_json(reply) == expected


@pytest.mark.parametrize("reply", ["", "   ", "no json here", "{broken"])
def test_a_reply_with_no_json_is_refused(reply):
    from memfit_jupyter.llm.client import extract_json

    with pytest.raises(ValueError):
        extract_json(reply)
