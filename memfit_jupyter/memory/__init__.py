"""Long-term memory (docs/MECHANISMS.md §3): C.O.R.E. P.A.C.T. entities in a durable store.

- ``MemoryStore(path)``: SQLite (WAL) as the source of truth, a usearch index
  for nearest neighbours, FTS5 for BM25 (``store``);
- ``MemoryEntity`` and scored results (``entity``); embedders (``embedders``);
- the retrieval pipeline (``search``), ranking and keyword bonus (``ranking``),
  2-of-3 deduplication (``dedup``), triage (``triage``), DataFrames (``frames``).

``extension_for(run)`` plugs memory into every run: it provides the store
(``run.memory``), the agent gets ``memory_search`` and ``memory_insert``, the timeline's diff
goes to triage when there is something to keep (``MemoryConfig.triage``), and a finished task
searches memory (4 KB).  With ``MemoryConfig.recall_bytes`` (``memory_recall``) a run starts
with what memory holds for its task in its system prompt.
Importing this package does not import usearch.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..extension import Hooks
from .dedup import DedupConfig
from .entity import MemoryEntity, ScoredMemory, SearchResults, result_dicts
from .ranking import RankingConfig
from .triage import MODEL_TRIAGE, TRIAGE_AT, TriageConfig

if TYPE_CHECKING:
    from ..protocols import RunView
    from ..records import ActionRecord, Entry, RunResult
    from ..tools import Tool
    from .retrieval import MemoryBackend
    from .store import MemoryStore, StoreWarning, open_store

__all__ = ["DedupConfig", "MemoryBackend", "MemoryConfig", "MemoryEntity", "MemoryStore", "RankingConfig", "ScoredMemory", "SearchResults",
           "StoreWarning", "TriageConfig", "extension_for", "open_store", "DEFAULT_DIR", "TASK_SEARCH_BYTES"]

#: Names loaded on first use: the stores and their modules (SQLite, usearch, PostgreSQL, the
#: embedders) load only when a store is opened, not when the package is imported.
_LAZY = {"MemoryStore": ".store", "StoreWarning": ".store", "open_store": ".store", "MemoryBackend": ".retrieval"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


#: The default store, relative to the agent's working directory.
DEFAULT_DIR = ".memfit"
#: The start of a URL ("https://"): a store given so is a server's, and only PostgreSQL's is known.
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


@dataclass(frozen=True)
class MemoryConfig:
    """How a run uses long-term memory; the defaults are those of docs/MECHANISMS.md §3.

    ``Agent(configs=[MemoryConfig(task_search_bytes=8192)])`` changes them; where the store
    lives is ``Agent(memory=...)``.
    """

    #: MECHANISMS.md §3.7: how much memory a completed task's search returns, in bytes.
    task_search_bytes: int = 4096
    #: What the memory_search tool returns at most, in bytes.
    tool_search_bytes: int = 4096
    #: When and how triage turns the run's steps into memories: rules (once, when the run ends,
    #: and every `triage.every` iterations of a long run, with no model call: error lines and the
    #: outcome), end (at the same times, written by the model) or events (the model, also at
    #: each failed tool call, finish or fact written, as first built).
    triage_at: str = "rules"
    #: At the run's start, what memory holds for the task goes into the system prompt, up to this
    #: many bytes (0: nothing is recalled).  Only memories close to the task in meaning are recalled.
    recall_bytes: int = 0
    #: How triage's input is written, and how often a long run triages
    #: (``TriageConfig(format="chinese", every=1)``: the input as first built, after every iteration).
    triage: TriageConfig = field(default_factory=TriageConfig)

    def __post_init__(self) -> None:
        if self.triage_at not in TRIAGE_AT:
            raise ValueError(f"triage_at must be one of {', '.join(TRIAGE_AT)}, got {self.triage_at!r}")
        if isinstance(self.recall_bytes, bool) or not isinstance(self.recall_bytes, int) or self.recall_bytes < 0:
            raise ValueError(f"recall_bytes must be a whole number of bytes, 0 or more, got {self.recall_bytes!r}")


TASK_SEARCH_BYTES = MemoryConfig.task_search_bytes
#: How close to the task a recalled memory must be: the cosine similarity of the store's
#: embedder.  With the hashing embedder, the outcome of the same task of the evaluation's suite
#: scores 0.77 or more; of another task of its family, 0.55 in the median.
RECALL_MIN_SIMILARITY = 0.5
#: At most this many memories are recalled.
RECALL_K = 3
#: The header of the recalled memories in the system prompt.
RECALL_HEADER = "From earlier runs, memory holds (check it before you rely on it):"
TOOL_SEARCH_BYTES = MemoryConfig.tool_search_bytes


def resolve_store(memory: Any, workdir: str | Path = ".", read_only: bool = False) -> MemoryBackend | None:
    """The store an ``Agent(memory=...)`` means: None -> ``<workdir>/.memfit``, False -> none,
    a path -> the store there, a postgresql:// URL -> the server's store, a URL of any other scheme
    -> StoreError (no folders made), a store (``MemoryBackend``: search, add, add_many, flush) -> itself.
    ``read_only``: a store opened from a path is read and nothing is written in its folder."""
    from .postgres import is_url
    from .retrieval import MemoryBackend
    from .store import open_store

    if memory is False:
        return None
    if memory is None or memory is True:
        return open_store(Path(workdir) / DEFAULT_DIR)
    if is_url(memory):  # postgresql://...: a shared store on a server
        return open_store(memory)
    if isinstance(memory, str) and _URL_SCHEME.match(memory):
        # Taken as a path, https://user:password@host/db would become folders named after the
        # password.  The message names only the scheme: the rest may hold that password.
        from ..errors import StoreError
        from ..secrets import redact

        scheme = memory.split("://", 1)[0]
        raise StoreError(f"a memory store cannot be at a {redact(scheme)}:// URL: give a folder path "
                         "or a postgresql:// URL")
    if isinstance(memory, str | Path):
        path = Path(memory).expanduser()
        return open_store(path if path.is_absolute() else Path(workdir) / path, read_only=read_only)
    if isinstance(memory, MemoryBackend):
        return memory
    # Triage calls add_many and every run's end flush: a store without them would fail there, each time.
    missing = [m for m in ("search", "add", "add_many", "flush") if not callable(getattr(memory, m, None))]
    raise TypeError(f"memory must be None, False, a path or a MemoryStore, got {type(memory).__name__}"
                    + (f" (a store needs {', '.join(missing)})" if missing else ""))


class MemoryExtension(Hooks):
    """The memory hooks and tools of one run; provides ``memory`` (the store)."""

    def __init__(self, run: RunView, store: MemoryBackend, config: MemoryConfig | None = None):
        self.run = run
        self.store = store
        self.config = config or MemoryConfig()
        self._seen: list[Entry] = []  # timeline entries already triaged (kept alive: compared by identity)
        self._seen_ids: set[int] = set()
        self._last: tuple[list[Entry] | None, int] = (None, 0)  # the entries list last read, and its length then
        self._last_triaged = 0  # the iteration triaged last
        self._recalled: list[str] = []

    def provides(self) -> dict[str, Any]:
        return {"memory": self.store}

    def _model(self, run: RunView) -> Any:
        """The client memory's own calls go through: none when triage is by rules."""
        return run.llm if self.config.triage_at in MODEL_TRIAGE else None

    def tools(self) -> list[Tool]:
        import dataclasses

        from .tools import memory_tools

        # Their effects are memory events: a replay runs them again against the recorded memory.
        return [dataclasses.replace(t, internal=True) for t in memory_tools(self)]

    def _fresh(self, run: RunView) -> list[Entry]:
        """The timeline entries not triaged yet."""
        entries: list[Entry] = run.timeline.entries
        if entries is self._last[0]:  # appended to since: the new entries are the tail
            fresh = entries[self._last[1]:]
        else:  # replaced (an eviction, a new trial): what is new is what was not seen
            fresh = [e for e in entries if id(e) not in self._seen_ids]
        self._last = (entries, len(entries))
        self._seen.extend(fresh)
        self._seen_ids.update(id(e) for e in fresh)
        return fresh

    def on_start(self, run: RunView) -> None:
        """With ``recall_bytes``, search memory for the task once (no model call) and keep what
        bears on it for the system prompt."""
        if not self.config.recall_bytes:
            return
        try:
            found = self.store.search(run.task, k=RECALL_K, bytes_limit=self.config.recall_bytes,
                                      iteration=run.iteration)
        except Exception as exc:  # memory must never take the loop down
            run.emit("error", message=f"memory recall failed: {type(exc).__name__}: {exc}")
            return
        kept = [r for r in found if r.breakdown.get("semantic", 0.0) >= RECALL_MIN_SIMILARITY]
        self._recalled = [" ".join(r.content.split()) for r in kept]
        run.emit("memory", op="recall", query=run.task, results=result_dicts(kept), added=[],
                 bytes=sum(len(r.content.encode()) for r in kept))

    def system_sections(self, run: RunView) -> list[str]:
        if not self._recalled:
            return []
        return [RECALL_HEADER + "\n" + "\n".join(f"- {c}" for c in self._recalled)]

    def after_action(self, run: RunView, record: ActionRecord) -> None:
        """MECHANISMS.md §3.7: the timeline's diff since the last triage goes to triage, when the
        iteration has something to keep (``triage.triage_due``)."""
        from .triage import triage_due

        if not triage_due(record, record.iteration, self._last_triaged, self.config.triage, self.config.triage_at):
            return
        done = bool(record.ok and record.data.get("final"))
        self._triage(run, record.iteration, done, "the agent called finish" if done else (record.error or None))

    def _triage(self, run: RunView, iteration: int, done: bool, reason: str | None) -> None:
        from .triage import contextual_input, handle_memory, render_entries

        config = self.config.triage
        diff = render_entries(self._fresh(run), config.format)
        self._last_triaged = iteration
        if not diff.strip():
            return
        text = contextual_input(iteration, run.id, diff, run.status, done, reason, format=config.format,
                                task=run.task)
        llm = self._model(run)
        try:
            outcome = handle_memory(self.store, text, llm, iteration=iteration, format=config.format)
        except Exception as exc:  # memory must never take the loop down
            run.emit("error", message=f"memory triage failed: {type(exc).__name__}: {exc}")
            return
        run.emit("memory", op="triage", query="", results=[], added=outcome["added"], bytes=0,
                 source=outcome["source"], duplicates=outcome["duplicates"], error=outcome["error"])

    def on_finish(self, run: RunView, result: RunResult) -> None:
        """MECHANISMS.md §3.7: a completed task searches memory (4 KB) and shows what it found.  A run that
        failed triages the steps not triaged yet (a failure is something to keep); its reason is
        the engine's word on the ending, not a lesson, so it is not given.  Unless triage is at
        ``"events"`` (where the finish was triaged at once), a finished run triages them too, with
        the finish as its reason."""
        try:
            if self._last_triaged < run.iteration:
                if result.status == "failed":
                    self._triage(run, run.iteration, False, None)
                elif result.status == "done" and self.config.triage_at != "events":
                    self._triage(run, run.iteration, True, "the agent called finish")
            if result.status == "done":
                llm = self._model(run)  # by rules memory calls no model: no tags picked by one either
                found = self.store.search(run.task, k=None, bytes_limit=self.config.task_search_bytes, llm=llm,
                                          iteration=run.iteration)
                run.emit("memory", op="task_search", query=run.task, results=result_dicts(found), added=[],
                         bytes=found.content_bytes)
        finally:
            self.store.flush()


def extension_for(run: RunView) -> MemoryExtension | None:
    """The memory extension of ``run`` (None with ``memory=False``)."""
    store = resolve_store(run.agent.memory, run.agent.workdir)
    if store is None:
        return None
    config = run.agent.config(MemoryConfig) if hasattr(run.agent, "config") else None
    return MemoryExtension(run, store, config)
