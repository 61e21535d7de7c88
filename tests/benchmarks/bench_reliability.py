"""What breaker and guarantee checks add to a scripted model call, as a ratio.

    python tests/benchmarks/bench_reliability.py [--calls 300]

Baseline: ``LLMClient.call`` on the scripted ``memfit/demo`` model through litellm, with no
budget and no breakers.  Checked: the same call with a BudgetTracker (cap before, record
after, the call itself on a worker thread under the wall-clock deadline) and a BreakerSet
(route before, record after); and the same without the deadline's thread (the call inline).
Also the checks alone and the deadline's thread hand-off alone, without the call.  All
measured in this run, interleaved, best of several rounds.
"""

from __future__ import annotations

import argparse
import time

from memfit_jupyter.llm.backend import LiteLLMBackend
from memfit_jupyter.llm.client import LLMClient
from memfit_jupyter.reliability.breakers import BreakerSet
from memfit_jupyter.reliability.deadline import call_with_deadline
from memfit_jupyter.reliability.guarantees import BudgetTracker, ExecutionGuarantees

MESSAGES = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "Which file?"}]
TIERS = {"primary": "memfit/demo", "fast": "", "fallback": ""}


def per_call(client: LLMClient, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        client.call("sample", MESSAGES)
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    n = ap.parse_args().calls
    rounds = ap.parse_args().rounds
    backend = LiteLLMBackend()
    g = ExecutionGuarantees(max_cost_usd=1e9, max_duration_seconds=1e9)
    plain = LLMClient(TIERS, backend, lambda *a, **k: None, run_key="bench-a")
    checked = LLMClient(TIERS, backend, lambda *a, **k: None, run_key="bench-b",
                        budget=BudgetTracker(g), breakers=BreakerSet(TIERS))
    inline = LLMClient(TIERS, backend, lambda *a, **k: None, run_key="bench-c",
                       budget=BudgetTracker(g, runner=lambda fn, seconds: fn()), breakers=BreakerSet(TIERS))
    per_call(plain, 20), per_call(checked, 20), per_call(inline, 20)  # warm up: litellm import, caches
    base, with_checks, no_thread = [], [], []
    for _ in range(rounds):
        base.append(per_call(plain, n))
        with_checks.append(per_call(checked, n))
        no_thread.append(per_call(inline, n))
    b, c, i = min(base), min(with_checks), min(no_thread)
    budget, breakers = BudgetTracker(g), BreakerSet(TIERS)
    t = time.perf_counter()
    for _ in range(n * 10):
        tier = breakers.route("primary")
        budget.cap_model_call(20, (1e-6, 2e-6), 1024, 60.0)
        budget.record_call(1e-5, 20, 10, 0.001)
        breakers.record(tier, ok=True)
    checks = (time.perf_counter() - t) / (n * 10)
    t = time.perf_counter()
    for _ in range(n * 10):
        call_with_deadline(lambda: None, 60.0)
    handoff = (time.perf_counter() - t) / (n * 10)
    print(f"scripted call, no checks:                   {b * 1e3:.3f} ms")
    print(f"scripted call, budget + breaker + deadline: {c * 1e3:.3f} ms   ratio {c / b:.3f}")
    print(f"same, call inline (no deadline):            {i * 1e3:.3f} ms   ratio {i / b:.3f}")
    print(f"the deadline's thread hand-off:             {handoff * 1e6:.1f} us per call = {handoff / b:.4f} of a scripted call")
    print(f"the checks alone:                           {checks * 1e6:.1f} us per call = {checks / b:.4f} of a scripted call")


if __name__ == "__main__":
    main()
