"""Memory store benchmark: the store side by side with a bare usearch index and an exact numpy
scan, in the same run, on structured vectors (low rank plus noise: on uniform random vectors
every HNSW index's recall collapses).

    python tests/benchmarks/bench_memory.py --sizes 10000,100000
    python tests/benchmarks/bench_memory.py --sizes 100000 --questions 1   # every memory has a question
    python tests/benchmarks/bench_memory.py --sizes 1000000 --connectivity 16 --expansion-add 64 --no-rebuild
    python tests/benchmarks/bench_memory.py --sizes 1000000 --search-only --connectivity 16 --expansion-add 64
        --max-build-s 780   # 1M: the bare build alone takes ~11 min here

Reports, per size: semantic search p50/p95 at k=15 (store, bare usearch, numpy exact) and
their ratios, and the store's search against a bare search of the store's own graph;
recall@10 against exact; the whole pipeline with disable_ai; insert throughput with dedup on
against bare usearch add (same chunks, in turns); open time (saved index) and rebuild
time; peak memory (VmHWM) of a process that opens the store and searches once against one that
loads the bare index and searches once.  The HNSW parameters default to the store's own.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
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
QUERIES = 300  # 12 blocks of 25: two full cycles of the 6 orders of 3 timed functions


def structured(n: int, rng: np.random.Generator, basis: np.ndarray) -> np.ndarray:
    z = rng.standard_normal((n, RANK)).astype(np.float32)
    x = z @ basis + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def pct(times: list[float]) -> tuple[float, float]:
    a = np.array(times) * 1000
    return float(np.percentile(a, 50)), float(np.percentile(a, 95))


def exact_top15(data: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The exact 15 nearest rows of ``data`` to ``q``: one matrix product, best first."""
    sims = data @ q
    top = np.argpartition(-sims, 15)[:15]
    return top[np.argsort(-sims[top])]


def timed(fn, items) -> list[float]:
    out = []
    for it in items:
        t = time.perf_counter()
        fn(it)
        out.append(time.perf_counter() - t)
    return out


def interleaved(fns, items, block: int = 25) -> list[list[float]]:
    """Time each function on each item, in blocks that take turns, so that a change in the
    machine's load hits every side alike.  Blocks, not single items: an exact scan between two
    graph searches would evict the graph from the CPU caches.  The order of the blocks cycles
    through every permutation, so each function follows each other one equally often (a plain
    rotation keeps the cyclic order, and the function after the exact scan always paid for the
    caches it emptied)."""
    out: list[list[float]] = [[] for _ in fns]
    orders = list(itertools.permutations(range(len(fns))))
    for n, start in enumerate(range(0, len(items), block)):
        for k in orders[n % len(orders)]:
            out[k] += timed(fns[k], items[start : start + block])
    return out


def child_open(path: str, kind: str, opts: dict) -> dict:
    """Open the store (or load the bare index) in a fresh process and run one search there.

    Peak memory is the child's own VmHWM: ``ru_maxrss`` of a child started from this
    large process reports the parent's high-water mark (both sides then read the same)."""
    code = f"""
import json, time, warnings, sys
import numpy as np
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
t = time.perf_counter()
if {kind!r} == "store":
    from memfit_jupyter.memory import MemoryStore
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = MemoryStore({path!r}, **{opts!r}); rebuilt = bool(w)
    opened = time.perf_counter() - t
    n = len(s)  # counting the rows is not part of opening
    s.search_by_semantics(np.ones({DIM}, dtype=np.float32) / {DIM ** 0.5}, 15)
else:
    from usearch.index import Index
    s = Index(ndim={DIM}, metric="ip", dtype="f32", **{opts!r}); s.load({path!r}); n = len(s); rebuilt = False
    opened = time.perf_counter() - t
    s.search(np.ones({DIM}, dtype=np.float32) / {DIM ** 0.5}, 15)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"open_s": opened, "n": n, "rebuilt": rebuilt, "maxrss_mb": hwm / 1024}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench(n: int, workdir: Path, opts: dict, questions: float = 0.0, rebuild: bool = True) -> dict:
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
    for i in rnd.sample(range(n), int(n * questions)) if questions else ():  # as triage writes them
        items[i]["questions"] = [f"what about {' '.join(rnd.sample(words, 3))}?"]
    r: dict = {"n": n, "with_questions": questions, **opts}

    # --- bare usearch add against the store's add_many with dedup on (2-of-3 against the 10
    # nearest and tag sharers), in the same chunks, taking turns chunk by chunk (rotating who goes
    # first) so that a change in the machine's load hits both sides alike
    bare = Index(ndim=DIM, metric="ip", dtype="f32", **opts)
    path = workdir / f"store{n}"
    shutil.rmtree(path, ignore_errors=True)
    store = MemoryStore(path, **opts)  # default exact_below: 10k and more use the graph
    added = 0

    def add_bare(s):
        bare.add(np.arange(s + 1, min(n, s + CHUNK) + 1, dtype=np.uint64), data[s : s + CHUNK], threads=0)

    def add_store(s):
        nonlocal added
        added += sum(1 for i in store.add_many(items[s : s + CHUNK], vectors=data[s : s + CHUNK]) if i)

    bare_add_t, store_add_t = interleaved([add_bare, add_store], list(range(0, n, CHUNK)), block=1)
    r["bare_add_per_s"] = n / sum(bare_add_t)
    r["store_add_dedup_per_s"] = n / sum(store_add_t)
    r["store_added"] = added
    r["insert_ratio_vs_bare"] = r["store_add_dedup_per_s"] / r["bare_add_per_s"]

    # --- exact truth
    exact_top = [np.argsort(-(data @ q))[:10] + 1 for q in queries]

    bare_t, exact_t, store_t = interleaved(
        [lambda q: bare.search(q, 15), lambda q: exact_top15(data, q), lambda q: store.search_by_semantics(q, 15)], queries)
    r["bare_p50_ms"], r["bare_p95_ms"] = pct(bare_t)
    r["exact_p50_ms"], r["exact_p95_ms"] = pct(exact_t)
    r["store_p50_ms"], r["store_p95_ms"] = pct(store_t)
    r["store_vs_bare_p50"] = r["store_p50_ms"] / r["bare_p50_ms"]
    r["store_vs_exact_p50"] = r["store_p50_ms"] / r["exact_p50_ms"]
    # Two HNSW graphs built from the same vectors search at different speeds (the insertion order
    # of a threaded add varies; 12% apart in one run), so the ratio above mixes that in.  What the
    # store itself adds to a bare usearch search: the same comparison on the store's own graph.
    own_t, store2_t = interleaved([lambda q: store._vectors.index.search(q, 15),
                                   lambda q: store.search_by_semantics(q, 15)], queries)
    r["own_index_p50_ms"], r["store_vs_own_index_p50"] = pct(own_t)[0], pct(store2_t)[0] / pct(own_t)[0]

    # key of row i is i + 1 in both the bare index and the store (no duplicates among random vectors)
    def recall(found_keys):
        return float(np.mean([len(set(map(int, f[:10])) & set(map(int, e))) / 10
                              for f, e in zip(found_keys, exact_top, strict=True)]))

    r["bare_recall@10"] = recall([bare.search(q, 10).keys for q in queries])
    key_of = dict(store._db.conn.execute("SELECT id, key FROM memories"))
    r["store_recall@10"] = recall([[key_of[e.id] for e, _ in store.search_by_semantics(q, 10)] for q in queries])

    # --- the whole pipeline, no model calls (tag step skipped), hybrid ranking
    qtexts = [" ".join(rnd.sample(words, 4)) for _ in range(QUERIES)]
    pairs = list(zip(qtexts, queries, strict=True))
    pipe_t, bare2_t = interleaved([lambda p: store.search(p[0], k=15, disable_ai=True),
                                   lambda p: bare.search(p[1], 15)], pairs)
    r["pipeline_p50_ms"], r["pipeline_p95_ms"] = pct(pipe_t)
    r["pipeline_vs_bare_p50"] = r["pipeline_p50_ms"] / pct(bare2_t)[0]
    seed_t = timed(lambda q: store.search(q, k=15, ranking="weighted"), qtexts)
    r["pipeline_weighted_p50_ms"], _ = pct(seed_t)

    # --- open (saved index) and rebuild; peak memory against the bare index loaded alone
    store.close()
    bare_path = workdir / f"bare{n}.usearch"
    bare.save(str(bare_path))
    opened = child_open(str(path), "store", opts)
    bare_open = child_open(str(bare_path), "bare", opts)
    r["open_s"], r["open_rebuilt"], r["open_maxrss_mb"] = opened["open_s"], opened["rebuilt"], opened["maxrss_mb"]
    r["bare_load_s"], r["bare_load_maxrss_mb"] = bare_open["open_s"], bare_open["maxrss_mb"]
    r["open_vs_bare_load"] = r["open_s"] / max(r["bare_load_s"], 1e-9)
    r["maxrss_vs_bare"] = r["open_maxrss_mb"] / r["bare_load_maxrss_mb"]
    if not rebuild:
        r["process_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return r
    (path / "index.usearch").unlink()
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        MemoryStore(path, **opts).close()
    r["rebuild_s"] = time.perf_counter() - t
    r["process_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return r


def bench_search_only(n: int, opts: dict, max_build_s: float) -> dict:
    """Search alone at a size where building the store is too slow here: exact numpy against a
    bare usearch index (the build stops, and says so, after ``max_build_s``)."""
    from usearch.index import Index

    rng = np.random.default_rng(7)
    basis = rng.standard_normal((RANK, DIM)).astype(np.float32)
    data = np.empty((n, DIM), dtype=np.float32)
    for s in range(0, n, 100_000):  # in slices: the temporaries of one call would triple the memory
        data[s : s + 100_000] = structured(min(100_000, n - s), rng, basis)
    queries = structured(QUERIES, rng, basis)
    r: dict = {"n": n, "mode": "search-only", **opts}

    exact_t = timed(lambda q: exact_top15(data, q), queries[:50])
    r["exact_p50_ms"], r["exact_p95_ms"] = pct(exact_t)
    exact_top = [np.argsort(-(data @ q))[:10] + 1 for q in queries[:50]]
    bare = Index(ndim=DIM, metric="ip", dtype="f32", **opts)
    t = time.perf_counter()
    for s in range(0, n, 10_000):
        bare.add(np.arange(s + 1, min(n, s + 10_000) + 1, dtype=np.uint64), data[s : s + 10_000], threads=0)
        if time.perf_counter() - t > max_build_s:
            break
    r["bare_built"] = len(bare)
    r["bare_build_s"] = time.perf_counter() - t
    r["bare_add_per_s"] = len(bare) / r["bare_build_s"]
    r["data_mb"] = data.nbytes / 2**20
    r["bare_index_mb"] = bare.memory_usage / 2**20
    r["process_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if len(bare) < n:
        r["bare"] = f"not built: {len(bare)} of {n} vectors after {max_build_s:.0f} s"
        return r
    for mult in (1, 2, 4):  # the beam is free to change after the build: show what it buys
        beam = opts["expansion_search"] * mult
        bare.expansion_search = beam
        bare_t = timed(lambda q: bare.search(q, 15), queries)
        r[f"efs{beam}_bare_p50_ms"], r[f"efs{beam}_bare_p95_ms"] = pct(bare_t)
        r[f"efs{beam}_bare_vs_exact_p50"] = r[f"efs{beam}_bare_p50_ms"] / r["exact_p50_ms"]
        r[f"efs{beam}_bare_recall@10"] = float(np.mean(
            [len(set(map(int, bare.search(q, 10).keys)) & set(map(int, e))) / 10
             for q, e in zip(queries[:50], exact_top, strict=True)]))
    return r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,100000")
    defaults = inspect.signature(MemoryStore.__init__).parameters  # __new__ takes *args, **kwargs
    for name in ("connectivity", "expansion_add", "expansion_search"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=defaults[name].default,
                       help="HNSW parameter, the same for the store and the bare index (default: the store's)")
    p.add_argument("--search-only", action="store_true",
                   help="exact numpy against a bare usearch index only (for 1M: the store build is too slow)")
    p.add_argument("--max-build-s", type=float, default=600.0, help="--search-only: give up the build after this")
    p.add_argument("--questions", type=float, default=0.0,
                   help="share of memories that carry a potential question (their dedup needs the vector search)")
    p.add_argument("--no-rebuild", action="store_true", help="skip timing a rebuild from SQLite (slow at 1M)")
    p.add_argument("--out", default=None, help="also write the results as JSON here")
    p.add_argument("--workdir", default=None)
    args = p.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="memfit-bench-"))
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        opts = {"connectivity": args.connectivity, "expansion_add": args.expansion_add,
                "expansion_search": args.expansion_search}
        r = bench_search_only(n, opts, args.max_build_s) if args.search_only else bench(
            n, workdir, opts, args.questions, not args.no_rebuild)
        results.append(r)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    os._exit(0)


if __name__ == "__main__":
    main()
