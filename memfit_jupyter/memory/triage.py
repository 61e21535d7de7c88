"""Seed 000 §3.7: memory triage, the model turning an iteration into memories.

``handle_memory(store, contextual_input, llm)`` asks the model (the "triage"
purpose, schema ``MemoryTriage``) for entities: content, tags, potential
questions and the seven scores on the seed's scales.  When the model call
fails, ``heuristic_entities`` still keeps what matters: failed actions with
their errors (high actionability), and finished tasks with their answer.
Everything goes through the store's ``add_many``: redaction and 2-of-3 dedup.

The contextual input is written in English by default (``TriageConfig.format``);
``"seed"`` gives the seed's own labels (``ReAct迭代``, ``任务状态``...).  The
engine's own trouble (a reply that could not be used, a provider failure:
``[SYSTEM]`` notes) is never a lesson about the task: it is left out of the
input, and an iteration that is nothing but such trouble is not triaged.
Triage runs when there is something to keep (``triage_due``): a failed tool
call, a finish, a fact written down, or every ``every`` iterations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .text import tag_keywords as keywords  # readable words for tags and questions


@dataclass(frozen=True)
class TriageConfig:
    """When memory triage runs and how its input is written.

    >>> TriageConfig(format="seed", every=1)      # the seed's labels, after every iteration
    TriageConfig(format='seed', every=1)
    """

    #: "english" (labels in English) or "seed" (seed 000 §3.7.1's labels, as written there).
    format: str = "english"
    #: Triage at least every this many iterations with new content (1: every iteration, the seed's).
    every: int = 5

    def __post_init__(self) -> None:
        if self.format not in ("english", "seed"):
            raise ValueError(f"format must be 'english' or 'seed', got {self.format!r}")
        if self.every < 1:
            raise ValueError("every must be at least 1")

TRIAGE_SYSTEM = """You extract long-term memories from an agent's latest iteration.
Keep only what would help a future task: lessons from failures, facts about the environment,
the person's preferences, rules that generalise.  Skip chatter.  Reply with JSON:
{"entities": [{"content": "...", "tags": ["..."], "potential_questions": ["..."],
  "scores": {"c": 0-1, "o": 0-1, "r": 0-1, "e": 0-1, "p": 0-1, "a": 0-1, "t": 0-1}}]}
Scores (C.O.R.E. P.A.C.T.): C connectivity (0-0.3 isolated fact, 0.8-1 hub across domains),
O origin reliability, R relevance to current goals, E the person's emotional state,
P binding to the person's style, A actionability (0-0.3 simple fact, 0.8-1 generalisable rule),
T temporality (0-0.3 this session only, 0.8-1 permanent).  Return {"entities": []} when nothing is worth keeping.
Write each memory in the language of the task."""

_ERROR_LINE = re.compile(r"(?im)^.*\b(error|failed|failure|exception|traceback|not found|denied|timed out)\b.*$")


#: Lines of the engine's own notes to the model (format errors, provider failures): not lessons.
ENGINE_NOTE = "[SYSTEM]"


def task_lines(diff: str) -> str:
    """The diff without the engine's own notes (see the module docstring)."""
    return "\n".join(line for line in diff.splitlines() if ENGINE_NOTE not in line)


def contextual_input(iteration: int, task_id: str, diff: str, status: str, done: bool, reason: Any,
                     format: str = "english") -> str:
    """Seed 000 §3.7.1's contextual input: in the seed's own labels, or in English."""
    if format == "english":
        return (f"Iteration {iteration} of task {task_id}:\n{diff}\nTask status: {status}\nFinished: "
                f"{'yes' if done else 'no'}\nReason: {reason if reason is not None else 'none'}")
    return (f"ReAct迭代 {iteration}/{task_id}: {diff}\n任务状态: {status}\n完成状态: "
            f"{'true' if done else 'false'}\n原因: {reason if reason is not None else '<nil>'}")


def triage_due(record: Any, iteration: int, last_triaged: int, config: TriageConfig) -> bool:
    """Whether this iteration has something to keep: a failed tool call, a finish, a fact written
    to memory, or ``config.every`` iterations since the last triage.  A reply that could not be
    used (the engine's trouble with the model) is never triaged."""
    if record.action_type == "invalid_reply":
        return False
    if not record.ok or record.data.get("final"):
        return True
    if record.tool in ("memory_insert", "core_memory_append", "core_memory_replace", "archival_memory_insert"):
        return True
    return iteration - last_triaged >= config.every


def heuristic_entities(text: str, max_chars: int = 600) -> list[dict[str, Any]]:
    """What to keep without a model: each distinct error line (a lesson to act on) and, when
    the input says the task finished, the outcome.  Empty when nothing stands out."""
    text = task_lines(text)
    kws = [k for k in keywords(text) if k.isascii() and not k.isdigit()][:6]
    out: list[dict[str, Any]] = []
    errors = list(dict.fromkeys(m.group(0).strip() for m in _ERROR_LINE.finditer(text)))[:3]
    for line in errors:
        line_kws = [k for k in keywords(line) if k.isascii() and not k.isdigit()][:4]
        out.append({
            "content": f"Failure seen: {line[:max_chars]}",
            "tags": ["failure", *line_kws],
            "questions": [f"What went wrong with {' '.join(line_kws[:3]) or 'this action'}?"],
            "scores": {"c": 0.4, "o": 0.8, "r": 0.7, "e": 0.0, "p": 0.0, "a": 0.7, "t": 0.5},
        })
    if re.search(r"完成状态: true|^Finished: yes$|\bdone\b", text, re.M):
        summary = " ".join(text.split())[:max_chars]
        out.append({
            "content": f"Task outcome: {summary}",
            "tags": ["outcome", *kws[:4]],
            "questions": [f"How was {' '.join(kws[:3]) or 'the task'} solved before?"],
            "scores": {"c": 0.3, "o": 0.7, "r": 0.6, "e": 0.0, "p": 0.0, "a": 0.5, "t": 0.5},
        })
    return out


def handle_memory(store: Any, text: str, llm: Any = None, *, iteration: int = 0) -> dict[str, Any]:
    """Seed ``HandleMemory``: extract, dedup, score and save.  Returns what happened:
    ``{"added": [ids], "duplicates": n, "source": "model" | "heuristic", "error": str | None}``."""
    entities: list[dict[str, Any]] = []
    source, error = "model", None
    if llm is not None:
        messages = [{"role": "system", "content": TRIAGE_SYSTEM}, {"role": "user", "content": text[-12_000:]}]
        reply = llm.call("triage", messages, tier="fast", iteration=iteration)
        if reply.ok:
            entities = [{"content": e.content, "tags": e.tags, "questions": e.potential_questions,
                         "scores": e.scores} for e in reply.value.entities if e.content.strip()]
        else:
            error = reply.error
    if llm is None or error is not None:
        source = "heuristic"
        entities = heuristic_entities(text)
    ids = store.add_many(entities) if entities else []
    added = [i for i in ids if i]
    return {"added": added, "duplicates": len(ids) - len(added), "source": source, "error": error}
