"""Ranking: the C.O.R.E. P.A.C.T. score, the keyword bonus (docs/MECHANISMS.md §3.4-3.5) and the
retrieval term that this package adds.

The reference score is ``weighted = min(1, core + keyword_bonus)``: the weighted sum of the
seven scores plus the keyword bonus, capped at 0.3.  It ignores how close a memory is to the
query beyond shared keywords, so two modes add a retrieval term ``relevance`` in [0, 1]::

    final = (1 - w) * weighted + w * relevance

- ``ranking="weighted"``: the weighted sum alone (w = 0), over the vector search's 15
  candidates (and the tag search's).  ``"seed"`` is an older name of it, still read.
- ``ranking="semantic"``: relevance is the cosine similarity to the query.
- ``ranking="hybrid"`` (default): relevance fuses the candidates that the vector
  search and BM25 found (each ``depth`` deep, plus the tag search's when the model
  picked tags).  ``fusion="convex"`` (default): ``alpha`` times the cosine, min-max
  scaled over the candidates, plus ``1 - alpha`` times BM25 scaled by the best; every
  candidate is scored by both, whichever retriever found it.  ``fusion="rrf"``:
  reciprocal-rank fusion of the retrievers' own lists, each ranking only what it found.
  On LoCoMo (tests/benchmarks/retrieval_eval.py, no tags, depth 30) convex fusion gave
  recall@10 0.66 against 0.65 for RRF with the minilm-onnx embedder, 0.63 against 0.55
  with hashing; alpha 0.4-0.6 gives minilm-onnx 0.66-0.67 but hashing 0.57-0.62:
  0.3 serves both.

With w close to 1 the weighted part is a bounded rerank: it moves a memory past another
only when their relevance differs by less than ``(1 - w) / w`` (0.053 at the default
0.95), which reorders near-ties and never lifts a memory no retriever found (relevance
0) over one that some retriever did.  ``w`` and the other defaults are what the
retrieval evaluation (tests/benchmarks/retrieval_eval.py) chose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .entity import MemoryEntity, ScoredMemory
from .text import keywords, tokens

#: MECHANISMS.md §3.4.
WEIGHTS = {"r": 0.25, "c": 0.20, "t": 0.15, "a": 0.15, "p": 0.10, "o": 0.10, "e": 0.05}
#: MECHANISMS.md §3.5: content, tags, questions, any keyword in content, all keywords in content.
BONUS = {"content": 0.10, "tags": 0.08, "questions": 0.05, "contains": 0.05, "all": 0.03}
BONUS_CAP = 0.3
RANKINGS = ("hybrid", "semantic", "weighted")
#: Older names of the rankings, still read (user code may carry them).
RANKING_ALIASES = {"seed": "weighted"}
FUSIONS = ("rrf", "convex")


@dataclass(slots=True)
class RankingConfig:
    """How results are ordered.

    ``mode``: hybrid (default), semantic or weighted.  ``weight``: the share of the
    retrieval term in the final score (ignored by weighted).  ``rrf_k``: the constant of
    reciprocal-rank fusion (60, as in Cormack et al.).  ``depth``: how many memories
    the vector and the full-text search each return to hybrid ranking (weighted and
    semantic use 15 from the vector search).  ``weights``: the seven
    C.O.R.E. P.A.C.T. weights (MECHANISMS.md §3.4).  ``fusion``: how hybrid fuses the
    retrievers: ``rrf`` (their ranks) or ``convex`` (``alpha`` times the cosine, min-max
    scaled over the candidates, plus ``1 - alpha`` times BM25 scaled by the best).
    """

    mode: str = "hybrid"
    weight: float = 0.95
    rrf_k: int = 60
    depth: int = 30
    fusion: str = "convex"
    alpha: float = 0.3
    weights: dict[str, float] = field(default_factory=lambda: dict(WEIGHTS))

    def __post_init__(self) -> None:
        self.mode = RANKING_ALIASES.get(self.mode, self.mode)
        if self.mode not in RANKINGS:
            raise ValueError(f"unknown ranking {self.mode!r}; choose one of: {', '.join(RANKINGS)}")
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"ranking weight must be in [0, 1], got {self.weight}")
        if self.fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {self.fusion!r}; choose one of: {', '.join(FUSIONS)}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"fusion alpha must be in [0, 1], got {self.alpha}")
        if self.rrf_k < 1 or self.depth < 1:
            raise ValueError(f"rrf_k and depth must be at least 1, got {self.rrf_k} and {self.depth}")

    def with_mode(self, mode: str) -> RankingConfig:
        """The same settings in another mode."""
        return RankingConfig(mode=mode, weight=self.weight, rrf_k=self.rrf_k, depth=self.depth,
                             fusion=self.fusion, alpha=self.alpha, weights=dict(self.weights))


def relevance_floor(config: RankingConfig | None = None) -> float | None:
    """The most a memory can score when no word of the query occurs in it (BM25 and the
    keyword bonus both 0), under hybrid convex ranking: ``(1 - w) + w * alpha`` (0.335 at the
    defaults).  The cosine is min-max scaled over the candidates, so the closest of them gets
    ``alpha`` however far it is from the query; a score at or under the floor says "closest by
    embedding", not "relevant".  None for the other modes, whose scores have no such bound.
    """
    config = config or RankingConfig()
    if config.mode != "hybrid" or config.fusion != "convex":
        return None
    return round((1.0 - config.weight) + config.weight * config.alpha, 6)


def core_score(entity: MemoryEntity, weights: dict[str, float] = WEIGHTS) -> float:
    """The weighted sum of the seven C.O.R.E. P.A.C.T. scores."""
    total: float = sum(w * getattr(entity, f"{k}_score") for k, w in weights.items())
    return total


@lru_cache(maxsize=16_384)  # the same memories come back query after query: tokenise each text once
def token_set(text: str) -> frozenset[str]:
    """The distinct tokens of ``text``."""
    return frozenset(tokens(text))


def keyword_bonus(entity: MemoryEntity, query: str, kws: list[str] | None = None) -> float:
    """The keyword bonus (MECHANISMS.md §3.5), capped at 0.3 (``kws``: the query's keywords, if known)."""
    kws = keywords(query) if kws is None else kws
    return float(_bonuses([entity], kws)[0]) if kws else 0.0


def _bonuses(entities: list[MemoryEntity], kws: list[str]) -> np.ndarray:
    """The keyword bonus of every entity at once."""
    n = len(entities)
    if not kws or not n:
        return np.zeros(n)
    # A keyword (a Snowball stem) can only be a token of a text that contains it less its
    # last two letters (stems keep the word's start; "happy" -> "happi", "relational" ->
    # "relat"): texts without any are not tokenised at all.
    probes = [k[:-2] if len(k) > 3 else k[:1] for k in kws]
    counts = np.array([[_count(kws, probes, text) for text in
                        (e.content, " ".join(e.tags), " ".join(e.potential_questions))] for e in entities],
                      dtype=np.float64).reshape(n, 3)
    share = counts / len(kws)
    bonus = share @ np.array([BONUS["content"], BONUS["tags"], BONUS["questions"]])
    bonus += np.where(counts[:, 0] > 0, BONUS["contains"], 0.0)
    bonus += np.where(counts[:, 0] == len(kws), BONUS["all"], 0.0)
    capped: np.ndarray = np.minimum(BONUS_CAP, bonus)
    return capped


def _count(kws: list[str], probes: list[str], text: str) -> int:
    low = text.lower()
    if not any(p in low for p in probes):
        return 0
    have = token_set(text)
    return sum(1 for k in kws if k in have)


def weighted_score(entity: MemoryEntity, query: str, weights: dict[str, float] = WEIGHTS) -> float:
    """The reference score ``min(1, core + keyword_bonus)`` (MECHANISMS.md §3.4)."""
    return min(1.0, core_score(entity, weights) + keyword_bonus(entity, query))


def rrf(ranks: list[int | None], k: int = 60) -> float:
    """Reciprocal-rank fusion of 1-based ranks (None: absent from that list), scaled to [0, 1]."""
    best = len(ranks) / (k + 1)
    return sum(1.0 / (k + r) for r in ranks if r is not None) / best if ranks else 0.0


_SHOWN = ("r", "c", "t", "a", "p", "o", "e")
_COLUMNS = (*_SHOWN, "core", "keyword_bonus", "semantic", "lexical", "relevance", "final")


def fused_relevance(ids: list[str], found: dict[str, list[str]], k: int = 60) -> np.ndarray:
    """Reciprocal-rank fusion of each retriever's own list (ids best first) for ``ids``,
    scaled to [0, 1]: first in every non-empty list is 1, absent from all is 0."""
    lists = [ranked for ranked in found.values() if ranked]
    if not lists:
        return np.zeros(len(ids))
    pos = {i: n for n, i in enumerate(ids)}
    fused = np.zeros(len(ids))
    for ranked in lists:
        for r, i in enumerate(ranked, 1):
            n = pos.get(i)
            if n is not None:
                fused[n] += 1.0 / (k + r)
    return fused / (len(lists) / (k + 1))


def _lists_from_scores(ids: list[str], semantic: dict[str, float], lexical: dict[str, float]) -> dict[str, list[str]]:
    """Retriever lists when only scores are known: each ranks the ids it scored above 0."""
    return {"semantic": _ranked(ids, semantic), "lexical": _ranked(ids, lexical)}


def _ranked(ids: list[str], values: dict[str, float]) -> list[str]:
    """The ids that ``values`` scores above 0, best first (ties by id)."""
    return sorted((i for i in ids if values.get(i, 0.0) > 0), key=lambda i: (-values[i], i))


def rank(entities: list[MemoryEntity], query: str, *, semantic: dict[str, float],
         lexical: dict[str, float], config: RankingConfig | None = None,
         sources: dict[str, tuple[str, ...]] | None = None, limit: int | None = None,
         found: dict[str, list[str]] | None = None) -> list[ScoredMemory]:
    """Score and order ``entities`` for ``query``.

    ``semantic`` maps id to cosine similarity; ``lexical`` maps id to BM25 score
    (higher is better; absent: no lexical match).  ``found``: each retriever's own
    list of ids, best first (as ``Candidates.found``), fused by hybrid ranking; without
    it each of ``semantic`` and ``lexical`` ranks the ids it scores above 0.  Ties
    break on id for a stable order.  ``limit``: return only the best so many.
    Computed over all candidates at once (numpy), as this runs on every search.
    """
    config = config or RankingConfig()
    n = len(entities)
    if not n:
        return []
    ids = [e.id for e in entities]
    scores = np.array([[e.r_score, e.c_score, e.t_score, e.a_score, e.p_score, e.o_score, e.e_score]
                       for e in entities], dtype=np.float64)
    core = scores @ np.array([config.weights.get(k, 0.0) for k in _SHOWN])
    bonus = _bonuses(entities, keywords(query))
    weighted = np.minimum(1.0, core + bonus)
    sem = np.array([semantic.get(i, 0.0) for i in ids], dtype=np.float64)
    lex_raw = np.array([lexical.get(i, 0.0) for i in ids], dtype=np.float64)
    cos = np.clip(sem, 0.0, 1.0)
    top_lex = max(lexical.values(), default=0.0) or 1.0
    lex = np.maximum(0.0, lex_raw) / top_lex
    if config.mode == "hybrid" and config.fusion == "convex":
        span = float(cos.max() - cos.min())
        relevance = config.alpha * ((cos - cos.min()) / span if span > 0 else np.zeros(n)) + (1 - config.alpha) * lex
    elif config.mode == "hybrid":
        relevance = fused_relevance(ids, found if found is not None else _lists_from_scores(ids, semantic, lexical),
                                    config.rrf_k)
    else:
        relevance = cos
    w = 0.0 if config.mode == "weighted" else config.weight
    final = np.minimum(1.0, (1.0 - w) * weighted + w * relevance)
    table = np.round(np.column_stack([scores, core, bonus, cos, lex, relevance, final]), 6)
    rows = table.tolist()  # Python floats: sorting on numpy scalars is slow
    order = sorted(range(n), key=lambda i: (-rows[i][-1], -rows[i][-2], ids[i]))
    if limit is not None:
        order = order[:limit]
    rows = [rows[i] for i in order]
    src = sources or {}
    return [ScoredMemory(entities[i], dict(zip(_COLUMNS, row, strict=True)), src.get(ids[i], ()))
            for i, row in zip(order, rows, strict=True)]


def select_by_bytes(ranked: list[ScoredMemory], bytes_limit: int | None) -> list[ScoredMemory]:
    """MECHANISMS.md §3.3 step 6: take memories in rank order while their content fits the limit.

    A memory too large for what is left is skipped, so a smaller one further down may fit.
    """
    if bytes_limit is None:
        return list(ranked)
    if bytes_limit < 0:
        raise ValueError(f"bytes_limit must be positive, got {bytes_limit}")
    chosen, used = [], 0
    for m in ranked:
        size = m.entity.size
        if used + size <= bytes_limit:
            chosen.append(m)
            used += size
    return chosen
