"""Cost of measuring the main context each iteration: incremental counting vs counting it all.

The tiered context counts each timeline entry once and the system prompt only
when it changes.  The baseline is what a naive loop does: litellm's
``token_counter`` over the whole prompt on every iteration.  Both run in the
same process on the same growing timeline (``--history`` entries to start).

    python tests/benchmarks/bench_context.py [--iterations 200] [--history 1000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--history", type=int, default=1000)
    args = ap.parse_args()

    from memfit_jupyter import Agent
    from memfit_jupyter.llm.backend import import_litellm

    litellm = import_litellm()
    with tempfile.TemporaryDirectory() as tmp:
        run = Agent(model="memfit/demo", workdir=tmp, memory=False, context_window=10**9).start("benchmark")
        ext = run.context
        ext.on_start(run)
        line = "Observation (read_file):\n" + "delivery 01: 12 crates received at the north depot\n" * 4
        for i in range(args.history):
            run.timeline.add("observation", i, f"{i} {line}")
        run.last_prompt = run.next_prompt()
        ext.tiers.check(run)  # warm the caches and the tokenizer

        ours, naive = [], []
        for i in range(args.iterations):
            run.timeline.add("action", i, f'{{"tool": "read_file", "params": {{"path": "f{i}.txt"}}}}', role="assistant")
            run.timeline.add("observation", i, f"{i} {line}")
            t = time.perf_counter()
            ext.tiers.used_tokens(run)
            ours.append(time.perf_counter() - t)
            messages = [run.last_prompt[0], *run.timeline.messages()]
            t = time.perf_counter()
            litellm.token_counter(model=run.agent.model, messages=messages)
            naive.append(time.perf_counter() - t)

    o, n = statistics.median(ours), statistics.median(naive)
    print(f"timeline: {args.history} + 2/iteration entries, {args.iterations} iterations")
    print(f"incremental count (median): {o * 1e3:.3f} ms")
    print(f"whole-prompt token_counter (median, baseline): {n * 1e3:.3f} ms")
    print(f"ratio incremental/baseline: {o / n:.4f}")


if __name__ == "__main__":
    main()
