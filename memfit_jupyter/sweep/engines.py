"""Where a sweep's runs execute: worker processes on this machine, or Ray tasks.

An engine has three methods: ``submit(spec_json) -> handle``, ``wait(handles, timeout)``
(the handles that ended, each with its row or the exception that ended it) and
``close()``.  ``LostWorker`` says a run's process died under it (killed, out of memory):
the scheduler retries such runs like any other failed attempt.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from collections.abc import Iterable
from typing import Any, Protocol

from . import runner

#: One run that ended, as ``wait`` gives it: the run's handle, its row (None when it failed)
#: and the exception that ended it (None when it finished).
Ended = tuple[Any, dict[str, Any] | None, BaseException | None]


class Engine(Protocol):
    """What the scheduler (``core.run_specs``) asks of an engine; a handle is the engine's own
    (a ``concurrent.futures.Future``, a Ray ``ObjectRef``)."""

    name: str
    max_parallel: int

    def default_parallel(self) -> int: ...

    def submit(self, spec_json: dict[str, Any]) -> Any: ...

    def wait(self, handles: list[Any], timeout: float) -> list[Ended]: ...

    def close(self) -> None: ...


class LostWorker(RuntimeError):
    """The process carrying out a run died before the run ended."""


class LocalEngine:
    """Runs on worker processes of this machine (``concurrent.futures``).

    Workers start from a fork server, not by forking the caller: a Jupyter kernel has
    threads, and forking a process with threads can deadlock the child.  The fork server
    imports litellm before it forks (``preload``), so workers, and the replacements of
    workers that died, start warm, and then take runs one after another.  As with any
    ``multiprocessing`` code, a script that calls ``sweep`` needs an
    ``if __name__ == "__main__":`` guard (workers import the caller's main module).
    """

    name = "local"

    def __init__(self, out: str, max_parallel: int):
        self.out = out
        self.max_parallel = max_parallel
        self._pool: cf.ProcessPoolExecutor | None = None

    def default_parallel(self) -> int:
        return max(1, os.cpu_count() or 1)

    def _ensure_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            ctx = multiprocessing.get_context("forkserver")
            # Only takes effect if this process has not started its fork server yet.
            ctx.set_forkserver_preload([f"{__package__}.preload"])
            self._pool = cf.ProcessPoolExecutor(self.max_parallel, mp_context=ctx, initializer=runner.warm)
        return self._pool

    def submit(self, spec_json: dict[str, Any]) -> Any:
        # The workers come from a fork server started with this process's environment of then.
        secrets = runner.secrets_now()
        try:
            return self._ensure_pool().submit(runner.execute, spec_json, self.out, secrets)
        except cf.process.BrokenProcessPool:
            self._reset()
            return self._ensure_pool().submit(runner.execute, spec_json, self.out, secrets)

    def wait(self, handles: Iterable[Any], timeout: float) -> list[Ended]:
        done, _ = cf.wait(list(handles), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        ended: list[Ended] = []
        broken = False
        for fut in done:
            exc = fut.exception()
            if isinstance(exc, cf.process.BrokenProcessPool):
                broken = True
                exc = LostWorker(f"a worker process died during the run ({exc})")
            ended.append((fut, None if exc else fut.result(), exc))
        if broken:  # the pool is unusable once a worker died: later submissions get a new one
            self._reset()
        return ended

    def _reset(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
