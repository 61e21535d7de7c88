"""Confidence of sampled answers (docs/MECHANISMS.md §4.1).

Each sample ``i`` of a sub-query gets a confidence in [0, 1]::

    confidence_i = sum_k w_k * f_k(i) / sum_k w_k     over the factors k that are known

    factor        weight  value
    consistency    0.40   mean semantic similarity of answer i to the other samples' answers
                          (self-consistency; unknown with a single sample)
    stated         0.25   the model's own stated confidence, clamped to [0, 1] (unknown if not given)
    coherence      0.15   0.5 * support + 0.3 * continuity + 0.2 * (1 - hedging) of the reasoning:
                          support    = best similarity of a reasoning step to the answer,
                          continuity = mean similarity of consecutive steps (1 for one step),
                          hedging    = share of steps that hedge ("maybe", "not sure", "guess"...);
                          0.5 when no reasoning is given
    tool           0.10   1 / attempts of the call (a reply that had to be repaired or asked for
                          again is less trustworthy)
    source         0.10   reliability of where it came from: the tier (primary 1.0, fast 0.85,
                          fallback 0.8) times 0.9 when a breaker sent it away from the tier asked

Similarity is the cosine of the project's embedder (``memory.embedders``,
hashing by default) with one correction, because answers differ most in their
numbers: when both answers contain numbers, the score becomes
``0.3 * cosine + 0.7 * jaccard(numbers)`` so that "1648" and "in 1658" are
far apart and "1648" and "It was signed in 1648." are close.  If the memory
package is not importable, a local feature-hashing embedding is used.

A result below ``LOW_CONFIDENCE`` (0.3) is flagged for review.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy and the memory package are imported at first use
    from numpy.typing import NDArray

    from ..memory.embedders import Embedder

LOW_CONFIDENCE = 0.3
WEIGHTS = {"consistency": 0.40, "stated": 0.25, "coherence": 0.15, "tool": 0.10, "source": 0.10}
TIER_RELIABILITY = {"primary": 1.0, "fast": 0.85, "fallback": 0.8}
ROUTED_AWAY_FACTOR = 0.9
_HEDGES = ("maybe", "perhaps", "not sure", "unsure", "guess", "i think", "possibly", "might be",
           "unclear", "probably", "can't tell", "cannot tell", "no idea")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the is are was were be been of in on at to for and or it its this that as by "
                  "with from answer final so i we is".split())


@dataclass(slots=True)
class Sample:
    """One sampled answer to a sub-question, with what its confidence is built from."""

    answer: str
    stated: float | None = None
    reasoning: list[str] = field(default_factory=list)
    attempts: int = 1
    tier: str = "primary"
    routed_away: bool = False
    ok: bool = True
    confidence: float = 0.0
    #: The sample's weight in a vote: its confidence without the consistency factor, because a
    #: vote already counts agreement by adding up the members of a cluster.
    vote: float = 0.0
    factors: dict[str, float] = field(default_factory=dict)
    cluster: int = -1


# --- similarity ----------------------------------------------------------------------------
def _numbers(text: str) -> frozenset[str]:
    out = set()
    for m in _NUMBER.findall(text):
        raw = m.replace(",", "")
        try:
            value = float(raw)
        except ValueError:
            continue
        out.add(f"{value:g}")
    return frozenset(out)


def _local_vector(text: str, dim: int = 512) -> dict[int, float]:
    """Feature hashing of content words and their character trigrams (deterministic: crc32)."""
    vec: dict[int, float] = {}
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        feats = [(word, 1.0)] + [(word[i:i + 3], 0.3) for i in range(max(0, len(word) - 2))]
        for feat, weight in feats:
            h = zlib.crc32(feat.encode())
            sign = 1.0 if h & 1 else -1.0
            vec[(h >> 1) % dim] = vec.get((h >> 1) % dim, 0.0) + sign * weight
    return vec


def _local_cosine(a: str, b: str) -> float:
    va, vb = _local_vector(a), _local_vector(b)
    dot = sum(v * vb.get(k, 0.0) for k, v in va.items())
    na = math.sqrt(sum(v * v for v in va.values()))
    nb = math.sqrt(sum(v * v for v in vb.values()))
    return 0.0 if na == 0 or nb == 0 else max(0.0, dot / (na * nb))


@lru_cache(maxsize=1)
def _project_embedder() -> Embedder | None:
    try:
        from ..memory.embedders import get_embedder

        return get_embedder("hashing")
    except Exception:  # the memory package is optional here; fall back to the local hashing
        return None


class Similarity:
    """Semantic similarity of two answers in [0, 1]; see the module docstring."""

    def __init__(self, embedder: Embedder | None = None, use_project_embedder: bool = True):
        self.embedder = embedder if embedder is not None else (_project_embedder() if use_project_embedder
                                                               else None)
        self._cache: dict[str, NDArray[Any]] = {}

    def _cosine(self, a: str, b: str) -> float:
        embedder = self.embedder
        if embedder is None:
            return _local_cosine(a, b)
        try:
            va, vb = self._vector(embedder, a), self._vector(embedder, b)
            return max(0.0, min(1.0, float((va * vb).sum())))
        except Exception:
            return _local_cosine(a, b)

    def _vector(self, embedder: Embedder, text: str) -> NDArray[Any]:
        v = self._cache.get(text)
        if v is None:
            v = embedder.embed([text])[0]
            self._cache[text] = v
        return v

    def __call__(self, a: str, b: str) -> float:
        a, b = (a or "").strip(), (b or "").strip()
        if not a or not b:
            return 0.0
        if a.lower() == b.lower():
            return 1.0
        cos = self._cosine(a, b)
        na, nb = _numbers(a), _numbers(b)
        if na and nb:
            return 0.3 * cos + 0.7 * len(na & nb) / len(na | nb)
        return cos


# --- the factors -----------------------------------------------------------------------------
def coherence(reasoning: Sequence[str], answer: str, sim: Similarity) -> float | None:
    """How well the reasoning chain hangs together and leads to the answer (None: no chain)."""
    steps = [s for s in (str(x).strip() for x in reasoning) if s]
    if not steps:
        return None
    support = max(sim(s, answer) for s in steps)
    continuity = (sum(sim(a, b) for a, b in zip(steps, steps[1:], strict=False)) / (len(steps) - 1)
                  if len(steps) > 1 else 1.0)
    hedging = sum(any(h in s.lower() for h in _HEDGES) for s in steps) / len(steps)
    return 0.5 * support + 0.3 * continuity + 0.2 * (1.0 - hedging)


def score(samples: list[Sample], sim: Similarity | None = None) -> list[Sample]:
    """Fill in each sample's ``confidence`` and ``factors`` (see the module docstring)."""
    sim = sim or Similarity()
    good = [s for s in samples if s.ok]
    for s in good:
        factors: dict[str, float] = {}
        others = [o for o in good if o is not s]
        if others:
            factors["consistency"] = sum(sim(s.answer, o.answer) for o in others) / len(others)
        if s.stated is not None:
            factors["stated"] = min(1.0, max(0.0, float(s.stated)))
        c = coherence(s.reasoning, s.answer, sim)
        factors["coherence"] = 0.5 if c is None else c
        factors["tool"] = 1.0 / max(1, s.attempts)
        factors["source"] = TIER_RELIABILITY.get(s.tier, 0.8) * (ROUTED_AWAY_FACTOR if s.routed_away else 1.0)
        total_w = sum(WEIGHTS[k] for k in factors)
        s.factors = {k: round(v, 4) for k, v in factors.items()}
        s.confidence = round(sum(WEIGHTS[k] * v for k, v in factors.items()) / total_w, 4)
        own = {k: v for k, v in factors.items() if k != "consistency"}
        s.vote = round(sum(WEIGHTS[k] * v for k, v in own.items()) / sum(WEIGHTS[k] for k in own), 4)
    for s in samples:
        if not s.ok:
            s.confidence, s.vote, s.factors = 0.0, 0.0, {"tool": 0.0}
    return samples
