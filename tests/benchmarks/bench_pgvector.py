"""PostgreSQL store search at 100k memories against a bare pgvector HNSW query, side by side.

Both ask the same server, the same table and the same HNSW index, with the same beam
(``hnsw.ef_search``, for each beam given), so their recall is equal; recall@10 is measured
against the exact nearest neighbours (a scan with index scans off).  Timed, in alternating turns:

- bare: ``SELECT id FROM memories ORDER BY vector <#> q LIMIT 10`` with a query vector
  embedded beforehand (psycopg + pgvector, one statement);
- store, semantic: ``store.search(text, k=10, ranking="semantic")``: the whole pipeline
  (embedding the query, the HNSW query, reading the candidates' rows, ranking);
- store, hybrid (the default): the same plus the full-text search.

The memories are synthetic notes (a 5,000-word vocabulary, 1-3 of 60 tags), embedded by the
hashing embedder (384 dims); loading 100k takes a few minutes here.  The server is the test
suite's (tests/pg_server.py: ``MEMFIT_TEST_POSTGRES_URL`` or an embedded one).

    python tests/benchmarks/bench_pgvector.py [--size 100000] [--queries 200] [--ef-search 40,100,200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def corpus(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10)))
             for _ in range(5000)]
    tags = [f"topic{i}" for i in range(60)]
    return [{"content": " ".join(rng.choice(vocab) for _ in range(rng.randint(8, 20))),
             "tags": rng.sample(tags, rng.randint(1, 3))} for _ in range(n)]


def p50(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ef-search", default="40,100,200", help="beams to compare at, comma-separated")
    args = ap.parse_args()

    import numpy as np
    from pg_server import fresh_schema, postgres_url

    from memfit_jupyter import MemoryStore

    items = corpus(args.size)
    with postgres_url() as url:
        schema = fresh_schema()
        store = MemoryStore(url, schema=schema, dedup=False)
        conn = store._conn
        t0 = time.perf_counter()
        conn.execute(f"DROP INDEX {schema}.memories_hnsw")  # build the graph once, after the load
        for start in range(0, len(items), 2000):
            store.add_many(items[start:start + 2000])
        loaded = time.perf_counter() - t0
        t1 = time.perf_counter()
        conn.execute("SET maintenance_work_mem = '1GB'")
        store._create_hnsw()
        built = time.perf_counter() - t1
        print(f"{len(store)} memories: loaded in {loaded:.1f} s, HNSW built in {built:.1f} s")

        rng = random.Random(2)
        texts = [" ".join(rng.choice(items)["content"].split()[:6]) for _ in range(args.queries)]
        qvecs = store.embedder.embed(texts)
        table = f"{schema}.memories"

        def bare(q: np.ndarray, ef: int | None) -> list[str]:
            """One statement; with ``ef``, through the HNSW index (the planner may prefer a scan
            at 100k, so index scans are made the only choice, as the store does)."""
            sql = f"SELECT id FROM {table} ORDER BY vector <#> %s LIMIT 10"
            with conn.transaction():
                if ef is None:
                    conn.execute("SET LOCAL enable_indexscan = off")
                else:
                    conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                    conn.execute("SET LOCAL enable_seqscan = off")
                return [r[0] for r in conn.execute(sql, (q,))]

        exact = [set(bare(q, None)) for q in qvecs]

        def recall(found: list[list[str]]) -> float:
            return statistics.mean(len(set(f) & e) / len(e) for f, e in zip(found, exact, strict=True))

        for ef in [int(x) for x in str(args.ef_search).split(",")]:
            store.ef_search = ef
            for q in qvecs[:20]:  # warm the caches of both
                bare(q, ef)
                store.search(texts[0], k=10)
            times: dict[str, list[float]] = {"bare": [], "semantic": [], "hybrid": []}
            found: dict[str, list[list[str]]] = {"bare": [], "store": []}
            for text, q in zip(texts, qvecs, strict=True):
                t = time.perf_counter()
                found["bare"].append(bare(q, ef))
                times["bare"].append(time.perf_counter() - t)
                t = time.perf_counter()
                store.search(text, k=10, ranking="semantic")
                times["semantic"].append(time.perf_counter() - t)
                t = time.perf_counter()
                store.search(text, k=10)
                times["hybrid"].append(time.perf_counter() - t)
                found["store"].append([k for k, _ in store._nearest(q, 10, None)])
            ids = dict(conn.execute(f"SELECT key, id FROM {table} WHERE key = ANY(%s)",
                                    ([k for f in found["store"] for k in f],)).fetchall())
            base = p50(times["bare"])
            print(f"ef_search {ef}: recall@10 bare {recall(found['bare']):.3f}, store's semantic finds "
                  f"{recall([[ids[k] for k in f] for f in found['store']]):.3f}")
            print(f"  bare pgvector HNSW query        p50 {base:7.2f} ms")
            print(f"  store search, semantic ranking  p50 {p50(times['semantic']):7.2f} ms  = "
                  f"{p50(times['semantic']) / base:.2f}x bare (target <= 2x)")
            print(f"  store search, hybrid (default)  p50 {p50(times['hybrid']):7.2f} ms  = "
                  f"{p50(times['hybrid']) / base:.2f}x bare")
        store.drop()
        store.close()


if __name__ == "__main__":
    main()
