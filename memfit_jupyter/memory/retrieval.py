"""What every memory store answers the same way, whatever holds its rows: the retrieval
pipeline (MECHANISMS.md §3.3) over the store's candidates, and the failure diary's reading."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .dedup import repeated
from .entity import MemoryEntity, SearchResults
from .items import Batch, prepare_batch
from .ranking import RankingConfig
from .search import SEMANTIC_LIMIT, TAG_LIMIT

if TYPE_CHECKING:
    import numpy as np

    from ..llm.client import LLMClient
    from .dedup import DedupConfig, Probe
    from .embedders import Embedder
    from .search import Candidates


@runtime_checkable
class MemoryBackend(Protocol):
    """What a run asks of its memory (``Agent(memory=...)``): the SQLite and the PostgreSQL
    store, or any object with these methods (a replay's recorded store)."""

    def search(self, query: str, k: int | None = ..., bytes_limit: int | None = ..., *,
               llm: LLMClient | None = ..., iteration: int = ...) -> SearchResults: ...

    def add(self, content: str, tags: Iterable[str] = ..., questions: Iterable[str] = ...) -> str | None: ...

    def add_many(self, items: Iterable[dict[str, Any]]) -> list[str | None]: ...

    def flush(self) -> None: ...


class StoreRetrieval:
    """Mixed into a store that has ``candidates()`` and ``list()`` (the SQLite and the
    PostgreSQL store): ``search``, ``repeats`` and ``failures`` are written once for both."""

    #: How results are ordered, what counts as a repeat, and how texts become vectors (each store sets them).
    ranking: RankingConfig
    dedup: DedupConfig
    embedder: Embedder

    def add_many(self, items: Iterable[dict[str, Any] | MemoryEntity] | Batch,
                 vectors: np.ndarray | None = None) -> builtins.list[str | None]:  # pragma: no cover - each store has its own
        raise NotImplementedError

    def _stored_candidates(self, probes: list[Probe]) -> list[list[Probe]]:  # pragma: no cover - each store has its own
        """For each probe, the stored memories dedup compares it with."""
        raise NotImplementedError

    def repeats(self, items: Iterable[dict[str, Any] | MemoryEntity] | Batch, vectors: np.ndarray | None = None,
                ignore: Iterable[str] = ()) -> builtins.list[bool]:
        """For each item, whether ``add_many`` would find it repeats a stored memory (2 of 3),
        stored memories whose content is in ``ignore`` left out; nothing is written.  An overlay
        asks its base so (``overlay.py``): what the parent holds, the child does not store again."""
        batch = prepare_batch(items, self.embedder, vectors)
        if not batch.entities or not self.dedup.enabled:
            return [False] * len(batch.entities)
        return repeated(batch.probes, self._stored_candidates(batch.probes), self.dedup, ignore)

    def list(self, tag: str | None = None, limit: int | None = None,
             offset: int = 0) -> list[MemoryEntity]:  # pragma: no cover - each store has its own
        raise NotImplementedError

    def tags(self) -> dict[str, int]:  # pragma: no cover - each store has its own
        raise NotImplementedError

    def embed_query(self, query: str) -> np.ndarray:  # pragma: no cover - each store has its own
        raise NotImplementedError

    def candidates(self, q: np.ndarray, query: str, *, tags: Iterable[str] = (), only: Iterable[str] | None = None,
                   tag_limit: int = TAG_LIMIT, semantic_limit: int = SEMANTIC_LIMIT,
                   lexical_limit: int = SEMANTIC_LIMIT) -> Candidates:  # pragma: no cover - each store has its own
        raise NotImplementedError

    def search(self, query: str, k: int | None = 10, bytes_limit: int | None = None,
               tags: Iterable[str] | None = None, *, llm: LLMClient | None = None, disable_ai: bool | None = None,
               ranking: str | RankingConfig | None = None, iteration: int = 0) -> SearchResults:
        """MECHANISMS.md §3.3: tag search, semantic (and lexical) search, dedup, ranking, byte limit.

        ``k``: at most this many results (None: as many as ``bytes_limit`` lets in).
        ``tags`` restricts the results to memories carrying one of them.  With
        ``llm`` (a run's ``LLMClient``) the model first picks relevant tags
        (the "tags" purpose) unless ``disable_ai``.  Each result has ``.id``,
        ``.content``, ``.score`` and ``.breakdown``.
        """
        from .search import search_memory

        return search_memory(self, query, k=k, bytes_limit=bytes_limit, tags=tags, llm=llm,
                             disable_ai=disable_ai if disable_ai is not None else llm is None,
                             ranking=ranking, iteration=iteration)

    # builtins.list: in the class body ``list`` is the method above
    def failures(self, kind: str | None = None, limit: int | None = None) -> builtins.list[MemoryEntity]:
        """The failure diary: memories tagged ``failures`` (of one kind: ``failures:<kind>``)."""
        return self.list(tag=f"failures:{kind.strip()}" if kind else "failures", limit=limit)
