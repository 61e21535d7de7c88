"""Replay fidelity on a sampling local model: record a run, replay it, compare the events.

A test that drives the local model samples greedily (tests/local_model.py), so it takes one path;
this soak takes many on purpose.  The server samples (temperature 0.8, a new seed each start), the
three tasks of bench_local_model.py are taken in turn, and the runs are cut short the way real
ones are: a small time limit (calls abandoned at their deadline, limits reached before a call),
few iterations, and a memory store shared by the runs (later runs find earlier runs' memories).
Each run is recorded as a notebook cell records it (its warnings captured as ``log`` events), then
replayed twice, outside a cell and inside one, and each replay's events are compared with the
recording's (``replay.divergence``).  Every recording whose replay diverges is saved as
``tests/fixtures/local_soak_<run id>.json``; tests/test_replay.py replays every
``tests/fixtures/local_*.json``, so a saved divergence is a failing test until it is fixed.

    python tests/benchmarks/replay_soak.py [--runs 20] [--max-duration 40] [--max-iterations 3]
        [--save tests/fixtures] [--json out.json]

Exit status 1 when a replay diverged, 2 when the local model cannot run here.

Measured here (2 cores shared with other work, defaults): ``--runs 3`` and ``--runs 6``, 9 runs
in 387 s, all degraded by the 40 s limit with a call abandoned at its deadline and the limit's
warning captured as a log line (the path of tests/fixtures/local_time_limit_log_run.json);
18 replays, 0 diverged.  That path is the one whose replay, before the recorded clock looked
past recorded log lines, went on past the limit outside a cell (the fixture's test fails then).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

FIXTURES = HERE.parent / "fixtures"


def record(lm, task_name: str, store: Path, args) -> dict:
    """One run of ``task_name`` on the local model, recorded as a notebook cell records it."""
    from bench_local_model import TASKS, TOOLS

    from memfit_jupyter import Agent
    from memfit_jupyter.jupyter.capture import captured_logs
    from memfit_jupyter.reliability.guarantees import ExecutionGuarantees

    task, files = TASKS[task_name]
    workdir = Path(tempfile.mkdtemp(prefix=f"memfit-soak-{task_name}-"))
    for name, text in files.items():
        (workdir / name).write_text(text)
    agent = Agent(model=lm.model, api_base=lm.api_base, structured="schema", tools=TOOLS, workdir=workdir,
                  memory=store, max_iterations=args.max_iterations,
                  guarantees=ExecutionGuarantees(max_duration_seconds=args.max_duration))
    run = agent.start(task)
    with captured_logs(run):
        run.run()
    return json.loads(json.dumps(run.trace()))  # as saved: what a replay is given


def replay_divergences(trace: dict) -> dict[str, str | None]:
    """Where each replay of ``trace`` parts from it: outside a notebook cell and inside one."""
    from memfit_jupyter import Agent
    from memfit_jupyter.jupyter.capture import captured_logs
    from memfit_jupyter.replay import divergence

    found: dict[str, str | None] = {}
    for where in ("plain", "in a cell"):
        with tempfile.TemporaryDirectory() as elsewhere:
            replayed = Agent.replay(json.loads(json.dumps(trace)), workdir=elsewhere)
            if where == "plain":
                replayed.run()
            else:
                with captured_logs(replayed):
                    replayed.run()
            found[where] = divergence(trace["events"], [e.to_dict() for e in replayed.events])
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="recorded runs (the three tasks in turn)")
    ap.add_argument("--max-duration", type=float, default=40.0, help="each run's time limit, seconds")
    ap.add_argument("--max-iterations", type=int, default=3)
    ap.add_argument("--save", type=Path, default=FIXTURES, help="where diverging recordings are saved")
    ap.add_argument("--json", type=Path, help="write every run's outcome here")
    args = ap.parse_args()

    from bench_local_model import TASKS
    from local_model import LocalModel, missing

    reason = missing()
    if reason:
        print(f"cannot run the local model: {reason}", file=sys.stderr)
        return 2
    import logging

    # The warnings are the runs' events, not stderr (a logger with a handler has no last resort).
    logging.getLogger("memfit_jupyter").propagate = False
    logging.getLogger("memfit_jupyter").addHandler(logging.NullHandler())
    names = list(TASKS)
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as store, LocalModel.start(sampled=True) as lm:
        for i in range(args.runs):
            task_name = names[i % len(names)]
            trace = record(lm, task_name, Path(store) / ".memfit", args)
            found = replay_divergences(trace)
            kinds = Counter(e["type"] for e in trace["events"])
            row = {"run": i + 1, "task": task_name, "run_id": trace["run_id"], "status": trace["status"],
                   "events": len(trace["events"]), "logs": kinds.get("log", 0),
                   "timeouts": sum(e["type"] == "model_call" and e.get("error_kind") == "timeout"
                                   for e in trace["events"]),
                   "time_limit": any(e["type"] == "guarantee" and e.get("limit") == "max_duration_seconds"
                                     for e in trace["events"]),
                   "divergence": {k: v for k, v in found.items() if v}}
            if row["divergence"]:
                args.save.mkdir(parents=True, exist_ok=True)
                saved = args.save / f"local_soak_{trace['run_id']}.json"
                saved.write_text(json.dumps(trace, indent=1))
                row["saved"] = str(saved)
            rows.append(row)
            mark = "DIVERGED " + "; ".join(f"{k}: {v}" for k, v in row["divergence"].items()) \
                if row["divergence"] else "same events"
            print(f"#{i + 1:>3} {task_name:<10} {row['status']:<9} {row['events']:>3} events, "
                  f"{row['timeouts']} call(s) abandoned at a deadline, time limit: {row['time_limit']}, "
                  f"{row['logs']} log line(s): {mark}", flush=True)
    diverged = [r for r in rows if r["divergence"]]
    print(f"\n{len(rows)} runs in {time.perf_counter() - started:.0f} s: statuses "
          f"{dict(Counter(r['status'] for r in rows))}; {sum(r['time_limit'] for r in rows)} stopped by "
          f"the time limit, {sum(r['timeouts'] > 0 for r in rows)} with a call abandoned at its deadline; "
          f"{len(diverged)} replay(s) diverged")
    for r in diverged:
        print(f"  saved {r['saved']}")
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": rows},
                                        indent=1))
    return 1 if diverged else 0


if __name__ == "__main__":
    sys.exit(main())
