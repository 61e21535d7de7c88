"""Tokens and model calls of the default mechanisms against a bare loop, on healthy runs.

The bare loop is the same agent with reflection (and with it spin detection) off and no
memory: one action call per iteration.  The defaults add reflection, spin analysis and
memory triage.  ``seed`` is the defaults with the seed's choices where the lean ones
replaced them: triage after every iteration in the seed's format and every reflection
cached in the system prompt.  All run the same scripted scenario in the same process; the
ratio of their tokens to the bare loop's is the price of the mechanisms on a run that
needed none of them (target <= 1.2x for the defaults).

Per purpose, the calls and tokens show where the tokens go.  ``prefix`` is the share of
the action calls' prompt tokens that repeat the previous action call's prompt from its
start: what a provider's prompt cache could serve (providers also need a minimum length,
1,024 tokens at OpenAI, which the short scripted prompts do not always reach).

The catalogue's on/off outcomes (``--catalogue``) are run with the defaults as they are
now; every pair must still show what its scenario file expects.

With ``--local`` the same comparison runs on the local model (tests/local_model.py) on the
demo's task, ``--runs`` times each; there the server reports the prompt tokens it served
from its own cache (``cached``).

    python tests/benchmarks/bench_mechanisms.py [--scenarios demo,healthy-long] [--catalogue]
        [--local --runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VARIANTS = ("bare", "default", "seed")


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
    if variant == "seed":
        from memfit_jupyter.memory import MemoryConfig, TriageConfig
        from memfit_jupyter.reflection import ReflectionConfig

        return {"configs": [ReflectionConfig(cache_kinds="all", prompt_place="system"),
                            MemoryConfig(triage=TriageConfig(format="seed", every=1))]}
    return {}


#: The demo's file, for a real model (a scripted one places its scenario's files itself).
DEMO_FILES = {"data.txt": "12\n7\n23\n"}


def one(model, task, variant, **kwargs):
    from memfit_jupyter import Agent

    workdir = tempfile.mkdtemp(prefix="memfit-bench-")
    if not model.startswith("memfit/"):
        for name, text in DEMO_FILES.items():
            Path(workdir, name).write_text(text)
    agent = Agent(model=model, workdir=workdir, **settings_of(variant), **kwargs)
    run = agent.start(task)
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
    return {"tokens": trace["totals"]["tokens"]["total"], "calls": trace["totals"]["calls"],
            "status": run.status, "iterations": trace["totals"]["iterations"], "purposes": purposes,
            "prefix": prefix_share(log.sent), "cached": sum(c.get("cached_tokens", 0) for c in calls)}


def report(rows) -> None:
    print(f"{'run':<14} {'variant':<8} {'tokens':>7} {'ratio':>6} {'calls':>5} {'prefix':>6} {'cached':>6}  "
          f"status  calls/tokens by purpose")
    for name, results in rows:
        base = results["bare"]["tokens"]
        for variant, r in results.items():
            ratio = r["tokens"] / base if base else float("nan")
            by = ", ".join(f"{p} {n}/{t}" for p, (n, t) in sorted(r["purposes"].items()))
            print(f"{name:<14} {variant:<8} {r['tokens']:>7} {ratio:>5.2f}x {r['calls']:>5} {r['prefix']:>6.0%} "
                  f"{r['cached']:>6}  {r['status']:<7} {by}")


def catalogue_pairs() -> None:
    """Every mode's on/off pair with today's defaults: what it showed against what it expects."""
    from memfit_jupyter.catalogue import modes, run_pair

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
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    from memfit_jupyter.llm.scenarios import load_scenario

    rows = []
    for name in args.scenarios.split(","):
        task = load_scenario(name).task or "What is the total of the numbers in data.txt?"
        rows.append((name, {v: one(f"memfit/{name}", task, v) for v in VARIANTS}))
    if args.local:
        from local_model import LocalModel

        with LocalModel.start() as lm:
            for i in range(args.runs):
                task = "What is the total of the numbers in data.txt?"
                kw = {"api_base": lm.api_base, "structured": "schema", "max_iterations": 4}
                rows.append((f"local#{i + 1}", {v: one(lm.model, task, v, **kw) for v in VARIANTS}))
    report(rows)
    if args.catalogue:
        catalogue_pairs()


if __name__ == "__main__":
    main()
