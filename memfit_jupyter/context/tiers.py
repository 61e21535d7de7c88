"""Tiered context (MemGPT): main context, recall and archival, with two watermarks.

The *main context* is what the model sees: the system instructions, a few
named, size-limited memory blocks the agent edits itself (shown in the system
prompt), and the FIFO queue of messages (the run's timeline).  Outside it:
*recall*, every entry ever evicted from the queue (searchable with
``conversation_search``), and *archival*, the long-term memory store.

Before each iteration the main context is measured in tokens with litellm's
counter against the model's window:

- above ``warning_ratio`` (70 %) a memory-pressure message asks the model to
  save what matters (once, until the next flush);
- at ``flush_ratio`` (100 %) the oldest entries, about ``evict_fraction`` (half)
  of the window, move to recall, and a recursive summary (the previous summary
  plus the evicted entries, summarised by the model) is put at the head of the
  queue as ``[summary so far] ...``.

For a real model (its server refuses a prompt over the window) the flush also
comes once fewer than ``reserve`` tokens would be left for the reply, counts are
scaled by how far the provider's own prompt counts showed the counter to be off
(``calibrate``), and a flush repeats until the prompt fits.

Each measurement is a ``context`` event: the widget's gauge.  Counting is
incremental: each timeline entry is counted once, the system prompt only when
its text changes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import events as ev
from ..llm.tokens import estimate_tokens
from ..records import SUMMARY_TAG, Entry
from ..reliability.limits import check_number

if TYPE_CHECKING:
    from ..protocols import RunView

__all__ = ["PRESSURE_TAG", "SUMMARY_TAG", "ContextConfig", "TieredContext"]

#: Tokens a chat message costs beyond its text (role and separators), as litellm counts them.
MESSAGE_OVERHEAD = 4
PRESSURE_TAG = "[MEMORY PRESSURE]"


@dataclass
class ContextConfig:
    """Settings of the tiered context; the defaults are explained in docs/MECHANISMS.md §5.

    ``Agent(configs=[ContextConfig(...)])`` (or ``agent.context_config = ...``) changes them.
    """

    #: Share of the window above which the model gets the memory-pressure message.
    warning_ratio: float = 0.70
    #: Share of the window at which the oldest messages are evicted and summarised.
    flush_ratio: float = 1.0
    #: How much of the window a flush evicts, oldest entries first.
    evict_fraction: float = 0.5
    #: The newest entries a flush never evicts (the last action and its observation).
    keep_last: int = 2
    #: The editable memory blocks shown in the system prompt, name -> character limit.
    blocks: tuple[tuple[str, int], ...] = (("persona", 1000), ("task_notes", 2000))
    #: At most this many characters of evicted text go into one summary call.
    summary_input_chars: int = 12_000
    #: The failure diary: trials the oracle may fail before the run is escalated (``max_trials=``).
    max_trials: int = 3

    def __post_init__(self) -> None:
        check_number("keep_last", self.keep_last, at_least=0, integer=True)
        check_number("summary_input_chars", self.summary_input_chars, at_least=1, integer=True)
        check_number("max_trials", self.max_trials, at_least=1, integer=True)
        if not 0 < self.warning_ratio <= self.flush_ratio:
            raise ValueError("context config: need 0 < warning_ratio <= flush_ratio")
        if not 0 < self.evict_fraction <= 1:
            raise ValueError("context config: evict_fraction must be in (0, 1]")


@dataclass
class MemoryBlock:
    """A named piece of the main context that the agent edits (``core_memory_*``)."""

    name: str
    limit: int
    value: str = ""

    def render(self) -> str:
        return f'<{self.name} chars="{len(self.value)}/{self.limit}">\n{self.value}\n</{self.name}>'


def litellm_counter(model: str) -> Callable[[str], int]:
    """litellm's token counter for ``model``.  Making it imports nothing: litellm is imported at
    the first count, which in a live run comes after the run imported it under its time budget
    (``reliability.guarantees.load_model_library``), so counting never blocks outside a time
    check.  (Always litellm's, never the estimate until it is loaded: a replay must count as
    the run it replays did.)"""

    def count(text: str) -> int:
        return _litellm_count(model, text) if text else 0

    return count


@functools.lru_cache(maxsize=4096)
def _litellm_count(model: str, text: str) -> int:
    """litellm's count of ``text``, kept: a run counts its system prompt and each new entry, and a
    fork or replay in the same process counts the same texts again (litellm picks its tokenizer
    anew on every call, which costs more than the count)."""
    from ..llm.backend import import_litellm

    return int(import_litellm().token_counter(model=model, text=text))


class TieredContext:
    """The tiers of one run.  ``check(run)`` runs before each iteration."""

    def __init__(self, config: ContextConfig | None = None, window: int | None = None,
                 counter: Callable[[str], int] | None = None):
        self.config = config or ContextConfig()
        self.window = window
        self._counter = counter
        self.blocks = {name: MemoryBlock(name, limit) for name, limit in self.config.blocks}
        self.recall: list[Entry] = []
        self.summary: str | None = None
        self.summaries: list[str] = []
        #: The prompts of the summary calls, newest last (what each summary was built from).
        self.summary_prompts: list[str] = []
        self.warned = False
        self.last: dict[str, Any] | None = None
        self._entry_tokens: dict[int, tuple[Entry, int]] = {}
        self._system: tuple[str, int] = ("", 0)
        #: The timeline list last measured, how many of its entries, and their tokens: the timeline
        #: only grows between replacements, so each check counts just the new entries.
        self._queue: tuple[Any, int, int] = (None, 0, 0)
        #: Called with the new summary after each flush (the long-horizon progress file listens).
        self.on_flush: list[Callable[[str], None]] = []
        #: Tokens kept free for the reply (a real model's server refuses a prompt over its window,
        #: and what it writes must fit beside the prompt): the main context flushes once it
        #: would leave fewer.  0 for the scripted models, whose windows are a story's.
        self.reserve = 0
        #: How many tokens the provider counts for each one the counter counts (at least 1):
        #: learned from the prompts sent (``calibrate``), since the counter's tokenizer is
        #: seldom the model's own.
        self.scale = 1.0
        #: The messages of the last summary call (``calibrate`` compares the provider's count).
        self.summary_messages: list[dict[str, Any]] | None = None

    #: The most the provider's count may exceed the counter's before it is taken for a fluke.
    MAX_SCALE = 3.0

    # --- measuring ------------------------------------------------------------------
    def count(self, text: str) -> int:
        return self._counter(text) if self._counter else estimate_tokens(text)

    def _tokens_of(self, entry: Entry) -> int:
        cached = self._entry_tokens.get(id(entry))
        if cached is None or cached[0] is not entry:
            cached = (entry, self.count(entry.content) + MESSAGE_OVERHEAD)
            self._entry_tokens[id(entry)] = cached
        return cached[1]

    def system_tokens(self, text: str) -> int:
        if text != self._system[0]:
            self._system = (text, self.count(text) + MESSAGE_OVERHEAD)
        return self._system[1]

    def used_tokens(self, run: RunView) -> int:
        """Tokens of the main context: the system prompt the model last saw plus the queue."""
        entries = run.timeline.entries
        seen, counted, total = self._queue
        if entries is not seen or len(entries) < counted:
            counted, total = 0, 0
        total += sum(self._tokens_of(e) for e in entries[counted:])
        self._queue = (entries, len(entries), total)
        return self.system_tokens(_system_text(run)) + total

    def watermark(self, used: int) -> str:
        if not self.window:
            return "ok"
        sent = used * self.scale  # what the provider will count
        ratio = sent / self.window
        if ratio >= self.config.flush_ratio or (self.reserve and sent + self.reserve > self.window):
            return "flush"
        if ratio > self.config.warning_ratio:
            return "warning"
        return "ok"

    def calibrate(self, messages: Sequence[dict[str, Any]], provider_tokens: int) -> None:
        """The provider counted ``provider_tokens`` for ``messages``: keep the largest ratio to
        the counter's count seen so far (within ``MAX_SCALE``), so that later checks err safe."""
        counted = sum(self.count(str(m.get("content") or "")) + MESSAGE_OVERHEAD for m in messages)
        if counted > 0 and provider_tokens > 0:
            self.scale = max(self.scale, min(self.MAX_SCALE, provider_tokens / counted))

    # --- the loop -------------------------------------------------------------------
    def check(self, run: RunView) -> str:
        """Measure the main context; warn or flush as the watermarks say.  Returns the watermark."""
        window = self.window
        if not window:
            return "ok"
        used = self.used_tokens(run)
        mark = self.watermark(used)
        while mark == "flush":
            evicted = self.flush(run)
            # The context event moves the entries: the timeline is written from the events.
            self._emit(run, used, window, "flush", evicted=len(evicted), summary=self.summary)
            for listener in self.on_flush if evicted else ():
                listener(self.summary or "")
            used = self.used_tokens(run)
            mark = self.watermark(used)
            # Again while still over (the summary call may have shown the counter counts low),
            # unless nothing more could go: the system prompt and the newest entries alone fill it.
            if mark == "flush" and not evicted:
                mark = "warning"
        if mark == "warning" and not self.warned:
            self.warned = True
            pct = round(100 * used / window)
            run.emit(ev.Guidance(kind="memory_pressure", text=(
                f"{PRESSURE_TAG} The context is {pct}% full ({used} of {window} tokens). "
                "Save what must survive now: core_memory_append to the task_notes block, or "
                "archival_memory_insert for long-term facts. Older messages will soon be "
                "summarised and moved to recall (conversation_search finds them).")))
        self._emit(run, used, window, mark)
        return mark

    def _emit(self, run: RunView, used: int, window: int, mark: str, evicted: int = 0,
              summary: str | None = None) -> None:
        self.last = {"used_tokens": used, "window": window, "ratio": round(used / window, 4),
                     "watermark": mark, "evicted": evicted, "recall_size": len(self.recall),
                     "summary": summary}
        run.emit(ev.Context(**self.last))

    def flush(self, run: RunView) -> list[Entry]:
        """Choose about half a window of the oldest entries, move them to recall and summarise them
        recursively; the ``context`` event of the flush then takes them out of the timeline.

        Without a known window there is no "half a window" to move: nothing is evicted.
        """
        if not self.window:
            return []
        queue = [e for e in run.timeline.queue() if e.kind != "summary"]
        keep = max(0, self.config.keep_last)
        candidates = queue[: len(queue) - keep] if keep else queue
        target = self.config.evict_fraction * self.window
        evicted: list[Entry] = []
        tokens = 0
        for entry in candidates:
            if tokens >= target:
                break
            evicted.append(entry)
            tokens += self._tokens_of(entry)
        if not evicted:
            return []
        self.recall.extend(evicted)
        for e in evicted:
            self._entry_tokens.pop(id(e), None)
        self.summary = self._summarise(run, evicted)
        self.summaries.append(self.summary)
        self.warned = False
        return evicted

    def _summarise(self, run: RunView, evicted: list[Entry]) -> str:
        from ..llm.prompts import json_system

        previous = self.summary or "(none yet)"
        text = "\n".join(f"[{e.kind} #{e.iteration}] {e.content}" for e in evicted)
        limit = self.config.summary_input_chars
        if self.reserve and self.window:
            # The summary prompt must fit the window too: the evicted text gets half of what the
            # reply leaves, at three characters a token (code and JSON), by the calibrated count.
            limit = min(limit, max(1000, int(3 * (self.window - self.reserve) / 2 / self.scale)))
        if len(text) > limit:
            text = text[:limit // 2] + "\n...\n" + text[-limit // 2:]
        prompt = (f"Task: {run.task}\n\n[previous summary]\n{previous}\n\n"
                  f"[evicted messages, oldest first]\n{text}")
        self.summary_prompts.append(prompt)
        messages = [
            {"role": "system", "content": json_system("summary", (
                "You keep the running summary of an agent's work. Older messages are leaving its "
                "context. Merge the previous summary and the evicted messages into ONE new summary "
                "that replaces both: keep facts, numbers, file names, decisions, what failed and "
                "what is still open. Be brief."), "summary")},
            {"role": "user", "content": prompt},
        ]
        self.summary_messages = messages  # what the provider's count of the prompt is checked against
        reply = run.llm.call("summary", messages, tier="fast", iteration=run.iteration)
        summary: str = reply.value.summary.strip() if reply.ok else ""
        if summary:
            return summary
        # Never lose the thread: keep the previous summary and the first line of each evicted entry.
        lines = [e.content.splitlines()[0][:160] for e in evicted if e.content.strip()]
        return (f"{previous} | (summary call failed: {reply.error}) evicted: " + "; ".join(lines))[:4000]

    # --- recall ---------------------------------------------------------------------
    def search_recall(self, query: str, current: Sequence[Entry] = (), k: int = 5) -> list[Entry]:
        """Entries of recall (and of the current queue) that share the most words with ``query``."""
        terms = {t for t in re.findall(r"\w+", query.lower()) if len(t) > 1}
        if not terms:
            return []
        scored = []
        for order, entry in enumerate([*self.recall, *current]):
            words = set(re.findall(r"\w+", entry.content.lower()))
            hits = len(terms & words)
            if hits:
                scored.append((hits, order, entry))
        scored.sort(key=lambda t: (-t[0], -t[1]))
        return [e for _, _, e in scored[:k]]

    def section(self, tools: Collection[str] | None = None) -> str:
        """The memory blocks, as the system prompt shows them, naming only the ``tools`` the run
        has (None: all of them).  Without the core memory tools, empty blocks are left out (the
        model could not fill them) and blocks with content are shown without an edit hint;
        without ``conversation_search`` or the archival tools, their line is left out.  A run
        with none of these tools and empty blocks gets no section ("")."""
        def has(*names: str) -> bool:
            return tools is None or all(n in tools for n in names)

        lines = []
        editable = has("core_memory_append", "core_memory_replace")
        shown = [b for b in self.blocks.values() if editable or b.value.strip()]
        if shown:
            hint = "; edit with core_memory_append / core_memory_replace" if editable else ""
            lines.append(f"Core memory (always in view{hint}):")
            lines.extend(b.render() for b in shown)
        rest = []
        if has("conversation_search"):
            rest.append(f"Recall holds {len(self.recall)} evicted message(s): conversation_search.")
        if has("archival_memory_insert", "archival_memory_search"):
            rest.append("Archival memory: archival_memory_insert / archival_memory_search.")
        if rest:
            lines.append(" ".join(rest))
        return "\n".join(lines)


def _system_text(run: RunView) -> str:
    """The system prompt the model last saw (building it again would re-run every extension's hook)."""
    if run.last_prompt and run.last_prompt[0].get("role") == "system":
        text: str = run.last_prompt[0]["content"]
        return text
    from ..llm.prompts import action_system

    return action_system(run.tools.values(), run.prompt_workdir)
