"""``%memfit fork`` and ``%memfit blame``: time travel from a notebook line.

::

    %memfit fork RUN --at K [--guidance TEXT] [--observation TEXT] [--action JSON]
                 [--model M] [--reflection LEVEL] [--spin-threshold N] [--max-iterations N] [--max-cost USD]
                 [--memory overlay|write-through] [--workdir DIR] [--name VAR] [--quiet]
    %memfit blame RUN [--budget USD] [--oracle CMD] [--oracle-timeout S] [--name VAR]

``RUN`` names a ``Run`` or a trace dict in the namespace, a run id (of a run in the namespace,
the last run, or one of their forks), or a saved trace file.  ``fork``
starts the child at once and shows it live, as ``%%memfit_task`` does; ``blame`` returns its
DataFrame (step, change, outcome, cost) and binds the whole result with ``--name``.
"""

from __future__ import annotations

import json
import shlex
from argparse import Namespace
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from .ipython import argument, magic_arguments, parse_argstring, user_namespace

SUBCOMMANDS = ("fork", "blame")


@magic_arguments()
@argument("run", metavar="RUN", help="a Run or trace in the namespace, or a saved trace file")
@argument("--at", type=int, required=True, metavar="K", help="the first step that runs live")
@argument("--guidance", metavar="TEXT", help="step K's prompt carries this where a reflection goes")
@argument("--observation", metavar="TEXT", help="what step K's tool gives back (the tool does not run)")
@argument("--action", metavar="JSON", help='step K\'s action instead of the model\'s: {"tool": ..., "params": ...}')
@argument("--model", metavar="M", help="the model from step K on")
@argument("--reflection", metavar="LEVEL", help="the reflection level from step K on")
@argument("--spin-threshold", type=int, metavar="N", help="the spin detector's threshold from step K on")
@argument("--max-iterations", type=int, metavar="N", help="the iteration limit from step K on")
@argument("--max-cost", type=float, metavar="USD", help="the cost limit from step K on")
@argument("--memory", choices=("overlay", "write-through"), default="overlay",
          help="where the fork's memory writes go (default: an overlay of the parent's store)")
@argument("--workdir", metavar="DIR", help="the fork's working folder (default: a new temporary one)")
@argument("--name", metavar="VAR", help="bind the child Run to this variable")
@argument("--quiet", action="store_true", help="show only the final summary")
def fork_options(line: str) -> None:
    """Fork a run at step K with changes, and run the child live."""


@magic_arguments()
@argument("run", metavar="RUN", help="a failed Run or trace in the namespace, or a saved trace file")
@argument("--budget", type=float, metavar="USD", help="what the forks may spend together, a hard limit (default: 3x the run's cost)")
@argument("--oracle", metavar="CMD", help="shell command run in each fork's folder (exit 0 = success)")
@argument("--oracle-timeout", type=float, default=None, metavar="S",
          help="seconds the oracle command may judge one fork; then it is killed (default 300)")
@argument("--name", metavar="VAR", help="bind the Blame result (frame, forks, step) to this variable")
def blame_options(line: str) -> None:
    """Find the step that made a run fail, by forking there with a correction."""


def handles(line: str) -> bool:
    """Whether ``%memfit LINE`` is one of these subcommands."""
    return (line or "").strip().split(" ", 1)[0] in SUBCOMMANDS


def memfit_fork_or_blame(magics: Any, line: str) -> Any:
    """Run ``%memfit fork ...`` or ``%memfit blame ...``; bad input is one UsageError line."""
    sub, _, rest = (line or "").strip().partition(" ")
    try:
        if sub == "fork":
            return _fork(magics, parse_argstring(fork_options, rest))
        return _blame(magics, parse_argstring(blame_options, rest))
    except (UsageError, ValueError) as exc:  # ForkError, bad values: the one line that says why
        from .fork_view import first_line

        raise UsageError(first_line(exc)) from None  # redacted: it may quote what was typed


def target(magics: Any, name: str) -> Any:
    """What ``RUN`` names: a variable's value, a run in hand with that id, or a trace file."""
    namespace = user_namespace(magics)
    if name in namespace:
        return namespace[name]
    found = find_run(magics, name)
    if found is not None:
        return found
    if Path(name).expanduser().is_file():
        return Path(name).expanduser()
    raise UsageError(f"no run named {name!r}: give a Run or trace variable, a run id, or a saved trace file")


def find_run(magics: Any, run_id: str) -> Any:
    """The ``Run`` with this id among the namespace's runs, the last run and their forks (the run
    view knows a run by its id: ``%memfit fork <run id> --at K ...``)."""
    from ..run import Run

    todo = [v for v in user_namespace(magics).values() if isinstance(v, Run)]
    if isinstance(getattr(magics, "last_run", None), Run):
        todo.append(magics.last_run)
    seen: set[int] = set()
    while todo:
        run = todo.pop()
        if id(run) in seen:
            continue
        seen.add(id(run))
        if run.id == run_id:
            return run
        todo.extend(run.forks)
        parent = getattr(run, "parent_run", None)
        if isinstance(parent, Run):
            todo.append(parent)
    return None


def _unquote(text: str) -> str:
    """IPython passes a quoted option on with its quotes: ``--guidance 'two words'``."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _check_name(name: str | None) -> None:
    if name and not name.isidentifier():
        raise UsageError(f"--name must be a Python identifier, got {name!r}")


def _fork(magics: Any, args: Namespace) -> None:
    from ..agent import Agent

    _check_name(args.name)
    changes: dict[str, Any] = {}
    for key in ("guidance", "observation", "model", "reflection", "spin_threshold", "max_iterations"):
        value = getattr(args, key)
        if value is not None:
            changes[key] = _unquote(value) if isinstance(value, str) else value
    if args.max_cost is not None:
        changes["max_cost_usd"] = args.max_cost
    if args.action is not None:
        try:
            changes["action"] = json.loads(_unquote(args.action))
        except ValueError as exc:
            raise UsageError(f"--action must be JSON such as {{\"tool\": \"read_file\", \"params\": "
                             f"{{\"path\": \"x\"}}}}: {exc}") from None
    workdir = _unquote(args.workdir) if args.workdir else None
    child = Agent.fork(target(magics, args.run), args.at, memory=args.memory, workdir=workdir, **changes)
    if args.name:
        user_namespace(magics)[args.name] = child
    magics.last_run = child
    from .display import show

    show(child, quiet=args.quiet, throttle_ms=magics.throttle_ms, max_cards=magics.max_live_cards)


def _blame(magics: Any, args: Namespace) -> Any:
    from ..study.intervention import blame

    _check_name(args.name)
    named = target(magics, args.run)  # a saved trace's path: blame reads it (one line if it cannot)
    timeout = {} if args.oracle_timeout is None else {"oracle_timeout_s": args.oracle_timeout}
    found = blame(named, oracle=_unquote(args.oracle) if args.oracle else None, budget=args.budget, **timeout)
    if args.name:
        user_namespace(magics)[args.name] = found
    from .ipython import display

    display({"text/plain": repr(found), "text/html": found._repr_html_()}, raw=True)
    return found.frame


def fork_line(run_var: str, at: int, **changes: Any) -> str:
    """The ``%memfit fork`` line for a fork (the run view writes the same one, labextension/src/fork.ts).

    IPython splits a magic's options as words in quotes with no escapes, so a text goes in the
    kind of quote it does not hold; one that holds both cannot go in a line (ValueError).

    >>> print(fork_line("rr", 3, guidance="don't read it twice"))
    %memfit fork rr --at 3 --guidance "don't read it twice"
    """
    parts = [f"%memfit fork {run_var} --at {at}"]
    for key, value in changes.items():
        text = json.dumps(value) if isinstance(value, dict | list) else str(value)
        if shlex.quote(text) == text:
            word = text
        elif "'" not in text:
            word = f"'{text}'"
        elif '"' not in text:
            word = f'"{text}"'
        else:
            raise ValueError(f"--{key.replace('_', '-')} holds both ' and \", which a %memfit line cannot quote: "
                             "use run.fork(...)")
        parts.append(f"--{key.replace('_', '-')} {word}")
    return " ".join(parts)
