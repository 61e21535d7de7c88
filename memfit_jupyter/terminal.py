"""What the command lines share: their output may be read by a program that stops early."""

from __future__ import annotations

import os
import sys


def say(line: str) -> bool:
    """Print ``line`` on stdout, flushed; False when the reader went away (``... | head``).

    From then on what is printed goes nowhere (stdout is pointed at the null device), so that the
    command ends as it would have (a run goes on and writes its trace), with no traceback for
    each line nor one when Python flushes stdout at exit."""
    try:
        print(line, flush=True)
        return True
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
        return False
