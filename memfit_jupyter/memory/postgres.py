"""A memory store on PostgreSQL with pgvector: ``MemoryStore("postgresql://user@host/db")``.

The same API as the SQLite store, and the same pieces: items are validated and redacted by
``items``, the 2-of-3 verdicts are ``dedup``'s, search is ``search.search_memory`` over this
store's ``candidates()``, export and import are ``transfer``'s.  What differs is where the
candidates come from: an HNSW index of pgvector (inner product on unit vectors, so cosine)
and postings of the same tokens the SQLite store gives FTS5, scored by FTS5's BM25
(``pg_text``).  A hybrid search sends its vector query and its full-text query on two
connections of their own, at once, each returning the found memories' whole rows.

Many writers (kernels, sweep workers, people) share one store: each batch is one
transaction that first takes a transaction-scoped advisory lock on the store, then looks
for the stored memories each new one could repeat, decides, and inserts.  Writers so
decide one after another and every decision sees every committed memory: concurrent
writers lose nothing and store a duplicate only once.  Readers never wait for it.

Tables live in a schema of their own (``schema=``, default ``memfit``), so one database can
hold several stores.  Needs ``pip install 'memfit-jupyter[postgres]'`` (psycopg and the
pgvector client) and a server with the ``vector`` extension (created if allowed).
"""

from __future__ import annotations

import builtins
import os
import re
import threading
import zlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..errors import StoreError
from . import pg_text
from .dedup import DedupConfig, Probe, non_repeated, norm_tags, probe_of
from .embedders import Embedder, get_embedder
from .entity import MemoryEntity
from .items import prepare_batch
from .ranking import RankingConfig
from .retrieval import SeedRetrieval
from .search import Candidates
from .text import ANALYZER

if TYPE_CHECKING:  # imported at first use
    import concurrent.futures as cf

    import psycopg

URL_SCHEMES = ("postgresql://", "postgres://")
#: 2: full text in postings scored by BM25 (1: a tsvector column ranked by ts_rank).
SCHEMA_VERSION = "2"
#: Newest memories per tag that dedup looks at, as in the SQLite store.
TAG_SCAN = 256
#: The graph's beam when dedup looks for a new memory's near-duplicates: wider than a search's,
#: since a missed neighbour would be a duplicate stored.
DEDUP_EF_SEARCH = 100
#: add_many decides and writes larger batches in transactions of this many.
ADD_CHUNK = 2_000
_COLUMNS = "key, id, content, tags, questions, created_at, c, o, r, e, p, a, t"
#: What a search reads of each memory it finds: the entity's columns and the stored vector.
_ROW = ", ".join(f"m.{c}" for c in _COLUMNS.split(", ")) + ", m.vector"


def is_url(path: object) -> TypeGuard[str]:
    """Whether ``path`` names a PostgreSQL store rather than a directory."""
    return isinstance(path, str) and path.startswith(URL_SCHEMES)


def safe_url(url: str) -> str:
    """The URL without its password: what messages, ``info()`` and ``repr`` show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


class PostgresStore(SeedRetrieval):
    """A memory store in PostgreSQL + pgvector; made by ``MemoryStore(url)``.

    ``embedder``, ``dedup`` and ``ranking`` mean what they mean for the SQLite store.
    ``schema``: the PostgreSQL schema that holds this store's tables.  ``exact_below``: below
    this many memories dedup compares with the exact nearest neighbours (a scan) rather than
    the graph's (lower than the SQLite store's 10k: a scan here reads every row from the
    table, where SQLite's store multiplies a matrix it keeps in memory).  ``m``, ``ef_construction``: the HNSW index's parameters (pgvector's defaults);
    ``ef_search``: the search beam.  At 100k topical notes (tests/benchmarks/bench_pgvector.py)
    pgvector's default 40 finds 0.75 of the exact 10 nearest, 160 finds 0.90 (a bare query
    8.6 ms instead of 3.5) and 320 0.95 (20 ms): 160 is the default.
    """

    def __init__(self, url: str, embedder: str | Embedder | None = None, *, dedup: DedupConfig | bool | None = None,
                 ranking: str | RankingConfig = "hybrid", schema: str = "memfit", exact_below: int = 1_000,
                 m: int = 16, ef_construction: int = 64, ef_search: int = 160):
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", schema):
            raise ValueError(f"schema must be a lower-case SQL name, got {schema!r}")
        try:
            import psycopg
            from pgvector.psycopg import register_vector
        except ImportError:
            raise ImportError("a PostgreSQL store needs psycopg and pgvector: "
                              "pip install 'memfit-jupyter[postgres]'") from None
        self._psycopg = psycopg
        self.url = url
        self.path = safe_url(url)
        self.schema = schema
        self.dedup = DedupConfig(enabled=False) if dedup is False else (
            dedup if isinstance(dedup, DedupConfig) else DedupConfig())
        self.ranking = ranking if isinstance(ranking, RankingConfig) else RankingConfig(mode=ranking)
        self.exact_below = exact_below
        self.ef_search = ef_search
        self._lock = threading.RLock()
        self._closed = True
        self._lex_pool: cf.ThreadPoolExecutor | None = None
        self._lex_conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._vec_conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._vec_ef = 0
        # One lock id per store (schema), the same in every process.
        self._lock_id = zlib.crc32(f"memfit:{schema}".encode()) - 2**31
        try:
            self._conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open memory store {self.path!r}: {_first_line(exc)}") from None
        self._closed = False
        try:
            with self._conn.transaction():
                self._x("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))  # one creator at a time
                if self._x("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
                    self._x("CREATE EXTENSION IF NOT EXISTS vector")
                register_vector(self._conn)
                self._x(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                self._x(f"CREATE TABLE IF NOT EXISTS {schema}.meta(key text PRIMARY KEY, value text NOT NULL)")
                meta = dict(self._x(f"SELECT key, value FROM {schema}.meta").fetchall())
                self.embedder = self._choose_embedder(meta, embedder)
                self._create_tables(self.embedder.dim, m, ef_construction)
                old = self._x("SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
                              "AND table_name = 'memories' AND column_name = 'fts'", (schema,)).fetchone()
                if old or meta.get("analyzer") != ANALYZER:  # new, older text analysis, or schema 1
                    self._reindex_text()
                    if old:  # schema 1's tsvector (and its GIN index): the postings replace it
                        self._x(f"ALTER TABLE {schema}.memories DROP COLUMN fts")
                    self._set_meta({"analyzer": ANALYZER, "schema": SCHEMA_VERSION})
        except psycopg.Error as exc:
            self.close()
            raise StoreError(f"cannot open memory store {self.path!r}: {_first_line(exc)}") from None
        except BaseException:
            self.close()
            raise

    # --- plumbing -----------------------------------------------------------------------
    def _x(self, sql: str, params: Sequence[Any] | None = None) -> psycopg.Cursor[tuple[Any, ...]]:
        return self._conn.execute(sql, params)

    def _t(self, name: str) -> str:
        return f"{self.schema}.{name}"

    def _create_tables(self, dim: int, m: int, ef_construction: int) -> None:
        s = self.schema
        self._x(f"""CREATE TABLE IF NOT EXISTS {s}.memories(
            key bigserial PRIMARY KEY, id text NOT NULL UNIQUE, content text NOT NULL,
            tags text[] NOT NULL, questions text[] NOT NULL, created_at text NOT NULL,
            c float8 NOT NULL, o float8 NOT NULL, r float8 NOT NULL, e float8 NOT NULL, p float8 NOT NULL,
            a float8 NOT NULL, t float8 NOT NULL, vector vector({dim}) NOT NULL, qvector vector({dim}))""")
        self._x(f"CREATE TABLE IF NOT EXISTS {s}.memory_tags(tag text NOT NULL, "
                f"key bigint NOT NULL REFERENCES {s}.memories(key) ON DELETE CASCADE, PRIMARY KEY(tag, key))")
        self._x(f"CREATE INDEX IF NOT EXISTS memory_tags_key ON {s}.memory_tags(key)")
        for sql in pg_text.create_sql(s):
            self._x(sql)
        self._create_hnsw(m, ef_construction)

    def _create_hnsw(self, m: int = 16, ef_construction: int = 64) -> None:
        self._x(f"CREATE INDEX IF NOT EXISTS memories_hnsw ON {self.schema}.memories "
                f"USING hnsw (vector vector_ip_ops) WITH (m = {int(m)}, ef_construction = {int(ef_construction)})")

    def _choose_embedder(self, meta: dict[str, str], wanted: str | Embedder | None) -> Embedder:
        """The embedder the store records (set on first use); a different one is refused with
        the message the SQLite store gives, naming reindex."""
        recorded = meta.get("embedder")
        emb = get_embedder(wanted if wanted is not None else recorded)
        if recorded is None:
            self._set_meta({"embedder": emb.id, "dim": str(emb.dim), "schema": SCHEMA_VERSION})
            return emb
        if emb.id != recorded:
            raise StoreError(
                f"memory store {self.path!r} was built with embedder {recorded!r} ({meta.get('dim')} dims), "
                f"not {emb.id!r}: open it without an embedder, or re-embed it with reindex "
                f"(MemoryStore(url).reindex({emb.id!r}), %memfit_memory reindex --embedder {emb.id})")
        if str(emb.dim) != meta.get("dim"):
            raise StoreError(f"memory store {self.path!r} records {meta.get('dim')} dims but embedder "
                             f"{emb.id!r} gives {emb.dim}: run reindex")
        return emb

    def _set_meta(self, values: dict[str, str]) -> None:
        for k, v in values.items():
            self._x(f"INSERT INTO {self._t('meta')}(key, value) VALUES (%s, %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (k, v))

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {self.path!r} is closed")

    # --- writing ------------------------------------------------------------------------
    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None, **extra: Any) -> str | None:
        """Store one memory; return its id, or None when it duplicates a stored one (2 of 3)."""
        return self.add_many([{"content": content, "tags": tags, "questions": questions,
                               "scores": scores, **extra}])[0]

    def add_many(self, items: Iterable[dict[str, Any] | MemoryEntity], vectors: np.ndarray | None = None,
                 ) -> list[str | None]:
        """Store many memories (batch dedup); ids, None for duplicates.  Each ``ADD_CHUNK`` is
        one transaction, all or nothing, decided under the store's write lock."""
        entities, vecs, qvecs, probes = prepare_batch(items, self.embedder, vectors)
        if not entities:
            return []
        ids: list[str | None] = [None] * len(entities)
        for start in range(0, len(entities), ADD_CHUNK):
            part = list(range(start, min(len(entities), start + ADD_CHUNK)))
            for i in self._add_chunk([entities[j] for j in part], vecs[part], [qvecs[j] for j in part],
                                     [probes[j] for j in part]):
                ids[start + i] = entities[start + i].id
        return ids

    def _add_chunk(self, entities: list[MemoryEntity], vecs: np.ndarray, qvecs: list[np.ndarray | None],
                   probes: list[Probe]) -> list[int]:
        psycopg = self._psycopg
        with self._lock:
            self._check_open()
            try:
                with self._conn.transaction():
                    self._x("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
                    kept = (non_repeated(probes, self._stored_candidates(probes), self.dedup)
                            if self.dedup.enabled else list(range(len(entities))))
                    self._insert([entities[i] for i in kept], vecs[kept], [qvecs[i] for i in kept])
            except psycopg.errors.UniqueViolation as exc:
                raise StoreError(f"cannot add to the memory store: {_first_line(exc)}") from None
        return kept

    def _insert(self, entities: list[MemoryEntity], vecs: np.ndarray, qvecs: list[np.ndarray | None]) -> None:
        if not entities:
            return
        with self._conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {self._t('memories')}(id, content, tags, questions, created_at, c, o, r, e, p, a, t, "
                "vector, qvector) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING key",
                [(e.id, e.content, e.tags, e.potential_questions, e.created_at, e.c_score, e.o_score, e.r_score,
                  e.e_score, e.p_score, e.a_score, e.t_score, v, q) for e, v, q in zip(entities, vecs, qvecs, strict=True)],
                returning=True)
            keys: list[int] = []
            while True:
                keys.append(_one(cur.fetchone()))
                if not cur.nextset():
                    break
            pg_text.write(cur, self.schema, [(k, e.content, e.tags, e.potential_questions)
                                             for k, e in zip(keys, entities, strict=True)])
            pairs = [(t, k) for k, e in zip(keys, entities, strict=True) for t in norm_tags(e.tags)]
            if pairs:
                cur.executemany(f"INSERT INTO {self._t('memory_tags')}(tag, key) VALUES (%s, %s) "
                                "ON CONFLICT DO NOTHING", pairs)

    def _reindex_text(self) -> None:
        """Inside the opening transaction: every memory's postings again, by this version's
        text analysis (``text.ANALYZER``), as the SQLite store rebuilds its FTS5 index.  Only
        the postings table is written (the memories' rows, and so their HNSW entries, stay):
        at 100k memories seconds, where rewriting schema 1's tsvector column took minutes."""
        with self._conn.cursor(name="memfit_text") as rows:  # server-side: read in batches
            rows.itersize = 5_000
            rows.execute(f"SELECT key, content, tags, questions FROM {self._t('memories')}")
            pg_text.rebuild(self._conn, self.schema, rows)

    def _stored_candidates(self, probes: list[Probe]) -> list[list[Probe]]:
        """For each probe, the stored memories it could repeat: those sharing enough tags
        (among the newest ``TAG_SCAN`` per tag) and its nearest neighbours by content at the
        content threshold (exact below ``exact_below`` memories, else by the graph with a beam
        of at least the candidates asked for).  Inside the write transaction."""
        from .candidates import tags_decide

        cfg = self.dedup
        cand: list[set[int]] = [set() for _ in probes]
        tags = sorted({t for p in probes for t in p.tags})
        postings: dict[str, list[int]] = {}
        if tags:
            for tag, key in self._x(
                    f"SELECT g.tag, k.key FROM unnest(%s::text[]) AS g(tag) CROSS JOIN LATERAL "
                    f"(SELECT key FROM {self._t('memory_tags')} WHERE tag = g.tag ORDER BY key DESC LIMIT %s) k",
                    (tags, TAG_SCAN)):
                postings.setdefault(tag, []).append(key)
        for i, p in enumerate(probes):
            if p.tags:
                need = max(1, int(np.ceil(cfg.tag_overlap_threshold * len(p.tags) - 1e-9)))
                hits: dict[int, int] = {}
                for tag in p.tags:
                    for key in postings.get(tag, ()):
                        hits[key] = hits.get(key, 0) + 1
                cand[i].update(key for key, c in hits.items() if c >= need)
        search = [i for i, p in enumerate(probes) if not tags_decide(p, postings, cfg)]
        if search:
            if self.exact_below and _one(self._x(f"SELECT count(*) < %s FROM {self._t('memories')}",
                                                 (self.exact_below,)).fetchone()):
                self._x("SET LOCAL enable_indexscan = off")  # a small store: the exact neighbours
            else:  # the graph: at a few thousand rows the planner would rather scan (70 ms a probe here)
                self._x("SET LOCAL enable_seqscan = off")
                self._x(f"SET LOCAL hnsw.ef_search = {max(DEDUP_EF_SEARCH, cfg.candidates)}")
            thr = cfg.content_similarity_threshold - 1e-6 if cfg.min_matches > 1 else -2.0
            # Every probe's neighbours in one statement (a graph search per probe on the server).
            literals = ["[" + ",".join(f"{x:.7g}" for x in probes[i].vec.tolist()) + "]" for i in search]
            for n, key, sim in self._x(
                    f"SELECT p.n, m.key, -(m.vector <#> p.v) FROM unnest(%s::vector[]) WITH ORDINALITY AS p(v, n) "
                    f"CROSS JOIN LATERAL (SELECT key, vector FROM {self._t('memories')} "
                    "ORDER BY vector <#> p.v LIMIT %s) m", (literals, cfg.candidates)):
                if sim >= thr:
                    cand[search[n - 1]].add(key)
            self._x("RESET enable_indexscan")
            self._x("RESET enable_seqscan")
        wanted = sorted(set().union(*cand))
        stored: dict[int, Probe] = {}
        if wanted:
            for key, content, tags_, qv, v in self._x(
                    f"SELECT key, content, tags, qvector, vector FROM {self._t('memories')} WHERE key = ANY(%s)",
                    (wanted,)):
                stored[key] = probe_of(content, tags_, None if qv is None else _array(qv), _array(v))
        return [[stored[k] for k in sorted(c) if k in stored] for c in cand]

    def delete(self, id: str) -> bool:
        """Delete a memory; False when there is none with this id."""
        with self._lock:
            self._check_open()
            return self._x(pg_text.forget_sql(self.schema), (str(id),)).rowcount > 0

    # --- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            return int(_one(self._x(f"SELECT count(*) FROM {self._t('memories')}").fetchone()))

    @staticmethod
    def _entity(row: Sequence[Any]) -> MemoryEntity:
        return MemoryEntity(row[1], row[2], list(row[3]), list(row[4]), *row[5:13])

    def _entities(self, keys: list[int]) -> dict[int, MemoryEntity]:
        if not keys:
            return {}
        rows = self._x(f"SELECT {_COLUMNS} FROM {self._t('memories')} WHERE key = ANY(%s)", (list(keys),))
        return {r[0]: self._entity(r) for r in rows}

    def get(self, id: str) -> MemoryEntity | None:
        """The memory with this id, or None."""
        with self._lock:
            self._check_open()
            row = self._x(f"SELECT {_COLUMNS} FROM {self._t('memories')} WHERE id = %s", (str(id),)).fetchone()
            return None if row is None else self._entity(row)

    # Below this method ``list`` in an annotation is the method: the type is ``builtins.list``.
    def list(self, tag: str | None = None, limit: int | None = None, offset: int = 0) -> list[MemoryEntity]:
        """Memories, newest first, optionally only those with ``tag``."""
        with self._lock:
            self._check_open()
            where, params = "", []
            if tag:
                where = f"WHERE key IN (SELECT key FROM {self._t('memory_tags')} WHERE tag = %s)"
                params.append(tag.strip().lower())
            rows = self._x(f"SELECT {_COLUMNS} FROM {self._t('memories')} {where} ORDER BY key DESC "
                           "LIMIT %s OFFSET %s", (*params, limit, int(offset)))
            return [self._entity(r) for r in rows]

    def tags(self) -> dict[str, int]:
        """Every tag with how many memories carry it, most used first."""
        with self._lock:
            self._check_open()
            return dict(self._x(f"SELECT tag, count(*) AS n FROM {self._t('memory_tags')} "
                                "GROUP BY tag ORDER BY n DESC, tag").fetchall())

    def _tag_keys(self, tags: Iterable[str], match_all: bool = False, limit: int = 20) -> builtins.list[int]:
        wanted = sorted(norm_tags(tags))
        if not wanted:
            return []
        having = "HAVING count(*) = %s" if match_all else ""
        rows = self._x(f"SELECT key FROM {self._t('memory_tags')} WHERE tag = ANY(%s) GROUP BY key {having} "
                       "ORDER BY count(*) DESC, key DESC LIMIT %s",
                       (wanted, *([len(wanted)] if match_all else []), int(limit)))
        return [r[0] for r in rows]

    def search_by_tags(self, tags: Iterable[str], match_all: bool = False, limit: int = 20) -> builtins.list[MemoryEntity]:
        """Memories carrying any (or all) of ``tags``, most matches, then newest, first."""
        with self._lock:
            self._check_open()
            keys = self._tag_keys(tags, match_all, limit)
            found = self._entities(keys)
            return [found[k] for k in keys if k in found]

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored content vectors of these memories, by id."""
        with self._lock:
            self._check_open()
            rows = self._x(f"SELECT id, vector FROM {self._t('memories')} WHERE id = ANY(%s)", (list(ids),))
            return {i: _array(v) for i, v in rows}

    def embed_query(self, query: str) -> np.ndarray:
        """The query's unit vector, by the store's embedder."""
        vec: np.ndarray = self.embedder.embed([query])[0]
        return vec

    def _side_connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        from pgvector.psycopg import register_vector

        conn = self._psycopg.connect(self.url, autocommit=True)
        register_vector(conn)
        return conn

    def _nearest(self, q: np.ndarray, limit: int, only: Iterable[str] | None) -> builtins.list[tuple[Any, ...]]:
        """The ``limit`` nearest memories' rows (``_ROW`` and the cosine), nearest first, by the
        HNSW index; with ``only``, among those carrying one of these tags, exactly (the graph
        cannot filter without losing results)."""
        if only is None:
            # A connection of its own whose session keeps the settings: one round trip a query,
            # where SET LOCAL in a transaction took four more.
            if self._vec_conn is None:
                self._vec_conn = self._side_connection()
                self._vec_conn.execute("SET enable_seqscan = off")  # the graph, also where a scan looks cheaper
                self._vec_ef = 0
            ef = max(int(limit), self.ef_search)
            if ef != self._vec_ef:
                self._vec_conn.execute(f"SET hnsw.ef_search = {ef}")
                self._vec_ef = ef
            with self._vec_conn.cursor(binary=True) as cur:  # binary: vectors as bytes, not text to parse
                return cur.execute(f"SELECT {_ROW}, -(m.vector <#> %s) FROM {self._t('memories')} m "
                                   "ORDER BY m.vector <#> %s LIMIT %s", (q, q, int(limit))).fetchall()
        wanted = sorted(norm_tags(only))
        if not wanted:
            return []
        # Exact: pgvector's iterative scan (hnsw.iterative_scan) filtering the graph's finds by a
        # tag held by 3% of 100k notes was slower (75 ms) and found 0.61 of the exact 10.  The
        # tagged keys as one array let the planner read just those rows by the key's index
        # (a bitmap scan: plain index scans are off, so never the graph): 60 -> 44 ms there.
        with self._conn.transaction():
            self._x("SET LOCAL enable_indexscan = off")
            with self._conn.cursor(binary=True) as cur:
                return cur.execute(
                    f"SELECT {_ROW}, -(m.vector <#> %s) FROM {self._t('memories')} m WHERE m.key = ANY(ARRAY("
                    f"SELECT key FROM {self._t('memory_tags')} WHERE tag = ANY(%s))) "
                    "ORDER BY m.vector <#> %s LIMIT %s", (q, wanted, q, int(limit))).fetchall()

    def _lexical(self, query: str, limit: int, conn: psycopg.Connection[tuple[Any, ...]]) -> builtins.list[tuple[Any, ...]]:
        """The ``limit`` best memories' rows (``_ROW`` and the BM25 score) for the query's
        keywords, best first (``pg_text``)."""
        from .text import keywords

        terms = pg_text.terms_of(keywords(query))
        if not terms or limit <= 0:
            return []
        with conn.cursor(binary=True) as cur:
            return cur.execute(pg_text.search_sql(self.schema, _ROW), (terms, int(limit))).fetchall()

    def search_by_semantics(self, query: str | np.ndarray, limit: int = 15,
                            tags: Iterable[str] | None = None) -> builtins.list[tuple[MemoryEntity, float]]:
        """The nearest memories to ``query`` with their cosine similarity (``tags``: among those)."""
        q = self.embed_query(query) if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        with self._lock:
            self._check_open()
            return [(self._entity(r), float(r[-1])) for r in self._nearest(q, limit, tags)]

    def search_lexical(self, query: str, limit: int = 15) -> builtins.list[tuple[MemoryEntity, float]]:
        """Full-text search (BM25, as the SQLite store's FTS5 scores it) over content, tags and
        questions; higher is better."""
        with self._lock:
            self._check_open()
            return [(self._entity(r), float(r[-1])) for r in self._lexical(query, limit, self._conn)]

    def candidates(self, q: np.ndarray, query: str, *, tags: Iterable[str] = (), only: Iterable[str] | None = None,
                   tag_limit: int = 20, semantic_limit: int = 15, lexical_limit: int = 15) -> Candidates:
        """Seed 000 §3.3 steps 2-4 (see ``MemoryStore.candidates``): tag, semantic and lexical
        finds, each memory read once with its stored vector."""
        with self._lock:
            self._check_open()
            # The full-text query runs on a connection of its own meanwhile, so that the server
            # can work on both at once when a core is free.
            pending = None
            if lexical_limit > 0:
                pool, conn = self._lexical_side()
                pending = pool.submit(self._lexical, query, lexical_limit, conn)
            try:
                tag_keys = self._tag_keys(tags, limit=tag_limit) if tags else []
                semantic = self._nearest(q, semantic_limit, only)
            finally:
                lexical = pending.result() if pending is not None else []
            rows = {r[0]: r for r in (*semantic, *lexical)}
            missing = [k for k in tag_keys if k not in rows]
            if missing:
                with self._conn.cursor(binary=True) as cur:
                    rows.update((r[0], r) for r in cur.execute(
                        f"SELECT {_ROW} FROM {self._t('memories')} m WHERE m.key = ANY(%s)", (missing,)))
        order = list(dict.fromkeys([*tag_keys, *(r[0] for r in semantic), *(r[0] for r in lexical)]))
        keys = [k for k in order if k in rows]
        entities = [self._entity(rows[k]) for k in keys]
        vecs = (np.stack([_array(rows[k][13]) for k in keys]) if keys
                else np.zeros((0, self.embedder.dim), dtype=np.float32))
        id_of = {k: e.id for k, e in zip(keys, entities, strict=True)}
        found = {name: [id_of[k] for k in ks if k in id_of]
                 for name, ks in (("tags", tag_keys), ("semantic", [r[0] for r in semantic]),
                                  ("lexical", [r[0] for r in lexical])) if ks}
        return Candidates(entities, vecs, found, {id_of[r[0]]: float(r[-1]) for r in lexical if r[0] in id_of})

    # --- maintenance --------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """URL (no password), count, embedder, dims."""
        n = len(self)
        return {"path": self.path, "count": n, "embedder": self.embedder.id, "dims": self.embedder.dim,
                "indexed": n, "ranking": self.ranking.mode, "tags": len(self.tags())}

    def flush(self) -> None:
        """Nothing to do: every write is committed, and the index is PostgreSQL's."""

    def reindex(self, embedder: str | Embedder | None = None) -> int:
        """Re-embed every memory (with ``embedder``, or the current one) and rebuild the index."""
        emb = get_embedder(embedder) if embedder is not None else self.embedder
        memories = self._t("memories")
        with self._lock:
            self._check_open()
            with self._conn.transaction():
                self._x("SELECT pg_advisory_xact_lock(%s)", (self._lock_id,))
                rows = self._x(f"SELECT key, content, questions FROM {memories}").fetchall()
                self._x(f"DROP INDEX IF EXISTS {self.schema}.memories_hnsw")
                self._x(f"ALTER TABLE {memories} ALTER COLUMN vector DROP NOT NULL")
                for col in ("vector", "qvector"):
                    self._x(f"ALTER TABLE {memories} ALTER COLUMN {col} TYPE vector USING NULL")
                if rows:
                    vecs = emb.embed([r[1] for r in rows])
                    with_q = [i for i, r in enumerate(rows) if r[2]]
                    qv: Iterable[np.ndarray] = emb.embed(["\n".join(rows[i][2]) for i in with_q]) if with_q else []
                    qvecs: dict[int, np.ndarray] = dict(zip(with_q, qv, strict=True))
                    with self._conn.cursor() as cur:
                        cur.executemany(f"UPDATE {memories} SET vector = %s, qvector = %s WHERE key = %s",
                                        [(vecs[i], qvecs.get(i), r[0]) for i, r in enumerate(rows)])
                for col in ("vector", "qvector"):
                    self._x(f"ALTER TABLE {memories} ALTER COLUMN {col} TYPE vector({emb.dim})")
                self._x(f"ALTER TABLE {memories} ALTER COLUMN vector SET NOT NULL")
                self._create_hnsw()
                self._set_meta({"embedder": emb.id, "dim": str(emb.dim)})
            self.embedder = emb
            return len(rows)

    def export(self, path: str | os.PathLike[str]) -> int:
        """Write every memory to a JSON Lines file (no vectors), readable by either backend."""
        from .transfer import export_jsonl

        return export_jsonl(self, path)

    def import_(self, path: str | os.PathLike[str]) -> dict[str, int]:
        """Add the memories of a JSON Lines export (from either backend); duplicates are skipped."""
        from .transfer import import_jsonl

        return import_jsonl(self, path)

    def drop(self) -> None:
        """Delete this store: its schema and everything in it."""
        with self._lock:
            self._check_open()
            self._x(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")

    def _lexical_side(self) -> tuple[cf.ThreadPoolExecutor, psycopg.Connection[tuple[Any, ...]]]:
        """The thread and connection that run full-text queries beside the vector query."""
        if self._lex_pool is None or self._lex_conn is None:
            import concurrent.futures as cf

            self._lex_conn = self._side_connection()
            self._lex_pool = cf.ThreadPoolExecutor(1, thread_name_prefix="memfit-pg-lexical")
        return self._lex_pool, self._lex_conn

    def close(self) -> None:
        """Close the connections. Safe to call twice."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
                if self._lex_pool is not None:
                    self._lex_pool.shutdown(wait=True)
                    self._lex_pool = None
                if self._lex_conn is not None:
                    self._lex_conn.close()
                    self._lex_conn = None
                if self._vec_conn is not None:
                    self._vec_conn.close()
                    self._vec_conn = None

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self)} memories"
        return f"<MemoryStore {self.path!r} {state} embedder={self.embedder.id}>"


def _array(value: Any) -> np.ndarray:
    """A pgvector value as a float32 array (the client gives ``Vector`` objects)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def _one(row: tuple[Any, ...] | None) -> Any:
    """The first column of a row that the statement always returns (an aggregate, RETURNING)."""
    if row is None:
        raise StoreError("the memory store's database returned no row where it always returns one")
    return row[0]


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
