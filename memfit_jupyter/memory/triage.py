"""Memory triage (docs/MECHANISMS.md §3.7), the model turning an iteration into memories.

``handle_memory(store, contextual_input, llm)`` asks the model (the "triage"
purpose, schema ``MemoryTriage``) for entities: content, tags, potential
questions and the seven scores on the scales of MECHANISMS.md §3.4.  When the model call
fails, ``heuristic_entities`` still keeps what matters: failed actions with
their errors (high actionability), and finished tasks with their answer.
Everything goes through the store's ``add_many``: redaction and 2-of-3 dedup.

The contextual input is written in English by default (``TriageConfig.format``): the
task, then each step on a line (tool, parameters, thought) with its observation clipped,
under a short instruction.  ``"chinese"`` gives the input as first built: the reference
design's Chinese labels (``ReAct迭代``, ``任务状态``...), the timeline entries as they stand
and the long instruction (``"seed"`` is an older name of it, still read).  The engine's
own trouble (a reply that could not be used, a provider failure: ``[SYSTEM]`` notes) is
never a lesson about the task: it is left out of the input, and an iteration that is
nothing but such trouble is not triaged.  Triage runs when the run ends, over the steps not
triaged yet, and every ``every`` iterations of a long run; by default by rules, with no model
call (``MemoryConfig.triage_at="rules"``: ``heuristic_entities``), with ``"end"`` the model
writes the memories, and with ``"events"`` it also triages at once when there is something to
keep (``triage_due``): a failed tool call, a finish, a fact written down
(``TriageConfig(every=1)``: after every iteration, as first built).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .text import tag_keywords as keywords  # readable words for tags and questions

if TYPE_CHECKING:
    from ..llm.client import LLMClient
    from ..records import ActionRecord, Entry
    from .retrieval import MemoryBackend


#: When and how triage runs (``MemoryConfig.triage_at``): "rules" (when the run ends, and every
#: ``TriageConfig.every`` iterations of a long run, without a model: each distinct error line and
#: the outcome, ``heuristic_entities``), "end" (at the same times, the model writing the memories)
#: or "events" (the model, also at once after a failed tool call, a finish or a fact written, as
#: first built).  The default is "rules" (docs/EVIDENCE.md, the seventh measurement): the model's
#: triage cost about 800 tokens a run on the local models and nothing read what it wrote.
TRIAGE_AT = ("rules", "end", "events")
#: The triage settings in which the model writes the memories.
MODEL_TRIAGE = ("end", "events")
#: How triage's input is written (``TriageConfig.format``).
TRIAGE_FORMATS = ("english", "chinese")
#: Older names of the formats, still read (user code and saved settings may carry them).
TRIAGE_FORMAT_ALIASES = {"seed": "chinese"}


def triage_format(name: str) -> str:
    """The format called ``name`` by its current name (an older name is read as its new one)."""
    return TRIAGE_FORMAT_ALIASES.get(name, name)


@dataclass(frozen=True)
class TriageConfig:
    """When memory triage runs and how its input is written.

    >>> TriageConfig(format="chinese", every=1)   # the input as first built, after every iteration
    TriageConfig(format='chinese', every=1)
    """

    #: "english" (one short line per step, labels in English) or "chinese" (the input as first
    #: built: the reference design's Chinese labels, the timeline entries as they stand).
    format: str = "english"
    #: Triage at least every this many iterations with new content (1: every iteration, as first built).
    #: A failure, a finish or a fact written down triage at once; this catches the facts a long
    #: healthy stretch turned up.
    every: int = 10

    def __post_init__(self) -> None:
        object.__setattr__(self, "format", triage_format(self.format))
        if self.format not in TRIAGE_FORMATS:
            raise ValueError(f"format must be 'english' or 'chinese', got {self.format!r}")
        if self.every < 1:
            raise ValueError("every must be at least 1")

#: The instruction of the English input: what to keep, the reply's shape, the scores' names.
TRIAGE_BRIEF = """Keep what would help a future task: lessons from failures, facts about the environment, \
the person's preferences, general rules; usually nothing. JSON: {"entities": [{"content", "tags": [], \
"potential_questions": [], "scores": {c, o, r, e, p, a, t: 0-1}}]} or {"entities": []}. Scores: \
connectivity, origin reliability, relevance, emotion, personal style, actionability, temporality. Write \
in the task's language."""

#: The instruction of the Chinese-labelled input (as first built).
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


#: In the English input an observation is clipped to this many characters (a failure's to
#: FAILURE_CHARS: its error is the lesson), a step's parameters and other entries to ENTRY_CHARS.
OBSERVATION_CHARS = 200
FAILURE_CHARS = 800
ENTRY_CHARS = 400
TASK_CHARS = 400
_OBSERVATION = re.compile(r"^Observation \([^)]*\)(?P<rest>.*)\Z", re.S)


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} characters]"


def render_entries(entries: Iterable[Entry], format: str = "english") -> str:
    """The timeline entries a triage reads: as they stand in the Chinese-labelled input; in English one
    line per step (``#3 read_file {"path": "x"}: thought``) and its observation after ``->``,
    clipped, the finish's echo of its answer left out.  Engine notes are left out in both."""
    entries = [e for e in entries if e.kind != "task"]
    if triage_format(format) == "chinese":
        return task_lines("\n".join(f"[{e.kind} #{e.iteration}] {e.content}" for e in entries))
    lines: list[str] = []
    answer = None
    for e in entries:
        if ENGINE_NOTE in e.content:
            continue
        if e.kind == "action":
            try:
                act = json.loads(e.content)
                args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in act["params"].items())
                line = f"#{e.iteration} {act.get('tool', '?')}({_clip(args, ENTRY_CHARS)}): {act.get('thought', '')}"
                answer = act["params"].get("answer") if act.get("tool") == "finish" else None
            except (ValueError, AttributeError, KeyError, TypeError):
                line, answer = f"#{e.iteration} {_clip(e.content, ENTRY_CHARS)}", None
            lines.append(line.rstrip(": "))
        elif e.kind == "observation":
            m = _OBSERVATION.match(e.content)
            rest = m.group("rest") if m else e.content
            failed = rest.startswith(" FAILED")
            rest = rest.lstrip(": \n")
            if failed or rest != answer:
                lines.append("-> " + _clip(rest, FAILURE_CHARS if failed else OBSERVATION_CHARS))
        else:
            lines.append(f"[{e.kind}] {_clip(e.content, ENTRY_CHARS)}")
    return task_lines("\n".join(lines))


def contextual_input(iteration: int, task_id: str, diff: str, status: str, done: bool, reason: str | None,
                     format: str = "english", task: str = "") -> str:
    """The contextual input of triage (MECHANISMS.md §3.7): in the reference design's Chinese labels, or in English (the task,
    the steps, whether it finished, and the reason when the steps do not already say it)."""
    if format == "english":
        head = f"Task: {_clip(task, TASK_CHARS)}" if task else f"Task {task_id}"
        why = f" ({reason})" if reason and not done and str(reason) not in diff else ""
        return f"{head}\n{diff}\nFinished: {'yes' if done else 'no'}{why}"
    return (f"ReAct迭代 {iteration}/{task_id}: {diff}\n任务状态: {status}\n完成状态: "
            f"{'true' if done else 'false'}\n原因: {reason if reason is not None else '<nil>'}")


def triage_due(record: ActionRecord, iteration: int, last_triaged: int, config: TriageConfig,
               at: str = "events") -> bool:
    """Whether this iteration is triaged now: ``config.every`` iterations since the last triage,
    and with ``at="events"`` also a failed tool call, a finish or a fact written to memory (with
    ``"end"`` and ``"rules"`` those wait for the run's end, ``MemoryExtension.on_finish``).  A reply that could
    not be used (the engine's trouble with the model) is never triaged."""
    if record.action_type == "invalid_reply":
        return False
    if at != "events":
        return iteration - last_triaged >= config.every
    if not record.ok or record.data.get("final"):
        return True
    if record.tool in ("memory_insert", "core_memory_append", "core_memory_replace", "archival_memory_insert"):
        return True
    return iteration - last_triaged >= config.every


_STEP_CALL = re.compile(r"^#\d+ (?P<call>[\w.-]+\(.*\))(?=: |$)")


def _failed_steps(text: str) -> list[str]:
    """In the English input, each failed step as its call and its error
    (``read_file(path="x") failed: no such file: x``), one per distinct error: the same error
    echoed by a reflection or met again is one lesson."""
    found: dict[str, str] = {}
    call = ""
    for line in text.splitlines():
        step = _STEP_CALL.match(line)
        if step or line.startswith("#"):
            call = step.group("call") if step else ""
        elif line.startswith("-> FAILED"):
            error = line[len("-> FAILED"):].lstrip(": ").strip()
            found.setdefault(error, f"{call} failed: {error}" if call else f"FAILED: {error}")
    return list(found.values())


def _recipe(text: str) -> str:
    """In the English input of a finished task, the task and the steps that worked, in order
    (``Task: ... Done by: read_file(path="x"), finish(answer="42")``): how it was solved."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("Task: "):
        return ""
    worked: list[str] = []
    for line in lines[1:]:
        step = _STEP_CALL.match(line)
        if step:
            worked.append(step.group("call"))
        elif line.startswith("-> FAILED") and worked:
            worked.pop()
    return f"{lines[0]} Done by: {', '.join(worked)}" if worked else ""


def heuristic_entities(text: str, max_chars: int = 600) -> list[dict[str, Any]]:
    """What to keep without a model: each distinct error (a lesson to act on: in the English input
    the failed call with its error) and, when the input says the task finished, the outcome (in
    English the task and the calls that worked).  Empty when nothing stands out."""
    text = task_lines(text)
    kws = [k for k in keywords(text) if k.isascii() and not k.isdigit()][:6]
    out: list[dict[str, Any]] = []
    failed = _failed_steps(text)
    errors = failed or list(dict.fromkeys(m.group(0).strip() for m in _ERROR_LINE.finditer(text)))
    # a failed call is a lesson about its task: said with it, a search for the task finds it
    first = text.split("\n", 1)[0]
    where = f"({first})" if failed and first.startswith("Task: ") else ""
    for line in errors[:3]:
        line_kws = [k for k in keywords(line) if k.isascii() and not k.isdigit()][:4]
        out.append({
            "content": f"Failure seen: {line[:max_chars]} {_clip(where, 200)}".rstrip(),
            "tags": ["failure", *line_kws],
            "questions": [f"What went wrong with {' '.join(line_kws[:3]) or 'this action'}?"],
            "scores": {"c": 0.4, "o": 0.8, "r": 0.7, "e": 0.0, "p": 0.0, "a": 0.7, "t": 0.5},
        })
    if re.search(r"完成状态: true|^Finished: yes\b|\bdone\b", text, re.M):
        summary = _recipe(text) or " ".join(text.split())
        summary = summary[:max_chars]
        out.append({
            "content": f"Task outcome: {summary}",
            "tags": ["outcome", *kws[:4]],
            "questions": [f"How was {' '.join(kws[:3]) or 'the task'} solved before?"],
            "scores": {"c": 0.3, "o": 0.7, "r": 0.6, "e": 0.0, "p": 0.0, "a": 0.5, "t": 0.5},
        })
    return out


def handle_memory(store: MemoryBackend, text: str, llm: LLMClient | None = None, *, iteration: int = 0,
                  format: str = "chinese") -> dict[str, Any]:
    """Extract, dedup, score and save.  Returns what happened:
    ``{"added": [ids], "duplicates": n, "source": "model" | "heuristic", "error": str | None}``.
    ``format`` picks the instruction: the short English one or the long one of the Chinese-labelled input."""
    entities: list[dict[str, Any]] = []
    source, error = "model", None
    if llm is not None:
        system = TRIAGE_BRIEF if format == "english" else TRIAGE_SYSTEM
        messages = [{"role": "system", "content": system}, {"role": "user", "content": text[-12_000:]}]
        reply = llm.call("triage", messages, tier="fast", iteration=iteration)
        if reply.ok:
            entities = [{"content": e.content, "tags": e.tags, "questions": e.potential_questions,
                         "scores": e.scores} for e in reply.value.entities if e.content.strip()]
        else:
            error = reply.error
    if llm is None or error is not None:
        source = "heuristic"
        entities = heuristic_entities(text)
    # Called even with nothing to add, so that every triage is one add_many: a replay answers them in order.
    ids = store.add_many(entities)
    added = [i for i in ids if i]
    return {"added": added, "duplicates": len(ids) - len(added), "source": source, "error": error}
