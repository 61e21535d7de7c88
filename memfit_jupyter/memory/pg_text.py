"""Full-text search of the PostgreSQL store: BM25 as SQLite's FTS5 computes it, over postings.

The SQLite store ranks lexical finds by FTS5's ``bm25()`` (columns weighted 1.0, 0.8, 0.6).
Here every memory's tokens (``text.tokens`` of its content, tags and questions: what the
SQLite store gives FTS5) are rows of a postings table, ``(term, key, tf, dl)``: ``tf`` the
term's occurrences weighted by column, ``dl`` the memory's length in tokens.  A query reads
the postings of its keywords from one index (an index-only scan: no table row is read),
counts the memories holding each term, and scores as FTS5 does::

    sum over terms of  idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    idf = ln((N - n + 0.5) / (n + 0.5)), 1e-6 where that is not positive; k1 = 1.2, b = 0.75

with N and the token total kept in a one-row table by every write.  Why not ``tsvector`` and
``ts_rank``: ts_rank reads each matching row's tsvector from the table, and at 100k topical
notes a query's five keywords match 2,000 rows (8-10 ms, as long as the HNSW query itself),
where these postings take 2-3 ms; and ts_rank has no IDF, so it ordered lexical finds
otherwise than the SQLite store does (tests/test_postgres_store.py now compares the scores).

FTS5's tokenizer (unicode61) splits tokens at "_" (``scan_csv`` is ``scan`` and ``csv``, two
tokens of the length) and reads the keyword ``scan_csv`` as the phrase "scan csv": a memory's
postings so hold every piece and, for a joined token, the joined form too.  Where the two
differ: the phrase also matches the two words written apart, side by side; here it does not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .text import tokens

if TYPE_CHECKING:
    from .pg_types import Conn, Cursor

#: Column weights, as the SQLite store passes them to bm25(): content, tags, questions.
WEIGHTS = (1.0, 0.8, 0.6)
K1, B = 1.2, 0.75


def _pieces(token: str) -> list[str]:
    return [p for p in token.split("_") if p] if "_" in token else [token]


def terms_of(keywords: Iterable[str]) -> list[str]:
    """The postings' terms for a query's keywords (each keyword once, "_"-joined pieces kept
    joined, as FTS5 reads them as one phrase)."""
    out: dict[str, None] = {}
    for k in keywords:
        pieces = _pieces(k)
        if pieces:
            out.setdefault("_".join(pieces), None)
    return list(out)


def postings(content: str, tags: list[str], questions: list[str]) -> tuple[int, dict[str, float]]:
    """A memory's length in FTS5 tokens and its terms' column-weighted frequencies."""
    dl = 0
    tf: dict[str, float] = {}
    for weight, parts in zip(WEIGHTS, ([content], tags, questions), strict=True):
        for tok in tokens(" ".join(parts)) if parts else ():
            pieces = _pieces(tok)
            dl += len(pieces)
            for p in pieces:
                tf[p] = tf.get(p, 0.0) + weight
            if len(pieces) > 1:
                joined = "_".join(pieces)
                tf[joined] = tf.get(joined, 0.0) + weight
    return dl, tf


def bm25(terms: Iterable[str], dl: int, tf: dict[str, float], rows: int, tokens: int, hits: dict[str, int]) -> float:
    """The score above of one memory (its length ``dl`` and frequencies ``tf``, from ``postings``)
    for ``terms``, in a corpus of ``rows`` memories holding ``tokens`` tokens in all, where term
    ``t`` occurs in ``hits[t]`` of them.  In Python for a corpus no one table holds: a fork's
    memory, an overlay of two stores (``overlay.py``), whose finds are scored on both together."""
    avgdl = tokens / max(rows, 1)
    score = 0.0
    for term in terms:
        f = tf.get(term)
        if not f:
            continue
        n = hits.get(term, 0)
        idf = math.log((rows - n + 0.5) / (n + 0.5)) if rows > 0 else 0.0
        score += (idf if idf > 0 else 1e-6) * f * (K1 + 1) / (f + K1 * (1 - B + B * dl / avgdl if avgdl else 1.0))
    return score


def stats_sql(schema: str) -> tuple[str, str]:
    """The queries of the statistics ``bm25`` takes: the memories and their tokens; the memories
    holding each of the terms (%s, a text[])."""
    return (f"SELECT rows, tokens FROM {schema}.text_stats",
            f"SELECT term, count(*) FROM {schema}.postings WHERE term = ANY(%s) GROUP BY term")


def create_sql(schema: str) -> list[str]:
    """The postings table, its term index (covering: the search reads nothing else) and the
    one-row statistics (memories, tokens)."""
    return [
        f"CREATE TABLE IF NOT EXISTS {schema}.postings(term text NOT NULL, "
        f"key bigint NOT NULL REFERENCES {schema}.memories(key) ON DELETE CASCADE, "
        "tf float8 NOT NULL, dl integer NOT NULL, PRIMARY KEY(key, term))",
        f"CREATE INDEX IF NOT EXISTS postings_term ON {schema}.postings(term) INCLUDE (key, tf, dl)",
        f"CREATE TABLE IF NOT EXISTS {schema}.text_stats(one boolean PRIMARY KEY DEFAULT true CHECK (one), "
        "rows bigint NOT NULL, tokens bigint NOT NULL)",
        f"INSERT INTO {schema}.text_stats(rows, tokens) VALUES (0, 0) ON CONFLICT DO NOTHING",
    ]


def write(cur: Cursor, schema: str, rows: list[tuple[int, str, list[str], list[str]]]) -> None:
    """Inside a write transaction: the postings of these new memories, ``(key, content, tags,
    questions)`` (by COPY), and the statistics moved by them."""
    total = 0
    with cur.copy(f"COPY {schema}.postings(term, key, tf, dl) FROM STDIN") as copy:
        for key, content, tags, questions in rows:
            dl, tf = postings(content, tags, questions)
            total += dl
            for term, f in tf.items():
                copy.write_row((term, key, f, dl))
    cur.execute(f"UPDATE {schema}.text_stats SET rows = rows + %s, tokens = tokens + %s", (len(rows), total))


def rebuild(conn: Conn, schema: str, rows: Iterable[tuple[int, str, list[str], list[str]]]) -> None:
    """Inside a transaction: every memory's postings again (a new text analysis), and the
    statistics counted afresh.  Readers keep the old postings until it commits."""
    with conn.cursor() as cur:
        cur.execute(f"DELETE FROM {schema}.postings")
        cur.execute(f"UPDATE {schema}.text_stats SET rows = 0, tokens = 0")
        batch: list[tuple[int, str, list[str], list[str]]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= 5_000:
                write(cur, schema, batch)
                batch = []
        write(cur, schema, batch)


def forget_sql(schema: str) -> str:
    """Deletes the memory with id %s and takes it out of the statistics (its postings go by
    the foreign key); returns its key."""
    return (f"WITH gone AS (DELETE FROM {schema}.memories WHERE id = %s RETURNING key), "
            f"len AS (SELECT coalesce((SELECT dl FROM {schema}.postings WHERE key = (SELECT key FROM gone) "
            "LIMIT 1), 0) AS dl) "
            f"UPDATE {schema}.text_stats SET rows = rows - (SELECT count(*) FROM gone), "
            "tokens = tokens - (SELECT dl FROM len) WHERE EXISTS (SELECT 1 FROM gone) RETURNING rows")


def search_sql(schema: str, columns: str) -> str:
    """The ``limit`` (2nd parameter) best memories by BM25 for the terms (1st, a text[]):
    their ``columns`` (qualified by ``m.``) and the score, best first, ties newest first."""
    idf = "ln((st.n - h.nhit + 0.5) / (h.nhit + 0.5))"
    return (
        f"WITH st AS (SELECT rows::float8 AS n, tokens::float8 / greatest(rows, 1) AS avgdl FROM {schema}.text_stats), "
        # float8 throughout: a numeric step (integer column with a literal like 0.5) costs more
        # than reading the postings
        "h AS (SELECT key, tf, dl::float8 AS dl, (count(*) OVER (PARTITION BY term))::float8 AS nhit "
        f"FROM {schema}.postings WHERE term = ANY(%s)), "
        f"s AS (SELECT h.key, sum(CASE WHEN {idf} > 0 THEN {idf} ELSE 1e-6 END * h.tf * {K1 + 1} "
        f"/ (h.tf + {K1} * ({1 - B} + {B} * h.dl / nullif(st.avgdl, 0)))) AS s "
        "FROM h, st GROUP BY h.key ORDER BY s DESC, h.key DESC LIMIT %s) "
        f"SELECT {columns}, s.s FROM s JOIN {schema}.memories m ON m.key = s.key ORDER BY s.s DESC, s.key DESC")
