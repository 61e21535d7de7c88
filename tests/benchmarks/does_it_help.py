"""Does self-correction help?  The task suite (``memfit_jupyter.tasks``) under memfit's
mechanisms, one at a time, on real local models (``tests/local_model.py``), with intervals.

    python tests/benchmarks/does_it_help.py --models smollm2,gemma3 --repeats 1 \
        [--per-family 2] [--variants bare,default,spin,...] [--max-iterations 4] [--json out.json]

For each model: a llama-server (one thread), ``evaluate`` over ``--per-family`` tasks of each
family x the variants x ``--repeats`` seeded repeats (temperature 0.7, seed 0 + repeat), one
run at a time; then one row per mechanism: success with its 95 % Wilson interval, the change
against ``bare`` (same task, same seed) with its 95 % paired bootstrap interval and the exact
McNemar p, tokens per run and tokens per success.

Measured here (2 shared cores under other load, one llama-server thread):

    python tests/benchmarks/does_it_help.py --models smollm2 --per-family 2 \
        --variants bare,default,diary,spin,reflection-standard,memory,synthesis \
        --repeats 1 --max-iterations 3 --max-duration 90            # 56 runs, 35 min
    python tests/benchmarks/does_it_help.py --models gemma3 --per-family 2 \
        --variants bare,default,diary --repeats 1 --max-iterations 3 --max-duration 90   # 24 runs, ~12 min

(the Gemma rows are from a first run of both models over bare, default and diary, 48 runs in
23.0 min; the seven-variant run was started for both models and stopped after SmolLM2's 56 runs,
as Gemma's would not have fitted in the time this machine had; the table was then made from the
runs' folders with the same ``summarise`` and ``table``.)

| model | mechanism | runs | success (95 % CI) | change vs bare (95 % CI) | McNemar p | tokens / run | tokens / success | calls / run | s / run |
|---|---|---|---|---|---|---|---|---|---|
| smollm2-135m-instruct | bare | 8 | 0.00 [0.00, 0.32] | baseline |  | 1,311 | - | 2.0 | 23 |
| smollm2-135m-instruct | default | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 3,251 | - | 5.1 | 43 |
| smollm2-135m-instruct | reflection-standard | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 2,190 | - | 4.1 | 36 |
| smollm2-135m-instruct | spin | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 1,346 | - | 2.4 | 35 |
| smollm2-135m-instruct | memory | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 1,712 | - | 3.9 | 33 |
| smollm2-135m-instruct | synthesis | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 832 | - | 1.5 | 14 |
| smollm2-135m-instruct | diary | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 2,324 | - | 4.1 | 58 |
| gemma-3-270m | bare | 8 | 0.00 [0.00, 0.32] | baseline |  | 1,362 | - | 2.8 | 6 |
| gemma-3-270m | default | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 5,584 | - | 10.0 | 34 |
| gemma-3-270m | diary | 8 | 0.00 [0.00, 0.32] | +0.00 [+0.00, +0.00] | 1.00 | 1,515 | - | 3.0 | 6 |

No run of either model solved a task: 0/8 per cell, a Wilson interval of [0, 0.32], so the
table rules out only large effects; what it measures is the price (the defaults: 2.5x and
4.1x a bare run's tokens).  At this size a cell's interval is about +-0.3 wide; 28 tasks x 3
repeats (84 pairs) would bring it near +-0.1, about 4 hours per model here.  The reading and
what it supports are in docs/EVIDENCE.md.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: The tools every run gets: enough for every family, few enough for a small model.
TOOLS = ["read_file", "write_file", "shell", "finish"]


def table(summary) -> str:
    """The markdown table of ``Evaluation.summary`` rows."""
    lines = ["| model | mechanism | runs | success (95 % CI) | change vs bare (95 % CI) | McNemar p "
             "| tokens / run | tokens / success | calls / run | s / run |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary.to_dicts():
        change = "baseline" if r["change"] is None else (
            f"{r['change']:+.2f} [{r['change_lo']:+.2f}, {r['change_hi']:+.2f}]")
        p = "" if r["mcnemar_p"] is None else f"{r['mcnemar_p']:.2f}"
        tps = "-" if r["tokens_per_success"] is None else f"{r['tokens_per_success']:,.0f}"
        lines.append(f"| {r['model'].split('/')[-1]} | {r['variant']} | {r['runs']} | {r['success']:.2f} "
                     f"[{r['success_lo']:.2f}, {r['success_hi']:.2f}] | {change} | {p} | {r['tokens_mean']:,.0f} "
                     f"| {tps} | {r['calls_mean']:.1f} | {r['seconds_mean']:.0f} |")
    return "\n".join(lines)


def per_family(runs):
    """Successes / runs per variant, family and tier (the calibration of the suite on a model)."""
    import polars as pl

    return (runs.join(_tiers(), on="task", how="left")
            .group_by("variant", "family", "tier", maintain_order=True)
            .agg(pl.col("passed").sum().alias("passed"), pl.len().alias("runs"))
            .sort("variant", "family", "tier"))


def _tiers():
    import polars as pl

    from memfit_jupyter.tasks import SUITE

    return pl.DataFrame({"task": [t.name for t in SUITE], "tier": [t.tier for t in SUITE]})


def main() -> None:
    from local_model import MODELS, LocalModel, missing

    from memfit_jupyter.evaluate import VARIANTS, evaluate
    from memfit_jupyter.tasks import TIERS, tasks

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--per-family", type=int, default=None, help="the first N tasks of each family (default: all)")
    ap.add_argument("--tiers", default="easy,medium", help=f"task tiers, of {','.join(TIERS)}")
    ap.add_argument("--temperature", type=float, default=0.3)
    ap.add_argument("--variants", default="bare,default,spin,diary,reflection-standard",
                    help=f"of {','.join(VARIANTS)}")
    ap.add_argument("--max-iterations", type=int, default=4)
    ap.add_argument("--max-duration", type=float, default=180.0)
    ap.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--finished-only", action="store_true",
                    help="run nothing: the table of the runs --out already holds (an evaluation stopped part way)")
    args = ap.parse_args()
    # a stopped benchmark (kill PID) leaves the runs it finished in --out and stops its server
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            raise SystemExit(f"unknown model {m!r}; models: {', '.join(MODELS)}")
        if missing(m) and not args.finished_only:
            raise SystemExit(f"{m}: {missing(m)}")
    suite = tasks(per_family=args.per_family, tiers=[t for t in args.tiers.split(",") if t])
    variants = [v for v in args.variants.split(",") if v]
    base = args.out or Path(tempfile.mkdtemp(prefix="memfit-does-it-help-"))
    started = time.perf_counter()
    frames = []
    import polars as pl

    settings = {"tools": TOOLS, "structured": "schema", "max_iterations": args.max_iterations,
                "max_duration_seconds": args.max_duration}
    for m in models:
        t0 = time.perf_counter()
        if args.finished_only:
            ev = evaluate(suite, variants, model=f"openai/{MODELS[m]['alias']}", repeats=args.repeats,
                          temperature=args.temperature, settings=settings, out=base / m, finished_only=True)
        else:
            with LocalModel.start(model=m, log_dir=base) as lm:
                ev = evaluate(suite, variants, model=lm.model, api_base=lm.api_base, repeats=args.repeats,
                              temperature=args.temperature, settings=settings, out=base / m, max_parallel=1)
        frames.append(ev)
        print(f"{m}: {ev.runs.height} runs in {time.perf_counter() - t0:.0f} s", flush=True)
        with pl.Config(tbl_rows=200):
            print(per_family(ev.runs))
    summary = pl.concat([ev.summary for ev in frames])
    print()
    print(table(summary))
    wall = time.perf_counter() - started
    print(f"\n{sum(ev.runs.height for ev in frames)} runs, {len(suite)} tasks x {len(variants)} variants x "
          f"{args.repeats} repeats x {len(models)} models, wall time {wall / 60:.1f} min")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary.to_dicts(),
                                         "runs": pl.concat([ev.runs for ev in frames]).drop("trace").to_dicts(),
                                         "args": {k: str(v) for k, v in vars(args).items()},
                                         "wall_s": round(wall, 1)}, indent=1, default=str))


if __name__ == "__main__":
    main()
