"""Which stored memories a new memory could repeat: the candidates that dedup compares it with.

With two of three dimensions needed (docs/MECHANISMS.md §3.6), a duplicate either has its content
at the threshold (so it is among the probe's nearest neighbours) or shares enough tags to
reach the Jaccard threshold.  The second kind comes from the tag index, reading at most
``TAG_SCAN`` of the newest memories per tag so that a popular tag does not scan the
store.  The first kind needs a vector search, with a beam as short as the number of
neighbours asked for: near-duplicates sit right next to the probe (at 100k, 2,000 planted
at cosine 0.9 and 2,000 at 0.95 were all found with a beam of 10, which cost 0.55-0.7 of a
beam of 16: tests/benchmarks/dedup_beam.py; the search's default beam cost half as much
as the add itself).  Its distances already say which neighbours reach the content
threshold, so only those rows are read back.

The verdicts themselves are ``dedup``'s (pure, shared by every backend); this module is
the SQLite + usearch way of finding what to compare.
"""

from __future__ import annotations

import json

import numpy as np

from .db import Database
from .dedup import DedupConfig, Probe, can_repeat, probe_of
from .index import VectorIndex

#: Newest memories per tag that dedup looks at (a popular tag must not scan the whole store).
TAG_SCAN = 256


def tags_decide(probe: Probe, postings: dict[str, list[int]], config: DedupConfig) -> bool:
    """True when every memory that ``probe`` could repeat shares its tags, and the tag index
    returned all memories with those tags (no tag reached ``TAG_SCAN``).

    That holds for a tagged probe without questions when two or more dimensions must match:
    its questions match nothing (a missing signal is not agreement), so tags and content must
    both match, and a Jaccard of at least t needs at least t of the probe's own tags.
    """
    return (config.min_matches >= 2 and config.tag_overlap_threshold > 1e-6 and bool(probe.tags)
            and probe.qvec is None and all(len(postings.get(t, ())) < TAG_SCAN for t in probe.tags))


def tag_hits(probe: Probe, postings: dict[str, list[int]], config: DedupConfig) -> set[int]:
    """The keys among ``postings`` (stored memories by tag) that share enough of ``probe``'s
    tags to reach the Jaccard threshold: at least that share of the probe's own tags."""
    need = max(1, int(np.ceil(config.tag_overlap_threshold * len(probe.tags) - 1e-9)))
    hits: dict[int, int] = {}
    for tag in probe.tags:
        for key in postings.get(tag, ()):
            hits[key] = hits.get(key, 0) + 1
    return {key for key, c in hits.items() if c >= need}


def stored_candidates(db: Database, vectors: VectorIndex, probes: list[Probe],
                      config: DedupConfig) -> list[list[Probe]]:
    """For each probe, the stored memories it could repeat (see the module docstring).

    The vector search is skipped for a probe whose every repeat must share its tags (see
    ``tags_decide``) when the tag index gave all of them, and both searches for a probe
    with too few signals to be a duplicate of anything (``dedup.can_repeat``).
    """
    n = len(probes)
    cand: list[set[int]] = [set() for _ in range(n)]
    postings = db.tag_postings({t for p in probes for t in p.tags}, TAG_SCAN)
    for i, p in enumerate(probes):
        if not p.tags or not can_repeat(p, config):
            continue  # tags only match tags
        cand[i].update(tag_hits(p, postings, config))
    search = [i for i, p in enumerate(probes) if can_repeat(p, config) and not tags_decide(p, postings, config)]
    size = len(vectors)
    if search and size and size < vectors.exact_below:
        _exact_candidates(db, vectors, [probes[i] for i in search], min(config.candidates, size),
                          [cand[i] for i in search], config)
    elif search and size:
        _graph_candidates(vectors, [probes[i] for i in search], min(config.candidates, size),
                          [cand[i] for i in search], config)
    wanted = sorted(set().union(*cand))
    stored: dict[int, Probe] = {}
    for key, content, tags, qv, v in db.dedup_rows(wanted):
        stored[key] = probe_of(content, json.loads(tags), np.frombuffer(qv, dtype=np.float32) if qv else None,
                               np.frombuffer(v, dtype=np.float32))
    return [[stored[k] for k in sorted(c) if k in stored] for c in cand]


def _graph_candidates(vectors: VectorIndex, probes: list[Probe], k: int, cand: list[set[int]],
                      config: DedupConfig) -> None:
    """The ``k`` nearest of each probe by the HNSW graph, with a beam of ``k``."""
    index = vectors.index
    beam = index.expansion_search
    index.expansion_search = k
    try:
        found = index.search(np.stack([p.vec for p in probes]), k, threads=0)
    finally:
        index.expansion_search = beam
    m = len(probes)
    keys = np.asarray(found.keys).reshape(m, -1)
    sims = 1.0 - np.asarray(found.distances, dtype=np.float64).reshape(m, -1)
    counts = np.asarray(found.counts).reshape(-1) if m > 1 else np.array([keys.shape[1]])
    valid = np.arange(keys.shape[1])[None, :] < counts[:, None]
    if config.min_matches > 1:  # one hit alone (e.g. questions) only counts when one is enough
        valid &= sims >= config.content_similarity_threshold - 1e-6
    for r, j in zip(*np.nonzero(valid), strict=True):
        cand[r].add(int(keys[r, j]))


def _exact_candidates(db: Database, vectors: VectorIndex, probes: list[Probe], k: int,
                      cand: list[set[int]], config: DedupConfig) -> None:
    """The ``k`` nearest stored memories of each probe by one matrix product over the small
    store's vectors (kept for its exact search): exact, and at 10k it cost a third of the
    graph search it replaces.  With two of three needed, only those at the content threshold."""
    keys, mat = vectors.exact_matrix(db)
    thr = config.content_similarity_threshold - 1e-6 if config.min_matches > 1 else None
    for start in range(0, len(probes), 1024):  # bounds the (probes x memories) temporary
        sims = np.stack([p.vec for p in probes[start : start + 1024]]) @ mat.T
        if thr is None:
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < sims.shape[1] else None
            for i in range(len(sims)):
                cand[start + i].update(int(x) for x in (keys[top[i]] if top is not None else keys))
            continue
        # near-duplicates are rare: find the few rows with one first (a row maximum is
        # cheaper than a mask and its nonzero over the whole matrix)
        hot = np.flatnonzero(sims.max(axis=1) >= thr)
        rows, cols = np.nonzero(sims[hot] >= thr)
        hits: dict[int, list[int]] = {}
        for r, c in zip(hot[rows].tolist(), cols.tolist(), strict=True):
            hits.setdefault(r, []).append(c)
        for r, cs in hits.items():
            if len(cs) > k:  # the k closest, as the graph search would return (ties: in column order)
                cs = [cs[i] for i in np.argsort(-sims[r, cs], kind="stable")[:k].tolist()]
            cand[start + r].update(int(keys[c]) for c in cs)
