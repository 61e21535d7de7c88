"""The SQLite side of the memory store: schema, connection, transactions and every statement.

SQLite (WAL) is the source of truth; the usearch index (``index``) is derived from the
``memories`` rows and the ``deletions`` log.  Tables::

    meta          embedder, dim, schema version, the number of memories (kept by every write)
    memories      one row per memory: key (AUTOINCREMENT), id, text, scores, vectors
    memory_tags   (tag, key): the tag index
    deletions     every deleted key, in order: what an index has not yet seen
    memories_fts  FTS5 over pre-tokenised content, tags and questions (BM25)

Nothing here knows about usearch or dedup; ``Database`` methods assume the caller holds
the store's lock.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .dedup import norm_tags
from .entity import MemoryEntity
from .search import TAG_LIMIT
from .text import keywords, tokens

log = logging.getLogger("memfit_jupyter.memory")

DB_NAME = "memory.sqlite3"
SCHEMA_VERSION = "1"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS memories(
        key INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, content TEXT NOT NULL,
        tags TEXT NOT NULL, questions TEXT NOT NULL, created_at TEXT NOT NULL,
        c REAL NOT NULL, o REAL NOT NULL, r REAL NOT NULL, e REAL NOT NULL, p REAL NOT NULL,
        a REAL NOT NULL, t REAL NOT NULL, vector BLOB NOT NULL, qvector BLOB)""",
    "CREATE TABLE IF NOT EXISTS memory_tags(tag TEXT NOT NULL, key INTEGER NOT NULL, "
    "PRIMARY KEY(tag, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS memory_tags_key ON memory_tags(key)",
    "CREATE TABLE IF NOT EXISTS deletions(seq INTEGER PRIMARY KEY AUTOINCREMENT, key INTEGER NOT NULL)",
    # Pre-tokenised text (our stemmer, CJK bigrams) so that BM25 and the keyword bonus agree.
    "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(content, tags, questions, "
    "tokenize='unicode61')",
)
COLUMNS = "key, id, content, tags, questions, created_at, c, o, r, e, p, a, t"
#: How many busy_timeouts (30 s each) a writer waits for its turn before it gives up.
WRITE_ATTEMPTS = 10
#: SQLite allows 999 bound parameters in old builds: reads by key go in slices of this many.
_SLICE = 500


def fts_text(parts: list[str]) -> str:
    """What the FTS5 table holds for ``parts``: their tokens, space-separated."""
    return " ".join(tokens(" ".join(parts))) if parts else ""


def _varints(data: bytes) -> list[int]:
    """SQLite's variable-length integers, one after another (big-endian groups of 7 bits, the
    ninth byte whole)."""
    out: list[int] = []
    i = 0
    while i < len(data):
        value = 0
        for n in range(9):
            byte = data[i]
            i += 1
            if n == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def json_list(values: list[str]) -> str:
    return json.dumps(values, ensure_ascii=False) if values else "[]"


def list_of(text: str) -> list[str]:
    """``json.loads`` of what ``json_list`` wrote.  Without a backslash no string in it has an
    escaped quote, so splitting on json.dumps's separator is exact, and a third of the cost of
    parsing (a search reads 15 to 50 rows)."""
    if text == "[]":
        return []
    if "\\" in text:
        values: list[str] = json.loads(text)
        return values
    return text[2:-2].split('", "')


def entity_of(row: Sequence[Any]) -> MemoryEntity:
    """A ``MemoryEntity`` from a row of ``COLUMNS`` (positional, in the dataclass's field order:
    every search reads rows)."""
    return MemoryEntity(row[1], row[2], list_of(row[3]), list_of(row[4]), *row[5:13])


def _marks(n: int) -> str:
    return ",".join("?" * n)


class Database:
    """One SQLite connection to a store's database, with the statements the store runs."""

    def __init__(self, path: Path, read_only: bool = False):
        """``read_only``: the file is read and never written (SQLite's ``mode=ro``): a fork reads
        its parent's store so, and the checkpoints and recounts a store makes of itself are left
        to the connections that write it."""
        self.path = path
        self.read_only = read_only
        if read_only:
            self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0,
                                        isolation_level=None, check_same_thread=False)
        else:
            self.conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
            self._writer_pragmas()
        # Read the database through a memory map: a search reads ~30 rows scattered over a
        # file far larger than the page cache, and a read() per page cost ~0.5 ms at 100k.
        # As much as SQLite allows (its build caps it: 2 GB here; a 1M store is ~2.5 GB).
        self.conn.execute("PRAGMA mmap_size=1099511627776")
        self.conn.execute("PRAGMA busy_timeout=30000")

    def _writer_pragmas(self) -> None:
        self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a commit is in the WAL once COMMIT returns, so it survives the
        # process being killed (what the SIGKILL test checks), though not a power cut; the only
        # fsyncs are at checkpoints.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        # The store checkpoints itself (``checkpoint``: after every CHECKPOINT_EVERY memories
        # written, before each index save, at close); SQLite's own automatic checkpoint is only
        # the backstop, at 32 MB rather than 4 MB, which it reached almost every batch.
        self.conn.execute("PRAGMA wal_autocheckpoint=8192")

    def meta(self) -> dict[str, str]:
        """The ``meta`` table (what ``create`` returns, for a store opened to read)."""
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def create(self) -> dict[str, str]:
        """Create the tables if missing (inside a write transaction); return ``meta``."""
        for stmt in _SCHEMA:
            self.conn.execute(stmt)
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def close(self) -> None:
        self.checkpoint()
        self.conn.close()

    def checkpoint(self) -> bool:
        """Copy what the WAL holds into the database file, with its fsync (PASSIVE: never waits
        for another connection's readers or writer).  True when the whole WAL went in.

        Until a checkpoint, a commit lives only in the ``-wal`` file beside the database: it
        survives the process being killed, but not the file being deleted (people do delete
        it after a crash), which would take every memory since the last checkpoint with it.
        """
        if self.read_only:
            return False
        try:
            busy, log_frames, done = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.OperationalError:  # locked by another connection's checkpoint: it does the work
            return False
        return bool(busy == 0 and log_frames == done)

    # --- transactions -------------------------------------------------------------------
    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """A write transaction, taken at once (``BEGIN IMMEDIATE``): nobody commits in between."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as exc:
                # SQLite's busy handler is not fair: with many writers (eight sweep workers) one
                # can wait out busy_timeout while the others take turns.  Waiting longer loses
                # nothing; giving up would lose the batch.
                if "locked" not in str(exc) or attempt == WRITE_ATTEMPTS - 1:
                    raise
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        """One read snapshot (nested inside a transaction already open: that one)."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    def data_version(self) -> int:
        """Changes when another connection commits (``PRAGMA data_version``)."""
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    # --- meta and counts ----------------------------------------------------------------
    def set_meta(self, values: dict[str, str]) -> None:
        self.conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", values.items())

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM memories").fetchone()[0])

    def empty(self) -> bool:
        return bool(self.conn.execute("SELECT NOT EXISTS (SELECT 1 FROM memories)").fetchone()[0] == 1)

    def recorded_count(self) -> int | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'count'").fetchone()
        return None if row is None else int(row[0])

    def record_count(self) -> None:
        """Record the number of rows (a store from before the count was kept, or one it drifted in);
        a store opened to read leaves it to a writer."""
        if self.read_only:
            return
        with self.write():
            count, recorded = self.count(), self.recorded_count()
            if recorded is not None:
                log.warning("memory store %s: the recorded count was %d, not %d; recorded again",
                            self.path.parent, recorded, count)
            self.set_meta({"count": str(count)})

    def add_to_count(self, delta: int) -> None:
        """Inside a write transaction: keep the recorded number of memories in step."""
        self.conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'count'", (delta,))

    # --- keys and the deletion log ------------------------------------------------------
    def seq_value(self, table: str) -> int:
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        return int(row[0]) if row else 0

    def max_key(self) -> int:
        return int(self.conn.execute("SELECT coalesce(max(key), 0) FROM memories").fetchone()[0])

    def max_deletion(self) -> int:
        return int(self.conn.execute("SELECT coalesce(max(seq), 0) FROM deletions").fetchone()[0])

    def deletions_after(self, seq: int) -> list[tuple[int, int]]:
        """``(seq, key)`` of the deletions logged after ``seq``, in order."""
        return self.conn.execute("SELECT seq, key FROM deletions WHERE seq > ? ORDER BY seq", (seq,)).fetchall()

    def next_keys(self, n: int) -> list[int]:
        """Keys for ``n`` new rows, chosen here (inside the write transaction, so no one else can)."""
        if not n:
            return []
        start = max(self.max_key(), self.seq_value("memories")) + 1  # AUTOINCREMENT: never reuse a key
        return list(range(start, start + n))

    # --- reading ------------------------------------------------------------------------
    def rows_after(self, key: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """Keys and content vectors of the rows above ``key``, in key order."""
        rows = self.conn.execute("SELECT key, vector FROM memories WHERE key > ? ORDER BY key", (key,)).fetchall()
        keys = np.array([r[0] for r in rows], dtype=np.uint64)
        vecs = (np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim)
                if rows else np.zeros((0, dim), dtype=np.float32))
        return keys, vecs

    def entities(self, keys: list[int]) -> dict[int, MemoryEntity]:
        """The entities of ``keys`` still stored, by key."""
        out: dict[int, MemoryEntity] = {}
        for chunk in range(0, len(keys), _SLICE):
            part = keys[chunk : chunk + _SLICE]
            for row in self.conn.execute(f"SELECT {COLUMNS} FROM memories WHERE key IN ({_marks(len(part))})",
                                         part):
                out[row[0]] = entity_of(row)
        return out

    def rows(self, keys: list[int], dim: int) -> tuple[list[int], list[MemoryEntity], np.ndarray]:
        """Entities and content vectors of ``keys`` in one read (keys no longer stored are dropped)."""
        found: dict[int, tuple[MemoryEntity, bytes]] = {}
        for chunk in range(0, len(keys), _SLICE):
            part = keys[chunk : chunk + _SLICE]
            for row in self.conn.execute(
                    f"SELECT {COLUMNS}, vector FROM memories WHERE key IN ({_marks(len(part))})", part):
                found[row[0]] = (entity_of(row), row[-1])
        present = [k for k in keys if k in found]
        vecs = (np.frombuffer(b"".join(found[k][1] for k in present), dtype=np.float32).reshape(len(present), -1)
                if present else np.zeros((0, dim), dtype=np.float32))
        return present, [found[k][0] for k in present], vecs

    def dedup_rows(self, keys: list[int]) -> Iterator[tuple[int, str, str, bytes | None, bytes]]:
        """``(key, content, tags, qvector, vector)`` of ``keys``: what dedup compares."""
        for chunk in range(0, len(keys), _SLICE):
            part = keys[chunk : chunk + _SLICE]
            yield from self.conn.execute(
                f"SELECT key, content, tags, qvector, vector FROM memories WHERE key IN ({_marks(len(part))})", part)

    def get(self, id: str) -> MemoryEntity | None:
        row = self.conn.execute(f"SELECT {COLUMNS} FROM memories WHERE id = ?", (str(id),)).fetchone()
        return None if row is None else entity_of(row)

    # Below this method ``list`` in an annotation is the method: the type is ``builtins.list``.
    def list(self, tag: str | None, limit: int | None, offset: int) -> list[MemoryEntity]:
        lim = -1 if limit is None else int(limit)
        if tag:
            rows = self.conn.execute(
                f"SELECT {', '.join('m.' + c.strip() for c in COLUMNS.split(','))} FROM memories m "
                "JOIN memory_tags g ON g.key = m.key WHERE g.tag = ? ORDER BY m.key DESC LIMIT ? OFFSET ?",
                (tag.strip().lower(), lim, offset))
        else:
            rows = self.conn.execute(f"SELECT {COLUMNS} FROM memories ORDER BY key DESC LIMIT ? OFFSET ?",
                                     (lim, offset))
        return [entity_of(r) for r in rows]

    def tags(self) -> dict[str, int]:
        return dict(self.conn.execute("SELECT tag, count(*) AS n FROM memory_tags GROUP BY tag ORDER BY n DESC, tag"))

    def vectors_by_id(self, ids: builtins.list[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for chunk in range(0, len(ids), _SLICE):
            part = ids[chunk : chunk + _SLICE]
            for i, v in self.conn.execute(f"SELECT id, vector FROM memories WHERE id IN ({_marks(len(part))})",
                                          part):
                out[i] = np.frombuffer(v, dtype=np.float32)
        return out

    def tag_keys(self, tags: Iterable[str], match_all: bool = False, limit: int = TAG_LIMIT) -> builtins.list[int]:
        """Keys of memories with any (all) of ``tags``: most matching tags, then newest, first."""
        wanted = sorted(norm_tags(tags))
        if not wanted:
            return []
        rows = self.conn.execute(
            f"SELECT key, count(*) AS n FROM memory_tags WHERE tag IN ({_marks(len(wanted))}) "
            f"GROUP BY key {'HAVING n = ?' if match_all else ''} ORDER BY n DESC, key DESC LIMIT ?",
            (*wanted, *([len(wanted)] if match_all else []), int(limit))).fetchall()
        return [r[0] for r in rows]

    def tagged_vectors(self, tags: builtins.list[str]) -> builtins.list[tuple[int, bytes]]:
        """``(key, vector)`` of every memory carrying one of ``tags`` (normalised)."""
        return self.conn.execute(
            f"SELECT DISTINCT m.key, m.vector FROM memory_tags g JOIN memories m ON m.key = g.key "
            f"WHERE g.tag IN ({_marks(len(tags))})", tags).fetchall()

    def tag_postings(self, tags: set[str], per_tag: int) -> dict[str, builtins.list[int]]:
        """The newest ``per_tag`` keys of each tag: one bounded index range per tag, many tags a statement."""
        out: dict[str, list[int]] = {}
        ordered = sorted(tags)
        for chunk in range(0, len(ordered), 200):  # SQLite allows 500 terms in a compound select
            part = ordered[chunk : chunk + 200]
            sql = " UNION ALL ".join(
                "SELECT * FROM (SELECT tag, key FROM memory_tags WHERE tag = ? ORDER BY key DESC LIMIT ?)"
                for _ in part)
            for tag, key in self.conn.execute(sql, [v for t in part for v in (t, per_tag)]):
                out.setdefault(tag, []).append(key)
        return out

    def lexical_keys(self, query: str, limit: int) -> builtins.list[tuple[int, float]]:
        """BM25 (FTS5, content 1.0, tags 0.8, questions 0.6) of the query's keywords, best first;
        scores are positive, higher is better."""
        kws = keywords(query)
        if not kws or limit <= 0:
            return []
        match = " OR ".join(f'"{k}"' for k in kws)
        return self.conn.execute(
            "SELECT rowid, -bm25(memories_fts, 1.0, 0.8, 0.6) AS s FROM memories_fts "
            "WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts, 1.0, 0.8, 0.6) LIMIT ?",
            (match, int(limit))).fetchall()

    def lexical_stats(self, terms: Iterable[str]) -> tuple[int, int, dict[str, int]]:
        """What FTS5's bm25 scores with: the rows, their tokens in all (FTS5's own counts, its
        "averages" record: a row count, then each column's tokens), and how many rows hold each
        of ``terms`` (a "_"-joined term as FTS5 reads it: its pieces as a phrase)."""
        row = self.conn.execute("SELECT block FROM memories_fts_data WHERE id = 1").fetchone()
        sizes = _varints(row[0]) if row is not None and row[0] else []
        hits = {t: int(self.conn.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?",
                                         (f'"{t}"',)).fetchone()[0]) for t in terms}
        return (sizes[0], sum(sizes[1:]), hits) if sizes else (0, 0, hits)

    # --- writing ------------------------------------------------------------------------
    def insert_many(self, entities: builtins.list[MemoryEntity], vecs: np.ndarray,
                    qvecs: builtins.list[np.ndarray | None], keys: builtins.list[int]) -> None:
        """Inside a write transaction: insert rows under ``keys``, one ``executemany`` per table
        (not a statement per memory), and count them."""
        if not entities:
            return
        self.conn.executemany(
            f"INSERT INTO memories(key, {COLUMNS[5:]}, vector, qvector) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(key, e.id, e.content, json_list(e.tags), json_list(e.potential_questions), e.created_at,
              e.c_score, e.o_score, e.r_score, e.e_score, e.p_score, e.a_score, e.t_score,
              vec.tobytes(), None if qvec is None else qvec.astype(np.float32).tobytes())
             for key, e, vec, qvec in zip(keys, entities, vecs, qvecs, strict=True)])
        self.conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, key) VALUES (?, ?)",
                              [(t, key) for key, e in zip(keys, entities, strict=True) for t in norm_tags(e.tags)])
        self.conn.executemany(
            "INSERT INTO memories_fts(rowid, content, tags, questions) VALUES (?,?,?,?)",
            [(key, fts_text([e.content]), fts_text(e.tags), fts_text(e.potential_questions))
             for key, e in zip(keys, entities, strict=True)])
        self.add_to_count(len(entities))

    def delete(self, id: str) -> tuple[int, int] | None:
        """Inside a write transaction: delete the memory ``id`` and log it; ``(key, seq)`` or None."""
        row = self.conn.execute("SELECT key FROM memories WHERE id = ?", (str(id),)).fetchone()
        if row is None:
            return None
        key = row[0]
        self.conn.execute("DELETE FROM memories WHERE key = ?", (key,))
        self.conn.execute("DELETE FROM memory_tags WHERE key = ?", (key,))
        self.conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (key,))
        self.add_to_count(-1)
        seq = self.conn.execute("INSERT INTO deletions(key) VALUES (?)", (key,)).lastrowid
        assert seq is not None  # an INSERT of one row always sets it
        return key, seq

    def reindex_text(self) -> int:
        """Inside a write transaction: rewrite the full-text index from the stored memories
        (after the text analysis changed, ``text.ANALYZER``)."""
        self.conn.execute("DELETE FROM memories_fts")
        rows = self.conn.execute("SELECT key, content, tags, questions FROM memories ORDER BY key")
        n = 0
        while part := rows.fetchmany(1024):
            self.conn.executemany(
                "INSERT INTO memories_fts(rowid, content, tags, questions) VALUES (?,?,?,?)",
                [(key, fts_text([content]), fts_text(json.loads(tags)), fts_text(json.loads(qs)))
                 for key, content, tags, qs in part])
            n += len(part)
        return n

    def reembed(self, embed: Callable[[Sequence[str]], np.ndarray]) -> int:
        """Inside a write transaction: recompute every row's vectors with ``embed(texts)``."""
        rows = self.conn.execute("SELECT key, content, questions FROM memories ORDER BY key").fetchall()
        for start in range(0, len(rows), 256):
            part = rows[start : start + 256]
            vecs = embed([r[1] for r in part])
            for (key, _, questions), v in zip(part, vecs, strict=True):
                qs = json.loads(questions)
                qv = embed(["\n".join(qs)])[0].tobytes() if qs else None
                self.conn.execute("UPDATE memories SET vector = ?, qvector = ? WHERE key = ?",
                                  (v.astype(np.float32).tobytes(), qv, key))
        return len(rows)
