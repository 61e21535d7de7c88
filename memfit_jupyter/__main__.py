"""``python -m memfit_jupyter``: run a task in the terminal, list scenarios, or replay a trace.

    python -m memfit_jupyter run "add up data.txt" --model memfit/demo
    python -m memfit_jupyter scenarios
    python -m memfit_jupyter replay trace.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _print_event(event) -> None:
    d = event.to_dict()
    kind = d["type"]
    if kind == "action":
        print(f"[{d['iteration']:>3}] {d['tool']}({json.dumps(d['params'])[:100]})  # {d['thought'][:80]}")
    elif kind == "observation":
        text = (d.get("output") or "") if d.get("ok") else f"ERROR {d.get('error')}"
        print(f"      -> {text.strip().splitlines()[0][:120] if text.strip() else '(no output)'}")
    elif kind in ("reflection", "spin", "guarantee", "breaker", "synthesis", "degradation", "context", "trial"):
        summary = d.get("reason") or d.get("message") or d.get("summary") or d.get("level_name") or ""
        print(f"      [{kind}] {str(summary)[:120]}")
    elif kind == "run_end":
        print(f"status: {d['status']}  answer: {d.get('answer')}  ({d.get('reason')})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memfit_jupyter")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a task and print its events")
    r.add_argument("task")
    r.add_argument("--model", default="memfit/demo")
    r.add_argument("--max-iterations", type=int, default=20)
    r.add_argument("--reflection", default="auto")
    r.add_argument("--trace", help="write the trace to this JSON file")
    r.add_argument("--no-memory", action="store_true")
    sub.add_parser("scenarios", help="list the built-in scripted scenarios")
    p = sub.add_parser("replay", help="replay a saved trace offline")
    p.add_argument("trace")
    args = ap.parse_args(argv)

    from . import Agent, MemfitError, scenarios

    try:
        if args.command == "scenarios":
            for name, text in scenarios().items():
                print(f"memfit/{name:<18} {text}")
            return 0
        if args.command == "replay":
            run = Agent.replay(json.loads(Path(args.trace).read_text()))
        else:
            agent = Agent(model=args.model, max_iterations=args.max_iterations, reflection=args.reflection,
                          memory=False if args.no_memory else None)
            run = agent.start(args.task)
        run.subscribe(_print_event)
        result = run.run()
        if getattr(args, "trace", None):
            Path(args.trace).write_text(json.dumps(run.trace(), indent=1))
        return 0 if result.status == "done" else 1
    except (MemfitError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
