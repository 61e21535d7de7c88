"""One run of a sweep, as a worker process or a Ray task carries it out.

Everything here takes and returns JSON values, so the local and the Ray engine call the
same function with the same arguments and get the same row back.  The trace is written
to a temporary file and moved into place, so a trace that exists is a whole one: a worker
killed mid-run leaves no trace, and the run is redone (from a clean working directory)
on the next attempt or the next resume.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .spec import RunSpec, agent_kwargs, row_from_trace

TRACE_FILE = "trace.json"
WORK_DIR = "work"


def run_dir(out: str | Path, key: str) -> Path:
    """Where run ``key`` of the sweep in ``out`` keeps its working directory and trace."""
    return Path(out) / "runs" / key


def trace_path(out: str | Path, key: str) -> Path:
    return run_dir(out, key) / TRACE_FILE


def warm() -> None:
    """Import what every run needs (litellm, the scripted provider) once per worker, so that
    the first run's duration is its own and not the worker's start-up."""
    from ..llm.backend import import_litellm

    import_litellm()


def secrets_now() -> dict[str, Any]:
    """What a worker must know of the caller's secrets, as they are now: the environment's
    secret-named variables (a worker process started before one was set has the environment
    of then: the key would be neither usable nor redacted there) and the values redaction knows
    besides (``secrets.remember_secrets``: a password in a model server's URL).  Handed to
    ``execute`` apart from the run's spec, which ``sweep.json`` is written from."""
    from ..secrets import known_secrets, refresh_env_secrets, secret_environment

    refresh_env_secrets()
    return {"env": secret_environment(), "values": known_secrets()}


def take_over(secrets: dict[str, Any] | None) -> None:
    """In a worker: the caller's secrets (``secrets_now``) set in its environment and redacted."""
    from ..secrets import refresh_env_secrets, remember_secrets

    if not secrets:
        return
    os.environ.update({str(k): str(v) for k, v in (secrets.get("env") or {}).items()})
    remember_secrets(secrets.get("values") or ())
    refresh_env_secrets()


def execute(spec_json: dict[str, Any], out: str, secrets: dict[str, Any] | None = None) -> dict[str, Any]:
    """Carry out one run and write its trace; return its DataFrame row (``attempts`` unset).
    ``secrets``: the caller's (``secrets_now``), which the worker takes over first."""
    from ..agent import Agent

    take_over(secrets)
    spec = RunSpec.from_json(spec_json)
    home = run_dir(out, spec.key)
    with _workplace(out, spec) as work:
        for rel, text in spec.files.items():
            target = work / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        run = Agent(**agent_kwargs(spec.settings), workdir=work).start(spec.task)
        try:
            run.run()
            if not run.done:  # only a tool call waiting for approval stops run(); a sweep has no one to ask
                run.cancel("a sweep cannot approve tool calls")
            trace = run.trace()
        finally:
            store = getattr(run, "memory", None)  # opened for this run alone (settings are JSON, not stores)
            if store is not None:
                store.close()
    path = home / TRACE_FILE
    tmp = home / f".{TRACE_FILE}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(trace, fh, separators=(",", ":"))
    os.replace(tmp, path)
    return row_from_trace(spec, trace, path, attempts=0)


#: Where runs that share a place (``RunSpec.place``) work, under the sweep's ``out``.
PLACES_DIR = "places"


@contextlib.contextmanager
def _workplace(out: str | Path, spec: RunSpec) -> Iterator[Path]:
    """An empty working directory for ``spec``, whose files end in ``runs/<key>/work``.  A run
    with a place works in ``places/<place>`` while it holds that place's lock (runs of one
    place, in any process on this machine, take turns), and what it left is moved to its own
    directory afterwards."""
    own = run_dir(out, spec.key) / WORK_DIR
    if spec.place is None:
        if own.exists():  # what an earlier, interrupted attempt left: start from nothing again
            shutil.rmtree(own)
        own.mkdir(parents=True)
        yield own
        return
    import fcntl  # POSIX; the sweep's worker processes and a local Ray are on one machine

    places = Path(out) / PLACES_DIR
    places.mkdir(parents=True, exist_ok=True)
    with open(places / f"{spec.place}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        work = places / spec.place
        if work.exists():  # another run's leftovers (moved away on success) or an interrupted attempt's
            shutil.rmtree(work)
        work.mkdir()
        try:
            yield work
        finally:
            if own.exists():
                shutil.rmtree(own)
            own.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(work, own)


def read_finished(spec: RunSpec, out: str | Path) -> dict[str, Any] | None:
    """The row of a run that a previous sweep over ``out`` finished, or None."""
    path = trace_path(out, spec.key)
    try:
        with open(path) as fh:
            trace = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None  # unreadable: run it again (the new trace replaces it)
    return row_from_trace(spec, trace, path, attempts=0)
