"""``python -m memfit_jupyter.tasks check NAME``: the task's oracle on the current directory.

Exit code 0 when it passes, 1 when it fails, 2 on bad input (an unknown name, a missing
argument); the verdict's line is printed.  ``list`` prints the suite's tasks, one a line.
The answer, when there is one, comes from ``$MEMFIT_TASK_ANSWER`` (the diary gives none).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..terminal import say
from . import SUITE
from .core import get


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m memfit_jupyter.tasks",
                                     description="The evaluation suite's tasks and their oracles.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{check,list}")
    check = sub.add_parser("check", help="run a task's oracle on the current directory (exit 0: it passes)")
    check.add_argument("name", help="the task's name (see: list)")
    sub.add_parser("list", help="the suite's tasks: name, family, tier")
    return parser


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help exits 0, a bad argument 2 (argparse printed why)
        return int(exc.code or 0)
    if args.command == "list":
        # 1 when the reader went away before the end (| head)
        return 0 if all(say(f"{task.name}\t{task.family}\t{task.tier}") for task in SUITE) else 1
    try:
        task = get(args.name)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    verdict = task.judge(os.getcwd(), os.environ.get("MEMFIT_TASK_ANSWER"))
    say(("PASS: " if verdict.passed else "FAIL: ") + verdict.detail)
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
