"""``python -m memfit_jupyter.tasks check NAME``: the task's oracle on the current directory.

Exit code 0 when it passes, 1 when it fails, 2 on a bad name; the verdict's line is printed.
The answer, when there is one, comes from ``$MEMFIT_TASK_ANSWER`` (the diary gives none).
"""

from __future__ import annotations

import os
import sys

from .core import get


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "check":
        print("usage: python -m memfit_jupyter.tasks check NAME", file=sys.stderr)
        return 2
    try:
        task = get(argv[1])
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return 2
    verdict = task.judge(os.getcwd(), os.environ.get("MEMFIT_TASK_ANSWER"))
    print(("PASS: " if verdict.passed else "FAIL: ") + verdict.detail)
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
