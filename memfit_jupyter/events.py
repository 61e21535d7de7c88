"""Typed events: the single record of what a run did.

One dataclass per event type.  ``run.emit(event)`` records it; the run's
records, its timeline (what the model sees), its trace and the widgets are
all built from the events, in the order they were emitted.

Serialised, an event is a flat dict: ``type``, ``iteration``, ``ts``
(seconds since the run started), then its fields in the order the class
declares them.  A field whose value is ``UNSET`` is left out (some shapes
carry a field only sometimes: ``note.source``, ``error.traceback``).  A field
declared with ``hidden()`` never leaves the process: it says what the loop
does with the event (``Note.timeline``) and is not part of trace version 1.
``Guidance`` events are not part of the trace at all: they are what the loop
told the model (reflections, spin warnings, memory pressure, the person's
changes), and the timeline is built from them.

Event catalogue (the ``type`` of each class; renderers show any other type
with a generic card that lists its fields):

==============  =====================================================================
run_start       RunStart
model_call      ModelCall
model_delta     ModelDelta (live only, not in the trace: a streamed reply's pieces)
format_error    FormatError (a reply that did not fit its schema)
action          Action
observation     Observation
approval        Approval (waiting | approved | rejected)
note            Note (guidance or a message placed in the timeline)
reflection      Reflection
spin            Spin
guarantee       GuaranteeViolated, GuaranteeOverride (the person raised a limit)
guard           Guard (a failure-mode guard fired: reliability/guards.py)
breaker         BreakerTransition, BreakerRejected (a call was turned away)
synthesis       Synthesis, SynthesisChoice (the person chose an alternative)
memory          Memory (op: search | insert | triage | task_search | failures)
context         Context
degradation     Degradation
trial           Trial (failure diary)
escalation      Escalation (the person's answer to an escalated run)
log             Log (a warning or log line raised during the run)
answer          AnswerChanged (the answer of an ended run changed: a diverse choice)
error           Error (an exception the loop caught and survived)
run_end         RunEnd
==============  =====================================================================

Memory rankings travel as ``application/vnd.memfit.memory+json``::

    {version: 1, query, bytes?, bytes_limit?,
     results: [{id, content, tags: [str], score,
                breakdown: {r, c, t, a, p, o, e, keyword_bonus, semantic, final}}]}

``score`` equals ``breakdown.final``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, dataclass_transform

# Fields whose values come from the wall clock; a replay takes them from its recording.
TIMING_FIELDS = ("ts", "latency_s", "duration_s")


class _Unset:
    """The value of a field that this event leaves out of its serialised form."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


def hidden(default: Any = None) -> Any:
    """A field that stays in the process: never serialised (trace version 1 has no place for it)."""
    return field(default=default, metadata={"trace": False})


def optional() -> Any:
    """A field that some events of a type carry and others leave out."""
    return field(default=UNSET)


@dataclass(kw_only=True, slots=True)
class Event:
    """Base of every event: the iteration it belongs to and when it happened.

    ``iteration`` None means "the run's current iteration" (``emit`` fills it in);
    ``ts`` is set by ``emit`` from the run's clock.
    """

    TYPE: ClassVar[str] = ""
    #: Whether the event is part of the trace (``Guidance`` is not).
    TRACED: ClassVar[bool] = True
    _FIELDS: ClassVar[tuple[tuple[str, bool], ...]] = ()

    iteration: int | None = None
    ts: float = 0.0

    @property
    def type(self) -> str:
        return self.TYPE

    def to_dict(self) -> dict[str, Any]:
        """The serialised event: what the trace holds."""
        out: dict[str, Any] = {"type": self.TYPE, "iteration": self.iteration, "ts": self.ts}
        for name, traced in self._FIELDS:
            if traced:
                value = getattr(self, name)
                if value is not UNSET:
                    out[name] = value
        return out

    def fields(self) -> dict[str, Any]:
        """The event's own fields (serialised ones, without type, iteration and ts)."""
        d = self.to_dict()
        for key in ("type", "iteration", "ts"):
            d.pop(key)
        return d

    # Mapping-style reads, so that subscribers may treat an event as its dict.
    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return self.TYPE
        if key in self._names():
            value = getattr(self, key)
            if value is not UNSET:
                return value
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: str) -> bool:
        return self.get(key, UNSET) is not UNSET

    @classmethod
    def _names(cls) -> frozenset[str]:
        return _NAMES[cls]


_NAMES: dict[type, frozenset[str]] = {}
#: Every event class by its ``type``, in declaration order (a type may have several shapes).
REGISTRY: dict[str, list[type[Event]]] = {}

E = TypeVar("E", bound=type[Event])


@dataclass_transform(kw_only_default=True, field_specifiers=(field, hidden, optional))
def event(type_name: str, *, traced: bool = True) -> Callable[[E], E]:
    """Make an event class: a keyword-only dataclass registered under ``type_name``."""

    def wrap(cls: E) -> E:
        made = dataclass(kw_only=True, slots=True)(cls)
        made.TYPE = type_name
        made.TRACED = traced
        own = [f for f in dataclasses.fields(made) if f.name not in ("iteration", "ts")]
        made._FIELDS = tuple((f.name, f.metadata.get("trace", True)) for f in own)
        _NAMES[made] = frozenset(("iteration", "ts", *(f.name for f in own)))
        REGISTRY.setdefault(type_name, []).append(made)
        return made

    return wrap


# --- the run --------------------------------------------------------------------------
@event("run_start")
class RunStart(Event):
    """The run began: its task, model tiers, settings, tools and extensions."""

    task: str
    tiers: dict[str, str]
    settings: dict[str, Any]
    tools: list[str]
    extensions: list[str]


@event("run_end")
class RunEnd(Event):
    """The run ended (the one place: ``Run._finish``)."""

    status: str
    answer: str | None
    reason: str


@event("error")
class Error(Event):
    """An exception the loop (or a button callback) caught and survived."""

    message: str
    traceback: str = optional()


@event("note")
class Note(Event):
    """A message for the person; with ``timeline`` it is also put where the model reads it."""

    text: str
    source: str = optional()
    #: None: the model does not see it; "append": added to the timeline; "reset": the timeline
    #: starts again from the task and this note (a new trial or feature).
    timeline: str | None = hidden(None)


@event("guidance", traced=False)
class Guidance(Event):
    """Text the loop puts into the timeline for the model (not part of trace version 1).

    ``kind`` names the timeline entry: reflection, logic_spin_warning, memory_pressure, note.
    """

    kind: str
    text: str


# --- model calls ----------------------------------------------------------------------
@event("model_call")
class ModelCall(Event):
    """One attempt of one structured call: the reply is kept so a run can be replayed."""

    purpose: str
    model: str
    tier: str
    attempt: int
    ok: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    max_tokens: int | None
    timeout_s: float
    reply: str | None
    error: str | None
    error_kind: str | None
    #: How the schema was sent: tools, schema or text (llm/structured.py).
    structured: str = optional()
    #: The output cap the caller asked for, before the budget's cap (``max_tokens``).
    requested_max_tokens: int | None = optional()
    #: Why generation stopped ("stop", "length": cut off at max_tokens, "tool_calls"...).
    finish_reason: str | None = optional()
    #: Prompt tokens served from the provider's prompt cache, where it reports them.
    cached_tokens: int = optional()
    #: What had streamed in when the call was interrupted or cut off.
    partial_reply: str = optional()


@event("model_delta", traced=False)
class ModelDelta(Event):
    """A piece of a reply as it streams in (live only: the model_call that follows holds it all)."""

    purpose: str
    model: str
    text: str
    #: Characters of the reply so far.
    chars: int


@event("format_error")
class FormatError(Event):
    """A reply that did not fit its schema (the client asks again)."""

    purpose: str
    attempt: int
    error: str | None


# --- the loop ---------------------------------------------------------------------------
@event("action")
class Action(Event):
    """The action the model chose."""

    thought: str
    action_type: str
    tool: str
    params: dict[str, Any]
    #: The reflection level the action asked for, or None.
    reflection: str | None = None


@event("observation")
class Observation(Event):
    """What the action's tool gave back (or why no action could be taken)."""

    tool: str
    ok: bool
    output: str
    error: str | None
    duration_s: float
    data: dict[str, Any] = field(default_factory=dict)


@event("approval")
class Approval(Event):
    """A tool call waiting for the person, or the person's decision on it."""

    state: str  # waiting | approved | rejected
    tool: str
    reason: str = optional()


# --- reflection and spin ------------------------------------------------------------------
@event("reflection")
class Reflection(Event):
    """A reflection on the last action (seed 000, 1.3)."""

    level: int
    level_name: str
    trigger: str
    action_type: str
    tool: str
    success: bool
    summary: str
    suggestions: list[str]
    impact: dict[str, Any]
    memory_used: list[str]
    ok: bool
    error: str | None


@event("spin")
class Spin(Event):
    """A spin detector's finding (layer 1, 2, 3 or a named detector)."""

    layer: int | str
    detector: str
    is_spinning: bool
    reason: str
    suggestions: list[str]
    next_actions: list[str]
    action_type: str
    consecutive_count: int
    warning_count: int
    is_task_progressing: bool | None


# --- reliability ------------------------------------------------------------------------
@event("guarantee")
class GuaranteeViolated(Event):
    """A limit ran out (``limit`` names it: max_cost_usd, max_duration_seconds, max_recursive_calls)."""

    violated: bool = True
    message: str
    limit: str
    operation: str
    prompt_tokens: int = optional()
    cost_usd: float
    elapsed_s: float
    recursive_calls: int


@event("guarantee")
class GuaranteeOverride(Event):
    """The person raised limits (with explicit confirmation)."""

    violated: bool = False
    override: bool = True
    confirmed: bool = True
    limit: str
    message: str
    limits: dict[str, Any]
    previous: dict[str, Any]
    cost_usd: float
    elapsed_s: float
    recursive_calls: int


@event("guard")
class Guard(Event):
    """A guard of ``reliability/guards.py`` fired; ``refused`` names the tool call it turned away."""

    guard: str
    reason: str
    refused: str = optional()
    refusals: int = optional()
    max_refusals: int = optional()


@event("breaker")
class BreakerTransition(Event):
    """A tier's circuit breaker changed state."""

    tier: str
    model: str
    failures: int
    successes: int
    rejected: int
    opened_at: float | None
    next_probe_at: float | None
    from_state: str
    to_state: str
    reason: str


@event("breaker")
class BreakerRejected(Event):
    """A call was turned away from an open tier (``fallback_tier`` answers, or none)."""

    tier: str
    model: str
    failures: int
    successes: int
    rejected: bool = True
    opened_at: float | None
    next_probe_at: float | None
    rejected_count: int
    fallback_tier: str | None
    purpose: str
    reason: str
    open_tiers: dict[str, float | None]
    state: str


@event("synthesis")
class Synthesis(Event):
    """Sampled answers combined (SPEC-10.04): clusters, the answer, its confidence."""

    strategy: str
    question: str
    samples: list[dict[str, Any]]
    clusters: list[dict[str, Any]]
    answer: str | None
    confidence: float
    share: float
    low_confidence: bool
    alternatives: list[dict[str, Any]]
    no_consensus: bool
    rationale: str
    recursive_calls: int
    cost: dict[str, Any]


@event("synthesis")
class SynthesisChoice(Event):
    """The person chose one alternative of a diverse synthesis."""

    strategy: str
    question: str
    samples: list[dict[str, Any]]
    clusters: list[dict[str, Any]]
    alternatives: list[dict[str, Any]]
    answer: str
    confidence: float
    low_confidence: bool
    choice: dict[str, Any]
    rationale: str


@event("degradation")
class Degradation(Event):
    """The graceful degradation plan of a run that stopped short (SPEC-10.13)."""

    reason: str
    partial_result: str | None
    explanation: str
    recommendations: list[str]
    cost_usd: float
    duration_s: float
    calls: int
    iterations: int
    tried: list[str]


# --- memory and context -------------------------------------------------------------------
@event("memory")
class Memory(Event):
    """A memory operation and what it found or added."""

    op: str
    query: str
    results: list[dict[str, Any]]
    added: list[Any]
    bytes: int
    source: str | None = optional()
    duplicates: Any = optional()
    error: str | None = optional()


@event("context")
class Context(Event):
    """A measurement of the main context; at ``flush`` the oldest ``evicted`` entries left it."""

    used_tokens: int
    window: int | None
    ratio: float
    watermark: str  # ok | warning | flush
    evicted: int
    recall_size: int
    summary: str | None
    #: Why the context was measured or flushed outside the watermark checks.
    reason: str = optional()


@event("trial")
class Trial(Event):
    """A failure-diary trial judged by the oracle."""

    trial: int
    max_trials: int
    passed: bool
    oracle_output: str
    lesson: str | None


@event("escalation")
class Escalation(Event):
    """The person's answer to an escalated run."""

    choice: str  # more_trials | open_diary | stop
    extra_trials: int
    max_trials: int | None


@event("log")
class Log(Event):
    """A warning or log line raised while the run moved: the run's view shows it (not stderr)."""

    level: str
    logger: str
    message: str


@event("answer")
class AnswerChanged(Event):
    """The answer of an ended run changed: the person chose an alternative of a diverse synthesis."""

    answer: str
    reason: str


def make(type_name: str, iteration: int | None = None, **fields: Any) -> Event:
    """The typed event for ``type_name`` and ``fields`` (the shape whose fields they fit).

    >>> make("note", text="hello").to_dict()["text"]
    'hello'
    """
    shapes = REGISTRY.get(type_name)
    if not shapes:
        raise ValueError(f"unknown event type {type_name!r}: each type is a class in memfit_jupyter.events")
    keys = set(fields)
    for cls in shapes:
        if keys <= cls._names():
            return cls(iteration=iteration, **fields)
    names = ", ".join(sorted(keys - shapes[0]._names()))
    raise ValueError(f"{type_name} events have no field(s) {names}")


def from_dict(d: dict[str, Any]) -> Event:
    """A serialised event (a trace's) as its typed event again."""
    fields = {k: v for k, v in d.items() if k not in ("type", "iteration", "ts")}
    e = make(d["type"], d.get("iteration"), **fields)
    e.ts = d.get("ts", 0.0)
    return e
