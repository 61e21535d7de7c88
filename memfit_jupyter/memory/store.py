"""The memory store: SQLite (WAL) is the source of truth, a usearch index serves nearest
neighbours, and SQLite's FTS5 serves BM25.

Layout of a store directory::

    memory.sqlite3   entities, tags, vectors, the deletion log, the FTS5 table
    index.usearch    the HNSW index (keys are SQLite keys), written atomically
    index.json       what the index covers: embedder, dim, count, key and deletion marks
    index.lock       flock: the index file and its json are written and read as a pair

Keeping the index in step.  Keys only grow (AUTOINCREMENT; a batch takes the
next keys itself inside its write transaction) and every delete is logged, so an index is described by two high-water marks: the largest key and
the last deletion it has seen.  Catching up means adding the rows above one
mark and removing the deletions above the other.  A write does this inside
its SQLite write transaction (so nothing another process commits can slip
between), a read does it when ``PRAGMA data_version`` says another connection
committed.  On open the saved index is loaded and checked (dimension, count,
embedder, marks); a missing, truncated, stale or foreign index is rebuilt
from SQLite with a warning.  The index is saved on ``flush()``/``close()``
and after many changes (``SAVE_EVERY``, or a ``SAVE_SHARE``-th of the index),
never rebuilt on a normal open.

Writing a batch: a bounded read of the tag index finds the tag repeats and one
vector search (short beam) the near-duplicates by content, for the memories
whose repeats need not share their tags (2-of-3 dedup); rows go in with one
``executemany`` per table; the graph is built on a thread while SQLite writes
(usearch releases the GIL).  Every write keeps the number of memories in
``meta``, so that opening need not count the rows.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StoreError
from ..secrets import redact
from .dedup import DedupConfig, Probe, non_repeated, norm_tags
from .embedders import Embedder, get_embedder
from .entity import DIMENSIONS, MemoryEntity, SearchResults, clean_scores, now_iso
from .ranking import RankingConfig
from .text import keywords, tokens

log = logging.getLogger("memfit_jupyter.memory")

DB_NAME = "memory.sqlite3"
INDEX_NAME = "index.usearch"
SCHEMA_VERSION = "1"
#: Unsaved index changes after which the index is written out: at least this many, and at
#: least 1/SAVE_SHARE of the index, so that rewriting the whole file stays a small share of
#: the time spent adding (a save writes every vector, adding one walks the graph).  Until a
#: save, a reopened store catches up from SQLite, so nothing is lost, only re-added: after a
#: crash, at most a tenth of the index.  At 100k a save took 0.2-0.3 s, adding a tenth ~10 s.
SAVE_EVERY = 2_000
SAVE_SHARE = 10
MAX_CONTENT_BYTES = 64_000
#: Newest memories per tag that dedup looks at (a popular tag must not scan the whole store).
TAG_SCAN = 256
#: Batches at least this large build the graph while SQLite writes (a thread costs ~0.1 ms).
OVERLAP_FROM = 64
#: add_many writes larger batches in transactions of this many (batch dedup is quadratic).
ADD_CHUNK = 2_000

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
_COLUMNS = "key, id, content, tags, questions, created_at, c, o, r, e, p, a, t"


class _GraphAdd:
    """``index.add`` on a thread (usearch releases the GIL), with its outcome kept."""

    def __init__(self, index: Any, keys: list[int], vecs: np.ndarray):
        self._index, self._keys, self.error = index, keys, None
        self._thread = threading.Thread(target=self._run, args=(np.array(keys, dtype=np.uint64), vecs),
                                        name="memfit-index-add", daemon=True)
        self._thread.start()

    def _run(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        try:
            self._index.add(keys, vecs, threads=0)
        except BaseException as exc:  # reported by finish()
            self.error = exc

    def finish(self) -> bool:
        """Wait; True when every key went in."""
        self._thread.join()
        return self.error is None

    def undo(self) -> None:
        """Wait, then take the keys out again (their rows were not committed)."""
        self._thread.join()
        for key in self._keys:
            if self._index.contains(key):
                self._index.remove(key)


class StoreWarning(UserWarning):
    """Something about a store was repaired (e.g. its index was rebuilt)."""


@contextlib.contextmanager
def _flock(path: Path, exclusive: bool) -> Iterator[None]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _fts_text(parts: list[str]) -> str:
    return " ".join(tokens(" ".join(parts))) if parts else ""


def _clean_list(values: Any, what: str) -> list[str]:
    if isinstance(values, str):
        values = [v for v in values.split(",")] if what == "tags" else [values]
    out: list[str] = []
    for v in values or ():
        if not isinstance(v, str):
            raise ValueError(f"{what} must be strings, got {v!r}")
        v = v.strip()
        if v and v not in out:
            out.append(v.lower() if what == "tags" else v)
    return out


_SEP = "\n\x1e\n"


def _json_list(values: list[str]) -> str:
    return json.dumps(values, ensure_ascii=False) if values else "[]"


def _list_of(text: str) -> list[str]:
    """``json.loads`` of what ``_json_list`` wrote.  Without a backslash no string in it has an
    escaped quote, so splitting on json.dumps's separator is exact, and a third of the cost of
    parsing (a search reads 15 to 50 rows)."""
    if text == "[]":
        return []
    if "\\" in text:
        return json.loads(text)
    return text[2:-2].split('", "')


def _redact_all(entities: list[MemoryEntity]) -> None:
    """Redact every string of a batch in one pass (redaction scans the environment per call)."""
    parts = [s for e in entities for s in (e.content, *e.tags, *e.potential_questions)]
    if any("\x1e" in s for s in parts):
        clean = [redact(s) for s in parts]
    else:
        clean = redact(_SEP.join(parts)).split(_SEP)
    it = iter(clean)
    for e in entities:
        e.content = next(it)
        e.tags = [next(it) for _ in e.tags]
        e.potential_questions = [next(it) for _ in e.potential_questions]


class MemoryStore:
    """A durable store of memory entities.

    >>> store = MemoryStore("notes/.memfit")          # doctest: +SKIP
    >>> store.add("pytest needs -x to stop at the first failure", tags=["pytest"])
    >>> [(m.id, m.score) for m in store.search("stop pytest early", k=3)]

    ``embedder``: a name (hashing, minilm, litellm:<model>) or an object; by default
    the one the store was built with (hashing for a new store).  ``dedup``: a
    ``DedupConfig`` (or False to store every memory).  ``ranking``: hybrid
    (default), semantic or seed, or a ``RankingConfig``.  ``exact_below``: below
    this many memories a search is one matrix product over every vector (exact,
    and faster than the graph there; the vectors are kept in memory, 15 MB at
    10k of 384 dims).  ``connectivity``, ``expansion_add``, ``expansion_search``:
    the HNSW graph's parameters, chosen by tests/benchmarks/bench_memory.py.
    """

    def __init__(self, path: str | os.PathLike, embedder: str | Embedder | None = None, *,
                 dedup: DedupConfig | bool | None = None, ranking: str | RankingConfig = "hybrid",
                 exact_below: int = 10_000, connectivity: int = 32, expansion_add: int = 128,
                 expansion_search: int = 64):
        self.path = Path(path).expanduser()
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"memory store path {str(self.path)!r} is a file; a store is a directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self.dedup = DedupConfig(enabled=False) if dedup is False else (
            dedup if isinstance(dedup, DedupConfig) else DedupConfig())
        self.ranking = ranking if isinstance(ranking, RankingConfig) else RankingConfig(mode=ranking)
        self.exact_below = exact_below
        # Chosen at 100k structured 384-d vectors (tests/benchmarks/bench_memory.py): connectivity 32
        # with a beam of 64 gave recall@10 0.965 at 1.6 ms, where 16 needed a beam of 128 for 0.959
        # at 1.7 ms (exact numpy: 7.7 ms).  Smaller stores do not use the graph (exact_below).
        self._index_opts = {"connectivity": connectivity, "expansion_add": expansion_add,
                            "expansion_search": expansion_search}
        self._lock = threading.RLock()
        self._closed = False
        self._index: Any = None
        self._hw_key = 0
        self._hw_del = 0
        self._dirty = 0
        self._data_version = None
        # (index state it matches, keys, vectors): the exact scan of a small store
        self._exact: tuple[tuple[int, int, int], np.ndarray, np.ndarray] | None = None
        try:
            self._conn = sqlite3.connect(self.path / DB_NAME, timeout=30.0, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit is in the WAL once COMMIT returns, so it survives the
            # process being killed (what the SIGKILL test checks), though not a power cut; the only
            # fsyncs are at checkpoints.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            # Checkpoint (copy the WAL into the database, with its fsync) every 32 MB rather than
            # 4 MB: a batch of 1000 memories writes ~2.5 MB, so the default did it almost every add.
            self._conn.execute("PRAGMA wal_autocheckpoint=8192")
            # Read the database through a memory map: a search reads ~30 rows scattered over a
            # file far larger than the page cache, and a read() per page cost ~0.5 ms at 100k.
            # As much as SQLite allows (its build caps it: 2 GB here; a 1M store is ~2.5 GB).
            self._conn.execute("PRAGMA mmap_size=1099511627776")
            self._conn.execute("PRAGMA busy_timeout=30000")
            with self._write():
                for stmt in _SCHEMA:
                    self._conn.execute(stmt)
                meta = dict(self._conn.execute("SELECT key, value FROM meta"))
                self.embedder = self._choose_embedder(meta, embedder)
                if "count" not in meta:  # a store from before the count was kept: once
                    self._set_meta({"count": str(self._count())})
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open memory store {str(self.path)!r}: {exc}") from None
        self._open_index()

    # --- opening ------------------------------------------------------------------------
    def _choose_embedder(self, meta: dict[str, str], wanted: str | Embedder | None) -> Embedder:
        recorded = meta.get("embedder")
        if recorded is None or (wanted is not None and self._empty()):
            emb = get_embedder(wanted)
            self._set_meta({"embedder": emb.id, "dim": str(emb.dim), "schema": SCHEMA_VERSION})
            return emb
        if wanted is None:
            emb = get_embedder(recorded)
        else:
            emb = get_embedder(wanted)
            if emb.id != recorded:
                raise StoreError(
                    f"memory store {str(self.path)!r} was built with embedder {recorded!r} "
                    f"({meta.get('dim')} dims), not {emb.id!r}: open it without an embedder, or "
                    f"re-embed it with reindex (MemoryStore(path).reindex({emb.id!r}), "
                    f"%memfit_memory reindex --embedder {emb.id})")
        if str(emb.dim) != meta.get("dim"):
            raise StoreError(f"memory store {str(self.path)!r} records {meta.get('dim')} dims but embedder "
                             f"{emb.id!r} gives {emb.dim}: run reindex")
        return emb

    def _set_meta(self, values: dict[str, str]) -> None:
        self._conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", values.items())

    @property
    def _index_path(self) -> Path:
        return self.path / INDEX_NAME

    @property
    def _meta_path(self) -> Path:
        return self.path / "index.json"

    def _new_index(self):
        from usearch.index import Index

        # f32 explicitly (the default is not); ip on unit vectors is cosine, and faster than cos.
        return Index(ndim=self.embedder.dim, metric="ip", dtype="f32", **self._index_opts)

    def _open_index(self) -> None:
        with self._lock:
            problem = self._load_saved_index()
            if problem is None:
                try:
                    with self._read():  # one snapshot: another process may be adding meanwhile
                        added = self._catch_up()
                        # counting the rows took 0.15 s at 100k, longer than loading the index: the
                        # count every write keeps is trusted when it agrees with the index
                        recorded = self._recorded_count()
                        count = recorded if recorded == len(self._index) else self._count()
                    if recorded != count:
                        self._record_count()
                except Exception as exc:  # e.g. a deletion the index never had: rebuild
                    problem = f"out of step with the database ({exc})"
                else:
                    if len(self._index) != count:
                        problem = f"out of step with the database ({len(self._index)} vectors, {count} memories)"
                    elif added > SAVE_EVERY:
                        self.flush()
            if problem is not None:
                if problem != "new":
                    warnings.warn(f"memory index {str(self._index_path)!r} is {problem}: rebuilding it from "
                                  "SQLite", StoreWarning, stacklevel=3)
                    log.warning("rebuilding memory index %s: %s", self._index_path, problem)
                self._rebuild()

    def _load_saved_index(self) -> str | None:
        """Load the saved index; return why it cannot be used, or None."""
        if not self._index_path.exists() or not self._meta_path.exists():
            self._index = self._new_index()
            return "new" if self._empty() else "missing"
        try:
            with _flock(self.path / "index.lock", exclusive=False):
                meta = json.loads(self._meta_path.read_text())
                size = self._index_path.stat().st_size
                if meta.get("size") != size:
                    return f"truncated or replaced ({size} bytes, {meta.get('size')} expected)"
                index = self._new_index()
                index.load(str(self._index_path))
        except Exception as exc:
            return f"unreadable ({type(exc).__name__}: {exc})"
        # load() silently adopts the file's dimension: check everything it says.
        if meta.get("embedder") != self.embedder.id or index.ndim != self.embedder.dim:
            return f"built by another embedder ({meta.get('embedder')}, {index.ndim} dims)"
        if len(index) != meta.get("count"):
            return f"inconsistent ({len(index)} vectors, {meta.get('count')} recorded)"
        max_key = self._conn.execute("SELECT coalesce(max(key), 0) FROM memories").fetchone()[0]
        max_seq = self._conn.execute("SELECT coalesce(max(seq), 0) FROM deletions").fetchone()[0]
        if meta.get("hw_key", 0) > max(max_key, self._seq_value("memories")) or meta.get("hw_del", 0) > max_seq:
            return "stale (newer than the database)"
        self._index, self._hw_key, self._hw_del = index, int(meta["hw_key"]), int(meta["hw_del"])
        return None

    def _seq_value(self, table: str) -> int:
        row = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        return int(row[0]) if row else 0

    def _rebuild(self) -> None:
        self._index = self._new_index()
        self._exact = None  # reindex keeps the keys but changes the vectors
        self._hw_key = self._hw_del = 0
        with self._read():
            self._hw_del = self._conn.execute("SELECT coalesce(max(seq), 0) FROM deletions").fetchone()[0]
            keys, vecs = self._rows_after(0)
        if len(keys):
            self._index.add(keys, vecs, threads=0)
            self._hw_key = int(keys.max())
        self._dirty = len(keys) or 1
        self.flush()

    def _rows_after(self, key: int) -> tuple[np.ndarray, np.ndarray]:
        rows = self._conn.execute("SELECT key, vector FROM memories WHERE key > ? ORDER BY key", (key,)).fetchall()
        keys = np.array([r[0] for r in rows], dtype=np.uint64)
        vecs = (np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), self.embedder.dim)
                if rows else np.zeros((0, self.embedder.dim), dtype=np.float32))
        return keys, vecs

    def _catch_up(self) -> int:
        """Apply what other processes committed since this index last looked. Returns rows added."""
        before = self._index_state()
        dels = self._conn.execute("SELECT seq, key FROM deletions WHERE seq > ? ORDER BY seq",
                                  (self._hw_del,)).fetchall()
        for seq, key in dels:
            if key <= self._hw_key and self._index.contains(key):
                self._index.remove(key)
            self._hw_del = seq
        keys, vecs = self._rows_after(self._hw_key)
        if len(keys):
            fresh = ~np.asarray(self._index.contains(keys), dtype=bool).reshape(-1)
            if fresh.any():
                self._index.add(keys[fresh], vecs[fresh], threads=0)
            self._hw_key = int(keys.max())
        self._dirty += len(keys) + len(dels)
        if len(keys) and not dels and fresh.all():
            self._extend_exact(before, keys, vecs)
        return len(keys)

    def _sync(self) -> None:
        """Catch up if another connection committed since we last looked (cheap when none did)."""
        self._check_open()
        version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            with self._read():
                self._catch_up()
            self._data_version = version

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _read(self) -> Iterator[None]:
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {str(self.path)!r} is closed")

    def _count(self) -> int:
        return self._conn.execute("SELECT count(*) FROM memories").fetchone()[0]

    def _empty(self) -> bool:
        return self._conn.execute("SELECT NOT EXISTS (SELECT 1 FROM memories)").fetchone()[0] == 1

    def _recorded_count(self) -> int | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'count'").fetchone()
        return None if row is None else int(row[0])

    def _record_count(self) -> None:
        """Record the number of rows (a store from before the count was kept, or one it drifted in)."""
        with self._write():
            count, recorded = self._count(), self._recorded_count()
            if recorded is not None:
                log.warning("memory store %s: the recorded count was %d, not %d; recorded again", self.path,
                            recorded, count)
            self._set_meta({"count": str(count)})

    def _add_to_count(self, delta: int) -> None:
        """Inside a write transaction: keep the recorded number of memories in step."""
        self._conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'count'", (delta,))

    # --- writing ------------------------------------------------------------------------
    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None, **extra: Any) -> str | None:
        """Store one memory; return its id, or None when it duplicates a stored one (2 of 3)."""
        return self.add_many([{"content": content, "tags": tags, "questions": questions,
                               "scores": scores, **extra}])[0]

    def add_many(self, items: Iterable[dict[str, Any] | MemoryEntity], vectors: np.ndarray | None = None,
                 ) -> list[str | None]:
        """Store many memories (the seed's batch dedup); ids, None for duplicates.

        Up to ``ADD_CHUNK`` memories are written in one transaction (larger batches in
        several, each all or nothing).

        Each item is a ``MemoryEntity`` or a dict with content, tags, questions
        (or potential_questions), scores, and optionally id and created_at.
        ``vectors`` (unit rows) skips embedding the content.
        """
        stamp = now_iso()  # one clock read for the batch
        entities = [self._prepare(item, stamp) for item in items]
        if not entities:
            return []
        _redact_all(entities)
        if vectors is None:
            vecs = self.embedder.embed([e.content for e in entities])
        else:
            vecs = np.ascontiguousarray(vectors, dtype=np.float32)
            if vecs.shape != (len(entities), self.embedder.dim):
                raise ValueError(f"vectors must have shape ({len(entities)}, {self.embedder.dim}), got {vecs.shape}")
        qvecs = self._question_vectors(entities)
        probes = [Probe(norm_tags(e.tags), qvecs[i], vecs[i]) for i, e in enumerate(entities)]
        kept: list[int] = []
        for start in range(0, len(entities), ADD_CHUNK):
            part = range(start, min(len(entities), start + ADD_CHUNK))
            kept += [start + i for i in self._add_chunk([entities[j] for j in part], vecs[part.start : part.stop],
                                                        [qvecs[j] for j in part], [probes[j] for j in part])]
        ids: list[str | None] = [None] * len(entities)
        for i in kept:
            ids[i] = entities[i].id
        return ids

    def _add_chunk(self, entities: list[MemoryEntity], vecs: np.ndarray, qvecs: list[np.ndarray | None],
                   probes: list[Probe]) -> list[int]:
        """One transaction: dedup against the store and the chunk, insert, then index. Returns
        the positions kept.  A later chunk sees this one through the index, so dedup across
        chunks is the same as within one."""
        with self._lock:
            self._check_open()
            before = self._index_state()
            graph: _GraphAdd | None = None
            try:
                with self._write():
                    self._catch_up()
                    before = self._index_state()
                    kept = (non_repeated(probes, self._stored_candidates(probes), self.dedup)
                            if self.dedup.enabled else list(range(len(entities))))
                    keys = self._next_keys(len(kept))
                    if len(keys) >= OVERLAP_FROM:
                        # usearch releases the GIL while it inserts: build the graph while SQLite
                        # writes the rows (undone below if the transaction fails).
                        graph = _GraphAdd(self._index, keys, vecs[kept])
                    self._insert_many([entities[i] for i in kept], vecs[kept], [qvecs[i] for i in kept], keys)
            except BaseException as exc:
                if graph is not None:
                    graph.undo()
                if isinstance(exc, sqlite3.IntegrityError):
                    raise StoreError(f"cannot add to the memory store: {exc}") from None
                raise
            # The commit above is durable once it returns (WAL, synchronous=NORMAL survives the
            # process being killed, which is what matters here; not a power cut); the index is
            # derived data, caught up from SQLite on open.
            if keys:
                if graph is None or not graph.finish():
                    fresh = [k for k in keys if not self._index.contains(k)] if graph else keys
                    self._index.add(np.array(fresh, dtype=np.uint64), vecs[kept][[keys.index(k) for k in fresh]],
                                    threads=0)
                self._hw_key = max(self._hw_key, max(keys))
                self._dirty += len(keys)
                self._extend_exact(before, np.array(keys, dtype=np.uint64), vecs[kept])
            if self._dirty >= max(SAVE_EVERY, len(self._index) // SAVE_SHARE):
                self.flush()
        return kept

    def _prepare(self, item: dict[str, Any] | MemoryEntity, stamp: str) -> MemoryEntity:
        if isinstance(item, MemoryEntity):
            item = item.to_dict()
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ValueError("a memory needs non-empty text content")
        content = content.strip()
        if len(content) * 4 > MAX_CONTENT_BYTES and len(content.encode()) > MAX_CONTENT_BYTES:
            raise ValueError(f"a memory holds at most {MAX_CONTENT_BYTES} bytes; this one has "
                             f"{len(content.encode())}: split it")
        scores = item.get("scores")
        if scores is None and any(f"{k}_score" in item for k in DIMENSIONS):
            scores = {k: item[f"{k}_score"] for k in DIMENSIONS if f"{k}_score" in item}
        sc = clean_scores(scores)
        return MemoryEntity(
            id=str(item.get("id") or os.urandom(8).hex()), content=content,  # 64 random bits, as uuid4().hex[:16]
            tags=_clean_list(item.get("tags"), "tags"),
            potential_questions=_clean_list(item.get("questions") or item.get("potential_questions"), "questions"),
            created_at=str(item.get("created_at") or stamp),
            c_score=sc["c"], o_score=sc["o"], r_score=sc["r"], e_score=sc["e"], p_score=sc["p"],
            a_score=sc["a"], t_score=sc["t"])

    def _question_vectors(self, entities: list[MemoryEntity]) -> list[np.ndarray | None]:
        with_q = [i for i, e in enumerate(entities) if e.potential_questions]
        out: list[np.ndarray | None] = [None] * len(entities)
        if with_q:
            qv = self.embedder.embed(["\n".join(entities[i].potential_questions) for i in with_q])
            for row, i in enumerate(with_q):
                out[i] = qv[row]
        return out

    def _stored_candidates(self, probes: list[Probe]) -> list[list[Probe]]:
        """For each probe, the stored memories it could repeat.

        With two of three needed, a duplicate either has its content at the
        threshold (so it is among the probe's nearest neighbours) or shares
        enough tags to reach the Jaccard threshold.  The second kind comes from
        the tag index, reading at most ``TAG_SCAN`` of the newest memories per
        tag so that a popular tag does not scan the store.  The first kind needs
        a vector search, with a beam as short as the number of neighbours asked
        for: near-duplicates sit right next to the probe (at 100k, 2,000 planted
        at cosine 0.9 and 2,000 at 0.95 were all found with a beam of 10, which
        cost 0.55-0.7 of a beam of 16: tests/benchmarks/dedup_beam.py; the search's
        default beam cost half as much as the add itself).  Its distances already say which neighbours reach the
        content threshold, so only those rows are read back.

        The vector search is skipped for a probe whose every repeat must share its
        tags (see ``_tags_decide``) when the tag index gave all of them.
        """
        cfg = self.dedup
        n = len(probes)
        cand: list[set[int]] = [set() for _ in range(n)]
        postings = self._tag_postings({t for p in probes for t in p.tags})
        for i, p in enumerate(probes):
            if not p.tags:
                continue  # an untagged memory only repeats by content (tags then count 0 or not at all)
            need = max(1, int(np.ceil(cfg.tag_overlap_threshold * len(p.tags) - 1e-9)))
            hits: dict[int, int] = {}
            for tag in p.tags:
                for key in postings.get(tag, ()):
                    hits[key] = hits.get(key, 0) + 1
            cand[i].update(key for key, c in hits.items() if c >= need)
        search = [i for i, p in enumerate(probes) if not self._tags_decide(p, postings)]
        size = len(self._index)
        if search and size and size < self.exact_below:
            self._exact_candidates([probes[i] for i in search], min(cfg.candidates, size),
                                   [cand[i] for i in search])
        elif search and size:
            k = min(cfg.candidates, size)
            beam = self._index.expansion_search
            self._index.expansion_search = k
            try:
                found = self._index.search(np.stack([probes[i].vec for i in search]), k, threads=0)
            finally:
                self._index.expansion_search = beam
            m = len(search)
            keys = np.asarray(found.keys).reshape(m, -1)
            sims = 1.0 - np.asarray(found.distances, dtype=np.float64).reshape(m, -1)
            counts = np.asarray(found.counts).reshape(-1) if m > 1 else np.array([keys.shape[1]])
            valid = np.arange(keys.shape[1])[None, :] < counts[:, None]
            if cfg.min_matches > 1:  # one hit alone (e.g. questions) only counts when one is enough
                valid &= sims >= cfg.content_similarity_threshold - 1e-6
            for r, j in zip(*np.nonzero(valid), strict=True):
                cand[search[r]].add(int(keys[r, j]))
        wanted = sorted(set().union(*cand))
        stored: dict[int, Probe] = {}
        for chunk in range(0, len(wanted), 500):
            part = wanted[chunk : chunk + 500]
            for key, tags, qv, v in self._conn.execute(
                    f"SELECT key, tags, qvector, vector FROM memories WHERE key IN ({','.join('?' * len(part))})",
                    part):
                stored[key] = Probe(norm_tags(json.loads(tags)),
                                    np.frombuffer(qv, dtype=np.float32) if qv else None,
                                    np.frombuffer(v, dtype=np.float32))
        return [[stored[k] for k in sorted(c) if k in stored] for c in cand]

    def _tags_decide(self, probe: Probe, postings: dict[str, list[int]]) -> bool:
        """True when every memory that ``probe`` could repeat shares its tags, and the tag index
        returned all memories with those tags (no tag reached ``TAG_SCAN``).

        That holds for a tagged probe without questions when two or more dimensions must match:
        against any stored memory its questions either cannot be compared (then tags and content
        are what is left, and both must match) or compare as 0.0 (a miss), so a repeat must reach
        the tag threshold, and a Jaccard of at least t needs at least t of the probe's own tags.
        """
        cfg = self.dedup
        return (cfg.min_matches >= 2 and cfg.tag_overlap_threshold > 1e-6 and bool(probe.tags)
                and probe.qvec is None and all(len(postings.get(t, ())) < TAG_SCAN for t in probe.tags))

    def _exact_candidates(self, probes: list[Probe], k: int, cand: list[set[int]]) -> None:
        """The ``k`` nearest stored memories of each probe by one matrix product over the small
        store's vectors (kept for its exact search): exact, and at 10k it cost a third of the
        graph search it replaces.  With two of three needed, only those at the content threshold."""
        keys, mat = self._exact_matrix()
        thr = self.dedup.content_similarity_threshold - 1e-6 if self.dedup.min_matches > 1 else None
        for start in range(0, len(probes), 1024):  # bounds the (probes x memories) temporary
            sims = np.stack([p.vec for p in probes[start : start + 1024]]) @ mat.T
            if thr is None:
                top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < sims.shape[1] else None
                for i in range(len(sims)):
                    cand[start + i].update(int(x) for x in (keys[top[i]] if top is not None else keys))
                continue
            # near-duplicates are rare: find the few rows with one first (a row maximum is
            # cheaper than a mask and its nonzero over the whole matrix)
            hot = np.flatnonzero(sims.max(axis=1) >= thr)
            rows, cols = np.nonzero(sims[hot] >= thr)
            hits: dict[int, list[int]] = {}
            for r, c in zip(hot[rows].tolist(), cols.tolist(), strict=True):
                hits.setdefault(r, []).append(c)
            for r, cs in hits.items():
                if len(cs) > k:  # the k closest, as the graph search would return
                    cs = sorted(cs, key=lambda c, r=r: -sims[r, c])[:k]
                cand[start + r].update(int(keys[c]) for c in cs)

    def _tag_postings(self, tags: set[str]) -> dict[str, list[int]]:
        """The newest ``TAG_SCAN`` keys of each tag: one bounded index range per tag, many tags a statement."""
        out: dict[str, list[int]] = {}
        ordered = sorted(tags)
        for chunk in range(0, len(ordered), 200):  # SQLite allows 500 terms in a compound select
            part = ordered[chunk : chunk + 200]
            sql = " UNION ALL ".join(
                "SELECT * FROM (SELECT tag, key FROM memory_tags WHERE tag = ? ORDER BY key DESC LIMIT ?)"
                for _ in part)
            for tag, key in self._conn.execute(sql, [v for t in part for v in (t, TAG_SCAN)]):
                out.setdefault(tag, []).append(key)
        return out

    def _next_keys(self, n: int) -> list[int]:
        """Keys for ``n`` new rows, chosen here (inside the write transaction, so no one else can)."""
        if not n:
            return []
        top = self._conn.execute("SELECT coalesce(max(key), 0) FROM memories").fetchone()[0]
        start = max(top, self._seq_value("memories")) + 1  # AUTOINCREMENT: never reuse a deleted key
        return list(range(start, start + n))

    def _insert_many(self, entities: list[MemoryEntity], vecs: np.ndarray,
                     qvecs: list[np.ndarray | None], keys: list[int]) -> None:
        """Insert rows under ``keys``: one ``executemany`` per table, not a statement per memory."""
        if not entities:
            return
        self._conn.executemany(
            f"INSERT INTO memories(key, {_COLUMNS[5:]}, vector, qvector) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [(key, e.id, e.content, _json_list(e.tags), _json_list(e.potential_questions), e.created_at,
              e.c_score, e.o_score, e.r_score, e.e_score, e.p_score, e.a_score, e.t_score,
              vec.tobytes(), None if qvec is None else qvec.astype(np.float32).tobytes())
             for key, e, vec, qvec in zip(keys, entities, vecs, qvecs, strict=True)])
        self._conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, key) VALUES (?, ?)",
                               [(t, key) for key, e in zip(keys, entities, strict=True) for t in norm_tags(e.tags)])
        self._conn.executemany(
            "INSERT INTO memories_fts(rowid, content, tags, questions) VALUES (?,?,?,?)",
            [(key, _fts_text([e.content]), _fts_text(e.tags), _fts_text(e.potential_questions))
             for key, e in zip(keys, entities, strict=True)])
        self._add_to_count(len(entities))

    def delete(self, id: str) -> bool:
        """Delete a memory; False when there is none with this id."""
        with self._lock:
            self._check_open()
            with self._write():
                self._catch_up()
                row = self._conn.execute("SELECT key FROM memories WHERE id = ?", (str(id),)).fetchone()
                if row is None:
                    return False
                key = row[0]
                self._conn.execute("DELETE FROM memories WHERE key = ?", (key,))
                self._conn.execute("DELETE FROM memory_tags WHERE key = ?", (key,))
                self._conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (key,))
                self._add_to_count(-1)
                seq = self._conn.execute("INSERT INTO deletions(key) VALUES (?)", (key,)).lastrowid
            if self._index.contains(key):
                self._index.remove(key)
            self._hw_del = max(self._hw_del, seq)
            self._dirty += 1
            return True

    # --- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            return self._count()

    def _entities(self, keys: list[int]) -> dict[int, MemoryEntity]:
        out: dict[int, MemoryEntity] = {}
        for chunk in range(0, len(keys), 500):
            part = keys[chunk : chunk + 500]
            rows = self._conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE key IN ({','.join('?' * len(part))})", part)
            for row in rows:
                out[row[0]] = self._entity(row)
        return out

    @staticmethod
    def _entity(row: tuple) -> MemoryEntity:
        # positional, in the dataclass's field order (every search reads rows)
        return MemoryEntity(row[1], row[2], _list_of(row[3]), _list_of(row[4]), *row[5:13])

    def get(self, id: str) -> MemoryEntity | None:
        """The memory with this id, or None."""
        with self._lock:
            self._check_open()
            row = self._conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (str(id),)).fetchone()
            return None if row is None else self._entity(row)

    def list(self, tag: str | None = None, limit: int | None = None, offset: int = 0) -> list[MemoryEntity]:
        """Memories, newest first, optionally only those with ``tag``."""
        with self._lock:
            self._check_open()
            lim = -1 if limit is None else int(limit)
            if tag:
                rows = self._conn.execute(
                    f"SELECT {', '.join('m.' + c.strip() for c in _COLUMNS.split(','))} FROM memories m "
                    "JOIN memory_tags g ON g.key = m.key WHERE g.tag = ? ORDER BY m.key DESC LIMIT ? OFFSET ?",
                    (tag.strip().lower(), lim, offset))
            else:
                rows = self._conn.execute(f"SELECT {_COLUMNS} FROM memories ORDER BY key DESC LIMIT ? OFFSET ?",
                                          (lim, offset))
            return [self._entity(r) for r in rows]

    def tags(self) -> dict[str, int]:
        """Every tag with how many memories carry it, most used first."""
        with self._lock:
            self._check_open()
            return dict(self._conn.execute(
                "SELECT tag, count(*) AS n FROM memory_tags GROUP BY tag ORDER BY n DESC, tag"))

    def search_by_tags(self, tags: Iterable[str], match_all: bool = False, limit: int = 20) -> list[MemoryEntity]:
        """Seed ``SearchByTags``: memories carrying any (or all) of ``tags``, most matches, then newest, first."""
        with self._lock:
            self._check_open()
            keys = self._tag_keys(tags, match_all, limit)
            found = self._entities(keys)
            return [found[k] for k in keys if k in found]

    def _tag_keys(self, tags: Iterable[str], match_all: bool = False, limit: int = 20) -> list[int]:
        wanted = sorted(norm_tags(tags))
        if not wanted:
            return []
        rows = self._conn.execute(
            f"SELECT key, count(*) AS n FROM memory_tags WHERE tag IN ({','.join('?' * len(wanted))}) "
            f"GROUP BY key {'HAVING n = ?' if match_all else ''} ORDER BY n DESC, key DESC LIMIT ?",
            (*wanted, *([len(wanted)] if match_all else []), int(limit))).fetchall()
        return [r[0] for r in rows]

    def _rows(self, keys: list[int]) -> tuple[list[int], list[MemoryEntity], np.ndarray]:
        """Entities and content vectors of ``keys`` in one read (keys no longer stored are dropped)."""
        found: dict[int, tuple[MemoryEntity, bytes]] = {}
        for chunk in range(0, len(keys), 500):
            part = keys[chunk : chunk + 500]
            for row in self._conn.execute(
                    f"SELECT {_COLUMNS}, vector FROM memories WHERE key IN ({','.join('?' * len(part))})", part):
                found[row[0]] = (self._entity(row), row[-1])
        present = [k for k in keys if k in found]
        vecs = (np.frombuffer(b"".join(found[k][1] for k in present), dtype=np.float32).reshape(len(present), -1)
                if present else np.zeros((0, self.embedder.dim), dtype=np.float32))
        return present, [found[k][0] for k in present], vecs

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored content vectors of these memories, by id."""
        ids = list(ids)
        out: dict[str, np.ndarray] = {}
        with self._lock:
            self._check_open()
            for chunk in range(0, len(ids), 500):
                part = ids[chunk : chunk + 500]
                for i, v in self._conn.execute(
                        f"SELECT id, vector FROM memories WHERE id IN ({','.join('?' * len(part))})", part):
                    out[i] = np.frombuffer(v, dtype=np.float32)
        return out

    def embed_query(self, query: str) -> np.ndarray:
        return self.embedder.embed([query])[0]

    def search_by_semantics(self, query: str | np.ndarray, limit: int = 15,
                            tags: Iterable[str] | None = None) -> list[tuple[MemoryEntity, float]]:
        """Seed ``SearchBySemantics``: the nearest memories to ``query`` with their cosine similarity.
        With ``tags``, only memories that carry one of them."""
        q = self.embed_query(query) if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        with self._lock:
            self._sync()
            pairs = self._nearest(q, limit, tags)
            found = self._entities([k for k, _ in pairs])
            return [(found[k], s) for k, s in pairs if k in found]

    def _nearest(self, q: np.ndarray, limit: int, tags: Iterable[str] | None) -> list[tuple[int, float]]:
        if tags is not None:
            wanted = sorted(norm_tags(tags))
            if not wanted:
                return []
            rows = self._conn.execute(
                f"SELECT DISTINCT m.key, m.vector FROM memory_tags g JOIN memories m ON m.key = g.key "
                f"WHERE g.tag IN ({','.join('?' * len(wanted))})", wanted).fetchall()
            if not rows:
                return []
            mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            sims = mat @ q
            order = np.argsort(-sims, kind="stable")[:limit]
            return [(rows[i][0], float(sims[i])) for i in order]
        size = len(self._index)
        if size == 0 or limit <= 0:
            return []
        if size >= self.exact_below:
            found = self._index.search(q, min(limit, size))
            return [(k, 1.0 - d) for k, d in zip(found.keys.tolist(), found.distances.tolist(), strict=True)]
        # A small store: one matrix product over every vector beats walking the graph (and is exact).
        keys, mat = self._exact_matrix()
        sims = mat @ q
        top = np.argpartition(-sims, limit - 1)[:limit] if limit < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(int(keys[i]), float(sims[i])) for i in top]

    def _extend_exact(self, before: tuple[int, int, int], keys: np.ndarray, vecs: np.ndarray) -> None:
        """Append rows just indexed to the exact-scan matrix, if it matched the index before them
        (otherwise it is re-read when next needed)."""
        if self._exact is not None and self._exact[0] == before and len(self._index) < self.exact_below:
            self._exact = (self._index_state(), np.concatenate([self._exact[1], keys]),
                           np.concatenate([self._exact[2], vecs]))

    def _index_state(self) -> tuple[int, int, int]:
        return (self._hw_key, self._hw_del, len(self._index))

    def _exact_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Keys and vectors of a small store, read once and kept while the index is unchanged."""
        state = self._index_state()
        if self._exact is None or self._exact[0] != state:
            keys, vecs = self._rows_after(0)
            self._exact = (state, keys, vecs)
        return self._exact[1], self._exact[2]

    def search_lexical(self, query: str, limit: int = 15) -> list[tuple[MemoryEntity, float]]:
        """BM25 (SQLite FTS5) over content, tags and questions; higher scores are better."""
        with self._lock:
            self._check_open()
            rows = self._lexical_keys(query, limit)
            found = self._entities([r[0] for r in rows])
            return [(found[k], float(s)) for k, s in rows if k in found]

    def _lexical_keys(self, query: str, limit: int) -> list[tuple[int, float]]:
        kws = keywords(query)
        if not kws or limit <= 0:
            return []
        match = " OR ".join(f'"{k}"' for k in kws)
        return self._conn.execute(
            "SELECT rowid, -bm25(memories_fts, 1.0, 0.8, 0.6) AS s FROM memories_fts "
            "WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts, 1.0, 0.8, 0.6) LIMIT ?",
            (match, int(limit))).fetchall()

    def search(self, query: str, k: int = 10, bytes_limit: int | None = None,
               tags: Iterable[str] | None = None, *, llm: Any = None, disable_ai: bool | None = None,
               ranking: str | RankingConfig | None = None, iteration: int = 0) -> SearchResults:
        """Seed 000 §3.3: tag search, semantic (and lexical) search, dedup, ranking, byte limit.

        ``tags`` restricts the results to memories carrying one of them.  With
        ``llm`` (a run's ``LLMClient``) the model first picks relevant tags
        (the "tags" purpose) unless ``disable_ai``.  Each result has ``.id``,
        ``.content``, ``.score`` and ``.breakdown``.
        """
        from .search import search_memory

        return search_memory(self, query, k=k, bytes_limit=bytes_limit, tags=tags, llm=llm,
                             disable_ai=disable_ai if disable_ai is not None else llm is None,
                             ranking=ranking, iteration=iteration)

    def failures(self, kind: str | None = None, limit: int | None = None) -> list[MemoryEntity]:
        """The failure diary: memories tagged ``failures`` (of one kind: ``failures:<kind>``)."""
        return self.list(tag=f"failures:{kind.strip()}" if kind else "failures", limit=limit)

    # --- maintenance --------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """Path, count, embedder, dims, index size."""
        with self._lock:
            self._sync()
            return {"path": str(self.path), "count": self._count(), "embedder": self.embedder.id,
                    "dims": self.embedder.dim, "indexed": len(self._index), "ranking": self.ranking.mode,
                    "tags": len(self.tags())}

    def flush(self) -> None:
        """Write the index out (atomically, with its description) if it has unsaved changes."""
        with self._lock:
            if self._closed or not self._dirty:
                return
            with _flock(self.path / "index.lock", exclusive=True):
                tmp = self._index_path.with_name(f".{INDEX_NAME}.{os.getpid()}.tmp")
                self._index.save(str(tmp))
                os.replace(tmp, self._index_path)
                meta = {"embedder": self.embedder.id, "dim": self.embedder.dim, "count": len(self._index),
                        "hw_key": self._hw_key, "hw_del": self._hw_del,
                        "size": self._index_path.stat().st_size}
                tmp_meta = self._meta_path.with_name(f".index.json.{os.getpid()}.tmp")
                tmp_meta.write_text(json.dumps(meta))
                os.replace(tmp_meta, self._meta_path)
            self._dirty = 0

    def reindex(self, embedder: str | Embedder | None = None) -> int:
        """Re-embed every memory (with ``embedder``, or the current one) and rebuild the index."""
        emb = get_embedder(embedder) if embedder is not None else self.embedder
        with self._lock:
            self._check_open()
            with self._write():
                rows = self._conn.execute("SELECT key, content, questions FROM memories ORDER BY key").fetchall()
                for start in range(0, len(rows), 256):
                    part = rows[start : start + 256]
                    vecs = emb.embed([r[1] for r in part])
                    for (key, _, questions), v in zip(part, vecs, strict=True):
                        qs = json.loads(questions)
                        qv = emb.embed(["\n".join(qs)])[0].tobytes() if qs else None
                        self._conn.execute("UPDATE memories SET vector = ?, qvector = ? WHERE key = ?",
                                           (v.astype(np.float32).tobytes(), qv, key))
                self._set_meta({"embedder": emb.id, "dim": str(emb.dim)})
            self.embedder = emb
            self._rebuild()
            return len(rows)

    def export(self, path: str | os.PathLike) -> int:
        """Write every memory to a JSON Lines file (no vectors: an import re-embeds). Returns the count."""
        target = Path(path)
        tmp = target.with_name(f".{target.name}.tmp")
        n = 0
        with open(tmp, "w", encoding="utf-8") as fh:
            for m in reversed(self.list()):
                fh.write(json.dumps(m.to_dict(), ensure_ascii=False) + "\n")
                n += 1
        os.replace(tmp, target)
        return n

    def import_(self, path: str | os.PathLike) -> dict[str, int]:
        """Add the memories of a JSON Lines export (ids kept when free); duplicates are skipped."""
        items = []
        for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            if not isinstance(data, dict) or "content" not in data:
                raise ValueError(f"{path}:{lineno}: a memory needs a content field")
            if data.get("id") and self.get(str(data["id"])) is not None:
                data = {**data, "id": None}
            items.append(data)
        ids = self.add_many(items) if items else []
        added = sum(1 for i in ids if i)
        return {"added": added, "duplicates": len(ids) - added}

    def close(self) -> None:
        """Save the index and close the database. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            finally:
                self._closed = True
                self._conn.close()
                _OPEN.pop(str(self.path.resolve()), None)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._count()} memories"
        return f"<MemoryStore {str(self.path)!r} {state} embedder={self.embedder.id}>"


_OPEN: dict[str, MemoryStore] = {}
_OPEN_LOCK = threading.Lock()


def open_store(path: str | os.PathLike, **options: Any) -> MemoryStore:
    """The process's shared store at ``path`` (opened once; the agent and the magic share it)."""
    key = str(Path(path).expanduser().resolve())
    with _OPEN_LOCK:
        store = _OPEN.get(key)
        if store is None or store._closed:
            store = MemoryStore(path, **options)
            _OPEN[key] = store
        return store


@atexit.register
def _close_all() -> None:
    for store in list(_OPEN.values()):
        with contextlib.suppress(Exception):
            store.close()
