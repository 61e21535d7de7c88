"""Live export while a run goes: a collector that is down, refusing or slow never stops the run,
and what it lost is counted and told; the magic's --otel and %config MemfitMagics.otel_endpoint."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient
from otel_servers import OtlpSink, closed_port

from memfit_jupyter import Agent, otel
from memfit_jupyter.jupyter.state import facts
from memfit_jupyter.otel.otlp_json import attributes

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
    return [e for e in run.trace()["events"] if e["type"] == "note" and e.get("source") == "otel"]


def same_run(run, baseline):
    assert run.status == baseline.status and run.iteration == baseline.iteration == ITERATIONS
    kinds = [e["type"] for e in run.trace()["events"] if not (e["type"] == "note" and e.get("source") == "otel")]
    assert kinds == [e["type"] for e in baseline.trace()["events"]]


def told_losses(run, stats):
    """The notes tell the losses: counts that grow while the run goes, and after ``run_end`` one
    note with the final count, the spans lost in the last flush included."""
    events = run.trace()["events"]
    end = next(i for i, e in enumerate(events) if e["type"] == "run_end")
    notes = otel_notes(run)
    during = [n for n in notes if events.index(n) < end]
    (final,) = [n for n in notes if events.index(n) > end]
    counts = [int(n["text"].split("export: ")[1].split(" ")[0]) for n in during]
    assert all("lost so far" in n["text"] for n in during) and counts == sorted(counts)
    assert all(c <= stats.dropped for c in counts)
    assert f"export: {stats.dropped} of {stats.spans} span(s) lost" in final["text"]
    assert stats.destination in final["text"] and "in the last flush after the run ended" in final["text"]
    assert final["text"] in facts(run.trace()).notes  # what the run's view lists
    return final["text"]


@pytest.mark.parametrize("fault", ["down", "refusing", "busy"])
def test_a_collector_that_fails_loses_spans_that_are_counted_and_told(fault, baseline, tmp_path):
    options = {"timeout": 0.5, "schedule_delay": 0.02}
    if fault == "down":  # unpaced, so that its first batches fail while the run goes
        run = loop_run(tmp_path, {"endpoint": f"http://127.0.0.1:{closed_port()}", **options, "cpu_share": 1.0})
        sink = None
    else:
        with OtlpSink("400" if fault == "refusing" else "503") as sink:
            run = loop_run(tmp_path, {"endpoint": sink.endpoint, **options})
            stats = otel.live_export_of(run).wait(60)
    same_run(run, baseline)
    stats = otel.live_export_of(run).wait(60)
    assert stats.finished and stats.spans > 3 * ITERATIONS and stats.waiting == 0
    assert stats.exported == 0 and stats.dropped == stats.spans and stats.failed_batches >= 1
    assert stats.last_error
    if sink is not None:
        assert sink.requests >= stats.failed_batches and not sink.spans
    told_losses(run, stats)
    if fault == "down":
        assert "lost so far" in otel_notes(run)[0]["text"]


def test_after_a_failed_batch_the_export_cools_down_instead_of_retrying(tmp_path):
    """Many batches against a refusing collector: one request, the next batches are not sent
    within the cooldown, and every span of them is counted as lost."""
    with OtlpSink("400") as sink:
        run = loop_run(tmp_path, {"endpoint": sink.endpoint, "timeout": 0.5, "schedule_delay": 0.02,
                                  "max_queue": 16})
        stats = otel.live_export_of(run).wait(60)
        requests = sink.requests
    assert stats.failed_batches >= 1 and stats.skipped_batches >= 1
    assert requests == stats.failed_batches < stats.failed_batches + stats.skipped_batches
    assert stats.dropped == stats.spans and stats.exported == 0


@pytest.mark.slow  # a collector that takes seconds to answer, on purpose
def test_a_slow_collector_overflows_the_bounded_queue_and_the_run_does_not_wait(baseline, tmp_path):
    with OtlpSink("slow:4") as sink:
        run = loop_run(tmp_path, {"endpoint": sink.endpoint, "timeout": 10, "schedule_delay": 0.02,
                                  "max_queue": 8})
        during = otel.live_export_of(run).stats()
        stats = otel.live_export_of(run).wait(90)
        received = len(sink.spans)
    same_run(run, baseline)
    # the run ended with the export still going
    assert not during.finished and (during.pending > 0 or during.dropped > 0 or during.waiting > 0)
    assert stats.finished and stats.dropped > 0 and stats.exported > 0
    assert stats.exported + stats.dropped == stats.spans
    assert received == stats.exported
    told_losses(run, stats)


def test_the_mapping_waits_for_its_share_of_the_time_and_catches_up_after_the_run(baseline, tmp_path):
    """With a tiny CPU share the run goes on without its spans, which are all mapped and sent
    after run_end: the run's own thread only hands events over."""
    with OtlpSink() as sink:
        run = loop_run(tmp_path, {"endpoint": sink.endpoint, "schedule_delay": 0.02, "cpu_share": 1e-6})
        during = otel.live_export_of(run).stats()
        stats = otel.live_export_of(run).wait(60)
        received = {s.span_id.hex() for s in sink.spans}
    same_run(run, baseline)
    assert during.waiting > len(run.trace()["events"]) // 2 and during.spans < stats.spans
    assert stats.dropped == 0 and stats.waiting == 0 and stats.exported == stats.spans == len(received)
    assert not otel_notes(run)


def test_a_working_collector_gets_every_span(tmp_path):
    with OtlpSink() as sink:
        run = loop_run(tmp_path, {"endpoint": sink.endpoint, "schedule_delay": 0.02})
        stats = otel.live_export_of(run).wait(60)
        ids = {s.span_id.hex() for s in sink.spans}
    assert stats.dropped == 0 and stats.exported == stats.spans == len(ids)
    assert {s["spanId"] for s in otel.read_otlp_json(_saved(run, tmp_path))} == ids
    assert not otel_notes(run)


def test_a_fork_is_exported_live_where_its_parent_is(tmp_path):
    parent = Agent(model="memfit/demo", workdir=tmp_path / "parent", memory=False,
                   otel={"path": str(tmp_path / "spans.json"), "schedule_delay": 0.02}).start(
        "What is the total of the numbers in data.txt?")
    (tmp_path / "parent").mkdir()
    parent.run()
    otel.live_export_of(parent).wait(30)
    child = parent.fork(2, workdir=tmp_path / "child", guidance="check the sum twice")
    child.run()
    stats = otel.live_export_of(child).wait(30)
    assert stats.dropped == 0 and stats.exported == stats.spans > 0
    runs = {a.get("memfit.run_id") for a in (attributes(s.get("attributes", [])) for s in
                                             otel.read_otlp_json(tmp_path / "spans.json"))}
    assert {parent.id, child.id} <= runs


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


@pytest.mark.kernel
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


def test_closing_the_export_of_a_run_that_stops_midway_ends_its_open_spans(tmp_path):
    path = tmp_path / "cut.otlp.json"
    run = Agent(model="memfit/bench-loop", workdir=tmp_path, memory=False, max_iterations=ITERATIONS,
                otel={"path": path, "schedule_delay": 0.02}).start("Keep counting.")
    for _ in range(3):
        run.step()
    stats = otel.live_export_of(run).close(30)
    spans = otel.read_otlp_json(path)
    assert stats.finished and stats.dropped == 0 and stats.exported == stats.spans == len(spans)
    (root,) = [s for s in spans if not s.get("parentSpanId")]
    assert attributes(root["attributes"])["memfit.unfinished"] is True
    assert {s["name"] for s in spans} >= {"iteration 1", "iteration 3", "execute_tool python"}
    run.step()  # the run goes on, no longer exported
    assert otel.live_export_of(run).stats() == stats
