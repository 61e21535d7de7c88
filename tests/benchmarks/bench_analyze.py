"""``analyze`` on a long imported trajectory, as a ratio to importing it, and how its cost a
step grows with the length of the run.

    python tests/benchmarks/bench_analyze.py [--steps 1000] [--scaling 1000,5000,20000]

Builds a mini-swe-agent 2.x trajectory of ``--steps`` steps offline (reads,
greps, edits, reruns, some failing, some repeating), then times, interleaved
and best of several rounds: ``load_trajectory`` on it (the baseline, measured
in this run), ``analyze`` of the imported trace with every detector and no
judge, and ``analyze`` with the reflection levels only (detectors off).

Then the scaling: ``analyze``'s cost a step at each length of ``--scaling``, as a
ratio to the cost a step at the first length (1.0 everywhere: linear; a ratio that
grows with the length: a part of the analysis walks the whole run at each step).
"""

from __future__ import annotations

import argparse
import gc
import json
import time

from memfit_jupyter import analyze, load_trajectory
from memfit_jupyter.reflection.config import DETECTORS

COMMANDS = ["grep -rn parse src", "cat src/pkg/version.py", "sed -n '1,40p' src/pkg/core.py",
            "sed -i 's/a/b/' src/pkg/version.py", "python check.py", "python -m pytest tests -q", "ls src"]


def trajectory(steps: int) -> dict:
    messages = [{"role": "system", "content": "You can run bash."}, {"role": "user", "content": "Fix it."}]
    for n in range(steps):
        cmd = COMMANDS[(n * 5 + n // 7) % len(COMMANDS)]
        code = 1 if "check" in cmd and n % 3 else 0
        out = f"line {n}: value {n * 7 % 13}\n" * (1 + n % 5) if code == 0 else f"AssertionError at 0x7f{n:04x}"
        messages.append({"role": "assistant", "content": f"step {n}", "tool_calls": [
            {"id": f"c{n}", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}",
                         "content": f"<returncode>{code}</returncode>\n<output>\n{out}</output>"})
    return {"trajectory_format": "mini-swe-agent-1.1", "info": {"exit_status": "Submitted"}, "messages": messages}


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scaling", default="1000,5000,20000",
                    help="run lengths whose cost a step is compared (empty: skip)")
    args = ap.parse_args()
    data = trajectory(args.steps)
    trace = load_trajectory(data)
    off = {name: False for name in DETECTORS}
    results = {"import": [], "analyze": [], "levels only": []}
    for _ in range(args.rounds):  # interleaved, so that load on the machine hits all three alike
        results["import"].append(best(lambda: load_trajectory(data), 1))
        results["analyze"].append(best(lambda: analyze(trace), 1))
        results["levels only"].append(best(lambda: analyze(trace, detectors=off), 1))
    base = min(results["import"])
    out = analyze(trace)
    print(f"{args.steps} steps; {len(out['analysis']['findings'])} findings; "
          f"spin_exit at {(out['analysis']['spin_exit'] or {}).get('iteration')}")
    for name, times in results.items():
        t = min(times)
        print(f"{name:12s} {t * 1000:8.1f} ms  {t / base:5.2f}x import  {t / args.steps * 1e6:7.1f} us/step")
    lengths = [int(n) for n in args.scaling.split(",") if n.strip()]
    if lengths:
        scaling(lengths, max(1, args.rounds))


def cpu(fn) -> float:
    """The CPU time ``fn`` takes (the seven people sharing the machine do not count)."""
    t = time.process_time()
    fn()
    return time.process_time() - t


def scaling(lengths: list[int], rounds: int) -> None:
    """``analyze``'s cost a step at each length, as a ratio to the first length's.

    The input traces are frozen out of the garbage collector's view first: its full collections
    walk every live object, so a big input would make any code look superlinear."""
    traces = {n: load_trajectory(trajectory(n)) for n in lengths}
    gc.collect()
    gc.freeze()
    per_step = {n: [] for n in lengths}
    for _ in range(rounds):  # interleaved: load on the machine hits every length alike
        for n in lengths:
            per_step[n].append(cpu(lambda n=n: analyze(traces[n])) / n)
    first = min(per_step[lengths[0]])
    print(f"scaling: analyze's CPU time a step, as a ratio to {lengths[0]:,} steps")
    for n in lengths:
        t = min(per_step[n])
        print(f"{n:>8,} steps {t * 1e6:7.1f} us/step  {t / first:5.2f}x")


if __name__ == "__main__":
    main()
