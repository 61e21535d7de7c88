"""Sweeps: every combination of tasks and settings as an independent run.

>>> df = sweep(["What is the total of the numbers in data.txt?"],      # doctest: +SKIP
...            {"model": ["memfit/demo", "memfit/spin-demo"], "max_iterations": [5, 10]},
...            max_parallel=2, out="sweeps/first")

Each run gets its own working directory and trace file under ``out/runs/<key>/``, where
``key`` hashes the run's task and settings; the result is a polars DataFrame, one row
per run.  Running the same sweep over the same ``out`` again resumes it: runs whose
traces exist are read back, not redone.  Modules: ``spec`` (combinations, keys, rows),
``runner`` (one run, in a worker), ``engines`` (local processes; ``ray_engine``: Ray),
``core`` (the scheduler and the sweep-wide budget).  Ray is imported only for
``engine="ray"``; IPython only to show the progress widget inside a kernel.

Secrets (a key in a task, a password in an ``api_base``) reach the runs, which need them,
and nothing else: ``sweep.json`` keeps them redacted and the DataFrame shows them redacted,
so ``resume`` takes such settings again (``resume(out, api_base=...)``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engines import Engine

__all__ = ["sweep", "resume", "SweepProgress"]

#: Where a sweep keeps its runs when ``out`` is not given (relative to the working directory).
DEFAULT_OUT = ".memfit-sweeps"
#: The file in ``out`` that lists the sweep's runs, so ``resume(out)`` needs nothing else.
MANIFEST = "sweep.json"


def sweep(tasks: Iterable[str] | Mapping[str, str] | str, grid: Mapping[str, Iterable[Any]] | None = None, *,
          engine: str = "local", max_parallel: int | None = None, out: str | os.PathLike[str] | None = None,
          settings: Mapping[str, Any] | None = None, max_cost_usd: float | None = None, retries: int = 1,
          address: str | None = None, resources: Mapping[str, Any] | None = None,
          ray_init: Mapping[str, Any] | None = None,
          progress: bool | str | Callable[[Any], None] = "auto") -> Any:
    """Run every combination of a task and the ``grid``'s settings; a polars DataFrame back.

    - ``tasks``: task strings, or a mapping name -> task (the ``task`` column shows names).
    - ``grid``: ``Agent`` arguments (and the limits ``max_cost_usd``, ``max_duration_seconds``,
      ``max_recursive_calls``) to lists of values; every combination is one run.
    - ``settings``: values every run shares (e.g. ``{"memory": False}``).
    - ``engine``: ``"local"`` (worker processes here) or ``"ray"`` (Ray tasks: a local Ray,
      or the cluster at ``address=``, with ``resources=`` per run, e.g. ``{"num_cpus": 1}``).
    - ``max_parallel``: runs at once (default: this machine's cores; on Ray, the cluster's CPUs).
    - ``out``: the sweep's directory; the same ``out`` resumes (default: a directory under
      ``.memfit-sweeps/`` named after the sweep's runs, so repeating a sweep resumes it).
    - ``max_cost_usd``: a hard budget over all runs: no run starts unless the budget left can
      pay for its worst case (its own ``max_cost_usd``); runs that cannot are ``skipped``.
    - ``retries``: how many more times a run whose worker failed is tried in this call.
    - ``progress``: ``"auto"`` shows the live widget inside a kernel; a callable gets every
      ``SweepProgress``; ``False`` shows nothing.

    Secrets in tasks and settings are redacted wherever they would be written or shown
    (``out/sweep.json``, the DataFrame); the runs get the real values.

    Columns: ``run`` (the key), ``task``, one per setting, ``status`` (a run's status, or
    ``error`` / ``skipped`` / ``cancelled`` for runs without a trace), ``iterations``,
    ``cost_usd``, ``prompt_tokens``, ``completion_tokens``, ``tokens``, ``duration_s``,
    ``mechanisms`` (what fired: reflection, spin, breaker...), ``answer``, ``trace`` (its
    path), ``attempts``, ``error``.
    """
    from ..secrets import refresh_env_secrets, remember_url_passwords
    from .spec import expand, validate

    _check_options(engine, max_parallel, max_cost_usd, retries)
    refresh_env_secrets()  # a key set since the last run is a secret to redact in names and sweep.json
    remember_url_passwords([grid, settings])  # and a URL setting's password, typed alone in a task
    specs = expand(tasks, grid, settings)
    validate(specs)
    if out is None:
        digest = hashlib.sha256(" ".join(sorted(s.key for s in specs)).encode()).hexdigest()[:12]
        out = Path(DEFAULT_OUT) / digest
    out = Path(out).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"sweep out= must be a directory, and {out} is a file")
    out.mkdir(parents=True, exist_ok=True)
    _write_manifest(out, specs)
    return _run(specs, out, engine=engine, max_parallel=max_parallel, max_cost_usd=max_cost_usd,
                retries=retries, address=address, resources=resources, ray_init=ray_init, progress=progress)


def resume(out: str | os.PathLike[str], *, engine: str = "local", max_parallel: int | None = None,
           max_cost_usd: float | None = None, retries: int = 1, address: str | None = None,
           resources: Mapping[str, Any] | None = None, ray_init: Mapping[str, Any] | None = None,
           progress: bool | str | Callable[[Any], None] = "auto", **settings: Any) -> Any:
    """Go on with the sweep kept in ``out`` (after a crash, a kill, an interrupt, in a new kernel):
    the runs its last ``sweep`` call listed, finished ones read back, the others run now.  The
    engine and the limits are this call's (a sweep begun locally can end on Ray).

    ``settings``: the settings that held a secret, given again (``api_base="https://user:pw@..."``):
    ``sweep.json`` keeps them redacted.  A value given again replaces the runs' redacted one
    that it redacts to.  When a run that has not finished needs a redacted value that is not
    given (or a task that held a secret: call ``sweep`` again with its tasks and ``out``),
    nothing runs: a ``ValueError`` says what to give."""
    from ..secrets import refresh_env_secrets
    from .spec import RunSpec, validate

    _check_options(engine, max_parallel, max_cost_usd, retries)
    path = Path(out).expanduser().resolve()
    try:
        data = json.loads((path / MANIFEST).read_text())
        entries = list(data["runs"])
        specs = [RunSpec.from_json(r) for r in entries]
        lost = [list(r.get("redacted") or ()) for r in entries]
    except FileNotFoundError:
        raise FileNotFoundError(f"no sweep to resume in {path}: it has no {MANIFEST}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot resume the sweep in {path}: {MANIFEST} is unreadable ({exc})") from None
    refresh_env_secrets()  # the values given are matched by their redacted form
    specs, lacking = _restore(specs, lost, settings, path)
    validate([s for s, missing in zip(specs, lacking, strict=True) if not missing])
    return _run(specs, path, engine=engine, max_parallel=max_parallel, max_cost_usd=max_cost_usd,
                retries=retries, address=address, resources=resources, ray_init=ray_init, progress=progress)


def _restore(specs: list[Any], lost: list[list[str]], given: Mapping[str, Any],
             path: Path) -> tuple[list[Any], list[list[str]]]:
    """The specs with the values ``given`` again put back where ``sweep.json`` redacted them, and
    what each still lacks.  A run that lacks something must have finished (its trace is read
    back, its values are not needed); otherwise this refuses, in one line, before anything runs."""
    from dataclasses import replace

    from ..secrets import redact_obj
    from .runner import read_finished
    from .spec import check_setting

    redacted = {name.removeprefix("settings.") for names in lost for name in names if name.startswith("settings.")}
    for name in given:
        check_setting(name)
        if name not in redacted:
            held = f"the settings it keeps redacted are: {', '.join(sorted(redacted))}" if redacted else \
                "it keeps none redacted"
            raise ValueError(f"resume takes again only settings that {MANIFEST} in {path} keeps redacted, and "
                             f"{name} is kept in full ({held})")
    shown = {name: json.dumps(redact_obj(value), sort_keys=True) for name, value in given.items()}
    restored, lacking = [], []
    for spec, names in zip(specs, lost, strict=True):
        settings, missing = dict(spec.settings), []
        for name in names:
            setting = name.removeprefix("settings.")
            if name != setting and setting in given and shown[setting] == json.dumps(settings[setting], sort_keys=True):
                settings[setting] = given[setting]
            else:
                missing.append(name)
        restored.append(replace(spec, settings=settings) if settings != spec.settings else spec)
        lacking.append(missing)
    needed = [(spec, name) for spec, missing in zip(specs, lacking, strict=True)
              if missing and read_finished(spec, path) is None for name in missing]
    if needed:
        # a task first: no setting given again could make up for it
        spec, name = min(needed, key=lambda need: need[1].startswith("settings."))
        raise ValueError(_needs(spec, name, given, path))
    return restored, lacking


def _needs(spec: Any, name: str, given: Mapping[str, Any], path: Path) -> str:
    """Why a run that has not finished cannot go on: the redacted value it needs, and how to give it."""
    setting = name.removeprefix("settings.")
    if name == setting:  # its task or files held a secret: only the sweep's own call has them
        return (f"cannot resume the sweep in {path}: the {name} of run {spec.key} ({spec.name}) held a secret, "
                f"which {MANIFEST} keeps redacted; call sweep() again with its tasks and out= to go on")
    kept = json.dumps(spec.settings[setting])
    why = f"the {setting} given is another one" if setting in given else "give it again"
    return (f"cannot resume the sweep in {path}: run {spec.key} needs {setting}={kept}, which {MANIFEST} keeps "
            f"redacted (it held a secret); {why}: resume(out, {setting}=...), or --set {setting}=... in a cell")


#: ``memfit_jupyter.sweep`` is this function once imported from the package: ``.resume`` on it too.
sweep.resume = resume  # type: ignore[attr-defined]


def _check_options(engine: str, max_parallel: int | None, max_cost_usd: float | None, retries: int) -> None:
    if engine not in ("local", "ray"):
        raise ValueError(f"unknown engine {engine!r}; choose 'local' or 'ray'")
    if max_parallel is not None and (isinstance(max_parallel, bool) or int(max_parallel) < 1):
        raise ValueError(f"max_parallel must be at least 1, got {max_parallel!r}")
    if max_cost_usd is not None and not max_cost_usd > 0:
        raise ValueError(f"max_cost_usd must be above 0, got {max_cost_usd!r}")
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, got {retries!r}")


def _write_manifest(out: Path, specs: list[Any]) -> None:
    """List the runs in ``out/sweep.json``, their secrets redacted (``RunSpec.kept``): the
    environment's, and the passwords of the settings' URLs wherever they appear."""
    from ..secrets import refresh_env_secrets, remember_url_passwords

    refresh_env_secrets()
    remember_url_passwords([s.settings for s in specs])
    tmp = out / f".{MANIFEST}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"runs": [s.kept() for s in specs]}, indent=1))
    os.replace(tmp, out / MANIFEST)


def _run(specs: list[Any], out: Path, *, engine: str, max_parallel: int | None, max_cost_usd: float | None,
         retries: int, address: str | None, resources: Mapping[str, Any] | None,
         ray_init: Mapping[str, Any] | None, progress: bool | str | Callable[[Any], None]) -> Any:
    from .core import run_specs

    eng = make_engine(engine, str(out), int(max_parallel or 0), address=address,
                      resources=dict(resources or {}), ray_init=dict(ray_init or {}))
    parallel = int(max_parallel or eng.default_parallel())
    eng.max_parallel = parallel
    on_progress = _progress_callback(progress, len(specs), engine)
    rows = run_specs(specs, out, eng, max_parallel=parallel, max_cost_usd=max_cost_usd, retries=retries,
                     on_progress=on_progress)
    return _frame(rows)


def _progress_callback(progress: bool | str | Callable[[Any], None], total: int,
                       engine: str) -> Callable[[Any], None] | None:
    if callable(progress):
        return progress
    if progress is False or progress is None:
        return None
    if progress == "auto" and not _in_kernel():
        return None
    from ..jupyter.sweep_widget import SweepWidget

    widget = SweepWidget(total, engine)
    widget.show()
    return widget.update


def _in_kernel() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _frame(rows: list[dict[str, Any]]) -> Any:
    """Rows as a DataFrame; a setting whose values differ in type across runs (``memory``:
    False or a path) becomes a column of their JSON text, since a column has one type."""
    import json

    import polars as pl

    keys = list(dict.fromkeys(k for row in rows for k in row))
    for key in keys:
        kinds = {type(row.get(key)) for row in rows if row.get(key) is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            for row in rows:
                if row.get(key) is not None:
                    row[key] = json.dumps(row[key])
    data = {key: [row.get(key) for row in rows] for key in keys}
    overrides: dict[str, pl.DataType | type[pl.DataType]] = {"mechanisms": pl.List(pl.String), "error": pl.String, "answer": pl.String, "trace": pl.String,
                 "cost_usd": pl.Float64, "duration_s": pl.Float64}
    return pl.DataFrame(data, schema_overrides={k: v for k, v in overrides.items() if k in data},
                        strict=False)


def make_engine(engine: str, out: str, max_parallel: int, *, address: str | None = None,
                resources: dict[str, Any] | None = None, ray_init: dict[str, Any] | None = None) -> Engine:
    """The engine named ``engine``: worker processes of this machine, or Ray tasks."""
    if engine == "local":
        if address is not None or resources:
            raise ValueError("address= and resources= are for engine='ray'")
        from .engines import LocalEngine

        return LocalEngine(out, max_parallel)
    if engine == "ray":
        from .ray_engine import RayEngine

        return RayEngine(out, max_parallel, address=address, resources=resources, ray_init=ray_init)
    raise ValueError(f"unknown engine {engine!r}; choose 'local' or 'ray'")


class _CallableModule(types.ModuleType):
    """``memfit_jupyter.sweep(...)`` must call the function even once a submodule import has
    bound the package itself to that name on ``memfit_jupyter`` (the import system does so)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule


def __getattr__(name: str) -> Any:
    if name == "SweepProgress":
        from .core import SweepProgress

        return SweepProgress
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
