"""The memory entity (docs/MECHANISMS.md §3.1) and the scored search result."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

#: The seven C.O.R.E. P.A.C.T. dimensions, in the order MECHANISMS.md §3.4 lists them.
DIMENSIONS = ("c", "o", "r", "e", "p", "a", "t")
#: What a memory scores when nobody scored it (the triage schema's defaults).
DEFAULT_SCORES = {"c": 0.5, "o": 0.5, "r": 0.5, "e": 0.0, "p": 0.0, "a": 0.5, "t": 0.5}


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def clean_scores(scores: Any = None) -> dict[str, float]:
    """Seven scores in [0, 1] from a dict (keys ``c`` or ``c_score``), an object with such
    attributes (the triage schema's ``Scores``) or None (the defaults).  Bad values raise."""
    out = dict(DEFAULT_SCORES)
    if scores is None:
        return out
    if not isinstance(scores, dict):
        found = {k: getattr(scores, k) for k in DIMENSIONS if hasattr(scores, k)}
        if not found:  # a list, a string, a number: nothing says which score is which
            raise ValueError(f"scores must be a dict of {', '.join(DIMENSIONS)}, got {type(scores).__name__} {scores!r:.60}")
        scores = found
    for key, value in scores.items():
        k = str(key).lower().removesuffix("_score")
        if k not in DIMENSIONS:
            raise ValueError(f"unknown score {key!r}; the dimensions are {', '.join(DIMENSIONS)}")
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"score {key!r} must be a number in [0, 1], got {value!r}") from None
        if v != v:  # NaN
            raise ValueError(f"score {key!r} is NaN")
        out[k] = min(1.0, max(0.0, v))
    return out


@dataclass(slots=True)
class MemoryEntity:
    """One memory: content, tags, the questions it answers, and its C.O.R.E. P.A.C.T. scores."""

    id: str
    content: str
    tags: list[str] = field(default_factory=list)
    potential_questions: list[str] = field(default_factory=list)
    created_at: str = field(default_factory=now_iso)
    c_score: float = 0.5  # Connectivity
    o_score: float = 0.5  # Origin
    r_score: float = 0.5  # Relevance
    e_score: float = 0.0  # Emotion
    p_score: float = 0.0  # Preference
    a_score: float = 0.5  # Actionability
    t_score: float = 0.5  # Temporality

    @property
    def scores(self) -> dict[str, float]:
        return {k: getattr(self, f"{k}_score") for k in DIMENSIONS}

    @property
    def size(self) -> int:
        """The content's size in UTF-8 bytes (what byte limits count)."""
        return len(self.content.encode())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryEntity:
        scores = clean_scores({k: data[f"{k}_score"] for k in DIMENSIONS if f"{k}_score" in data})
        return cls(id=str(data["id"]), content=str(data["content"]), tags=list(data.get("tags") or []),
                   potential_questions=list(data.get("potential_questions") or []),
                   created_at=str(data.get("created_at") or now_iso()),
                   **{f"{k}_score": v for k, v in scores.items()})


@dataclass(slots=True)
class ScoredMemory:
    """A search result: the entity and how its final score was made.

    ``breakdown`` has r, c, t, a, p, o, e, keyword_bonus, semantic (cosine to the
    query), lexical (BM25, scaled to [0, 1] among the candidates), relevance (the
    fused retrieval term), core (the weighted seven), final.
    """

    entity: MemoryEntity
    breakdown: dict[str, float]
    source: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.entity.id

    @property
    def content(self) -> str:
        return self.entity.content

    @property
    def tags(self) -> list[str]:
        return self.entity.tags

    @property
    def score(self) -> float:
        return self.breakdown["final"]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "tags": list(self.tags),
                "potential_questions": list(self.entity.potential_questions),
                "created_at": self.entity.created_at, "score": self.score,
                "breakdown": dict(self.breakdown), "source": list(self.source)}

    def __repr__(self) -> str:
        return f"<ScoredMemory {self.id} {self.score:.3f} {self.content[:40]!r}>"


class SearchResults(list[ScoredMemory]):
    """Ranked, byte-limited results (a list of ``ScoredMemory``) with their totals."""

    def __init__(self, items: Iterable[ScoredMemory] = (), *, query: str = "", bytes_limit: int | None = None,
                 selected_tags: list[str] | None = None, candidates: int = 0) -> None:
        super().__init__(items)
        self.query = query
        self.bytes_limit = bytes_limit
        self.selected_tags = list(selected_tags or [])
        self.candidates = candidates

    @property
    def total_content(self) -> str:
        return "\n\n".join(m.content for m in self)

    @property
    def content_bytes(self) -> int:
        return sum(m.entity.size for m in self)

    def to_dicts(self) -> list[dict[str, Any]]:
        return [m.to_dict() for m in self]


def result_dicts(results: Iterable[Any]) -> list[dict[str, Any]]:
    """Results as the ``memory`` event carries them: id, content, score, breakdown."""
    return [{"id": r.id, "content": r.content, "score": r.score, "breakdown": dict(r.breakdown)}
            for r in results]
