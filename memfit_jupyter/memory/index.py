"""The usearch index of a store: opening, checking, catching up, saving, searching.

Files beside the database::

    index.usearch    the HNSW index (keys are SQLite keys), written atomically
    index.json       what the index covers: embedder, dim, count, key and deletion marks
    index.lock       flock: the index file and its json are written and read as a pair

Keeping the index in step.  Keys only grow (AUTOINCREMENT; a batch takes the next keys
itself inside its write transaction) and every delete is logged, so an index is described
by two high-water marks: the largest key and the last deletion it has seen.  Catching up
means adding the rows above one mark and removing the deletions above the other.  On open
the saved index is loaded and checked (dimension, count, embedder, marks); a missing,
truncated, stale or foreign index is rebuilt from SQLite with a warning.  The index is
saved on ``save()`` and after many changes (``SAVE_EVERY``, or a ``SAVE_SHARE``-th of the
index), never rebuilt on a normal open.

Below ``exact_below`` vectors a search is one matrix product over every vector, kept in
memory while the index is unchanged (exact, and faster than the graph there).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from .db import Database
from .embedders import Embedder

log = logging.getLogger("memfit_jupyter.memory")

INDEX_NAME = "index.usearch"
#: Unsaved index changes after which the index is written out: at least this many, and at
#: least 1/SAVE_SHARE of the index, so that rewriting the whole file stays a small share of
#: the time spent adding (a save writes every vector, adding one walks the graph).  Until a
#: save, a reopened store catches up from SQLite, so nothing is lost, only re-added: after a
#: crash, at most a tenth of the index.  At 100k a save took 0.2-0.3 s, adding a tenth ~10 s.
SAVE_EVERY = 2_000
SAVE_SHARE = 10
#: Threads that add vectors to the graph: one.  usearch 2.26 adding on several threads left some
#: vectors unreachable, not found even by a search for the vector itself with a beam of 200
#: (29 of 20,000 in batches of 40 with every core, 0 of 20,000 with one thread), and a memory no
#: search can find is lost.  One thread took 1.85x the time on 2 cores (20k vectors of 384
#: dimensions: 5.8 s against 3.1 s); the store's add still runs beside its SQLite write.
ADD_THREADS = 1



def _runtimes_in_order() -> None:
    """Load ONNX Runtime, when it is installed, before usearch: importing it after usearch's
    extension is loaded crashes the process (a segfault in the C++ runtime's locale setup,
    seen with onnxruntime 1.23 and 1.32 on usearch 2.26), and a store with the light
    semantic embedder may open after another store in the same kernel.  Costs about 0.2 s,
    once, and only where the ``semantic`` extra is installed."""
    import importlib.util
    import sys

    if "usearch.compiled" not in sys.modules and "onnxruntime" not in sys.modules \
            and importlib.util.find_spec("onnxruntime") is not None:
        import onnxruntime  # noqa: F401


class GraphOptions(TypedDict):
    """The HNSW graph's parameters, as usearch's ``Index`` takes them."""

    connectivity: int
    expansion_add: int
    expansion_search: int


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


class GraphAdd:
    """``index.add`` on a thread (usearch releases the GIL), with its outcome kept."""

    def __init__(self, index: Any, keys: list[int], vecs: np.ndarray):
        self._index, self._keys = index, keys
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(np.array(keys, dtype=np.uint64), vecs),
                                        name="memfit-index-add", daemon=True)
        self._thread.start()

    def _run(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        try:
            self._index.add(keys, vecs, threads=ADD_THREADS)
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


class VectorIndex:
    """The usearch index over a store's content vectors, and its high-water marks.

    ``index`` is the usearch ``Index``; ``hw_key`` and ``hw_del`` the largest key and the
    last deletion it covers; ``dirty`` how many changes are not saved yet.
    """

    def __init__(self, directory: Path, embedder: Embedder, options: GraphOptions, exact_below: int,
                 read_only: bool = False):
        """``read_only``: nothing is written in ``directory``; an index that cannot be used is
        rebuilt in memory, and kept there."""
        self.directory = directory
        self.read_only = read_only
        self.embedder = embedder
        self.options = options
        self.exact_below = exact_below
        # usearch's Index, opened in open(); Any because mypy reads its expansion_search as
        # read-only (the setter is declared apart from the getter), and dedup sets it.
        self.index: Any = None
        self.hw_key = 0
        self.hw_del = 0
        self.dirty = 0
        # (index state it matches, keys, vectors): the exact scan of a small store
        self._exact: tuple[tuple[int, int, int], np.ndarray, np.ndarray] | None = None

    @property
    def path(self) -> Path:
        return self.directory / INDEX_NAME

    @property
    def meta_path(self) -> Path:
        return self.directory / "index.json"

    def __len__(self) -> int:
        return len(self.index)

    def _new(self) -> Any:
        _runtimes_in_order()
        from usearch.index import Index

        # f32 explicitly (the default is not); ip on unit vectors is cosine, and faster than cos.
        return Index(ndim=self.embedder.dim, metric="ip", dtype="f32", **self.options)

    # --- opening ------------------------------------------------------------------------
    def open(self, db: Database) -> None:
        """Load the saved index and catch it up, or rebuild it from ``db`` (with a warning when
        one existed but could not be used)."""
        problem = self._load_saved(db)
        if problem is None:
            try:
                with db.read():  # one snapshot: another process may be adding meanwhile
                    added = self.catch_up(db)
                    # counting the rows took 0.15 s at 100k, longer than loading the index: the
                    # count every write keeps is trusted when it agrees with the index
                    recorded = db.recorded_count()
                    count = recorded if recorded == len(self.index) else db.count()
                if recorded != count:
                    db.record_count()
            except Exception as exc:  # e.g. a deletion the index never had: rebuild
                problem = f"out of step with the database ({exc})"
            else:
                if len(self.index) != count:
                    problem = f"out of step with the database ({len(self.index)} vectors, {count} memories)"
                elif added > SAVE_EVERY:
                    self.save(db)
        if problem is not None:
            kept = self._keep_if_larger(db, problem) if problem not in ("new", "missing") else None
            if kept is None and problem != "new":
                where = " (in memory: the store is opened to read)" if self.read_only else ""
                warnings.warn(f"memory index {str(self.path)!r} is {problem}: rebuilding it from SQLite{where}",
                              StoreWarning, stacklevel=3)
                log.warning("rebuilding memory index %s: %s", self.path, problem)
            self.rebuild(db)

    def _keep_if_larger(self, db: Database, problem: str) -> Path | None:
        """Before a rebuild: when the saved index holds more vectors than the database has rows,
        rows were lost (the ``-wal`` file deleted after a crash, an older database copied in), and
        the index is the only trace of them.  Move it aside, say so loudly, and return where it is
        kept; None when the rebuild loses nothing."""
        try:
            saved = int(json.loads(self.meta_path.read_text()).get("count") or 0)
        except (OSError, ValueError, TypeError, AttributeError):
            return None
        rows = db.count()
        if saved <= rows:
            return None
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        if self.read_only:  # nothing is moved in a store opened to read: a writer will keep it
            log.warning("memory store %s: its index holds %d vectors but the database only %d memories (%s); "
                        "read from the database", self.directory, saved, rows, problem)
            return self.path
        kept = self.path.with_name(f"{INDEX_NAME}.kept-{stamp}")
        with _flock(self.directory / "index.lock", exclusive=True):
            os.replace(self.path, kept)
            os.replace(self.meta_path, kept.with_name(f"index.json.kept-{stamp}"))
        message = (f"memory store {str(self.directory)!r} LOST MEMORIES: its index holds {saved} vectors but "
                   f"the database has only {rows} memories ({problem}; was the memory.sqlite3-wal file "
                   f"deleted after a crash, or an older database copied in?). The old index is kept as "
                   f"{str(kept)!r}; a new one is built from the {rows} memories left.")
        warnings.warn(message, StoreWarning, stacklevel=4)
        log.error("%s", message)
        return kept

    def _load_saved(self, db: Database) -> str | None:
        """Load the saved index; return why it cannot be used, or None."""
        with db.read():
            # The order matters when several processes open a new store at once: each saves its
            # index before it adds anything, so files still missing after a snapshot in which the
            # store was empty mean a store still being created ("new"), not a lost index.
            empty = db.empty()
            saved = self.path.exists() and self.meta_path.exists()
        if not saved:
            self.index = self._new()
            return "new" if empty else "missing"
        try:
            with _flock(self.directory / "index.lock", exclusive=False):
                meta = json.loads(self.meta_path.read_text())
                size = self.path.stat().st_size
                if meta.get("size") != size:
                    return f"truncated or replaced ({size} bytes, {meta.get('size')} expected)"
                index = self._new()
                index.load(str(self.path))
        except Exception as exc:
            return f"unreadable ({type(exc).__name__}: {exc})"
        # load() silently adopts the file's dimension: check everything it says.
        if meta.get("embedder") != self.embedder.id or index.ndim != self.embedder.dim:
            return f"built by another embedder ({meta.get('embedder')}, {index.ndim} dims)"
        if len(index) != meta.get("count"):
            return f"inconsistent ({len(index)} vectors, {meta.get('count')} recorded)"
        if (meta.get("hw_key", 0) > max(db.max_key(), db.seq_value("memories"))
                or meta.get("hw_del", 0) > db.max_deletion()):
            return "stale (newer than the database)"
        self.index, self.hw_key, self.hw_del = index, int(meta["hw_key"]), int(meta["hw_del"])
        return None

    def rebuild(self, db: Database) -> None:
        """A new index from every row of ``db``, saved."""
        self.index = self._new()
        self._exact = None  # reindex keeps the keys but changes the vectors
        self.hw_key = self.hw_del = 0
        with db.read():
            self.hw_del = db.max_deletion()
            keys, vecs = db.rows_after(0, self.embedder.dim)
        if len(keys):
            self.index.add(keys, vecs, threads=ADD_THREADS)
            self.hw_key = int(keys.max())
        self.dirty = len(keys) or 1
        self.save(db)

    # --- keeping in step ----------------------------------------------------------------
    def state(self) -> tuple[int, int, int]:
        """What the index covers: the marks and its size (the exact-scan matrix is keyed by it)."""
        return (self.hw_key, self.hw_del, len(self.index))

    def catch_up(self, db: Database) -> int:
        """Apply what other processes committed since this index last looked. Returns rows added."""
        before = self.state()
        dels = db.deletions_after(self.hw_del)
        for seq, key in dels:
            if key <= self.hw_key and self.index.contains(key):
                self.index.remove(key)
            self.hw_del = seq
        keys, vecs = db.rows_after(self.hw_key, self.embedder.dim)
        if len(keys):
            fresh = ~np.asarray(self.index.contains(keys), dtype=bool).reshape(-1)
            if fresh.any():
                self.index.add(keys[fresh], vecs[fresh], threads=ADD_THREADS)
            self.hw_key = int(keys.max())
        self.dirty += len(keys) + len(dels)
        if len(keys) and not dels and fresh.all():
            self.extend_exact(before, keys, vecs)
        return len(keys)

    def added(self, before: tuple[int, int, int], keys: list[int], vecs: np.ndarray,
              graph: GraphAdd | None) -> None:
        """Rows under ``keys`` were committed: make sure the graph has them (``graph``: the add
        that ran while they were written, if any) and move the marks."""
        if graph is None or not graph.finish():
            fresh = [k for k in keys if not self.index.contains(k)] if graph else keys
            self.index.add(np.array(fresh, dtype=np.uint64), vecs[[keys.index(k) for k in fresh]], threads=ADD_THREADS)
        self.hw_key = max(self.hw_key, max(keys))
        self.dirty += len(keys)
        self.extend_exact(before, np.array(keys, dtype=np.uint64), vecs)

    def removed(self, key: int, seq: int) -> None:
        """The row ``key`` was deleted, logged as ``seq``."""
        if self.index.contains(key):
            self.index.remove(key)
        self.hw_del = max(self.hw_del, seq)
        self.dirty += 1

    def due(self) -> bool:
        """Enough unsaved changes to write the index out (see ``SAVE_EVERY``)."""
        return self.dirty >= max(SAVE_EVERY, len(self.index) // SAVE_SHARE)

    def save(self, db: Database | None = None) -> None:
        """Write the index out (atomically, with its description) if it has unsaved changes.
        With ``db``, its WAL is checkpointed first: a saved index then never describes rows that
        are only in the ``-wal`` file (which a person may delete after a crash).  Opened to read:
        never."""
        if not self.dirty or self.read_only:
            return
        if db is not None:
            db.checkpoint()
        with _flock(self.directory / "index.lock", exclusive=True):
            tmp = self.path.with_name(f".{INDEX_NAME}.{os.getpid()}.tmp")
            self.index.save(str(tmp))
            os.replace(tmp, self.path)
            meta = {"embedder": self.embedder.id, "dim": self.embedder.dim, "count": len(self.index),
                    "hw_key": self.hw_key, "hw_del": self.hw_del, "size": self.path.stat().st_size}
            tmp_meta = self.meta_path.with_name(f".index.json.{os.getpid()}.tmp")
            tmp_meta.write_text(json.dumps(meta))
            os.replace(tmp_meta, self.meta_path)
        self.dirty = 0

    # --- searching ----------------------------------------------------------------------
    def nearest(self, db: Database, q: np.ndarray, limit: int) -> list[tuple[int, float]]:
        """The ``limit`` nearest keys to ``q`` with their cosine, best first."""
        size = len(self.index)
        if size == 0 or limit <= 0:
            return []
        if size >= self.exact_below:
            found = self.index.search(q, min(limit, size))
            return [(k, 1.0 - d) for k, d in zip(found.keys.tolist(), found.distances.tolist(), strict=True)]
        # A small store: one matrix product over every vector beats walking the graph (and is exact).
        keys, mat = self.exact_matrix(db)
        sims = mat @ q
        top = np.argpartition(-sims, limit - 1)[:limit] if limit < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(int(keys[i]), float(sims[i])) for i in top]

    def extend_exact(self, before: tuple[int, int, int], keys: np.ndarray, vecs: np.ndarray) -> None:
        """Append rows just indexed to the exact-scan matrix, if it matched the index before them
        (otherwise it is re-read when next needed)."""
        if self._exact is not None and self._exact[0] == before and len(self.index) < self.exact_below:
            self._exact = (self.state(), np.concatenate([self._exact[1], keys]),
                           np.concatenate([self._exact[2], vecs]))

    def exact_matrix(self, db: Database) -> tuple[np.ndarray, np.ndarray]:
        """Keys and vectors of a small store, read once and kept while the index is unchanged."""
        state = self.state()
        if self._exact is None or self._exact[0] != state:
            keys, vecs = db.rows_after(0, self.embedder.dim)
            self._exact = (state, keys, vecs)
        return self._exact[1], self._exact[2]
