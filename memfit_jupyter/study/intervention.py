"""Blame by intervention: which step made a run fail, found by changing it and running on.

``blame(run, oracle=None, budget=None)`` takes a failed run, picks candidate steps from what its
trace already says (failed steps, spin findings, reflections at STANDARD or above, and the step
before each; every step when the trace says nothing), forks at each with a corrective change and
runs the fork to the end (``fork.py``: the prefix costs nothing), and asks the oracle whether the
fork succeeded.  Steps are tried from the last one back: the step to blame is the latest one at
which a change turns the failure into a success (forks before it succeed too, since the mistake
has not happened yet; forks after it come too late), and a later fork is the cheaper one.

Corrective changes, in order: the ones given (``changes=``), the correction the failure mode of a
scripted scenario declares (``[mode.fix]`` in its file, see ``catalogue.py``), the suggestions
the trace's own reflections and spin findings made at the step, and skipping the step (its tool
does not run: its observation says so).

The oracle: a callable (given the fork's ``Run``, returns a bool), a shell command run in the
fork's folder (exit 0 passes), or by default the run's failure-diary oracle command, else the
scenario's expected answer (the failure mode's ``on`` side), else "the run ended done".
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent import Agent
from ..context.diary import NOT_FOUND, ORACLE_TIMEOUT_S, not_found, run_command
from ..fork import (
    ForkError,
    check_replayable,
    check_sources,
    last_step,
    saved_trace,
    start_settings,
)
from ..secrets import redact

if TYPE_CHECKING:
    from ..run import Run

#: The observation of a skipped step.
SKIPPED = "(this step was skipped: its action did not run)"
#: By default, blame spends at most this many times the failed run's own cost on its forks.
BUDGET_FACTOR = 3.0


@dataclass
class Blame:
    """What blame found: one row per fork tried, the forks, and the step to blame (or None)."""

    #: polars DataFrame: step, change, outcome (success | failure | error), cost, status, run.
    frame: Any
    forks: list[Run]
    #: The latest step at which a change turned the failure into a success, or None.
    step: int | None
    #: The change that did it.
    change: dict[str, Any] | None
    spent: float
    budget: float | None
    #: Why the search stopped before trying every candidate (the budget), or "".
    stopped: str = ""
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        found = f"step {self.step} ({describe(self.change or {})})" if self.step else "no step"
        budget = f" of ${self.budget:.4f}" if self.budget is not None else ""
        return f"<Blame {found}; {len(self.forks)} fork(s), ${self.spent:.4f}{budget}{'; ' + self.stopped if self.stopped else ''}>"

    def _repr_html_(self) -> str:
        from html import escape

        head = escape(repr(self))
        return f"<p><b>{head}</b></p>" + str(self.frame._repr_html_())


def describe(change: dict[str, Any]) -> str:
    """A change as one short line (redacted before it is cut short: a cut key no longer looks
    like one; the frame and the result's repr are shown and saved with the notebook)."""
    if change.get("observation") == SKIPPED:
        return "skip the step"
    parts = []
    for key, value in change.items():
        text = redact(str(value) if isinstance(value, str) else repr(value))
        parts.append(f"{key}={text[:80]!r}" if isinstance(value, str) else f"{key}={text[:80]}")
    return ", ".join(parts)


def fork_cost(child: Run, at: int) -> float:
    """What a fork spent itself: its model calls from its fork step on (the prefix is free)."""
    return float(sum(float(e.get("cost_usd") or 0.0) for e in child.events
                     if e.TYPE == "model_call" and (e.iteration or 0) >= at))


def cost_limit(trace: dict[str, Any], at: int, left: float, given: Any = None) -> float:
    """The ``max_cost_usd`` of a fork at ``at`` that may spend ``left`` dollars itself: its budget
    counts the recorded prefix's calls too, and it keeps the run's own limit (and one the change
    ``given`` sets) when that is lower."""
    prefix = sum(float(e.get("cost_usd") or 0.0) for e in trace["events"]
                 if e.get("type") == "model_call" and int(e.get("iteration") or 0) < at)
    limits = [prefix + max(0.0, left)]
    own = (start_settings(trace) or {}).get("max_cost_usd")
    limits += [float(x) for x in (own, given) if isinstance(x, int | float) and not isinstance(x, bool)]
    return min(limits)


def ran_out(child: Run, at: int) -> bool:
    """Whether the fork's cost limit stopped it (from its fork step on)."""
    return any(e.TYPE == "guarantee" and getattr(e, "violated", False) and getattr(e, "limit", "") == "max_cost_usd"
               and (e.iteration or 0) >= at for e in child.events)


def _trace_of(run: Any) -> dict[str, Any]:
    from ..run import Run

    if isinstance(run, Run):
        return run.trace()
    if isinstance(run, str | Path | dict):
        return saved_trace(run)  # as a fork reads it: every fork of blame starts from it
    raise ForkError(f"blame takes a Run, a trace dict or a trace file, got {type(run).__name__}")


def passed(run: Any, trace: dict[str, Any]) -> bool | None:
    """Whether the run passes its own oracle, as far as its trace alone says: the failure mode's
    expected status and answer, else "ended done"; None when only running something could say
    (a diary's oracle command, a callable, a check of the files afterwards)."""
    command = getattr(getattr(run, "agent", None), "oracle", None)
    if command is not None or any(e.get("type") == "trial" for e in trace.get("events", ())):
        return None  # an oracle to run (a replay's diary: RECORDED_ORACLE, with its trials)
    mode = _mode_of(trace)
    if mode is None:
        return trace.get("status") == "done"
    expect = {k: v for k, v in mode.on.expect.items() if k in ("status", "answer_contains", "answer_lacks")}
    if "verify" in mode.on.expect:
        return None
    cat = _catalogue_module()
    return not cat.check(expect, cat.outcome(mode, trace))


def candidates(trace: dict[str, Any]) -> list[int]:
    """The steps worth changing, latest first: failed steps, spin findings, reflections at
    STANDARD or above, and the step before each; every step when the trace flags none."""
    last = last_step(trace)
    flagged: set[int] = set()
    for e in trace["events"]:
        it = int(e.get("iteration") or 0)
        kind = e.get("type")
        if (kind == "observation" and not e.get("ok")) or kind == "error" or (
                kind == "spin" and e.get("is_spinning")) or (kind == "reflection" and int(e.get("level") or 0) >= 2):
            flagged.update({it, it - 1})
    steps = {s for s in flagged if 1 <= s <= last} or set(range(1, last + 1))
    return sorted(steps, reverse=True)


def _mode_fix(trace: dict[str, Any]) -> dict[str, Any] | None:
    """The correction a scripted failure mode declares (``[mode.fix]``), as fork changes."""
    model = str(trace.get("model") or "")
    if not model.startswith("memfit/"):
        return None
    from ..llm.scenarios import load_scenario

    try:
        fix = dict((load_scenario(model.split("/", 1)[1]).mode or {}).get("fix") or {})
    except Exception:
        return None
    fix.pop("at", None)
    return fix or None


def _suggestions(trace: dict[str, Any], step: int) -> str | None:
    """What the trace's findings at ``step`` (or the step before) told the model to do."""
    said: list[str] = []
    for e in trace["events"]:
        if int(e.get("iteration") or 0) not in (step, step - 1):
            continue
        if e.get("type") == "reflection" and int(e.get("level") or 0) >= 2:
            said += [str(s) for s in e.get("suggestions") or ()]
        elif e.get("type") == "spin" and e.get("is_spinning"):
            said += [str(s) for s in [*(e.get("suggestions") or ()), *(e.get("next_actions") or ())]]
    said = list(dict.fromkeys(s for s in said if s.strip()))
    return "Before you act, follow these corrections:\n" + "\n".join(f"- {s}" for s in said) if said else None


def corrections(trace: dict[str, Any], step: int, given: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The corrective changes blame tries at ``step``, in order."""
    found = [dict(c) for c in given or ()]
    fix = _mode_fix(trace)
    if fix is not None:
        found.append(fix)
    suggested = _suggestions(trace, step)
    if suggested is not None:
        found.append({"guidance": suggested})
    found.append({"observation": SKIPPED})
    unique: list[dict[str, Any]] = []
    for change in found:
        if change not in unique:
            unique.append(change)
    return unique


def default_oracle(run: Any, trace: dict[str, Any], timeout_s: float = ORACLE_TIMEOUT_S) -> Callable[[Run], bool]:
    """The run's own oracle: its failure diary's command, the scenario's expected answer, or done."""
    from ..replay import RECORDED_ORACLE

    command = getattr(getattr(run, "agent", None), "oracle", None)
    if isinstance(command, str) and command != RECORDED_ORACLE:
        return _command_oracle(command, timeout_s)
    if callable(command):
        return lambda child: bool(command(child))
    mode = _mode_of(trace)
    if mode is not None:
        return _mode_oracle(mode)
    return lambda child: child.status == "done"


def _mode_of(trace: dict[str, Any]) -> Any:
    model = str(trace.get("model") or "")
    if not model.startswith("memfit/"):
        return None
    cat = _catalogue_module()
    return next((m for m in cat.modes() if m.scenario == model.split("/", 1)[1]), None)


def _catalogue_module() -> Any:
    """The catalogue module (``memfit_jupyter.catalogue`` on the package is its callable table)."""
    import importlib

    return importlib.import_module(f"{__package__}.catalogue")


def _mode_oracle(mode: Any) -> Callable[[Run], bool]:
    """The expected answer of a failure mode: its ``on`` side's status, answer and check."""
    cat = _catalogue_module()
    expect = {k: v for k, v in mode.on.expect.items() if k in ("status", "answer_contains", "answer_lacks", "verify")}

    def judge(child: Run) -> bool:
        return not cat.check(expect, cat.outcome(mode, child.trace(), child.agent.workdir))

    return judge


class OracleError(ForkError):
    """An oracle command that cannot judge any fork (empty, or not found by the shell): one line,
    and the search stops, rather than spend the budget on forks it would all call failures."""


def _command_oracle(command: str, timeout_s: float = ORACLE_TIMEOUT_S) -> Callable[[Run], bool]:
    """A shell command run in each fork's folder (exit 0: success), in a process group of its own
    that is killed whole when it outlives ``timeout_s`` (``diary.run_command``)."""
    if not command.strip():  # ``sh -c ""`` exits 0: every fork would be a success
        raise OracleError("the oracle is an empty command: give a shell command, a callable, "
                          "or None for the run's own oracle")

    def judge(child: Run) -> bool:
        done = run_command(command, child.agent.workdir, timeout_s)
        if done is None:
            raise TimeoutError(f"the oracle command ran past {timeout_s:g} s and was killed")
        code, _, stderr = done
        said = not_found(code, stderr)
        if said is not None:
            raise OracleError(f"the oracle command could not be run in the fork's folder (exit code {NOT_FOUND}: "
                              f"{redact(said)}); no more forks were made")
        return code == 0

    return judge


#: A fork's status in the frame when the person stopped its oracle's call.
INTERRUPTED_ORACLE = "interrupted by the person while the oracle judged it"


def _trial(run: Any, step: int, change: dict[str, Any], capped: dict[str, Any], folder: Path | None,
           judge: Callable[[Run], bool]) -> tuple[dict[str, Any], Run | None]:
    """One fork at ``step`` with ``change`` (``capped``: with its cost limit), run to its end and
    judged: its row of the frame, and the fork (None when it could not be made)."""
    try:
        child = Agent.fork(run, step, workdir=folder, **capped)
    except ForkError as exc:
        return {"step": step, "change": describe(change), "outcome": "error", "cost": 0.0,
                "status": str(exc)[:120], "run": ""}, None  # a ForkError is redacted
    child.run()
    try:
        ok = bool(judge(child))
    except OracleError:  # it would break on every fork alike
        raise
    except Exception as exc:  # an oracle that breaks says nothing about the fork
        ok, status = False, redact(f"oracle failed: {type(exc).__name__}: {exc}")[:120]
    except KeyboardInterrupt:
        ok, status = False, INTERRUPTED_ORACLE
    else:
        status = child.status
    return {"step": step, "change": describe(change), "outcome": "success" if ok else "failure",
            "cost": fork_cost(child, step), "status": status, "run": child.id}, child


def _stop_after(child: Run, status: str, step: int, limit: float | None) -> str:
    """Why the search stops after this fork ("" to go on): the person interrupted it, or it ran
    out of the budget."""
    if child.status == "cancelled" or status == INTERRUPTED_ORACLE:  # the run caught it, or the oracle's call
        return f"interrupted by the person in the fork at step {step}"
    if limit is not None and ran_out(child, step):
        return f"the budget (${limit:.4f}) ran out in the fork at step {step}"
    return ""


def blame(run: Any, oracle: Callable[[Run], bool] | str | None = None, budget: float | None = None, *,
          changes: list[dict[str, Any]] | None = None, steps: list[int] | None = None,
          workdir: str | Path | None = None, stop_at_first: bool = True,
          oracle_timeout_s: float = ORACLE_TIMEOUT_S, api_base: Any = None, approve_tools: str | None = None) -> Blame:
    """Find the step that made ``run`` fail by forking there with a corrective change.

    ``run``: a ``Run``, a trace dict or a trace file.  A run whose trace says it did not fail (by
    its own oracle, when that needs nothing run: the failure mode's expected outcome, or ended
    done) has nothing to blame: one line of ``ForkError``, and no fork is made.

    ``oracle``: a callable given each fork's ``Run`` (True: success), a shell command run in the
    fork's folder, or None for the run's own (see the module docstring).  ``budget``: dollars
    the forks may spend together (default: 3x the failed run's own cost; no limit when it cost
    nothing), a hard limit: each fork may spend only what is left of it (its ``max_cost_usd``,
    within the run's own limits, which it keeps), and the search stops once a fork ran out of
    it.  ``changes``: corrective changes to try first (fork changes, e.g.
    ``{"guidance": "..."}``).  ``steps``: the candidate steps (default: from the trace).
    ``stop_at_first``: stop at the latest step that a change fixes (the one to blame).
    ``oracle_timeout_s``: how long an oracle command may judge one fork (default 300 s); one that
    runs longer is killed with every process it started, and the fork's row says so.  An oracle
    command that is empty, or that the shell does not find, is one line of ``ForkError``: the
    first before any fork is made, the second at the first fork it was to judge.
    ``api_base``: the forks' model server.  A saved trace's own server, and its failure diary's
    oracle command, are used only when this process has used them (``known.py``); otherwise one
    line of ``ForkError`` asks for them again, before any fork is made (an ``oracle`` command
    given is then the forks' diary's too).  ``approve_tools``: the forks' tool policy (a saved
    trace's own is kept only where it asks about every call the default does: ``fork.fork``).
    Returns a ``Blame``: ``.frame`` (step, change, outcome, cost, status, run), ``.forks``,
    ``.step`` and ``.change``.
    """
    import polars as pl

    trace = _trace_of(run)
    if isinstance(run, str | Path | dict):
        run = trace  # read and checked once: every fork starts from it
    check_replayable(trace)  # a trace no fork can replay is one line here, not a row a candidate
    if isinstance(oracle_timeout_s, bool) or not isinstance(oracle_timeout_s, numbers.Real) or not (
            0 < oracle_timeout_s < math.inf):
        raise ForkError(f"oracle_timeout_s must be a finite number of seconds more than 0, got {oracle_timeout_s!r}")
    judge = default_oracle(run, trace, oracle_timeout_s) if oracle is None else (
        _command_oracle(oracle, oracle_timeout_s) if isinstance(oracle, str) else oracle)
    if not callable(judge):
        raise ForkError(f"oracle must be a callable, a shell command or None, got {type(oracle).__name__}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, numbers.Real)):
        raise ForkError(f"budget must be a number of dollars, got {type(budget).__name__}")
    given: dict[str, Any] = {} if api_base is None else {"api_base": api_base}
    if approve_tools is not None:
        given["approve_tools"] = approve_tools
    try:  # a saved trace's server and oracle command: this process's own, or given again
        check_sources(run, trace, given)
    except ForkError:
        if not isinstance(oracle, str) or "oracle" in given:
            raise
        given["oracle"] = oracle  # the diary's oracle the trace names is not known: the command given judges
        check_sources(run, trace, given)
    if oracle is None and passed(run, trace):
        raise ForkError(f"run {trace.get('run_id', '')} did not fail (it ended {trace.get('status')!r}"
                        f"{', as its failure mode expects' if _mode_of(trace) is not None else ''}): "
                        "there is nothing to blame; give an oracle (oracle=, --oracle) to judge it otherwise")
    cost = float((trace.get("totals") or {}).get("cost_usd") or 0.0)
    limit = budget if budget is not None else (BUDGET_FACTOR * cost if cost > 0 else None)
    if limit is not None and not 0 < limit < math.inf:  # NaN too
        raise ForkError(f"budget must be a finite number of dollars more than 0, got {budget}")
    todo = sorted(steps, reverse=True) if steps is not None else candidates(trace)
    rows: list[dict[str, Any]] = []
    forks: list[Run] = []
    spent = 0.0
    found: tuple[int, dict[str, Any]] | None = None
    stopped = ""
    root = Path(workdir) if workdir is not None else None
    try:  # the person may stop the search (Jupyter's stop button): what it found so far is kept
        for step in todo:
            for change in corrections(trace, step, changes):
                if limit is not None and spent >= limit:
                    stopped = f"the budget (${limit:.4f}) was spent before step {step} was tried"
                    break
                folder = root / f"step{step}-{len(forks)}" if root is not None else None
                capped = {**given, **change}
                if limit is not None:
                    capped["max_cost_usd"] = cost_limit(trace, step, limit - spent, change.get("max_cost_usd"))
                row, child = _trial(run, step, change, capped, folder, judge)
                rows.append(row)
                if child is None:
                    continue
                spent += row["cost"]
                forks.append(child)
                stopped = _stop_after(child, row["status"], step, limit)
                if row["outcome"] == "success":
                    found = found or (step, change)
                    break
                if stopped:
                    break
            if stopped or (found is not None and stop_at_first):
                break
    except KeyboardInterrupt:
        last = forks[-1].parent if forks else None
        stopped = "interrupted by the person" + (f" after the fork at step {last['at']}" if last else "")
    frame = pl.DataFrame(rows, schema={"step": pl.Int64, "change": pl.String, "outcome": pl.String,
                                       "cost": pl.Float64, "status": pl.String, "run": pl.String})
    return Blame(frame=frame, forks=forks, step=found[0] if found else None, change=found[1] if found else None,
                 spent=spent, budget=limit, stopped=stopped)
