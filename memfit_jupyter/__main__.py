"""``python -m memfit_jupyter``: run a task in the terminal, list scenarios, or replay a trace.

    python -m memfit_jupyter run "add up data.txt" --model memfit/demo [--max-cost USD ...]
    python -m memfit_jupyter scenarios
    python -m memfit_jupyter replay trace.json [--trace replayed.json]
    python -m memfit_jupyter fork trace.json --at K [--guidance TEXT ...] [--trace child.json]
    python -m memfit_jupyter blame trace.json [--budget USD] [--oracle CMD]
    python -m memfit_jupyter snapshots [--store DIR] [--prune-older-than DAYS]

``run`` takes the options of ``%%memfit_task`` that set the agent (``config.OPTIONS``: the
model tiers, every limit, reflection, memory, the oracle ...) and works in the current
folder: the scenario's files and the memory store (``.memfit/``) go there, and it says so.
A replay writes nothing unless ``--trace`` says where; it exits 0 when it gave the
recorded events and 1 (saying where they part) when it did not.  ``fork`` takes the options of
``%memfit fork`` (``config.FORK_FLAGS``), works in a new folder (``--workdir``) and prints the
steps from the fork's on, exiting 0 when the child ended done; ``blame`` those of ``%memfit
blame`` and prints its frame and the step to blame, exiting 0 when it found one.  Bad input gets one line
on stderr (redacted: it may quote a key pasted into an option) and exit code 2, before
anything is written: ``run`` checks the model tiers and the plan file before it starts.  A
trace that cannot be written where asked is written to the temporary directory instead, and
its path is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

from .config import (
    BLAME_FLAGS,
    FORK_FLAGS,
    OPTIONS,
    agent_kwargs,
    check_bounds,
    check_models,
    fork_changes,
)
from .terminal import say

#: Lines of a tool's output the terminal shows (a file read shows the start of the file).
OUTPUT_LINES = 5


def _print_event(event: Any) -> None:
    d = event.to_dict()
    kind = d["type"]
    if kind == "action":
        say(f"[{d['iteration']:>3}] {d['tool']}({json.dumps(d['params'])[:100]})  # {d['thought'][:80]}")
    elif kind == "observation":
        text = ((d.get("output") or "") if d.get("ok") else f"ERROR {d.get('error')}").strip()
        lines = text.splitlines() or ["(no output)"]
        more = f"  ... ({len(lines) - OUTPUT_LINES} more lines)" if len(lines) > OUTPUT_LINES else ""
        say("\n".join(f"      {'->' if i == 0 else '  '} {line[:120]}"
                        for i, line in enumerate(lines[:OUTPUT_LINES])) + more)
    elif kind == "context":
        if d.get("watermark") != "ok":  # a measurement under the warning mark says nothing new
            window = f" of {d['window']:,}" if d.get("window") else ""
            say(f"      [context] {d['watermark']}: {d['used_tokens']:,}{window} tokens"
                  + (f", {d['evicted']} entries moved out" if d.get("evicted") else ""))
    elif kind in ("reflection", "spin", "guarantee", "breaker", "synthesis", "degradation", "trial"):
        summary = d.get("reason") or d.get("message") or d.get("summary") or d.get("level_name") or ""
        say(f"      [{kind}] {str(summary)[:120]}")
    elif kind == "fork":
        say(f"[{d['iteration']:>3}] fork of run {d.get('parent')} at step {d.get('at')}: {json.dumps(d.get('changes') or {})[:200]}")
    elif kind == "run_end":
        say(f"status: {d['status']}  answer: {d.get('answer')}  ({d.get('reason')})")


def _where_it_writes(agent: Any) -> str | None:
    """The line that says what a terminal run writes into the working folder, if anything."""
    what = []
    if agent.model.startswith("memfit/"):
        what.append("the scenario's files (those not there yet)")
    if agent.memory is None:  # the default store, in the working folder (CLI: unless --no-memory)
        what.append("its memory (.memfit/)")
    return f"writing {' and '.join(what)} into {agent.workdir.resolve()}" if what else None


def load_trace(path: str) -> dict[str, Any]:
    """The trace in the file at ``path``, or ValueError with one line saying what is wrong."""
    from .trace import Trace

    return Trace.load(Path(path)).data


def write_trace(trace: dict[str, Any], path: str) -> int:
    """Write ``trace`` to ``path``; if that fails, to the temporary directory, saying where (returns 2).

    Whole or not at all: a file already at ``path`` (the trace being replayed, written over) is
    replaced only once the new one is written; a full disk leaves it as it was."""
    from .context.longhorizon import write_atomic

    text = json.dumps(trace, indent=1)
    try:
        write_atomic(Path(path), text, parents=False)  # a folder that is not there is the person's mistake
        return 0
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    # A new file each time: a second failure (a replay keeps the run id) must not overwrite the first.
    handle, name = tempfile.mkstemp(prefix=f"memfit-trace-{trace.get('run_id') or 'run'}-", suffix=".json")
    try:
        with open(handle, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as again:
        Path(name).unlink(missing_ok=True)
        return _error(f"cannot write the trace to {path} ({reason}), nor to {Path(name).parent} "
                      f"({again.strerror or type(again).__name__})")
    return _error(f"cannot write the trace to {path} ({reason}); it was written to {name}")


def _error(message: str) -> int:
    """Print ``error: <message>`` on stderr, redacted, and return 2 (bad input).

    Every error line of the CLI goes through here: each may quote what was typed (a tool's
    name, a path, a model), and a key pasted into the wrong option would be printed back."""
    from .secrets import redact, refresh_env_secrets

    refresh_env_secrets()
    print(f"error: {redact(message)}", file=sys.stderr)
    return 2


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr and exit code 2, as every other bad input."""

    def error(self, message: str) -> NoReturn:
        from .secrets import redact, refresh_env_secrets

        refresh_env_secrets()  # the line quotes the value given, which may be a key pasted in the wrong place
        self.exit(2, f"error: {redact(message)} (see {self.prog} --help)\n")


def _replay_code(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> int:
    """0 when the replay gave the recorded events, else 1 with one line on stderr saying where it parted."""
    from .replay import divergence

    where = divergence(recorded, replayed)
    if where is None:
        return 0
    _error(f"the replay diverged from the recording: {where}")
    return 1


def _snapshots(store: str | None, days: float | None) -> int:
    """Say what the snapshot blob store holds, and prune it when ``days`` is given."""
    import math
    import time

    from .workspace import BlobStore, default_store

    if days is not None and not (math.isfinite(days) and days >= 0):
        return _error(f"--prune-older-than takes a number of days, 0 or more; got {days:g}")
    root = Path(store).expanduser() if store else default_store()
    if store and not root.is_dir():
        return _error(f"no blob store at {root}: it is not a folder")
    blobs = BlobStore(root.resolve())
    if days is not None:
        removed, freed = blobs.prune(days * 86400)
        say(f"removed {removed} blob(s), {freed / 1e6:.1f} MB, that no run used in {days:g} day(s); "
              "a fork of a run that used one says which file it cannot restore")
    kept = [st for _, st in blobs.blobs()]
    if not kept:
        say(f"{root}: no snapshots")
        return 0
    oldest = time.strftime("%Y-%m-%d", time.localtime(min(st.st_mtime for st in kept)))
    say(f"{root}: {len(kept)} blob(s), {sum(st.st_size for st in kept) / 1e6:.1f} MB; "
          f"the one used least recently was last used on {oldest}")
    return 0


def _blame(args: argparse.Namespace) -> int:
    """Blame the saved run: its frame and the step found (exit 0), none found (1), or one line (2)."""
    from .errors import MemfitError
    from .study.intervention import blame

    timeout = {} if args.oracle_timeout is None else {"oracle_timeout_s": args.oracle_timeout}
    try:
        found = blame(load_trace(args.input), oracle=args.oracle, budget=args.budget, api_base=args.api_base,
                      approve_tools=args.approve_tools, **timeout)
    except (MemfitError, ValueError, TypeError) as exc:
        return _error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    import polars as pl

    with pl.Config(tbl_rows=-1, fmt_str_lengths=60, tbl_width_chars=160):
        say(str(found.frame))
    say(repr(found)[1:-1])
    return 0 if found.step is not None else 1


def _tree(inputs: list[str]) -> int:
    """``tree PATH...``: the family of the runs found, a line a run; 1 when none was found."""
    from .secrets import redact
    from .study.family import family
    from .trace import TraceError

    try:
        found = family(*inputs)
    except TraceError as exc:
        return _error(str(exc))
    for line in found.lines():
        if not say(line):
            return 1
    for problem in found.problems:
        print(redact(f"not read: {problem}"), file=sys.stderr)  # a path may hold what was typed
    return 0 if found.members else 1


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
    f = sub.add_parser("fork", help="fork a saved run at a step with changes, and run the child live",
                       description="Fork a saved run: its steps before K from the recording, then live with the changes.")
    f.add_argument("input", metavar="TRACE", help="the saved trace (JSON) to fork")
    for flag, kwargs in FORK_FLAGS:
        f.add_argument(flag, **kwargs)
    f.add_argument("--trace", help="write the child's trace to this JSON file")
    b = sub.add_parser("blame", help="find the step that made a saved run fail, by forking there with a correction")
    b.add_argument("input", metavar="TRACE", help="the saved trace (JSON) of the failed run")
    for flag, kwargs in BLAME_FLAGS:
        b.add_argument(flag, **kwargs)
    t = sub.add_parser("tree", help="the tree of runs and their forks in saved traces, folders and notebooks",
                       description="Draw the runs of saved traces (files, folders below them, notebooks) as trees: "
                       "each run, the forks made of it, their forks.")
    t.add_argument("inputs", metavar="PATH", nargs="*", default=["."],
                   help="trace files, notebooks or folders (default: the current folder)")
    s = sub.add_parser("snapshots", help="what the blob store of the runs' file snapshots holds; "
                       "--prune-older-than DAYS removes what no run has used since")
    s.add_argument("--store", metavar="DIR", help="the blob store (default: the one in memfit's cache folder)")
    s.add_argument("--prune-older-than", type=float, metavar="DAYS",
                   help="remove the blobs no run kept or read in DAYS days")
    args = ap.parse_args(argv)
    if args.command == "snapshots":
        return _snapshots(args.store, args.prune_older_than)
    if args.command == "tree":
        return _tree(args.inputs)

    from .agent import Agent
    from .errors import MemfitError
    from .llm.scenarios import scenarios

    if args.command == "blame":
        return _blame(args)
    try:
        if args.command == "scenarios":
            # 1 when the reader went away before the end (| head)
            return 0 if all(say(f"memfit/{name:<18} {text}") for name, text in scenarios().items()) else 1
        if args.command == "replay":
            run = Agent.replay(load_trace(args.input))
        elif args.command == "fork":
            parent = load_trace(args.input)
            run = Agent.fork(parent, args.at, memory=args.memory, workdir=args.workdir, **fork_changes(vars(args)))
            say(f"steps 1-{args.at - 1} of run {parent.get('run_id')} from its recording, live from step {args.at} "
                f"in {run.agent.workdir}")
        else:
            values = vars(args)
            check_bounds(values)
            kwargs = agent_kwargs(values)
            check_models(kwargs)  # before anything is written, as the magic does
            agent = Agent(**kwargs)
            run = agent.start(args.task)
            where = _where_it_writes(agent)
            if where:
                say(where)
    except (MemfitError, ValueError, TypeError) as exc:
        return _error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    at = args.at if args.command == "fork" else 0

    def show(event: Any) -> None:
        if event.iteration >= at:  # a fork's steps before its own are its parent's
            _print_event(event)

    run.subscribe(show)
    result = run.run()
    code = 0 if result.status == "done" else 1
    if args.command == "replay":  # a replay succeeds when it reproduces the recording, whatever its status
        code = _replay_code(load_trace(args.input)["events"], run.trace()["events"])
    if args.trace:
        code = write_trace(run.trace(), args.trace) or code
    return code


if __name__ == "__main__":
    sys.exit(main())
