"""Sweep overhead per run on the local engine, against a scripted run's own duration.

With ``max_parallel=1`` the sweep's runs follow one another on one worker, so the time
between two runs' ends, as the sweep's progress callback sees them, is one run plus what
the sweep adds to it (sending the spec, a clean working directory, writing the trace,
the row back to the caller, starting the next).  Overhead per run = that interval minus
the run's own duration (``duration_s`` in its trace, from ``Run`` to ``RunResult``),
both measured in the same seconds, so the load of a shared machine falls on both alike.
The first interval (the pool's start-up) is left out.  The baseline row also times the
same runs one by one in this process through the public API, to show that a run takes
as long in a sweep as by itself.  Medians over every run.

    python tests/benchmarks/bench_sweep.py [--runs 24] [--scenario healthy-long]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--scenario", default="healthy-long")
    args = ap.parse_args()

    from memfit_jupyter import Agent, sweep
    from memfit_jupyter.llm.backend import import_litellm
    from memfit_jupyter.llm.scenarios import load_scenario
    from memfit_jupyter.sweep.spec import agent_kwargs, expand

    import_litellm()
    task = load_scenario(args.scenario).task or "do the task"
    shared = {"model": f"memfit/{args.scenario}", "memory": False}
    # Distinct runs (distinct keys) that behave alike: only a limit they never reach differs.
    grid = {"max_duration_seconds": [1000.0 + i for i in range(args.runs)]}
    root = Path(tempfile.mkdtemp(prefix="bench-sweep-"))

    ends: list[float] = []

    def on_progress(p) -> None:
        if len(ends) < p.done:
            ends.append(time.perf_counter())

    t0 = time.perf_counter()
    df = sweep([task], grid, settings=shared, out=root / "s", max_parallel=1, progress=on_progress)
    wall = time.perf_counter() - t0
    assert df.height == args.runs and df["error"].null_count() == args.runs, df
    intervals = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    durations = df["duration_s"].to_list()[1:]
    overheads = [i - d for i, d in zip(intervals, durations, strict=True)]

    alone = []  # "b" and "s": the same path lengths, since the prompt names the working directory
    for spec in expand([task], grid, shared):
        work = root / "b" / "runs" / spec.key / "work"
        work.mkdir(parents=True)
        t1 = time.perf_counter()
        Agent(**agent_kwargs(spec.settings), workdir=work).start(spec.task).run()
        alone.append(time.perf_counter() - t1)

    run_s = statistics.median(durations)
    over = statistics.median(overheads)
    print(f"scenario {args.scenario}: {args.runs} runs, max_parallel=1, sweep wall {wall:.2f} s "
          f"(first run ended {ends[0] - t0:.2f} s in: pool start-up)")
    print(f"a run by itself, in this process        median {statistics.median(alone) * 1000:8.1f} ms")
    print(f"a run in the sweep (its own duration_s) median {run_s * 1000:8.1f} ms")
    print(f"interval between two runs' ends         median {statistics.median(intervals) * 1000:8.1f} ms")
    print(f"overhead per run                        median {over * 1000:8.1f} ms "
          f"(p90 {sorted(overheads)[int(0.9 * len(overheads))] * 1000:.1f})")
    print(f"overhead / run duration: {over / run_s:.1%} (target <= 10%)")


if __name__ == "__main__":
    main()
