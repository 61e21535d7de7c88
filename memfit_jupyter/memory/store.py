"""The memory store: SQLite (WAL) is the source of truth (``db``), a usearch index serves
nearest neighbours (``index``), and SQLite's FTS5 serves BM25.

Layout of a store directory::

    memory.sqlite3   entities, tags, vectors, the deletion log, the FTS5 table
    index.usearch    the HNSW index (keys are SQLite keys), written atomically
    index.json       what the index covers: embedder, dim, count, key and deletion marks
    index.lock       flock: the index file and its json are written and read as a pair

A write catches the index up inside its SQLite write transaction (so nothing another
process commits can slip between), a read does it when ``PRAGMA data_version`` says
another connection committed (``index`` says how).

Writing a batch: the items are validated and redacted (``items``), the candidates each
could repeat are found (``candidates``: a bounded read of the tag index and one short-beam
vector search), the 2-of-3 verdicts are ``dedup``'s, rows go in with one ``executemany``
per table, and the graph is built on a thread while SQLite writes (usearch releases the
GIL).  Every write keeps the number of memories in ``meta``, so that opening need not
count the rows.  Searching: ``candidates()`` is what the retrieval pipeline (``search``)
asks of a store; export and import are ``transfer``'s.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StoreError
from .candidates import TAG_SCAN, stored_candidates
from .db import DB_NAME, SCHEMA_VERSION, Database
from .dedup import DedupConfig, Probe, non_repeated, norm_tags
from .embedders import Embedder, get_embedder, recorded_embedder
from .entity import MemoryEntity
from .index import SAVE_EVERY, SAVE_SHARE, GraphAdd, StoreWarning, VectorIndex
from .items import MAX_CONTENT_BYTES, Batch, prepare_batch
from .postgres import PostgresStore, is_url
from .ranking import RankingConfig
from .retrieval import StoreRetrieval
from .search import SEMANTIC_LIMIT, TAG_LIMIT, Candidates
from .text import ANALYZER

__all__ = ["MAX_CONTENT_BYTES", "SAVE_EVERY", "SAVE_SHARE", "TAG_SCAN", "MemoryStore", "StoreWarning",
           "open_store"]

#: Batches at least this large build the graph while SQLite writes (a thread costs ~0.1 ms).
OVERLAP_FROM = 64
#: add_many writes larger batches in transactions of this many (batch dedup is quadratic).
ADD_CHUNK = 2_000
#: Memories written (added or deleted) after which the WAL is copied into the database file
#: (``Database.checkpoint``; also before each index save and at close).  A checkpoint costs
#: ~25 ms (an fsync): 5 % of a 500-memory batch, and of 256 single adds.  So deleting the
#: ``-wal`` file after a crash loses at most the last few hundred memories, not all of them.
CHECKPOINT_EVERY = 256


class MemoryStore(StoreRetrieval):
    """A durable store of memory entities.

    >>> store = MemoryStore("notes/.memfit")          # doctest: +SKIP
    >>> store.add("pytest needs -x to stop at the first failure", tags=["pytest"])
    >>> [(m.id, m.score) for m in store.search("stop pytest early", k=3)]

    ``embedder``: a name (hashing, minilm, litellm:<model>) or an object; by default
    the one the store was built with (hashing for a new store).  ``dedup``: a
    ``DedupConfig`` (or False to store every memory).  ``ranking``: hybrid
    (default), semantic or weighted, or a ``RankingConfig``.  ``exact_below``: below
    this many memories a search is one matrix product over every vector (exact,
    and faster than the graph there; the vectors are kept in memory, 15 MB at
    10k of 384 dims).  ``connectivity``, ``expansion_add``, ``expansion_search``:
    the HNSW graph's parameters, chosen by tests/benchmarks/bench_memory.py.
    """

    def __new__(cls, path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any:
        # A postgresql:// URL opens the PostgreSQL store (memory/postgres.py), with the same API.
        if cls is MemoryStore and is_url(path):
            from .postgres import PostgresStore

            return PostgresStore(path, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, path: str | os.PathLike[str], embedder: str | Embedder | None = None, *,
                 dedup: DedupConfig | bool | None = None, ranking: str | RankingConfig = "hybrid",
                 exact_below: int = 10_000, connectivity: int = 32, expansion_add: int = 128,
                 expansion_search: int = 64, read_only: bool = False):
        self.path = Path(path).expanduser()
        #: Opened to read (a fork's parent's store): nothing is written in its folder, writes refused.
        self.read_only = read_only
        if self.path.exists() and not self.path.is_dir():
            raise StoreError(f"memory store path {str(self.path)!r} is a file; a store is a directory")
        if read_only and not (self.path / DB_NAME).is_file():
            raise StoreError(f"there is no memory store at {str(self.path)!r}")
        if not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        self.dedup = DedupConfig(enabled=False) if dedup is False else (
            dedup if isinstance(dedup, DedupConfig) else DedupConfig())
        self.ranking = ranking if isinstance(ranking, RankingConfig) else RankingConfig(mode=ranking)
        self.exact_below = exact_below
        self._lock = threading.RLock()
        self._closed = False
        self._data_version: int | None = None
        #: Memories written since the last checkpoint (see ``CHECKPOINT_EVERY``).
        self._unchecked = 0
        try:
            self._db = Database(self.path / DB_NAME, read_only=read_only)
            if read_only:
                self._open_to_read(embedder)
            else:
                self._open_to_write(embedder)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open memory store {str(self.path)!r}: {exc}") from None
        # Chosen at 100k structured 384-d vectors (tests/benchmarks/bench_memory.py): connectivity 32
        # with a beam of 64 gave recall@10 0.965 at 1.6 ms, where 16 needed a beam of 128 for 0.959
        # at 1.7 ms (exact numpy: 7.7 ms).  Smaller stores do not use the graph (exact_below).
        self._vectors = VectorIndex(self.path, self.embedder, {
            "connectivity": connectivity, "expansion_add": expansion_add, "expansion_search": expansion_search},
            exact_below, read_only=read_only)
        with self._lock:
            self._vectors.open(self._db)
        if not read_only:
            _HELD.add(self)

    def _open_to_write(self, embedder: str | Embedder | None) -> None:
        """Create what is missing, and bring a store written by an older version up to date."""
        with self._db.write():
            meta = self._db.create()
            self.embedder = self._choose_embedder(meta, embedder)
            if "count" not in meta:  # a store from before the count was kept: once
                self._db.set_meta({"count": str(self._db.count())})
            if meta.get("analyzer") != ANALYZER:  # new, or indexed by an older text analysis
                if not self._db.empty():
                    self._db.reindex_text()
                self._db.set_meta({"analyzer": ANALYZER})
        self._db.checkpoint()  # the tables themselves are then in the database file

    def _open_to_read(self, embedder: str | Embedder | None) -> None:
        """Take the store as it is: its embedder is the one it records."""
        meta = self._db.meta()
        if "embedder" not in meta:
            raise StoreError(f"the memory store at {str(self.path)!r} was never written: there is nothing to read")
        self.embedder = recorded_embedder(str(self.path), "path", meta["embedder"], meta.get("dim"), embedder)

    def _choose_embedder(self, meta: dict[str, str], wanted: str | Embedder | None) -> Embedder:
        recorded = meta.get("embedder")
        if recorded is None or (wanted is not None and self._db.empty()):
            emb = get_embedder(wanted)
            self._db.set_meta({"embedder": emb.id, "dim": str(emb.dim), "schema": SCHEMA_VERSION})
            return emb
        return recorded_embedder(str(self.path), "path", recorded, meta.get("dim"), wanted)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"memory store {str(self.path)!r} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise StoreError(f"memory store {str(self.path)!r} is opened to read: it is not written")

    def _sync(self) -> None:
        """Catch up if another connection committed since we last looked (cheap when none did)."""
        self._check_open()
        version = self._db.data_version()
        if version != self._data_version:
            with self._db.read():
                self._vectors.catch_up(self._db)
            self._data_version = version

    # --- writing ------------------------------------------------------------------------
    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None, **extra: Any) -> str | None:
        """Store one memory; return its id, or None when it duplicates a stored one (2 of 3)."""
        return self.add_many([{"content": content, "tags": tags, "questions": questions,
                               "scores": scores, **extra}])[0]

    def add_many(self, items: Iterable[dict[str, Any] | MemoryEntity] | Batch, vectors: np.ndarray | None = None,
                 ) -> list[str | None]:
        """Store many memories (batch dedup, MECHANISMS.md §3.6); ids, None for duplicates.

        Up to ``ADD_CHUNK`` memories are written in one transaction (larger batches in
        several, each all or nothing).

        Each item is a ``MemoryEntity`` or a dict with content, tags, questions
        (or potential_questions), scores, and optionally id and created_at.
        ``vectors`` (unit rows) skips embedding the content; a ``Batch`` (``items.prepare_batch``)
        is written as it was prepared.
        """
        self._check_writable()
        batch = prepare_batch(items, self.embedder, vectors)
        entities, vecs, qvecs, probes = batch.entities, batch.vectors, batch.question_vectors, batch.probes
        if not entities:
            return []
        kept: list[int] = []
        for start in range(0, len(entities), ADD_CHUNK):
            part = range(start, min(len(entities), start + ADD_CHUNK))
            kept += [start + i for i in self._add_chunk([entities[j] for j in part], vecs[part.start : part.stop],
                                                        [qvecs[j] for j in part], [probes[j] for j in part])]
        self._written(len(kept))
        ids: list[str | None] = [None] * len(entities)
        for i in kept:
            ids[i] = entities[i].id
        return ids

    def _stored_candidates(self, probes: list[Probe]) -> list[list[Probe]]:
        with self._lock:
            self._check_open()
            self._sync()
            return stored_candidates(self._db, self._vectors, probes, self.dedup)

    def _written(self, n: int) -> None:
        """``n`` memories were written: checkpoint the WAL when enough are (``CHECKPOINT_EVERY``)."""
        with self._lock:
            self._unchecked += n
            if self._unchecked >= CHECKPOINT_EVERY and not self._closed:
                self._db.checkpoint()
                self._unchecked = 0

    def _add_chunk(self, entities: list[MemoryEntity], vecs: np.ndarray, qvecs: list[np.ndarray | None],
                   probes: list[Probe]) -> list[int]:
        """One transaction: dedup against the store and the chunk, insert, then index. Returns
        the positions kept.  A later chunk sees this one through the index, so dedup across
        chunks is the same as within one."""
        db, vectors = self._db, self._vectors
        with self._lock:
            self._check_open()
            graph: GraphAdd | None = None
            try:
                with db.write():
                    vectors.catch_up(db)
                    before = vectors.state()
                    kept = (non_repeated(probes, stored_candidates(db, vectors, probes, self.dedup), self.dedup)
                            if self.dedup.enabled else list(range(len(entities))))
                    keys = db.next_keys(len(kept))
                    if len(keys) >= OVERLAP_FROM:
                        # usearch releases the GIL while it inserts: build the graph while SQLite
                        # writes the rows (undone below if the transaction fails).
                        graph = GraphAdd(vectors.index, keys, vecs[kept])
                    db.insert_many([entities[i] for i in kept], vecs[kept], [qvecs[i] for i in kept], keys)
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
                vectors.added(before, keys, vecs[kept], graph)
            if vectors.due():
                self.flush()
        return kept

    def delete(self, id: str) -> bool:
        """Delete a memory; False when there is none with this id."""
        with self._lock:
            self._check_writable()
            with self._db.write():
                self._vectors.catch_up(self._db)
                gone = self._db.delete(id)
            if gone is None:
                return False
            self._vectors.removed(*gone)
            self._written(1)
            return True

    # --- reading ------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            self._check_open()
            return self._db.count()

    def get(self, id: str) -> MemoryEntity | None:
        """The memory with this id, or None."""
        with self._lock:
            self._check_open()
            return self._db.get(id)

    # Below this method ``list`` in an annotation is the method: the type is ``builtins.list``.
    def list(self, tag: str | None = None, limit: int | None = None, offset: int = 0) -> list[MemoryEntity]:
        """Memories, newest first, optionally only those with ``tag``."""
        with self._lock:
            self._check_open()
            return self._db.list(tag, limit, offset)

    def tags(self) -> dict[str, int]:
        """Every tag with how many memories carry it, most used first."""
        with self._lock:
            self._check_open()
            return self._db.tags()

    def search_by_tags(self, tags: Iterable[str], match_all: bool = False, limit: int = TAG_LIMIT) -> builtins.list[MemoryEntity]:
        """Memories carrying any (or all) of ``tags``, most matches, then newest, first."""
        with self._lock:
            self._check_open()
            keys = self._db.tag_keys(tags, match_all, limit)
            found = self._db.entities(keys)
            return [found[k] for k in keys if k in found]

    def vectors(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored content vectors of these memories, by id."""
        with self._lock:
            self._check_open()
            return self._db.vectors_by_id(list(ids))

    def embed_query(self, query: str) -> np.ndarray:
        """The query's unit vector, by the store's embedder."""
        vec: np.ndarray = self.embedder.embed([query])[0]
        return vec

    def _nearest(self, q: np.ndarray, limit: int, tags: Iterable[str] | None) -> builtins.list[tuple[int, float]]:
        if tags is None:
            return self._vectors.nearest(self._db, q, limit)
        wanted = sorted(norm_tags(tags))
        rows = self._db.tagged_vectors(wanted) if wanted else []
        if not rows:
            return []
        mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        sims = mat @ q
        order = np.argsort(-sims, kind="stable")[:limit]
        return [(rows[i][0], float(sims[i])) for i in order]

    def search_by_semantics(self, query: str | np.ndarray, limit: int = SEMANTIC_LIMIT,
                            tags: Iterable[str] | None = None) -> builtins.list[tuple[MemoryEntity, float]]:
        """The nearest memories to ``query`` with their cosine similarity.
        With ``tags``, only memories that carry one of them."""
        q = self.embed_query(query) if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        with self._lock:
            self._sync()
            pairs = self._nearest(q, limit, tags)
            found = self._db.entities([k for k, _ in pairs])
            return [(found[k], s) for k, s in pairs if k in found]

    def search_lexical(self, query: str, limit: int = SEMANTIC_LIMIT) -> builtins.list[tuple[MemoryEntity, float]]:
        """BM25 (SQLite FTS5) over content, tags and questions; higher scores are better."""
        with self._lock:
            self._check_open()
            rows = self._db.lexical_keys(query, limit)
            found = self._db.entities([r[0] for r in rows])
            return [(found[k], float(s)) for k, s in rows if k in found]

    def lexical_stats(self, terms: Iterable[str]) -> tuple[int, int, dict[str, int]]:
        """The statistics its BM25 scores with: memories, their tokens, and the memories holding
        each of ``terms`` (``pg_text.bm25``: an overlay scores two stores' finds on both's)."""
        with self._lock:
            self._sync()
            return self._db.lexical_stats(terms)

    def candidates(self, q: np.ndarray, query: str, *, tags: Iterable[str] = (), only: Iterable[str] | None = None,
                   tag_limit: int = TAG_LIMIT, semantic_limit: int = SEMANTIC_LIMIT, lexical_limit: int = SEMANTIC_LIMIT) -> Candidates:
        """MECHANISMS.md §3.3 steps 2-4 in one snapshot: the memories with ``tags`` (up to
        ``tag_limit``), the ``semantic_limit`` nearest to the query vector ``q`` (among those
        carrying one of ``only``, when given), the ``lexical_limit`` best by BM25 for
        ``query`` (0: none), each memory read once with its stored vector."""
        with self._lock:
            self._sync()
            db = self._db
            tag_keys = db.tag_keys(tags, limit=tag_limit) if tags else []
            semantic_keys = [k for k, _ in self._nearest(q, semantic_limit, only)]
            lexical = db.lexical_keys(query, lexical_limit) if lexical_limit > 0 else []
            order = list(dict.fromkeys([*tag_keys, *semantic_keys, *(k for k, _ in lexical)]))
            keys, entities, vecs = db.rows(order, self.embedder.dim)
        id_of = {k: e.id for k, e in zip(keys, entities, strict=True)}
        found = {name: [id_of[k] for k in ks if k in id_of]
                 for name, ks in (("tags", tag_keys), ("semantic", semantic_keys),
                                  ("lexical", [k for k, _ in lexical])) if ks}
        return Candidates(entities, vecs, found, {id_of[k]: float(s) for k, s in lexical if k in id_of})

    # --- maintenance --------------------------------------------------------------------
    def where(self) -> dict[str, Any]:
        """Where the store is, as a trace records it (``memory/where.py``): its folder."""
        return {"path": str(self.path.resolve())}

    def info(self) -> dict[str, Any]:
        """Path, count, embedder, dims, index size."""
        with self._lock:
            self._sync()
            return {"path": str(self.path), "count": self._db.count(), "embedder": self.embedder.id,
                    "dims": self.embedder.dim, "indexed": len(self._vectors), "ranking": self.ranking.mode,
                    "tags": len(self._db.tags())}

    def flush(self) -> None:
        """Write the index out (atomically, with its description) if it has unsaved changes."""
        with self._lock:
            if not self._closed:
                self._vectors.save(self._db)

    def reindex(self, embedder: str | Embedder | None = None) -> int:
        """Re-embed every memory (with ``embedder``, or the current one) and rebuild the index."""
        emb = get_embedder(embedder) if embedder is not None else self.embedder
        with self._lock:
            self._check_writable()
            with self._db.write():
                n = self._db.reembed(emb.embed)
                self._db.set_meta({"embedder": emb.id, "dim": str(emb.dim)})
            self.embedder = self._vectors.embedder = emb
            self._vectors.rebuild(self._db)
            return n

    def export(self, path: str | os.PathLike[str]) -> int:
        """Write every memory to a JSON Lines file (no vectors: an import re-embeds). Returns the count."""
        from .transfer import export_jsonl

        return export_jsonl(self, path)

    def import_(self, path: str | os.PathLike[str]) -> dict[str, int]:
        """Add the memories of a JSON Lines export (ids kept when free); duplicates are skipped."""
        from .transfer import import_jsonl

        return import_jsonl(self, path)

    def close(self) -> None:
        """Save the index and close the database. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            finally:
                self._closed = True
                self._db.close()
                key = _key(self.path, self.read_only)
                if _OPEN.get(key) is self:
                    del _OPEN[key]

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._db.count()} memories"
        return f"<MemoryStore {str(self.path)!r} {state} embedder={self.embedder.id}>"


_OPEN: dict[str, MemoryStore | PostgresStore] = {}
_OPEN_LOCK = threading.Lock()
#: The stores this process opened to write (an agent's, the person's), open or not.
_HELD: weakref.WeakSet[MemoryStore] = weakref.WeakSet()


def held(path: str | os.PathLike[str]) -> bool:
    """Whether this process has the store at ``path`` open to write: its own, not one a trace
    named (a fork reads that one only so, or inside the working directory: ``memory/where.py``)."""
    where = Path(path).expanduser().resolve()
    return any(not s._closed and s.path.resolve() == where for s in list(_HELD))


def open_store(path: str | os.PathLike[str], read_only: bool = False, **options: Any) -> MemoryStore | PostgresStore:
    """The process's shared store at ``path`` (opened once; the agent and the magic share it).
    ``read_only``: to read it and write nothing in its folder (a fork's parent's store); the
    store this process has open to write there, if any (what it reads is the same)."""
    if is_url(path):  # a server's store: a fork never writes its base (``memory/overlay.py``)
        with _OPEN_LOCK:
            found = _OPEN.get(str(path))
            if found is None or found._closed:
                found = _OPEN[str(path)] = PostgresStore(path, **options)
            return found
    with _OPEN_LOCK:
        for key in ([_key(path, False)] if not read_only else [_key(path, False), _key(path, True)]):
            store = _OPEN.get(key)
            if store is not None and not store._closed:
                return store
        store = _OPEN[_key(path, read_only)] = MemoryStore(path, read_only=read_only, **options)
        return store


def _key(path: str | os.PathLike[str], read_only: bool) -> str:
    """Where ``_OPEN`` holds the store at ``path`` (a store opened to read apart)."""
    return str(Path(path).expanduser().resolve()) + (" (to read)" if read_only else "")


@atexit.register
def _close_all() -> None:
    for store in list(_OPEN.values()):
        with contextlib.suppress(Exception):
            store.close()
