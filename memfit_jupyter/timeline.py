"""The timeline: what the model sees of the past, and nothing else.

Entries are appended as the run goes (the task, each action and its
observation, reflections, spin warnings, notes).  ``messages()`` renders them
as chat messages, merging neighbours of the same role; the rendering is
incremental so that a long run does not pay for its whole history on every
step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Entry:
    kind: str  # task, action, observation, reflection, logic_spin_warning, note, summary, ...
    iteration: int
    content: str
    role: str = "user"


class Timeline:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._messages: list[dict[str, str]] = []
        self._rendered = 0

    def add(self, kind: str, iteration: int, content: str, role: str = "user") -> Entry:
        entry = Entry(kind, iteration, content, role)
        self.entries.append(entry)
        return entry

    def replace_entries(self, entries: list[Entry]) -> None:
        """Swap the whole timeline (context eviction); the rendering starts again."""
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
