"""``%memfit fork`` and ``%memfit blame``: time travel from a notebook line.

::

    %memfit fork RUN --at K [--guidance TEXT] [--observation TEXT] [--action JSON]
                 [--model M] [--reflection LEVEL] [--spin-threshold N] [--max-iterations N] [--max-cost USD]
                 [--api-base URL] [--oracle CMD] [--approve-tools KIND|NAME,...] [--sandbox MODE]
                 [--memory overlay|write-through|STORE] [--workdir DIR] [--name VAR] [--quiet]
    %memfit blame RUN [--budget USD] [--oracle CMD] [--api-base URL] [--approve-tools KIND|NAME,...]
                      [--oracle-timeout S] [--name VAR]
    %memfit tree [RUN|PATH ...]

``RUN`` names a ``Run`` or a trace dict in the namespace, a run id (of a run in the namespace,
the last run, or one of their forks), or a saved trace file.  ``fork``
starts the child at once and shows it live, as ``%%memfit_task`` does; ``blame`` returns its
DataFrame (step, change, outcome, cost) and binds the whole result with ``--name``; ``tree``
returns the ``Family`` of the runs named, or of the traces and notebooks in folders
(``study/family.py``; default: the last run, else the current folder).
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from IPython.core.error import UsageError

from ..config import BLAME_FLAGS, FORK_FLAGS, fork_changes
from .ipython import argument, magic_arguments, parse_argstring, user_namespace

F = TypeVar("F", bound=Callable[..., Any])

SUBCOMMANDS = ("fork", "blame", "tree")


def _options(flags: tuple[tuple[str, dict[str, Any]], ...], *own: tuple[str, dict[str, Any]]) -> Callable[[F], F]:
    """``magic_arguments`` with one ``argument`` per flag, in their order (the command line's
    flags, shared with ``python -m memfit_jupyter``, then the magic's own)."""
    def decorate(func: F) -> F:
        for flag, kwargs in reversed((*flags, *own)):  # each decorator adds its argument in front
            func = argument(flag, **kwargs)(func)
        return magic_arguments()(func)

    return decorate


@_options(FORK_FLAGS, ("--name", {"metavar": "VAR", "help": "bind the child Run to this variable"}),
          ("--quiet", {"action": "store_true", "help": "show only the final summary"}))
@argument("run", metavar="RUN", help="a Run or trace in the namespace, or a saved trace file")
def fork_options(line: str) -> None:
    """Fork a run at step K with changes, and run the child live."""


@_options(BLAME_FLAGS, ("--name", {"metavar": "VAR",
                                   "help": "bind the Blame result (frame, forks, step) to this variable"}))
@argument("run", metavar="RUN", help="a failed Run or trace in the namespace, or a saved trace file")
def blame_options(line: str) -> None:
    """Find the step that made a run fail, by forking there with a correction."""


def handles(line: str) -> bool:
    """Whether ``%memfit LINE`` is one of these subcommands."""
    return (line or "").strip().split(" ", 1)[0] in SUBCOMMANDS


def memfit_time_travel(magics: Any, line: str) -> Any:
    """Run ``%memfit fork ...``, ``%memfit blame ...`` or ``%memfit tree ...``; bad input is one UsageError line."""
    sub, _, rest = (line or "").strip().partition(" ")
    try:
        if sub == "fork":
            return _fork(magics, parse_argstring(fork_options, rest))
        if sub == "tree":
            return _tree(magics, rest)
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
    changes = fork_changes(vars(args), _unquote)
    workdir = _unquote(args.workdir) if args.workdir else None
    child = Agent.fork(target(magics, args.run), args.at, memory=_unquote(args.memory), workdir=workdir, **changes)
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
    found = blame(named, oracle=_unquote(args.oracle) if args.oracle else None, budget=args.budget,
                  api_base=_unquote(args.api_base) if args.api_base else None,
                  approve_tools=_unquote(args.approve_tools) if args.approve_tools else None, **timeout)
    if args.name:
        user_namespace(magics)[args.name] = found
    from .ipython import display

    display({"text/plain": repr(found), "text/html": found._repr_html_()}, raw=True)
    return found.frame


def _tree(magics: Any, rest: str) -> Any:
    """``%memfit tree [RUN|PATH ...]``: the family of what is named (a variable, a run id, a file
    or a folder); with nothing named, the last run's, else the current folder's."""
    import shlex

    from ..study.family import family

    try:
        names = shlex.split(rest)
    except ValueError as exc:
        raise UsageError(f"%memfit tree: {exc}") from None
    found: list[Any] = []
    for name in names:
        path = Path(name).expanduser()
        found.append(path if path.is_dir() else target(magics, name))
    if not found:
        last = getattr(magics, "last_run", None)
        found = [_root_of(last)] if last is not None else [Path.cwd()]
    return family(*found)


def _root_of(run: Any) -> Any:
    """The first run of ``run``'s family in this process (a fork's parent's parent, ...)."""
    seen = set()
    while getattr(run, "parent_run", None) is not None and id(run) not in seen:
        seen.add(id(run))
        run = run.parent_run
    return run
