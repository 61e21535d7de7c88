"""A store over another: reads see both, writes stay with the top one.

A fork's memory (``fork.py``) is an ``Overlay`` of its parent's store: what the child learns goes
into its own store, the parent's rows are read but never written, so a fork leaves the parent's
store as it was.  It wraps the ``MemoryBackend`` protocol only, so the SQLite and the PostgreSQL
store (or any store with ``search``, ``add``, ``add_many``, ``flush``) work under it alike.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

from .entity import MemoryEntity, ScoredMemory, SearchResults
from .retrieval import MemoryBackend


class Overlay:
    """Reads merge ``base`` and ``top``; writes go to ``top``.

    ``hidden``: ids of ``base`` rows left out of every read (a fork hides what its parent learnt
    at and after the fork step, which the child's past did not know).
    """

    def __init__(self, base: MemoryBackend, top: MemoryBackend, hidden: Iterable[str] = ()):
        self.base = base
        self.top = top
        self.hidden = {str(i) for i in hidden if i}

    # --- reads ------------------------------------------------------------------------
    def search(self, query: str, k: int | None = 10, bytes_limit: int | None = None, tags: Any = None, *,
               llm: Any = None, iteration: int = 0, **options: Any) -> SearchResults:
        """Both stores' results, best first, cut to ``k`` and ``bytes_limit``.  Only the base
        store asks the model to pick tags (``llm``): one tag call, as with one store."""
        found_base = self.base.search(query, k=k, bytes_limit=bytes_limit, tags=tags, llm=llm,  # type: ignore[call-arg]
                                      iteration=iteration, **options)
        found_top = self.top.search(query, k=k, bytes_limit=bytes_limit, tags=tags, iteration=iteration,  # type: ignore[call-arg]
                                    **options)
        merged: list[ScoredMemory] = []
        seen: set[str] = set()
        for hit in sorted([*found_top, *(h for h in found_base if h.id not in self.hidden)],
                          key=lambda h: -h.score):
            if hit.content in seen:
                continue
            seen.add(hit.content)
            merged.append(hit)
        kept: list[ScoredMemory] = []
        used = 0
        for hit in merged:
            if k is not None and len(kept) >= k:
                break
            if bytes_limit is not None and used + hit.entity.size > bytes_limit:
                continue
            kept.append(hit)
            used += hit.entity.size
        return SearchResults(kept, query=query, bytes_limit=bytes_limit,
                             selected_tags=list(getattr(found_base, "selected_tags", []) or []),
                             candidates=int(getattr(found_base, "candidates", 0) or 0)
                             + int(getattr(found_top, "candidates", 0) or 0))

    def get(self, id: str) -> MemoryEntity | None:
        own: MemoryEntity | None = _call(self.top, "get", id)
        if own is not None or id in self.hidden:
            return own
        found: MemoryEntity | None = _call(self.base, "get", id)
        return found

    def list(self, tag: str | None = None, limit: int | None = None, offset: int = 0) -> list[MemoryEntity]:
        rows = [*(_call(self.top, "list", tag=tag) or []),
                *(e for e in (_call(self.base, "list", tag=tag) or []) if e.id not in self.hidden)]
        rows = rows[offset:]
        return rows[:limit] if limit is not None else rows

    # builtins.list: in the class body ``list`` is the method above
    def failures(self, kind: str | None = None, limit: int | None = None) -> builtins.list[MemoryEntity]:
        return self.list(tag=f"failures:{kind.strip()}" if kind else "failures", limit=limit)

    def tags(self) -> dict[str, int]:
        counts = dict(_call(self.base, "tags") or {})
        for tag, n in (_call(self.top, "tags") or {}).items():
            counts[tag] = counts.get(tag, 0) + n
        return counts

    def __len__(self) -> int:
        return len(self.top) + max(0, len(self.base) - len(self.hidden))  # type: ignore[arg-type]

    # --- writes: the top store only -------------------------------------------------------
    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None) -> str | None:
        return self.top.add(content, tags=tags, questions=questions, **({"scores": scores} if scores else {}))

    def add_many(self, items: Iterable[Any], **options: Any) -> builtins.list[str | None]:
        added: builtins.list[str | None] = self.top.add_many(items, **options)
        return added

    def delete(self, id: str) -> bool:
        """Deletes a row of the top store; a base row is hidden instead (the base is not written)."""
        if _call(self.top, "get", id) is not None:
            return bool(_call(self.top, "delete", id))
        if _call(self.base, "get", id) is not None and id not in self.hidden:
            self.hidden.add(id)
            return True
        return False

    def flush(self) -> None:
        self.top.flush()

    def close(self) -> None:
        _call(self.top, "close")

    def __repr__(self) -> str:
        return f"<Overlay top={self.top!r} over base={self.base!r}>"


def _call(store: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    method = getattr(store, name, None)
    return method(*args, **kwargs) if callable(method) else None
