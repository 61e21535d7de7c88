"""Where a run's store is, as its trace records it, and the store opened again from that record.

A trace holds ``memory_store``: ``{"path": folder}`` for the SQLite store, ``{"url": ...,
"schema": ...}`` for PostgreSQL (the URL with no password), and for an overlay (a fork's
memory) the top store's record with ``over`` (the record of the store under it) and ``hidden``
(the ids of its rows the fork does not see).  A fork of a saved trace reads its parent's store
from this record (``fork.py``) and never writes there: a folder is opened to read, and an
overlay writes only to its own top store.  A server's store is read only when this process
has it open already: a trace that named a server would otherwise have libpq log in there with
the login it finds (PGPASSWORD, ~/.pgpass), wherever the trace came from.  A fork reads a
folder a trace names only inside the working directory or when this process has that store
open to write (``unvouched``): what it reads goes into its prompts and its own trace.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import StoreError
from .retrieval import MemoryBackend


def where_of(store: Any) -> dict[str, Any] | None:
    """The record of where ``store`` is, or None when it cannot say (a store of another kind)."""
    where = getattr(store, "where", None)
    found = where() if callable(where) else None
    return found if isinstance(found, dict) else None


def unvouched(where: Any, cwd: Path | None = None) -> str | None:
    """The first folder ``where`` names (its own, or a store's under it) that lies outside the
    working directory ``cwd`` and that this process does not have open to write, else None.  A
    trace is a file from anywhere: a fork reads a folder it names only so, and what it reads goes
    into its prompts and its own trace."""
    from .store import held

    cwd = (cwd or Path.cwd()).resolve()
    seen = 0
    while isinstance(where, Mapping) and seen < 64:  # a record's chain, as deep as its forks
        path = where.get("path")
        if isinstance(path, str) and path:
            folder = Path(path).expanduser().resolve()
            if folder.exists() and not folder.is_relative_to(cwd) and not held(folder):
                return str(folder)
        where, seen = where.get("over"), seen + 1
    return None


def open_where(where: Any) -> MemoryBackend:
    """The store a trace's ``memory_store`` names, opened to read.  StoreError (one line) when
    the record is not one or the store is not there any more."""
    from .overlay import Overlay
    from .postgres import connected, is_url
    from .store import open_store

    if not isinstance(where, Mapping):
        raise StoreError(f"a store's record is an object, got {type(where).__name__}")
    store: MemoryBackend
    if isinstance(where.get("url"), str):
        if not is_url(where["url"]):
            raise StoreError("a store's recorded url is not a postgresql:// URL")
        found = connected({k: v for k, v in where.items() if k in ("url", "schema")})
        if found is None:
            raise StoreError(f"it is on a server this process has not connected to ({where['url']}), and a "
                             "trace does not open a connection by itself")
        store = found
    elif isinstance(where.get("path"), str) and where["path"]:
        store = open_store(Path(where["path"]), read_only=True)
    else:
        raise StoreError("a store's record names neither a path nor a url")
    if where.get("over") is None:
        return store
    hidden = where.get("hidden") or []
    if not isinstance(hidden, list) or not all(isinstance(i, str) for i in hidden):
        raise StoreError("a store's recorded hidden rows are not a list of ids")
    return Overlay(open_where(where["over"]), store, hidden=hidden)
