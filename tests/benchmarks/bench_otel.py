"""What live OpenTelemetry export costs a run, with the collector working, down, refusing, busy
or slow; the baseline is the same run without export, measured in the same process.

Each round runs ``memfit/bench-loop`` for ``--iterations`` iterations once per variant, in an
order that rotates from round to round; the report gives each variant's median run time and
CPU time, the median over rounds of its ratio to the run without export of the same round (the
machine's load drifts: pairs within a round share it), the share of the process's CPU the
export's own threads used while the run went (``export%``, read from their thread clocks), what
the export lost (dropped / spans, per run), whether the run was told (notes), and how long after
the run the export went on (``after s``: the mapping left for after ``run_end`` and the last
flush; its CPU ``after cpu``).  A second part times the
mapping itself: events fed through ``SpanBuilder`` into an in-memory SDK exporter.

    python tests/benchmarks/bench_otel.py [--iterations 200] [--rounds 5]

Collectors are real HTTP servers on 127.0.0.1 in processes of their own
(tests/otel_servers.py): ``ok`` takes every batch, ``refusing`` answers 400, ``busy`` 503
(the exporter retries until its timeout), ``slow`` answers after 5 s (past the live export's
default timeout), ``down`` is a port where nothing listens.  The export runs with its defaults
(timeout, queue, CPU share).  Wall time is what a person waits; CPU time (of the whole
process, the export's threads included) is less at the mercy of other load on the machine.
The scripted model answers in microseconds, so the run is all CPU: the worst case for an
export that shares the process (a real model's calls leave the export idle time to use).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TESTS))

from otel_servers import closed_port  # noqa: E402

VARIANTS = ("none", "file", "ok", "down", "refusing", "busy", "slow")


EXPORT_THREADS = ("memfit-otel", "OtelBatch")  # the live export's threads and the SDK's


def _thread_cpu() -> dict[int, float]:
    """CPU seconds of each live export thread now, by thread id."""
    out = {}
    for thread in threading.enumerate():
        if thread.name.startswith(EXPORT_THREADS) and thread.ident is not None:
            try:
                out[thread.ident] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (OSError, AttributeError):  # the thread ended meanwhile
                pass
    return out


def one_run(iterations: int, target: dict | None) -> tuple[float, float, float, object]:
    """Wall and CPU seconds of the run (CPU of the whole process: the export's threads too), and
    the CPU seconds the export's own threads used meanwhile."""
    from memfit_jupyter import Agent

    run = Agent(model="memfit/bench-loop", workdir=tempfile.mkdtemp(), memory=False,
                max_iterations=iterations, otel=target).start("Keep counting.")
    before = _thread_cpu()
    t0, c0 = time.perf_counter(), time.process_time()
    run.run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    after = _thread_cpu()
    export_cpu = sum(seconds - before.get(ident, 0.0) for ident, seconds in after.items())
    return wall, cpu, export_cpu, run


def collector(mode: str) -> tuple[subprocess.Popen, str]:
    """An OTLP receiver in a process of its own (tests/otel_servers.py), and its endpoint."""
    process = subprocess.Popen([sys.executable, str(TESTS / "otel_servers.py"), mode],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def mapping_cost(trace: dict, repeats: int) -> float:
    """CPU microseconds per event: SpanBuilder + SDK spans, ended into memory."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from memfit_jupyter.otel import saved, sdk
    from memfit_jupyter.otel.spans import SpanBuilder

    best = float("inf")
    for _ in range(repeats):
        provider, ids = sdk.provider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        tracer = provider.get_tracer("bench")
        t0 = time.thread_time()
        builder = SpanBuilder(tracer, ids, header=saved.header_of(trace), wall0_ns=time.time_ns())
        for event in trace["events"]:
            builder.feed(event)
        best = min(best, time.thread_time() - t0)
    return best / len(trace["events"]) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    one_run(5, None)  # litellm's import and the scenario's first load stay out of the timings
    sinks = {name: collector(mode) for name, mode in
             (("ok", "ok"), ("refusing", "400"), ("busy", "503"), ("slow", "slow:5"))}
    down = f"http://127.0.0.1:{closed_port()}"
    folder = Path(tempfile.mkdtemp())

    def target(variant: str, round_: int) -> dict | None:
        if variant == "none":
            return None
        if variant == "file":
            return {"path": folder / f"run{round_}.otlp.json"}
        return {"endpoint": down if variant == "down" else sinks[variant][1]}

    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    export_cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    after: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    lost: dict[str, list[tuple[int, int, int]]] = {v: [] for v in VARIANTS}
    from memfit_jupyter.otel import live_export_of

    for r in range(args.rounds):
        order = VARIANTS[r % len(VARIANTS):] + VARIANTS[: r % len(VARIANTS)]
        for variant in order:
            seconds, cpu_seconds, own, run = one_run(args.iterations, target(variant, r))
            times[variant].append(seconds)
            cpu[variant].append(cpu_seconds)
            export_cpu[variant].append(own)
            if variant != "none":
                # what is left (mapping, last flush) ends before the next run starts, outside the
                # timings, so that it never weighs on another variant's run; it is reported apart
                t0, c0 = time.perf_counter(), time.process_time()
                stats = live_export_of(run).wait(120)
                after[variant].append((time.perf_counter() - t0, time.process_time() - c0))
                notes = sum(1 for e in run.trace()["events"] if e["type"] == "note" and e.get("source") == "otel")
                lost[variant].append((stats.dropped, stats.spans, notes))
    for process, _ in sinks.values():
        process.stdin.close()
        process.wait(10)

    def paired(values: dict[str, list[float]], variant: str) -> float:
        """The median over rounds of the variant's ratio to the run without export of its round."""
        return statistics.median(v / b for v, b in zip(values[variant], values["none"], strict=True))

    base_cpu = statistics.median(cpu["none"])
    print(f"bench-loop, {args.iterations} iterations, {args.rounds} rounds (medians; ratios to the run "
          "without export of the same round)")
    print(f"{'variant':<10}{'wall s':>8}{'ratio':>7}{'cpu s':>8}{'ratio':>7}{'export%':>8}{'after s':>9}"
          f"{'after cpu':>10}   dropped/spans (notes) per run")
    for variant in VARIANTS:
        share = statistics.median(e / c for e, c in zip(export_cpu[variant], cpu[variant], strict=True))
        wait_s = f"{statistics.median(a for a, _ in after[variant]):>9.2f}" if after[variant] else f"{'-':>9}"
        wait_c = f"{statistics.median(c for _, c in after[variant]):>10.2f}" if after[variant] else f"{'-':>10}"
        losses = ", ".join(f"{d}/{s} ({n})" for d, s, n in lost[variant]) or "-"
        print(f"{variant:<10}{statistics.median(times[variant]):>8.3f}{paired(times, variant):>7.3f}"
              f"{statistics.median(cpu[variant]):>8.3f}{paired(cpu, variant):>7.3f}{share:>8.1%}"
              f"{wait_s}{wait_c}   {losses}")
    print("export% = CPU of the export's threads while the run went / the process's CPU; after = the "
          "export's work left after run_end (mapping, last flush), outside the run's time")
    _, _, _, sample = one_run(args.iterations, None)
    trace = sample.trace()
    per_event = mapping_cost(trace, 5)
    per_run = per_event * len(trace["events"]) / 1e3
    print(f"mapping: {per_event:.1f} us CPU per event ({len(trace['events'])} events, {per_run:.1f} ms a run, "
          f"{per_run / 1e3 / base_cpu:.2%} of the CPU time of the run without export)")


if __name__ == "__main__":
    main()
