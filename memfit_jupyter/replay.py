"""Replay as a backend: a recording answers for the model, the tools, the memory and the clock.

``Agent.replay(trace)`` builds a normal ``Run`` whose parts come from the
recording instead of the world:

- ``RecordedBackend``: each model call gets the next recorded reply of its
  purpose (prices and context windows are the model's own, so budgets cap the
  calls as they did);
- ``RecordedTools``: a tool that touches the world (files, shell, Python, the
  oracle) gives its recorded observation; a tool whose effects are the run's
  own events (``Tool.internal``: sub-queries, memory tools) runs again; the
  files a scenario placed are not placed again, its note is repeated;
- ``RecordedStore``: memory searches return the recorded results (a model's tag
  selection is asked again, so its call is replayed too) and adds the recorded
  ids; nothing is written anywhere;
- ``RecordedClock``: each event gets its recorded timestamps, the budget sees the recorded
  time where a time limit stopped the run, and the recorded ``log`` events (warnings a
  notebook cell captured) come again in their places.

The loop has no replay branches: it uses whatever it was given.  ``divergence`` says where
a replay's events part from the recording's (``python -m memfit_jupyter replay`` exits 1 then).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .events import BreakerRejected, Event, from_dict
from .live import LiveClock as LiveClock  # importable from here too, its former home
from .live import LiveTools
from .llm.backend import ReplayBackend
from .memory.entity import MemoryEntity, ScoredMemory, SearchResults
from .records import ToolResult

if TYPE_CHECKING:
    from .protocols import RunView

#: Fields whose values come from the clock, taken from the recording (breakers use the wall clock;
#: a call's timeout is the time left then, which a replay, running faster, does not have to match).
CLOCK_FIELDS = ("latency_s", "duration_s", "elapsed_s", "timeout_s", "opened_at", "next_probe_at", "open_tiers")
#: The note of a scenario's files in traces that did not name them in ``Note.files``.
SCENARIO_NOTE = re.compile(r"^scenario (\S+) placed its files: (.*)$")
#: The oracle of a replayed failure diary: its verdicts are in the recorded observations.
RECORDED_ORACLE = "(recorded)"


_CLOCK_FIELDS_OF: dict[type, tuple[str, ...]] = {}


def _clock_fields(cls: type[Event]) -> tuple[str, ...]:
    """The ``CLOCK_FIELDS`` that events of ``cls`` have (found once per class)."""
    found = _CLOCK_FIELDS_OF.get(cls)
    if found is None:
        names = cls._names()
        found = _CLOCK_FIELDS_OF[cls] = tuple(key for key in CLOCK_FIELDS if key in names)
    return found


class RecordedClock:
    """Timestamps of the recording: event ``index`` of the trace gets the recorded event's times.

    It also answers for the recorded ``log`` events: a warning or log line is something the world
    (a library, the logging set-up of the kernel that ran it) gave the run, not a step of the loop,
    so each recorded one is emitted again in its place, before the event that followed it.  A log
    line the replay raises itself where the recording has the same one is that event.
    """

    def __init__(self, events: list[dict[str, Any]]):
        self.events = events
        self.run: Any = None  # the run it stamps (set by Agent.replay and fork.py)

    def now(self) -> float:
        """The recorded time of the event the run emits next (seconds since the run started)."""
        if not self.events:
            return 0.0
        index = len(self.run.events) if self.run is not None else 0
        return float(self.events[min(index, len(self.events) - 1)].get("ts", 0.0) or 0.0)

    def _next_step(self) -> dict[str, Any] | None:
        """The recorded event the loop emits next, past the log lines recorded before it."""
        index = len(self.run.events)
        while index < len(self.events) and self.events[index].get("type") == "log":
            index += 1
        return self.events[index] if index < len(self.events) else None

    def resume_next(self, run: Any) -> bool:
        """Once the replay has ended where the recording did: when the person then had the run go
        on (``run.override``, more trials of the failure diary), do the same; whether it goes on."""
        nxt = self._next_step() if self.run is not None else None
        if nxt is None:
            return False
        if nxt.get("type") == "guarantee" and nxt.get("override") and isinstance(nxt.get("limits"), dict):
            raised = [k for k in str(nxt.get("limit") or "").split(",") if k in nxt["limits"]]
            run.override(confirm=True, **{k: nxt["limits"][k] for k in raised})
            return True
        if nxt.get("type") == "escalation" and nxt.get("choice") == "more_trials" and run.context is not None:
            run.context.more_trials(run, int(nxt.get("extra_trials") or 1))
            return True
        return False

    def cancelled_next(self) -> dict[str, Any] | None:
        """The recorded ``run_end``, when the person cancelled the run where the replay is now
        (between two steps): the replay ends there as the run did."""
        if self.run is None:
            return None
        nxt = self._next_step()
        return nxt if nxt is not None and nxt.get("type") == "run_end" and nxt.get("status") == "cancelled" else None

    def refusal_next(self) -> dict[str, Any] | None:
        """The recorded guarantee violation, when it is the event the run emits next: the
        recording was refused there (a limit reached before a model call or an iteration)."""
        if self.run is None:
            return None
        nxt = self._next_step()
        return nxt if nxt is not None and nxt.get("type") == "guarantee" and nxt.get("violated") else None

    def budget_time(self, running: float) -> float:
        """The time the budget sees: the replay's own, except where the recording ran out of time
        next (a ``max_duration_seconds`` violation is the event the run emits next), where it is
        the time the recording had then, so the limit stops the replay where it stopped the run."""
        refusal = self.refusal_next()
        if (refusal is not None and refusal.get("limit") == "max_duration_seconds"
                and isinstance(refusal.get("elapsed_s"), int | float)):
            return max(running, float(refusal["elapsed_s"]))
        return running

    def _emit_recorded_logs(self) -> None:
        """Emit the recorded log lines that come next, so the event being emitted lands after them."""
        while len(self.run.events) < len(self.events) and self.events[len(self.run.events)].get("type") == "log":
            self.run.emit(from_dict(self.events[len(self.run.events)]))

    def stamp(self, event: Event, index: int, elapsed: float) -> None:
        events = self.events
        if index >= 0 and self.run is not None and event.TYPE != "log":
            index = len(self.run.events)
            if index < len(events) and events[index].get("type") == "log":
                self._emit_recorded_logs()
                index = len(self.run.events)
        if 0 <= index < len(events) and events[index].get("type") == event.TYPE:
            recorded = events[index]
            event.ts = recorded["ts"] if "ts" in recorded else round(elapsed, 6)
            for key in _clock_fields(type(event)):
                if key in recorded:
                    setattr(event, key, recorded[key])
            if isinstance(event, BreakerRejected) and "reason" in recorded:
                event.reason = recorded["reason"]  # it says when the next probe is due
        else:
            event.ts = round(elapsed, 6)


class RecordedTools(LiveTools):
    """The recorded observations; internal tools run again (their events are the recording's)."""

    #: No shell or python runs: a replay needs no sandbox, and may be made where there is none.
    runs_tools = False

    def __init__(self, events: list[dict[str, Any]]):
        self.observations: dict[int, deque[dict[str, Any]]] = {}
        for e in events:
            if e.get("type") == "observation" and e.get("tool"):
                self.observations.setdefault(int(e.get("iteration") or 0), deque()).append(e)
        self.placed: list[str] = []
        for e in events:
            if e.get("type") != "note":
                continue
            if isinstance(e.get("files"), list):  # the scenario's note names its files
                self.placed = [str(f) for f in e["files"]]
                break
            m = SCENARIO_NOTE.match(str(e.get("text", "")))  # traces written before it did
            if m:
                self.placed = m.group(2).split(", ")
                break

    def place_files(self, run: RunView) -> list[str]:
        return list(self.placed)  # nothing is written: the note is repeated

    def __call__(self, run: RunView, iteration: int, act: Any, tool: Any) -> ToolResult:
        queue = self.observations.get(iteration)
        recorded = queue.popleft() if queue else None
        if tool is not None and getattr(tool, "internal", False):
            return super().__call__(run, iteration, act, tool)
        if recorded is None:
            return ToolResult(ok=False, error="the recording has no observation for this iteration")
        return ToolResult(output=recorded.get("output") or "", ok=bool(recorded.get("ok")),
                          error=recorded.get("error"), data=dict(recorded.get("data") or {}))


def _hit(record: dict[str, Any]) -> ScoredMemory:
    """A recorded result as the store gave it: the entity and its breakdown, final score included."""
    entity = MemoryEntity(str(record.get("id", "")), str(record.get("content", "")), list(record.get("tags") or []))
    score = float(record.get("score", 0.0) or 0.0)
    return ScoredMemory(entity, {**dict(record.get("breakdown") or {}), "final": score})


@dataclass
class _Search:
    hits: list[ScoredMemory]
    tags_calls: int


class RecordedStore:
    """The memory the recording saw.  Searches and adds are answered in recorded order."""

    def __init__(self, events: list[dict[str, Any]], diary_tag: str = "failures", clock: RecordedClock | None = None):
        self.clock = clock
        self.searches: deque[_Search] = deque()
        self.inserts: deque[list[Any]] = deque()
        self.batches: deque[tuple[list[Any], int]] = deque()  # (ids added, duplicates) a triage
        self.diary_tag = diary_tag
        tags_calls = 0
        for e in events:
            kind = e.get("type")
            if kind == "model_call" and e.get("purpose") == "tags":
                tags_calls += 1
            elif kind == "memory" and e.get("op") in ("search", "task_search", "failures", "recall"):
                self.searches.append(_Search([_hit(r) for r in e.get("results") or ()], tags_calls))
                tags_calls = 0
            elif kind == "reflection" and int(e.get("level", 0) or 0) >= 2:
                self.searches.append(_Search([_hit({"content": c}) for c in e.get("memory_used") or ()], tags_calls))
                tags_calls = 0
            elif kind == "memory" and e.get("op") == "insert":
                self.inserts.append(list(e.get("added") or []))
            elif kind == "memory" and e.get("op") == "triage":
                self.batches.append((list(e.get("added") or []), int(e.get("duplicates") or 0)))

    def search(self, query: str, k: int | None = 10, bytes_limit: int | None = None, tags: Any = None,
               llm: Any = None, iteration: int = 0, **_: Any) -> SearchResults:
        found = self.searches.popleft() if self.searches else None
        if llm is not None:
            from .memory.search import select_tags

            refusal = self.clock.refusal_next() if found is None and self.clock is not None else None
            if refusal is not None and refusal.get("operation") == "a model call":
                # A search the recording has no result for, and a limit reached next: its tag
                # selection was refused and it never ended.  Asking again is refused the same
                # way, and raises as it did.
                select_tags(llm, query, ["(recorded)"], iteration)
            for _call in range(found.tags_calls if found is not None else 0):  # replayed with its call
                select_tags(llm, query, ["(recorded)"], iteration)
        return SearchResults(found.hits if found is not None else [], query=query, bytes_limit=bytes_limit)

    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None) -> str | None:
        if any(str(t) == self.diary_tag for t in tags):
            return None  # a diary lesson: its id was never recorded
        ids = self.inserts.popleft() if self.inserts else []
        return ids[0] if ids else None

    def add_many(self, items: Iterable[Any], **_: Any) -> list[Any]:
        n = len(list(items))
        added, duplicates = self.batches.popleft() if self.batches else ([], 0)
        # One id or None an item, as a store answers: a count of duplicates beyond the batch (a
        # trace is a file from anywhere: 10**12) would be a list as long, made here.
        return [*added, *[None] * min(duplicates, n - len(added))]

    def tags(self) -> dict[str, int]:
        return {}

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __len__(self) -> int:
        return 0


class RecordedBackend(ReplayBackend):
    """Model calls answered from the recording; prices and windows are the models' own."""

    def __init__(self, events: list[dict[str, Any]], tiers: dict[str, str]):
        from .llm.backend import LiteLLMBackend

        calls = [e for e in events if e.get("type") == "model_call"]
        live: Any = LiteLLMBackend()
        prices: dict[str, tuple[float, float]] = {}
        windows: dict[str, int] = {}
        for model in {m for m in tiers.values() if m}:
            try:
                price_in, price_out = live.prices(model)
                prices[model] = float(price_in), float(price_out)
                window = live.context_window(model)
            except Exception:  # a model this machine knows nothing of: no prices, no window
                prices[model], window = (0.0, 0.0), None
            if window:
                windows[model] = int(window)
        measured = next((e.get("window") for e in events if e.get("type") == "context" and e.get("window")), None)
        if measured and tiers.get("primary") and tiers["primary"] not in windows:
            windows[tiers["primary"]] = int(measured)  # asked of the model's server, which a replay cannot ask
        # The replay backend itself, not one wrapped: a replayed step asks it several things.
        super().__init__(calls, prices=prices, windows=windows)


@dataclass
class Recording:
    """A trace, as the parts that answer for the world in a replay."""

    trace: dict[str, Any]

    def __post_init__(self) -> None:
        self._clock = RecordedClock(self.events)  # one clock: the store asks it where the run is

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self.trace.get("events") or [])

    def backend(self, tiers: dict[str, str]) -> RecordedBackend:
        return RecordedBackend(self.events, tiers)

    def tools(self) -> RecordedTools:
        return RecordedTools(self.events)

    def clock(self) -> RecordedClock:
        return self._clock

    def store(self) -> RecordedStore:
        return RecordedStore(self.events, clock=self._clock)

    def has(self, type_name: str) -> bool:
        return any(e.get("type") == type_name for e in self.events)


def divergence(recorded: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> str | None:
    """Where a replay's events part from the recording's, in one line, or None when they are equal.

    >>> print(divergence([{"type": "note", "text": "a"}], [{"type": "note", "text": "b"}]))
    event 0 (note) differs in text: recorded 'a', replayed 'b'
    """
    for index, (was, now) in enumerate(zip(recorded, replayed, strict=False)):
        if was == now:
            continue
        if was.get("type") != now.get("type"):
            return f"event {index} is {now.get('type')!r} where the recording has {was.get('type')!r}"
        keys = sorted(k for k in {*was, *now} if was.get(k) != now.get(k))
        first = keys[0]
        return (f"event {index} ({was.get('type')}) differs in {', '.join(keys)}: "
                f"recorded {str(was.get(first))[:80]!r}, replayed {str(now.get(first))[:80]!r}")
    if len(recorded) != len(replayed):
        shorter = "the replay ends" if len(replayed) < len(recorded) else "the recording ends"
        return f"{shorter} after {min(len(recorded), len(replayed))} events (recorded {len(recorded)}, replayed {len(replayed)})"
    return None
