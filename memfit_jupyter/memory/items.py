"""Turning what callers hand to ``add`` into clean ``MemoryEntity`` values: backend-neutral.

Every store (SQLite here, PostgreSQL elsewhere) validates, normalises and redacts the same
way before it deduplicates and writes: ``prepare`` one item, ``redact_all`` a batch,
``question_texts`` for the question vectors that dedup compares.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..secrets import redact
from .dedup import Probe, probe_of
from .embedders import Embedder
from .entity import DIMENSIONS, MemoryEntity, clean_scores, now_iso

MAX_CONTENT_BYTES = 64_000
_SEP = "\n\x1e\n"


def clean_list(values: Any, what: str) -> list[str]:
    """Tags (lower-cased; a string is split on commas) or questions: stripped, distinct, in order."""
    if isinstance(values, str):
        values = [v for v in values.split(",")] if what == "tags" else [values]
    elif values and not isinstance(values, Iterable):
        raise ValueError(f"{what} must be a list of strings, got {values!r}")
    out: list[str] = []
    for v in values or ():
        if not isinstance(v, str):
            raise ValueError(f"{what} must be strings, got {v!r}")
        v = v.strip()
        if v and v not in out:
            out.append(v.lower() if what == "tags" else v)
    return out


def prepare(item: dict[str, Any] | MemoryEntity, stamp: str) -> MemoryEntity:
    """A new entity from a dict (content, tags, questions or potential_questions, scores or
    ``<dim>_score`` keys, optionally id and created_at) or an entity; ``stamp`` is its
    ``created_at`` when it has none.  Bad input raises ``ValueError`` with one clear line."""
    if isinstance(item, MemoryEntity):
        item = item.to_dict()
    elif not isinstance(item, dict):
        raise ValueError(f"a memory is a dict or a MemoryEntity, got {type(item).__name__}")
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ValueError("a memory needs non-empty text content")
    content = content.strip()
    if len(content) * 4 > MAX_CONTENT_BYTES and len(content.encode()) > MAX_CONTENT_BYTES:
        raise ValueError(f"a memory holds at most {MAX_CONTENT_BYTES} bytes; this one has "
                         f"{len(content.encode())}: split it")
    scores = item.get("scores")
    if scores is None and any(f"{k}_score" in item for k in DIMENSIONS):
        scores = {k: item[f"{k}_score"] for k in DIMENSIONS if f"{k}_score" in item}
    sc = clean_scores(scores)
    return MemoryEntity(
        id=str(item.get("id") or os.urandom(8).hex()), content=content,  # 64 random bits, as uuid4().hex[:16]
        tags=clean_list(item.get("tags"), "tags"),
        potential_questions=clean_list(item.get("questions") or item.get("potential_questions"), "questions"),
        created_at=str(item.get("created_at") or stamp),
        c_score=sc["c"], o_score=sc["o"], r_score=sc["r"], e_score=sc["e"], p_score=sc["p"],
        a_score=sc["a"], t_score=sc["t"])


def redact_all(entities: list[MemoryEntity]) -> None:
    """Redact every string of a batch in one pass (redaction scans the environment per call)."""
    parts = [s for e in entities for s in (e.content, *e.tags, *e.potential_questions)]
    if any("\x1e" in s for s in parts):
        clean = [redact(s) for s in parts]
    else:
        clean = redact(_SEP.join(parts)).split(_SEP)
    it = iter(clean)
    for e in entities:
        e.content = next(it)
        e.tags = [next(it) for _ in e.tags]
        e.potential_questions = [next(it) for _ in e.potential_questions]


def question_texts(entities: list[MemoryEntity]) -> tuple[list[int], list[str]]:
    """Positions of the entities with questions, and the text embedded for each (its questions
    joined): the question vector that dedup compares."""
    with_q = [i for i, e in enumerate(entities) if e.potential_questions]
    return with_q, ["\n".join(entities[i].potential_questions) for i in with_q]


@dataclass(slots=True)
class Batch:
    """Items made ready to write: validated, redacted and embedded (``prepare_batch``).  A store's
    ``add_many`` and ``repeats`` take one as it is, so that an overlay asks its base what repeats
    and writes the rest to its top store with one embedding of each item (an embedder may be a
    model, paid by the call)."""

    entities: list[MemoryEntity]
    #: The content vectors (unit rows), aligned with ``entities``.
    vectors: np.ndarray
    #: The question vectors (None for an entity without questions).
    question_vectors: list[np.ndarray | None]
    #: What dedup compares of each entity.
    probes: list[Probe]
    #: The embedder the vectors come from (``Embedder.id``).
    embedder: str

    def take(self, positions: list[int]) -> Batch:
        """The items at ``positions``, in that order."""
        return Batch([self.entities[i] for i in positions], self.vectors[positions],
                     [self.question_vectors[i] for i in positions], [self.probes[i] for i in positions],
                     self.embedder)


def prepare_batch(items: Iterable[dict[str, Any] | MemoryEntity] | Batch, embedder: Embedder,
                  vectors: np.ndarray | None = None) -> Batch:
    """What every store does before deciding a batch: validate, redact and embed each item
    (content and questions), one clock read for all; ``vectors`` (unit rows) skips embedding
    the content.  A ``Batch`` is taken as it is when ``embedder`` made its vectors."""
    if isinstance(items, Batch):
        if items.embedder != embedder.id:
            raise ValueError(f"a batch embedded by {items.embedder} cannot go into a store that embeds by "
                             f"{embedder.id}")
        return items
    stamp = now_iso()
    entities = [prepare(item, stamp) for item in items]
    redact_all(entities)
    if not entities:
        return Batch([], np.zeros((0, embedder.dim), dtype=np.float32), [], [], embedder.id)
    if vectors is None:
        vecs = embedder.embed([e.content for e in entities])
    else:
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.shape != (len(entities), embedder.dim):
            raise ValueError(f"vectors must have shape ({len(entities)}, {embedder.dim}), got {vecs.shape}")
    qvecs: list[np.ndarray | None] = [None] * len(entities)
    with_q, texts = question_texts(entities)
    if with_q:
        for i, v in zip(with_q, embedder.embed(texts), strict=True):
            qvecs[i] = v
    probes = [probe_of(e.content, e.tags, qvecs[i], vecs[i]) for i, e in enumerate(entities)]
    return Batch(entities, vecs, qvecs, probes, embedder.id)
