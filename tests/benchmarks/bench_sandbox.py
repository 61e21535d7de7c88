"""What the bubblewrap sandbox adds to a shell and a python call, as ratios to the same call unconfined.

    python tests/benchmarks/bench_sandbox.py [--rounds 20]

Times, interleaved and median of ``--rounds``: the ``shell`` tool running ``true`` and the
``python`` tool running ``sum(range(1000))``, each unconfined (the baseline: a shell process; the
python code in this process) and in the sandbox.  Prints the medians and the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from memfit_jupyter.sandbox import bwrap_problem, sandbox_for
from memfit_jupyter.tools import BUILTIN_TOOLS, ToolContext


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    problem = bwrap_problem()
    if problem is not None:
        raise SystemExit(f"no sandbox here: {problem}")
    calls = {"shell": ("command", "true"), "python": ("code", "sum(range(1000))")}
    times: dict[tuple[str, bool], list[float]] = {(t, s): [] for t in calls for s in (False, True)}
    with tempfile.TemporaryDirectory() as work:
        plain = ToolContext(workdir=Path(work))
        boxed = ToolContext(workdir=Path(work), sandbox=sandbox_for("bwrap"))
        for _ in range(args.rounds):
            for tool, (param, value) in calls.items():
                for sandboxed, ctx in ((False, plain), (True, boxed)):
                    t0 = time.perf_counter()
                    result = BUILTIN_TOOLS[tool](ctx, {param: value})
                    times[(tool, sandboxed)].append(time.perf_counter() - t0)
                    assert result.ok, result
    for tool in calls:
        base = statistics.median(times[(tool, False)])
        box = statistics.median(times[(tool, True)])
        print(f"{tool:6s} unconfined {base * 1000:8.2f} ms  sandboxed {box * 1000:8.2f} ms  ratio {box / base:8.1f}x")


if __name__ == "__main__":
    main()
