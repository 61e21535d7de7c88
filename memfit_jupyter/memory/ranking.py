"""Ranking: the C.O.R.E. P.A.C.T. score, the keyword bonus (seed 000 §3.4-3.5) and the
retrieval term that this package adds.

The seed's score is ``min(1, core + keyword_bonus)`` with the bonus capped at
0.3.  It ignores how close a memory is to the query beyond shared keywords, so
two modes add a retrieval term ``relevance`` in [0, 1]::

    final = (1 - w) * min(1, core + keyword_bonus) + w * relevance

- ``ranking="seed"``: the seed's formula (w = 0).
- ``ranking="semantic"``: relevance is the cosine similarity to the query.
- ``ranking="hybrid"`` (default): relevance is the reciprocal-rank fusion of the
  BM25 rank and the semantic rank, scaled so that first in both lists is 1.

The final score stays within [0, 1].  ``w`` defaults to the value that the
retrieval evaluation (tests/benchmarks/retrieval_eval.py) chose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .entity import MemoryEntity, ScoredMemory
from .text import keywords, tokens

#: Seed 000 §3.4.
WEIGHTS = {"r": 0.25, "c": 0.20, "t": 0.15, "a": 0.15, "p": 0.10, "o": 0.10, "e": 0.05}
#: Seed 000 §3.5: content, tags, questions, any keyword in content, all keywords in content.
BONUS = {"content": 0.10, "tags": 0.08, "questions": 0.05, "contains": 0.05, "all": 0.03}
BONUS_CAP = 0.3
RANKINGS = ("hybrid", "semantic", "seed")


@dataclass(slots=True)
class RankingConfig:
    """How results are ordered.

    ``mode``: hybrid (default), semantic or seed.  ``weight``: the share of the
    retrieval term in the final score (0 for seed).  ``rrf_k``: the constant of
    reciprocal-rank fusion (60, as in Cormack et al.).
    """

    mode: str = "hybrid"
    weight: float = 0.6
    rrf_k: int = 60
    weights: dict[str, float] = field(default_factory=lambda: dict(WEIGHTS))

    def __post_init__(self) -> None:
        if self.mode not in RANKINGS:
            raise ValueError(f"unknown ranking {self.mode!r}; choose one of: {', '.join(RANKINGS)}")
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"ranking weight must be in [0, 1], got {self.weight}")


def core_score(entity: MemoryEntity, weights: dict[str, float] = WEIGHTS) -> float:
    """The weighted sum of the seven C.O.R.E. P.A.C.T. scores."""
    return sum(w * getattr(entity, f"{k}_score") for k, w in weights.items())


def match_score(query_keywords: list[str], text: str) -> float:
    """The share of the query's keywords that occur in ``text`` (0 when the query has none)."""
    if not query_keywords:
        return 0.0
    have = set(tokens(text))
    return sum(1 for k in query_keywords if k in have) / len(query_keywords)


def keyword_bonus(entity: MemoryEntity, query: str, kws: list[str] | None = None) -> float:
    """Seed 000 §3.5: the keyword bonus, capped at 0.3 (``kws``: the query's keywords, if known)."""
    kws = keywords(query) if kws is None else kws
    if not kws:
        return 0.0
    content_match = match_score(kws, entity.content)
    bonus = content_match * BONUS["content"]
    bonus += match_score(kws, " ".join(entity.tags)) * BONUS["tags"]
    bonus += match_score(kws, " ".join(entity.potential_questions)) * BONUS["questions"]
    if content_match > 0:
        bonus += BONUS["contains"]
    if content_match == 1.0:
        bonus += BONUS["all"]
    return min(BONUS_CAP, bonus)


def seed_score(entity: MemoryEntity, query: str, weights: dict[str, float] = WEIGHTS) -> float:
    """Seed 000 §3.4: ``min(1, core + keyword_bonus)``."""
    return min(1.0, core_score(entity, weights) + keyword_bonus(entity, query))


def rrf(ranks: list[int | None], k: int = 60) -> float:
    """Reciprocal-rank fusion of 1-based ranks (None: absent from that list), scaled to [0, 1]."""
    best = len(ranks) / (k + 1)
    return sum(1.0 / (k + r) for r in ranks if r is not None) / best if ranks else 0.0


def rank(entities: list[MemoryEntity], query: str, *, semantic: dict[str, float],
         lexical: dict[str, float], config: RankingConfig | None = None,
         sources: dict[str, tuple[str, ...]] | None = None) -> list[ScoredMemory]:
    """Score and order ``entities`` for ``query``.

    ``semantic`` maps id to cosine similarity; ``lexical`` maps id to BM25 score
    (higher is better; absent: no lexical match).  Ties break on id for a stable order.
    """
    config = config or RankingConfig()
    # a memory with no similarity at all is not "ranked" by the semantic list
    sem_order = sorted((e for e in entities if semantic.get(e.id, 0.0) > 0),
                       key=lambda e: (-semantic[e.id], e.id))
    sem_rank = {e.id: i + 1 for i, e in enumerate(sem_order)}
    lex_order = sorted((e for e in entities if lexical.get(e.id, 0.0) > 0), key=lambda e: (-lexical[e.id], e.id))
    lex_rank = {e.id: i + 1 for i, e in enumerate(lex_order)}
    top_lex = max(lexical.values(), default=0.0) or 1.0
    kws = keywords(query)
    out = []
    for e in entities:
        core = core_score(e, config.weights)
        bonus = keyword_bonus(e, query, kws)
        seed = min(1.0, core + bonus)
        cos = max(0.0, min(1.0, semantic.get(e.id, 0.0)))
        lex = max(0.0, lexical.get(e.id, 0.0)) / top_lex
        if config.mode == "hybrid":
            relevance = rrf([sem_rank.get(e.id), lex_rank.get(e.id)], config.rrf_k)
        else:
            relevance = cos
        w = 0.0 if config.mode == "seed" else config.weight
        final = min(1.0, (1.0 - w) * seed + w * relevance)
        breakdown = {**{k: round(getattr(e, f"{k}_score"), 6) for k in ("r", "c", "t", "a", "p", "o", "e")},
                     "core": round(core, 6), "keyword_bonus": round(bonus, 6), "semantic": round(cos, 6),
                     "lexical": round(lex, 6), "relevance": round(relevance, 6), "final": round(final, 6)}
        out.append(ScoredMemory(e, breakdown, (sources or {}).get(e.id, ())))
    out.sort(key=lambda m: (-m.breakdown["final"], -m.breakdown["relevance"], m.id))
    return out


def select_by_bytes(ranked: list[ScoredMemory], bytes_limit: int | None) -> list[ScoredMemory]:
    """Seed 000 §3.3 step 6: take memories in rank order while their content fits the limit.

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
