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

import numpy as np

from .entity import SearchResults
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

    q = store.embed_query(query)
    sources: dict[int, list[str]] = {}
    with store._lock:
        store._sync()
        for key in store._tag_keys(selected, limit=TAG_LIMIT) if selected else ():
            sources.setdefault(key, []).append("tags")
        for key, _ in store._nearest(q, SEMANTIC_LIMIT, only):
            sources.setdefault(key, []).append("semantic")
        lexical_by_key: dict[int, float] = {}
        if config.mode == "hybrid":
            for key, score in store._lexical_keys(query, LEXICAL_LIMIT * (3 if only else 1)):
                lexical_by_key[key] = float(score)
        for key in lexical_by_key:
            sources.setdefault(key, []).append("lexical")
        # step 4: one entry per memory; one read of every candidate's row and vector
        keys, entities, vecs = store._rows(list(sources))
    if only is not None:
        wanted = set(only)
        keep = [i for i, e in enumerate(entities) if wanted & set(e.tags)]
        keys, entities, vecs = [keys[i] for i in keep], [entities[i] for i in keep], vecs[keep]
    # every candidate's true cosine (tag and lexical finds too), from the stored vectors
    sims = np.clip(vecs @ q, -1.0, 1.0).tolist() if len(keys) else []
    semantic = {e.id: s for e, s in zip(entities, sims, strict=True)}
    lexical = {e.id: lexical_by_key[key] for key, e in zip(keys, entities, strict=True) if key in lexical_by_key}
    ranked = rank(entities, query, semantic=semantic, lexical=lexical, config=config,
                  sources={e.id: tuple(sources[key]) for key, e in zip(keys, entities, strict=True)}, limit=k)
    return SearchResults(select_by_bytes(ranked, bytes_limit), query=query, bytes_limit=bytes_limit,
                         selected_tags=selected, candidates=len(entities))
