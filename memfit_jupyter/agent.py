"""The agent: its settings, and the runs it starts.

``Agent`` holds the settings (an ``AgentConfig``, ``config.py``: its flat keyword arguments
and attributes are names of the config's fields) and what the runs are given to work with;
``agent.start(task)`` makes a ``Run`` (``run.py``);
``run.step()`` runs exactly one iteration; ``run.run()`` runs to the end.
Feature modules (reflection, memory, context, reliability) plug in as
*extensions*: objects with any of the hooks ``on_start``, ``before_iteration``,
``system_sections``, ``prompt_tail``, ``after_action``, ``on_finish`` and ``tools``.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .config import (
    DEFAULT_MODEL,
    FLAT,
    AgentConfig,
    as_run,
    check_recorded,
    feature_classes,
    field_of,
    holds,
    settings_of,
    split_flat,
)
from .context.tiers import ContextConfig
from .errors import UnknownModelError
from .reliability.guarantees import ExecutionGuarantees
from .run import TRACE_VERSION, Run
from .tools import EXTENSION_TOOL_NAMES, Tool, select_tools

__all__ = ["DEFAULT_MODEL", "TRACE_VERSION", "Agent", "AgentConfig", "Run"]

Approver = Callable[[dict[str, Any]], "bool | tuple[bool, str] | None"]


#: A setting an older trace did not record (``Agent._as_recorded``).
_UNRECORDED = object()


class _Setting:
    """An attribute of ``Agent`` that is a field of its config (``FLAT``'s name, or a path)."""

    def __init__(self, name: str):
        self.name = name
        self.path = FLAT.get(name, name)
        #: The path's names, split once: the loop reads settings at every step (the tiers...).
        self._parts = tuple(self.path.split("."))

    def __get__(self, agent: Agent | None, owner: type | None = None) -> Any:
        if agent is None:
            return self
        value: Any = agent.config  # agent.config.get(self.path)
        for part in self._parts:
            value = getattr(value, part)
        return value

    def __set__(self, agent: Agent, value: Any) -> None:
        config = agent.config
        agent.config = (config.replace(**{self.name: value}) if self.name in FLAT
                        else dataclasses.replace(config, **{self.path: value}))


class Agent:
    """An agent's settings (an ``AgentConfig``) and what it is given to work with.

    >>> agent = Agent(model="memfit/demo")
    >>> run = agent.start("what is the total of the numbers in data.txt?")
    >>> result = run.run()        # doctest: +SKIP
    """

    model = _Setting("model")
    fast_model = _Setting("fast_model")
    fallback_model = _Setting("fallback_model")
    max_iterations = _Setting("max_iterations")
    max_bad_replies = _Setting("max_bad_replies")
    guarantees = _Setting("guarantees")
    reflection = _Setting("reflection")
    spin_threshold = _Setting("spin_threshold")
    max_consecutive_spin_warnings = _Setting("max_consecutive_spin_warnings")
    spin_warnings = _Setting("spin_warnings")
    detectors = _Setting("detectors")
    strategy = _Setting("strategy")
    samples = _Setting("samples")
    tool_names = _Setting("tools")
    memory = _Setting("memory")
    memory_triage = _Setting("memory_triage")
    memory_recall = _Setting("memory_recall")
    oracle = _Setting("oracle")
    max_trials = _Setting("max_trials")
    plan = _Setting("plan")
    progress = _Setting("progress")
    context_window = _Setting("context_window")
    failure_threshold = _Setting("failure_threshold")
    recovery_timeout = _Setting("recovery_timeout")
    #: The base URL of an OpenAI-compatible server for every tier, or one per tier.
    api_base = _Setting("api_base")
    #: How structured replies are asked for: auto, tools, schema or text (``llm/structured.py``).
    structured = _Setting("structured")
    #: Which tool calls wait for a person's approval, and where shell and python run (``tool_policy.py``).
    approve_tools = _Setting("approve_tools")
    sandbox = _Setting("sandbox")

    def __init__(
        self,
        model: str | None = None,
        *,
        config: AgentConfig | None = None,
        guarantees: ExecutionGuarantees | None = None,
        configs: Iterable[Any] = (),
        extensions: Iterable[Any] = (),
        extra_tools: Iterable[Tool] = (),
        approve: Approver | None = None,
        ask_user: Callable[[str], str] | None = None,
        workdir: str | Path = ".",
        namespace: dict[str, Any] | None = None,
        otel: Any = None,
        **settings: Any,
    ):
        """``config`` is every setting at once; the keyword ``settings`` (``model``,
        ``max_iterations``, ``spin_threshold``, ``max_cost_usd``, ... : ``config.FLAT``'s names,
        the ``%%memfit_task`` options in snake_case) change fields of it, None leaving a field
        as it is.  A feature's config given whole in ``configs`` (or, as before, among
        ``extensions``), and ``guarantees``, win over the flat settings of that feature."""
        self.extensions = list(extensions)
        classes = feature_classes()
        whole = {type(c): c for c in [*self.extensions, *configs] if type(c) in classes}
        if guarantees is not None:
            whole[ExecutionGuarantees] = guarantees
        flat = {k: v for k, v in {"model": model, **settings}.items() if v is not None}
        unknown = sorted(set(flat) - set(FLAT))
        if unknown:
            raise TypeError(f"Agent() got unknown setting(s) {', '.join(unknown)}")
        if "detectors" in flat:
            flat["detectors"] = dict(flat["detectors"])
        if approve is not None and "approve_tools" not in flat:
            flat["approve_tools"] = "always"  # a callback alone is asked about every call, as it always was
        if config is not None:
            cfg = config.replace(**flat)
            self.config: AgentConfig = dataclasses.replace(cfg, **{classes[type(c)]: c for c in whole.values()}) \
                if whole else cfg
        else:
            self.config = _config_of(flat, classes, whole)
        for m in (self.model, self.fast_model, self.fallback_model):
            if m:
                _check_model_cheaply(m)
        self.extra_tools = list(extra_tools)
        self.approve = approve
        self.ask_user = ask_user
        self.workdir = Path(workdir)
        self.namespace = namespace if namespace is not None else {}
        #: Live OpenTelemetry export of every run: an endpoint, a file, True (OTEL_* env), options.
        self.otel = otel
        #: Settings its trace records as the older trace it was made from did (``from_settings``):
        #: their value there, or _UNRECORDED for one that trace left out.
        self._as_recorded: dict[str, Any] = {}
        # Fail now, not at the first step, on a tool name that does not exist.
        select_tools(self.tool_names, self.extra_tools, also_known=EXTENSION_TOOL_NAMES)

    @property
    def configs(self) -> dict[type, Any]:
        """Each feature's config by its class."""
        return self.config.features()

    @property
    def context_config(self) -> ContextConfig:
        """The tiered context's settings (assignable: ``agent.context_config = ContextConfig(...)``)."""
        return self.config.context

    @context_config.setter
    def context_config(self, value: ContextConfig) -> None:
        self.config = dataclasses.replace(self.config, context=value)

    @property
    def tiers(self) -> dict[str, str]:
        return {"primary": self.model, "fast": self.fast_model or "", "fallback": self.fallback_model or ""}

    def model_options(self) -> dict[str, dict[str, Any]]:
        """litellm keyword arguments per model of the tiers (their ``api_base``)."""
        per_tier = isinstance(self.api_base, dict)
        bases: dict[str, Any] = self.api_base if per_tier else {t: self.api_base for t in self.tiers}
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
        out = settings_of(self.config)
        for name, value in self._as_recorded.items():
            if value is _UNRECORDED:
                out.pop(name, None)
            else:
                out[name] = value
        return out

    def start(self, task: str) -> Run:
        """A new run of ``task``, not started: call ``step()`` or ``run()``."""
        if not task or not task.strip():
            raise ValueError("the task is empty: say what the agent should do")
        return _exported(Run(self, task.strip()))

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> Agent:
        """An agent with the settings a trace records (``trace["settings"]``, ``Agent.settings()``):
        each is a flat setting of ``AgentConfig`` (``config.SETTINGS``).  A trace recorded before a
        setting existed, or when some detectors were on by default, ran as ``config.as_run`` says,
        and the agent records its settings as that trace did (a replay's events stay the recording's)."""
        settings = dict(settings or {})
        ran = as_run(settings)
        agent = cls(**{**settings, **ran})
        agent._as_recorded = {name: settings.get(name, _UNRECORDED) for name in ran}
        return agent

    @classmethod
    def fork(cls, parent: Any, at: int, **changes: Any) -> Run:
        """A new run whose steps before ``at`` are ``parent``'s (a ``Run``, a trace dict or a trace
        file; from its recording: no model call, no tool run), live from step ``at`` with
        ``changes`` (``fork.fork`` says which, and its options).  ``run.fork(at, ...)`` is this for
        a run in hand.  Not started: call ``run()`` or ``step()``."""
        from .fork import fork

        return _exported(fork(parent, at, agents=cls.from_settings, **changes))  # where its parent is

    @classmethod
    def replay(cls, trace: Any, **overrides: Any) -> Run:
        """A run that replays ``trace`` (a dict, a path, a saved output: ``Trace.load``) offline: the recording answers for the model, the tools,
        the memory and the clock (``replay.py``), so its events equal the recording's and it
        writes nothing.  Not started: call ``run()`` or ``step()``."""
        from .reliability.breakers import breakers_for
        from .replay import RECORDED_ORACLE, Recording
        from .trace import Trace, TraceError

        trace = Trace.load(trace).data  # refused with one line unless it is a trace this memfit reads
        recording = Recording(trace)
        settings = dict(trace.get("settings") or {})  # config.SETTINGS: flat names of AgentConfig fields
        models: dict[str, str] = {}
        if trace.get("parent"):  # a fork: its parent's settings up to its fork step (fork.py)
            from .fork import replay_setup

            settings, models = replay_setup(trace)
        try:  # a trace does not choose a file to write or a command to run
            check_recorded(settings)
        except ValueError as exc:  # it quotes the trace, which may hold a key
            from .secrets import redact

            raise TraceError(redact(str(exc))) from None
        # The memory the recording saw answers its searches; no store is opened or written.
        settings["memory"] = recording.store() if settings.pop("memory", False) else False
        if recording.has("trial") or trace.get("oracle"):  # its verdicts are in the recorded observations
            settings["oracle"] = RECORDED_ORACLE
        settings.update(overrides)
        agent = cls.from_settings(settings)
        # The prompt names the recorded working directory, so a replay elsewhere sends the same text.
        run = Run(agent, trace["task"], backend=recording.backend({**models, **agent.tiers}), tools=recording.tools(),
                  run_id=trace.get("run_id"), started_at=trace.get("started_at"),
                  prompt_workdir=trace.get("workdir") or None)
        run.parent = trace.get("parent")
        run.recorded_oracle = trace.get("oracle")  # type: ignore[attr-defined]  # its trace says what it was
        run.recorded_memory_store = trace.get("memory_store")  # type: ignore[attr-defined]  # and where its store was
        # Breakers tell when the next probe is due: on the recorded time, they say what they said.
        clock = recording.clock()
        clock.run = run
        run.clock = clock
        breakers_for(agent).clock = clock.now
        return run



def _exported(run: Run) -> Run:
    """``run``, exported live when its agent says where (``otel=``): a started run and a fork alike."""
    if run.agent.otel:
        from .otel.live import attach

        attach(run, run.agent.otel)
    return run


def _config_of(flat: dict[str, Any], classes: dict[type, str], whole: dict[type, Any]) -> AgentConfig:
    """``AgentConfig().replace(**flat)`` with the configs given ``whole`` in place, each config made
    once: a feature config from its flat settings (its defaults for the rest), then the whole,
    so each one's checks run once, not once for its defaults and again for the copy with the
    settings.  A feature given whole wins over its flat settings; those are still checked, unless
    they are the whole config's own values (a fork's child is given both)."""
    top, nested = split_flat(flat)
    for cls, head in classes.items():  # each feature's config, from its settings or with its defaults
        changes = nested.get(head, {})
        given = whole.get(cls)
        if given is None:
            top[head] = cls(**changes)
            continue
        if not holds(given, changes):
            cls(**changes)  # a bad flat setting is refused, though the whole config wins
        top[head] = given
    return AgentConfig(**top)


def _with_flat_signature(init: Callable[..., None]) -> None:
    """``Agent.__init__``'s signature names each flat setting (``inspect``, ``help(Agent)``, the
    sweep's check of its grid keys read it), keyword-only, None: the config's."""
    sig = inspect.signature(init)
    own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    flat = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=_optional(field_of(FLAT[name]).annotation))
            for name in FLAT if name not in sig.parameters]
    init.__signature__ = sig.replace(parameters=[*own, *flat])  # type: ignore[attr-defined]


def _optional(annotation: str) -> str:
    return annotation if annotation.endswith("| None") or annotation == "Any" else f"{annotation} | None"


_with_flat_signature(Agent.__init__)

def _check_model_cheaply(model: str) -> None:
    """Reject what is clearly not a model string without importing litellm."""
    if not isinstance(model, str) or not model.strip() or any(c.isspace() for c in model.strip()):
        raise UnknownModelError(f"invalid model {model!r}: expected provider/model, e.g. memfit/demo")
    if model.startswith("memfit/"):
        from .llm.scenarios import load_scenario

        load_scenario(model.split("/", 1)[1])


