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
for the stored memories each new one could repeat, decides, and inserts (``pg_write``).
Writers so decide one after another and every decision sees every committed memory:
concurrent writers lose nothing and store a duplicate only once.  Readers never wait for it.

This module is the store's API, its connections and locking; the tables, their creation and
migrations are ``pg_schema``'s, the queries of a search ``pg_search``'s.

Tables live in a schema of their own (``schema=``, default ``memfit``), so one database can
hold several stores.  Needs ``pip install 'memfit-jupyter[postgres]'`` (psycopg and the
pgvector client) and a server with the ``vector`` extension (created if allowed).
"""

from __future__ import annotations

import builtins
import os
import re
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np

from ..errors import StoreError
from . import pg_schema, pg_search, pg_text, pg_write
from .dedup import DedupConfig, Probe
from .embedders import Embedder, get_embedder
from .entity import MemoryEntity
from .items import Batch, prepare_batch
from .ranking import RankingConfig
from .retrieval import StoreRetrieval
from .search import SEMANTIC_LIMIT, TAG_LIMIT, Candidates

if TYPE_CHECKING:  # imported at first use
    import concurrent.futures as cf

    from .pg_types import Conn, Cursor

URL_SCHEMES = ("postgresql://", "postgres://")
#: add_many decides and writes larger batches in transactions of this many.
ADD_CHUNK = 2_000


def is_url(path: object) -> TypeGuard[str]:
    """Whether ``path`` names a PostgreSQL store rather than a directory."""
    return isinstance(path, str) and path.startswith(URL_SCHEMES)


#: The stores this process has connected, for ``connected``.
_CONNECTED: weakref.WeakSet[PostgresStore] = weakref.WeakSet()
#: Query parameters of a PostgreSQL URL that hold a secret (libpq's connection parameters).
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def safe_url(url: str) -> str:
    """The URL with its password shown as ``***`` (after the user name or as a query parameter):
    what messages, ``info()`` and ``repr`` show."""
    return _hide_password(url, "***")


def without_password(url: str) -> str:
    """The URL with no password in it at all: where a trace says the store is (``where()``)."""
    return _hide_password(url, None)


def _hide_password(url: str, mask: str | None) -> str:
    parts = urlsplit(url)
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        user, host = netloc.rsplit("@", 1)
        netloc = user.split(":", 1)[0] + (f":{mask}" if mask else "") + "@" + host
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_PARAMETERS for k, _ in pairs):
            query = urlencode([(k, mask if k.lower() in SECRET_PARAMETERS else v) for k, v in pairs
                               if mask or k.lower() not in SECRET_PARAMETERS], safe="*/")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def connected(where: dict[str, Any]) -> PostgresStore | None:
    """The store this process has open that a trace's record ``where`` names (``where()``), if
    any.  A fork reads a server's store from a trace only so: connecting where a file says would
    hand that server the login libpq finds (PGPASSWORD, ~/.pgpass)."""
    return next((s for s in list(_CONNECTED) if not s._closed and s.where() == where), None)


class PostgresStore(StoreRetrieval):
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
            from pgvector.psycopg import register_vector  # noqa: F401  (pg_schema, pg_search use it)
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
        self._lex_conn: Conn | None = None
        self._vec_conn: Conn | None = None
        self._vec_ef = 0
        try:
            self._conn: Conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open memory store {self.path!r}: {_first_line(exc)}") from None
        self._closed = False
        _CONNECTED.add(self)
        try:
            self.embedder = pg_schema.open_schema(self._conn, schema, embedder, self.path, m, ef_construction)
        except psycopg.Error as exc:
            self.close()
            raise StoreError(f"cannot open memory store {self.path!r}: {_first_line(exc)}") from None
        except BaseException:
            self.close()
            raise

    # --- plumbing -----------------------------------------------------------------------
    def _x(self, sql: str, params: Sequence[Any] | None = None) -> Cursor:
        return self._conn.execute(sql, params)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {self.path!r} is closed")

    # --- writing ------------------------------------------------------------------------
    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None, **extra: Any) -> str | None:
        """Store one memory; return its id, or None when it duplicates a stored one (2 of 3)."""
        return self.add_many([{"content": content, "tags": tags, "questions": questions,
                               "scores": scores, **extra}])[0]

    def add_many(self, items: Iterable[dict[str, Any] | MemoryEntity] | Batch, vectors: np.ndarray | None = None,
                 ) -> list[str | None]:
        """Store many memories (batch dedup); ids, None for duplicates.  Each ``ADD_CHUNK`` is
        one transaction, all or nothing, decided under the store's write lock."""
        batch = prepare_batch(items, self.embedder, vectors)
        entities, vecs, qvecs, probes = batch.entities, batch.vectors, batch.question_vectors, batch.probes
        if not entities:
            return []
        ids: list[str | None] = [None] * len(entities)
        for start in range(0, len(entities), ADD_CHUNK):
            part = list(range(start, min(len(entities), start + ADD_CHUNK)))
            with self._lock:
                self._check_open()
                try:
                    kept = pg_write.add_chunk(self._conn, self.schema, [entities[j] for j in part], vecs[part],
                                              [qvecs[j] for j in part], [probes[j] for j in part],
                                              self.dedup, self.exact_below)
                except self._psycopg.errors.UniqueViolation as exc:
                    raise StoreError(f"cannot add to the memory store: {_first_line(exc)}") from None
            for i in kept:
                ids[start + i] = entities[start + i].id
        return ids

    def _stored_candidates(self, probes: builtins.list[Probe]) -> builtins.list[builtins.list[Probe]]:
        with self._lock:
            self._check_open()
            return pg_write.stored_candidates(self._conn, self.schema, probes, self.dedup, self.exact_below)

    def delete(self, id: str) -> bool:
        """Delete a memory; False when there is none with this id."""
        with self._lock:
            self._check_open()
            return self._x(pg_text.forget_sql(self.schema), (str(id),)).rowcount > 0

    # --- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            return int(pg_schema.one(self._x(f"SELECT count(*) FROM {self.schema}.memories").fetchone()))

    def get(self, id: str) -> MemoryEntity | None:
        """The memory with this id, or None."""
        with self._lock:
            self._check_open()
            row = self._x(f"SELECT {pg_schema.COLUMNS} FROM {self.schema}.memories WHERE id = %s",
                          (str(id),)).fetchone()
            return None if row is None else pg_schema.entity(row)

    # Below this method ``list`` in an annotation is the method: the type is ``builtins.list``.
    def list(self, tag: str | None = None, limit: int | None = None, offset: int = 0) -> list[MemoryEntity]:
        """Memories, newest first, optionally only those with ``tag``."""
        with self._lock:
            self._check_open()
            where, params = "", []
            if tag:
                where = f"WHERE key IN (SELECT key FROM {self.schema}.memory_tags WHERE tag = %s)"
                params.append(tag.strip().lower())
            rows = self._x(f"SELECT {pg_schema.COLUMNS} FROM {self.schema}.memories {where} ORDER BY key DESC "
                           "LIMIT %s OFFSET %s", (*params, limit, int(offset)))
            return [pg_schema.entity(r) for r in rows]

    def tags(self) -> dict[str, int]:
        """Every tag with how many memories carry it, most used first."""
        with self._lock:
            self._check_open()
            return dict(self._x(f"SELECT tag, count(*) AS n FROM {self.schema}.memory_tags "
                                "GROUP BY tag ORDER BY n DESC, tag").fetchall())

    def search_by_tags(self, tags: Iterable[str], match_all: bool = False, limit: int = TAG_LIMIT) -> builtins.list[MemoryEntity]:
        """Memories carrying any (or all) of ``tags``, most matches, then newest, first."""
        with self._lock:
            self._check_open()
            keys = pg_search.tag_keys(self._conn, self.schema, tags, match_all, limit)
            found = pg_search.entities(self._conn, self.schema, keys)
            return [found[k] for k in keys if k in found]

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored content vectors of these memories, by id."""
        with self._lock:
            self._check_open()
            rows = self._x(f"SELECT id, vector FROM {self.schema}.memories WHERE id = ANY(%s)", (list(ids),))
            return {i: pg_schema.array(v) for i, v in rows}

    def embed_query(self, query: str) -> np.ndarray:
        """The query's unit vector, by the store's embedder."""
        vec: np.ndarray = self.embedder.embed([query])[0]
        return vec

    def _nearest(self, q: np.ndarray, limit: int, only: Iterable[str] | None) -> pg_search.Rows:
        """The nearest memories' rows: by the HNSW index on the vector connection, or with
        ``only`` exactly among those carrying one of these tags."""
        if only is not None:
            return pg_search.nearest_tagged(self._conn, self.schema, q, limit, only)
        # A connection of its own whose session keeps the settings: one round trip a query,
        # where SET LOCAL in a transaction took four more.
        if self._vec_conn is None:
            self._vec_conn = pg_search.side_connection(self.url)
            self._vec_conn.execute("SET enable_seqscan = off")  # the graph, also where a scan looks cheaper
            self._vec_ef = 0
        ef = max(int(limit), self.ef_search)
        if ef != self._vec_ef:
            self._vec_conn.execute(f"SET hnsw.ef_search = {ef}")
            self._vec_ef = ef
        return pg_search.nearest(self._vec_conn, self.schema, q, limit)

    def search_by_semantics(self, query: str | np.ndarray, limit: int = SEMANTIC_LIMIT,
                            tags: Iterable[str] | None = None) -> builtins.list[tuple[MemoryEntity, float]]:
        """The nearest memories to ``query`` with their cosine similarity (``tags``: among those)."""
        q = self.embed_query(query) if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        with self._lock:
            self._check_open()
            return [(pg_schema.entity(r), float(r[-1])) for r in self._nearest(q, limit, tags)]

    def search_lexical(self, query: str, limit: int = SEMANTIC_LIMIT) -> builtins.list[tuple[MemoryEntity, float]]:
        """Full-text search (BM25, as the SQLite store's FTS5 scores it) over content, tags and
        questions; higher is better."""
        with self._lock:
            self._check_open()
            return [(pg_schema.entity(r), float(r[-1]))
                    for r in pg_search.lexical(self._conn, self.schema, query, limit)]

    def lexical_stats(self, terms: Iterable[str]) -> tuple[int, int, dict[str, int]]:
        """The statistics its BM25 scores with: memories, their tokens, and the memories holding
        each of ``terms`` (``pg_text.bm25``: an overlay scores two stores' finds on both's)."""
        totals, per_term = pg_text.stats_sql(self.schema)
        with self._lock:
            self._check_open()
            rows, tokens = self._conn.execute(totals).fetchone() or (0, 0)
            hits = {str(t): int(n) for t, n in self._conn.execute(per_term, (list(terms),))}
        return int(rows), int(tokens), hits

    def candidates(self, q: np.ndarray, query: str, *, tags: Iterable[str] = (), only: Iterable[str] | None = None,
                   tag_limit: int = TAG_LIMIT, semantic_limit: int = SEMANTIC_LIMIT, lexical_limit: int = SEMANTIC_LIMIT) -> Candidates:
        """MECHANISMS.md §3.3 steps 2-4 (see ``MemoryStore.candidates``): tag, semantic and lexical
        finds, each memory read once with its stored vector."""
        with self._lock:
            self._check_open()
            # The full-text query runs on a connection of its own meanwhile, so that the server
            # can work on both at once when a core is free.
            pending = None
            if lexical_limit > 0:
                pool, conn = self._lexical_side()
                pending = pool.submit(pg_search.lexical, conn, self.schema, query, lexical_limit)
            try:
                tagged = pg_search.tag_keys(self._conn, self.schema, tags, limit=tag_limit) if tags else []
                semantic = self._nearest(q, semantic_limit, only)
            finally:
                lexical = pending.result() if pending is not None else []
            rows = {r[0]: r for r in (*semantic, *lexical)}
            missing = [k for k in tagged if k not in rows]
            if missing:
                rows.update((r[0], r) for r in pg_search.rows_of(self._conn, self.schema, missing))
        return pg_search.gather(tagged, semantic, lexical, rows, self.embedder.dim)

    def _lexical_side(self) -> tuple[cf.ThreadPoolExecutor, Conn]:
        """The thread and connection that run full-text queries beside the vector query."""
        if self._lex_pool is None or self._lex_conn is None:
            import concurrent.futures as cf

            self._lex_conn = pg_search.side_connection(self.url)
            self._lex_pool = cf.ThreadPoolExecutor(1, thread_name_prefix="memfit-pg-lexical")
        return self._lex_pool, self._lex_conn

    # --- maintenance --------------------------------------------------------------------
    def where(self) -> dict[str, Any]:
        """Where the store is, as a trace records it (``memory/where.py``): its URL with no
        password, and its schema."""
        return {"url": without_password(self.url), **({"schema": self.schema} if self.schema != "memfit" else {})}

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
        with self._lock:
            self._check_open()
            n = pg_schema.reembed(self._conn, self.schema, emb)
            self.embedder = emb
            return n

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


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
