"""2-of-3 deduplication (docs/MECHANISMS.md §3.6).

Three dimensions are compared between a new memory and an existing one: tag
overlap (Jaccard), similarity of the potential questions, similarity of the
content.  A new memory is a duplicate when at least ``min_matches`` (2) of them
reach their thresholds against the same existing memory.

A missing signal is not agreement: tags only match when both memories have tags,
questions only when both have questions, so two untagged memories without questions
never repeat each other, however alike their text (content alone is one of the three).  And an answer is not a repeat of its question: when one of the two
asks something (its text has a question mark) and the other does not, their contents
do not count as repeating ("How's the store going?" and "The store's doing great!"
are near-twins by cosine).  Nor is a memory that says something its near-twin does not:
content repeats only when the new memory's keywords (``text.keywords``: stemmed, function
words left out; numbers and names are keywords) are all in the other's, give or take
``DedupConfig.new_words``.  A cosine at the threshold says two texts are about the same thing,
not that they say the same: "Now I'm gonna order some sushi for tonight" came at 0.925 after
"that Sushi looks phenomenal, I know what to get for dinner tonight" from the same speaker on
the same day, and held the answer to a question; "going to Rome next week" and "going to Paris
next week" differ in one name.  Rewordings that add words still repeat through tags and
questions (two of three without the content).

``DedupConfig(rule="lenient")`` is the 2 of 3 as first built, before these rules: two memories
without tags agree on tags, an answer may repeat its question and any content at the
threshold repeats (``new_words`` is not asked).  ``"seed"`` is an older name of it, still read.

Every function here is pure (vectors in, verdicts out), shared by every store backend;
``candidates`` is how the SQLite store finds what to compare.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .text import keywords, tokens

#: ``DedupConfig.rule``: the rules of this module, or the lenient 2 of 3 as first built.
DEDUP_RULES = ("default", "lenient")
#: Older names of the rules, still read (user code may carry them).
DEDUP_RULE_ALIASES = {"seed": "lenient"}

@dataclass(slots=True)
class DedupConfig:
    """The thresholds of MECHANISMS.md §3.6, plus the switch and how many neighbours to compare with."""

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
    #: Keywords the new memory may have that the other lacks for its content to still repeat
    #: the other's (0: none); None leaves content similarity alone to decide.
    new_words: int | None = 0
    #: "default": the rules above; "lenient": two untagged memories agree on tags, and neither the
    #: question/answer rule nor ``new_words`` applies (the 2 of 3 as first built).
    rule: str = "default"

    def __post_init__(self) -> None:
        for name in ("tag_overlap_threshold", "question_similarity_threshold", "content_similarity_threshold"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v}")
        if self.min_matches not in (1, 2, 3):
            raise ValueError(f"min_matches must be 1, 2 or 3, got {self.min_matches}")
        self.rule = DEDUP_RULE_ALIASES.get(self.rule, self.rule)
        if self.rule not in DEDUP_RULES:
            raise ValueError(f"rule must be one of {', '.join(map(repr, DEDUP_RULES))}, got {self.rule!r}")
        if self.new_words is not None and self.new_words < 0:
            raise ValueError(f"new_words must be None or at least 0, got {self.new_words}")


@dataclass(slots=True)
class Probe:
    """What dedup needs to know about one memory."""

    tags: frozenset[str]
    qvec: np.ndarray | None  # unit vector of the joined questions, None without questions
    vec: np.ndarray  # unit vector of the content
    asks: bool = False  # the content asks something (see ``asks``)
    content: str = ""  # its text, for the keywords it adds (see ``adds_nothing``)


def norm_tags(tags: Iterable[str]) -> frozenset[str]:
    return frozenset(t.strip().lower() for t in tags if t and t.strip())


def asks(content: str) -> bool:
    """Does this text ask something?  A question mark, ASCII or full-width, anywhere in it."""
    return "?" in content or "\uff1f" in content


def probe_of(content: str, tags: Iterable[str], qvec: np.ndarray | None, vec: np.ndarray) -> Probe:
    """The probe of a memory with this content and tags, question vector and content vector."""
    return Probe(norm_tags(tags), qvec, vec, asks(content), content)


@lru_cache(maxsize=4096)  # a batch compares the same memory with several twins
def content_words(content: str) -> frozenset[str]:
    """The keywords of a memory's text (``text.keywords``), single digits included (a
    keyword needs two letters, but "3 retries" and "5 retries" say different things)."""
    return frozenset(keywords(content)).union(t for t in tokens(content) if t.isdigit())


def adds_nothing(new: Probe, old: Probe, config: DedupConfig) -> bool:
    """May ``new``'s content repeat ``old``'s?  Only when it has at most ``config.new_words``
    keywords that ``old`` lacks (always, with the rule off).  Asked only of near-twins by
    cosine, so tokenising costs nothing on the common path."""
    if config.new_words is None or config.rule == "lenient":
        return True
    novel = content_words(new.content) - content_words(old.content)
    return len(novel) <= config.new_words


def can_repeat(probe: Probe, config: DedupConfig) -> bool:
    """False when ``probe`` has too few signals to reach ``min_matches`` against anything
    (content is always there; tags and questions only when it has them)."""
    return 1 + (bool(probe.tags) or config.rule == "lenient") + (probe.qvec is not None) >= config.min_matches


def jaccard(a: frozenset[str], b: frozenset[str]) -> float | None:
    """Jaccard overlap; None when either set is empty (nothing to compare)."""
    if not a or not b:
        return None
    return len(a & b) / len(a | b)


def compare(new: Probe, old: Probe, config: DedupConfig) -> tuple[bool, dict[str, float | None]]:
    """Is ``new`` a duplicate of ``old``?  Returns the verdict and the three similarities
    (None for tags or questions that one side lacks)."""
    tag_sim = jaccard(new.tags, old.tags)
    if tag_sim is None and config.rule == "lenient" and not new.tags and not old.tags:
        tag_sim = 1.0  # the lenient reading: no tags on either side is agreement
    same_kind = new.asks == old.asks or config.rule == "lenient"
    q_sim = None if new.qvec is None or old.qvec is None else float(np.dot(new.qvec, old.qvec))
    c_sim = float(np.dot(new.vec, old.vec))
    # float32 dot products of identical unit vectors land a hair under 1.0
    eps = 1e-6
    hits = ((tag_sim is not None and tag_sim >= config.tag_overlap_threshold - eps)
            + (q_sim is not None and q_sim >= config.question_similarity_threshold - eps)
            + (same_kind and c_sim >= config.content_similarity_threshold - eps
               and adds_nothing(new, old, config)))
    return hits >= config.min_matches, {"tags": tag_sim, "questions": q_sim, "content": c_sim}


def _codes_below(rows: np.ndarray, cols: np.ndarray, n: int) -> np.ndarray:
    """Codes ``i * n + j`` of the pairs ``(i, j)`` with ``i > j``."""
    below = rows > cols
    codes: np.ndarray = rows[below].astype(np.int64) * n + cols[below]
    return codes


def _lower_pairs(mask: np.ndarray) -> np.ndarray:
    """Codes of the pairs with ``i > j`` where the (n, n) ``mask`` holds."""
    rows, cols = np.nonzero(mask)
    return _codes_below(rows, cols, mask.shape[0])


def _lower_pairs_above(sims: np.ndarray, threshold: float) -> np.ndarray:
    """``_lower_pairs(sims >= threshold)`` for a symmetric matrix with few such pairs: the rows
    with one are found first (a row maximum is cheaper than a mask and its nonzero)."""
    n = sims.shape[0]
    diagonal = sims.diagonal().copy()
    np.fill_diagonal(sims, -np.inf)  # every vector is at the threshold with itself
    hot = np.flatnonzero(sims.max(axis=1) >= threshold)
    rows, cols = np.nonzero(sims[hot] >= threshold)
    np.fill_diagonal(sims, diagonal)
    return _codes_below(hot[rows], cols, n)


def repeat_pairs(probes: list[Probe], config: DedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """``compare`` for every pair of a batch at once: the pairs ``(i, j)``, ``i > j``, where probe
    i repeats the earlier probe j, as two index arrays.

    A repeat needs at least one dimension at its threshold, so only the pairs with one are
    examined (few in a batch of distinct memories): the content and question pairs from one
    matrix product each, the tag pairs from the batch's posting lists.  Dense (n, n) arithmetic
    over every pair cost five times the matrix product."""
    n = len(probes)
    if n < 2:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    eps = 1e-6  # as in compare: float32 dot products of identical unit vectors land under 1.0
    vecs = np.stack([p.vec for p in probes])
    sims = vecs @ vecs.T
    found = [_lower_pairs_above(sims, config.content_similarity_threshold - eps)]
    has_q = np.array([p.qvec is not None for p in probes])
    qsims = None
    if has_q.sum() > 1:
        qdim = next(p.qvec for p in probes if p.qvec is not None).shape[0]
        q = np.stack([p.qvec if p.qvec is not None else np.zeros(qdim, dtype=np.float32) for p in probes])
        qsims = q @ q.T
        threshold = config.question_similarity_threshold - eps
        both_q = has_q[:, None] & has_q[None, :]
        # a side without questions has a zero row here, so it reaches a positive threshold with nobody
        found.append(_lower_pairs_above(qsims, threshold) if threshold > 0 else _lower_pairs(both_q))
    sizes = np.array([len(p.tags) for p in probes], dtype=np.int64)
    tagged = sizes > 0
    postings: dict[str, list[int]] = {}
    for i, p in enumerate(probes):
        for t in p.tags:
            postings.setdefault(t, []).append(i)
    # members are in ascending order, so (b, a) from combinations has b > a
    shared = [b * n + a for m in postings.values() if len(m) > 1 for a, b in itertools.combinations(m, 2)]
    shared_codes, shared_counts = np.unique(np.array(shared, dtype=np.int64), return_counts=True)
    if config.tag_overlap_threshold <= eps:  # any overlap, even none, reaches the threshold
        found.append(_lower_pairs(tagged[:, None] & tagged[None, :]))
    else:
        found.append(shared_codes)
    if config.rule == "lenient" and config.min_matches == 1:  # untagged agreement alone is a repeat
        found.append(_lower_pairs(~tagged[:, None] & ~tagged[None, :]))
    codes = np.unique(np.concatenate(found))
    rows, cols = codes // n, codes % n
    same_kind = np.array([p.asks for p in probes])
    content_hit = sims[rows, cols] >= config.content_similarity_threshold - eps
    lenient = config.rule == "lenient"
    if not lenient:
        content_hit &= same_kind[rows] == same_kind[cols]
    for at in np.flatnonzero(content_hit) if config.new_words is not None and not lenient else ():  # near-twins: few
        content_hit[at] = adds_nothing(probes[rows[at]], probes[cols[at]], config)
    hits = content_hit.astype(np.int64)
    if qsims is not None:
        hits += has_q[rows] & has_q[cols] & (qsims[rows, cols] >= config.question_similarity_threshold - eps)
    both_tagged = tagged[rows] & tagged[cols]
    if lenient:  # untagged pairs agree on tags; each is among the codes when anything else repeats
        hits += ~tagged[rows] & ~tagged[cols]
    if config.tag_overlap_threshold <= eps:
        hits += both_tagged
    else:
        inter = np.zeros(len(codes), dtype=np.int64)
        if len(shared_codes):  # every shared pair is among the codes (they were added above)
            inter[np.searchsorted(codes, shared_codes)] = shared_counts
        union = np.maximum(sizes[rows] + sizes[cols] - inter, 1)
        hits += both_tagged & (inter / union >= config.tag_overlap_threshold - eps)
    dup = hits >= config.min_matches
    return rows[dup], cols[dup]


def batch_repeats(probes: list[Probe], config: DedupConfig) -> np.ndarray:
    """``repeat_pairs`` as a boolean (n, n) matrix: ``[i, j]`` says that probe i repeats the
    earlier probe j (strictly lower triangular)."""
    out = np.zeros((len(probes), len(probes)), dtype=bool)
    rows, cols = repeat_pairs(probes, config)
    out[rows, cols] = True
    return out


def non_repeated(probes: list[Probe], existing: list[list[Probe]], config: DedupConfig) -> list[int]:
    """Batch dedup: indices of ``probes`` that repeat neither a
    memory in ``existing[i]`` (the stored candidates for probe i) nor an earlier kept probe."""
    if not config.enabled:
        return list(range(len(probes)))
    earlier: dict[int, list[int]] = {}
    for i, j in zip(*(a.tolist() for a in repeat_pairs(probes, config)), strict=True):
        earlier.setdefault(i, []).append(j)
    kept = [False] * len(probes)
    for i, p in enumerate(probes):
        if any(kept[j] for j in earlier.get(i, ())):
            continue
        if any(compare(p, o, config)[0] for o in existing[i]):
            continue
        kept[i] = True
    return [i for i, k in enumerate(kept) if k]


def repeated(probes: list[Probe], existing: list[list[Probe]], config: DedupConfig,
             skip: Iterable[str] = ()) -> list[bool]:
    """For each probe, whether it repeats one of ``existing[i]`` (a store's candidates for it),
    those whose content is in ``skip`` left out: the stores' ``repeats`` (no batch among the
    probes: they are asked about, not written)."""
    if not config.enabled:
        return [False] * len(probes)
    left_out = set(skip)
    return [any(compare(p, old, config)[0] for old in found if old.content not in left_out)
            for p, found in zip(probes, existing, strict=True)]
