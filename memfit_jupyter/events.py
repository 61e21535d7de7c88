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
fork            Fork (the run is a fork of another at a step, with changes: fork.py)
==============  =====================================================================

Memory rankings travel as ``application/vnd.memfit.memory+json``::

    {version: 1, query, bytes?, bytes_limit?,
     results: [{id, content, tags: [str], score,
                breakdown: {r, c, t, a, p, o, e, keyword_bonus, semantic, final}}]}

``score`` equals ``breakdown.final``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from .event_base import REGISTRY as REGISTRY
from .event_base import TIMING_FIELDS as TIMING_FIELDS
from .event_base import UNSET as UNSET
from .event_base import Event as Event
from .event_base import event as event
from .event_base import from_dict as from_dict
from .event_base import hidden as hidden
from .event_base import make as make
from .event_base import make_of as make_of
from .event_base import optional as optional


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


@event("fork")
class Fork(Event):
    """This run is a fork (``fork.py``): its steps before ``at`` are its parent's, answered from the
    recording; from ``at`` on it runs live, with ``changes`` (step changes and settings)."""

    parent: str
    at: int
    changes: dict[str, Any]
    #: How the working directory of step ``at`` was restored: folder, files, exact, problems, caveats.
    workspace: dict[str, Any]
    #: Where the child's memory writes go: overlay | write-through | none.
    memory: str


@event("error")
class Error(Event):
    """An exception the loop (or a button callback) caught and survived."""

    message: str
    traceback: str = optional(default=UNSET)


@event("note")
class Note(Event):
    """A message for the person; with ``timeline`` it is also put where the model reads it."""

    text: str
    source: str = optional(default=UNSET)
    #: The files a scripted scenario placed in the working folder (a replay names them again
    #: without writing them).
    files: list[str] = optional(default=UNSET)
    #: None: the model does not see it; "append": added to the timeline; "reset": the timeline
    #: starts again from the task and this note (a new trial or feature).
    timeline: str | None = hidden(default=None)


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
    #: The call's deadline; None where the source does not say (a run imported by load_trajectory).
    timeout_s: float | None
    #: The reply's text; a run imported by load_trajectory keeps the source's reply message as it
    #: was (a message dict with its tool calls, or a list of messages).
    reply: str | dict[str, Any] | list[Any] | None
    error: str | None
    error_kind: str | None
    #: How the schema was sent: tools, schema or text (llm/structured.py).
    structured: str = optional(default=UNSET)
    #: The output cap the caller asked for, before the budget's cap (``max_tokens``).
    requested_max_tokens: int | None = optional(default=UNSET)
    #: Why generation stopped ("stop", "length": cut off at max_tokens, "tool_calls"...).
    finish_reason: str | None = optional(default=UNSET)
    #: Prompt tokens served from the provider's prompt cache, where it reports them.
    cached_tokens: int = optional(default=UNSET)
    #: What had streamed in when the call was interrupted or cut off.
    partial_reply: str = optional(default=UNSET)


@event("model_delta", traced=False)
class ModelDelta(Event):
    """A piece of a reply as it streams in (live only: the model_call that follows holds it all)."""

    purpose: str
    model: str
    text: str
    #: Characters of the reply given out so far (redacted, ``secrets.StreamRedactor``): what the
    #: pieces the view has add up to.
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
    reason: str = optional(default=UNSET)


# --- reflection and spin ------------------------------------------------------------------
@event("reflection")
class Reflection(Event):
    """A reflection on the last action (MECHANISMS.md §1.3)."""

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
    prompt_tokens: int = optional(default=UNSET)
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
    refused: str = optional(default=UNSET)
    refusals: int = optional(default=UNSET)
    max_refusals: int = optional(default=UNSET)


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
    """Sampled answers combined (MECHANISMS.md §4.2): clusters, the answer, its confidence."""

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
    """The graceful degradation plan of a run that stopped short (MECHANISMS.md §4.4)."""

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
    source: str | None = optional(default=UNSET)
    duplicates: Any = optional(default=UNSET)
    error: str | None = optional(default=UNSET)


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
    reason: str = optional(default=UNSET)


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
