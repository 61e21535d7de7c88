"""Exceptions.

Errors a user sees (bad input)::

    MemfitError
    ├── UnknownModelError      model string that no provider serves
    ├── UnknownScenarioError   memfit/<name> with no such scenario (names the available ones)
    ├── UnknownToolError       tools= names a tool that does not exist
    ├── PathOutsideWorkdirError  a file tool was given a path outside the working directory
    └── StoreError             a memory store that cannot be opened as it is

Control flow inside a run (caught in exactly one place, ``Run._finish``)::

    RunEnded
    ├── Finished          the agent called finish(answer)
    ├── LimitsExceeded    a guarantee ran out: carries its limit and the degradation plan
    ├── SpinExit          too many spin warnings: carries the degradation plan
    ├── Escalated         the failure diary ran out of trials
    └── RunFailed         the run cannot go on (reason)
"""

from __future__ import annotations

from typing import Any


def json_error_text(exc: ValueError) -> str:
    """Where a JSON text stops being JSON, as one phrase: ``Expecting value at line 1, column 1``,
    or ``Unterminated string starting at line 2, column 5`` (a message that already ends in "at")."""
    msg = str(getattr(exc, "msg", exc))
    lineno, colno = getattr(exc, "lineno", None), getattr(exc, "colno", None)
    if lineno is None:
        return msg
    where = f"line {lineno}, column {colno}"
    return f"{msg} {where}" if msg.endswith(" at") else f"{msg} at {where}"


class MemfitError(Exception):
    """Base class for errors a user can act on."""


class UnknownModelError(MemfitError, ValueError):
    pass


class UnknownScenarioError(UnknownModelError):
    pass


class UnknownToolError(MemfitError, ValueError):
    pass


class PathOutsideWorkdirError(MemfitError, ValueError):
    pass


class StoreError(MemfitError):
    pass


class ModelCallError(MemfitError):
    """A model call that failed at the transport: rate limit, timeout, server error.

    ``kind`` is one of rate_limit, timeout, server_error, unreachable, bad_request, auth,
    circuit_open, budget, other (``llm/failures.py``).
    """

    #: Seconds the provider asked to wait before trying again (a 429's Retry-After), if it said.
    retry_after: float | None = None
    #: The call may still be running, and be billed: the caller charges its worst case.
    abandoned: bool = False

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class RunEnded(Exception):
    status = "failed"

    def __init__(self, reason: str = "", answer: Any = None, plan: Any = None):
        super().__init__(reason)
        self.reason = reason
        self.answer = answer
        self.plan = plan


class Finished(RunEnded):
    status = "done"


class LimitsExceeded(RunEnded):
    """A guarantee ran out.  ``limit`` names it: max_cost_usd, max_duration_seconds or
    max_recursive_calls (the degradation plan's recommendations follow from it)."""

    status = "degraded"

    def __init__(self, reason: str = "", answer: Any = None, plan: Any = None, *, limit: str | None = None):
        super().__init__(reason, answer, plan)
        self.limit = limit


class SpinExit(RunEnded):
    status = "spin_exit"


class Escalated(RunEnded):
    status = "escalated"


class RunFailed(RunEnded):
    status = "failed"


#: Why a run ended when the person interrupted it mid-step (Jupyter's stop button, Ctrl-C).
INTERRUPTED = "interrupted by the person"


class Cancelled(RunEnded):
    status = "cancelled"
