"""The agent on a real small model: SmolLM2-135M-Instruct on llama.cpp's server (tests/local_model.py).

Three tasks, taken in turn for ``--runs`` runs per structured mode (``schema``: the action
schema as ``response_format``, decoded under the server's grammar; ``text``: JSON asked for
in the prompt, parsed and repaired):

``demo``       the demo's task: add the numbers in data.txt (read_file, python, finish);
``read``       a file-reading task: who wrote notes.txt;
``fail-first`` a task whose first step fails: data.txt is missing, data_backup.txt is there.

Each run uses the default mechanisms (reflection, spin detection, memory triage in a fresh
store) with short limits, so that a mode's runs take minutes.  Per mode it reports: the
statuses (all must be one of ``records.STATUSES``), the action replies parsed and
unparsed (a format error of the action purpose is an unparsed reply), the calls that came
back and how many of them recorded their tokens (> 0 prompt and completion tokens) and a
cost (a number; the local model has no price, so $0), and the mean calls, tokens and
duration of a run.  Exit status 1 when under ``schema`` a reply went unparsed, a status is
not valid, or a completed call lacks its tokens.

    python tests/benchmarks/bench_local_model.py [--runs 20]
        [--modes schema,text] [--max-iterations 2] [--max-tokens 256] [--json out.json] [--traces DIR]

Measured here (2 shared cores, one llama-server thread, defaults, ``--modes schema``): 20 runs,
statuses 13 failed / 5 done / 2 degraded (all valid); 33 action replies, 33 parsed, 0 unparsed,
no format error of any purpose, 0 replies cut off at the cap; 91 calls, 86 answered (5 cut off
by the run's 60 s limit), tokens on 86/86, a cost ($0) on 91/91; per run 4.5 calls, 2,229
tokens, 40 s.  A model this small seldom answers right (the 5 ``done`` runs finished at once
with a wrong answer): the benchmark measures whether its replies are usable, not its answers.

The same 20 runs under ``--modes text`` (JSON asked for in the prompt): statuses 13 failed /
7 degraded (all valid); 107 action replies, 0 parsed, 107 unparsed (the model writes prose
or code; each unparsed reply is re-asked, then reflected on); 197 calls, 177 answered (20
cut off by the 60 s limit), tokens on 177/177, a cost on 197/197; 79 replies cut off at the
256-token cap; per run 9.8 calls, 6,904 tokens, 60 s (every run used all its time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TASKS = {
    "demo": ("What is the total of the numbers in data.txt?", {"data.txt": "12\n7\n23\n"}),
    "read": ("Read notes.txt and say who wrote it.",
             {"notes.txt": "Meeting notes, 3 March.\nWritten by Ada Lovelace.\nNext meeting: Friday.\n"}),
    "fail-first": ("Read data.txt and say what its first line is. If data.txt does not exist, "
                   "read data_backup.txt instead.", {"data_backup.txt": "alpha\nbeta\n"}),
}
TOOLS = ["read_file", "python", "finish"]


def one_run(lm, mode: str, task_name: str, index: int, args) -> dict:
    """One run of ``task_name`` in a fresh working directory; its figures from the trace."""
    from memfit_jupyter import Agent
    from memfit_jupyter.reliability.guarantees import ExecutionGuarantees

    task, files = TASKS[task_name]
    workdir = Path(tempfile.mkdtemp(prefix=f"memfit-local-{task_name}-"))
    for name, text in files.items():
        (workdir / name).write_text(text)
    agent = Agent(model=lm.model, api_base=lm.api_base, structured=mode, tools=TOOLS, workdir=workdir,
                  max_iterations=args.max_iterations,
                  guarantees=ExecutionGuarantees(max_duration_seconds=args.max_duration))
    run = agent.start(task)
    run.llm.max_output_tokens = args.max_tokens
    started = time.perf_counter()
    run.run()
    duration = time.perf_counter() - started
    trace = run.trace()
    if args.traces:
        args.traces.mkdir(parents=True, exist_ok=True)
        (args.traces / f"{mode}-{index:02d}-{task_name}.json").write_text(json.dumps(trace, indent=1))
    events = trace["events"]
    calls = [e for e in events if e["type"] == "model_call"]
    answered = [c for c in calls if c["ok"]]
    action_replies = [c for c in answered if c["purpose"] == "action"]
    unparsed = [e for e in events if e["type"] == "format_error" and e["purpose"] == "action"]
    return {
        "task": task_name, "status": run.status, "duration_s": duration,
        "iterations": trace["totals"]["iterations"],
        "calls": len(calls), "answered": len(answered),
        "failed_calls": Counter(c["error_kind"] for c in calls if not c["ok"]),
        "with_tokens": sum(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in answered),
        "with_cost": sum(isinstance(c.get("cost_usd"), int | float) for c in calls),
        "cost_usd": sum(c["cost_usd"] for c in calls),
        "tokens": sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls),
        "modes": sorted({c.get("structured") for c in calls}),
        "action_replies": len(action_replies), "action_unparsed": len(unparsed),
        "action_parsed": len(action_replies) - len(unparsed),
        "cut_off": sum(c.get("finish_reason") == "length" for c in answered),
        "purposes": Counter(c["purpose"] for c in calls),
        "tools": [e["tool"] for e in events if e["type"] == "action"],
        "unparsed_errors": [e["error"] for e in unparsed][:3],
    }


def summary(mode: str, rows: list[dict]) -> dict:
    from memfit_jupyter.records import STATUSES

    total = lambda key: sum(r[key] for r in rows)  # noqa: E731
    failed: Counter = Counter()
    purposes: Counter = Counter()
    for r in rows:
        failed.update(r["failed_calls"])
        purposes.update(r["purposes"])
    return {
        "mode": mode, "runs": len(rows),
        "statuses": dict(Counter(r["status"] for r in rows)),
        "statuses_valid": all(r["status"] in STATUSES for r in rows),
        "statuses_by_task": {t: dict(Counter(r["status"] for r in rows if r["task"] == t)) for t in TASKS},
        "action_replies": total("action_replies"), "action_unparsed": total("action_unparsed"),
        "action_parsed": total("action_parsed"),
        "calls": total("calls"), "answered": total("answered"), "failed_calls": dict(failed),
        "with_tokens": total("with_tokens"), "with_cost": total("with_cost"),
        "cost_usd": total("cost_usd"), "cut_off": total("cut_off"),
        "sent_as": sorted({m for r in rows for m in r["modes"] if m}),
        "calls_by_purpose": dict(purposes),
        "mean_calls": statistics.mean(r["calls"] for r in rows),
        "mean_tokens": statistics.mean(r["tokens"] for r in rows),
        "mean_duration_s": statistics.mean(r["duration_s"] for r in rows),
        "mean_iterations": statistics.mean(r["iterations"] for r in rows),
    }


def report(s: dict) -> str:
    return "\n".join([
        f"== {s['mode']}: {s['runs']} runs (calls sent as {', '.join(s['sent_as']) or '-'})",
        f"  statuses            {s['statuses']}  valid: {s['statuses_valid']}",
        *(f"    {task:<11}       {st}" for task, st in s["statuses_by_task"].items()),
        f"  action replies      {s['action_replies']}: {s['action_parsed']} parsed, {s['action_unparsed']} unparsed",
        f"  calls               {s['calls']} made, {s['answered']} answered, failed: {s['failed_calls'] or 0}"
        f"; by purpose {s['calls_by_purpose']}",
        f"  recorded            tokens > 0 on {s['with_tokens']}/{s['answered']} answered calls, "
        f"a cost on {s['with_cost']}/{s['calls']} calls (total ${s['cost_usd']:.4f})",
        f"  cut off at the cap  {s['cut_off']} replies",
        f"  per run (mean)      {s['mean_calls']:.1f} calls, {s['mean_tokens']:.0f} tokens, "
        f"{s['mean_duration_s']:.1f} s, {s['mean_iterations']:.1f} iterations",
    ])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="runs per mode (the three tasks in turn)")
    ap.add_argument("--modes", default="schema,text")
    ap.add_argument("--max-iterations", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256, help="cap on every call's output tokens")
    ap.add_argument("--max-duration", type=float, default=60.0, help="each run's time limit, seconds")
    ap.add_argument("--json", type=Path, help="write every run's figures and the summaries here")
    ap.add_argument("--traces", type=Path, help="save every run's trace in this folder")
    args = ap.parse_args()

    from local_model import LocalModel, missing

    reason = missing()
    if reason:
        print(f"cannot run the local model: {reason}", file=sys.stderr)
        return 2
    names = list(TASKS)
    results: dict[str, dict] = {}
    with LocalModel.start(sampled=True) as lm:  # the paths a sampling model takes, not one of them
        for mode in args.modes.split(","):
            rows = []
            for i in range(args.runs):
                row = one_run(lm, mode, names[i % len(names)], i + 1, args)
                rows.append(row)
                print(f"{mode} #{i + 1:>2} {row['task']:<10} {row['status']:<9} {row['duration_s']:5.1f} s "
                      f"{row['calls']} calls, actions {row['action_parsed']} parsed/{row['action_unparsed']} "
                      f"unparsed, tools {row['tools']}", flush=True)
            results[mode] = {"summary": summary(mode, rows), "runs": rows}
    print()
    for res in results.values():
        print(report(res["summary"]))
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **results},
                                        indent=1, default=str))
    bad = []
    for mode, res in results.items():
        s = res["summary"]
        if not s["statuses_valid"]:
            bad.append(f"{mode}: a status outside records.STATUSES")
        if s["with_tokens"] != s["answered"] or s["with_cost"] != s["calls"]:
            bad.append(f"{mode}: a call without its tokens or cost")
        if mode == "schema" and s["action_unparsed"]:
            bad.append(f"schema: {s['action_unparsed']} unparsed action replies")
    for line in bad:
        print("FAIL", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
