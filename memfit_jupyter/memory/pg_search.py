"""The PostgreSQL store's read path: the queries behind tag, semantic and full-text finds,
and how a hybrid search's finds become ``Candidates``.

The semantic query asks pgvector's HNSW index (inner product on unit vectors, so cosine);
the full-text query reads ``pg_text``'s postings.  Both return the found memories' whole
rows (``ROW``, and the score last), so a search reads each memory once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import pg_text
from .dedup import norm_tags
from .entity import MemoryEntity
from .pg_schema import COLUMNS, ROW, array, entity
from .search import TAG_LIMIT, Candidates

if TYPE_CHECKING:
    from .pg_types import Conn

Rows = list[tuple[Any, ...]]


def side_connection(url: str) -> Conn:
    """A connection of the store's own beside its main one: the vector queries' (whose
    session keeps their settings) and the full-text queries' of a hybrid search."""
    import psycopg
    from pgvector.psycopg import register_vector

    conn: Conn = psycopg.connect(url, autocommit=True)
    register_vector(conn)
    return conn


def nearest(conn: Conn, schema: str, q: np.ndarray, limit: int) -> Rows:
    """The ``limit`` nearest memories' rows (``ROW`` and the cosine), nearest first, by the
    HNSW index, on a connection whose session sets the beam."""
    with conn.cursor(binary=True) as cur:  # binary: vectors as bytes, not text to parse
        return cur.execute(f"SELECT {ROW}, -(m.vector <#> %s) FROM {schema}.memories m "
                           "ORDER BY m.vector <#> %s LIMIT %s", (q, q, int(limit))).fetchall()


def nearest_tagged(conn: Conn, schema: str, q: np.ndarray, limit: int, only: Iterable[str]) -> Rows:
    """As ``nearest`` among the memories carrying one of the tags ``only``, exactly (the
    graph cannot filter without losing results)."""
    wanted = sorted(norm_tags(only))
    if not wanted:
        return []
    # Exact: pgvector's iterative scan (hnsw.iterative_scan) filtering the graph's finds by a
    # tag held by 3% of 100k notes was slower (75 ms) and found 0.61 of the exact 10.  The
    # tagged keys as one array let the planner read just those rows by the key's index
    # (a bitmap scan: plain index scans are off, so never the graph): 60 -> 44 ms there.
    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        with conn.cursor(binary=True) as cur:
            return cur.execute(
                f"SELECT {ROW}, -(m.vector <#> %s) FROM {schema}.memories m WHERE m.key = ANY(ARRAY("
                f"SELECT key FROM {schema}.memory_tags WHERE tag = ANY(%s))) "
                "ORDER BY m.vector <#> %s LIMIT %s", (q, wanted, q, int(limit))).fetchall()


def lexical(conn: Conn, schema: str, query: str, limit: int) -> Rows:
    """The ``limit`` best memories' rows (``ROW`` and the BM25 score) for the query's
    keywords, best first (``pg_text``)."""
    from .text import keywords

    terms = pg_text.terms_of(keywords(query))
    if not terms or limit <= 0:
        return []
    with conn.cursor(binary=True) as cur:
        return cur.execute(pg_text.search_sql(schema, ROW), (terms, int(limit))).fetchall()


def tag_keys(conn: Conn, schema: str, tags: Iterable[str], match_all: bool = False, limit: int = TAG_LIMIT) -> list[int]:
    """The keys of memories carrying any (or all) of ``tags``, most matches, then newest, first."""
    wanted = sorted(norm_tags(tags))
    if not wanted:
        return []
    having = "HAVING count(*) = %s" if match_all else ""
    rows = conn.execute(f"SELECT key FROM {schema}.memory_tags WHERE tag = ANY(%s) GROUP BY key {having} "
                        "ORDER BY count(*) DESC, key DESC LIMIT %s",
                        (wanted, *([len(wanted)] if match_all else []), int(limit)))
    return [r[0] for r in rows]


def entities(conn: Conn, schema: str, keys: Sequence[int]) -> dict[int, MemoryEntity]:
    """The memories with these keys, by key."""
    if not keys:
        return {}
    rows = conn.execute(f"SELECT {COLUMNS} FROM {schema}.memories WHERE key = ANY(%s)", (list(keys),))
    return {r[0]: entity(r) for r in rows}


def rows_of(conn: Conn, schema: str, keys: Sequence[int]) -> Rows:
    """The rows (``ROW``) of the memories with these keys."""
    with conn.cursor(binary=True) as cur:
        return cur.execute(f"SELECT {ROW} FROM {schema}.memories m WHERE m.key = ANY(%s)", (list(keys),)).fetchall()


def gather(tagged: list[int], semantic: Rows, textual: Rows, rows: dict[int, tuple[Any, ...]], dim: int) -> Candidates:
    """The candidates of a hybrid search: each found memory once, in the order tag, semantic,
    then lexical finds, with its stored vector; ``rows`` holds every found key's row."""
    order = list(dict.fromkeys([*tagged, *(r[0] for r in semantic), *(r[0] for r in textual)]))
    keys = [k for k in order if k in rows]
    found_entities = [entity(rows[k]) for k in keys]
    vecs = (np.stack([array(rows[k][13]) for k in keys]) if keys
            else np.zeros((0, dim), dtype=np.float32))
    id_of = {k: e.id for k, e in zip(keys, found_entities, strict=True)}
    found = {name: [id_of[k] for k in ks if k in id_of]
             for name, ks in (("tags", tagged), ("semantic", [r[0] for r in semantic]),
                              ("lexical", [r[0] for r in textual])) if ks}
    return Candidates(found_entities, vecs, found, {id_of[r[0]]: float(r[-1]) for r in textual if r[0] in id_of})
