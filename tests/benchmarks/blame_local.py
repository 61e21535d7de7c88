"""``blame`` on the real small model: which step of a failed SmolLM2-135M run a corrective fork fixes.

Runs the three tasks of ``bench_local_model.py`` on the local model (tests/local_model.py; schema
replies, greedy sampling so a fork's live part is reproducible), each ``--runs`` times in turn
with short limits.  For every run that fails its oracle (the task's known answer in the final
answer), ``blame`` forks it at its candidate steps with its corrections (the findings'
suggestions as guidance, or the step skipped) and runs each fork to its end on the same model.
Reported per failed run: the candidate steps, the forks run, the step blamed (or none), the
model calls and seconds the forks took against the run's own.  Local calls cost nothing, so the
3x-cost budget does not bound the forks here: ``--max-forks`` does (via ``steps``).

    python tests/benchmarks/blame_local.py [--runs 3] [--max-iterations 3] [--max-forks 3]

Measured here (2 cores shared with a test suite and other work, one llama-server thread, the
defaults): 3 runs, all 3 failed their oracle (demo degraded at its 60 s limit, read failed, and
fail-first answered at once, wrongly); blame tried 2, 3 and 1 candidate steps, ran 11 forks and
found a fixing step in **none** (every fork failed too): the forks made 50 model calls against
the failed runs' own 12, in 327 s against their 124 s.  A model this small does not follow
guidance well enough for a corrective fork to turn its failure into a success; on the scripted
failure modes, where one injected step is at fault, blame names it (tests/test_blame.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ANSWERS = {"demo": "42", "read": "Ada Lovelace", "fail-first": "alpha"}


def calls(run) -> int:
    return sum(1 for e in run.events if e.type == "model_call")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3, help="runs (the three tasks in turn)")
    ap.add_argument("--max-iterations", type=int, default=3)
    ap.add_argument("--max-duration", type=float, default=60.0, help="each run's and fork's time limit, seconds")
    ap.add_argument("--max-forks", type=int, default=3, help="candidate steps tried per failed run, latest first")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    args = ap.parse_args()

    from bench_local_model import TASKS, TOOLS
    from local_model import LocalModel, missing

    reason = missing()
    if reason:
        print(f"cannot run the local model: {reason}", file=sys.stderr)
        return 2
    from memfit_jupyter import Agent, blame
    from memfit_jupyter.reliability.guarantees import ExecutionGuarantees
    from memfit_jupyter.study.intervention import candidates

    rows = []
    names = list(TASKS)
    with LocalModel.start() as lm:
        for i in range(args.runs):
            name = names[i % len(names)]
            task, files = TASKS[name]
            workdir = Path(tempfile.mkdtemp(prefix=f"memfit-blame-{name}-"))
            for rel, text in files.items():
                (workdir / rel).write_text(text)
            agent = Agent(model=lm.model, api_base=lm.api_base, structured="schema", tools=TOOLS, workdir=workdir,
                          memory=False, max_iterations=args.max_iterations,
                          guarantees=ExecutionGuarantees(max_duration_seconds=args.max_duration))
            started = time.perf_counter()
            run = agent.start(task)
            run.run()
            own_s = time.perf_counter() - started

            def solved(r, want=ANSWERS[name]) -> bool:
                return want.lower() in str(r.result.answer if r.result else "").lower()

            row = {"task": name, "status": run.status, "solved": solved(run), "iterations": run.iteration,
                   "calls": calls(run), "seconds": round(own_s, 1)}
            if not row["solved"]:
                steps = candidates(run.trace())[: args.max_forks]
                started = time.perf_counter()
                found = blame(run, oracle=solved, steps=steps,
                              workdir=Path(tempfile.mkdtemp(prefix=f"memfit-blame-{name}-forks-")))
                row.update(candidates=steps, forks=len(found.forks), blamed=found.step,
                           change=None if found.change is None else sorted(found.change),
                           fork_calls=sum(calls(f) for f in found.forks),
                           fork_seconds=round(time.perf_counter() - started, 1),
                           outcomes=found.frame["outcome"].to_list())
            rows.append(row)
            print(json.dumps(row), flush=True)
    failed = [r for r in rows if not r["solved"]]
    fixed = [r for r in failed if r.get("blamed") is not None]
    print(f"\n{len(rows)} runs, {len(failed)} failed; blame found a fixing step in {len(fixed)} of them; "
          f"forks run {sum(r['forks'] for r in failed)}, their calls {sum(r['fork_calls'] for r in failed)} "
          f"against the failed runs' own {sum(r['calls'] for r in failed)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
