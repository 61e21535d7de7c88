"""Synthesis of sampled answers (docs/MECHANISMS.md §4.2): weighted, consensus, diverse.

All three start from the same semantic clusters: samples are taken in order
of confidence, and each joins the first cluster whose representative (its
most confident member) is at least ``CLUSTER_SIMILARITY`` similar, else
starts a new one.  A cluster's weight is the sum of its members' votes: their
confidence without the self-consistency factor, since adding up the members
already counts their agreement.

- ``weighted`` (the default): a confidence-weighted vote over the clusters.
  The answer is the representative of the heaviest cluster, with its share
  of the total weight and the supporting rationale (its members' reasoning).
- ``consensus``: only a cluster that holds at least ``min_support`` of the
  samples *and* whose mean confidence is at least ``min_confidence``
  qualifies; when none does, the result says so and gives no answer.
- ``diverse``: every cluster as an alternative, heaviest first, with its
  confidence, for the person to choose (``run.choose(index)``).

The result's confidence is the mean confidence of the chosen cluster's
members times the square root of its weight share: agreement among the
samples is already in each member's confidence, the share discounts a
winner that most of the weight voted against.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events import Guidance
from ..records import SynthesisStrategy
from .confidence import LOW_CONFIDENCE, Sample, Similarity

if TYPE_CHECKING:
    from ..protocols import RunView

log = logging.getLogger("memfit_jupyter")

CLUSTER_SIMILARITY = 0.6
#: consensus: share of the samples a cluster must hold ...
MIN_SUPPORT = 0.5
#: ... and the mean confidence its members must have.
MIN_CONFIDENCE = 0.6


@dataclass(slots=True)
class Cluster:
    answer: str
    members: list[Sample] = field(default_factory=list)

    @property
    def weight(self) -> float:
        return sum(max(m.vote, 1e-6) for m in self.members)

    @property
    def confidence(self) -> float:
        return sum(m.confidence for m in self.members) / len(self.members)


@dataclass(slots=True)
class Synthesis:
    """How the samples were combined: what a ``synthesis`` event carries."""

    strategy: str
    answer: str | None
    confidence: float
    clusters: list[Cluster]
    samples: list[Sample]
    share: float = 0.0
    rationale: str = ""
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    no_consensus: bool = False

    @property
    def low_confidence(self) -> bool:
        return self.confidence < LOW_CONFIDENCE

    def event_fields(self, question: str = "") -> dict[str, Any]:
        total = sum(c.weight for c in self.clusters) or 1.0
        index = {id(m): i for i, c in enumerate(self.clusters) for m in c.members}
        return {
            "strategy": self.strategy, "question": question,
            "samples": [{"answer": s.answer, "confidence": s.confidence, "cluster": index.get(id(s), -1),
                         "stated": s.stated, "vote": s.vote, "tier": s.tier, "ok": s.ok, "factors": s.factors,
                         "low_confidence": s.ok and s.confidence < LOW_CONFIDENCE}
                        for s in self.samples],
            "clusters": [{"answer": c.answer, "weight": round(c.weight, 4), "share": round(c.weight / total, 4),
                          "size": len(c.members), "confidence": round(c.confidence, 4)} for c in self.clusters],
            "answer": self.answer, "confidence": round(self.confidence, 4), "share": round(self.share, 4),
            "low_confidence": self.low_confidence, "alternatives": self.alternatives,
            "no_consensus": self.no_consensus, "rationale": self.rationale,
        }


def cluster(samples: list[Sample], sim: Similarity | None = None,
            threshold: float = CLUSTER_SIMILARITY) -> list[Cluster]:
    """Group the usable samples by meaning; heaviest cluster first."""
    sim = sim or Similarity()
    clusters: list[Cluster] = []
    for s in sorted((s for s in samples if s.ok), key=lambda s: -s.confidence):
        for c in clusters:
            if sim(s.answer, c.answer) >= threshold:
                c.members.append(s)
                break
        else:
            clusters.append(Cluster(s.answer, [s]))
    clusters.sort(key=lambda c: -c.weight)
    for i, c in enumerate(clusters):
        for m in c.members:
            m.cluster = i
    return clusters


def _rationale(c: Cluster, limit: int = 3) -> str:
    steps: list[str] = []
    for m in c.members:
        for step in m.reasoning:
            if step not in steps:
                steps.append(step)
    return " / ".join(steps[:limit])


def synthesize(samples: list[Sample], strategy: str | SynthesisStrategy = SynthesisStrategy.WEIGHTED,
               sim: Similarity | None = None, *, min_support: float = MIN_SUPPORT,
               min_confidence: float = MIN_CONFIDENCE) -> Synthesis:
    """Combine scored samples (``confidence.score``) by ``strategy``."""
    try:
        strategy = SynthesisStrategy(str(getattr(strategy, "value", strategy)).lower())
    except ValueError:
        names = ", ".join(s.value for s in SynthesisStrategy)
        raise ValueError(f"unknown synthesis strategy {strategy!r}; choose one of: {names}") from None
    clusters = cluster(samples, sim)
    name = strategy.value
    if not clusters:
        return Synthesis(name, None, 0.0, [], samples, rationale="no sample gave a usable answer",
                         no_consensus=strategy is SynthesisStrategy.CONSENSUS)
    total = sum(c.weight for c in clusters)
    usable = sum(len(c.members) for c in clusters)

    def result_confidence(c: Cluster) -> float:
        root_share: float = (c.weight / total) ** 0.5
        return c.confidence * root_share

    if strategy is SynthesisStrategy.WEIGHTED:
        top = clusters[0]
        share = top.weight / total
        why = (f"{len(top.members)} of {usable} samples, {share:.0%} of the confidence-weighted vote"
               + (f"; reasoning: {_rationale(top)}" if _rationale(top) else ""))
        return Synthesis(name, top.answer, result_confidence(top), clusters, samples, share, why)
    if strategy is SynthesisStrategy.CONSENSUS:
        passing = [c for c in clusters
                   if len(c.members) / len(samples) >= min_support and c.confidence >= min_confidence]
        if not passing:
            best = clusters[0]
            why = (f"no consensus: no answer is held by at least {min_support:.0%} of the {len(samples)} samples "
                   f"with mean confidence at least {min_confidence:.2f} (closest: {best.answer!r}, "
                   f"{len(best.members)} samples, confidence {best.confidence:.2f})")
            return Synthesis(name, None, 0.0, clusters, samples, 0.0, why, no_consensus=True)
        top = passing[0]
        share = top.weight / total
        why = (f"consensus: {len(top.members)} of {len(samples)} samples agree with mean confidence "
               f"{top.confidence:.2f}" + (f"; reasoning: {_rationale(top)}" if _rationale(top) else ""))
        return Synthesis(name, top.answer, result_confidence(top), clusters, samples, share, why)
    alternatives = [{"index": i, "answer": c.answer, "confidence": round(result_confidence(c), 4),
                     "share": round(c.weight / total, 4), "size": len(c.members), "rationale": _rationale(c)}
                    for i, c in enumerate(clusters)]
    top = clusters[0]
    why = f"{len(clusters)} distinct answer(s) among {usable} samples: the person chooses"
    return Synthesis(name, None, result_confidence(top), clusters, samples, top.weight / total, why,
                     alternatives=alternatives)


def majority(samples: list[Sample], sim: Similarity | None = None) -> str | None:
    """Plain majority vote over the same clusters (every sample counts 1): the baseline."""
    clusters = cluster(samples, sim)
    if not clusters:
        return None
    return max(clusters, key=lambda c: (len(c.members), c.weight)).answer


def choose(run: RunView, index: int) -> dict[str, Any]:
    """Record the person's choice among the alternatives of the run's last diverse synthesis."""
    last = next((e for e in reversed(run.events)
                 if e.type == "synthesis" and e.get("alternatives") and e.get("choice") is None), None)
    if last is None:
        raise RuntimeError("no diverse synthesis is waiting for a choice in this run")
    alternatives = last["alternatives"]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(alternatives):
        raise ValueError(f"choose an alternative by its index, 0 to {len(alternatives) - 1}; got {index!r}")
    picked: dict[str, Any] = alternatives[index]
    fields = {k: last.get(k) for k in ("strategy", "question", "samples", "clusters", "alternatives")}
    run.emit("synthesis", **fields, answer=picked["answer"], confidence=picked["confidence"],
             low_confidence=picked["confidence"] < LOW_CONFIDENCE,
             choice={"index": index, "answer": picked["answer"]},
             rationale=f"the person chose alternative {index}")
    run.emit(Guidance(kind="note", text=(
        f"[SYSTEM] The person chose alternative {index} for {last.get('question')!r}: {picked['answer']}")))
    log.info("synthesis choice recorded: alternative %s (%s)", index, picked["answer"])
    return picked
