"""Live export while a run goes: a collector that is down, refusing or slow never stops the run,
and what it lost is counted and told; the magic's --otel and %config MemfitMagics.otel_endpoint."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient
from otel_servers import OtlpSink, closed_port

from memfit_jupyter import Agent, otel

ITERATIONS = 40


def loop_run(workdir, otel_options=None):
    """``memfit/bench-loop`` (cheap, varied tool calls, never finishes) for ITERATIONS iterations."""
    run = Agent(model="memfit/bench-loop", workdir=workdir, memory=False, max_iterations=ITERATIONS,
                otel=otel_options).start("Keep counting.")
    run.run()
    return run


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return loop_run(tmp_path_factory.mktemp("baseline"))


def otel_notes(run):
    return [e["text"] for e in run.trace()["events"] if e["type"] == "note" and e.get("source") == "otel"]


def same_run(run, baseline):
    assert run.status == baseline.status and run.iteration == baseline.iteration == ITERATIONS
    kinds = [e["type"] for e in run.trace()["events"] if not (e["type"] == "note" and e.get("source") == "otel")]
    assert kinds == [e["type"] for e in baseline.trace()["events"]]


@pytest.mark.parametrize("fault", ["down", "refusing", "busy"])
def test_a_collector_that_fails_loses_spans_that_are_counted_and_told(fault, baseline, tmp_path):
    options = {"timeout": 0.5, "schedule_delay": 0.02}
    if fault == "down":
        run = loop_run(tmp_path, {"endpoint": f"http://127.0.0.1:{closed_port()}", **options})
        sink = None
    else:
        with OtlpSink("400" if fault == "refusing" else "503") as sink:
            run = loop_run(tmp_path, {"endpoint": sink.endpoint, **options})
            stats = otel.live_export_of(run).wait(60)
    same_run(run, baseline)
    stats = otel.live_export_of(run).wait(60)
    assert stats.finished and stats.spans > 3 * ITERATIONS
    assert stats.exported == 0 and stats.dropped == stats.spans and stats.failed_batches >= 1
    assert stats.last_error
    if sink is not None:
        assert sink.requests >= stats.failed_batches and not sink.spans
    notes = otel_notes(run)
    assert notes and "lost so far" in notes[0] and stats.destination in notes[0]
    counts = [int(n.split("export: ")[1].split(" ")[0]) for n in notes]
    assert counts == sorted(counts) and counts[-1] <= stats.dropped


def test_a_slow_collector_overflows_the_bounded_queue_and_the_run_does_not_wait(baseline, tmp_path):
    with OtlpSink("slow:4") as sink:
        run = loop_run(tmp_path, {"endpoint": sink.endpoint, "timeout": 10, "schedule_delay": 0.02,
                                  "max_queue": 8})
        during = otel.live_export_of(run).stats()
        stats = otel.live_export_of(run).wait(90)
        received = len(sink.spans)
    same_run(run, baseline)
    assert during.pending > 0 or during.dropped > 0  # the run ended with the export still going
    assert stats.finished and stats.dropped > 0 and stats.exported > 0
    assert stats.exported + stats.dropped == stats.spans
    assert received == stats.exported
    assert otel_notes(run)


def test_a_working_collector_gets_every_span(tmp_path):
    with OtlpSink() as sink:
        run = loop_run(tmp_path, {"endpoint": sink.endpoint, "schedule_delay": 0.02})
        stats = otel.live_export_of(run).wait(60)
        ids = {s.span_id.hex() for s in sink.spans}
    assert stats.dropped == 0 and stats.exported == stats.spans == len(ids)
    assert {s["spanId"] for s in otel.read_otlp_json(_saved(run, tmp_path))} == ids
    assert not otel_notes(run)


def _saved(run, tmp_path):
    path = tmp_path / "saved.otlp.json"
    otel.export(run.trace(), path=path)
    return path


def test_no_export_when_the_sdk_is_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False, otel=str(tmp_path / "x.json")).start("x")
    assert otel.live_export_of(run) is None


CELLS = {
    "load": "%load_ext memfit_jupyter",
    "config": "%config MemfitMagics.otel_endpoint = 'configured.otlp.json'",
    "configured": "%%memfit_task --model memfit/demo --no-memory --quiet --name run1\n"
                  "What is the total of the numbers in data.txt?",
    "flag": "%%memfit_task --model memfit/demo --no-memory --quiet --name run2 --otel flag.otlp.json\n"
            "What is the total of the numbers in data.txt?",
    "wait": "from memfit_jupyter.otel import live_export_of\n"
            "for r in (run1, run2):\n"
            "    s = live_export_of(r).wait(30)\n"
            "    print(s.destination, s.exported, s.spans, s.dropped)",
    "bad": "%%memfit_task --otel ftp://nowhere\nx",
    "unset": "%config MemfitMagics.otel_endpoint = None",
    "bare": "%%memfit_task --otel\nx",
}


def test_the_magic_exports_with_the_flag_and_the_setting(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(src, metadata={"name": name}) for name, src in CELLS.items()]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this environment: no OTEL_* endpoint in it
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    cells = {c.metadata["name"]: c.outputs for c in notebook.cells}
    printed = "".join(o.get("text", "") for o in cells["wait"])
    lines = [line.split() for line in printed.strip().splitlines()]
    assert [line[0] for line in lines] == [str(tmp_path / "configured.otlp.json"), str(tmp_path / "flag.otlp.json")]
    for destination, exported, spans, dropped in lines:
        assert int(exported) == int(spans) > 0 and dropped == "0"
        names = {s["name"] for s in otel.read_otlp_json(destination)}
        assert {"invoke_agent memfit", "chat demo", "execute_tool read_file"} <= names
    for name, needle in (("bad", "--otel: not an OTLP/HTTP endpoint"), ("bare", "--otel: OpenTelemetry export: no endpoint")):
        text = "".join(o.get("text", "") for o in cells[name])
        assert f"UsageError: {needle}" in text and "Traceback" not in text, text
        assert len(text.strip().splitlines()) == 1
