"""OpenTelemetry export of scripted runs: the spans, their GenAI attributes, memfit's findings,
the OTLP/JSON file, OTLP/HTTP to a real receiver on 127.0.0.1, secrets, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from otel_servers import OtlpSink, closed_port

from memfit_jupyter import Agent, otel
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.otel.otlp_json import attributes
from memfit_jupyter.trace import TraceWarning

# The GenAI semantic conventions' Required (and, where memfit always has them, Conditionally
# Required) attributes per operation, written out here from gen-ai-spans.md and
# gen-ai-agent-spans.md rather than taken from the exporter.
REQUIRED = {
    "invoke_agent": {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name",
                     "gen_ai.conversation.id", "gen_ai.request.model"},
    "chat": {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
             "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"},
    "execute_tool": {"gen_ai.operation.name", "gen_ai.tool.name"},
}
SPAN_NAME = {"invoke_agent": "invoke_agent {gen_ai.agent.name}", "chat": "chat {gen_ai.request.model}",
             "execute_tool": "execute_tool {gen_ai.tool.name}"}
KIND_INTERNAL, KIND_CLIENT = 1, 3
OPENINFERENCE = {"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL", None: "CHAIN"}


def run_scenario(name, workdir, **kw):
    kw.setdefault("memory", False)
    run = Agent(model=f"memfit/{name}", workdir=workdir, **kw).start(load_scenario(name).task)
    run.run()
    return run


@pytest.fixture(scope="module")
def spin_trace(tmp_path_factory):
    return run_scenario("spin-demo", tmp_path_factory.mktemp("spin"), reflection="auto",
                        detectors={"logic_spin": True}, spin_warnings="prompt").trace()


@pytest.fixture(scope="module")
def outage_trace(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("outage")
    (workdir / "data.txt").write_text("1 2 3\n")
    return run_scenario("outage", workdir, fallback_model="memfit/demo", recovery_timeout=0.05).trace()


def exported(trace, tmp_path, **kw):
    """The spans of ``trace`` as written to an OTLP/JSON file and read back, plain dicts."""
    path = tmp_path / "run.otlp.json"
    result = otel.export(trace, path=path, **kw)
    spans = otel.read_otlp_json(path)
    assert result.spans == len(spans) and result.dropped == 0
    for span in spans:
        span["attrs"] = attributes(span.get("attributes", []))
        for event in span.get("events", []):
            event["attrs"] = attributes(event.get("attributes", []))
    return spans


def check_conventions(spans):
    """Every span against the conventions; returns the spans by operation."""
    by_op: dict = {}
    for span in spans:
        a = span["attrs"]
        op = a.get("gen_ai.operation.name")
        by_op.setdefault(op, []).append(span)
        assert a.get("openinference.span.kind") == OPENINFERENCE[op], span["name"]
        if op is None:
            assert span["name"] == f"iteration {a['memfit.iteration']}"
            continue
        missing = REQUIRED[op] - set(a)
        assert not missing, f"{span['name']} lacks {sorted(missing)}"
        name = SPAN_NAME[op]
        for key in ("gen_ai.agent.name", "gen_ai.request.model", "gen_ai.tool.name"):
            name = name.replace("{" + key + "}", str(a.get(key)))
        assert span["name"] == name
        assert span["kind"] == (KIND_CLIENT if op == "chat" else KIND_INTERNAL)
        failed = (span.get("status") or {}).get("code") == 2
        assert failed == ("error.type" in a), f"{span['name']}: error.type iff the status is ERROR"
        for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
            if key in a:
                assert isinstance(a[key], int) and a[key] >= 0
    return by_op


def test_every_span_carries_the_required_genai_attributes(spin_trace, outage_trace, tmp_path):
    for trace in (spin_trace, outage_trace):
        by_op = check_conventions(exported(trace, tmp_path))
        assert len(by_op["invoke_agent"]) == 1
        assert by_op["chat"] and by_op["execute_tool"] and by_op[None]


def test_a_spin_run_becomes_a_tree_of_spans_with_its_findings(spin_trace, tmp_path):
    spans = exported(spin_trace, tmp_path)
    by_id = {s["spanId"]: s for s in spans}
    assert len({s["traceId"] for s in spans}) == 1
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    assert root["name"] == "invoke_agent memfit"
    assert root["attrs"]["gen_ai.conversation.id"] == spin_trace["run_id"]
    iterations = [s for s in spans if s["name"].startswith("iteration ")]
    assert [s["attrs"]["memfit.iteration"] for s in iterations] == list(range(1, spin_trace["totals"]["iterations"] + 1))
    assert all(s["parentSpanId"] == root["spanId"] for s in iterations)
    for span in spans:
        if span["name"].startswith(("chat ", "execute_tool ")):
            parent = by_id[span["parentSpanId"]]
            assert parent["name"].startswith(("iteration ", "execute_tool ")), span["name"]
            assert int(span["startTimeUnixNano"]) >= int(parent["startTimeUnixNano"])
            assert int(span["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])
    # one execute_tool span per action, in order, failing where the tool failed
    actions = [e for e in spin_trace["events"] if e["type"] == "action"]
    observations = [e for e in spin_trace["events"] if e["type"] == "observation"]
    tools = sorted((s for s in spans if s["name"].startswith("execute_tool ")), key=lambda s: int(s["startTimeUnixNano"]))
    assert [s["attrs"]["gen_ai.tool.name"] for s in tools] == [a["tool"] for a in actions]
    assert [(s.get("status") or {}).get("code") == 2 for s in tools] == [not o["ok"] for o in observations]
    # tokens: the chat spans add up to the run's totals
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert len(chats) == spin_trace["totals"]["calls"]
    assert sum(s["attrs"]["gen_ai.usage.input_tokens"] for s in chats) == spin_trace["totals"]["tokens"]["prompt"]
    assert sum(s["attrs"]["gen_ai.usage.output_tokens"] for s in chats) == spin_trace["totals"]["tokens"]["completion"]
    assert {s["attrs"]["memfit.purpose"] for s in chats} >= {"action", "reflection", "spin"}
    # why each call stopped: the model_call's finish_reason (litellm's), call by call
    calls = [e for e in spin_trace["events"] if e["type"] == "model_call"]
    assert all(c.get("finish_reason") for c in calls if c["ok"])
    assert sorted((s["attrs"]["memfit.purpose"], tuple(s["attrs"].get("gen_ai.response.finish_reasons", ())))
                  for s in chats) == \
        sorted((c["purpose"], (c["finish_reason"],) if c.get("finish_reason") else ()) for c in calls)
    # the findings: spin events with their layer and detector, reflection levels and triggers
    spin_iteration = next(s for s in iterations if s["attrs"].get("memfit.spin.detected"))
    spins = [e for e in spin_iteration["events"] if e["name"] == "memfit.spin"]
    recorded = [e for e in spin_trace["events"] if e["type"] == "spin"]
    assert [(e["attrs"]["memfit.layer"], e["attrs"]["memfit.detector"]) for e in spins] == \
        [(e["layer"], e["detector"]) for e in recorded]
    assert all(e["attrs"]["memfit.reason"] for e in spins)
    assert spin_iteration["attrs"]["memfit.spin.detectors"] == [e["detector"] for e in recorded]
    reflections = [e for s in iterations for e in s["events"] if e["name"] == "memfit.reflection"]
    assert [e["attrs"]["memfit.level"] for e in reflections] == \
        [e["level"] for e in spin_trace["events"] if e["type"] == "reflection"]
    assert iterations[0]["attrs"]["memfit.reflection.trigger"].startswith("failure")
    assert root["attrs"]["memfit.spin.count"] == len(recorded)
    assert root["attrs"]["memfit.status"] == spin_trace["status"] == "done"
    assert root["attrs"]["memfit.cost_usd"] == pytest.approx(spin_trace["totals"]["cost_usd"], abs=1e-6)


def test_breaker_transitions_and_failed_calls(outage_trace, tmp_path):
    spans = exported(outage_trace, tmp_path)
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    transitions = [f"{e['tier']}:{e['from_state']}->{e['to_state']}" for e in outage_trace["events"]
                   if e["type"] == "breaker" and e.get("to_state")]
    assert "primary:CLOSED->OPEN" in transitions
    assert root["attrs"]["memfit.breaker.transitions"] == transitions
    assert root["attrs"]["memfit.breaker.opened"] is True
    events = sorted((e for s in spans for e in s.get("events", []) if e["name"] == "memfit.breaker"),
                    key=lambda e: int(e["timeUnixNano"]))
    assert len(events) == sum(1 for e in outage_trace["events"] if e["type"] == "breaker")
    # (whether a probe half-opens it within the run depends on the clock: compare with the trace)
    assert [e["attrs"]["memfit.to_state"] for e in events if "memfit.to_state" in e["attrs"]] == \
        [t.split("->")[1] for t in transitions]
    failed = [s for s in spans if s["name"].startswith("chat ") and (s.get("status") or {}).get("code") == 2]
    kinds = [e["error_kind"] for e in outage_trace["events"] if e["type"] == "model_call" and not e["ok"]]
    assert sorted(s["attrs"]["error.type"] for s in failed) == sorted(kinds)
    assert not any("gen_ai.response.finish_reasons" in s["attrs"] for s in failed)  # no reply, no reason
    assert {"server_error", "rate_limit", "timeout"} <= set(kinds)
    # the samples of sub_query ran inside the tool call: their spans are its children
    (sub_query,) = [s for s in spans if s["name"] == "execute_tool sub_query"]
    samples = [s for s in spans if s["attrs"].get("memfit.purpose") == "sample"]
    assert samples and all(s["parentSpanId"] == sub_query["spanId"] for s in samples)
    assert any(e["name"] == "memfit.synthesis" for e in sub_query["events"])
    fallback = [s for s in spans if s["attrs"].get("memfit.tier") == "fallback"]
    assert fallback and all(s["attrs"]["gen_ai.request.model"] == "demo" for s in fallback)


def test_content_only_on_opt_in_and_always_redacted(spin_trace, tmp_path, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    replies = [e["reply"] for e in spin_trace["events"] if e["type"] == "model_call" and e.get("reply")]
    outputs = [e["output"] for e in spin_trace["events"] if e["type"] == "observation" and e["output"]]
    plain = json.dumps(exported(spin_trace, tmp_path))
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result", "memfit.thought"):
        assert key not in plain
    assert spin_trace["task"] not in plain and "Q3 revenue" not in plain
    spans = exported(spin_trace, tmp_path, content=True)
    chats = [s for s in spans if s["name"].startswith("chat ")]
    got = [json.loads(s["attrs"]["gen_ai.output.messages"])[0]["parts"][0]["content"] for s in chats]
    assert got == replies
    results = [s["attrs"]["gen_ai.tool.call.result"] for s in spans if s["name"].startswith("execute_tool")]
    assert [r for r in results if r] == outputs
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    assert json.loads(root["attrs"]["gen_ai.input.messages"])[0]["parts"][0]["content"] == spin_trace["task"]
    # the conventions' own opt-in switch does the same
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    assert "gen_ai.output.messages" in json.dumps(exported(spin_trace, tmp_path))


def test_secrets_never_leave_in_spans(tmp_path, monkeypatch):
    env_secret = "zq8Lw2Hx9PvK3mTr7YbN"  # no known key shape: only the environment names it
    api_key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    monkeypatch.setenv("MEMFIT_TEST_SERVICE_TOKEN", env_secret)
    monkeypatch.setenv("OPENAI_API_KEY", api_key)
    # the demo reads data.txt (its output carries both) and feeds it to Python (whose error does)
    (tmp_path / "data.txt").write_text(f"1 2 3\napi_key={api_key}\ntoken {env_secret}\n")
    live_file = tmp_path / "live.otlp.json"
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                otel={"path": live_file, "content": True, "schedule_delay": 0.05}).start(
        f"Add up data.txt; the key is {api_key} and the token {env_secret}")
    run.run()
    outputs = [e["output"] + str(e["error"]) for e in run.trace()["events"] if e["type"] == "observation"]
    assert any("[REDACTED]" in o for o in outputs)  # the tool output did carry them
    otel.live_export_of(run).wait(30)
    with OtlpSink() as sink:
        otel.export(run.trace(), endpoint=sink.endpoint, content=True)
        otel.export(run, path=tmp_path / "after.otlp.json", content=True)
        sent = b"".join(sink.bodies)
    assert sink.spans
    for blob in (sent, live_file.read_bytes(), (tmp_path / "after.otlp.json").read_bytes()):
        assert api_key.encode() not in blob and env_secret.encode() not in blob
        assert b"[REDACTED]" in blob


def test_http_export_reaches_a_real_receiver_with_the_environment_settings(spin_trace, tmp_path, monkeypatch):
    with OtlpSink() as sink:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=notebooks")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "lab-agents")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "openinference.project.name=memfit-tests")
        result = otel.export(spin_trace)
        assert result.destination == f"{sink.endpoint}/v1/traces"
        assert sink.requests == 1 and sink.headers[0]["x-team"] == "notebooks"
        assert sink.headers[0]["content-type"] == "application/x-protobuf"
        resource = {kv.key: kv.value.string_value for kv in sink.resources[0].attributes}
        assert resource["service.name"] == "lab-agents"
        assert resource["openinference.project.name"] == "memfit-tests"
        assert len(sink.spans) == result.spans
        file_spans = exported(spin_trace, tmp_path)
        assert sorted(s.span_id.hex() for s in sink.spans) == sorted(s["spanId"] for s in file_spans)
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES")
    (resource,) = {json.dumps(s["resource"], sort_keys=True) for s in exported(spin_trace, tmp_path)}
    assert json.loads(resource)["service.name"] == "memfit-jupyter"


def test_live_export_gives_the_spans_of_the_saved_trace(tmp_path):
    live = tmp_path / "live.otlp.json"
    run = run_scenario("spin-demo", tmp_path, otel={"path": live, "schedule_delay": 0.05})
    stats = otel.live_export_of(run).wait(30)
    assert stats.finished and stats.dropped == 0 and stats.exported == stats.spans
    streamed = otel.read_otlp_json(live)
    saved = exported(run.trace(), tmp_path)
    assert len(live.read_text().splitlines()) >= 1
    assert len(streamed) == len(saved) == stats.spans

    def shape(spans):
        return sorted((s["spanId"], s.get("parentSpanId"), s["name"],
                       json.dumps(attributes(s.get("attributes", [])), sort_keys=True),
                       tuple(e["name"] for e in s.get("events", []))) for s in spans)

    assert shape(streamed) == shape(saved)  # same ids, tree, attributes and findings


def test_unknown_events_become_span_events_and_deltas_are_skipped(spin_trace, tmp_path):
    trace = json.loads(json.dumps(spin_trace))
    at = next(i for i, e in enumerate(trace["events"]) if e["type"] == "action")
    base = trace["events"][at]
    trace["events"][at:at] = [
        {"type": "reply_delta", "iteration": base["iteration"], "ts": base["ts"], "text": "The sum"},
        {"type": "tool_progress", "iteration": base["iteration"], "ts": base["ts"], "percent": 40,
         "stage": {"name": "reading", "files": ["a", "b"]}},
    ]
    with pytest.warns(TraceWarning, match="reply_delta ×1, tool_progress ×1"):  # said, not dropped
        spans = exported(trace, tmp_path)
    events = [e for s in spans for e in s.get("events", [])]
    (progress,) = [e for e in events if e["name"] == "memfit.tool_progress"]
    assert progress["attrs"] == {"memfit.percent": 40, "memfit.stage.name": "reading",
                                 "memfit.stage.files": ["a", "b"]}
    assert not [e for e in events if "delta" in e["name"]]


def test_a_trace_cut_short_still_exports_closed_spans(spin_trace, tmp_path):
    events = spin_trace["events"]
    stop = next(i for i, e in enumerate(events) if e["type"] == "observation" and e["iteration"] == 2)
    cut = dict(spin_trace, events=events[:stop])  # iteration 2's tool call never answered
    spans = exported(cut, tmp_path)
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    assert root["attrs"]["memfit.unfinished"] is True
    assert all(int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]) for s in spans)
    assert any(s["attrs"].get("memfit.tool.unfinished") for s in spans)


def test_bad_input_gets_one_clear_line(spin_trace, tmp_path, monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.delenv(name, raising=False)
    cases = [
        (lambda: otel.export(spin_trace), ValueError, "nowhere to export"),
        (lambda: otel.export(spin_trace, endpoint="ftp://host"), ValueError, "not an OTLP/HTTP endpoint"),
        (lambda: otel.export(spin_trace, endpoint="http://h:1", path="x"), ValueError, "not both"),
        (lambda: otel.export({"events": "nope"}, path=tmp_path / "x"), ValueError, "not a memfit trace"),
        (lambda: otel.export(tmp_path / "missing.json", path=tmp_path / "x"), FileNotFoundError, "no trace file"),
        (lambda: otel.export(spin_trace, path=tmp_path / "no" / "x.json"), FileNotFoundError, "no folder"),
        (lambda: Agent(model="memfit/demo", otel=True).start("x"), ValueError, "no endpoint"),
    ]
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"version": 1, "events": [')
    cases.append((lambda: otel.export(corrupt, path=tmp_path / "x"), ValueError, "not JSON"))
    for call, kind, needle in cases:
        with pytest.raises(kind) as info:
            call()
        message = str(info.value)
        assert needle in message and "\n" not in message, message
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ValueError, match="http/protobuf"):
        otel.export(spin_trace, endpoint="http://127.0.0.1:4317")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL")
    down = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(otel.OtelExportError) as info:
        otel.export(spin_trace, endpoint=down, timeout=0.5)
    assert down in str(info.value) and "\n" not in str(info.value)
    with OtlpSink("400") as refusing, pytest.raises(otel.OtelExportError, match="did not take"):
        otel.export(spin_trace, endpoint=refusing.endpoint, timeout=2)


def test_importing_the_package_loads_no_opentelemetry():
    code = ("import sys, memfit_jupyter, memfit_jupyter.otel; from memfit_jupyter.otel import conventions; "
            "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'google.protobuf'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "[]"
