"""Spin detection on real agents' trajectories: memfit's detectors side by side with the
first-built repetition rules and with OpenHands' StuckDetector re-implemented (``openhands_stuck.py``).

    python tests/benchmarks/spin_eval.py extract DIR...   # once: convert the fetched runs
    python tests/benchmarks/spin_eval.py run [--split dev|test|all] [--write]
    python tests/benchmarks/spin_eval.py check [--n 20] [--seed 0]   # cases to check by hand
    python tests/benchmarks/spin_eval.py stopping [--write]   # what ending runs early saves and costs

Data (fetched, never committed, never downloaded by the tests): 1,045 SWE-bench Verified runs
of three models in three formats, with their resolved flags; ``spin_data.py`` says where
they come from and gives the exact fetch command.  Every run is converted with
``load_trajectory`` and fed step by step through ``analyze`` (no judge: layer 2 confirms
everything layer 1 finds, the bound under which the most runs are ended).

Labels come from the scripted rule in ``spin_labels.py``.  Healthy runs are resolved runs
with no labelled loop.  Measured per system and per detector:

- healthy runs warned: a healthy run with at least one confirmed finding (a warning injected);
- healthy runs ended: a healthy run where the detectors would have ended it with spin_exit;
- loops caught inside: a labelled loop with a confirmed finding at a step from its start to
  its end; also for the edit/rerun/same-output loops alone; the median number of steps from
  the loop's start to the first finding inside it;
- precision: the share of steps with a confirmed finding that lie inside a labelled loop.

The runs are split by a hash of the instance name into ``dev`` (the rules were tuned on it)
and ``test`` (looked at only to report); ``--split all`` reports both together.
``--write`` stores the tables in ``notebooks/spin_eval.json``, which real_trajectories.ipynb shows.

``stopping`` (``spin_stopping.py``): per detector setting, the steps and tokens that ending
failed runs where a live run would have ended saves, against the resolved runs it would
have ended, as a curve over thresholds, and how much more often warnings fall on failed
runs than on resolved ones; per source and over all runs.  ``--write`` stores it in
``notebooks/spin_stopping.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import openhands_stuck  # noqa: E402
import spin_data  # noqa: E402
import spin_labels  # noqa: E402
import spin_stopping  # noqa: E402

from memfit_jupyter import analyze  # noqa: E402
from memfit_jupyter.study.analysis import records_of  # noqa: E402

RESULTS = Path(__file__).resolve().parents[2] / "notebooks" / "spin_eval.json"  # the notebook shows it
STOPPING = RESULTS.with_name("spin_stopping.json")
SYSTEMS = {
    # spin_rules="progress" (the default), with the exit after the seed's 3 warnings (off by
    # default since this evaluation and spin_eval.py stopping measured what it costs): "ended" counts it
    "memfit": dict(spin_stopping.SEED_EXIT),
    "memfit repetition rules": {"spin_rules": "repetition", **spin_stopping.SEED_EXIT},
}


def split_of(instance: str) -> str:
    return "dev" if int(hashlib.sha1(instance.encode()).hexdigest(), 16) % 2 == 0 else "test"


def evaluate_run(run: dict[str, Any]) -> dict[str, Any]:
    """Labels and every system's findings for one run, as step indices."""
    trace = run["trace"]
    records = records_of(trace)
    index = {r.iteration: i for i, r in enumerate(records)}
    out: dict[str, Any] = {"id": run["id"], "source": run["source"], "resolved": run["resolved"],
                           "steps": len(records), "split": split_of(run["instance"]),
                           "loops": [loop.to_dict() for loop in spin_labels.label(records)], "systems": {}}
    for name, settings in SYSTEMS.items():
        analysed = analyze(trace, **settings)["analysis"]
        by_detector: dict[str, list[int]] = defaultdict(list)
        warned: list[int] = []
        for f in analysed["findings"]:
            if f["confirmed"] and f["iteration"] in index:
                i = index[f["iteration"]]
                by_detector[f["detector"]].append(i)
                warned.append(i)
        exit_at = analysed["spin_exit"]["iteration"] if analysed["spin_exit"] else None
        out["systems"][name] = {"warned": sorted(set(warned)), "detectors": dict(by_detector),
                                "exit": index.get(exit_at) if exit_at is not None else None}
    stuck = openhands_stuck.first_stuck(trace)
    at = index.get(stuck[0]) if stuck else None
    out["systems"]["OpenHands StuckDetector"] = {
        "warned": [at] if at is not None else [], "exit": at,
        "detectors": {f"openhands:{stuck[1]}": [at]} if at is not None else {}}
    return out


def _inside(steps: list[int], loop: dict) -> int | None:
    inside = [s for s in steps if loop["start"] <= s <= loop["end"]]
    return min(inside) - loop["start"] if inside else None


def _pct(n: int, d: int) -> float | None:
    return round(100.0 * n / d, 1) if d else None


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    healthy = [r for r in results if r["resolved"] and not r["loops"]]
    loops = [(r, loop) for r in results for loop in r["loops"]]
    reruns = [(r, loop) for r, loop in loops if loop["kind"] == "rerun"]
    table = {}
    names = list(results[0]["systems"]) if results else []
    for name in names:
        warned = sum(1 for r in healthy if r["systems"][name]["warned"])
        ended = sum(1 for r in healthy if r["systems"][name]["exit"] is not None)
        delays = [d for r, loop in loops if (d := _inside(r["systems"][name]["warned"], loop)) is not None]
        rerun_caught = sum(1 for r, loop in reruns if _inside(r["systems"][name]["warned"], loop) is not None)
        steps = [(r, s) for r in results for s in r["systems"][name]["warned"]]
        in_loop = sum(1 for r, s in steps if any(lp["start"] <= s <= lp["end"] for lp in r["loops"]))
        table[name] = {
            "healthy_warned_pct": _pct(warned, len(healthy)), "healthy_ended_pct": _pct(ended, len(healthy)),
            "loops_caught_pct": _pct(len(delays), len(loops)),
            "rerun_loops_caught_pct": _pct(rerun_caught, len(reruns)),
            "median_steps_after_start": statistics.median(delays) if delays else None,
            "precision_pct": _pct(in_loop, len(steps)), "warning_steps": len(steps),
        }
    detectors: dict[str, dict[str, Any]] = {}
    for name in names:
        for det in sorted({d for r in results for d in r["systems"][name]["detectors"]}):
            row_steps = [(r, s) for r in results for s in r["systems"][name]["detectors"].get(det, [])]
            caught = sum(1 for r, loop in loops
                         if _inside(r["systems"][name]["detectors"].get(det, []), loop) is not None)
            detectors[f"{name} / {det}"] = {
                "firings": len(row_steps),
                "precision_pct": _pct(sum(1 for r, s in row_steps
                                          if any(lp["start"] <= s <= lp["end"] for lp in r["loops"])),
                                      len(row_steps)),
                "loops_caught_pct": _pct(caught, len(loops)),
                "healthy_runs_fired_pct": _pct(sum(1 for r in healthy
                                                   if r["systems"][name]["detectors"].get(det)), len(healthy)),
            }
    kinds = Counter(loop["kind"] for _, loop in loops)
    return {"runs": len(results), "healthy_runs": len(healthy), "failed_runs": sum(not r["resolved"] for r in results),
            "labelled_loops": len(loops), "loops_by_kind": dict(kinds),
            "runs_by_source": dict(Counter(r["source"] for r in results)), "systems": table,
            "detectors": detectors}


def print_table(summary: dict[str, Any], title: str) -> None:
    print(f"\n## {title}: {summary['runs']} runs ({summary['failed_runs']} failed), "
          f"{summary['healthy_runs']} healthy, {summary['labelled_loops']} labelled loops {summary['loops_by_kind']}")
    print("| system | healthy warned % | healthy ended % | loops caught % | rerun loops caught % "
          "| median steps after start | precision % | warning steps |")
    print("|---|---|---|---|---|---|---|---|")
    for name, row in summary["systems"].items():
        print(f"| {name} | {row['healthy_warned_pct']} | {row['healthy_ended_pct']} | {row['loops_caught_pct']} | "
              f"{row['rerun_loops_caught_pct']} | {row['median_steps_after_start']} | {row['precision_pct']} | "
              f"{row['warning_steps']} |")
    print("\n| detector | firings | precision % | loops caught % | healthy runs fired % |")
    print("|---|---|---|---|---|")
    for name, row in summary["detectors"].items():
        print(f"| {name} | {row['firings']} | {row['precision_pct']} | {row['loops_caught_pct']} | "
              f"{row['healthy_runs_fired_pct']} |")


def run(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    runs = spin_data.load_runs()
    results = []
    for r in runs:
        if args.split != "all" and split_of(r["instance"]) != args.split:
            continue
        results.append(evaluate_run(r))
    elapsed = time.perf_counter() - t0
    out = {"split": args.split, "seconds": round(elapsed, 1), "sources": spin_data.SOURCES,
           "all": summarise(results)}
    for split in ("dev", "test"):
        part = [r for r in results if r["split"] == split]
        if part and args.split == "all":
            out[split] = summarise(part)
    print_table(out["all"], f"split {args.split}")
    for split in ("dev", "test"):
        if split in out:
            print_table(out[split], f"split {split}")
    print(f"\n{len(results)} runs in {elapsed:.0f} s")
    if args.write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {RESULTS}")
    if args.dump:
        Path(args.dump).write_text(json.dumps(results))


def check(args: argparse.Namespace) -> None:
    """Print cases to check the label rule by hand, chosen at random: half labelled loops (is each
    one?), a quarter unlabelled runs where memfit warned (a loop the rule missed, or a false
    alarm?), a quarter failed runs with no label (a loop the rule missed?)."""
    rng = random.Random(args.seed)
    runs = {r["id"]: r for r in spin_data.load_runs()}
    results = [evaluate_run(r) for r in runs.values()]
    loops = [(r, loop) for r in results for loop in r["loops"]]
    fired = [r for r in results if not r["loops"] and r["systems"]["memfit"]["warned"]]
    unlabelled = [r for r in results if not r["loops"] and not r["resolved"]]
    half, quarter = args.n // 2, args.n // 4
    cases = (rng.sample(loops, min(half, len(loops)))  # is each labelled loop a loop?
             + [(r, None) for r in rng.sample(fired, min(quarter, len(fired)))]  # memfit fired, no label
             + [(r, None) for r in rng.sample(unlabelled, min(args.n - half - quarter, len(unlabelled)))])
    for n, (r, loop) in enumerate(cases, 1):
        records = records_of(runs[r["id"]]["trace"])
        lo, hi = (loop["start"] - 3, loop["end"] + 2) if loop else (0, len(records))
        fired = {k: v["warned"] for k, v in r["systems"].items()}
        print(f"\n### case {n}: {r['id']} resolved={r['resolved']} label={loop} fired={fired}")
        for i in range(max(0, lo), min(len(records), hi)):
            x = records[i]
            cmd = x.params.get("command") if isinstance(x.params.get("command"), str) else json.dumps(x.params)
            print(f"  {i:3d} {x.action_type:8s} ok={int(x.ok)} {cmd[:120]!r}\n        -> {x.output.strip()[-200:]!r}")


def stopping(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    runs = spin_data.load_runs()
    curves = spin_stopping.curve(runs, by="source")
    out: dict[str, Any] = {"sources": spin_data.SOURCES, "all": curves.pop("all"), "by_source": curves}
    spin_stopping.print_curve(out["all"], f"all {len(runs)} runs")
    for source, points in sorted(curves.items()):
        spin_stopping.print_curve(points, f"{source}: {points[0]['failed_runs'] + points[0]['resolved_runs']} runs")
    out["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"\n{len(runs)} runs in {out['seconds']:.0f} s")
    if args.write:
        STOPPING.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {STOPPING}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract")
    e.add_argument("repos", nargs="+", type=Path)
    r = sub.add_parser("run")
    r.add_argument("--split", choices=("dev", "test", "all"), default="all")
    r.add_argument("--write", action="store_true")
    r.add_argument("--dump", default="")
    c = sub.add_parser("check")
    c.add_argument("--n", type=int, default=20)
    c.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("stopping")
    s.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if args.cmd == "extract":
        spin_data.extract(args.repos)
    elif args.cmd == "run":
        run(args)
    elif args.cmd == "stopping":
        stopping(args)
    else:
        check(args)


if __name__ == "__main__":
    main()
