"""``%memfit_sweep`` / ``%%memfit_sweep``: a sweep from a cell.

::

    %%memfit_sweep --grid model=memfit/demo,memfit/spin-demo --grid max_iterations=5,10
    total: What is the total of the numbers in data.txt?
    Count the lines of data.txt.

Each line of the cell is a task (``name: task`` names it); ``--task`` gives one on the
line form.  ``--grid KEY=V1,V2`` is repeatable; values are JSON where they parse
(``5``, ``false``, ``0.5``), text otherwise.  The magic returns the sweep's polars
DataFrame (``df = %memfit_sweep ...``) and binds it to ``--name``.

``%memfit_sweep --resume DIR`` goes on with the sweep kept in ``DIR`` (its runs are listed
there; finished ones are read back), e.g. after the kernel died; ``--set KEY=V`` with it gives
again a setting that held a secret, which ``DIR`` keeps redacted (``--set api_base=$base``:
IPython puts the variable's value in the line, so the password is in no cell); ``--resources
num_cpus=2,memory=4e9`` is what each run asks of Ray.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, magics_class

from .ipython import argument, line_cell_magic, magic_arguments, parse_argstring, user_namespace


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise UsageError(f"--grid takes KEY=V1,V2,..., got {item!r}")
        grid[key.strip().replace("-", "_")] = [_value(v.strip()) for v in values.split(",") if v.strip()]
    return grid


def parse_tasks(cell: str | None, line_tasks: list[str]) -> list[str] | dict[str, str]:
    lines = [t for t in line_tasks if t.strip()]
    lines += [t.strip() for t in (cell or "").splitlines() if t.strip() and not t.strip().startswith("#")]
    if not lines:
        raise UsageError("no tasks: write one task per line of the cell, or give --task")
    named = {}
    for t in lines:
        name, sep, rest = t.partition(":")
        if not sep or " " in name.strip() or not rest.strip():
            return lines
        named[name.strip()] = rest.strip()
    return named


def parse_resources(items: list[str]) -> dict[str, Any]:
    """``--resources num_cpus=2,memory=4e9`` as Ray's per-task options (numbers where they parse)."""
    out: dict[str, Any] = {}
    for item in (p for i in items for p in i.split(",") if p.strip()):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"--resources takes KEY=V,..., got {item!r}")
        out[key.strip().replace("-", "_")] = _value(value.strip())
    return out


@magics_class
class SweepMagics(Magics):
    """``%memfit_sweep``: every combination of tasks and settings, as a DataFrame."""

    @magic_arguments()
    @argument("--task", action="append", default=[], help="a task (repeatable; or one per line of the cell)")
    @argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
              help="an Agent setting and its values (repeatable), e.g. model=memfit/demo,memfit/spin-demo")
    @argument("--set", action="append", default=[], metavar="KEY=V",
              help="a setting every run shares (repeatable), e.g. memory=false")
    @argument("--engine", choices=("local", "ray"), default="local", help="where runs execute (default local)")
    @argument("--max-parallel", type=int, metavar="N", help="runs at once (default: the cores)")
    @argument("--out", metavar="DIR", help="the sweep's directory; the same DIR resumes the sweep")
    @argument("--max-cost", type=float, metavar="USD", help="hard budget over all runs")
    @argument("--retries", type=int, default=1, metavar="N", help="retries of a run whose worker failed")
    @argument("--address", metavar="ADDR", help="an existing Ray cluster (engine ray), e.g. ray://host:10001")
    @argument("--resources", action="append", default=[], metavar="KEY=V",
              help="what each run asks of Ray (engine ray; repeatable or comma-separated), e.g. num_cpus=2")
    @argument("--resume", metavar="DIR",
              help="go on with the sweep kept in DIR (no tasks or grid then; --set only for settings it keeps redacted)")
    @argument("--name", metavar="VAR", help="bind the DataFrame to VAR")
    @argument("--quiet", action="store_true", help="no progress widget")
    @line_cell_magic
    def memfit_sweep(self, line: str, cell: str | None = None) -> Any:
        """Run a sweep (``memfit_jupyter.sweep``) and return its DataFrame."""
        args = parse_argstring(self.memfit_sweep, line)
        if args.address and args.engine != "ray":
            raise UsageError("--address is for --engine ray")
        if args.resources and args.engine != "ray":
            raise UsageError("--resources is for --engine ray")
        resources = parse_resources(args.resources)
        options = {"engine": args.engine, "max_parallel": args.max_parallel, "max_cost_usd": args.max_cost,
                   "retries": args.retries, "address": args.address, "resources": resources,
                   "progress": not args.quiet}
        from ..sweep import resume, sweep

        shared: dict[str, Any] = {k: v[0] if len(v) == 1 else v for k, v in parse_grid(args.set).items()}
        if args.resume:
            if args.task or args.grid or args.out or (cell or "").strip():
                raise UsageError("--resume DIR takes the runs kept in DIR: give no tasks, --grid or --out")
            run: Callable[[], Any] = lambda: resume(args.resume, **options, **shared)  # noqa: E731
        else:
            tasks = parse_tasks(cell, args.task)
            grid = parse_grid(args.grid)
            run = lambda: sweep(tasks, grid, out=args.out, settings=shared, **options)  # noqa: E731
        try:
            df = run()
        except (ValueError, TypeError, NotADirectoryError, FileNotFoundError) as exc:
            raise UsageError(str(exc)) from None
        except Exception as exc:  # unknown models and tools are MemfitErrors: one line, no traceback
            from ..errors import MemfitError

            if isinstance(exc, MemfitError | ImportError):
                raise UsageError(str(exc)) from None
            raise
        if args.name:
            user_namespace(self)[args.name] = df
        return df
