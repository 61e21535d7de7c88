"""Tokens and model calls of the default mechanisms against a bare loop, on healthy runs.

The bare loop is the same agent with reflection (and with it spin detection) off and no
memory: one action call per iteration.  The defaults add reflection, spin analysis and
memory triage.  Both run the same scripted scenario in the same process; the ratio of
their tokens is the price of the mechanisms on a run that needed none of them (target
<= 1.2x).  With ``--local`` the same comparison runs on the local model (tests/local_model.py)
on the demo's task, ``--runs`` times each.

    python tests/benchmarks/bench_mechanisms.py [--scenarios demo,healthy-long] [--local --runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def totals(run):
    t = run.trace()["totals"]
    calls = [e for e in run.trace()["events"] if e["type"] == "model_call"]
    purposes: dict[str, int] = {}
    for c in calls:
        purposes[c["purpose"]] = purposes.get(c["purpose"], 0) + 1
    return {"tokens": t["tokens"]["total"], "calls": t["calls"], "status": run.status,
            "iterations": t["iterations"], "purposes": purposes}


def one(model, task, bare, **kwargs):
    from memfit_jupyter import Agent

    settings = {"reflection": "none", "memory": False} if bare else {}
    workdir = tempfile.mkdtemp(prefix="memfit-bench-")
    agent = Agent(model=model, workdir=workdir, **settings, **kwargs)
    run = agent.start(task)
    run.run()
    return totals(run)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="demo,healthy-long")
    ap.add_argument("--local", action="store_true", help="also on the local model (needs llama-server)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from memfit_jupyter.llm.scenarios import load_scenario

    rows = []
    for name in args.scenarios.split(","):
        task = load_scenario(name).task or "What is the total of the numbers in data.txt?"
        bare = one(f"memfit/{name}", task, bare=True)
        default = one(f"memfit/{name}", task, bare=False)
        rows.append((name, bare, default))
    if args.local:
        from local_model import LocalModel

        with LocalModel.start() as lm:
            for i in range(args.runs):
                task = "What is the total of the numbers in data.txt?"
                kw = {"api_base": lm.api_base, "structured": "schema", "max_iterations": 4}
                bare = one(lm.model, task, bare=True, **kw)
                default = one(lm.model, task, bare=False, **kw)
                rows.append((f"local#{i + 1}", bare, default))
    print(f"{'run':<14} {'bare tokens':>11} {'default tokens':>14} {'ratio':>6} {'bare calls':>10} "
          f"{'default calls':>13}  status (bare/default)  default calls by purpose")
    for name, b, d in rows:
        ratio = d["tokens"] / b["tokens"] if b["tokens"] else float("nan")
        print(f"{name:<14} {b['tokens']:>11} {d['tokens']:>14} {ratio:>5.2f}x {b['calls']:>10} {d['calls']:>13}  "
              f"{b['status']}/{d['status']:<12}  {d['purposes']}")


if __name__ == "__main__":
    main()
