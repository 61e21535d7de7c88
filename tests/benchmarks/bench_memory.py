"""Memory store benchmark: the store side by side with a bare usearch index and an exact numpy
scan, in the same run, on structured vectors (low rank plus noise: on uniform random vectors
every HNSW index's recall collapses).

    python tests/benchmarks/bench_memory.py --sizes 10000,100000

Reports, per size: semantic search p50/p95 at k=15 (store, bare usearch, numpy exact) and
their ratios; recall@10 against exact; the whole pipeline with disable_ai; insert throughput
with dedup on against bare usearch add (same chunks); open time (saved index) and rebuild
time; peak memory of a process that opens the store against one that loads the bare index.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from memfit_jupyter.memory import MemoryStore  # noqa: E402

DIM = 384
RANK = 32
CHUNK = 1000
QUERIES = 200


def structured(n: int, rng: np.random.Generator, basis: np.ndarray) -> np.ndarray:
    z = rng.standard_normal((n, RANK)).astype(np.float32)
    x = z @ basis + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def pct(times: list[float]) -> tuple[float, float]:
    a = np.array(times) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def timed(fn, items) -> list[float]:
    out = []
    for it in items:
        t = time.perf_counter()
        fn(it)
        out.append(time.perf_counter() - t)
    return out


def child_open(path: str, kind: str) -> dict:
    code = f"""
import json, resource, time, warnings, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
t = time.perf_counter()
if {kind!r} == "store":
    from memfit_jupyter.memory import MemoryStore
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = MemoryStore({path!r}); n = len(s); rebuilt = bool(w)
else:
    from usearch.index import Index
    s = Index(ndim={DIM}, metric="ip", dtype="f32"); s.load({path!r}); n = len(s); rebuilt = False
print(json.dumps({{"open_s": time.perf_counter() - t, "n": n, "rebuilt": rebuilt,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench(n: int, workdir: Path, expansion_search: int) -> dict:
    from usearch.index import Index

    rng = np.random.default_rng(7)
    basis = rng.standard_normal((RANK, DIM)).astype(np.float32)
    data = structured(n, rng, basis)
    queries = structured(QUERIES, rng, basis)
    words = [f"w{i}" for i in range(20_000)]
    rnd = random.Random(7)
    texts = [" ".join(rnd.sample(words, 12)) for _ in range(n)]
    tag_vocab = [f"t{i}" for i in range(5_000)]
    items = [{"content": texts[i], "tags": rnd.sample(tag_vocab, 2)} for i in range(n)]
    opts = {"connectivity": 16, "expansion_add": 128, "expansion_search": expansion_search}
    r: dict = {"n": n, **opts}

    # --- bare usearch: add in the same chunks as the store
    bare = Index(ndim=DIM, metric="ip", dtype="f32", **opts)
    t = time.perf_counter()
    for s in range(0, n, CHUNK):
        bare.add(np.arange(s + 1, min(n, s + CHUNK) + 1, dtype=np.uint64), data[s : s + CHUNK], threads=0)
    r["bare_add_per_s"] = n / (time.perf_counter() - t)

    # --- the store: add_many with dedup on (2-of-3 against the 10 nearest and tag sharers)
    path = workdir / f"store{n}"
    shutil.rmtree(path, ignore_errors=True)
    store = MemoryStore(path, exact_below=10_000, **opts)
    t = time.perf_counter()
    added = 0
    for s in range(0, n, CHUNK):
        ids = store.add_many(items[s : s + CHUNK], vectors=data[s : s + CHUNK])
        added += sum(1 for i in ids if i)
    r["store_add_dedup_per_s"] = n / (time.perf_counter() - t)
    r["store_added"] = added
    r["insert_ratio_vs_bare"] = r["store_add_dedup_per_s"] / r["bare_add_per_s"]

    # --- exact truth
    exact_top = [np.argsort(-(data @ q))[:10] + 1 for q in queries]

    def exact(q):
        sims = data @ q
        top = np.argpartition(-sims, 15)[:15]
        return top[np.argsort(-sims[top])]

    bare_t = timed(lambda q: bare.search(q, 15), queries)
    exact_t = timed(exact, queries)
    store_t = timed(lambda q: store.search_by_semantics(q, 15), queries)
    r["bare_p50_ms"], r["bare_p95_ms"] = pct(bare_t)
    r["exact_p50_ms"], r["exact_p95_ms"] = pct(exact_t)
    r["store_p50_ms"], r["store_p95_ms"] = pct(store_t)
    r["store_vs_bare_p50"] = r["store_p50_ms"] / r["bare_p50_ms"]
    r["store_vs_exact_p50"] = r["store_p50_ms"] / r["exact_p50_ms"]

    # key of row i is i + 1 in both the bare index and the store (no duplicates among random vectors)
    def recall(found_keys):
        return float(np.mean([len(set(map(int, f[:10])) & set(map(int, e))) / 10
                              for f, e in zip(found_keys, exact_top, strict=True)]))

    r["bare_recall@10"] = recall([bare.search(q, 10).keys for q in queries])
    key_of = dict(store._conn.execute("SELECT id, key FROM memories"))
    r["store_recall@10"] = recall([[key_of[e.id] for e, _ in store.search_by_semantics(q, 10)] for q in queries])

    # --- the whole pipeline, no model calls (tag step skipped), hybrid ranking
    qtexts = [" ".join(rnd.sample(words, 4)) for _ in range(QUERIES)]
    pipe_t = timed(lambda q: store.search(q, k=15, disable_ai=True), qtexts)
    r["pipeline_p50_ms"], r["pipeline_p95_ms"] = pct(pipe_t)
    r["pipeline_vs_bare_p50"] = r["pipeline_p50_ms"] / r["bare_p50_ms"]
    seed_t = timed(lambda q: store.search(q, k=15, ranking="seed"), qtexts)
    r["pipeline_seed_p50_ms"], _ = pct(seed_t)

    # --- open (saved index) and rebuild; peak memory against the bare index loaded alone
    store.close()
    bare_path = workdir / f"bare{n}.usearch"
    bare.save(str(bare_path))
    opened = child_open(str(path), "store")
    bare_open = child_open(str(bare_path), "bare")
    r["open_s"], r["open_rebuilt"], r["open_maxrss_mb"] = opened["open_s"], opened["rebuilt"], opened["maxrss_mb"]
    r["bare_load_s"], r["bare_load_maxrss_mb"] = bare_open["open_s"], bare_open["maxrss_mb"]
    r["open_vs_bare_load"] = r["open_s"] / max(r["bare_load_s"], 1e-9)
    r["maxrss_vs_bare"] = r["open_maxrss_mb"] / r["bare_load_maxrss_mb"]
    (path / "index.usearch").unlink()
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        MemoryStore(path).close()
    r["rebuild_s"] = time.perf_counter() - t
    r["process_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--expansion-search", type=int, default=64)
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--workdir", default=None)
    args = p.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="memfit-bench-"))
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        r = bench(n, workdir, args.expansion_search)
        results.append(r)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    main()
