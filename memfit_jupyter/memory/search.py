"""Seed 000 §3.3: the retrieval pipeline.

1. AI tag selection (the "tags" purpose), unless ``disable_ai``.
2. Tag search, limit 20.
3. Semantic search, limit 15 (and, for hybrid ranking, BM25 search, limit 15).
4. Deduplication of the candidates (the same memory found twice is one).
5. Ranking: C.O.R.E. P.A.C.T. weights, keyword bonus, retrieval term (see ``ranking``).
6. Selection up to the byte limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .entity import MemoryEntity, SearchResults
from .ranking import RankingConfig, rank, select_by_bytes

TAG_LIMIT = 20
SEMANTIC_LIMIT = 15
LEXICAL_LIMIT = 15


def select_tags(llm: Any, query: str, known: list[str], iteration: int = 0) -> list[str]:
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


def search_memory(store: Any, query: str, *, k: int | None = 10, bytes_limit: int | None = None,
                  tags: Iterable[str] | None = None, llm: Any = None, disable_ai: bool = True,
                  ranking: str | RankingConfig | None = None, iteration: int = 0) -> SearchResults:
    """Run the pipeline on ``store``; see the module docstring."""
    if not isinstance(query, str) or not query.strip():
        raise ValueError("the memory search query is empty")
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    config = ranking if isinstance(ranking, RankingConfig) else (
        RankingConfig(mode=ranking, weight=store.ranking.weight, rrf_k=store.ranking.rrf_k)
        if ranking else store.ranking)
    only = [t.strip().lower() for t in tags if t and t.strip()] if tags is not None else None
    selected: list[str] = list(only or [])
    if not disable_ai and llm is not None and only is None:
        selected = select_tags(llm, query, list(store.tags()), iteration)

    found: dict[str, MemoryEntity] = {}
    sources: dict[str, list[str]] = {}

    def keep(entity: MemoryEntity, source: str) -> None:
        found.setdefault(entity.id, entity)  # step 4: one entry per memory
        sources.setdefault(entity.id, []).append(source)

    if selected:
        for e in store.search_by_tags(selected, limit=TAG_LIMIT):
            keep(e, "tags")
    q = store.embed_query(query)
    semantic: dict[str, float] = {}
    for e, sim in store.search_by_semantics(q, SEMANTIC_LIMIT, tags=only):
        keep(e, "semantic")
        semantic[e.id] = sim
    lexical: dict[str, float] = {}
    if config.mode == "hybrid":
        for e, score in store.search_lexical(query, LEXICAL_LIMIT * (3 if only else 1)):
            if only is not None and not set(only) & set(e.tags):
                continue
            keep(e, "lexical")
            lexical[e.id] = score
    if only is not None:
        found = {i: e for i, e in found.items() if set(only) & set(e.tags)}
    missing = [i for i in found if i not in semantic]
    if missing:  # tag and lexical finds still get their true semantic similarity
        for i, vec in store.vectors(missing).items():
            semantic[i] = max(-1.0, min(1.0, float(vec @ q)))
    ranked = rank(list(found.values()), query, semantic=semantic, lexical=lexical, config=config,
                  sources={i: tuple(s) for i, s in sources.items()})
    if k is not None:
        ranked = ranked[:k]
    return SearchResults(select_by_bytes(ranked, bytes_limit), query=query, bytes_limit=bytes_limit,
                         selected_tags=selected, candidates=len(found))
