"""``%%memfit_task``, ``%memfit`` and ``%memfit_memory``.

Loading registers the magics and nothing else: no litellm, no widgets, no
``.env`` (that is read when a task runs).  Options are parsed with IPython's
``magic_arguments``; a malformed option is a one-line ``UsageError``, redacted (it may quote
a key pasted into the wrong option).
"""

from __future__ import annotations

import os
from argparse import Namespace
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, magics_class

from ..config import OPTIONS, Option, agent_kwargs, check_bounds, check_models
from .config import MemfitSettings, load_dotenv_file, resolve_model
from .ipython import (
    F,
    Shell,
    argument,
    cell_magic,
    line_magic,
    magic_arguments,
    parse_argstring,
    user_namespace,
)

MEMFIT_SUBCOMMANDS = ("status", "scenarios", "defaults", "tiers")
#: The subcommands that act on a run: time travel (``fork_magic``) and the offline report.
RUN_SUBCOMMANDS = ("fork", "blame", "tree", "export")
#: The options whose value may need quotes (spaces, JSON): their quotes are taken off.
QUOTED = ("oracle", "api_base", "fast_api_base", "fallback_api_base", "memory", "plan", "progress")


def _one_line(exc: BaseException) -> str:
    """An error as the one line a ``UsageError`` shows, redacted: it may quote what was typed,
    and a key pasted into the wrong option would be printed back into the notebook."""
    from ..secrets import redact, refresh_env_secrets

    refresh_env_secrets()  # a .env read for this cell may hold the key
    text = str(exc).strip()
    return redact(text.splitlines()[0]) if text else type(exc).__name__


def _with_options(options: tuple[Option, ...]) -> Callable[[F], F]:
    """``magic_arguments`` with one ``argument`` per option, in the options' order."""
    def decorate(func: F) -> F:
        for opt in reversed(options):  # each decorator adds its argument in front
            func = argument(opt.flag, **opt.argparse_kwargs())(func)
        # IPython's usage line puts one % before the name: the cell magic is typed with two.
        return magic_arguments("%memfit_task")(func)

    return decorate


@magics_class
class MemfitMagics(MemfitSettings, Magics):
    """The memfit magics; their defaults are settable with ``%config MemfitMagics.<name>``."""

    #: The last run a cell started (``%memfit`` shows its breaker states).
    last_run: Any = None

    @_with_options(OPTIONS)
    @cell_magic
    def memfit_task(self, line: str, cell: str) -> None:
        """Run an agent on the task written in the cell, live in a widget.

        The task is the cell's body, in plain language.  Example::

            %%memfit_task --model memfit/demo --name run
            What is the total of the numbers in data.txt?
        """
        from ..errors import MemfitError

        # Everything up to the run's start is bad input when it fails: one UsageError line, made
        # here alone.  parse_argstring raises ValueError on an unbalanced quote (shlex), the
        # agent UnknownModelError, UnknownToolError, a StoreError for a store it cannot open ...
        try:
            args = parse_argstring(self.memfit_task, line)
            task = (cell or "").strip()
            if not task:
                raise UsageError("the task is empty: write it on the lines below %%memfit_task")
            kwargs, notes = self.agent_kwargs(args)
            from ..agent import Agent

            agent = Agent(**kwargs)
            run = agent.start(task)  # SandboxUnavailableError when --sandbox bwrap cannot be had
        except (UsageError, MemfitError, ValueError, TypeError) as exc:
            raise UsageError(_one_line(exc)) from None
        for note in notes:
            run.emit("note", iteration=0, text=note, source="magic")
        if args.name:
            user_namespace(self)[args.name] = run
        self.last_run = run
        from .display import show

        show(run, step=args.step, quiet=args.quiet, throttle_ms=self.throttle_ms, max_cards=self.max_live_cards)

    def agent_kwargs(self, args: Namespace) -> tuple[dict[str, Any], list[str]]:
        """``Agent`` keyword arguments from the parsed options and the settings, with the notes
        a person should see (where the model came from).  Bad values raise ValueError or
        UsageError, which ``memfit_task`` shows as one line."""
        notes: list[str] = []
        values = vars(args).copy()
        check_bounds(values)
        if args.name and not args.name.isidentifier():
            raise UsageError(f"--name must be a Python identifier, got {args.name!r}")
        if self.read_dotenv:
            load_dotenv_file(os.getcwd())
        model, note = resolve_model(args.model, self.model)
        if note:
            notes.append(note)
        # An option left out takes its %config MemfitMagics setting (whose default is the config's).
        for opt in OPTIONS:
            if opt.trait and values.get(opt.dest) is None and not (opt.dest == "memory" and args.no_memory):
                values[opt.dest] = getattr(self, opt.trait)
        values["model"] = model
        # magic_arguments splits non-POSIX and keeps the quotes of --oracle "cmd with spaces",
        # --api-base '{"primary": "http://..."}' or a path with spaces.
        for dest in QUOTED:
            value = values.get(dest)
            if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                values[dest] = value[1:-1]
        workdir = os.getcwd()
        kwargs = agent_kwargs(values, workdir)
        check_models(kwargs)  # every tier's model, before the run writes anything
        kwargs.update(namespace=user_namespace(self), workdir=workdir, ask_user=ask_person)
        if args.approve:
            if args.approve_tools not in (None, "always"):
                raise UsageError("--approve means --approve-tools always: give one of them")
            kwargs["approve_tools"] = "always"
        # The tool policy says which calls wait; the widget (or run.approve()) decides them.
        if not args.quiet or args.name:
            kwargs["approve"] = _wait_for_person
        # --otel VALUE, else the configured endpoint, else (bare --otel) the OTEL_* environment
        otel = args.otel if args.otel not in (None, True) else (self.otel_endpoint or args.otel)
        if otel:
            kwargs["otel"] = _otel_target(otel)
        return kwargs, notes

    @line_magic
    def memfit(self, line: str) -> Any:
        """Status and settings: model tiers (and breaker states), defaults, the scenarios.

        ``%memfit`` shows everything; ``%memfit tiers|defaults|scenarios`` one part.
        ``%memfit fork RUN --at K ...``, ``%memfit blame RUN`` and ``%memfit tree`` travel in time
        (``fork_magic``).
        ``%memfit export RUN PATH`` writes RUN's offline HTML report (jupyter/report.py).
        """
        from .fork_magic import handles, memfit_time_travel

        if handles(line):
            return memfit_time_travel(self, line)
        from .status import status_html, status_text

        if (line or "").split(None, 1)[:1] == ["export"]:
            from .ipython import display
            from .report import export_magic

            target = export_magic(user_namespace(self), line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else "")
            size = target.stat().st_size
            display({"text/plain": f"wrote {target} ({size / 1024:.0f} KB): opens offline in any browser"}, raw=True)
            return
        sub = (line or "").strip() or "status"
        if sub not in MEMFIT_SUBCOMMANDS:
            valid = ", ".join((*MEMFIT_SUBCOMMANDS, *RUN_SUBCOMMANDS))
            raise UsageError(f"unknown subcommand {sub!r} for %memfit; valid: {valid}")
        from .ipython import display

        display({"text/plain": status_text(self, sub), "text/html": status_html(self, sub)}, raw=True)

    @line_magic
    def memfit_memory(self, line: str) -> Any:
        """Search, add, show, delete, list, export and import long-term memories.

        ``%memfit_memory`` alone summarises the store; ``%memfit_memory search QUERY`` ranks.
        """
        from .memory_magic import memfit_memory

        return memfit_memory(self, line)


def _otel_target(otel: Any) -> Any:
    """``--otel`` checked now, so that a bad endpoint is one line before the run starts."""
    try:
        from ..otel.live import options_for
    except ImportError:
        raise UsageError("--otel needs the otel extra: pip install 'memfit-jupyter[otel]'") from None
    try:
        options_for(otel)
    except (ValueError, OSError) as exc:
        raise UsageError(f"--otel: {exc}") from None
    return otel


def ask_person(question: str) -> str:
    """The ask_user tool in a notebook: the question goes to the person through the kernel's
    input box.  Where there is no input box (a headless run, a button's callback) the agent
    is told so and decides on its own."""
    from IPython.core.error import StdinNotImplementedError

    unavailable = "No person can answer here (the notebook has no input box now); decide on your own."
    try:
        answer = input(f"The agent asks: {question}\n> ")
    except (StdinNotImplementedError, EOFError, RuntimeError):
        return unavailable
    return answer.strip() or "(the person gave no answer)"


def _wait_for_person(call: dict[str, Any]) -> None:
    """A call the tool policy holds waits for the widget's Approve or Reject (or ``run.approve()``)."""
    return None


def load(ipython: Shell) -> None:
    """Register the magics and the hook that keeps live displays up to date."""
    from .display import settle_all

    ipython.register_magics(MemfitMagics)
    from .demo_magic import DemoMagics

    ipython.register_magics(DemoMagics)
    from .sweep_magic import SweepMagics

    ipython.register_magics(SweepMagics)
    from .load_magic import LoadMagics

    ipython.register_magics(LoadMagics)
    events = ipython.events
    if settle_all not in events.callbacks.get("post_run_cell", []):
        events.register("post_run_cell", settle_all)


def unload(ipython: Shell) -> None:
    from .display import settle_all

    try:
        ipython.events.unregister("post_run_cell", settle_all)
    except ValueError:
        pass
