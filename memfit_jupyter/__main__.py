"""``python -m memfit_jupyter``: run a task in the terminal, list scenarios, or replay a trace.

    python -m memfit_jupyter run "add up data.txt" --model memfit/demo [--max-cost USD ...]
    python -m memfit_jupyter scenarios
    python -m memfit_jupyter replay trace.json [--trace replayed.json]

``run`` takes the options of ``%%memfit_task`` that set the agent (``config.OPTIONS``: the
model tiers, every limit, reflection, memory, the oracle ...) and works in the current
folder: the scenario's files and the memory store (``.memfit/``) go there.
A replay writes nothing unless ``--trace`` says where.  Bad input gets one line
on stderr and exit code 2; a trace that cannot be written where asked is
written to the temporary directory instead, and its path is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from .config import OPTIONS, agent_kwargs, check_bounds


def _print_event(event: Any) -> None:
    from . import events as ev

    if isinstance(event, ev.Action):
        print(f"[{event.iteration:>3}] {event.tool}({json.dumps(event.params)[:100]})  # {event.thought[:80]}")
    elif isinstance(event, ev.Observation):
        text = (event.output or "") if event.ok else f"ERROR {event.error}"
        print(f"      -> {text.strip().splitlines()[0][:120] if text.strip() else '(no output)'}")
    elif event.TYPE in ("reflection", "spin", "guarantee", "breaker", "synthesis", "degradation", "context", "trial"):
        summary = event.get("reason") or event.get("message") or event.get("summary") or event.get("level_name") or ""
        if summary:  # a context measurement with nothing to say is not a line
            print(f"      [{event.TYPE}] {str(summary)[:120]}")
    elif isinstance(event, ev.RunEnd):
        print(f"status: {event.status}  answer: {event.answer}  ({event.reason})")


def load_trace(path: str) -> dict[str, Any]:
    """The trace in the file at ``path``, or ValueError with one line saying what is wrong."""
    from .trace import Trace

    return Trace.load(Path(path)).data


def write_trace(trace: dict[str, Any], path: str) -> int:
    """Write ``trace`` to ``path``; if that fails, to the temporary directory, saying where (returns 2)."""
    text = json.dumps(trace, indent=1)
    try:
        Path(path).write_text(text)
        return 0
    except OSError as exc:
        # a file of its own: two failed writes of one run's trace must not overwrite each other
        fd, name = tempfile.mkstemp(prefix=f"memfit-trace-{trace.get('run_id') or 'run'}-", suffix=".json")
        with open(fd, "w", encoding="utf-8") as out:
            out.write(text)
        fallback = Path(name)
        reason = exc.strerror or type(exc).__name__
        print(f"error: cannot write the trace to {path} ({reason}); it was written to {fallback}",
              file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr and exit code 2, as every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="python -m memfit_jupyter")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a task in the current folder and print its events",
                       description="Run a task in the current folder (its files and .memfit/ go there).")
    r.add_argument("task")
    for opt in OPTIONS:
        if opt.cli:
            r.add_argument(opt.flag, **opt.argparse_kwargs(cli=True))
    r.add_argument("--trace", help="write the trace to this JSON file")
    sub.add_parser("scenarios", help="list the built-in scripted scenarios")
    p = sub.add_parser("replay", help="replay a saved trace offline (writes nothing unless --trace)")
    p.add_argument("input", metavar="TRACE", help="the saved trace (JSON) to replay")
    p.add_argument("--trace", help="write the replayed trace to this JSON file")
    args = ap.parse_args(argv)

    from .agent import Agent
    from .errors import MemfitError
    from .llm.scenarios import scenarios

    try:
        if args.command == "scenarios":
            for name, text in scenarios().items():
                print(f"memfit/{name:<18} {text}")
            return 0
        if args.command == "replay":
            run = Agent.replay(load_trace(args.input))
        else:
            values = vars(args)
            check_bounds(values)
            run = Agent(**agent_kwargs(values)).start(args.task)
    except (MemfitError, ValueError, TypeError) as exc:
        print(f"error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    run.subscribe(_print_event)
    result = run.run()
    code = 0 if result.status == "done" else 1
    if args.trace:
        code = write_trace(run.trace(), args.trace) or code
    return code


if __name__ == "__main__":
    sys.exit(main())
