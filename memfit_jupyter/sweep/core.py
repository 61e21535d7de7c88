"""The sweep's scheduler: what runs next, what a finished run adds, what the budget allows.

The loop runs on the caller's thread (a kernel's main thread: widget updates from other
threads break ipykernel 7) and only waits on the engine, a fraction of a second at a
time, so the progress display stays live and Interrupt Kernel stops the sweep.

The sweep-wide budget is hard in the same sense as a run's own (``ExecutionGuarantees``):
each run may spend at most its own ``max_cost_usd``, so a run starts only when what the
finished runs spent, plus the worst case of every running run, plus its own worst case,
fits in ``max_cost_usd``.  A run that died without a trace is charged its worst case,
because what it spent before dying is unknown.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..secrets import redact
from .runner import read_finished, run_dir
from .spec import RunSpec, row_without_trace

if TYPE_CHECKING:
    from .engines import Engine

log = logging.getLogger("memfit_jupyter")

ATTEMPTS_FILE = "attempts.json"
#: How long one wait on the engine lasts: the progress display's refresh period.
POLL_S = 0.25


@dataclass
class SweepProgress:
    """What the progress display shows; handed to ``on_progress`` after every change."""

    total: int
    engine: str
    done: int = 0
    running: int = 0
    failed: int = 0
    skipped: int = 0
    resumed: int = 0
    cost_usd: float = 0.0
    budget_usd: float | None = None
    reserved_usd: float = 0.0
    #: Worst cases charged for attempts that died without a trace (they count against the budget).
    lost_usd: float = 0.0
    started: float = field(default_factory=time.monotonic)
    finished: bool = False
    #: The latest ended runs, newest last: (task, status, cost_usd).
    recent: list[tuple[str, str, float]] = field(default_factory=list)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @property
    def eta_s(self) -> float | None:
        """Seconds until the end, at the pace of the runs this sweep ran so far."""
        ran = self.done + self.failed - self.resumed
        left = self.total - self.done - self.failed - self.skipped
        if self.finished or left <= 0:
            return 0.0
        if ran <= 0:
            return None
        return self.elapsed_s / ran * left


class Attempts(TypedDict):
    """A run's ``attempts.json``: attempts started, and how the failed ones ended."""

    attempts: int
    errors: list[str]


def _attempts(spec: RunSpec, out: Path) -> Attempts:
    """The run's attempts file; one missing, unreadable or of another shape counts as none."""
    try:
        data = json.loads((run_dir(out, spec.key) / ATTEMPTS_FILE).read_text())
    except (OSError, ValueError):
        data = None
    if (isinstance(data, dict) and isinstance(data.get("attempts"), int)
            and isinstance(data.get("errors", []), list)):
        return {"attempts": data["attempts"], "errors": data.get("errors", [])}
    return {"attempts": 0, "errors": []}


def _record_attempt(spec: RunSpec, out: Path, error: str | None = None) -> int:
    """Count an attempt before it starts (so a sweep killed mid-run still counts it); with
    ``error``, note how the latest attempt ended instead."""
    home = run_dir(out, spec.key)
    home.mkdir(parents=True, exist_ok=True)
    data = _attempts(spec, out)
    if error is None:
        data["attempts"] += 1
    else:
        data["errors"].append(error)
    tmp = home / f".{ATTEMPTS_FILE}.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, home / ATTEMPTS_FILE)
    return data["attempts"]


def run_specs(specs: list[RunSpec], out: Path, engine: Engine, *, max_parallel: int,
              max_cost_usd: float | None, retries: int,
              on_progress: Callable[[SweepProgress], None] | None = None) -> list[dict[str, Any]]:
    """Run every spec not finished in ``out``; return one row per spec, in the specs' order."""
    progress = SweepProgress(total=len(specs), engine=engine.name, budget_usd=max_cost_usd)
    rows: dict[str, dict[str, Any]] = {}
    pending: deque[RunSpec] = deque()
    for spec in specs:
        row = read_finished(spec, out)
        if row is None:
            pending.append(spec)
            continue
        row["attempts"] = int(_attempts(spec, out).get("attempts", 1)) or 1
        rows[spec.key] = row
        progress.done += 1
        progress.resumed += 1
        progress.cost_usd += row["cost_usd"] or 0.0
    tries: dict[str, int] = {}
    in_flight: dict[Any, tuple[RunSpec, float, int]] = {}

    def report() -> None:
        progress.running = len(in_flight)
        progress.reserved_usd = sum(w for _, w, _ in in_flight.values())
        if on_progress is not None:
            try:
                on_progress(progress)
            except Exception:  # a broken display must not break the sweep
                log.exception("sweep progress display failed")

    def end(spec: RunSpec, row: dict[str, Any]) -> None:
        rows[spec.key] = row
        progress.recent = [*progress.recent[-9:], (row["task"], row["status"], row["cost_usd"] or 0.0)]

    report()
    try:
        while pending or in_flight:
            while pending and len(in_flight) < max_parallel:
                spec = pending[0]
                worst = spec.worst_case_cost()
                if max_cost_usd is not None:
                    committed = progress.cost_usd + progress.lost_usd + sum(w for _, w, _ in in_flight.values())
                    if committed + worst > max_cost_usd + 1e-12:
                        if in_flight:
                            break  # a running run may end under its worst case: wait for it
                        pending.popleft()
                        left = max_cost_usd - progress.cost_usd - progress.lost_usd
                        end(spec, row_without_trace(
                            spec, "skipped", f"sweep budget: ${left:.6f} left cannot pay for this run's "
                            f"worst case (its max_cost_usd, ${worst:g})", int(_attempts(spec, out)["attempts"])))
                        progress.skipped += 1
                        continue
                pending.popleft()
                attempts = _record_attempt(spec, out)
                tries[spec.key] = tries.get(spec.key, 0) + 1
                in_flight[engine.submit(spec.to_json())] = (spec, worst, attempts)
            report()
            if not in_flight:
                continue
            for handle, row, exc in engine.wait(list(in_flight), POLL_S):
                spec, worst, attempts = in_flight.pop(handle)
                if row is not None:  # it finished (an engine gives a row or an exception, never both)
                    row["attempts"] = attempts
                    progress.done += 1
                    progress.cost_usd += row["cost_usd"] or 0.0
                    end(spec, row)
                    continue
                # redacted before it is cut short: a cut could leave a key that no longer looks like one
                message = redact(f"{type(exc).__name__}: {exc}").splitlines()[0][:500]
                _record_attempt(spec, out, error=message)
                progress.lost_usd += worst  # unknown spend: charge the worst case (module docstring)
                if tries[spec.key] <= retries:
                    log.warning("sweep run %s failed (%s); retrying", spec.key, message)
                    pending.appendleft(spec)
                else:
                    progress.failed += 1
                    end(spec, row_without_trace(spec, "error", message, attempts))
            report()
    except KeyboardInterrupt:
        for spec, _, attempts in in_flight.values():
            end(spec, row_without_trace(spec, "cancelled", "the sweep was interrupted", attempts))
        for spec in pending:
            end(spec, row_without_trace(spec, "cancelled", "the sweep was interrupted before this run",
                                        int(_attempts(spec, out)["attempts"])))
        in_flight.clear()
    finally:
        engine.close()
        progress.finished = True
        report()
    return [rows[spec.key] for spec in specs]
