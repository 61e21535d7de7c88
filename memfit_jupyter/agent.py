"""The agent: its settings, and the runs it starts.

``Agent`` holds the settings; ``agent.start(task)`` makes a ``Run`` (``run.py``);
``run.step()`` runs exactly one iteration; ``run.run()`` runs to the end.
Feature modules (reflection, memory, context, reliability) plug in as
*extensions*: objects with any of the hooks ``on_start``, ``before_iteration``,
``system_sections``, ``prompt_tail``, ``after_action``, ``on_finish`` and ``tools``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from .context.tiers import ContextConfig
from .errors import UnknownModelError
from .records import ReflectionLevel
from .reflection.config import ReflectionConfig
from .reliability.config import ReliabilityConfig
from .reliability.guarantees import ExecutionGuarantees
from .run import TRACE_VERSION, Run
from .tools import EXTENSION_TOOL_NAMES, Tool, select_tools

__all__ = ["DEFAULT_MODEL", "TRACE_VERSION", "Agent", "Run"]

DEFAULT_MODEL = "memfit/demo"
C = TypeVar("C")


def _config_classes() -> tuple[type, ...]:
    from .memory import MemoryConfig  # the memory package loads on first use

    return (ReflectionConfig, ReliabilityConfig, ContextConfig, MemoryConfig)

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
        reflection: str | ReflectionLevel | None = None,
        spin_threshold: int | None = None,
        max_consecutive_spin_warnings: int | None = None,
        detectors: dict[str, bool] | None = None,
        strategy: str | None = None,
        samples: int | None = None,
        tools: Iterable[str] | str | None = None,
        memory: Any = None,
        oracle: str | Callable[..., Any] | None = None,
        max_trials: int | None = None,
        plan: str | None = None,
        progress: str | None = None,
        context_window: int | None = None,
        failure_threshold: int | None = None,
        recovery_timeout: float | None = None,
        approve: Approver | None = None,
        ask_user: Callable[[str], str] | None = None,
        workdir: str | Path = ".",
        namespace: dict[str, Any] | None = None,
        extensions: Iterable[Any] = (),
        configs: Iterable[Any] = (),
        extra_tools: Iterable[Tool] = (),
        otel: Any = None,
        api_base: str | dict[str, str] | None = None,
        structured: str = "auto",
    ):
        """Flat keyword arguments left as None take the default of their feature's config
        (``ReflectionConfig``, ``ReliabilityConfig``, ``ContextConfig``, ``MemoryConfig``: the
        seed's numbers, written there once); a config given whole in ``configs`` (or, as before,
        among ``extensions``) wins over them."""
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
        self.extensions = list(extensions)
        given = {type(c): c for c in [*self.extensions, *configs] if type(c) in _config_classes()}
        self.configs: dict[type, Any] = {}
        rc = self._configure(ReflectionConfig, given, reflection=reflection, spin_threshold=spin_threshold,
                             max_consecutive_spin_warnings=max_consecutive_spin_warnings,
                             detectors=dict(detectors) if detectors is not None else None)
        lc = self._configure(ReliabilityConfig, given, failure_threshold=failure_threshold,
                             recovery_timeout=recovery_timeout, strategy=strategy, samples=samples)
        cc = self._configure(ContextConfig, given, max_trials=max_trials)
        self._configure(_config_classes()[-1], given)
        self.reflection = rc.reflection if rc.reflection == "auto" else ReflectionLevel.parse(rc.reflection)
        self.spin_threshold = rc.spin_threshold
        self.max_consecutive_spin_warnings = rc.max_consecutive_spin_warnings
        self.detectors = dict(rc.detectors)
        self.strategy = lc.strategy
        self.samples = lc.samples
        if isinstance(tools, str):
            tools = [t for t in tools.split(",") if t.strip()]
        self.tool_names = list(tools) if tools is not None else None
        self.extra_tools = list(extra_tools)
        self.memory = memory
        self.oracle = oracle
        self.max_trials = cc.max_trials
        self.plan = plan
        self.progress = progress
        self.context_window = context_window
        self.failure_threshold = lc.failure_threshold
        self.recovery_timeout = lc.recovery_timeout
        self.approve = approve
        self.ask_user = ask_user
        self.workdir = Path(workdir)
        self.namespace = namespace if namespace is not None else {}
        #: Live OpenTelemetry export of every run: an endpoint, a file, True (OTEL_* env), options.
        self.otel = otel
        from .llm.structured import CHOICES

        if structured not in CHOICES:
            raise ValueError(f"structured must be one of {', '.join(CHOICES)}, got {structured!r}")
        #: The base URL of an OpenAI-compatible server for every tier, or one per tier
        #: (``{"primary": ..., "fast": ..., "fallback": ...}``).
        self.api_base = api_base
        #: How structured replies are asked for: auto, tools, schema or text (``llm/structured.py``).
        self.structured = structured
        # Fail now, not at the first step, on a tool name that does not exist.
        select_tools(self.tool_names, self.extra_tools, also_known=EXTENSION_TOOL_NAMES)

    def _configure(self, cls: type[C], given: dict[type, Any], **flat: Any) -> C:
        config = given.get(cls) or cls(**{k: v for k, v in flat.items() if v is not None})
        self.configs[cls] = config
        return config

    def config(self, cls: type[C]) -> C:
        """This agent's config of a feature, e.g. ``agent.config(ReflectionConfig)``."""
        return self.configs[cls]  # type: ignore[no-any-return]

    @property
    def context_config(self) -> ContextConfig:
        """The tiered context's settings (assignable: ``agent.context_config = ContextConfig(...)``)."""
        return self.config(ContextConfig)

    @context_config.setter
    def context_config(self, value: ContextConfig) -> None:
        self.configs[ContextConfig] = value
        self.max_trials = value.max_trials

    @property
    def tiers(self) -> dict[str, str]:
        return {"primary": self.model, "fast": self.fast_model or "", "fallback": self.fallback_model or ""}

    def model_options(self) -> dict[str, dict[str, Any]]:
        """litellm keyword arguments per model of the tiers (their ``api_base``)."""
        per_tier = isinstance(self.api_base, dict)
        bases: dict[str, Any] = self.api_base if per_tier else {t: self.api_base for t in self.tiers}  # type: ignore[assignment]
        options: dict[str, dict[str, Any]] = {}
        for tier, model in self.tiers.items():
            base = bases.get(tier)
            if model and base and not model.startswith("memfit/"):
                options.setdefault(model, {"api_base": base})
        return options

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
            "api_base": self.api_base, "structured": self.structured,
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
    def from_settings(cls, settings: dict[str, Any]) -> Agent:
        """An agent with the settings a trace records (``trace["settings"]``, ``Agent.settings()``):
        its limits become the agent's ``guarantees``; every other key is a keyword argument."""
        settings = dict(settings)
        g = ExecutionGuarantees(
            max_cost_usd=settings.pop("max_cost_usd", 1.0),
            max_duration_seconds=settings.pop("max_duration_seconds", 300.0),
            max_recursive_calls=settings.pop("max_recursive_calls", 20),
        )
        return cls(guarantees=g, **settings)

    @classmethod
    def replay(cls, trace: dict[str, Any], **overrides: Any) -> Run:
        """A run that replays ``trace`` offline: the recording answers for the model, the tools,
        the memory and the clock (``replay.py``), so its events equal the recording's and it
        writes nothing.  Not started: call ``run()`` or ``step()``."""
        from .reliability.breakers import breakers_for
        from .replay import RECORDED_ORACLE, Recording

        if not isinstance(trace, dict) or not isinstance(trace.get("events"), list) or "task" not in trace:
            raise ValueError("not a memfit trace: a dict with 'task' and 'events' is expected")
        recording = Recording(trace)
        settings = dict(trace.get("settings") or {})
        models: dict[str, str] = {}
        if trace.get("parent"):  # a fork: its parent's settings up to its fork step (fork.py)
            from .fork import replay_setup

            settings, models = replay_setup(trace)
        # The memory the recording saw answers its searches; no store is opened or written.
        settings["memory"] = recording.store() if settings.pop("memory", False) else False
        if recording.has("trial"):  # the oracle's verdicts are in the recorded observations
            settings["oracle"] = RECORDED_ORACLE
        settings.update(overrides)
        agent = cls.from_settings(settings)
        run = Run(agent, trace["task"], backend=recording.backend({**models, **agent.tiers}), tools=recording.tools(),
                  run_id=trace.get("run_id"), started_at=trace.get("started_at"))
        run.parent = trace.get("parent")
        # Breakers tell when the next probe is due: on the recorded time, they say what they said.
        clock = recording.clock()
        clock.run = run
        run.clock = clock
        breakers_for(agent).clock = clock.now
        # The prompt names the recorded working directory, so a replay elsewhere sends the same text.
        if trace.get("workdir"):
            run.prompt_workdir = trace["workdir"]
        return run


def _check_model_cheaply(model: str) -> None:
    """Reject what is clearly not a model string without importing litellm."""
    if not isinstance(model, str) or not model.strip() or any(c.isspace() for c in model.strip()):
        raise UnknownModelError(f"invalid model {model!r}: expected provider/model, e.g. memfit/demo")
    if model.startswith("memfit/"):
        from .llm.scenarios import load_scenario

        load_scenario(model.split("/", 1)[1])


