"""The PostgreSQL store's write path: deciding a batch against the stored memories (the
2-of-3 verdicts of ``dedup``) and inserting what is new, in one transaction under the
store's advisory lock.

The lock makes writers decide one after another, and each decision sees every committed
memory: concurrent writers (kernels, sweep workers, people) lose nothing and store a
duplicate only once.  Readers never wait for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import pg_text
from .candidates import TAG_SCAN, tag_hits, tags_decide  # TAG_SCAN: as in the SQLite store
from .dedup import DedupConfig, Probe, non_repeated, norm_tags, probe_of
from .entity import MemoryEntity
from .pg_schema import array, lock, one

if TYPE_CHECKING:
    from .pg_types import Conn

#: The graph's beam when dedup looks for a new memory's near-duplicates: wider than a search's,
#: since a missed neighbour would be a duplicate stored.
DEDUP_EF_SEARCH = 100


def add_chunk(conn: Conn, schema: str, entities: list[MemoryEntity], vecs: np.ndarray,
              qvecs: list[np.ndarray | None], probes: list[Probe], dedup: DedupConfig,
              exact_below: int) -> list[int]:
    """Store the memories of this batch that repeat no stored one (nor an earlier one of the
    batch); their positions.  One transaction, all or nothing."""
    with conn.transaction():
        lock(conn, schema)
        kept = (non_repeated(probes, stored_candidates(conn, schema, probes, dedup, exact_below), dedup)
                if dedup.enabled else list(range(len(entities))))
        _insert(conn, schema, [entities[i] for i in kept], vecs[kept], [qvecs[i] for i in kept])
    return kept


def _insert(conn: Conn, schema: str, entities: list[MemoryEntity], vecs: np.ndarray,
            qvecs: list[np.ndarray | None]) -> None:
    if not entities:
        return
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {schema}.memories(id, content, tags, questions, created_at, c, o, r, e, p, a, t, "
            "vector, qvector) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING key",
            [(e.id, e.content, e.tags, e.potential_questions, e.created_at, e.c_score, e.o_score, e.r_score,
              e.e_score, e.p_score, e.a_score, e.t_score, v, q) for e, v, q in zip(entities, vecs, qvecs, strict=True)],
            returning=True)
        keys: list[int] = []
        while True:
            keys.append(one(cur.fetchone()))
            if not cur.nextset():
                break
        pg_text.write(cur, schema, [(k, e.content, e.tags, e.potential_questions)
                                    for k, e in zip(keys, entities, strict=True)])
        pairs = [(t, k) for k, e in zip(keys, entities, strict=True) for t in norm_tags(e.tags)]
        if pairs:
            cur.executemany(f"INSERT INTO {schema}.memory_tags(tag, key) VALUES (%s, %s) "
                            "ON CONFLICT DO NOTHING", pairs)


def stored_candidates(conn: Conn, schema: str, probes: list[Probe], cfg: DedupConfig,
                       exact_below: int) -> list[list[Probe]]:
    """For each probe, the stored memories it could repeat: those sharing enough tags
    (among the newest ``TAG_SCAN`` per tag) and its nearest neighbours by content at the
    content threshold (exact below ``exact_below`` memories, else by the graph with a beam
    of at least the candidates asked for).  Inside the write transaction."""
    x = conn.execute
    cand: list[set[int]] = [set() for _ in probes]
    tags = sorted({t for p in probes for t in p.tags})
    postings: dict[str, list[int]] = {}
    if tags:
        for tag, key in x(
                f"SELECT g.tag, k.key FROM unnest(%s::text[]) AS g(tag) CROSS JOIN LATERAL "
                f"(SELECT key FROM {schema}.memory_tags WHERE tag = g.tag ORDER BY key DESC LIMIT %s) k",
                (tags, TAG_SCAN)):
            postings.setdefault(tag, []).append(key)
    for i, p in enumerate(probes):
        if p.tags:
            cand[i].update(tag_hits(p, postings, cfg))
    search = [i for i, p in enumerate(probes) if not tags_decide(p, postings, cfg)]
    if search:
        if exact_below and one(x(f"SELECT count(*) < %s FROM {schema}.memories", (exact_below,)).fetchone()):
            x("SET LOCAL enable_indexscan = off")  # a small store: the exact neighbours
        else:  # the graph: at a few thousand rows the planner would rather scan (70 ms a probe here)
            x("SET LOCAL enable_seqscan = off")
            x(f"SET LOCAL hnsw.ef_search = {max(DEDUP_EF_SEARCH, cfg.candidates)}")
        thr = cfg.content_similarity_threshold - 1e-6 if cfg.min_matches > 1 else -2.0
        # Every probe's neighbours in one statement (a graph search per probe on the server).
        literals = ["[" + ",".join(f"{v:.7g}" for v in probes[i].vec.tolist()) + "]" for i in search]
        for n, key, sim in x(
                f"SELECT p.n, m.key, -(m.vector <#> p.v) FROM unnest(%s::vector[]) WITH ORDINALITY AS p(v, n) "
                f"CROSS JOIN LATERAL (SELECT key, vector FROM {schema}.memories "
                "ORDER BY vector <#> p.v LIMIT %s) m", (literals, cfg.candidates)):
            if sim >= thr:
                cand[search[n - 1]].add(key)
        x("RESET enable_indexscan")
        x("RESET enable_seqscan")
    wanted = sorted(set().union(*cand))
    stored: dict[int, Probe] = {}
    if wanted:
        for key, content, tags_, qv, v in x(
                f"SELECT key, content, tags, qvector, vector FROM {schema}.memories WHERE key = ANY(%s)",
                (wanted,)):
            stored[key] = probe_of(content, tags_, None if qv is None else array(qv), array(v))
    return [[stored[k] for k in sorted(c) if k in stored] for c in cand]
