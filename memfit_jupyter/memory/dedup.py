"""Seed 000 §3.6: 2-of-3 deduplication.

Three dimensions are compared between a new memory and an existing one: tag
overlap (Jaccard), similarity of the potential questions, similarity of the
content.  A new memory is a duplicate when at least ``min_matches`` (2) of them
reach their thresholds against the same existing memory.  A dimension that is
empty on both sides (no tags, no questions) cannot be compared and is left out;
then the rule asks for all of the dimensions that remain, up to ``min_matches``
(so two untagged memories with no questions are duplicates when their content is).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class DedupConfig:
    """Seed 000 §3.6.1, plus the switch and how many neighbours to compare with."""

    #: Jaccard overlap of the tag sets at or above which tags repeat.
    tag_overlap_threshold: float = 0.8
    #: Cosine similarity of the potential questions at or above which they repeat.
    question_similarity_threshold: float = 0.85
    #: Cosine similarity of the content at or above which it repeats.
    content_similarity_threshold: float = 0.9
    #: How many dimensions must repeat for a duplicate.
    min_matches: int = 2
    #: Nearest neighbours by content that are compared with (plus memories sharing tags).
    candidates: int = 10
    enabled: bool = True

    def __post_init__(self) -> None:
        for name in ("tag_overlap_threshold", "question_similarity_threshold", "content_similarity_threshold"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v}")
        if self.min_matches not in (1, 2, 3):
            raise ValueError(f"min_matches must be 1, 2 or 3, got {self.min_matches}")


@dataclass(slots=True)
class Probe:
    """What dedup needs to know about one memory."""

    tags: frozenset[str]
    qvec: np.ndarray | None  # unit vector of the joined questions, None without questions
    vec: np.ndarray


def norm_tags(tags) -> frozenset[str]:
    return frozenset(t.strip().lower() for t in tags if t and t.strip())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float | None:
    """Jaccard overlap; None when both sets are empty (nothing to compare)."""
    if not a and not b:
        return None
    return len(a & b) / len(a | b)


def compare(new: Probe, old: Probe, config: DedupConfig) -> tuple[bool, dict[str, float | None]]:
    """Is ``new`` a duplicate of ``old``?  Returns the verdict and the three similarities."""
    tag_sim = jaccard(new.tags, old.tags)
    if new.qvec is None and old.qvec is None:
        q_sim = None
    elif new.qvec is None or old.qvec is None:
        q_sim = 0.0
    else:
        q_sim = float(np.dot(new.qvec, old.qvec))
    c_sim = float(np.dot(new.vec, old.vec))
    checks = [(tag_sim, config.tag_overlap_threshold), (q_sim, config.question_similarity_threshold),
              (c_sim, config.content_similarity_threshold)]
    available = [(s, t) for s, t in checks if s is not None]
    # float32 dot products of identical unit vectors land a hair under 1.0
    hits = sum(1 for s, t in available if s >= t - 1e-6)
    needed = min(config.min_matches, len(available))
    return hits >= needed, {"tags": tag_sim, "questions": q_sim, "content": c_sim}


def _batch_neighbours(probes: list[Probe], config: DedupConfig) -> list[set[int]]:
    """For each probe, the earlier probes of the batch that could repeat it: content or
    questions at their threshold, or a shared tag (vectorised, so a large batch stays fast)."""
    n = len(probes)
    near: list[set[int]] = [set() for _ in range(n)]
    if n < 2:
        return near
    vecs = np.stack([p.vec for p in probes])
    rows, cols = np.nonzero(np.tril(vecs @ vecs.T >= config.content_similarity_threshold - 1e-6, -1))
    with_q = [i for i, p in enumerate(probes) if p.qvec is not None]
    pairs = list(zip(rows.tolist(), cols.tolist(), strict=True))
    if len(with_q) > 1:
        q = np.stack([probes[i].qvec for i in with_q])
        qr, qc = np.nonzero(np.tril(q @ q.T >= config.question_similarity_threshold - 1e-6, -1))
        pairs += [(with_q[a], with_q[b]) for a, b in zip(qr.tolist(), qc.tolist(), strict=True)]
    by_tag: dict[str, list[int]] = {}
    for i, p in enumerate(probes):
        for t in p.tags:
            near[i].update(by_tag.setdefault(t, []))
            by_tag[t].append(i)
    for i, j in pairs:
        near[i].add(j)
    # A pair in none of these cannot reach two hits: without a content hit it needs a tag hit.
    return near


def non_repeated(probes: list[Probe], existing: list[list[Probe]], config: DedupConfig) -> list[int]:
    """The seed's ``BatchIsRepeatedMemoryEntities``: indices of ``probes`` that repeat neither a
    memory in ``existing[i]`` (the stored candidates for probe i) nor an earlier kept probe."""
    if not config.enabled:
        return list(range(len(probes)))
    near = _batch_neighbours(probes, config)
    kept: list[int] = []
    kept_set: set[int] = set()
    for i, p in enumerate(probes):
        stored = existing[i]
        if stored:
            # Without a content hit only a tag hit can make two: skip the rest unexamined.
            sims = np.stack([o.vec for o in stored]) @ p.vec
            stored = [o for o, c in zip(stored, sims.tolist(), strict=True)
                      if c >= config.content_similarity_threshold - 1e-6 or (p.tags & o.tags)
                      or config.min_matches == 1]
        others = stored + [probes[j] for j in sorted(near[i] & kept_set)]
        if not any(compare(p, o, config)[0] for o in others):
            kept.append(i)
            kept_set.add(i)
    return kept
