"""The timeline: what the model sees of the past, and nothing else.

It is written in one place, ``Timeline.apply``, from the run's events: an
action and its observation, ``Guidance`` (reflections, spin warnings, memory
pressure, the person's changes), notes meant for the model, and a context
flush (the oldest entries leave for recall, a summary takes their place).
``messages()`` renders the entries as chat messages, merging neighbours of
the same role; the rendering is incremental so that a long run does not pay
for its whole history on every step.
"""

from __future__ import annotations

from . import events as ev
from .llm.prompts import action_message, observation_message
from .records import SUMMARY_TAG as SUMMARY_TAG
from .records import Entry as Entry

#: What the model is told after a reply that could not be used.
BAD_REPLY_NOTE = "[SYSTEM] Your last reply could not be used ({error}). Reply with one JSON object as specified."


class Timeline:
    def __init__(self, task: str | None = None) -> None:
        self.entries: list[Entry] = []
        self._messages: list[dict[str, str]] = []
        self._rendered = 0
        self._action: ev.Action | None = None
        if task is not None:
            self.add("task", 0, f"Task: {task}")

    # --- written from the events ----------------------------------------------------------
    def apply(self, event: ev.Event) -> None:
        """Put what ``event`` tells the model into the timeline (most events tell it nothing)."""
        i = event.iteration or 0
        if isinstance(event, ev.Action):
            self._action = event
        elif isinstance(event, ev.Observation):
            act, self._action = self._action, None
            if act is None:  # no usable action was given
                self.add("note", i, BAD_REPLY_NOTE.format(error=event.error))
                return
            self.add("action", i, action_message(act.thought, act.action_type, act.tool, act.params),
                     role="assistant")
            self.add("observation", i, observation_message(act.tool, event.ok, event.output, event.error))
        elif isinstance(event, ev.Guidance):
            self.add(event.kind, i, event.text)
        elif isinstance(event, ev.Note) and event.timeline:
            if event.timeline == "reset":
                self.replace_entries([*self._head(), Entry("note", i, event.text)])
            else:
                self.add("note", i, event.text)
        elif isinstance(event, ev.Context) and event.watermark == "flush" and event.evicted:
            head = self._head()
            queue = [e for e in self.entries[len(head):] if e.kind != "summary"]
            summary = Entry("summary", i, f"{SUMMARY_TAG} {event.summary}")
            self.replace_entries([*head, summary, *queue[event.evicted:]])

    def _head(self) -> list[Entry]:
        return self.entries[:1] if self.entries and self.entries[0].kind == "task" else []

    # --- the low-level list ---------------------------------------------------------------
    def add(self, kind: str, iteration: int, content: str, role: str = "user") -> Entry:
        entry = Entry(kind, iteration, content, role)
        self.entries.append(entry)
        return entry

    def replace_entries(self, entries: list[Entry]) -> None:
        """Swap the whole timeline; the rendering starts again."""
        self.entries = list(entries)
        self._messages = []
        self._rendered = 0

    def messages(self) -> list[dict[str, str]]:
        msgs = self._messages
        for entry in self.entries[self._rendered :]:
            if msgs and msgs[-1]["role"] == entry.role:
                msgs[-1] = {"role": entry.role, "content": msgs[-1]["content"] + "\n\n" + entry.content}
            else:
                msgs.append({"role": entry.role, "content": entry.content})
        self._rendered = len(self.entries)
        return list(msgs)

    def queue(self) -> list[Entry]:
        """The entries after the task, oldest first (what a flush or a new trial moves to recall)."""
        return self.entries[len(self._head()):]

    def text(self, since: int = 0, kinds: tuple[str, ...] | None = None, max_chars: int | None = None) -> str:
        """Plain text of the entries from index ``since`` (optionally of some kinds, the last max_chars)."""
        parts = [f"[{e.kind} #{e.iteration}] {e.content}" for e in self.entries[since:]
                 if kinds is None or e.kind in kinds]
        text = "\n".join(parts)
        if max_chars is not None and len(text) > max_chars:
            text = text[-max_chars:]
        return text

    def __len__(self) -> int:
        return len(self.entries)
