"""A run: the loop, stepwise, with one typed event stream as its only record.

An iteration builds the prompt from the timeline, asks the model for the next
action, runs the tool and emits typed events (``events.py``).  The run's
records, its timeline (what the model sees) and its trace are built from
those events as they are emitted, in ``Run.emit``: nothing keeps a second
copy of the truth.

A run ends in exactly one place, ``Run._finish``, which every ending reaches
through a ``RunEnded`` exception carrying its status and reason; a finished
run goes on only through ``Run.reopen`` (an override, more trials).

Around the loop: the extensions come from ``extension.extensions_for``, the action records
are ``action_log``'s view of the events, and a person's hold on the run between its steps
(the tool call waiting for approval, the clock that stops while paused) is ``steering``'s.
"""

from __future__ import annotations

import operator
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import events as ev
from .action_log import ActionLog
from .errors import INTERRUPTED, Cancelled, Finished, LimitsExceeded, RunEnded, RunFailed
from .events import Event
from .extension import Extension, extensions_for, name_of
from .live import LiveClock, LiveTools
from .llm.prompts import action_system, with_tail
from .records import ActionRecord, GracefulDegradationPlan, RunResult
from .reliability.guarantees import BudgetTracker, ExecutionGuarantees
from .secrets import package_logger, redact, redact_obj, refresh_env_secrets, remember_url_passwords
from .steering import Approvals, RunningClock
from .timeline import Timeline
from .tool_policy import sandbox_of
from .tools import ToolContext, select_tools
from .trace import TRACE_VERSION as TRACE_VERSION

if TYPE_CHECKING:
    from .protocols import Clock, RunAgent, ToolRunner

log = package_logger()  # one logger for the package; secrets redacted

#: Calls that reach no model (every tier failing, or its breaker open) this many times in a row
#: fail the run.  Unusable replies of a model that answers fail it only at ``max_bad_replies``
#: in a row (0, the default: never): on recorded SWE-bench runs most streaks of rejected replies
#: were followed by a resolved task (docs/EVIDENCE.md).
MAX_CONSECUTIVE_FAILED_CALLS = 3


def gives_up(bad_replies: int, failed_calls: int, max_bad_replies: int) -> bool:
    """Whether the loop ends on its streak: ``bad_replies`` unusable iterations in a row, the last
    ``failed_calls`` of them calls that reached no model (``Run._bad_reply``; ``analyze`` asks too)."""
    return failed_calls >= MAX_CONSECUTIVE_FAILED_CALLS or bool(max_bad_replies and bad_replies >= max_bad_replies)

Subscriber = Callable[[Any], None]
#: The values ``emit`` redacts (what else an event holds is numbers, booleans and None).
_REDACTED = (str, dict, list)
_DESCRIPTION = operator.attrgetter("description")


class Run:
    """One run of a task.  Iterate with ``step()``; drain with ``run()``."""

    def __init__(self, agent: RunAgent, task: str, *, backend: Any = None, tools: ToolRunner | None = None,
                 clock: Clock | None = None,
                 run_id: str | None = None, started_at: str | None = None, prompt_workdir: str | None = None):
        """``backend`` answers the model calls, ``tools`` runs the tools, ``clock`` stamps the events:
        the world's by default, a recording's in a replay (``replay.py``).  ``prompt_workdir``: the
        folder the prompts name (a replay's and a fork's: the recorded one), else the agent's."""
        self.agent = agent
        self.task = task
        self.id = run_id or uuid.uuid4().hex[:12]
        self.started_at = started_at or datetime.now(UTC).isoformat(timespec="seconds")
        #: The events of the trace, in order: the run's record.
        self.events: list[Event] = []
        self._log = ActionLog()
        self.timeline = Timeline(task)
        self.iteration = 0
        self.status = "pending"
        self.result: RunResult | None = None
        self.last_prompt: list[dict[str, str]] | None = None
        #: The working directory as the prompt names it (a replay keeps the recorded one).
        self.prompt_workdir = prompt_workdir or str(agent.workdir.resolve())
        self._subscribers: list[tuple[Subscriber, tuple[type[Event], ...] | None]] = []
        self.clock: Clock = clock if clock is not None else LiveClock()
        self.tool_runner: ToolRunner = tools if tools is not None else LiveTools()
        self._t0 = time.monotonic()
        self._bad_replies = 0  # iterations in a row without a usable action
        self._failed_calls = 0  # of them, those whose call reached no model
        #: The tool call held for a person's approval, and the decision on it (``steering.py``).
        self.approvals = Approvals(self.emit)
        self._clock = RunningClock()  # paused time is not held against max_duration_seconds
        self.budget = BudgetTracker(agent.guarantees, clock=self._running_time, on_violation=self._on_violation)
        if backend is None:
            from .llm.backend import LiteLLMBackend

            backend = LiteLLMBackend(agent.model_options())
        self.backend = backend
        from .llm.client import LLMClient

        self.llm = LLMClient(agent.tiers, backend, self.emit, run_key=self.id, budget=self.budget,
                             structured=agent.structured)
        # A replay's tools are its recording (``runs_tools`` False): it needs no sandbox, and may be
        # made where there is none.  A fork's run live from its step: in the parent's sandbox.
        self.tool_context = ToolContext(workdir=agent.workdir, namespace=agent.namespace,
                                        ask_user=agent.ask_user, run=self,
                                        sandbox=sandbox_of(agent) if self.tool_runner.runs_tools else None)
        #: The fork this run is (``{run, at, changes, workspace, memory}``, ``fork.py``), or None.
        self.parent: dict[str, Any] | None = None
        #: The forks of this run made in this process, oldest first (``Run.fork``).
        self.forks: list[Run] = []
        #: What the extensions provide each other and the views, by name (``Extension.provides``).
        self.services: dict[str, Any] = {}
        self.extensions: list[Extension] = extensions_for(self, agent.extensions)
        self.llm.breakers = self.services.get("breakers")  # model calls go through the breakers
        extra = list(agent.extra_tools)
        for ext in self.extensions:
            extra.extend(ext.tools())
        self.tools = select_tools(agent.tool_names, extra)
        self.llm.tools = self.tools  # the action schema names the tools and their parameters
        self._system_prompt: tuple[Any, str] | None = None  # (what it was built from, the text)
        refresh_env_secrets()  # keys loaded since the last run (a .env file) are redacted too
        # A password of a URL setting (a proxy's api_base, a PostgreSQL store), typed alone elsewhere.
        remember_url_passwords([agent.api_base, agent.memory if isinstance(agent.memory, str) else None])

    # --- services (what the extensions provide) ----------------------------------------
    @property
    def memory(self) -> Any:
        """The long-term memory store of this run (the memory extension's), or None."""
        return self.services.get("memory")

    @property
    def context(self) -> Any:
        """The context extension of this run: tiers, plan, failure diary."""
        return self.services.get("context")

    @property
    def breakers(self) -> Any:
        """The run's view of its agent's circuit breakers (``.metrics()`` per tier)."""
        return self.services.get("breakers")

    # --- events -----------------------------------------------------------------------
    def subscribe(self, callback: Subscriber, *types: type[Event]) -> Callable[[], None]:
        """Deliver events to ``callback`` as they happen: every event of the trace, or, given
        event classes, only the events of those classes.  Returns an unsubscribe function.

        >>> run.subscribe(lambda e: print(e.tool), events.Observation)   # doctest: +SKIP
        """
        entry = (callback, tuple(types) or None)
        self._subscribers.append(entry)
        return lambda: self._subscribers.remove(entry) if entry in self._subscribers else None

    def emit(self, event: Event | str, iteration: int | None = None, **fields: Any) -> Event:
        """Record ``event`` (secrets redacted), build the views from it, deliver it to the subscribers.

        ``emit("note", text=...)`` is the same as ``emit(events.Note(text=...))``.
        """
        if isinstance(event, str):
            event = ev.make_of(event, iteration, fields)
        elif iteration is not None or fields:
            raise TypeError("emit(event) takes a typed event alone")
        if event.iteration is None:
            event.iteration = self.iteration
        traced = event.TRACED
        self.clock.stamp(event, len(self.events) if traced else -1, time.monotonic() - self._t0)
        for name in event._FIELD_NAMES:
            value = getattr(event, name)
            if isinstance(value, _REDACTED):  # a tuple: faster than the union, on every field of every event
                setattr(event, name, redact(value) if type(value) is str else redact_obj(value))
        if traced:
            self.events.append(event)
        self._project(event)
        if self._subscribers:
            for callback, types in list(self._subscribers):
                if (traced if types is None else isinstance(event, types)):
                    try:
                        callback(event)
                    except Exception:  # a broken display must not break the run
                        log.exception("event subscriber failed on %s", event.TYPE)
        return event

    def _project(self, event: Event) -> None:
        """The views written from the events: the timeline and the action records."""
        self.timeline.apply(event)
        if isinstance(event, ev.ModelCall):  # what was spent: the budget counts the calls' events
            self.budget.record_call(event.cost_usd, event.prompt_tokens, event.completion_tokens,
                                    event.latency_s)
        self._log.apply(event)

    @property
    def records(self) -> list[ActionRecord]:
        """One ``ActionRecord`` per iteration, built from its action and observation events."""
        return self._log.records

    def _on_violation(self, message: str, context: dict[str, Any]) -> None:
        self.emit("guarantee", violated=True, message=message, **context)

    # --- state ------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def elapsed(self) -> float:
        """Seconds the run has spent running (paused time does not count)."""
        return self._running_time()

    def _running_time(self) -> float:
        running = self._clock.seconds()
        recorded = getattr(self.clock, "budget_time", None)  # a replay's clock (replay.RecordedClock)
        return float(recorded(running)) if recorded is not None else running

    @property
    def waiting_for_approval(self) -> dict[str, Any] | None:
        """The tool call waiting for the person's approval, if any."""
        return self.approvals.waiting_call()

    def system_prompt(self) -> str:
        sections: list[str] = []
        for ext in self.extensions:
            sections.extend(ext.system_sections(self) or ())
        # The same from one step to the next unless the tools, the folder or a section changed:
        # built again only then (describing every tool each step is most of a replayed step's prompt).
        tools = self.tools.values()
        key = (tuple(map(id, tools)), tuple(map(_DESCRIPTION, tools)), self.prompt_workdir, tuple(sections))
        if self._system_prompt is None or self._system_prompt[0] != key:
            self._system_prompt = (key, action_system(self.tools.values(), self.prompt_workdir, sections))
        return self._system_prompt[1]

    def next_prompt(self) -> list[dict[str, str]]:
        """The messages the next action call will send (for step mode: see guidance before it goes):
        the stable prefix (system, tools, task, the timeline so far), then what changes each time."""
        tail = [s for ext in self.extensions for s in (ext.prompt_tail(self) or ())]
        return with_tail([{"role": "system", "content": self.system_prompt()}, *self.timeline.messages()], tail)

    # --- running ----------------------------------------------------------------------
    def step(self) -> ActionRecord | None:
        """Run exactly one iteration; return its record (None if no action was taken)."""
        if self.done:
            raise RuntimeError(f"this run has ended (status {self.status!r}); start a new one")
        before = len(self.records)
        with self._clock.stepping():
            try:
                if self.status == "pending":
                    self._begin()
                ended = self.clock.cancelled_next()  # a replay: where the person stopped the recording
                if ended is not None:
                    raise Cancelled(str(ended.get("reason") or "cancelled by the person"))
                self._iterate()
            except RunEnded as end:
                self._finish(end)
            except KeyboardInterrupt:
                self._finish(Cancelled(INTERRUPTED))
            except Exception as exc:
                self.emit(ev.Error(message=f"{type(exc).__name__}: {exc}",
                                   traceback="".join(traceback.format_exception(exc))[-4000:]))
                self._finish(RunFailed(f"internal error: {type(exc).__name__}: {exc}"))
        return self.records[-1] if len(self.records) > before else None

    def __iter__(self) -> Iterator[ActionRecord]:
        while not self.done:
            record = self.step()
            if record is not None:
                yield record
            elif self.approvals.waiting:
                return

    def run(self) -> RunResult:
        """Run to the end and return how it ended."""
        while True:
            while not self.done:
                self.step()
                if self.approvals.waiting and not self.done:
                    return self.result  # type: ignore[return-value]  # waiting: approve() then run()
            if not self.clock.resume_next(self):  # a replay: where the person had the recording go on
                return self.result  # type: ignore[return-value]

    def estimate(self) -> dict[str, Any]:
        """The expected cost of the next iteration from the model's prices and the prompt, its worst
        case, and how many iterations the budget left pays for (``llm/estimate.py``)."""
        from .llm.estimate import estimate

        return estimate(self)

    def cancel(self, reason: str = "cancelled by the person") -> RunResult:
        if not self.done:
            self._finish(Cancelled(reason))
        return self.result  # type: ignore[return-value]

    def reopen(self, note: str | None = None) -> None:
        """Let a finished run go on: ``step()``/``run()`` continue from where it stopped.

        The one way a run that ended goes on (an override of its limits, more trials);
        ``note``, if given, tells the model why.
        """
        if self.result is None:
            raise RuntimeError(f"this run has not ended (status {self.status!r})")
        self.result = None
        self.status = "running"
        if note:
            self.emit(ev.Guidance(kind="note", text=note))

    def fork(self, at: int, **changes: Any) -> Run:
        """A new run whose steps before ``at`` are this run's (from its recording: no model call,
        no tool run) and which goes on live from step ``at`` with ``changes``: ``guidance=``,
        ``reflection=``, ``action=``, ``observation=``, ``memory_hits=`` and settings
        (``model=``, ``max_iterations=``, ...).  Not started: call ``run()``.  See ``fork.fork``;
        its agent makes it (``Agent.fork``), so the run needs to know nothing of forks."""
        child: Run = self.agent.fork(self, at, **changes)
        return child

    def override(self, confirm: bool = False, **limits: Any) -> ExecutionGuarantees:
        """Raise this run's limits (needs ``confirm=True``); a degraded run then goes on with step()/run()."""
        from .reliability.guarantees import override

        return override(self, confirm=confirm, **limits)

    def choose(self, index: int) -> dict[str, Any]:
        """Choose alternative ``index`` of the last diverse synthesis; the choice goes into the trace."""
        from .reliability.synthesis import choose

        picked = choose(self, index)
        if self.result is not None:  # the run has ended: the chosen alternative is its answer now
            self.result.answer = str(picked["answer"])
            self.emit(ev.AnswerChanged(answer=self.result.answer,
                                       reason=f"the person chose alternative {index} of the diverse synthesis"))
        return picked

    def approve(self, ok: bool = True, reason: str = "") -> None:
        """Decide on the tool call waiting for approval; the next step() carries it out (or not)."""
        self.approvals.decide(ok, reason)

    def _begin(self) -> None:
        self.status = "running"
        # A fork's own hook (fork.ForkChanges) is not a feature: its run_start is its parent's.
        named = [name_of(e) for e in self.extensions if not getattr(e, "untraced", False)]
        self.emit(ev.RunStart(task=self.task, tiers=self.agent.tiers, settings=self.agent.settings(),
                              tools=sorted(self.tools), extensions=named))
        self._place_scenario_files()
        for ext in self.extensions:
            ext.on_start(self)

    def _place_scenario_files(self) -> None:
        """A scripted scenario brings the files its story needs; existing files are left alone."""
        if not self.agent.model.startswith("memfit/"):
            return
        placed = self.tool_runner.place_files(self)
        if placed:
            self.emit(ev.Note(text=f"scenario {self.agent.model} placed its files: {', '.join(placed)}",
                              files=list(placed)))

    def _iterate(self) -> None:
        if self.approvals.pending is not None:
            if not self.approvals.waiting:
                self._execute(*self.approvals.pending)
            return
        if self.iteration >= self.agent.max_iterations:
            raise RunFailed(f"reached max_iterations ({self.agent.max_iterations}) without finishing")
        self.iteration += 1
        i = self.iteration
        for ext in self.extensions:
            ext.before_iteration(self)
        self.budget.check_time("the next iteration")
        messages = self.next_prompt()
        self.last_prompt = messages
        reply = self.llm.call("action", messages, iteration=i, rebuild=self._after_overflow)
        if not reply.ok:
            self._bad_reply(i, reply)
            return
        self._bad_replies = self._failed_calls = 0
        act = reply.value
        self.emit(ev.Action(thought=act.thought, action_type=act.action_type, tool=act.tool,
                            params=act.params, reflection=act.reflection))
        if not self.approvals.hold(i, act, self):
            self._execute(i, act)

    def _after_overflow(self) -> list[dict[str, str]] | None:
        """The prompt was over the model's context window: flush the tiered context, prompt again."""
        from .llm.overflow import flush_for_overflow

        return self.next_prompt() if flush_for_overflow(self) else None

    def _execute(self, i: int, act: Any) -> None:
        rejected = self.approvals.settle(act)
        started = time.perf_counter()
        result = rejected if rejected is not None else self.tool_runner(self, i, act, self.tools.get(act.tool))
        duration = time.perf_counter() - started
        self.emit(ev.Observation(tool=act.tool, ok=result.ok, output=result.output, error=result.error,
                                 duration_s=duration, data=result.data))
        record = self.records[-1]
        for ext in self.extensions:
            ext.after_action(self, record)
        if result.ok and result.data.get("final"):
            raise Finished("the agent called finish", answer=str(act.params.get("answer", result.output)))

    def _bad_reply(self, i: int, reply: Any) -> None:
        """The model gave no usable action: record it as a failed action, tell the model, go on."""
        self._bad_replies += 1
        self.emit(ev.Observation(tool="", ok=False, output="", error=reply.error, duration_s=0.0,
                                 data={"error_kind": reply.error_kind}))
        record = self.records[-1]
        for ext in self.extensions:
            ext.after_action(self, record)
        self._failed_calls = self._failed_calls + 1 if reply.error_kind != "format" else 0
        if gives_up(self._bad_replies, self._failed_calls, self.agent.max_bad_replies):
            raise RunFailed(f"the model gave no usable reply {self._bad_replies} times in a row "
                            f"(last: {reply.error})")

    def _finish(self, end: RunEnded) -> None:
        """The one place where a run ends."""
        status = end.status
        plan = end.plan
        if plan is None and isinstance(end, LimitsExceeded):
            plan = self.degradation_plan(end.reason, limit=end.limit)
        answer = end.answer
        if answer is None and plan is not None:
            answer = plan.partial_result
        spent = self.budget.spent
        self.result = RunResult(
            status=status, answer=answer, reason=end.reason, iterations=self.iteration,
            cost_usd=spent.cost_usd, calls=spent.calls, prompt_tokens=spent.prompt_tokens,
            completion_tokens=spent.completion_tokens, duration_s=self.elapsed, plan=plan,
        )
        self.status = status
        if plan is not None:
            self.emit(ev.Degradation(**plan.to_dict()))
        for ext in self.extensions:
            try:
                ext.on_finish(self, self.result)
            except Exception as exc:
                self.emit(ev.Error(message=f"on_finish hook failed: {type(exc).__name__}: {exc}"))
        self.emit(ev.RunEnd(status=status, answer=answer, reason=end.reason))
        self.backend.forget(self.id)

    def best_answer(self) -> str | None:
        """The best answer so far: the last successful observation."""
        for record in reversed(self.records):
            if record.ok and record.output:
                return record.output[:2000]
        return None

    def degradation_plan(self, reason: str, tried: list[str] | None = None,
                         recommendations: list[str] | None = None, *,
                         limit: str | None = None) -> GracefulDegradationPlan:
        """The plan for stopping now for ``reason`` (``reliability/degradation.py``)."""
        from .reliability.degradation import degradation_plan

        return degradation_plan(self, reason, limit=limit, tried=tried, recommendations=recommendations)

    # --- the trace --------------------------------------------------------------------
    def trace(self) -> dict[str, Any]:
        """The run as a JSON-serialisable dict: the ``application/vnd.memfit.run+json`` payload."""
        from .trace import trace_of

        return trace_of(self)

    def to_html(self, path: Any) -> Any:
        """Write the run as one offline HTML file with the full interactive view (the trace and
        the run view's renderer inside: no CDN, no server); returns the path."""
        from .jupyter.report import write_report

        return write_report(self, path)

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.status} iteration={self.iteration} task={self.task[:40]!r}>"
