"""Does self-correction help?  The task suite (``memfit_jupyter.tasks``) under memfit's
mechanisms, one at a time, on real local models (``tests/local_model.py``), with intervals.

    python tests/benchmarks/does_it_help.py --models smollm2,gemma3 --tiers easy --repeats 1 \
        [--per-family 2] [--variants bare,default,spin,...] [--max-iterations 4] \
        [--temperature 0.3] [--out DIR] [--finished-only] [--json out.json]

For each model: a llama-server (one thread), ``evaluate`` over the tasks of ``--tiers`` (the first
``--per-family`` of each family) x the variants x ``--repeats`` seeded repeats (seed 0 + repeat),
one run at a time; then one row per mechanism: success with its 95 % Wilson interval, the change
against ``bare`` (same task, same seed) with its 95 % paired bootstrap interval and the exact
McNemar p, tokens per run and tokens per success; and successes per variant, family and tier.
``--finished-only`` starts no server and runs nothing: the table of the runs ``--out`` holds
(an evaluation stopped part way; every change is over the pairs whose ``bare`` run finished).

It also prints, per variant, the runs whose actions equal ``bare``'s (first and throughout) and
those that started with memory recalled: variants whose prompts are equal until a mechanism acts
must match until then, the instrument's check on its own pairing.

Latest, the defaults as they ship (a spin shown to the person and not put into the prompt; memory
triage by rules; the seed relay with llama.cpp's prompt cache off), 8 iterations, two repeats, both
models side by side on 2 cores (docs/EVIDENCE.md, the ninth measurement)::

    A="--tiers easy,medium --repeats 2 --max-iterations 8 --max-duration 300 --temperature 0.3"
    python tests/benchmarks/does_it_help.py --models smollm2 $A --variants bare,default,default-exit --out OUT   # 78.2 min
    python tests/benchmarks/does_it_help.py --models gemma3 $A --variants bare,default,default-exit --out OUT    # 54.5 min

(each in three parts: bare and default, one repeat; default-exit on it; the second repeat.)

| model | mechanism | runs | success (95 % CI) | change vs bare (95 % CI) | McNemar p | tokens / run | tokens / success |
|---|---|---|---|---|---|---|---|
| smollm2-135m-instruct | bare | 40 | 0.25 [0.14, 0.40] | baseline |  | 5,425 | 21,702 |
| smollm2-135m-instruct | default | 40 | 0.25 [0.14, 0.40] | +0.00 [+0.00, +0.00] | 1.00 | 5,425 | 21,702 |
| smollm2-135m-instruct | default-exit | 40 | 0.25 [0.14, 0.40] | +0.00 [+0.00, +0.00] | 1.00 | 3,599 | 14,395 |
| gemma-3-270m | bare | 40 | 0.28 [0.16, 0.43] | baseline |  | 4,696 | 17,076 |
| gemma-3-270m | default | 40 | 0.28 [0.16, 0.43] | +0.00 [+0.00, +0.00] | 1.00 | 4,696 | 17,076 |
| gemma-3-270m | default-exit | 40 | 0.28 [0.16, 0.43] | +0.00 [+0.00, +0.00] | 1.00 | 3,035 | 11,036 |

``default``'s actions equal ``bare``'s in 80 of 80 pairs, first and throughout, and so do its
tokens: its prompts are a bare run's.  With the seed's spin exit (``default-exit``) success holds
in all 80 pairs and tokens per success fall to 0.66x and 0.65x: these models' passing runs do
the task first and then repeat it.  Success intervals are about +-0.13 at 40 runs; every pair
agreed, so each change's interval is exactly zero.

Before it, memory by rules and recall, 4 iterations, two repeats (the seventh measurement)::

    A="--tiers easy,medium --repeats 2 --max-iterations 4 --max-duration 180 --temperature 0.3"
    python tests/benchmarks/does_it_help.py --models smollm2 $A --variants bare,default,recall --out OUT   # 52.9 min
    python tests/benchmarks/does_it_help.py --models gemma3 $A --variants bare,default,recall --out OUT    # 46.0 min

| model | mechanism | runs | success (95 % CI) | change vs bare (95 % CI) | McNemar p | tokens / run | tokens / success |
|---|---|---|---|---|---|---|---|
| smollm2-135m-instruct | bare | 40 | 0.20 [0.10, 0.35] | baseline |  | 2,029 | 10,144 |
| smollm2-135m-instruct | default | 40 | 0.17 [0.09, 0.32] | -0.03 [-0.07, +0.00] | 1.00 | 2,349 | 13,422 |
| smollm2-135m-instruct | recall | 40 | 0.12 [0.05, 0.26] | -0.07 [-0.20, +0.05] | 0.45 | 2,526 | 20,212 |
| gemma-3-270m | bare | 40 | 0.25 [0.14, 0.40] | baseline |  | 1,792 | 7,167 |
| gemma-3-270m | default | 40 | 0.25 [0.14, 0.40] | +0.00 [+0.00, +0.00] | 1.00 | 2,097 | 8,388 |
| gemma-3-270m | recall | 40 | 0.28 [0.16, 0.43] | +0.03 [-0.07, +0.15] | 1.00 | 2,217 | 8,061 |

``default``'s first action equals ``bare``'s in 80 of 80 pairs, all its actions in 74. The
intervals of a change are about +-0.1 to +-0.2 at 40 pairs.

Earlier (2 cores shared with other work, one llama-server thread per model, the two
models side by side), the 20 easy and medium tasks, with ``A="--tiers easy,medium --repeats 1
--max-iterations 4 --max-duration 180 --temperature 0.3"``:

    python tests/benchmarks/does_it_help.py --models smollm2 $A --variants bare,default --out OUT1   # 36.5 min
    python tests/benchmarks/does_it_help.py --models gemma3 $A --variants bare,default --out OUT2    # 47.4 min
    python tests/benchmarks/does_it_help.py --models smollm2 $A --variants bare,reflection-auto,memory,spin --out OUT1   # 74.3 min
    python tests/benchmarks/does_it_help.py --models gemma3 $A --variants bare,reflection-auto,memory,spin --out OUT2    # 83.8 min
    python tests/benchmarks/does_it_help.py --models smollm2,gemma3 $A \
        --variants bare,default,reflection-auto,memory,spin --out OUT --finished-only --json notebooks/does_it_help.json

(a run's folder is named by its key, so the later runs found the bare runs done; OUT holds
OUT1/smollm2 and OUT2/gemma3; 126.8 min of run time on the longer model's side.)

| model | mechanism | runs | success (95 % CI) | change vs bare (95 % CI) | McNemar p | tokens / run | tokens / success | calls / run | s / run |
|---|---|---|---|---|---|---|---|---|---|
| smollm2-135m-instruct | bare | 20 | 0.15 [0.05, 0.36] | baseline |  | 2,461 | 16,406 | 3.9 | 19 |
| smollm2-135m-instruct | default | 20 | 0.15 [0.05, 0.36] | +0.00 [-0.15, +0.15] | 1.00 | 7,290 | 48,600 | 9.8 | 86 |
| smollm2-135m-instruct | reflection-auto | 20 | 0.20 [0.08, 0.42] | +0.05 [-0.15, +0.25] | 1.00 | 4,953 | 24,765 | 7.0 | 81 |
| smollm2-135m-instruct | memory | 20 | 0.25 [0.11, 0.47] | +0.10 [-0.10, +0.30] | 0.62 | 3,124 | 12,495 | 5.7 | 47 |
| smollm2-135m-instruct | spin | 20 | 0.15 [0.05, 0.36] | +0.00 [-0.20, +0.20] | 1.00 | 4,869 | 32,460 | 5.7 | 85 |
| gemma-3-270m | bare | 20 | 0.10 [0.03, 0.30] | baseline |  | 2,115 | 21,150 | 4.0 | 20 |
| gemma-3-270m | default | 20 | 0.00 [0.00, 0.16] | -0.10 [-0.25, +0.00] | 0.50 | 8,377 | - | 12.2 | 116 |
| gemma-3-270m | reflection-auto | 20 | 0.05 [0.01, 0.24] | -0.05 [-0.15, +0.00] | 1.00 | 4,670 | 93,390 | 7.4 | 86 |
| gemma-3-270m | memory | 20 | 0.05 [0.01, 0.24] | -0.05 [-0.15, +0.00] | 1.00 | 3,514 | 70,287 | 7.4 | 94 |
| gemma-3-270m | spin | 20 | 0.05 [0.01, 0.24] | -0.05 [-0.15, +0.00] | 1.00 | 4,151 | 83,022 | 6.0 | 64 |

The new default (``lean``'s settings: MINIMAL reflection, the spin judge off, memory on), with a
second repeat (``--repeats 2 --variants bare,lean``: 24.7 min SmolLM2, 37.8 min Gemma), 40 pairs:

| smollm2-135m-instruct | bare | 40 | 0.20 [0.10, 0.35] | baseline |  | 2,355 | 11,774 | 3.7 | 20 |
| smollm2-135m-instruct | lean | 40 | 0.28 [0.16, 0.43] | +0.07 [-0.03, +0.20] | 0.38 | 3,765 | 13,690 | 6.3 | 40 |
| gemma-3-270m | bare | 40 | 0.05 [0.01, 0.17] | baseline |  | 2,175 | 43,494 | 4.0 | 23 |
| gemma-3-270m | lean | 40 | 0.05 [0.01, 0.17] | +0.00 [+0.00, +0.00] | 1.00 | 4,209 | 84,172 | 7.8 | 81 |

(the ``default`` rows above are the first defaults, now the ``first-defaults`` variant.)

Latest, with the variants of a task and seed in one working directory (equal prompts; before,
the path in the prompt differed by run and moved the models' first replies in 32-37 of 40
pairs), memory triage at the run's end (the default now), ``--repeats 2 --variants
bare,default`` in a new ``--out``: SmolLM2 49.3 min of run time; Gemma stopped after 16 of the 20
tasks (32 pairs):

| smollm2-135m-instruct | bare | 40 | 0.30 [0.18, 0.45] | baseline |  | 2,194 | 7,314 | 3.5 | 33 |
| smollm2-135m-instruct | default | 40 | 0.35 [0.22, 0.50] | +0.05 [-0.10, +0.20] | 0.75 | 3,043 | 8,694 | 4.7 | 30 |
| gemma-3-270m | bare | 32 | 0.16 [0.07, 0.32] | baseline |  | 2,188 | 14,003 | 4.0 | 45 |
| gemma-3-270m | default | 32 | 0.12 [0.05, 0.28] | -0.03 [-0.09, +0.00] | 1.00 | 3,351 | 26,809 | 5.0 | 48 |

Synthesis and the diary on the same 20 tasks, one repeat (20 pairs): SmolLM2 +0.05 [-0.15, +0.25]
and +0.15 [-0.05, +0.35]; Gemma -0.10 [-0.25, +0.00] and -0.10 [-0.25, +0.00] (17.5 and 19.0 min).
At 20 pairs an interval is about +-0.15 to +-0.25 wide, at 40 about +-0.1; every change holds zero.  The medium tier
is 0 for every variant on both models; SmolLM2's easy ``fix`` tasks, 0/3 bare, reach 2/3 with
memory and 1/3 with reflection.  773 action replies, 0 unusable.  An earlier measurement (the 12
easy tasks, with ``spin`` and ``diary``: the diary alone +0.42 [+0.17, +0.75], from its prompt
text) and the reading: docs/EVIDENCE.md.
"""

from __future__ import annotations

import argparse
import json
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


def paired_actions(runs, baseline: str = "bare"):
    """Per model and variant: of the runs paired with the baseline's (same task and seed), how
    many chose the same first action and the same actions throughout (tool and parameters, from
    the traces), and how many started with memory recalled.  Variants whose prompts are equal
    until a mechanism acts must match until then: the instrument's check on its own pairing."""
    import polars as pl

    def actions(path):
        if not path:
            return None, 0
        trace = json.loads(Path(path).read_text())
        acts = [(e.get("tool"), json.dumps(e.get("params"), sort_keys=True))
                for e in trace["events"] if e["type"] == "action"]
        recalled = sum(1 for e in trace["events"] if e["type"] == "memory" and e.get("op") == "recall" and e["results"])
        return acts, recalled

    rows = [dict(r, **dict(zip(("acts", "recalled"), actions(r["trace"]), strict=True))) for r in runs.iter_rows(named=True)]
    base = {(r["model"], r["task"], r["seed"]): r["acts"] for r in rows if r["variant"] == baseline}
    out = {}
    for r in rows:
        if r["variant"] == baseline or (r["model"], r["task"], r["seed"]) not in base:
            continue
        mine, theirs = r["acts"] or [], base[(r["model"], r["task"], r["seed"])] or []
        c = out.setdefault((r["model"], r["variant"]), {"pairs": 0, "same_first": 0, "same_all": 0, "recalled": 0})
        c["pairs"] += 1
        c["same_first"] += bool(mine and theirs and mine[0] == theirs[0])
        c["same_all"] += mine == theirs
        c["recalled"] += bool(r["recalled"])
    return pl.DataFrame([{"model": m, "variant": v, **c} for (m, v), c in out.items()])


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
            print(paired_actions(ev.runs))
    summary = pl.concat([ev.summary for ev in frames])
    print()
    print(table(summary))
    wall = time.perf_counter() - started
    if args.finished_only:
        # the runs ran earlier, one at a time per model: their seconds add up to that model's run time
        wall = max(float(ev.runs["seconds"].sum()) for ev in frames)
        done = {m: dict(ev.runs.group_by("variant", maintain_order=True).len().iter_rows())
                for m, ev in zip(models, frames, strict=True)}
        print(f"\nfinished runs only, of {len(suite)} tasks x {args.repeats} repeats: {done}; "
              f"the longest model's runs took {wall / 60:.1f} min")
    print(f"\n{sum(ev.runs.height for ev in frames)} runs, {len(suite)} tasks x {len(variants)} variants x "
          f"{args.repeats} repeats x {len(models)} models, wall time {wall / 60:.1f} min")
    if args.json:
        pairs = pl.concat([paired_actions(ev.runs) for ev in frames], how="diagonal")
        args.json.write_text(json.dumps({"summary": summary.to_dicts(), "pairs": pairs.to_dicts(),
                                         "runs": pl.concat([ev.runs for ev in frames]).drop("trace").to_dicts(),
                                         "args": {k: str(v) for k, v in vars(args).items()},
                                         # finished-only: the runs' own seconds, not this command's time
                                         ("run_s" if args.finished_only else "wall_s"): round(wall, 1)},
                                        indent=1, default=str))


if __name__ == "__main__":
    main()
