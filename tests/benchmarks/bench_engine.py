"""Orchestration overhead of one iteration, against a bare scripted litellm call.

Overhead = the wall time of ``run.step()`` minus the time inside the model call
(``model_call.latency_s``) minus the time inside the tool (``observation.duration_s``):
prompt building, parsing, validation, events, records, the timeline.
The baseline is ``litellm.completion`` on the same scripted provider with the
same final prompt, measured in the same process.  The run starts with 1,000
events of history in its timeline (a long run).

    python tests/benchmarks/bench_engine.py [--iterations 200] [--history 1000]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--history", type=int, default=1000)
    args = ap.parse_args()

    from memfit_jupyter import Agent
    from memfit_jupyter.llm.backend import import_litellm

    litellm = import_litellm()
    workdir = tempfile.mkdtemp()
    agent = Agent(model="memfit/bench-loop", workdir=workdir, memory=False, reflection="none",
                  max_iterations=args.iterations + 1)
    run = agent.start("keep counting")
    # 1,000 events of history: earlier actions and observations in the timeline and the event list.
    for i in range(args.history // 2):
        run.timeline.add("action", 0, json.dumps({"thought": f"earlier step {i}", "tool": "python"}), role="assistant")
        run.timeline.add("observation", 0, f"Observation (python): {i}")
        run.emit("note", iteration=0, text=f"history {i}")
        run.emit("note", iteration=0, text=f"history {i}b")

    overheads, steps = [], []
    for _ in range(args.iterations):
        first = len(run.events)
        t0 = time.perf_counter()
        run.step()
        wall = time.perf_counter() - t0
        new = run.events[first:]
        inside = sum(e.get("latency_s", 0.0) for e in new if e.type == "model_call")
        inside += sum(e.get("duration_s", 0.0) for e in new if e.type == "observation")
        overheads.append(wall - inside)
        steps.append(wall)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB

    messages = run.next_prompt()
    meta = {"memfit_purpose": "action", "memfit_run": "baseline"}
    bare = []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        litellm.completion(model="memfit/bench-loop", messages=messages, max_tokens=1024, timeout=60,
                           metadata=meta, num_retries=0)
        bare.append(time.perf_counter() - t0)

    p50_o, p95_o = statistics.median(overheads), pct(overheads, 0.95)
    p50_b, p95_b = statistics.median(bare), pct(bare, 0.95)
    print(f"iterations={args.iterations} history_events={args.history} timeline_entries={len(run.timeline)}")
    print(f"bare scripted litellm call      p50 {p50_b * 1e3:7.3f} ms  p95 {p95_b * 1e3:7.3f} ms")
    print(f"orchestration overhead per step p50 {p50_o * 1e3:7.3f} ms  p95 {p95_o * 1e3:7.3f} ms")
    print(f"ratio overhead / bare call      p50 {p50_o / p50_b:.3f}x  p95 {p95_o / p95_b:.3f}x  (target p50 <= 0.25x)")
    print(f"whole step p50 {statistics.median(steps) * 1e3:.3f} ms; peak RSS of the process {peak / 1e6:.1f} MB")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
