"""``%%memfit_task``, ``%memfit`` and ``%memfit_memory``.

Loading registers the magics and nothing else: no litellm, no widgets, no
``.env`` (that is read when a task runs).  Options are parsed with IPython's
``magic_arguments``; a malformed option is a one-line ``UsageError``.
"""

from __future__ import annotations

import os
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from .config import (
    REFLECTION_CHOICES,
    STRATEGY_CHOICES,
    STRUCTURED_CHOICES,
    MemfitSettings,
    load_dotenv_file,
    resolve_model,
)

MEMFIT_SUBCOMMANDS = ("status", "scenarios", "defaults", "tiers")


def _positive(name: str, value: float | None, minimum: float = 1, strict: bool = False) -> None:
    if value is None:
        return
    if (strict and value <= minimum) or (not strict and value < minimum):
        bound = f"greater than {minimum:g}" if strict else f"at least {minimum:g}"
        raise UsageError(f"--{name} must be {bound}, got {value:g}")


@magics_class
class MemfitMagics(MemfitSettings, Magics):
    """The memfit magics; their defaults are settable with ``%config MemfitMagics.<name>``."""

    #: The last run a cell started (``%memfit`` shows its breaker states).
    last_run: Any = None

    @magic_arguments()
    @argument("--model", help="litellm model string, or memfit/<scenario> (offline scripted model)")
    @argument("--fast-model", help="model of the fast tier (sub-queries, samples)")
    @argument("--fallback-model", help="model of the fallback tier (while a breaker is open)")
    @argument("--api-base", metavar="URL", help="base URL of an OpenAI-compatible server for every tier "
              "(e.g. http://127.0.0.1:8080/v1)")
    @argument("--fast-api-base", metavar="URL", help="base URL for the fast tier only")
    @argument("--fallback-api-base", metavar="URL", help="base URL for the fallback tier only")
    @argument("--structured", choices=STRUCTURED_CHOICES,
              help="how structured replies are asked for: native tool calls, a JSON schema, or JSON "
                   "in text (default auto: by what the model supports)")
    @argument("--max-iterations", type=int, metavar="N", help="most iterations (default 20)")
    @argument("--max-cost", type=float, metavar="USD", help="most US dollars the run may spend (default 1.0)")
    @argument("--max-duration", type=float, metavar="S", help="most seconds the run may take (default 300)")
    @argument("--max-calls", type=int, metavar="N", help="most recursive calls (default 20)")
    @argument("--reflection", choices=REFLECTION_CHOICES, help="reflection level (default auto)")
    @argument("--spin-threshold", type=int, metavar="N", help="same actions in a row that count as a spin (default 3)")
    @argument("--strategy", choices=STRATEGY_CHOICES, help="synthesis strategy (default weighted)")
    @argument("--samples", type=int, metavar="K", help="samples per recursive call (default 1)")
    @argument("--tools", metavar="NAME,NAME...", help="tools the agent may use (default: all)")
    @argument("--approve", action="store_true", help="every tool call waits for your approval")
    @argument("--memory", metavar="PATH", help="memory store (default .memfit/ in the working directory)")
    @argument("--no-memory", action="store_true", help="run without long-term memory")
    @argument("--oracle", metavar="CMD", help="shell command that checks the result (exit 0 = pass)")
    @argument("--max-trials", type=int, metavar="N", help="trials with the oracle (default 3)")
    @argument("--plan", metavar="FILE", help="plan file (features.json): one feature at a time, resumable")
    @argument("--progress", metavar="FILE", help="progress file for --plan (default progress.md)")
    @argument("--context-window", type=int, metavar="N", help="context window in tokens (default: the model's)")
    @argument("--step", action="store_true", help="start paused: Step runs one iteration")
    @argument("--name", metavar="VAR", help="bind the Run to this variable")
    @argument("--quiet", action="store_true", help="show only the final summary")
    @argument("--otel", nargs="?", const=True, metavar="ENDPOINT|FILE",
              help="export the run live as OpenTelemetry spans (default: MemfitMagics.otel_endpoint, "
                   "then $OTEL_EXPORTER_OTLP_ENDPOINT)")
    @cell_magic
    def memfit_task(self, line: str, cell: str) -> None:
        """Run an agent on the task written in the cell, live in a widget.

        The task is the cell's body, in plain language.  Example::

            %%memfit_task --model memfit/demo --name run
            What is the total of the numbers in data.txt?
        """
        args = parse_argstring(self.memfit_task, line)
        task = (cell or "").strip()
        if not task:
            raise UsageError("the task is empty: write it on the lines below %%memfit_task")
        kwargs, notes = self.agent_kwargs(args)
        from ..agent import Agent

        try:
            agent = Agent(**kwargs)
        except (ValueError, TypeError) as exc:  # UnknownModelError, UnknownToolError, bad values
            raise UsageError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
        run = agent.start(task)
        for note in notes:
            run.emit("note", iteration=0, text=note, source="magic")
        if args.name:
            self.shell.user_ns[args.name] = run
        self.last_run = run
        from .display import show

        show(run, step=args.step, quiet=args.quiet, throttle_ms=self.throttle_ms, max_cards=self.max_live_cards)

    def agent_kwargs(self, args: Any) -> tuple[dict[str, Any], list[str]]:
        """``Agent`` keyword arguments from the parsed options and the settings, with the notes
        a person should see (where the model came from)."""
        notes: list[str] = []
        for name in ("max_iterations", "max_calls", "samples", "max_trials", "spin_threshold", "context_window"):
            _positive(name.replace("_", "-"), getattr(args, name), minimum=0 if name == "max_calls" else 1)
        _positive("max-cost", args.max_cost, 0, strict=True)
        _positive("max-duration", args.max_duration, 0, strict=True)
        if args.name and not args.name.isidentifier():
            raise UsageError(f"--name must be a Python identifier, got {args.name!r}")
        if args.memory and args.no_memory:
            raise UsageError("--memory and --no-memory contradict each other: give one")
        if self.read_dotenv:
            load_dotenv_file(os.getcwd())
        model, note = resolve_model(args.model, self.model)
        if note:
            notes.append(note)
        if not model.startswith("memfit/"):
            from ..llm.backend import check_model

            try:
                check_model(model)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        from ..reliability.guarantees import ExecutionGuarantees

        g = ExecutionGuarantees(
            max_cost_usd=args.max_cost if args.max_cost is not None else self.max_cost_usd,
            max_duration_seconds=args.max_duration if args.max_duration is not None else self.max_duration_seconds,
            max_recursive_calls=args.max_calls if args.max_calls is not None else self.max_recursive_calls,
        )
        if args.no_memory:
            memory: Any = False
        else:
            memory = args.memory or self.memory_path or None
        kwargs: dict[str, Any] = {
            "model": model,
            "fast_model": args.fast_model or self.fast_model,
            "fallback_model": args.fallback_model or self.fallback_model,
            "max_iterations": args.max_iterations if args.max_iterations is not None else self.max_iterations,
            "guarantees": g,
            "reflection": (args.reflection or self.reflection).lower(),
            "strategy": (args.strategy or self.strategy).lower(),
            "memory": memory,
            "namespace": self.shell.user_ns,
            "workdir": os.getcwd(),
            "ask_user": ask_person,
            "structured": (args.structured or self.structured).lower(),
        }
        bases = {"primary": args.api_base or self.api_base,
                 "fast": args.fast_api_base or self.fast_api_base,
                 "fallback": args.fallback_api_base or self.fallback_api_base}
        if bases["primary"] and not (bases["fast"] or bases["fallback"]):
            kwargs["api_base"] = bases["primary"]
        elif any(bases.values()):
            # One base given for the primary tier serves the others unless they have their own.
            kwargs["api_base"] = {t: b or bases["primary"] for t, b in bases.items() if b or bases["primary"]}
        for key in ("spin_threshold", "samples", "oracle", "max_trials", "plan", "progress", "context_window"):
            if getattr(args, key) is not None:
                kwargs[key] = getattr(args, key)
        # magic_arguments splits non-POSIX and keeps the quotes of --oracle "cmd with spaces".
        oracle = kwargs.get("oracle")
        if isinstance(oracle, str) and len(oracle) >= 2 and oracle[0] == oracle[-1] and oracle[0] in "\"'":
            kwargs["oracle"] = oracle[1:-1]
        if args.tools:
            kwargs["tools"] = [t.strip() for t in args.tools.split(",") if t.strip()]
        if args.approve:
            kwargs["approve"] = _wait_for_person
        # --otel VALUE, else the configured endpoint, else (bare --otel) the OTEL_* environment
        otel = args.otel if args.otel not in (None, True) else (self.otel_endpoint or args.otel)
        if otel:
            kwargs["otel"] = _otel_target(otel)
        return kwargs, notes

    @line_magic
    def memfit(self, line: str) -> None:
        """Status and settings: model tiers (and breaker states), defaults, the scenarios.

        ``%memfit`` shows everything; ``%memfit tiers|defaults|scenarios`` one part.
        ``%memfit export RUN PATH`` writes RUN's offline HTML report (jupyter/report.py).
        """
        from .status import status_html, status_text

        if (line or "").split(None, 1)[:1] == ["export"]:
            from .report import export_magic

            export_magic(self.shell.user_ns, line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else "")
            return
        sub = (line or "").strip() or "status"
        if sub not in MEMFIT_SUBCOMMANDS:
            raise UsageError(f"unknown subcommand {sub!r} for %memfit; valid: {', '.join(MEMFIT_SUBCOMMANDS)}")
        from IPython.display import display

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
    """``--approve``: leave every tool call pending until the widget's Approve or Reject."""
    return None


def load(ipython: Any) -> None:
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


def unload(ipython: Any) -> None:
    from .display import settle_all

    try:
        ipython.events.unregister("post_run_cell", settle_all)
    except ValueError:
        pass
