"""The PostgreSQL store's tables: their layout, opening (creating or migrating) them, and
re-embedding every memory.  Also how a row reads back as a memory, for the write and the
read path (``pg_write``, ``pg_search``) alike.

A store is one PostgreSQL schema: ``meta`` (embedder, dims, text analyzer, layout version),
``memories`` (one row a memory with its content and question vectors; an HNSW index on the
content vector), ``memory_tags`` and the full-text postings of ``pg_text``.  Every change to
a store's layout or its vectors happens under the store's advisory lock (``lock``), the lock
its writers take too.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import StoreError
from . import pg_text
from .embedders import Embedder, get_embedder, recorded_embedder
from .entity import MemoryEntity
from .text import ANALYZER

if TYPE_CHECKING:
    from .pg_types import Conn

#: 2: full text in postings scored by BM25 (1: a tsvector column ranked by ts_rank).
SCHEMA_VERSION = "2"
COLUMNS = "key, id, content, tags, questions, created_at, c, o, r, e, p, a, t"
#: What a search reads of each memory it finds: the entity's columns and the stored vector.
ROW = ", ".join(f"m.{c}" for c in COLUMNS.split(", ")) + ", m.vector"


def lock(conn: Conn, schema: str) -> None:
    """Take the store's write lock until the transaction ends: one lock id per store
    (schema), the same in every process."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (zlib.crc32(f"memfit:{schema}".encode()) - 2**31,))


def open_schema(conn: Conn, schema: str, wanted: str | Embedder | None, path: str,
                m: int, ef_construction: int) -> Embedder:
    """Create the store's tables where missing, bring an older layout or text analysis up
    to date, and return its embedder (``wanted``, checked against the recorded one).  One
    transaction, one creator at a time."""
    from pgvector.psycopg import register_vector

    x = conn.execute
    with conn.transaction():
        lock(conn, schema)
        if x("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            x("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        x(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        x(f"CREATE TABLE IF NOT EXISTS {schema}.meta(key text PRIMARY KEY, value text NOT NULL)")
        meta: dict[str, str] = dict(x(f"SELECT key, value FROM {schema}.meta").fetchall())
        embedder = _choose_embedder(conn, schema, path, meta, wanted)
        _create_tables(conn, schema, embedder.dim, m, ef_construction)
        old = x("SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = 'memories' AND column_name = 'fts'", (schema,)).fetchone()
        if old or meta.get("analyzer") != ANALYZER:  # new, older text analysis, or schema 1
            _reindex_text(conn, schema)
            if old:  # schema 1's tsvector (and its GIN index): the postings replace it
                x(f"ALTER TABLE {schema}.memories DROP COLUMN fts")
            set_meta(conn, schema, {"analyzer": ANALYZER, "schema": SCHEMA_VERSION})
    return embedder


def _create_tables(conn: Conn, schema: str, dim: int, m: int, ef_construction: int) -> None:
    s = schema
    conn.execute(f"""CREATE TABLE IF NOT EXISTS {s}.memories(
        key bigserial PRIMARY KEY, id text NOT NULL UNIQUE, content text NOT NULL,
        tags text[] NOT NULL, questions text[] NOT NULL, created_at text NOT NULL,
        c float8 NOT NULL, o float8 NOT NULL, r float8 NOT NULL, e float8 NOT NULL, p float8 NOT NULL,
        a float8 NOT NULL, t float8 NOT NULL, vector vector({dim}) NOT NULL, qvector vector({dim}))""")
    conn.execute(f"CREATE TABLE IF NOT EXISTS {s}.memory_tags(tag text NOT NULL, "
                 f"key bigint NOT NULL REFERENCES {s}.memories(key) ON DELETE CASCADE, PRIMARY KEY(tag, key))")
    conn.execute(f"CREATE INDEX IF NOT EXISTS memory_tags_key ON {s}.memory_tags(key)")
    for sql in pg_text.create_sql(s):
        conn.execute(sql)
    create_hnsw(conn, s, m, ef_construction)


def create_hnsw(conn: Conn, schema: str, m: int = 16, ef_construction: int = 64) -> None:
    """The HNSW index on the content vectors (inner product on unit vectors: cosine)."""
    conn.execute(f"CREATE INDEX IF NOT EXISTS memories_hnsw ON {schema}.memories "
                 f"USING hnsw (vector vector_ip_ops) WITH (m = {int(m)}, ef_construction = {int(ef_construction)})")


def _choose_embedder(conn: Conn, schema: str, path: str, meta: dict[str, str],
                     wanted: str | Embedder | None) -> Embedder:
    """The embedder the store records (set on first use); a different one is refused with
    the message the SQLite store gives, naming reindex."""
    recorded = meta.get("embedder")
    if recorded is None:
        emb = get_embedder(wanted)
        set_meta(conn, schema, {"embedder": emb.id, "dim": str(emb.dim), "schema": SCHEMA_VERSION})
        return emb
    return recorded_embedder(path, "url", recorded, meta.get("dim"), wanted)


def set_meta(conn: Conn, schema: str, values: dict[str, str]) -> None:
    """Record these keys in the store's ``meta`` table, replacing older values."""
    for k, v in values.items():
        conn.execute(f"INSERT INTO {schema}.meta(key, value) VALUES (%s, %s) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (k, v))


def _reindex_text(conn: Conn, schema: str) -> None:
    """Inside the opening transaction: every memory's postings again, by this version's
    text analysis (``text.ANALYZER``), as the SQLite store rebuilds its FTS5 index.  Only
    the postings table is written (the memories' rows, and so their HNSW entries, stay):
    at 100k memories seconds, where rewriting schema 1's tsvector column took minutes."""
    with conn.cursor(name="memfit_text") as rows:  # server-side: read in batches
        rows.itersize = 5_000
        rows.execute(f"SELECT key, content, tags, questions FROM {schema}.memories")
        pg_text.rebuild(conn, schema, rows)


def reembed(conn: Conn, schema: str, emb: Embedder) -> int:
    """Re-embed every memory with ``emb`` and rebuild the HNSW index, in one transaction
    under the store's lock (the vector columns change type when the dims do); the count."""
    memories = f"{schema}.memories"
    x = conn.execute
    with conn.transaction():
        lock(conn, schema)
        rows = x(f"SELECT key, content, questions FROM {memories}").fetchall()
        x(f"DROP INDEX IF EXISTS {schema}.memories_hnsw")
        x(f"ALTER TABLE {memories} ALTER COLUMN vector DROP NOT NULL")
        for col in ("vector", "qvector"):
            x(f"ALTER TABLE {memories} ALTER COLUMN {col} TYPE vector USING NULL")
        if rows:
            vecs = emb.embed([r[1] for r in rows])
            with_q = [i for i, r in enumerate(rows) if r[2]]
            qv: Iterable[np.ndarray] = emb.embed(["\n".join(rows[i][2]) for i in with_q]) if with_q else []
            qvecs: dict[int, np.ndarray] = dict(zip(with_q, qv, strict=True))
            with conn.cursor() as cur:
                cur.executemany(f"UPDATE {memories} SET vector = %s, qvector = %s WHERE key = %s",
                                [(vecs[i], qvecs.get(i), r[0]) for i, r in enumerate(rows)])
        for col in ("vector", "qvector"):
            x(f"ALTER TABLE {memories} ALTER COLUMN {col} TYPE vector({emb.dim})")
        x(f"ALTER TABLE {memories} ALTER COLUMN vector SET NOT NULL")
        create_hnsw(conn, schema)
        set_meta(conn, schema, {"embedder": emb.id, "dim": str(emb.dim)})
    return len(rows)


def entity(row: Sequence[Any]) -> MemoryEntity:
    """The memory of a row that starts with ``COLUMNS``."""
    return MemoryEntity(row[1], row[2], list(row[3]), list(row[4]), *row[5:13])


def array(value: Any) -> np.ndarray:
    """A pgvector value as a float32 array (the client gives ``Vector`` objects)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, dtype=np.float32)


def one(row: tuple[Any, ...] | None) -> Any:
    """The first column of a row that the statement always returns (an aggregate, RETURNING)."""
    if row is None:
        raise StoreError("the memory store's database returned no row where it always returns one")
    return row[0]
