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

import numpy as np

from .entity import MemoryEntity, ScoredMemory, SearchResults
from .items import prepare_batch
from .pg_text import bm25, postings, terms_of
from .ranking import RankingConfig
from .retrieval import MemoryBackend, StoreRetrieval
from .search import SEMANTIC_LIMIT, TAG_LIMIT, Candidates, search_memory
from .text import keywords


class Overlay:
    """Reads merge ``base`` and ``top``; writes go to ``top``.

    ``hidden``: ids of ``base`` rows left out of every read (a fork hides what its parent learnt
    at and after the fork step, which the child's past did not know).
    """

    def __init__(self, base: MemoryBackend, top: MemoryBackend, hidden: Iterable[str] = ()):
        mine, under = getattr(getattr(top, "embedder", None), "id", None), getattr(getattr(base, "embedder", None), "id", None)
        if mine and under and mine != under:  # their vectors would not be comparable
            raise ValueError(f"an overlay's store must embed as the store under it does: {mine} over {under}")
        self.base = base
        self.top = top
        self.hidden = {str(i) for i in hidden if i}
        self._hidden_seen: tuple[frozenset[str], builtins.list[MemoryEntity]] | None = None
        #: How results are ordered: as the store under it orders them.
        self.ranking: RankingConfig = getattr(base, "ranking", None) or RankingConfig()

    # --- reads: one retrieval pipeline over both stores' candidates --------------------------
    @property
    def embedder(self) -> Any:
        return getattr(self.base, "embedder", None)

    def embed_query(self, query: str) -> np.ndarray:
        vector: np.ndarray = self.base.embed_query(query)  # type: ignore[attr-defined]
        return vector

    def candidates(self, q: np.ndarray, query: str, *, tags: Iterable[str] = (), only: Iterable[str] | None = None,
                   tag_limit: int = TAG_LIMIT, semantic_limit: int = SEMANTIC_LIMIT,
                   lexical_limit: int = SEMANTIC_LIMIT) -> Candidates:
        """Both stores' candidates as one store holding the child's rows and the parent's visible
        ones would find them: hidden rows do not take a place (the base is asked for as many
        more), and each retriever's finds are ordered across the two (cosine, BM25)."""
        tags, only = list(tags), (list(only) if only is not None else None)
        more = len(self.hidden)
        base = self.base.candidates(q, query, tags=tags, only=only, tag_limit=tag_limit + more,  # type: ignore[attr-defined]
                                    semantic_limit=semantic_limit + more,
                                    lexical_limit=lexical_limit + more if lexical_limit > 0 else 0)
        top = self.top.candidates(q, query, tags=tags, only=only, tag_limit=tag_limit,  # type: ignore[attr-defined]
                                  semantic_limit=semantic_limit, lexical_limit=lexical_limit)
        own = {e.content for e in top.entities}  # a row the child stored too: once, the child's
        rows = [(e, top.vectors[i]) for i, e in enumerate(top.entities)] + [
            (e, base.vectors[i]) for i, e in enumerate(base.entities) if e.id not in self.hidden and e.content not in own]
        by_id = {e.id: (e, v) for e, v in rows}
        cosine = {i: float(v @ q) for i, (_, v) in by_id.items()}
        lexical = {i: s for c in (base, top) for i, s in c.lexical.items() if i in by_id}
        if lexical:
            lexical = self._one_corpus(query, [by_id[i][0] for i in lexical]) or lexical
        order = {"tags": None, "semantic": cosine, "lexical": lexical}
        limit = {"tags": tag_limit, "semantic": semantic_limit, "lexical": lexical_limit}
        found: dict[str, list[str]] = {}
        for name, score in order.items():
            ids = list(dict.fromkeys(i for c in (top, base) for i in c.found.get(name, ()) if i in by_id))
            if score is not None:
                ids.sort(key=lambda i: -score.get(i, 0.0))
            if ids[: limit[name]]:
                found[name] = ids[: limit[name]]
        kept = list(dict.fromkeys(i for ids in found.values() for i in ids))
        vectors = np.array([by_id[i][1] for i in kept], dtype=np.float32).reshape(len(kept), -1) if kept else \
            np.zeros((0, len(q)), dtype=np.float32)
        return Candidates([by_id[i][0] for i in kept], vectors, found, {i: lexical[i] for i in kept if i in lexical})

    def _one_corpus(self, query: str, found: builtins.list[MemoryEntity]) -> dict[str, float] | None:
        """The BM25 of the lexical finds ``found`` on the statistics of both stores together, as
        one store holding the child's rows and the parent's visible ones scores them.  Each store
        scores its finds on its own rows: a word that two of a child's three memories share would
        weigh next to nothing (FTS5's IDF floor) however rare the parent's rows make it.  None
        when a store cannot say what it scores with (another kind of store)."""
        asks = [ask for store in (self.base, self.top) if callable(ask := getattr(store, "lexical_stats", None))]
        if len(asks) < 2:
            return None
        terms = terms_of(keywords(query))
        rows, tokens, hits = 0, 0, dict.fromkeys(terms, 0)
        for ask in asks:
            n, t, held = ask(terms)
            rows, tokens = rows + n, tokens + t
            for term, count in held.items():
                hits[term] = hits.get(term, 0) + count
        for row in self._hidden_rows():  # not in the corpus a read sees
            dl, tf = postings(row.content, row.tags, row.potential_questions)
            rows, tokens = rows - 1, tokens - dl
            for term in terms:
                if term in tf:
                    hits[term] -= 1
        return {e.id: bm25(terms, *postings(e.content, e.tags, e.potential_questions), rows, tokens, hits)
                for e in found}

    def search(self, query: str, k: int | None = 10, bytes_limit: int | None = None, tags: Any = None, *,
               llm: Any = None, iteration: int = 0, **options: Any) -> SearchResults:
        """The retrieval pipeline over both stores, as over one store holding the child's rows and
        the parent's visible ones: the model picks among their tags, hidden rows take no place,
        and the two stores' finds are ranked together.  Stores without ``candidates`` (a replay's
        recording) are searched apart and their results merged."""
        if all(callable(getattr(s, "candidates", None)) for s in (self.base, self.top)):
            disable_ai = options.get("disable_ai")
            return search_memory(self, query, k=k, bytes_limit=bytes_limit, tags=tags, llm=llm,
                                 disable_ai=disable_ai if disable_ai is not None else llm is None,
                                 ranking=options.get("ranking"), iteration=iteration)
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
        """The tags of the rows a read sees, with their counts (hidden rows' left out)."""
        counts = dict(_call(self.base, "tags") or {})
        for row in self._hidden_rows():
            for tag in row.tags:
                counts[tag] = counts.get(tag, 0) - 1
        for tag, n in (_call(self.top, "tags") or {}).items():
            counts[tag] = counts.get(tag, 0) + n
        return {tag: n for tag, n in counts.items() if n > 0}

    def __len__(self) -> int:
        return len(self.top) + len(self.base) - len(self._hidden_rows())  # type: ignore[arg-type]

    def _hidden_rows(self) -> builtins.list[MemoryEntity]:
        """The base's rows that are hidden (an id no longer in the base hides nothing): asked of
        the base once per set of hidden ids (each search, count and write reads them; one query
        an id, a round trip each on PostgreSQL)."""
        key = frozenset(self.hidden)
        if self._hidden_seen is None or self._hidden_seen[0] != key:
            rows = (_call(self.base, "get", i) for i in sorted(key))
            self._hidden_seen = (key, [r for r in rows if r is not None])
        return self._hidden_seen[1]

    # --- writes: the top store only -------------------------------------------------------
    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None) -> str | None:
        item = {"content": content, "tags": tags, "questions": questions, **({"scores": scores} if scores else {})}
        return self.add_many([item])[0]

    def add_many(self, items: Iterable[Any], **options: Any) -> builtins.list[str | None]:
        """Into the top store, but for what repeats a row the base shows (the parent held it: the
        child does not store it again, as the parent did not); None for each such item.  Each item
        is embedded once, for the question to the base and the write to the top store alike."""
        top, base = self.top, self.base
        if not (isinstance(top, StoreRetrieval) and isinstance(base, StoreRetrieval)):  # stores of another kind
            added: builtins.list[str | None] = top.add_many(builtins.list(items), **options)
            return added
        batch = prepare_batch(items, top.embedder, options.pop("vectors", None))
        held = base.repeats(batch, ignore={r.content for r in self._hidden_rows()})
        fresh = [i for i, h in enumerate(held) if not h]
        ids = iter(top.add_many(batch.take(fresh), **options) if fresh else [])
        return [None if h else next(ids) for h in held]

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

    def info(self) -> dict[str, Any]:
        """As a store's: where (the top store over the base), count, embedder, dims, tags, ranking."""
        top, base = (_call(s, "info") or {} for s in (self.top, self.base))
        embedder = self.embedder
        return {"path": f"{top.get('path', self.top)} over {base.get('path', self.base)}", "count": len(self),
                "embedder": getattr(embedder, "id", ""), "dims": getattr(embedder, "dim", 0),
                "tags": len(self.tags()), "ranking": self.ranking.mode,
                **({"hidden": len(self.hidden)} if self.hidden else {})}

    def where(self) -> dict[str, Any] | None:
        """Where the overlay is, as a trace records it (``memory/where.py``): the top store's
        record, the base's under ``over`` and the hidden rows; None when a store cannot say."""
        top, base = _call(self.top, "where"), _call(self.base, "where")
        if not (isinstance(top, dict) and isinstance(base, dict)):
            return None
        return {**top, "over": base, **({"hidden": sorted(self.hidden)} if self.hidden else {})}

    def close(self) -> None:
        _call(self.top, "close")

    def __repr__(self) -> str:
        return f"<Overlay top={self.top!r} over base={self.base!r}>"


def _call(store: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    method = getattr(store, name, None)
    return method(*args, **kwargs) if callable(method) else None
