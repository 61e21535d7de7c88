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


def batch_repeats(probes: list[Probe], config: DedupConfig) -> np.ndarray:
    """``compare`` for every pair of a batch at once: a boolean (n, n) matrix whose ``[i, j]``
    says that probe i repeats the earlier probe j (strictly lower triangular)."""
    n = len(probes)
    if n < 2:
        return np.zeros((n, n), dtype=bool)
    eps = 1e-6  # as in compare: float32 dot products of identical unit vectors land under 1.0
    vecs = np.stack([p.vec for p in probes])
    hits = (vecs @ vecs.T >= config.content_similarity_threshold - eps).astype(np.int8)
    available = np.ones((n, n), dtype=np.int8)
    has_q = np.array([p.qvec is not None for p in probes])
    if has_q.any():
        qdim = next(p.qvec for p in probes if p.qvec is not None).shape[0]
        q = np.stack([p.qvec if p.qvec is not None else np.zeros(qdim, dtype=np.float32) for p in probes])
        q_avail = has_q[:, None] | has_q[None, :]  # one side without questions compares as 0.0
        hits += (q_avail & (q @ q.T >= config.question_similarity_threshold - eps)).astype(np.int8)
        available += q_avail.astype(np.int8)
    # Tags: the intersections come from the batch's posting lists, and Jaccard is computed only
    # where they are non-zero (few pairs); dense n x n arithmetic here dominated the batch.
    inter = np.zeros((n, n), dtype=np.int16)
    postings: dict[str, list[int]] = {}
    for i, p in enumerate(probes):
        for t in p.tags:
            postings.setdefault(t, []).append(i)
    for members in postings.values():
        if len(members) > 1:
            idx = np.array(members)
            inter[np.ix_(idx, idx)] += 1
    sizes = np.array([len(p.tags) for p in probes], dtype=np.int32)
    tagged = sizes > 0
    t_avail = tagged[:, None] | tagged[None, :]  # both untagged: nothing to compare
    available += t_avail
    if config.tag_overlap_threshold <= eps:  # any overlap, even none, reaches the threshold
        hits += t_avail
    else:
        rows, cols = np.nonzero(inter)
        shared = inter[rows, cols].astype(np.float64)
        ok = shared / (sizes[rows] + sizes[cols] - shared) >= config.tag_overlap_threshold - eps
        hits[rows[ok], cols[ok]] += 1
    dup = hits >= np.minimum(available, config.min_matches)
    return np.tril(dup, -1)


def non_repeated(probes: list[Probe], existing: list[list[Probe]], config: DedupConfig) -> list[int]:
    """The seed's ``BatchIsRepeatedMemoryEntities``: indices of ``probes`` that repeat neither a
    memory in ``existing[i]`` (the stored candidates for probe i) nor an earlier kept probe."""
    if not config.enabled:
        return list(range(len(probes)))
    within = batch_repeats(probes, config)
    kept_mask = np.zeros(len(probes), dtype=bool)
    for i, p in enumerate(probes):
        if within[i].any() and (within[i] & kept_mask).any():
            continue
        if any(compare(p, o, config)[0] for o in existing[i]):
            continue
        kept_mask[i] = True
    return np.flatnonzero(kept_mask).tolist()
