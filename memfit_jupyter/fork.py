"""Time travel: fork a run at a step, change what happened there, and run on.

``child = run.fork(at=k, **changes)`` (or ``Agent.fork(trace, at=k, ...)``) is one ``Run`` whose parts
answer from the parent's recording until step ``k`` and are live from then on.  The switch is in
the parts, not in the loop: one composite per kind, told the step at which to hand over.

- ``ForkBackend``: recorded model replies before ``k`` (a scripted model keeps its place in its
  script), the live backend from ``k``; ``action=`` is step k's reply to its action call;
- ``ForkTools``: recorded observations before ``k``; live tools from ``k``, in a fresh working
  directory holding the parent's files at the start of step ``k`` (``workspace.py``);
  ``observation=`` is what step k's tool gives back (the tool does not run);
- ``ForkStore``: recorded memory before ``k``; from ``k`` an overlay of the parent's store
  (``memory/overlay.py``: the child's writes stay its own) unless ``memory="write-through"``;
  ``memory_hits=`` are what step k's searches find;
- ``ForkClock``: recorded times before ``k``, then the parent's time at the fork plus the child's.

At step ``k`` a ``Fork`` event says what changed (``ForkChanges``, the one hook of a fork): the
settings change there, ``guidance=`` / ``reflection=`` take the place of the reflection that step
k's prompt carries.  The child's trace names its parent (``trace["parent"]``) and
``Agent.replay(child_trace)`` reproduces it, its prefix included.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import numbers
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import events as ev
from .config import FORK_MEMORY_MODES as MEMORY_MODES
from .extension import Hooks, adapt
from .live import LiveTools
from .memory.entity import SearchResults
from .records import ToolResult
from .replay import (
    RECORDED_ORACLE,
    RecordedBackend,
    RecordedClock,
    RecordedStore,
    RecordedTools,
    _hit,
)
from .secrets import package_logger, redact, redact_obj
from .trace import fork_summary as fork_summary  # importable from here too, its former home

if TYPE_CHECKING:
    from .protocols import RunAgent
    from .run import Run

    #: What makes an agent from a trace's settings (``Agent.from_settings``).
    MakeAgent = Callable[[dict[str, Any]], RunAgent]

log = package_logger()

#: What a fork may change at its step.
STEP_CHANGES = ("guidance", "reflection", "action", "observation", "memory_hits")
#: Settings a fork may change from its step on (``reflection`` given as a level is one).
SETTING_CHANGES = ("model", "fast_model", "fallback_model", "max_iterations", "max_cost_usd",
                   "max_duration_seconds", "max_recursive_calls", "reflection", "spin_threshold",
                   "max_consecutive_spin_warnings", "strategy", "samples", "max_trials", "api_base", "oracle",
                   "approve_tools", "sandbox")
#: The settings of the tool policy (``tool_policy.ToolPolicy``): which calls wait for a person, where shell runs.
POLICY = ("approve_tools", "sandbox")
LIMITS = ("max_cost_usd", "max_duration_seconds", "max_recursive_calls")
TIERS = ("model", "fast_model", "fallback_model")


class ForkError(ValueError):
    """A fork that cannot be made: one line that says why (nothing was made).  Redacted: it
    quotes what was typed or read (a model name, a path, an event), which may hold a key."""

    def __init__(self, message: str):
        super().__init__(redact(message))


# --- the parts that hand over at step k ------------------------------------------------------------


def _prefix(run: Any, at: int) -> bool:
    """Whether ``run`` is still in the recorded steps (before ``at``)."""
    return run is None or run.iteration < at


class ForkClock:
    """The recording's times before the fork step; then its time at the fork plus the child's own."""

    def __init__(self, recorded: RecordedClock, at: int):
        self.recorded = recorded
        self.at = at
        self.run: Any = None
        self.base = float(recorded.events[-1].get("ts", 0.0) or 0.0) if recorded.events else 0.0
        #: The parent's running time to the fork, as the time its recorded calls and tools took:
        #: event times count from the run's creation, pauses and the model client's first load
        #: included, which the parent's own duration and time limit never counted.
        #: (A sample's call runs inside its tool's observation time: not counted twice.)
        self.base_running = sum(float(e.get("latency_s") or 0.0) if e.get("type") == "model_call"
                                and e.get("purpose") != "sample"
                                else float(e.get("duration_s") or 0.0) if e.get("type") == "observation" else 0.0
                                for e in recorded.events)
        self._from: float | None = None  # the child's elapsed seconds at the hand-over
        self._from_mono: float | None = None
        self._from_running: float | None = None

    def _live(self) -> bool:
        return not _prefix(self.run, self.at)

    @property
    def events(self) -> list[dict[str, Any]] | None:
        """The recorded events while the prefix replays (so the approval gate follows the
        recording there, as in a replay), None once the child is live."""
        return None if self._live() else self.recorded.events

    def stamp(self, event: ev.Event, index: int, elapsed: float) -> None:
        run = self.run
        if run is None or run.iteration < self.at:  # _prefix, inline: every event is stamped
            self.recorded.stamp(event, index, elapsed)
            return
        if self._from is None:
            self._from, self._from_mono = elapsed, time.monotonic()
        event.ts = round(self.base + elapsed - self._from, 6)

    def now(self) -> float:
        if not self._live():
            return self.recorded.now()
        return self.base + (time.monotonic() - self._from_mono if self._from_mono is not None else 0.0)

    def refusal_next(self) -> dict[str, Any] | None:
        return self.recorded.refusal_next() if not self._live() else None

    def resume_next(self, run: Any) -> bool:
        """In the prefix, as the recording went on after an end (an override, more trials)."""
        return False if self._live() else self.recorded.resume_next(run)

    def cancelled_next(self) -> dict[str, Any] | None:
        return None  # a prefix ends before the step the parent was stopped at

    def budget_time(self, running: float) -> float:
        run = self.run
        if run is None or run.iteration < self.at:  # _prefix, inline: asked at every check of the budget
            return self.recorded.budget_time(running)
        if self._from_running is None:
            self._from_running = running
        return self.base_running + running - self._from_running


class ForkBackend:
    """Model calls: the recording's replies before the fork step, the live backend's from it."""

    def __init__(self, recorded: Any, live: Any, at: int, action: dict[str, Any] | None = None):
        self.recorded = recorded
        self.live = live
        self.at = at
        self.action = action
        self.run: Any = None
        #: Calls that reached the live backend (the first one is where the fork went live).
        self.live_calls = 0
        self._advance: Any = None  # the live backend's ``advance``, looked up once (False: it has none)

    def _part(self) -> Any:
        return self.recorded if _prefix(self.run, self.at) else self.live

    def complete(self, model: str, messages: list[dict[str, Any]], *, max_tokens: int | None,
                 timeout: float | None, metadata: dict[str, Any], request: dict[str, Any] | None = None,
                 on_delta: Any = None) -> Any:
        run = self.run
        if run is None or run.iteration < self.at:  # _prefix
            advance = self._advance
            if advance is None:
                advance = self._advance = getattr(self.live, "advance", False)
            if advance:  # a scripted model keeps its place in its script
                advance(model, messages, metadata)
            return self.recorded.complete(model, messages, max_tokens=max_tokens, timeout=timeout,
                                          metadata=metadata, request=request, on_delta=on_delta)
        optional: dict[str, Any] = {"request": request} if request else {}
        if on_delta is not None:
            optional["on_delta"] = on_delta
        if self.action is not None and metadata.get("memfit_purpose") == "action":
            from .llm.backend import Completion

            action, self.action = self.action, None  # step k's action: the replacement, at no cost
            return Completion(text=json.dumps(action), prompt_tokens=0, completion_tokens=0, cost_usd=0.0,
                              finish_reason="stop")
        self.live_calls += 1
        return self.live.complete(model, messages, max_tokens=max_tokens, timeout=timeout, metadata=metadata,
                                  **optional)

    def instant(self, model: str) -> bool:
        """Before the fork step the replies are the recording's, given at once."""
        return _prefix(self.run, self.at)

    def can_stream(self, model: str) -> bool:
        can = getattr(self._part(), "can_stream", None)
        return bool(can(model)) if can is not None else False

    def structured_mode(self, model: str, requested: str) -> str:
        chooser = getattr(self._part(), "structured_mode", None)
        return str(chooser(model, requested)) if chooser is not None else (
            "text" if requested == "auto" else requested)

    def default_timeout(self, model: str, purpose: str | None = None) -> float | None:
        own = getattr(self._part(), "default_timeout", None)
        return own(model, purpose) if own is not None else None

    def prices(self, model: str) -> tuple[float, float]:
        price_in, price_out = self._part().prices(model)
        return float(price_in), float(price_out)

    def context_window(self, model: str) -> int | None:
        window = self._part().context_window(model)
        return int(window) if window else None

    def forget(self, run_key: str) -> None:
        self.live.forget(run_key)


class ForkTools:
    """Tools: the recorded observations before the fork step, the live tools (in the child's
    folder) from it; ``observation`` stands for what step k's tool gives back."""

    #: The live part's shell and python run, in the parent's sandbox.
    runs_tools = True

    def __init__(self, recorded: RecordedTools, live: Any, at: int, observation: str | None = None):
        self.recorded = recorded
        self.live = live
        self.at = at
        self.observation = observation
        #: Tools run for real (the live part's calls, internal tools aside).
        self.executed = 0

    def place_files(self, run: Any) -> list[str]:
        return self.recorded.place_files(run)  # the files come from the restored folder

    def __call__(self, run: Any, iteration: int, act: Any, tool: Any) -> ToolResult:
        if iteration < self.at:
            return self.recorded(run, iteration, act, tool)
        internal = tool is not None and getattr(tool, "internal", False)
        if self.observation is not None and iteration == self.at and not internal:
            text, self.observation = self.observation, None
            return ToolResult(output=text)
        if not internal:
            self.executed += 1
        result: ToolResult = self.live(run, iteration, act, tool)
        return result


class ForkStore:
    """Memory: the recorded searches and adds before the fork step, the live store from it;
    ``hits`` are what the searches of step k find."""

    def __init__(self, recorded: RecordedStore, live: Any, at: int, hits: list[Any] | None = None):
        self.recorded = recorded
        self.live = live
        self.at = at
        self.hits = [_hit(h) for h in hits] if hits is not None else None
        self.run: Any = None

    def _part(self) -> Any:
        return self.recorded if _prefix(self.run, self.at) or self.live is None else self.live

    def where(self) -> dict[str, Any] | None:
        """Where the live store is (the trace records it: a fork of the saved child reads it)."""
        from .memory.where import where_of

        return where_of(self.live)

    def search(self, query: str, k: int | None = 10, bytes_limit: int | None = None, tags: Any = None, *,
               llm: Any = None, iteration: int = 0, **options: Any) -> SearchResults:
        if _prefix(self.run, self.at):
            return self.recorded.search(query, k, bytes_limit, tags, llm=llm, iteration=iteration)
        if self.hits is not None and self.run.iteration == self.at:
            return SearchResults(list(self.hits), query=query, bytes_limit=bytes_limit)
        if self.live is None:
            return SearchResults([], query=query, bytes_limit=bytes_limit)
        found: SearchResults = self.live.search(query, k=k, bytes_limit=bytes_limit, tags=tags, llm=llm,
                                                iteration=iteration, **options)
        return found

    def add(self, content: str, tags: Iterable[str] = (), questions: Iterable[str] = (),
            scores: Any = None) -> str | None:
        added: str | None = self._part().add(content, tags=tags, questions=questions,
                                             **({"scores": scores} if scores else {}))
        return added

    def add_many(self, items: Iterable[Any], **options: Any) -> list[Any]:
        added: list[Any] = self._part().add_many(items, **options)
        return added

    def flush(self) -> None:
        if self.live is not None:
            self.live.flush()

    def __getattr__(self, name: str) -> Any:  # get, list, tags, failures, delete, close, ...: the live store's
        if name.startswith("_") or name in ("recorded", "live", "at", "hits", "run"):
            raise AttributeError(name)
        return getattr(self._part(), name)

    def __len__(self) -> int:
        return len(self._part())


# --- the changes at step k ----------------------------------------------------------------------


def guidance_text(changes: dict[str, Any]) -> str | None:
    """What step k's prompt carries where a reflection's guidance goes: ``guidance`` as it is, or
    a replacement ``reflection`` written as the reflection pipeline writes one."""
    if isinstance(changes.get("guidance"), str):
        return str(changes["guidance"])
    replacement = changes.get("reflection")
    if not isinstance(replacement, dict):
        return None
    from .reflection.prompts import reflection_timeline_text
    from .reflection.records import ActionReflection

    reflection = ActionReflection(action_type=str(replacement.get("action_type", "step")), action_params={},
                                  execution_time=0.0, iteration_num=0,
                                  success=bool(replacement.get("success", True)),
                                  summary=str(replacement.get("summary", "")),
                                  suggestions=[str(s) for s in replacement.get("suggestions") or ()])
    return reflection_timeline_text(reflection)


def settings_of(changes: dict[str, Any]) -> dict[str, Any]:
    """The settings among ``changes`` (``reflection`` given as a level, not as a replacement)."""
    return {k: v for k, v in changes.items() if k in SETTING_CHANGES and not (k == "reflection" and isinstance(v, dict))}


def switch_settings(run: Run, settings: dict[str, Any]) -> None:
    """Apply setting changes to a run at its fork step: what reads them from then on sees them."""
    if not settings:
        return
    agent = run.agent
    for name in TIERS:
        if name in settings:
            setattr(agent, name, settings[name] or (agent.model if name == "model" else None))
    if any(name in settings for name in TIERS):
        run.llm.tiers = {k: v for k, v in agent.tiers.items() if v}
    if "max_iterations" in settings:
        agent.max_iterations = int(settings["max_iterations"])
    limits = {k: settings[k] for k in LIMITS if k in settings}
    if limits:
        guarantees = dataclasses.replace(run.budget.guarantees, **limits)
        run.budget.guarantees = guarantees
        agent.guarantees = guarantees
    for name in ("strategy", "samples", "api_base", "oracle", *POLICY):
        if name in settings:
            setattr(agent, name, settings[name])
    if "sandbox" in settings and run.tool_runner.runs_tools:  # checked in fork(); a replay's tools are its recording
        from .tool_policy import sandbox_of

        run.tool_context.sandbox = sandbox_of(agent)
    if "max_trials" in settings:
        agent.max_trials = int(settings["max_trials"])
        diary = getattr(run.context, "diary", None)
        if diary is not None:
            diary.max_trials = agent.max_trials
    _switch_reflection(run, settings)


def _switch_reflection(run: Run, settings: dict[str, Any]) -> None:
    from .records import ReflectionLevel
    from .reflection import ReflectionExtension
    from .reflection.config import ReflectionConfig

    keys = {k: settings[k] for k in ("reflection", "spin_threshold", "max_consecutive_spin_warnings")
            if k in settings and not isinstance(settings[k], dict)}
    if not keys:
        return
    agent = run.agent
    for name, value in keys.items():
        setattr(agent, name, value if name != "reflection" or value == "auto" else ReflectionLevel.parse(value))
    if "reflection" in keys:
        keys["reflection"] = str(keys["reflection"]).lower() if not isinstance(keys["reflection"], ReflectionLevel) \
            else keys["reflection"].name.lower()
    config = dataclasses.replace(agent.config(ReflectionConfig), **keys)  # the agent's own: set above
    found = [e for e in run.extensions if isinstance(e, ReflectionExtension)]
    if config.forced == ReflectionLevel.NONE:
        run.extensions = [e for e in run.extensions if not isinstance(e, ReflectionExtension)]
    elif found:
        for ext in found:
            ext.config = ext.reflector.config = ext.spin.config = config
    else:
        run.extensions = [*run.extensions, adapt(ReflectionExtension(config))]


class ForkChanges(Hooks):
    """A fork's one hook: at its step, the ``Fork`` event, the settings, the edited guidance.

    The same in a live fork and in a replay of its trace, so both have the same events.
    """

    #: Not a feature of the run: left out of ``run_start``'s extensions (the parent's are listed).
    untraced = True

    def __init__(self, record: dict[str, Any]):
        self.record = record
        self.at = int(record["at"])
        self._done = False

    def before_iteration(self, run: Any) -> None:
        if self._done or run.iteration != self.at:
            return
        self._done = True
        record = self.record
        changes = dict(record.get("changes") or {})
        run.emit(ev.Fork(parent=str(record.get("run", "")), at=self.at, changes=changes,
                         workspace=dict(record.get("workspace") or {}), memory=str(record.get("memory", ""))))
        switch_settings(run, settings_of(changes))
        text = guidance_text(changes)
        if text is not None:
            before = self.at - 1  # the reflection step k's prompt carries is step k-1's
            run.timeline.replace_entries([e for e in run.timeline.entries
                                          if not (e.kind == "reflection" and e.iteration == before)])
            run.emit(ev.Guidance(kind="reflection", iteration=before, text=text))


# --- checking what is asked --------------------------------------------------------------------


def _parent_of(parent: Any) -> tuple[Run | None, dict[str, Any]]:
    from .run import Run

    if isinstance(parent, Run):
        if parent._clock._since is not None:
            raise ForkError(f"run {parent.id} is executing a step: fork it when the step is over")
        if parent.status == "pending":
            raise ForkError(f"run {parent.id} has not started: there is no step to fork at yet")
        return parent, _recording_of(parent)
    if isinstance(parent, str | Path | dict):
        return None, saved_trace(parent)
    raise ForkError(f"fork takes a Run, a trace dict or a trace file, got {type(parent).__name__}")


def saved_trace(given: dict[str, Any] | str | Path) -> dict[str, Any]:
    """A saved trace (a dict, a file, or a saved output holding one) as a fork and blame read it:
    through the one reader of traces (``Trace.load``: its shape, its nesting, its version and
    every event against its schema; a trace is a file from anywhere), as a copy the fork may
    change.  What it refuses is one line of ``ForkError``."""
    from .trace import Trace, TraceError

    try:
        data = Trace.load(given if isinstance(given, dict) else Path(given)).data
    except TraceError as exc:
        raise ForkError(str(exc)) from None
    copied: dict[str, Any] = json.loads(json.dumps(data)) if isinstance(given, dict) else data
    return copied


def _recording_of(run: Run) -> dict[str, Any]:
    """What a fork reads of a run in hand: its trace's events and the header fields it needs, as
    ``trace_of`` writes them (redacted), without the totals and the family it does not read, and
    without the header's settings: a run in hand has begun, and the child starts from its
    ``run_start``'s (``start_settings``).

    Not a copy: the events are new dicts (``Event.to_dict``) over the values the parent's events
    own, which nothing changes once they are emitted, and a fork only reads them (its own events
    are made, and redacted, by its loop).  The settings the child's agent is made from are copied
    in ``fork``."""
    header = {"run_id": run.id, "task": run.task, "workdir": run.prompt_workdir}
    return {**redact_obj(header), "events": [e.to_dict() for e in run.events]}


def check_replayable(trace: Any) -> int:
    """Refuse a trace a fork cannot replay (one line of ``ForkError``); return its last step."""
    if not isinstance(trace, dict) or not isinstance(trace.get("events"), list) or "task" not in trace:
        raise ForkError("not a memfit trace: a dict with 'task' and 'events' is expected")
    source: dict[str, Any] = trace["source"] if isinstance(trace.get("source"), dict) else {}
    imported = source.get("format") or (trace.get("settings") or {}).get("imported")
    last, started = 0, False
    acted: set[int] = set()
    observed: set[int] = set()
    for n, e in enumerate(trace["events"]):  # what the rest reads of every event, checked once here
        if not isinstance(e, dict) or not isinstance(e.get("type"), str) or not _is_step(e.get("iteration")):
            raise ForkError(f"event {n} of the trace is not a memfit event (a dict with a type and an "
                            f"iteration number): {str(e)[:80]}")
        step = e["iteration"]
        if step is not None and not imported and not last <= step <= last + 1:
            # A run's steps come one after another: a trace that jumps (to step 10**15) or goes
            # back is not a run's recording, and the steps between are what a fork replays.
            raise ForkError(f"event {n} of the trace is at step {step} after step {last}: "
                            "a run's recording goes through its steps in order, one at a time")
        if step:
            last = int(step)
        kind = e["type"]
        if kind in ("action", "observation") and e.get("tool"):
            (acted if kind == "action" else observed).add(step)
        started = started or kind == "run_start"
    # Every step's tool output is recorded, the last one's aside (its call waits for the person's
    # approval, or the person stopped the run there).
    if imported or acted - observed - {last}:
        origin = f"was imported from {imported}" if imported else "has no recorded tool outputs"
        raise ForkError(f"this trace {origin}: its prefix cannot be replayed with tools; "
                        "analyze(trace, **settings) takes changed settings instead")
    if not started:
        raise ForkError("this trace has no run_start event: it is not a memfit run's recording")
    return last


def _is_step(value: Any) -> bool:
    # int first: asked of every event, and an ABC's isinstance is slow
    return type(value) is int or value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool))


def _unredact(settings: dict[str, Any], agent: Any) -> None:
    """The recorded settings are redacted (a password in ``api_base``'s URL): a parent in hand
    still has the values, and its child calls the same server with them."""
    for name in ("api_base",):
        own = getattr(agent, name, None)
        if own is not None and settings.get(name) != own and settings.get(name) == redact_obj(own):
            settings[name] = own


def _check_memory(memory: Any) -> Any:
    """``memory`` as a fork takes it: a mode, a store, a PostgreSQL URL, or the folder of a store
    that exists (a mode mistyped would otherwise open a new, empty store to overlay)."""
    from .memory.postgres import is_url

    if memory in MEMORY_MODES or is_url(memory) or callable(getattr(memory, "search", None)):
        return memory
    if isinstance(memory, str | Path):
        from .memory.db import DB_NAME

        folder = Path(memory).expanduser().resolve()
        if folder.is_dir() and (folder / DB_NAME).is_file():
            return folder
        if folder.is_dir():  # opening it would make an empty store there, to overlay nothing
            raise ForkError(f"memory: {str(memory)!r} holds no memory store (no {DB_NAME}); give the folder "
                            "of a store that exists")
        raise ForkError(f"memory must be one of {', '.join(MEMORY_MODES)}, a store or a store's folder; "
                        f"{str(memory)!r} is no folder")
    raise ForkError(f"memory must be one of {', '.join(MEMORY_MODES)} or a store, got {memory!r}")


def last_step(trace: dict[str, Any]) -> int:
    """The last iteration the run began."""
    return max((int(e.get("iteration") or 0) for e in trace["events"]), default=0)


def _check_step(at: Any, last: int) -> int:
    # Any integer: a step read from a DataFrame or an array is numpy's (a bool is not a step).
    if isinstance(at, bool) or not isinstance(at, numbers.Integral):
        raise ForkError(f"at must be a step number (an int), got {type(at).__name__}")
    step = int(at)
    if not 1 <= step <= last:
        raise ForkError(f"step {step} is outside the run: it has steps 1..{last}" if last else
                        f"step {step} is outside the run: it took no step")
    return step


def _known() -> str:
    return (f"step changes: {', '.join(STEP_CHANGES)}; settings: {', '.join(SETTING_CHANGES)}; "
            "options: memory, workdir, exact")


def _check_changes(changes: dict[str, Any], tools: list[str]) -> dict[str, Any]:
    unknown = sorted(set(changes) - set(STEP_CHANGES) - set(SETTING_CHANGES))
    if unknown:
        raise ForkError(f"unknown change(s) {', '.join(unknown)}; known: {_known()}")
    out: dict[str, Any] = {}
    for name, value in changes.items():
        if name in ("guidance", "observation"):
            if not isinstance(value, str) or not value.strip():
                raise ForkError(f"{name} must be text, got {type(value).__name__}")
        elif name == "reflection" and isinstance(value, dict):
            extra = sorted(set(value) - {"level", "summary", "suggestions", "success"})
            if extra:
                raise ForkError(f"reflection= takes level, summary, suggestions; got {', '.join(extra)}")
            if not isinstance(value.get("summary", ""), str) or not isinstance(value.get("suggestions", []), list):
                raise ForkError("reflection= needs summary as text and suggestions as a list of text")
        elif name == "action":
            value = _check_action(value, tools)
        elif name == "memory_hits":
            if not isinstance(value, list | tuple) or not all(isinstance(h, str | dict) for h in value):
                raise ForkError("memory_hits must be a list of texts or of {content, score, tags} dicts")
            value = [{"content": h} if isinstance(h, str) else dict(h) for h in value]
            if any(not isinstance(h.get("content"), str) for h in value):
                raise ForkError("each memory hit needs its content as text")
        if "guidance" in changes and isinstance(changes.get("reflection"), dict):
            raise ForkError("give guidance= or a replacement reflection=, not both: both go where step k's "
                            "reflection goes")
        out[name] = value
    if not out:
        return out  # no change: nothing to copy
    try:
        return dict(json.loads(json.dumps(out)))
    except (TypeError, ValueError) as exc:
        raise ForkError(f"changes must be plain data (they go into the trace): {exc}") from None


def _check_action(value: Any, tools: list[str]) -> dict[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("tool"), str):
        raise ForkError('action must be {"tool": NAME, "params": {...}}')
    extra = sorted(set(value) - {"tool", "params", "thought", "action_type"})
    if extra:
        raise ForkError(f"action takes tool, params, thought, action_type; got {', '.join(extra)}")
    if not isinstance(value.get("params", {}), dict):
        raise ForkError(f"action params must be a dict, got {type(value['params']).__name__}")
    if tools and value["tool"] not in tools:
        raise ForkError(f"unknown tool {value['tool']!r}; the run's tools: {', '.join(tools)}")
    return {"thought": str(value.get("thought", "the action given at the fork")),
            "action_type": str(value.get("action_type", value["tool"])), "tool": value["tool"],
            "params": dict(value.get("params", {}))}


def start_settings(trace: dict[str, Any]) -> dict[str, Any]:
    """The settings the run started with (its run_start's: a fork's top-level settings are the
    ones it switched to at its step)."""
    from .config import check_recorded

    found = next((e["settings"] for e in trace["events"] if e.get("type") == "run_start"
                  and isinstance(e.get("settings"), dict)), None)
    settings = dict(found if found is not None else trace.get("settings") or {})
    try:
        check_recorded(settings)
    except ValueError as exc:
        raise ForkError(str(exc)) from None
    return settings


def replay_setup(trace: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """For ``Agent.replay`` of a fork's trace: the settings to build its agent with (its parent's,
    plus the fork's hook, which changes them at the step) and the models it switched to."""
    record = trace["parent"]
    chain = fork_records(trace["events"], int(record["at"]))  # its ancestors', made again at their steps
    chain.append(record)
    settings = start_settings(trace)
    settings["extensions"] = [ForkChanges(r) for r in chain]
    return settings, switched_models(chain)


def fork_records(events: list[dict[str, Any]], before: int) -> list[dict[str, Any]]:
    """The records of the forks a trace's ``fork`` events name at steps before ``before``: a fork
    of a fork, or its replay, makes each ancestor's changes again at its step (its settings, its
    guidance), as the ancestor did; what the ancestors' step changes gave (an action, an
    observation, memory hits) is in the recording already."""
    return [{"run": str(e.get("parent", "")), "at": int(e["at"]), "changes": dict(e.get("changes") or {}),
             "workspace": dict(e.get("workspace") or {}), "memory": str(e.get("memory", ""))}
            for e in events if e.get("type") == "fork" and _is_step(e.get("at")) and int(e["at"]) < before]


def switched_models(chain: list[dict[str, Any]]) -> dict[str, str]:
    """The models the forks of ``chain`` switched to, by a name of their own (for their prices and windows)."""
    return {f"fork{i}_{name}": str(model) for i, r in enumerate(chain)
            for name, model in settings_of(dict(r.get("changes") or {})).items() if name in TIERS and model}


# --- the fork ----------------------------------------------------------------------------------


def fork(parent: Any, at: int, *, agents: MakeAgent, memory: Any = "overlay",
         workdir: str | Path | None = None, exact: bool = False, backend: Any = None, tools: Any = None,
         **changes: Any) -> Run:
    """A new run: ``parent``'s steps before ``at`` from its recording, then live with ``changes``.

    ``parent``: a finished (or paused) ``Run``, a trace dict, or a trace file.  ``at``: the first
    step that runs live (1 .. the parent's last step).  Changes at step ``at``: ``guidance="..."``
    (in place of the reflection its prompt carries), ``reflection={"summary", "suggestions"}`` (a
    replacement), ``action={"tool", "params"}`` (instead of the model's; the tool runs),
    ``observation="..."`` (what the tool gives back; it does not run), ``memory_hits=[...]``
    (what its searches find); settings from then on: ``model=``, ``fast_model=``,
    ``fallback_model=``, ``reflection="deep"``, ``spin_threshold=``, ``strategy=``, ``samples=``,
    ``max_iterations=``, ``max_cost_usd=``, ``max_duration_seconds=``, ``max_recursive_calls=``,
    ``max_trials=``, ``api_base=``, ``oracle=``, ``approve_tools=``, ``sandbox=``.  A saved trace's
    server and oracle command are used only when this process has used them, its tool policy only
    where it asks about every call the default does, its folder read only inside the working
    directory or where a run of this process worked (a trace is a file from anywhere).

    ``memory``: "overlay" (the parent's store is read, never written), "write-through", or a
    store to overlay.  ``workdir``: the child's folder (an empty or new one; default: a new
    temporary folder), restored to the parent's files at step ``at``; ``exact=True`` refuses a
    fork whose files cannot be exactly the parent's.  ``backend`` / ``tools``: the live part's
    (default: the world's).  ``agents`` makes an agent from settings (``Agent.from_settings``: the
    public doors are ``run.fork`` and ``Agent.fork``, which pass it).  The child is not started:
    call ``run()`` or ``step()``.
    """
    from .workspace import remove

    parent_run, trace = _parent_of(parent)
    at = _check_step(at, check_replayable(trace))
    first = next(e for e in trace["events"] if e.get("type") == "run_start")
    changes = _check_changes(changes, list(first.get("tools") or []))
    memory = _check_memory(memory)
    settings = json.loads(json.dumps(start_settings(trace)))  # the child's own: it may change them
    if parent_run is not None:
        _unredact(settings, parent_run.agent)
    had_memory = bool(settings.pop("memory", False))
    if "memory_hits" in changes and not had_memory:
        raise ForkError("memory_hits= needs a run with memory; this one ran with memory off")
    if memory != "overlay" and not had_memory:  # it would be taken and not used
        shown = str(memory) if isinstance(memory, str | Path) else type(memory).__name__
        raise ForkError(f"memory={shown!r} needs a run with memory; this one ran with memory off")
    oracle = changes["oracle"] if "oracle" in changes else _oracle_of(parent_run, trace)
    if oracle is not None:
        settings["oracle"] = oracle
    ancestors = _ancestry(parent_run, trace, at, "oracle" in changes)
    inherited: dict[str, Any] = {}
    for r in ancestors:
        inherited.update(settings_of(r["changes"]))
    switched = settings_of(changes)
    live_settings = {**settings, **inherited, **switched, "memory": False}
    if backend is None and "api_base" not in switched and not _in_hand(parent_run):  # the world's models
        _check_servers(live_settings.get("api_base"))
    if not _in_hand(parent_run):  # the trace's tool policy, as strict as the person's default or stricter
        guarded = _guarded_policy(live_settings, changes, trace)
        for given in (changes, switched, live_settings):
            given.update(guarded)
    _note_given(changes)  # the person's say: the server and command they named are theirs from now on
    if isinstance(live_settings.get("reflection"), str):
        live_settings["reflection"] = live_settings["reflection"].lower()
    live_agent: RunAgent | None = None  # without a change of settings, the child's own agent
    if inherited or switched:
        try:  # the settings from step k on, checked before anything is made
            live_agent = agents(live_settings)
        except Exception as exc:
            raise ForkError(f"a setting of the fork is not valid: {exc}") from None
    if switched.get("sandbox") == "bwrap":  # made at the step: one this machine cannot make is refused now
        from .sandbox import SandboxUnavailableError, sandbox_for

        try:
            sandbox_for("bwrap")
        except SandboxUnavailableError as exc:
            raise ForkError(str(exc)) from None
    if backend is None:  # the world's models: one no provider serves is refused now, as %%memfit_task does
        _check_models([str(changes[name]) for name in TIERS if changes.get(name)])

    parent_workdir = _parent_folder(parent_run, trace) if parent_run is not None else _trace_folder(trace)
    root, folder = _folders(workdir, _ancestor_folders(parent_run, trace, parent_workdir),
                            str(trace.get("run_id", "run")))
    try:
        child = _make(trace, parent_run, at, changes, settings, had_memory, memory, folder, root,
                      parent_workdir, agents, live_agent, backend, tools, exact, ancestors)
    except BaseException:
        remove(root if workdir is None else folder)
        raise
    # Its settings are the person's only when its parent's were: it starts from its parent's
    # recorded settings, and a fork of it at an earlier step runs live with them (what was
    # checked above are the settings from its own step on).
    child.own_settings = _in_hand(parent_run)  # type: ignore[attr-defined]
    if parent_run is not None:
        parent_run.forks.append(child)
    restored = child.parent["workspace"] if child.parent else {}
    if not restored.get("exact", True):
        log.warning("fork of %s at step %d is not exact: %s", trace.get("run_id"), at,
                    "; ".join(restored.get("problems") or ())[:500])
    return child


def _in_hand(run: Run | None) -> bool:
    """Whether ``run``'s settings (its model servers, its tool policy) are this process's own: a
    run in hand, not a replay (whose settings, like a saved trace's, come from a file), nor a
    fork of one (it starts from the file's settings; its own step's were checked, not those)."""
    return run is not None and not isinstance(run.tool_runner, RecordedTools) and getattr(run, "own_settings", True)


#: The saved traces whose tool policy a fork has said it does not keep (run id, policy): said once.
_POLICY_SAID: set[tuple[str, str]] = set()


def _guarded_policy(settings: dict[str, Any], changes: dict[str, Any], trace: dict[str, Any]) -> dict[str, Any]:
    """The tool policy a fork of a saved trace (or of a replay) runs live under, when the trace's
    would ask a person about fewer calls than the default does: the default's, as a change at the
    fork's step, said in one warning.  A trace is a file from anywhere, and its recorded steps
    are in the live model's prompts: ``approve_tools='never'`` there would have that model's shell
    calls run unasked on the person's machine.  Given by the person (``approve_tools=``), kept."""
    from .tool_policy import ToolPolicy, any_real

    if "approve_tools" in changes:
        return {}
    try:
        theirs = ToolPolicy(**{k: settings[k] for k in POLICY if settings.get(k) is not None})
    except ValueError as exc:
        raise ForkError(f"the run's recorded settings are not valid: {exc}") from None
    default = ToolPolicy()
    unasked = theirs.lets_through(default, real_model=any_real(settings.get(name) for name in TIERS))
    if not unasked:
        return {}
    said = (str(trace.get("run_id")), theirs.approve_tools)
    if said not in _POLICY_SAID:  # once per trace: blame makes many forks of it
        _POLICY_SAID.add(said)
        log.warning("the trace of %s runs %s without asking (approve_tools=%r); its forks ask as approve_tools=%r "
                    "does from their step: give approve_tools=%r (--approve-tools) to run as it did",
                    trace.get("run_id"), " and ".join(unasked), theirs.approve_tools, default.approve_tools,
                    theirs.approve_tools)
    return {"approve_tools": default.approve_tools}


def _note_given(changes: dict[str, Any]) -> None:
    """Note the server and the oracle command the person gave the fork (``known.py``): a fork of
    the child's saved trace may use them again."""
    from .known import note_command, note_server, servers_of

    for url in servers_of(changes.get("api_base")):
        note_server(url)
    note_command(changes.get("oracle"))


def check_sources(parent: Any, trace: dict[str, Any], changes: dict[str, Any]) -> None:
    """Before forks of ``parent`` (a run, or None for a saved trace) with ``changes`` are made
    at any step: ForkError (one line) when they would take a model server or an oracle command
    from a saved trace this process has not used (``known.py``)."""
    from .run import Run

    run = parent if isinstance(parent, Run) else None
    if "oracle" not in changes:
        _oracle_of(run, trace)
        _ancestry(run, trace, last_step(trace) + 1)  # an oracle a fork of the trace's set: known, or refused
    if "api_base" not in changes and not _in_hand(run):
        _check_servers(start_settings(trace).get("api_base"))
        for record in fork_records(trace["events"], last_step(trace) + 1):
            _check_servers(settings_of(record["changes"]).get("api_base"))


def _check_servers(api_base: Any) -> None:
    """A model server a saved trace names, refused unless this process has called it already
    (``known.py``): a trace is a file from anywhere, and its server would get the person's keys
    and prompts, and choose the tools that run."""
    from .known import server_known, servers_of

    unknown = next((url for url in servers_of(api_base) if not server_known(url)), None)
    if unknown is not None:
        raise ForkError(f"the trace sends its model calls to {unknown} (api_base), a server this process has not "
                        "called: a fork does not send your keys and prompts to a server a saved trace names; "
                        f"give it again to use it, api_base={unknown!r} (--api-base), or api_base=None for the "
                        "model's own provider")


def _oracle_of(parent_run: Run | None, trace: dict[str, Any]) -> Any:
    """The failure diary's oracle the child runs from its step: its parent's in hand, else the
    command its trace names, if this process has run that command itself (``known.py``: a trace
    is a file from anywhere).  A saved run's Python oracle, or one its trace does not name (an
    older trace), cannot be run: one line says to give ``oracle=``."""
    if parent_run is not None and parent_run.agent.oracle != RECORDED_ORACLE:
        return parent_run.agent.oracle
    recorded = trace.get("oracle")
    if isinstance(recorded, dict) and isinstance(recorded.get("command"), str) and recorded["command"]:
        _check_command(recorded["command"], "the run's oracle is")
        return recorded["command"]
    if isinstance(recorded, dict) and recorded.get("callable"):
        raise ForkError(f"the run's oracle was the Python function {recorded['callable']}, which a saved trace "
                        "cannot hold: give it again, oracle=...")
    if recorded or any(e.get("type") == "trial" for e in trace["events"]):
        raise ForkError("the trace does not say what the run's oracle was (it was saved before traces named "
                        "it): give it, oracle=...")
    return None


def _check_command(command: Any, what: str) -> None:
    """An oracle command a saved trace names, refused unless this process has run it (``known.py``)."""
    from .known import command_known

    if isinstance(command, str) and command and not command_known(command):
        raise ForkError(f"{what} the command {command!r}, which this process has not run: a fork does not run a "
                        f"command a saved trace names by itself; give it again to run it, oracle={command!r} (--oracle)")


def _check_models(models: list[str]) -> None:
    from .errors import UnknownModelError
    from .llm.backend import check_model

    for model in models:
        try:
            check_model(model)
        except UnknownModelError as exc:
            raise ForkError(str(exc)) from None


def _ancestry(parent_run: Run | None, trace: dict[str, Any], at: int, oracle_given: bool = False) -> list[dict[str, Any]]:
    """The forks the run forked is made of at steps before ``at`` (its own fork, its parent's...),
    oldest first: a fork at ``at`` makes their changes again at their steps.  A fork at an
    ancestor's own step replaces what that ancestor changed there.  For a run in hand, each
    record as the process holds it (the trace's is redacted: a key in a change stays usable).
    An oracle command a record of the trace's (not a run's in hand) set is refused unless this
    process has run it, or the person gives the fork its oracle (``oracle_given``)."""
    held: dict[int, dict[str, Any]] = {}
    for run in _lineage(parent_run):
        if isinstance(getattr(run, "parent", None), dict):
            held.setdefault(int(run.parent["at"]), run.parent)
    chain = []
    for record in fork_records(trace["events"], at):
        own = held.get(record["at"])
        if not oracle_given and (own is None or own.get("run") != record["run"]):  # the trace's word, not a run's in hand
            _check_command(settings_of(record["changes"]).get("oracle"), f"the fork at step {record['at']} set the oracle to")
        chain.append(own if own is not None and own.get("run") == record["run"] else record)
    return chain


def _lineage(run: Any) -> Iterator[Any]:
    """``run`` and the runs in hand it was forked from, nearest first (each once)."""
    seen: set[int] = set()
    while run is not None and id(run) not in seen:
        seen.add(id(run))
        yield run
        run = getattr(run, "parent_run", None)


def _recorder_of(run: Run) -> Any:
    """The workspace recorder of a run in hand (a fork's: its live part's), or None."""
    runner = run.tool_runner
    return getattr(getattr(runner, "live", runner), "recorder", None)


def _parent_folder(run: Run, trace: dict[str, Any]) -> Path:
    """The parent's working folder, resolved: as its workspace recorder resolved it (the folder its
    tools ran in), the recording's for a replay (whose tools ran nowhere: its agent's folder is
    only where it was made), or its agent's when it has no recorder yet."""
    from .workspace import WorkspaceRecorder

    recorder = _recorder_of(run)
    if isinstance(recorder, WorkspaceRecorder) and Path(run.tool_context.workdir) == Path(run.agent.workdir):
        return recorder.workdir
    if isinstance(run.tool_runner, RecordedTools):
        return _trace_folder(trace) or Path(run.agent.workdir).resolve()
    return Path(run.agent.workdir).resolve()


def _withheld(run: Run | None, folder: Path | None) -> str | None:
    """Why a fork may not read its parent's folder, or None when it may: a folder its trace
    names (a saved trace, or a replay's) is read only inside the working directory, or where a
    run of this process worked (``known.py``).  A trace is a file from anywhere: the folder it
    named would be copied into the fork's, where the live model reads it."""
    from .known import folder_known

    if folder is None or _in_hand(run) or folder_known(folder):  # a fork's own folder is noted: known
        return None
    return ("is outside the working directory and no run of this process worked there, so it is not read "
            "(a trace does not choose what a fork reads): fork it from that folder (os.chdir) to read it")


def _trace_folder(trace: dict[str, Any]) -> Path | None:
    """The folder a saved run's tools ran in: a fork's own (its trace's ``workdir`` is the one its
    prompts name, its first ancestor's), else the trace's ``workdir``."""
    own = ((trace.get("parent") or {}).get("workspace") or {}).get("folder") if isinstance(trace.get("parent"), dict) \
        else None
    where = own if isinstance(own, str) and own else trace.get("workdir")
    return Path(where).expanduser().resolve() if isinstance(where, str) and where else None


def _ancestor_folders(run: Run | None, trace: dict[str, Any], parent_workdir: Path | None) -> list[Path]:
    """The folders a fork must not be made in: its parent's, and every ancestor's (in hand, or the
    first one a saved trace names: a fork of a fork may not write into the run it came from)."""
    found = [parent_workdir] if parent_workdir is not None else []
    if isinstance(trace.get("workdir"), str) and trace["workdir"]:
        found.append(Path(trace["workdir"]).expanduser().resolve())
    found += [_parent_folder(ancestor, {}) for ancestor in list(_lineage(run))[1:]]
    return list(dict.fromkeys(found))


def _folders(workdir: str | Path | None, forbidden: list[Path], run_id: str) -> tuple[Path, Path]:
    """The child's root (memory, blobs) and working folder, resolved and made; never inside the
    parent's folder or an ancestor's (``forbidden``)."""
    if workdir is None:
        root = Path(tempfile.mkdtemp(prefix=f"memfit-fork-{run_id}-")).resolve()
        inside = next((f for f in forbidden if root.is_relative_to(f)), None)
        if inside is not None:  # the temporary folder is in the run's own (a run in /tmp, or $TMPDIR set there)
            root.rmdir()
            raise ForkError(f"the temporary folder {root.parent} is inside the working directory {inside} of "
                            "the run forked: give the fork a folder outside it (workdir=)")
        return root, root / "work"
    folder = Path(workdir).expanduser().resolve()
    inside = next((f for f in forbidden if folder.is_relative_to(f)), None)
    if inside is not None:
        whose = "parent's" if inside == forbidden[0] else "first run's"
        raise ForkError(f"the fork's folder {folder} is inside the {whose} working directory "
                        f"{inside}: a fork never writes there")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ForkError(f"the fork's folder {folder} is not an empty directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ForkError(f"cannot make the fork's folder {folder}: {exc.strerror or exc}") from None
    return folder / ".memfit" / "fork", folder


def _make(trace: dict[str, Any], parent_run: Run | None, at: int, changes: dict[str, Any],
          settings: dict[str, Any], had_memory: bool, memory: Any, folder: Path, root: Path,
          parent_workdir: Path | None, agents: MakeAgent, live_agent: RunAgent | None, backend: Any, tools: Any,
          exact: bool, ancestors: list[dict[str, Any]]) -> Run:
    from .llm.backend import LiteLLMBackend
    from .reliability.breakers import breakers_for
    from .run import Run
    from .workspace import UnsafeRecord, WorkspaceRecorder, config_of, manifest_of, records, restore

    events = trace["events"]
    prefix = [e for e in events if int(e.get("iteration") or 0) < at]
    try:
        restored = restore(events, at, folder, parent_workdir, checked=True,  # _folders checked it
                           config=config_of(parent_run.agent) if parent_run is not None else None,
                           withheld=_withheld(parent_run, parent_workdir))
    except UnsafeRecord as exc:  # nothing is written outside the child's folder, whatever a trace says
        raise ForkError(f"this trace cannot be forked: {exc}") from None
    if exact and not restored.exact:
        raise ForkError(f"the fork at step {at} cannot be exact: {restored.problems[0]}")
    live_store, mode = _live_memory(parent_run, trace, at, had_memory, memory, root)
    record = {"run": str(trace.get("run_id", "")), "at": at, "changes": changes,
              "workspace": restored.to_dict(), "memory": mode}
    recorded_clock = RecordedClock(prefix)
    clock = ForkClock(recorded_clock, at)
    store = ForkStore(RecordedStore(prefix, clock=recorded_clock), live_store, at,
                      changes.get("memory_hits")) if had_memory else False
    extensions: list[Any] = [ForkChanges(r) for r in [*ancestors, record]]
    configs: list[Any] = []
    people: dict[str, Any] = {}
    if parent_run is not None:
        extensions.append(dataclasses.replace(config_of(parent_run.agent), store=None))  # the child's blobs are its own
        configs, given = _configs_of(parent_run.agent, settings)
        extensions += given
        # Who decides the live tool calls and answers the agent's questions: the parent's (without
        # them a call its policy asks about is refused, and ask_user gets no answer); and where
        # its runs are exported live.
        people = {"approve": parent_run.agent.approve, "ask_user": parent_run.agent.ask_user,
                  "otel": parent_run.agent.otel}  # exported live where the parent is
    try:
        agent = agents({**settings, **people, "workdir": folder, "memory": store, "extensions": extensions,
                        "configs": configs})
    except (TypeError, ValueError) as exc:  # a saved trace's settings, edited or from another version
        line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ForkError(f"the run's recorded settings are not valid: {line}") from None
    models = switched_models([*ancestors, record])
    config = config_of(agent)
    parent_recorder = _recorder_of(parent_run) if parent_run is not None else None
    blobs = parent_recorder.blobs if isinstance(parent_recorder, WorkspaceRecorder) and \
        parent_recorder.config.store == config.store else None  # the same store, resolved once
    recorder = WorkspaceRecorder(folder, config, manifest=restored.manifest if restored.manifest is not None else manifest_of(folder),
                                 write_base=not any("base" in r for _, r in records(prefix, at)), blobs=blobs,
                                 resolved=True)
    run = Run(agent, trace["task"],
              backend=ForkBackend(RecordedBackend(prefix, {**models, **agent.tiers}),
                                  backend if backend is not None else LiteLLMBackend((live_agent or agent).model_options()),
                                  at, changes.get("action")),
              tools=ForkTools(RecordedTools(prefix), tools if tools is not None else LiveTools(recorder), at,
                              changes.get("observation")),
              clock=clock, prompt_workdir=trace.get("workdir") or None)  # the prefix's prompts name the parent's folder
    recorded_clock.run = clock.run = run
    run.backend.run = run
    if isinstance(store, ForkStore):
        store.run = run
    breakers_for(agent).clock = clock.now
    run.parent = record
    run.parent_run = parent_run  # type: ignore[attr-defined]
    return run


def _configs_of(agent: Any, settings: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The configs a parent in hand was given whole, for its child: each feature's as the parent
    started (the flat ``settings`` it started with set on it: a fork of a fork switched some at
    its step), and the configs among its extensions (its guards'; the workspace's is the fork's
    own).  A saved trace records the flat settings only: a fork of one starts from them."""
    from .config import FLAT
    from .workspace import WorkspaceConfig

    flat = {k: v for k, v in settings.items() if k in FLAT and k != "memory"}
    features = list(agent.config.replace(**flat).features().values())
    given = [e for e in agent.extensions if dataclasses.is_dataclass(e) and not isinstance(e, type | WorkspaceConfig)]
    return features, given


def _live_memory(parent_run: Run | None, trace: dict[str, Any], at: int, had_memory: bool, memory: Any,
                 root: Path) -> tuple[Any, str]:
    """The store the child's live part uses, and its mode's name."""
    if not had_memory:
        return None, "none"
    from .memory import resolve_store
    from .memory.overlay import Overlay
    from .memory.store import open_store

    base: Any = None
    if memory not in MEMORY_MODES:  # the parent's store, read and never written (nor repaired)
        base = resolve_store(memory, root, read_only=True)
    elif parent_run is not None:
        base = parent_run.memory
        if isinstance(base, ForkStore):  # a fork of a fork: its live store (an overlay) is read
            base = base.live
        if isinstance(base, RecordedStore):
            base = None  # a replay opened no store: its trace says where its run's store was
    unread = ""
    if base is None and memory == "overlay":
        base, unread = _recorded_store(trace)
    if memory == "write-through":
        if base is None:
            raise ForkError("memory='write-through' needs the parent's store, and this parent has none in this "
                            "process (a replay or a saved trace): use the overlay")
        return base, "write-through"
    embedder = getattr(base, "embedder", None)
    top = open_store(root / "memory", **({"embedder": embedder} if embedder is not None else {}))
    if base is None:
        log.warning("the fork of %s reads none of its parent's memories: %s; give memory=<its folder or URL> "
                    "to read it", trace.get("run_id"), unread)
        return top, "own"
    return Overlay(base, top, hidden=learnt_from(trace, at)), "overlay"


def _recorded_store(trace: dict[str, Any]) -> tuple[Any, str]:
    """The parent's store where its trace says it was (``memory_store``: ``memory/where.py``),
    opened to read; else None and why not."""
    from .errors import StoreError
    from .memory.where import open_where, unvouched

    where = trace.get("memory_store")
    if not where:
        return None, "the trace does not say where the parent's store is"
    try:
        far = unvouched(where)
        if far is not None:  # a trace does not choose what a fork reads
            return None, (f"its store is in {far}, outside the working directory, and this process does not have "
                          "it open")
        return open_where(where), ""
    except (StoreError, ImportError, ValueError, OSError) as exc:  # gone, moved, a server not reached, a bad path
        line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"its store cannot be read ({line})"


def learnt_from(trace: dict[str, Any], at: int) -> list[str]:
    """The ids of the memories the run stored at and after step ``at``: what the child's past did
    not know (its ``memory`` events' additions, and what the agent saved with archival_memory_insert,
    whose observation names the id)."""
    found = []
    for e in trace["events"]:
        if int(e.get("iteration") or 0) < at:
            continue
        if e.get("type") == "memory":
            found += [i for i in e.get("added") or () if isinstance(i, str)]
        elif e.get("type") == "observation" and e.get("ok") and isinstance(e.get("data"), dict):
            saved = e["data"].get("memory_id")
            if isinstance(saved, str):
                found.append(saved)
    return found


# --- the family --------------------------------------------------------------------------------


def first_live_call(run: Run) -> int | None:
    """The index in ``run.events`` of the first event of the fork's live part (its ``fork`` event)."""
    with contextlib.suppress(StopIteration):
        return next(i for i, e in enumerate(run.events) if e.TYPE == "fork")
    return None
