"""Arize Phoenix, a real OTLP-ingesting tool, takes memfit's spans: a run with a spin exported live
and a run whose breaker opens exported afterwards, read back through Phoenix's own REST and
GraphQL APIs.

Phoenix runs as its own server process on 127.0.0.1, from its own virtualenv in the user's
cache folder (``tests/otel_phoenix_setup.sh``, which ``tests/run.sh`` runs first; the fixture
runs it too, so this file also works alone).  It serves offline: telemetry, external
resources and its agents' shell tool are switched off by its own environment variables.
Its gRPC receiver cannot be switched off (it binds every interface on the port it is given);
nothing is sent to it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from otel_servers import closed_port

from memfit_jupyter import Agent, otel
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.otel.otlp_json import attributes

pytestmark = pytest.mark.phoenix

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "memfit-e2e"
RESOURCE = {"openinference.project.name": PROJECT}


def _get(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    program = subprocess.run(["bash", str(ROOT / "tests" / "otel_phoenix_setup.sh")], check=True,
                             capture_output=True, text=True).stdout.strip()
    workdir = tmp_path_factory.mktemp("phoenix")
    port = closed_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))},
           "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(closed_port()), "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false", "PHOENIX_AGENTS_DISABLE_BASH": "true"}
    log = (workdir / "phoenix.log").open("w")
    process = subprocess.Popen([program, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # its first start migrates a fresh database
        while True:
            assert process.poll() is None, f"Phoenix exited: {(workdir / 'phoenix.log').read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "Phoenix did not come up within 300 s"
            time.sleep(1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


def phoenix_spans(base: str, expected: int) -> list[dict]:
    """Every span of the project, once Phoenix has stored ``expected`` of them (it inserts in bulk)."""
    deadline = time.monotonic() + 120
    while True:
        spans, cursor = [], None
        while True:
            try:
                page = _get(f"{base}/v1/projects/{PROJECT}/spans?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
            except urllib.error.HTTPError as exc:
                if exc.code != 404:
                    raise
                break  # the project appears with its first stored span: not there yet
            spans += page["data"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(1)


def ours(trace, tmp_path, name):
    path = tmp_path / f"{name}.otlp.json"
    otel.export(trace, path=path)
    return otel.read_otlp_json(path)


def test_phoenix_reads_the_spans_the_tree_the_tokens_and_the_findings(phoenix, tmp_path):
    spin_dir, outage_dir = tmp_path / "spin", tmp_path / "outage"
    spin_dir.mkdir()
    outage_dir.mkdir()
    (outage_dir / "data.txt").write_text("1 2 3\n")
    # a spin, exported live while it runs
    spin = Agent(model="memfit/spin-demo", workdir=spin_dir, memory=False, reflection="auto", detectors={"logic_spin": True},
                 spin_warnings="prompt",
                 otel={"endpoint": phoenix, "resource_attributes": RESOURCE, "schedule_delay": 0.1}).start(
        load_scenario("spin-demo").task)
    spin.run()
    stats = otel.live_export_of(spin).wait(60)
    assert stats.dropped == 0 and stats.exported == stats.spans
    # a breaker that opens, exported from the saved trace afterwards
    outage = Agent(model="memfit/outage", workdir=outage_dir, memory=False, fallback_model="memfit/demo",
                   recovery_timeout=0.05).start(load_scenario("outage").task)
    outage.run()
    sent = otel.export(outage.trace(), endpoint=phoenix, resource_attributes=RESOURCE)

    traces = {"spin": spin.trace(), "outage": outage.trace()}
    mine = {name: ours(trace, tmp_path, name) for name, trace in traces.items()}
    assert sent.spans == len(mine["outage"]) and stats.spans == len(mine["spin"])
    stored = phoenix_spans(phoenix, stats.spans + sent.spans)
    by_trace: dict[str, list[dict]] = {}
    for span in stored:
        by_trace.setdefault(span["context"]["trace_id"], []).append(span)
    assert len(stored) == stats.spans + sent.spans and len(by_trace) == 2

    for name, trace in traces.items():
        spans = mine[name]
        got = by_trace[spans[0]["traceId"]]
        # names, and the whole tree: each span's parent as we sent it
        assert Counter(s["name"] for s in got) == Counter(s["name"] for s in spans)
        assert {s["context"]["span_id"]: s["parent_id"] for s in got} == \
            {s["spanId"]: s.get("parentSpanId") for s in spans}
        kinds = {s["name"].split(" ")[0]: s["span_kind"] for s in got}
        assert kinds == {"invoke_agent": "AGENT", "iteration": "CHAIN", "chat": "LLM", "execute_tool": "TOOL"}
        # tokens, as Phoenix counted them from gen_ai.usage.*
        llm = [s for s in got if s["span_kind"] == "LLM"]
        assert sum(s["attributes"]["llm.token_count.prompt"] for s in llm) == trace["totals"]["tokens"]["prompt"]
        assert sum(s["attributes"]["llm.token_count.completion"] for s in llm) == \
            trace["totals"]["tokens"]["completion"]
        (root,) = [s for s in got if s["parent_id"] is None]
        assert root["attributes"]["memfit.status"] == trace["status"]
        assert root["attributes"]["session.id"] == trace["run_id"]  # Phoenix's sessions: one per run
        failed = [s for s in got if s["status_code"] == "ERROR"]
        assert all("error.type" in s["attributes"] for s in failed)
        assert len(failed) == sum(1 for e in trace["events"] if e["type"] == "model_call" and not e["ok"]) + \
            sum(1 for e in trace["events"] if e["type"] == "observation" and e["tool"] and not e["ok"])

    spin_spans = by_trace[mine["spin"][0]["traceId"]]
    spin_events = [e for s in spin_spans for e in s["events"] if e["name"] == "memfit.spin"]
    assert sorted(e["attributes"]["memfit.detector"] for e in spin_events) == \
        sorted(e["detector"] for e in traces["spin"]["events"] if e["type"] == "spin")
    flagged = [s for s in spin_spans if s["attributes"].get("memfit.spin.detected")]
    assert flagged and all(s["name"].startswith("iteration ") for s in flagged)
    assert any(e["name"] == "memfit.reflection" and e["attributes"]["memfit.level_name"] == "CRITICAL"
               for s in spin_spans for e in s["events"])

    outage_spans = by_trace[mine["outage"][0]["traceId"]]
    (root,) = [s for s in outage_spans if s["parent_id"] is None]
    assert root["attributes"]["memfit.breaker.opened"] is True
    assert "primary:CLOSED->OPEN" in root["attributes"]["memfit.breaker.transitions"]
    opened = sorted((e for s in outage_spans for e in s["events"]  # (Phoenix lists spans in no set order)
                     if e["name"] == "memfit.breaker" and e["attributes"].get("memfit.to_state") == "OPEN"),
                    key=lambda e: e["timestamp"])
    assert opened and opened[0]["attributes"]["memfit.from_state"] == "CLOSED"
    errors = Counter(s["attributes"]["error.type"] for s in outage_spans
                     if s["span_kind"] == "LLM" and s["status_code"] == "ERROR")
    assert {"server_error", "rate_limit", "timeout"} <= set(errors)

    # Phoenix's own totals for the project (GraphQL), summed from the spans it stored
    answer = _get(f"{phoenix}/graphql", {"query": "{ projects { edges { node { name traceCount "
                                                  "tokenCountPrompt tokenCountCompletion } } } }"})
    (project,) = [e["node"] for e in answer["data"]["projects"]["edges"] if e["node"]["name"] == PROJECT]
    assert project["traceCount"] == 2
    assert project["tokenCountPrompt"] == sum(t["totals"]["tokens"]["prompt"] for t in traces.values())
    assert project["tokenCountCompletion"] == sum(t["totals"]["tokens"]["completion"] for t in traces.values())
    # and what we sent carries every GenAI attribute the chat spans need
    for span in mine["outage"]:
        a = attributes(span["attributes"])
        if a.get("gen_ai.operation.name") == "chat":
            assert {"gen_ai.provider.name", "gen_ai.request.model", "gen_ai.usage.input_tokens"} <= set(a)
