"""A hard wall-clock deadline around one blocking model call.

HTTP clients apply their timeout to each phase of a request (connect, write,
read), not to the whole of it, and litellm does work of its own around the
request, so a call given a 1.7 s timeout may return seconds later.  To make
the time limit hard, the call runs on a worker thread and the caller waits
for it no longer than the deadline; past it, the call is abandoned (its
thread finishes or fails on its own, and its result is dropped) and the
caller gets ``DeadlineExceeded``.

Only the model call itself runs on the worker: the loop, its events and the
widget stay on the caller's thread.  The caller waits on an ``Event`` in short
slices rather than in one long wait: a SIGINT (Interrupt Kernel) that lands
just before the thread blocks in the lock's futex has already been delivered,
so one long wait would sleep through it to the deadline; with slices the
pending KeyboardInterrupt is raised within one slice.

Workers are daemon threads kept in a small idle pool, because starting a
thread per call costs about a tenth of a scripted call; a daemon thread also
never holds up the kernel's exit when a provider never answers.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import ModelCallError

T = TypeVar("T")

#: Longest single wait of the caller: how late a KeyboardInterrupt may be noticed, at worst.
WAIT_SLICE_S = 0.05

#: Idle workers kept for the next calls; more than this many finishing at once simply exit.
MAX_IDLE_WORKERS = 8

_idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
_idle_lock = threading.Lock()
_idle_count = 0


class DeadlineExceeded(ModelCallError):
    """The call did not return before its deadline and was abandoned (kind ``timeout``)."""

    abandoned = True  # see ModelCallError

    def __init__(self, seconds: float):
        super().__init__("timeout", f"no reply within {seconds:.3f} s: the call was abandoned at its deadline")
        self.seconds = seconds


class _Job:
    __slots__ = ("fn", "context", "done", "value", "error")

    def __init__(self, fn: Callable[[], Any]):
        self.fn: Callable[[], Any] | None = fn
        #: The caller's context variables, as if the call ran inline.
        self.context: contextvars.Context | None = contextvars.copy_context()
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class _Worker(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True, name="memfit-model-call")
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()

    def run(self) -> None:
        global _idle_count
        while True:
            job = self.jobs.get()
            _run(job)
            # Back to the pool before waking the caller, so its next call finds this worker idle.
            with _idle_lock:
                keep = _idle_count < MAX_IDLE_WORKERS
                if keep:
                    _idle_count += 1
                    _idle.put(self)
            job.done.set()
            if not keep:
                return


def _run(job: _Job) -> None:
    """Run ``job`` once; it lets go of the call (its closure holds the messages) so that an idle
    worker keeps nothing of it alive."""
    fn, context = job.fn, job.context
    job.fn = job.context = None
    try:
        if fn is None or context is None:
            raise RuntimeError("a model-call job was run twice")
        job.value = context.run(fn)
    except BaseException as exc:  # handed to the caller, who re-raises it
        job.error = exc


def _worker() -> _Worker:
    global _idle_count
    with _idle_lock:
        if _idle_count:
            _idle_count -= 1
            return _idle.get_nowait()
    worker = _Worker()
    worker.start()
    return worker


def call_with_deadline(fn: Callable[[], T], seconds: float, poll: Callable[[], Any] | None = None) -> T:
    """``fn()``'s result (or its exception), or ``DeadlineExceeded`` once ``seconds`` have passed.
    ``poll()`` runs on the caller's thread after each wait slice (a streamed reply's pieces).

    >>> call_with_deadline(lambda: 6 * 7, 1.0)
    42
    """
    job = _Job(fn)
    deadline = time.monotonic() + max(0.0, seconds)
    _worker().jobs.put(job)
    while not job.done.wait(min(WAIT_SLICE_S, max(0.0, deadline - time.monotonic()))):
        if poll is not None:
            poll()
        if time.monotonic() >= deadline:
            raise DeadlineExceeded(seconds)
    if job.error is not None:
        raise job.error
    value: T = job.value  # what fn returned
    return value
