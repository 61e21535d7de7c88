"""Does a mechanism help?  ``evaluate`` runs a task suite under named variants and says, with
intervals, how often each variant succeeds and what it changes against a baseline.

>>> from memfit_jupyter.evaluate import evaluate            # doctest: +SKIP
>>> from memfit_jupyter.tasks import tasks
>>> ev = evaluate(tasks(per_family=2), ["bare", "default"], model="openai/smollm2-135m-instruct",
...               api_base="http://127.0.0.1:8080/v1", repeats=3)
>>> ev.summary                                               # one row per variant

It is a sweep (``memfit_jupyter.sweep``) with an oracle per task and repeats: every
(task, variant, repeat) is one run in its own working directory under ``out``, on the
local engine or on Ray, and an interrupted evaluation resumes from ``out``.  Repeat r of
every variant samples with the same seed (``seed + r``, through ``seeding.SeedRelay`` for
a model behind ``api_base``), so that variants are compared on the same task and seed.

Per variant: success rate with a 95 % Wilson interval, mean tokens, model calls and
seconds per run, tokens per success; against the baseline: the mean paired difference in
success (same task, same seed) with a paired bootstrap interval, and the exact McNemar
p-value.  Bad input (an unknown variant or setting, a task without an oracle, a model that
does not answer) is one clear error before anything is written to ``out``.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..tasks.core import Task, check_command
from .chart import chart
from .stats import mcnemar_exact, paired_bootstrap, wilson
from .variants import SHARED_STORE, TASK_ORACLE, VARIANTS, resolve, settings_for

__all__ = ["VARIANTS", "Evaluation", "chart", "evaluate", "summarise"]

#: Where evaluations keep their runs when ``out`` is not given.
DEFAULT_OUT = ".memfit-evals"
#: Settings every run of an evaluation gets unless the caller gives others: short runs, and shell
#: and python in the bubblewrap sandbox where the machine has one (no person is there to approve
#: an unconfined command, so without it the tool policy refuses every shell call of a real model).
RUN_DEFAULTS: dict[str, Any] = {"max_iterations": 6, "max_duration_seconds": 300.0, "sandbox": "auto"}


@dataclass
class Evaluation:
    """What ``evaluate`` returns: ``runs`` (one row per run), ``summary`` (one per variant)."""

    runs: Any
    summary: Any
    baseline: str
    out: Path

    def chart(self, title: str = "") -> str:
        """The summary as SVG (``IPython.display.HTML(ev.chart())`` shows it)."""
        return chart(self.summary, title)

    def _repr_html_(self) -> str:
        return self.chart() + str(self.summary._repr_html_())


def evaluate(tasks: Iterable[Task], variants: Mapping[str, Mapping[str, Any]] | list[str] | None = None, *,
             model: str, api_base: str | None = None, repeats: int = 1, engine: str = "local",
             baseline: str | None = None, temperature: float = 0.7, seed: int = 0,
             settings: Mapping[str, Any] | None = None, out: str | os.PathLike[str] | None = None,
             max_parallel: int | None = None, progress: Any = False, resamples: int = 2000,
             finished_only: bool = False, **engine_options: Any) -> Evaluation:
    """Run every task under every variant ``repeats`` times and summarise (module docstring).

    - ``tasks``: ``memfit_jupyter.tasks.Task``s (each with its oracle).
    - ``variants``: names of ``VARIANTS``, or a mapping name -> ``Agent`` settings (default: all).
    - ``model`` / ``api_base``: the model every run uses; ``temperature`` and ``seed`` seed its
      sampling when it is behind ``api_base``.
    - ``baseline``: the variant the others are compared with (``bare`` when present, else the first).
    - ``settings``: shared by every run (``RUN_DEFAULTS`` fill what is not given), e.g.
      ``{"tools": [...], "max_iterations": 4, "structured": "schema"}``.
    - ``engine``, ``max_parallel``, ``out`` and ``engine_options`` (``address``, ``resources``...)
      go to the sweep.
    - ``finished_only``: run nothing; summarise the runs of this evaluation that ``out`` already
      holds (an evaluation stopped part way: the table so far).  Only the (task, seed) cells the
      baseline finished count, so every change is over pairs; a variant's ``runs`` says how many
      of them it finished (its success rate is over those, not over the baseline's).
    """
    from ..sweep import _check_options

    task_list = list(tasks)
    chosen = resolve(variants)
    _check_input(task_list, chosen, repeats)
    base = baseline or ("bare" if "bare" in chosen else next(iter(chosen)))
    if base not in chosen:
        raise ValueError(f"baseline {base!r} is not among the variants ({', '.join(chosen)})")
    _check_options(engine, max_parallel, None, 1)
    shared = {**RUN_DEFAULTS, **dict(settings or {}), "model": model}
    if api_base is not None:
        shared["api_base"] = api_base
    specs, plan = _specs(task_list, chosen, shared, repeats, seed)
    from ..sweep.spec import validate

    validate(specs)  # an unknown setting or model: one error, before anything exists
    out_dir = _out_dir(out, specs)
    if any(s.settings.get("memory") == SHARED_STORE for s in specs):
        if max_parallel not in (None, 1):
            raise ValueError("a variant with a shared store runs one run at a time: max_parallel must be 1")
        specs, max_parallel = _in_turn(specs, plan, out_dir), 1
    if finished_only:
        return _finished(specs, plan, task_list, out_dir, model, base, resamples)
    _probe(model, api_base)  # a model that does not answer: the same
    relay = None
    if api_base is not None:
        from .seeding import SeedRelay

        relay = SeedRelay(api_base, temperature)
        specs = [_with_base(s, relay.api_base(plan[s.key]["seed"])) for s in specs]
    try:
        from ..sweep import _run, _write_manifest

        out_dir.mkdir(parents=True, exist_ok=True)
        _write_manifest(out_dir, specs)
        rows = _run(specs, out_dir, engine=engine, max_parallel=max_parallel, max_cost_usd=None, retries=1,
                    address=engine_options.get("address"), resources=engine_options.get("resources"),
                    ray_init=engine_options.get("ray_init"), progress=progress).to_dicts()
    finally:
        if relay is not None:
            relay.close()
    runs = _judge(rows, plan, {t.name: t for t in task_list}, out_dir, model)
    summary = summarise(runs, base, resamples=resamples)
    return Evaluation(runs=runs, summary=summary, baseline=base, out=out_dir)


def _finished(specs: list[Any], plan: dict[str, dict[str, Any]], tasks: list[Task], out: Path, model: str,
              baseline: str, resamples: int) -> Evaluation:
    from ..sweep.runner import read_finished

    rows = [row for row in (read_finished(s, out) for s in specs) if row is not None]
    if not rows:
        raise FileNotFoundError(f"no finished run of this evaluation in {out}")
    import polars as pl

    runs = _judge(rows, plan, {t.name: t for t in tasks}, out, model)
    # only the (task, seed) cells the baseline finished: every other run has its pair
    base = runs.filter(pl.col("variant") == baseline).select("task", "seed")
    runs = runs.join(base, on=["task", "seed"], how="semi")
    if not runs.height:
        raise FileNotFoundError(f"no run of the baseline {baseline!r} of this evaluation in {out} has finished yet")
    return Evaluation(runs=runs, summary=summarise(runs, baseline, resamples=resamples), baseline=baseline, out=out)


def _check_input(tasks: list[Task], variants: dict[str, dict[str, Any]], repeats: int) -> None:
    from ..sweep.spec import check_setting

    if not tasks:
        raise ValueError("no tasks: give at least one memfit_jupyter.tasks.Task")
    names = [getattr(t, "name", None) for t in tasks]
    for t in tasks:
        if not isinstance(t, Task):
            raise TypeError(f"tasks must be memfit_jupyter.tasks.Task objects, got {type(t).__name__}")
        if t.check is None:
            raise ValueError(f"task {t.name!r} has no oracle: give it check=(workdir, answer) -> Verdict")
    if len(set(names)) != len(names):
        raise ValueError("two tasks have the same name")
    if not variants:
        raise ValueError("no variants: give at least one")
    for name, settings in variants.items():
        for key in settings:
            try:
                check_setting(key)
            except ValueError as exc:
                raise ValueError(f"variant {name!r}: {exc}") from None
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number of at least 1, got {repeats!r}")


def _specs(tasks: list[Task], variants: dict[str, dict[str, Any]], shared: dict[str, Any], repeats: int,
           seed: int) -> tuple[list[Any], dict[str, dict[str, Any]]]:
    """One RunSpec per (task, variant, repeat); the key hashes all of it but the server's address
    (a local server gets a new port each time it starts), so the same evaluation over the same
    ``out`` finds its finished runs again."""
    from ..sweep.spec import RunSpec, run_key

    specs, plan = [], {}
    for task in tasks:
        for variant, own in variants.items():
            settings = settings_for(shared, own)
            if settings.get("oracle") == TASK_ORACLE:
                settings["oracle"] = check_command(task)
            for r in range(repeats):
                keyed = {k: v for k, v in settings.items() if k != "api_base"}
                key = run_key(task.prompt, {"task": task.name, "variant": variant, "settings": keyed,
                                            "files": dict(task.files), "seed": seed + r})
                # one place per task and seed: the variants' prompts name the same working directory
                specs.append(RunSpec(task.prompt, dict(settings), key, task.name, dict(task.files),
                                     place=f"{task.name}-s{seed + r}"))
                plan[key] = {"task": task.name, "family": task.family, "variant": variant, "repeat": r,
                             "seed": seed + r}
    return specs, plan


def _in_turn(specs: list[Any], plan: dict[str, dict[str, Any]], out: Path) -> list[Any]:
    """The specs in the order a shared store needs (repeat by repeat, then the tasks as given),
    a ``SHARED_STORE`` made the variant's own store under ``out``.  The key keeps the placeholder:
    the same evaluation in another ``out`` is the same runs."""
    from ..sweep.spec import RunSpec

    order = {key: (p["repeat"], i) for i, (key, p) in enumerate(plan.items())}
    turned = []
    for spec in sorted(specs, key=lambda s: order[s.key]):
        if spec.settings.get("memory") == SHARED_STORE:
            store = out / "stores" / plan[spec.key]["variant"]
            spec = RunSpec(spec.task, {**spec.settings, "memory": str(store)}, spec.key, spec.name, spec.files,
                           spec.place)
        turned.append(spec)
    return turned


def _with_base(spec: Any, base: str) -> Any:
    from ..sweep.spec import RunSpec

    return RunSpec(spec.task, {**spec.settings, "api_base": base}, spec.key, spec.name, spec.files, spec.place)


def _probe(model: str, api_base: str | None) -> None:
    """One tiny call, so that a model that cannot answer fails here and not in every run."""
    if model.startswith("memfit/"):
        return
    if api_base is not None:
        try:
            with urllib.request.urlopen(api_base.rstrip("/") + "/models", timeout=10) as r:
                r.read()
        except OSError as exc:
            raise RuntimeError(f"model {model!r} cannot start: nothing answers at {api_base} ({exc})") from None
    from ..llm.backend import LiteLLMBackend

    options = {model: {"api_base": api_base}} if api_base else {}
    try:
        LiteLLMBackend(options).complete(model, [{"role": "user", "content": "Say OK."}], max_tokens=2,
                                         timeout=120, metadata={})
    except Exception as exc:
        raise RuntimeError(f"model {model!r} cannot start: {exc}") from None


def _out_dir(out: str | os.PathLike[str] | None, specs: list[Any]) -> Path:
    if out is None:
        digest = hashlib.sha256(" ".join(sorted(s.key for s in specs)).encode()).hexdigest()[:12]
        out = Path(DEFAULT_OUT) / digest
    path = Path(out).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"evaluate out= must be a directory, and {path} is a file")
    return path


def _judge(rows: list[dict[str, Any]], plan: dict[str, dict[str, Any]], tasks: dict[str, Task], out: Path,
           model: str) -> Any:
    """The sweep's rows with the oracle's verdict on each run's working directory and answer."""
    import polars as pl

    from ..sweep.runner import WORK_DIR, run_dir

    records = []
    for row in rows:
        p = plan[row["run"]]
        task = tasks[p["task"]]
        ran = row.get("trace") is not None
        verdict = task.judge(run_dir(out, row["run"]) / WORK_DIR, row.get("answer")) if ran else None
        records.append({
            "run": row["run"], "model": model, "task": p["task"], "family": p["family"],
            "variant": p["variant"], "repeat": p["repeat"], "seed": p["seed"], "status": row["status"],
            "passed": bool(verdict and verdict.passed),
            "verdict": verdict.detail if verdict else f"no run: {row.get('error')}",
            "tokens": int(row.get("tokens") or 0), "calls": _calls(row.get("trace")),
            "iterations": int(row.get("iterations") or 0), "seconds": float(row.get("duration_s") or 0.0),
            "mechanisms": list(row.get("mechanisms") or []), "error": row.get("error"),
            "trace": row.get("trace"),
        })
    return pl.DataFrame(records, schema_overrides={"mechanisms": pl.List(pl.String), "error": pl.String,
                                                   "trace": pl.String})


def _calls(trace_path: str | None) -> int:
    if not trace_path:
        return 0
    try:
        with open(trace_path) as fh:
            return int((json.load(fh).get("totals") or {}).get("calls") or 0)
    except (OSError, ValueError):
        return 0


def summarise(runs: Any, baseline: str, *, resamples: int = 2000) -> Any:
    """One row per (model, variant) of ``runs``: success with its Wilson interval, the paired
    change against ``baseline`` (bootstrap interval, exact McNemar p), tokens, calls, seconds."""
    import polars as pl

    out = []
    for (model, variant), group in runs.group_by(["model", "variant"], maintain_order=True):
        n = group.height
        k = int(group["passed"].sum())
        lo, hi = wilson(k, n)
        tokens = int(group["tokens"].sum())
        row: dict[str, Any] = {
            "model": model, "variant": variant, "runs": n, "successes": k, "success": k / n if n else 0.0,
            "success_lo": lo, "success_hi": hi, "change": None, "change_lo": None, "change_hi": None,
            "mcnemar_p": None, "pairs": None,
            "tokens_mean": tokens / n if n else 0.0, "tokens_per_success": tokens / k if k else None,
            "calls_mean": float(group["calls"].mean() or 0.0), "seconds_mean": float(group["seconds"].mean() or 0.0),
            "errors": int(group["error"].is_not_null().sum()),
        }
        if variant != baseline:
            base = runs.filter((pl.col("model") == model) & (pl.col("variant") == baseline))
            pairs = group.join(base.select("task", "seed", pl.col("passed").alias("base_passed")),
                               on=["task", "seed"], how="inner")
            if pairs.height:
                diffs = [int(a) - int(b) for a, b in zip(pairs["passed"], pairs["base_passed"], strict=True)]
                dlo, dhi = paired_bootstrap(diffs, resamples=resamples)
                row.update(change=sum(diffs) / len(diffs), change_lo=dlo, change_hi=dhi, pairs=len(diffs),
                           mcnemar_p=mcnemar_exact(diffs.count(1), diffs.count(-1)))
        out.append(row)
    return pl.DataFrame(out, schema_overrides={k: pl.Float64 for k in (
        "change", "change_lo", "change_hi", "mcnemar_p", "tokens_per_success")} | {"pairs": pl.Int64})
