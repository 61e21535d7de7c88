"""The agent loop: synchronous, stepwise, one typed record per iteration.

``Agent`` holds the settings; ``agent.start(task)`` makes a ``Run``;
``run.step()`` runs exactly one iteration; ``run.run()`` runs to the end.
An iteration builds the prompt from the timeline, asks the model for the next
action, runs the tool, records an ``ActionRecord`` and emits typed events.
Feature modules (reflection, memory, context, reliability) plug in as
*extensions*: objects with any of the hooks ``on_start``, ``before_iteration``,
``system_sections``, ``after_action``, ``on_finish`` and ``tools``.

A run ends in exactly one place, ``Run._finish``, which every ending reaches
through a ``RunEnded`` exception carrying its status and reason.
"""

from __future__ import annotations

import importlib
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import (
    Cancelled,
    Finished,
    LimitsExceeded,
    RunEnded,
    RunFailed,
    UnknownModelError,
)
from .events import TIMING_FIELDS, Event
from .records import ActionRecord, GracefulDegradationPlan, ReflectionLevel, RunResult, ToolResult
from .reliability.guarantees import BudgetTracker, ExecutionGuarantees
from .secrets import package_logger, redact_obj, refresh_env_secrets
from .timeline import Timeline
from .tools import EXTENSION_TOOL_NAMES, Tool, ToolContext, select_tools

log = package_logger()  # one logger for the package; secrets redacted

TRACE_VERSION = 1
DEFAULT_MODEL = "memfit/demo"
#: Feature packages that may contribute an extension to every run, in hook order.
EXTENSION_MODULES = ("context", "memory", "reliability", "reflection")
#: The model may fail to give a usable reply this many times in a row before the run fails.
MAX_CONSECUTIVE_BAD_REPLIES = 3

Approver = Callable[[dict[str, Any]], "bool | tuple[bool, str] | None"]


class Agent:
    """An agent's settings. Keyword arguments mirror the ``%%memfit_task`` options.

    >>> agent = Agent(model="memfit/demo")
    >>> run = agent.start("what is the total of the numbers in data.txt?")
    >>> result = run.run()        # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        fast_model: str | None = None,
        fallback_model: str | None = None,
        max_iterations: int = 20,
        guarantees: ExecutionGuarantees | None = None,
        reflection: str | ReflectionLevel = "auto",
        spin_threshold: int = 3,
        max_consecutive_spin_warnings: int = 3,
        detectors: dict[str, bool] | None = None,
        strategy: str = "weighted",
        samples: int = 1,
        tools: Iterable[str] | str | None = None,
        memory: Any = None,
        oracle: str | Callable[..., Any] | None = None,
        max_trials: int = 3,
        plan: str | None = None,
        progress: str | None = None,
        context_window: int | None = None,
        failure_threshold: int = 3,
        recovery_timeout: float = 60.0,
        approve: Approver | None = None,
        ask_user: Callable[[str], str] | None = None,
        workdir: str | Path = ".",
        namespace: dict[str, Any] | None = None,
        extensions: Iterable[Any] = (),
        extra_tools: Iterable[Tool] = (),
        otel: Any = None,
    ):
        self.model = model or DEFAULT_MODEL
        self.fast_model = fast_model
        self.fallback_model = fallback_model
        for m in (self.model, fast_model, fallback_model):
            if m:
                _check_model_cheaply(m)
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.max_iterations = max_iterations
        self.guarantees = guarantees or ExecutionGuarantees()
        self.reflection = reflection if reflection == "auto" else ReflectionLevel.parse(reflection)
        self.spin_threshold = spin_threshold
        self.max_consecutive_spin_warnings = max_consecutive_spin_warnings
        self.detectors = dict(detectors or {})
        self.strategy = strategy
        self.samples = samples
        if isinstance(tools, str):
            tools = [t for t in tools.split(",") if t.strip()]
        self.tool_names = list(tools) if tools is not None else None
        self.extra_tools = list(extra_tools)
        self.memory = memory
        self.oracle = oracle
        self.max_trials = max_trials
        self.plan = plan
        self.progress = progress
        self.context_window = context_window
        self.failure_threshold = failure_threshold
        self.recovery_timeout = recovery_timeout
        self.approve = approve
        self.ask_user = ask_user
        self.workdir = Path(workdir)
        self.namespace = namespace if namespace is not None else {}
        self.extensions = list(extensions)
        #: Live OpenTelemetry export of every run: an endpoint, a file, True (OTEL_* env), options.
        self.otel = otel
        # Fail now, not at the first step, on a tool name that does not exist.
        select_tools(self.tool_names, self.extra_tools, also_known=EXTENSION_TOOL_NAMES)

    @property
    def tiers(self) -> dict[str, str]:
        return {"primary": self.model, "fast": self.fast_model or "", "fallback": self.fallback_model or ""}

    @property
    def breakers(self) -> Any:
        """The per-tier circuit breakers, shared by this agent's runs (``.metrics()`` per tier)."""
        from .reliability.breakers import breakers_for

        return breakers_for(self)

    def settings(self) -> dict[str, Any]:
        """The serialisable settings, as recorded in a trace."""
        return {
            "model": self.model, "fast_model": self.fast_model, "fallback_model": self.fallback_model,
            "max_iterations": self.max_iterations,
            "max_cost_usd": self.guarantees.max_cost_usd,
            "max_duration_seconds": self.guarantees.max_duration_seconds,
            "max_recursive_calls": self.guarantees.max_recursive_calls,
            "reflection": self.reflection if isinstance(self.reflection, str) else self.reflection.name.lower(),
            "spin_threshold": self.spin_threshold,
            "max_consecutive_spin_warnings": self.max_consecutive_spin_warnings,
            "detectors": self.detectors, "strategy": self.strategy, "samples": self.samples,
            "tools": self.tool_names, "max_trials": self.max_trials,
            "context_window": self.context_window,
            "failure_threshold": self.failure_threshold, "recovery_timeout": self.recovery_timeout,
            "memory": self.memory is not False,
        }

    def start(self, task: str) -> Run:
        """A new run of ``task``, not started: call ``step()`` or ``run()``."""
        if not task or not task.strip():
            raise ValueError("the task is empty: say what the agent should do")
        run = Run(self, task.strip())
        if self.otel:
            from .otel.live import attach

            attach(run, self.otel)
        return run

    @classmethod
    def replay(cls, trace: dict[str, Any], **overrides: Any) -> Run:
        """A run that replays ``trace`` offline: the recorded model replies and tool observations,
        so its events equal the recording's.  Not started: call ``run()`` or ``step()``."""
        from .llm.backend import ReplayBackend

        if not isinstance(trace, dict) or "events" not in trace:
            raise ValueError("not a memfit trace: a dict with 'events' is expected")
        settings = dict(trace.get("settings") or {})
        g = ExecutionGuarantees(
            max_cost_usd=settings.pop("max_cost_usd", 1.0),
            max_duration_seconds=settings.pop("max_duration_seconds", 300.0),
            max_recursive_calls=settings.pop("max_recursive_calls", 20),
        )
        # The prompt names the recorded working directory, so a replay elsewhere sends the same text.
        prompt_workdir = trace.get("workdir")
        # A run recorded with memory replays against an empty scratch store, so that its memory
        # calls happen again (their replies come from the recording) without touching a real store.
        if settings.pop("memory", False) and "memory" not in overrides:
            import tempfile

            settings["memory"] = tempfile.mkdtemp(prefix="memfit-replay-")
        else:
            settings["memory"] = False
        settings.update(overrides)
        agent = cls(guarantees=g, **settings)
        calls = [e for e in trace["events"] if e["type"] == "model_call"]
        run = Run(agent, trace["task"], backend=ReplayBackend(calls), recording=trace)
        if prompt_workdir:
            run.prompt_workdir = prompt_workdir
        return run


def _check_model_cheaply(model: str) -> None:
    """Reject what is clearly not a model string without importing litellm."""
    if not isinstance(model, str) or not model.strip() or any(c.isspace() for c in model.strip()):
        raise UnknownModelError(f"invalid model {model!r}: expected provider/model, e.g. memfit/demo")
    if model.startswith("memfit/"):
        from .llm.scenarios import load_scenario

        load_scenario(model.split("/", 1)[1])


class Run:
    """One run of a task.  Iterate with ``step()``; drain with ``run()``."""

    def __init__(self, agent: Agent, task: str, *, backend: Any = None, recording: dict | None = None):
        self.agent = agent
        self.task = task
        self.id = (recording or {}).get("run_id") or uuid.uuid4().hex[:12]
        self.started_at = (recording or {}).get("started_at") or datetime.now(UTC).isoformat(timespec="seconds")
        self.events: list[Event] = []
        self.records: list[ActionRecord] = []
        self.timeline = Timeline()
        self.iteration = 0
        self.status = "pending"
        self.result: RunResult | None = None
        self.last_prompt: list[dict[str, str]] | None = None
        #: The working directory as the prompt names it (a replay keeps the recorded one).
        self.prompt_workdir = str(agent.workdir.resolve())
        self._subscribers: list[Callable[[Event], None]] = []
        self._recorded_events = (recording or {}).get("events")
        self._t0 = time.monotonic()
        self._bad_replies = 0
        self._pending: tuple[int, Any] | None = None
        self._decision: tuple[bool, str] | None = None
        self.budget = BudgetTracker(agent.guarantees, on_violation=self._on_violation)
        if backend is None:
            from .llm.backend import LiteLLMBackend

            backend = LiteLLMBackend()
        self.backend = backend
        from .llm.client import LLMClient

        self.llm = LLMClient(agent.tiers, backend, self.emit, run_key=self.id, budget=self.budget)
        self.tool_context = ToolContext(workdir=agent.workdir, namespace=agent.namespace,
                                        ask_user=agent.ask_user, run=self)
        self.extensions = list(agent.extensions) + self._discover_extensions()
        extra = list(agent.extra_tools)
        for ext in self.extensions:
            extra.extend(getattr(ext, "tools", lambda: ())())
        self.tools = select_tools(agent.tool_names, extra)
        self._hooks = {name: [getattr(e, name) for e in self.extensions if hasattr(e, name)]
                       for name in ("on_start", "before_iteration", "system_sections", "after_action",
                                    "on_finish")}
        self.timeline.add("task", 0, f"Task: {task}")
        refresh_env_secrets()  # keys loaded since the last run (a .env file) are redacted too

    def _discover_extensions(self) -> list[Any]:
        found = []
        for name in EXTENSION_MODULES:
            ext = importlib.import_module(f"{__package__}.{name}").extension_for(self)
            if ext is not None:
                found.append(ext)
        return found

    # --- events -----------------------------------------------------------------------
    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Deliver each event to ``callback`` as it happens. Returns an unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def emit(self, type: str, iteration: int | None = None, **data: Any) -> Event:
        """Record an event (secrets redacted) and deliver it to the subscribers."""
        ts = round(time.monotonic() - self._t0, 6)
        event = Event(type, self.iteration if iteration is None else iteration, ts, redact_obj(data))
        if self._recorded_events is not None:
            self._restore_timing(event)
        self.events.append(event)
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # a broken display must not break the run
                log.exception("event subscriber failed on %s", type)
        return event

    def _restore_timing(self, event: Event) -> None:
        index = len(self.events)
        if index < len(self._recorded_events):
            recorded = self._recorded_events[index]
            if recorded.get("type") == event.type:
                event.ts = recorded.get("ts", event.ts)
                for key in TIMING_FIELDS[1:]:
                    if key in event.data and key in recorded:
                        event.data[key] = recorded[key]

    def _on_violation(self, message: str, context: dict[str, Any]) -> None:
        self.emit("guarantee", violated=True, message=message, **context)

    # --- state ------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    @property
    def waiting_for_approval(self) -> dict[str, Any] | None:
        """The tool call waiting for the person's approval, if any."""
        if self._pending is None:
            return None
        _, act = self._pending
        return {"tool": act.tool, "params": act.params, "thought": act.thought, "action_type": act.action_type}

    def system_prompt(self) -> str:
        from .llm.prompts import action_system

        sections = []
        for hook in self._hooks["system_sections"]:
            sections.extend(hook(self) or ())
        return action_system(self.tools.values(), self.prompt_workdir, sections)

    def next_prompt(self) -> list[dict[str, str]]:
        """The messages the next action call will send (for step mode: see guidance before it goes)."""
        return [{"role": "system", "content": self.system_prompt()}, *self.timeline.messages()]

    # --- running ----------------------------------------------------------------------
    def step(self) -> ActionRecord | None:
        """Run exactly one iteration; return its record (None if no action was taken)."""
        if self.done:
            raise RuntimeError(f"this run has ended (status {self.status!r}); start a new one")
        before = len(self.records)
        try:
            if self.status == "pending":
                self._begin()
            self._iterate()
        except RunEnded as end:
            self._finish(end)
        except KeyboardInterrupt:
            self._finish(Cancelled("interrupted by the person"))
        except Exception as exc:
            self.emit("error", message=f"{type(exc).__name__}: {exc}",
                      traceback="".join(traceback.format_exception(exc))[-4000:])
            self._finish(RunFailed(f"internal error: {type(exc).__name__}: {exc}"))
        return self.records[-1] if len(self.records) > before else None

    def __iter__(self) -> Iterator[ActionRecord]:
        while not self.done:
            record = self.step()
            if record is not None:
                yield record
            elif self._pending is not None and self._decision is None:
                return

    def run(self) -> RunResult:
        """Run to the end and return how it ended."""
        while not self.done:
            self.step()
            if self._pending is not None and self._decision is None and not self.done:
                break  # waiting for a person's approval: resume with approve() then run()
        return self.result  # type: ignore[return-value]

    def cancel(self, reason: str = "cancelled by the person") -> RunResult:
        if not self.done:
            self._finish(Cancelled(reason))
        return self.result  # type: ignore[return-value]

    def override(self, confirm: bool = False, **limits: Any) -> ExecutionGuarantees:
        """Raise this run's limits (needs ``confirm=True``); a degraded run then goes on with step()/run()."""
        from .reliability.guarantees import override

        return override(self, confirm=confirm, **limits)

    def choose(self, index: int) -> dict[str, Any]:
        """Choose alternative ``index`` of the last diverse synthesis; the choice goes into the trace."""
        from .reliability.synthesis import choose

        return choose(self, index)

    def approve(self, ok: bool = True, reason: str = "") -> None:
        """Decide on the tool call waiting for approval; the next step() carries it out (or not)."""
        if self._pending is None:
            raise RuntimeError("no tool call is waiting for approval")
        self._decision = (bool(ok), reason)

    def _begin(self) -> None:
        self.status = "running"
        self.emit("run_start", task=self.task, tiers=self.agent.tiers, settings=self.agent.settings(),
                  tools=sorted(self.tools), extensions=[type(e).__name__ for e in self.extensions])
        self._place_scenario_files()
        for hook in self._hooks["on_start"]:
            hook(self)

    def _place_scenario_files(self) -> None:
        """A scripted scenario brings the files its story needs; existing files are left alone."""
        if not self.agent.model.startswith("memfit/"):
            return
        if self._recorded_events is not None:  # a replay touches no files; it repeats the note
            index = len(self.events)
            if index < len(self._recorded_events):
                recorded = self._recorded_events[index]
                if recorded.get("type") == "note" and recorded.get("text", "").startswith("scenario "):
                    self.emit("note", text=recorded["text"])
            return
        from .llm.scenarios import load_scenario

        placed = []
        for rel, content in load_scenario(self.agent.model.split("/", 1)[1]).files.items():
            target = self.tool_context.resolve(rel)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
                placed.append(rel)
        if placed:
            self.emit("note", text=f"scenario {self.agent.model} placed its files: {', '.join(placed)}")

    def _iterate(self) -> None:
        if self._pending is not None:
            iteration, act = self._pending
            if self._decision is None:
                return
            self._execute(iteration, act)
            return
        if self.iteration >= self.agent.max_iterations:
            raise RunFailed(f"reached max_iterations ({self.agent.max_iterations}) without finishing")
        self.iteration += 1
        i = self.iteration
        for hook in self._hooks["before_iteration"]:
            hook(self)
        self.budget.check_time("the next iteration")
        messages = self.next_prompt()
        self.last_prompt = messages
        reply = self.llm.call("action", messages, iteration=i)
        if not reply.ok:
            self._bad_reply(i, reply)
            return
        self._bad_replies = 0
        act = reply.value
        self.emit("action", thought=act.thought, action_type=act.action_type, tool=act.tool,
                  params=act.params, reflection=act.reflection)
        if self.agent.approve is not None and act.tool != "finish":
            decision = self.agent.approve({"tool": act.tool, "params": act.params, "thought": act.thought,
                                           "action_type": act.action_type, "iteration": i})
            if decision is None:
                self._pending = (i, act)
                self.emit("approval", state="waiting", tool=act.tool)
                return
            self._decision = decision if isinstance(decision, tuple) else (bool(decision), "")
        self._execute(i, act)

    def _execute(self, i: int, act: Any) -> None:
        self._pending = None
        decision, self._decision = self._decision, None
        if decision is not None:
            self.emit("approval", state="approved" if decision[0] else "rejected", tool=act.tool,
                      reason=decision[1])
        tool = self.tools.get(act.tool)
        started = time.perf_counter()
        if decision is not None and not decision[0]:
            result = ToolResult(ok=False, error="the person rejected this tool call"
                                + (f": {decision[1]}" if decision[1] else ""))
        elif self._recorded_events is not None:
            result = self._recorded_observation(i)
        elif tool is None:
            result = ToolResult(ok=False, error=f"unknown tool {act.tool!r}; available: {', '.join(sorted(self.tools))}")
        else:
            self.budget.check_time(f"tool {act.tool}")
            result = tool(self.tool_context, act.params)
        duration = time.perf_counter() - started
        record = ActionRecord(iteration=i, thought=act.thought, action_type=act.action_type, tool=act.tool,
                              params=act.params, output=result.output, ok=result.ok, error=result.error,
                              duration_s=duration, data=dict(result.data))
        if act.reflection:
            record.data["requested_reflection"] = act.reflection
        self.records.append(record)
        self.emit("observation", tool=act.tool, ok=result.ok, output=result.output, error=result.error,
                  duration_s=duration, data=result.data)
        from .llm.prompts import action_message, observation_message

        self.timeline.add("action", i, action_message(act.thought, act.action_type, act.tool, act.params),
                          role="assistant")
        self.timeline.add("observation", i, observation_message(act.tool, result.ok, result.output, result.error))
        for hook in self._hooks["after_action"]:
            hook(self, record)
        if result.ok and result.data.get("final"):
            raise Finished("the agent called finish", answer=str(act.params.get("answer", result.output)))

    def _recorded_observation(self, iteration: int) -> ToolResult:
        for e in self._recorded_events:
            if e.get("type") == "observation" and e.get("iteration") == iteration:
                return ToolResult(output=e.get("output") or "", ok=bool(e.get("ok")), error=e.get("error"),
                                  data=dict(e.get("data") or {}))
        return ToolResult(ok=False, error="the recording has no observation for this iteration")

    def _bad_reply(self, i: int, reply: Any) -> None:
        """The model gave no usable action: record it as a failed action, tell the model, go on."""
        self._bad_replies += 1
        record = ActionRecord(iteration=i, thought="", action_type="invalid_reply", tool="", params={},
                              ok=False, error=reply.error, data={"error_kind": reply.error_kind,
                                                                 "raw": (reply.raw or "")[:500]})
        self.records.append(record)
        self.emit("observation", tool="", ok=False, output="", error=reply.error, duration_s=0.0,
                  data={"error_kind": reply.error_kind})
        self.timeline.add("note", i, f"[SYSTEM] Your last reply could not be used ({reply.error}). "
                                     "Reply with one JSON object as specified.")
        for hook in self._hooks["after_action"]:
            hook(self, record)
        if self._bad_replies >= MAX_CONSECUTIVE_BAD_REPLIES:
            raise RunFailed(f"the model gave no usable reply {self._bad_replies} times in a row "
                            f"(last: {reply.error})")

    def _finish(self, end: RunEnded) -> None:
        """The one place where a run ends."""
        status = end.status
        plan = end.plan
        if plan is None and isinstance(end, LimitsExceeded):
            plan = self.degradation_plan(end.reason)
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
            self.emit("degradation", **plan.to_dict())
        for hook in self._hooks["on_finish"]:
            try:
                hook(self, self.result)
            except Exception as exc:
                self.emit("error", message=f"on_finish hook failed: {type(exc).__name__}: {exc}")
        self.emit("run_end", status=status, answer=answer, reason=end.reason)
        self.backend.forget(self.id)

    def best_answer(self) -> str | None:
        """The best answer so far: the last successful observation."""
        for record in reversed(self.records):
            if record.ok and record.output:
                return record.output[:2000]
        return None

    def degradation_plan(self, reason: str, tried: list[str] | None = None,
                         recommendations: list[str] | None = None) -> GracefulDegradationPlan:
        spent = self.budget.spent
        if recommendations is None:
            recommendations = []
            if "cost" in reason:
                recommendations.append("raise max_cost_usd (run.override(confirm=True, max_cost_usd=...)) "
                                       "or use a cheaper model")
            if "time" in reason:
                recommendations.append("raise max_duration_seconds or split the task into smaller ones")
            if "recursive" in reason:
                recommendations.append("raise max_recursive_calls or ask for fewer samples")
            recommendations.append("read the partial result and the trace before running again")
        return GracefulDegradationPlan(
            reason=reason, partial_result=self.best_answer(),
            explanation=f"The run stopped after {self.iteration} iteration(s): {reason}.",
            recommendations=recommendations, cost_usd=spent.cost_usd, duration_s=self.elapsed,
            calls=spent.calls, iterations=self.iteration, tried=list(tried or []),
        )

    # --- the trace --------------------------------------------------------------------
    def trace(self) -> dict[str, Any]:
        """The run as a JSON-serialisable dict: the ``application/vnd.memfit.run+json`` payload."""
        spent = self.budget.spent
        g = self.budget.guarantees  # the run's own: an override may have raised them
        return {
            "version": TRACE_VERSION,
            "run_id": self.id,
            "task": self.task,
            "model": self.agent.model,
            "tiers": self.agent.tiers,
            "status": self.status,
            "answer": self.result.answer if self.result else None,
            "reason": self.result.reason if self.result else "",
            "started_at": self.started_at,
            "settings": self.agent.settings(),
            "workdir": self.prompt_workdir,
            "limits": {"max_cost_usd": g.max_cost_usd, "max_duration_seconds": g.max_duration_seconds,
                       "max_recursive_calls": g.max_recursive_calls,
                       "max_iterations": self.agent.max_iterations},
            "totals": {
                "cost_usd": spent.cost_usd,
                "tokens": {"prompt": spent.prompt_tokens, "completion": spent.completion_tokens,
                           "total": spent.prompt_tokens + spent.completion_tokens},
                "calls": spent.calls,
                "iterations": self.iteration,
                "recursive_calls": self.budget.recursive_calls,
                "duration_s": (self.result.duration_s if self.result else self.elapsed),
            },
            "events": [e.to_dict() for e in self.events],
        }

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.status} iteration={self.iteration} task={self.task[:40]!r}>"
