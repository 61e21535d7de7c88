"""Tokens and model calls of the default mechanisms against a bare loop, on healthy runs.

The bare loop is the same agent with reflection (and with it spin detection) off and no
memory: one action call per iteration.  The defaults add reflection, spin analysis and
memory triage.  ``first-built`` is the defaults with the first-built choices where the lean
ones replaced them: triage after every iteration on the Chinese-labelled input and every
reflection cached in the system prompt.  All run the same scripted scenario in the same process; the
ratio of their tokens to the bare loop's is the price of the mechanisms on a run that
needed none of them (target <= 1.2x for the defaults).

Per purpose, the calls and tokens show where the tokens go.  ``prefix`` is the share of
the action calls' prompt tokens that repeat the previous action call's prompt from its
start: what a provider's prompt cache could serve (providers also need a minimum length,
1,024 tokens at OpenAI, which the short scripted prompts do not always reach).

The catalogue's on/off outcomes (``--catalogue``) are run with the defaults as they are
now; every pair must still show what its scenario file expects.

With ``--local`` the same comparison runs on the local model (tests/local_model.py) on the
three tasks of bench_local_model.py (the demo's, a file-reading task, a task whose first
step fails), ``--runs`` times each, under ``schema`` with short limits (``--local-iterations``,
``--max-tokens``, ``--max-duration``) so a comparison takes minutes.  The server samples at
temperature 0, so the variants differ by what the mechanisms send, not by chance.  There
the server reports the prompt tokens it served from its own cache (``cached``), and a run
cut short by its time limit is marked: its tokens are a lower bound.

    python tests/benchmarks/bench_mechanisms.py [--scenarios demo,healthy-long] [--catalogue]
        [--local --runs 1 --local-iterations 2 --max-tokens 256 --max-duration 120]

Measured here (2 shared cores) with ``--scenarios demo --local``: scripted ``demo`` 1.19x
(bare 1,797 tokens in 3 calls, default 2,132 in 4).  On the local model, 2,043 / 8,273 /
12,010 tokens (bare / default / first-built, 5 / 15 / 18 calls over the three tasks), 4.05x and
5.88x: the model seldom solves a task, and on a failing step the defaults reflect and
triage, as they are meant to (demo: 2 reflections, 2,234 tokens, and 2 triages, 1,264).
The one run that finished at once (``fail-first``, 385 tokens bare) cost 2.04x: the
finish's triage (226 tokens) and the search of memory for a completed task (one
tag call, 101 tokens) are a fixed cost that a one-step run does not amortise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = ("bare", "default", "first-built")


class PromptLog:
    """A backend that passes every call on and keeps the messages each call sent."""

    def __init__(self, inner):
        self.inner = inner
        self.sent: list[tuple[str, list[dict]]] = []

    def complete(self, model, messages, **kwargs):
        self.sent.append((kwargs["metadata"].get("memfit_purpose", "action"), [dict(m) for m in messages]))
        return self.inner.complete(model, messages, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _text(messages: list[dict]) -> str:
    return "".join(f"\x00{m['role']}\x00{m.get('content') or ''}" for m in messages)


def prefix_share(sent: list[tuple[str, list[dict]]]) -> float:
    """The share of the action prompts' characters that repeat the previous action prompt's start."""
    from os.path import commonprefix

    prompts = [_text(m) for purpose, m in sent if purpose == "action"]
    total = sum(len(p) for p in prompts)
    reused = sum(len(commonprefix([a, b])) for a, b in zip(prompts, prompts[1:], strict=False))
    return reused / total if total else 0.0


def settings_of(variant: str) -> dict:
    if variant == "bare":
        return {"reflection": "none", "memory": False}
    if variant == "first-built":
        from memfit_jupyter.memory import MemoryConfig, TriageConfig
        from memfit_jupyter.reflection import ReflectionConfig

        return {"configs": [ReflectionConfig(cache_kinds="all", prompt_place="system"),
                            MemoryConfig(triage=TriageConfig(format="chinese", every=1))]}
    return {}


#: The demo's file, for a real model (a scripted one places its scenario's files itself).
DEMO_FILES = {"data.txt": "12\n7\n23\n"}


def one(model, task, variant, files=None, max_tokens=None, **kwargs):
    from memfit_jupyter import Agent

    workdir = tempfile.mkdtemp(prefix="memfit-bench-")
    if not model.startswith("memfit/"):
        for name, text in (DEMO_FILES if files is None else files).items():
            Path(workdir, name).write_text(text)
    agent = Agent(model=model, workdir=workdir, **settings_of(variant), **kwargs)
    run = agent.start(task)
    run.llm.max_output_tokens = max_tokens
    log = PromptLog(run.llm.backend)
    run.llm.backend = log
    run.run()
    trace = run.trace()
    calls = [e for e in trace["events"] if e["type"] == "model_call"]
    purposes: dict[str, list[int]] = {}
    for c in calls:
        p = purposes.setdefault(c["purpose"], [0, 0])
        p[0] += 1
        p[1] += c["prompt_tokens"] + c["completion_tokens"]
    timed_out = any(e["type"] == "guarantee" and e.get("violated") and e.get("limit") == "max_duration_seconds" for e in trace["events"])
    return {"tokens": trace["totals"]["tokens"]["total"], "calls": trace["totals"]["calls"],
            "status": run.status + ("*" if timed_out else ""), "iterations": trace["totals"]["iterations"], "purposes": purposes,
            "prefix": prefix_share(log.sent), "cached": sum(c.get("cached_tokens", 0) for c in calls)}


def report(rows) -> None:
    print(f"{'run':<20} {'variant':<11} {'tokens':>7} {'ratio':>6} {'calls':>5} {'prefix':>6} {'cached':>6}  "
          f"status  calls/tokens by purpose")
    for name, results in rows:
        base = results["bare"]["tokens"]
        for variant, r in results.items():
            ratio = r["tokens"] / base if base else float("nan")
            by = ", ".join(f"{p} {n}/{t}" for p, (n, t) in sorted(r["purposes"].items()))
            print(f"{name:<20} {variant:<11} {r['tokens']:>7} {ratio:>5.2f}x {r['calls']:>5} {r['prefix']:>6.0%} "
                  f"{r['cached']:>6}  {r['status']:<9} {by}")
    local = [results for name, results in rows if name.startswith("local")]
    if local:
        bare = sum(r["bare"]["tokens"] for r in local)
        for variant in VARIANTS:
            tokens = sum(r[variant]["tokens"] for r in local)
            calls = sum(r[variant]["calls"] for r in local)
            print(f"{'local, all runs':<20} {variant:<11} {tokens:>7} {tokens / bare if bare else float('nan'):>5.2f}x "
                  f"{calls:>5}")
    print("(* a run cut short by its time limit: its tokens are a lower bound)")


def catalogue_pairs() -> None:
    """Every mode's on/off pair with today's defaults: what it showed against what it expects."""
    from memfit_jupyter.study.catalogue import modes, run_pair

    root = tempfile.mkdtemp(prefix="memfit-bench-catalogue-")
    wrong = 0
    for m in modes():
        pair = run_pair(m.id, root)
        for side in ("on", "off"):
            problems = pair[side]["problems"]
            wrong += bool(problems)
            status = pair[side]["outcome"]["status"]
            print(f"{m.id:<28} {side:<3} {status:<10} {'as expected' if not problems else '; '.join(problems)}")
    print(f"catalogue: {len(modes())} modes, {wrong} side(s) differ from their scenario file")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="demo,healthy-long")
    ap.add_argument("--catalogue", action="store_true", help="also run every catalogue pair")
    ap.add_argument("--local", action="store_true", help="also on the local model (needs llama-server)")
    ap.add_argument("--runs", type=int, default=1, help="local: runs of each task per variant")
    ap.add_argument("--local-iterations", type=int, default=2, help="local: each run's max_iterations")
    ap.add_argument("--max-tokens", type=int, default=256, help="local: cap on every call's output tokens")
    ap.add_argument("--max-duration", type=float, default=120.0, help="local: each run's time limit, seconds")
    args = ap.parse_args()

    from memfit_jupyter.llm.scenarios import load_scenario

    rows = []
    for name in args.scenarios.split(","):
        task = load_scenario(name).task or "What is the total of the numbers in data.txt?"
        rows.append((name, {v: one(f"memfit/{name}", task, v) for v in VARIANTS}))
    if args.local:
        from bench_local_model import TASKS, TOOLS
        from local_model import LocalModel

        from memfit_jupyter.reliability.guarantees import ExecutionGuarantees

        with LocalModel.start(extra_args=("--temp", "0")) as lm:
            for i in range(args.runs):
                for name, (task, files) in TASKS.items():
                    kw = {"api_base": lm.api_base, "structured": "schema", "tools": TOOLS,
                          "max_iterations": args.local_iterations, "max_tokens": args.max_tokens, "files": files,
                          "guarantees": ExecutionGuarantees(max_duration_seconds=args.max_duration)}
                    rows.append((f"local {name}#{i + 1}", {v: one(lm.model, task, v, **kw) for v in VARIANTS}))
    report(rows)
    if args.catalogue:
        catalogue_pairs()


if __name__ == "__main__":
    main()
