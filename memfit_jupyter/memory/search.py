"""The retrieval pipeline (docs/MECHANISMS.md §3.3).

1. AI tag selection (the "tags" purpose), unless ``disable_ai``.
2. Tag search, limit 20.
3. Semantic search, limit 15 (for hybrid ranking: the vector search and BM25, each to the
   ranking's ``depth``).
4. Deduplication of the candidates (the same memory found twice is one).
5. Ranking: C.O.R.E. P.A.C.T. weights, keyword bonus, retrieval term (see ``ranking``).
6. Selection up to the byte limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from .entity import MemoryEntity, SearchResults
from .ranking import RankingConfig, rank, select_by_bytes

if TYPE_CHECKING:
    from ..llm.client import LLMClient

TAG_LIMIT = 20
SEMANTIC_LIMIT = 15


@dataclass(slots=True)
class Candidates:
    """What a store's retrievers found for one query (step 4 done: each memory once).

    ``entities`` and ``vectors`` (their stored content vectors, unit rows) are aligned;
    ``found`` names, for each retriever ("tags", "semantic", "lexical"), the ids it found
    in its own order, best first; ``lexical`` is the BM25 score (higher is better) of each
    lexical find.  Every backend's ``candidates()`` returns one; the ranking needs no more.
    """

    entities: list[MemoryEntity]
    vectors: np.ndarray
    found: dict[str, list[str]] = field(default_factory=dict)
    lexical: dict[str, float] = field(default_factory=dict)

    def sources(self) -> dict[str, tuple[str, ...]]:
        """For each id, the retrievers that found it (in the order tags, semantic, lexical)."""
        out: dict[str, list[str]] = {}
        for name, ids in self.found.items():
            for i in ids:
                out.setdefault(i, []).append(name)
        return {i: tuple(s) for i, s in out.items()}


class Searchable(Protocol):
    """What the pipeline uses of a store (``retrieval.StoreRetrieval``, which both stores are)."""

    ranking: RankingConfig

    def tags(self) -> dict[str, int]: ...

    def embed_query(self, query: str) -> np.ndarray: ...

    def candidates(self, q: np.ndarray, query: str, *, tags: Iterable[str] = (), only: Iterable[str] | None = None,
                   tag_limit: int = TAG_LIMIT, semantic_limit: int = SEMANTIC_LIMIT,
                   lexical_limit: int = SEMANTIC_LIMIT) -> Candidates: ...


def select_tags(llm: LLMClient, query: str, known: list[str], iteration: int = 0) -> list[str]:
    """Ask the model which of the store's tags fit the query; unknown tags are dropped."""
    if not known:
        return []
    messages = [
        {"role": "system", "content": "You pick the tags of a memory store that are relevant to a query. "
                                      'Reply with JSON: {"tags": ["tag", ...]} using only tags from the list.'},
        {"role": "user", "content": f"Query: {query}\n\nAvailable tags: {', '.join(known[:200])}"},
    ]
    reply = llm.call("tags", messages, tier="fast", iteration=iteration)
    if not reply.ok:
        return []
    have = set(known)
    return [t.strip().lower() for t in reply.value.tags if t.strip().lower() in have]


def search_memory(store: Searchable, query: str, *, k: int | None = 10, bytes_limit: int | None = None,
                  tags: Iterable[str] | None = None, llm: LLMClient | None = None, disable_ai: bool = True,
                  ranking: str | RankingConfig | None = None, iteration: int = 0) -> SearchResults:
    """Run the pipeline on ``store``; see the module docstring."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("the memory search query is empty")
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    config = ranking if isinstance(ranking, RankingConfig) else (
        store.ranking.with_mode(ranking) if ranking else store.ranking)
    only = [t.strip().lower() for t in tags if t and t.strip()] if tags is not None else None
    selected: list[str] = list(only or [])
    if not disable_ai and llm is not None and only is None:
        selected = select_tags(llm, query, list(store.tags()), iteration)

    q = store.embed_query(query)
    hybrid = config.mode == "hybrid"
    cands = store.candidates(q, query, tags=selected, only=only, tag_limit=TAG_LIMIT,
                             semantic_limit=config.depth if hybrid else SEMANTIC_LIMIT,
                             lexical_limit=config.depth * (3 if only else 1) if hybrid else 0)
    entities, vecs = cands.entities, cands.vectors
    found = cands.found
    if only is not None:
        wanted = set(only)
        keep = [i for i, e in enumerate(entities) if wanted & set(e.tags)]
        entities, vecs = [entities[i] for i in keep], vecs[keep]
        kept = {e.id for e in entities}
        found = {name: [i for i in ids if i in kept] for name, ids in found.items()}
    # every candidate's true cosine (tag and lexical finds too), from the stored vectors
    sims = np.clip(vecs @ q, -1.0, 1.0).tolist() if len(entities) else []
    semantic = {e.id: s for e, s in zip(entities, sims, strict=True)}
    lexical = {e.id: cands.lexical[e.id] for e in entities if e.id in cands.lexical}
    ranked = rank(entities, query, semantic=semantic, lexical=lexical, config=config,
                  sources=cands.sources(), limit=k, found=found)
    return SearchResults(select_by_bytes(ranked, bytes_limit), query=query, bytes_limit=bytes_limit,
                         selected_tags=selected, candidates=len(entities))
