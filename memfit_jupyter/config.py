"""One home for an agent's settings: ``AgentConfig``, and the options made from it.

``AgentConfig`` holds what a run is set to do: the model tiers, the limits, and one config
per feature (``ExecutionGuarantees``, ``ReflectionConfig``, ``ReliabilityConfig``,
``ContextConfig``, ``MemoryConfig``), each of which writes its defaults once and documents
every field with a ``#:`` comment.  ``Agent(model, config=AgentConfig(...))`` takes it whole;
``Agent``'s flat keyword arguments (``spin_threshold=4``, ``max_cost_usd=0.5``) are names for
fields of it (``FLAT``).

``OPTIONS`` lists the ``%%memfit_task`` options.  Each one that sets a field takes its type,
default and help from that field, so the magic's options and help (``jupyter/magics.py``),
the ``%config MemfitMagics`` traitlets (``jupyter/config.py``), the flags of
``python -m memfit_jupyter run`` and the README's table of options are all made from the
fields.  The README's table is written by::

    python -m memfit_jupyter.config --write

and a test fails when it drifts.  Reading the options imports none of the feature packages
(``%load_ext`` stays fast): the defaults and ``#:`` comments are read from the config classes'
source, and a test checks they equal the imported classes' own.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .llm.structured import StructuredMode
from .records import ReflectionLevel, SynthesisStrategy
from .sandbox import SANDBOX_CHOICES

if TYPE_CHECKING:
    from .context.tiers import ContextConfig
    from .memory import MemoryConfig
    from .reflection.config import ReflectionConfig
    from .reliability.config import ReliabilityConfig
    from .reliability.guarantees import ExecutionGuarantees
    from .tool_policy import ToolPolicy

__all__ = ["AgentConfig", "DEFAULT_MODEL", "FIRST_DEFAULTS", "FLAT", "OPTIONS", "Option", "REFLECTION_CHOICES", "SETTINGS",
           "TIERS", "agent_kwargs", "api_base_of", "check_models", "check_plan", "feature_classes", "options_table", "settings_of"]

C = TypeVar("C")

#: The offline scripted model used when no model is given.
DEFAULT_MODEL = "memfit/demo"
#: ``reflection=``: "auto" (the decision tree) or a level of ``ReflectionLevel`` by name.
AUTO = "auto"
REFLECTION_CHOICES = (AUTO, *(level.name.lower() for level in ReflectionLevel))

#: Where each feature's config class lives (a module of this package, its class): the
#: options read their fields' defaults and comments from there without importing it.
FEATURES: dict[str, tuple[str, str]] = {
    "guarantees": ("reliability.guarantees", "ExecutionGuarantees"),
    "reflection": ("reflection.config", "ReflectionConfig"),
    "reliability": ("reliability.config", "ReliabilityConfig"),
    "context": ("context.tiers", "ContextConfig"),
    "memory": ("memory", "MemoryConfig"),
    "tool_policy": ("tool_policy", "ToolPolicy"),
}


def _feature(name: str) -> Callable[[], Any]:
    """A default factory that makes the feature's config with its defaults, importing its
    package only then."""
    def make() -> Any:
        module, cls = FEATURES[name]
        return getattr(__import__(f"{__package__}.{module}", fromlist=[cls]), cls)()

    make.__name__ = f"default_{name}"
    return make


@functools.cache
def feature_classes() -> dict[type, str]:
    """Each feature's config class, with the field of ``AgentConfig`` that holds it (this imports
    the feature packages)."""
    return {type(_feature(name)()): name for name in FEATURES}


@dataclass
class AgentConfig:
    """Everything a run is set to do; ``Agent(model, config=AgentConfig(...))``.

    >>> from memfit_jupyter.reflection.config import ReflectionConfig
    >>> AgentConfig(max_iterations=8, reflection=ReflectionConfig(spin_threshold=4)).reflection.spin_threshold
    4

    ``config(ReflectionConfig)`` is the feature config of that class (``config.reflection``).
    """

    #: Any litellm model string, or `memfit/<scenario>` for an offline scripted model.
    model: str = DEFAULT_MODEL
    #: The fast tier, for cheap calls (sub-queries, samples).
    fast_model: str | None = None
    #: The tier that answers while a tier's circuit breaker is open.
    fallback_model: str | None = None
    #: Base URL of an OpenAI-compatible server (a local llama.cpp, vLLM or Ollama) for every
    #: tier, e.g. http://127.0.0.1:8080/v1, or one per tier (`{"primary": ..., "fast": ...}`).
    api_base: str | dict[str, str] | None = None
    #: How structured replies are asked for: tools (native tool calls), schema (a JSON schema
    #: in `response_format`), text (JSON in the reply, repaired); auto: by what the model supports.
    structured: str = StructuredMode.AUTO.value
    #: Most iterations a run may take.
    max_iterations: int = 20
    #: Unusable replies in a row (not the JSON asked for, after the client's re-asks) that fail
    #: the run; 0: never (each one costs an iteration, and the limits bound them). Calls that
    #: reach no model (every tier failing or its breaker open) fail it at the third in a row.
    max_bad_replies: int = 0
    #: The tools the agent may use (names, or one comma-separated string).
    tools: list[str] | None = None
    #: Where the long-term memory store lives: a path or a postgresql:// URL (in Python also
    #: False for none, or a MemoryStore).
    store: Any = None
    #: The failure diary: a shell command that checks the result (exit 0 = pass) after each
    #: trial (in Python also a callable).
    oracle: str | Callable[..., Any] | None = None
    #: A plan file (features.json): long-horizon work, one feature at a time, resumable.
    plan: str | None = None
    #: The progress file of `--plan`.
    progress: str | None = None
    #: The context window in tokens of the tiered context: 70% warning, flush and recursive
    #: summary at 100%.
    context_window: int | None = None
    #: The hard limits of a run (cost, time, recursive calls).
    guarantees: ExecutionGuarantees = field(default_factory=_feature("guarantees"))
    #: Reflection and spin detection.
    reflection: ReflectionConfig = field(default_factory=_feature("reflection"))
    #: Circuit breakers and recursive sampling.
    reliability: ReliabilityConfig = field(default_factory=_feature("reliability"))
    #: The tiered context and the failure diary.
    context: ContextConfig = field(default_factory=_feature("context"))
    #: How a run uses long-term memory (where the store lives is `store`).
    memory: MemoryConfig = field(default_factory=_feature("memory"))
    #: Which tool calls wait for a person's approval, and where shell and python run.
    tool_policy: ToolPolicy = field(default_factory=_feature("tool_policy"))

    def __post_init__(self) -> None:
        if isinstance(self.tools, str):
            self.tools = [t.strip() for t in self.tools.split(",") if t.strip()]
        elif self.tools is not None:
            self.tools = list(self.tools)
        if isinstance(self.max_iterations, bool) or not isinstance(self.max_iterations, int) \
                or self.max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {self.max_iterations!r}")
        if isinstance(self.max_bad_replies, bool) or not isinstance(self.max_bad_replies, int) \
                or self.max_bad_replies < 0:
            raise ValueError(f"max_bad_replies must be 0 (never fail on them) or more, got {self.max_bad_replies!r}")
        choices = [m.value for m in StructuredMode]
        if self.structured not in choices:
            raise ValueError(f"structured must be one of {', '.join(choices)}, got {self.structured!r}")
        self.structured = StructuredMode(self.structured).value

    def __call__(self, cls: type[C]) -> C:
        """The feature config of class ``cls``: ``config(ReflectionConfig)`` is ``config.reflection``."""
        for name in FEATURES:
            value = getattr(self, name)
            if type(value) is cls:
                return value
        raise KeyError(f"{cls.__name__} is not a feature config; they are: "
                       f"{', '.join(c for _, c in FEATURES.values())}")

    def features(self) -> dict[type, Any]:
        """Each feature config by its class."""
        return {type(getattr(self, name)): getattr(self, name) for name in FEATURES}

    def get(self, path: str) -> Any:
        """The value at a dotted path: ``get("reflection.spin_threshold")``."""
        value: Any = self
        for part in path.split("."):
            value = getattr(value, part)
        return value

    def replace(self, **flat: Any) -> AgentConfig:
        """A copy with the flat settings ``flat`` (``FLAT``'s names) set; each feature config
        changed is made anew, so its checks run again (one whose fields already hold those
        values is kept: a fork passes every setting its parent started with)."""
        unknown = sorted(set(flat) - set(FLAT))
        if unknown:
            raise TypeError(f"unknown setting(s) {', '.join(unknown)}; settings are: {', '.join(FLAT)}")
        top, nested = split_flat(flat)
        for head, changes in nested.items():
            current = getattr(self, head)
            if not holds(current, changes):
                top[head] = dataclasses.replace(current, **changes)
        return dataclasses.replace(self, **top)


def holds(config: Any, fields: Mapping[str, Any]) -> bool:
    """Whether ``config``'s ``fields`` already have these values (and their types: 1 is not True)."""
    for name, value in fields.items():
        have = getattr(config, name)
        if have is not value and (type(have) is not type(value) or have != value):
            return False
    return True


#: ``Agent``'s flat keyword arguments (and a trace's settings), each the path of its field.
FLAT: dict[str, str] = {
    "model": "model", "fast_model": "fast_model", "fallback_model": "fallback_model",
    "max_iterations": "max_iterations", "max_bad_replies": "max_bad_replies",
    "max_cost_usd": "guarantees.max_cost_usd", "max_duration_seconds": "guarantees.max_duration_seconds",
    "max_recursive_calls": "guarantees.max_recursive_calls",
    "reflection": "reflection.reflection", "spin_threshold": "reflection.spin_threshold",
    "max_consecutive_spin_warnings": "reflection.max_consecutive_spin_warnings",
    "spin_warnings": "reflection.spin_warnings", "detectors": "reflection.detectors",
    "strategy": "reliability.strategy", "samples": "reliability.samples",
    "tools": "tools", "max_trials": "context.max_trials", "context_window": "context_window",
    "failure_threshold": "reliability.failure_threshold", "recovery_timeout": "reliability.recovery_timeout",
    "memory": "store", "memory_triage": "memory.triage_at", "memory_recall": "memory.recall_bytes", "api_base": "api_base", "structured": "structured",
    "oracle": "oracle", "plan": "plan", "progress": "progress",
    "approve_tools": "tool_policy.approve_tools", "sandbox": "tool_policy.sandbox",
}
def split_flat(flat: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Flat settings (names of ``FLAT``) as ``AgentConfig``'s own fields and, per feature
    config, that config's fields: ``({"model": ...}, {"memory": {"triage_at": ...}})``."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        head, _, tail = FLAT[name].partition(".")
        if tail:
            nested.setdefault(head, {})[tail] = value
        else:
            top[head] = value
    return top, nested


#: The settings a trace records (``Agent.settings()``), in this order.
SETTINGS = ("model", "fast_model", "fallback_model", "max_iterations", "max_cost_usd", "max_duration_seconds",
            "max_recursive_calls", "reflection", "spin_threshold", "max_consecutive_spin_warnings", "detectors",
            "strategy", "samples", "tools", "max_trials", "context_window", "failure_threshold",
            "recovery_timeout", "memory", "api_base", "structured", "max_bad_replies", "memory_triage",
            "memory_recall", "spin_warnings", "approve_tools", "sandbox")
#: Settings no trace records: the person's files and commands (a plan, its progress file, the
#: failure diary's oracle; a trace names its oracle in its header, ``fork._oracle_of`` checks it).
NEVER_RECORDED = tuple(name for name in FLAT if name not in SETTINGS)


def check_recorded(settings: Mapping[str, Any]) -> None:
    """ValueError (one line) when a trace's ``settings`` name one that no trace records: a
    replay or a fork made from them would read and write that file, or run that command, on
    the word of a file that may come from anywhere."""
    named = [name for name in NEVER_RECORDED if settings.get(name) not in (None, False, "")]
    if named:
        raise ValueError(f"the trace's settings name {', '.join(f'{n}={settings[n]!r}' for n in named)}, which no "
                         "run's trace records (a plan, a progress file or an oracle is the person's to give): "
                         "the trace was edited; remove them from it")


#: Settings that traces recorded before the setting existed, with the value their runs had: a
#: replay or a fork of such a trace runs as its run did (``Agent.from_settings``).
RECORDED_BEFORE: dict[str, Any] = {"max_bad_replies": 3, "memory_triage": "events", "memory_recall": 0,
                                   "spin_warnings": "prompt", "approve_tools": "auto", "sandbox": "none"}


#: The defaults memfit first came with, where today's differ (each changed from a measurement:
#: docs/EVIDENCE.md): ``Agent(**FIRST_DEFAULTS)`` runs as the first builds did.
FIRST_DEFAULTS: dict[str, Any] = {"reflection": "auto", "detectors": {"logic_spin": True},
                                  "max_consecutive_spin_warnings": 3, "max_bad_replies": 3, "memory_triage": "events",
                                  "spin_warnings": "prompt"}


def recorded_detectors(detectors: Mapping[str, bool]) -> dict[str, bool]:
    """The detectors a run with the setting ``detectors`` records: the off-by-default ones named."""
    from .reflection.config import DETECTORS_OFF

    return {**{name: False for name in DETECTORS_OFF}, **detectors}


def as_run(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a trace's run had where they differ from what the trace records (``settings``,
    empty for none): one recorded before a setting existed ran with ``RECORDED_BEFORE``'s value,
    and one whose ``detectors`` names none of ``reflection.config.DETECTORS_OFF`` was recorded when
    they were on by default."""
    from .reflection.config import DETECTORS_OFF

    if not settings:
        return {}
    ran = {name: value for name, value in RECORDED_BEFORE.items() if name not in settings}
    detectors = settings.get("detectors")
    if isinstance(detectors, Mapping) and not any(name in detectors for name in DETECTORS_OFF):
        ran["detectors"] = {**{name: True for name in DETECTORS_OFF}, **detectors}
    return ran


def settings_of(config: AgentConfig) -> dict[str, Any]:
    """The serialisable settings of ``config``, as a trace records them."""
    out = {name: config.get(FLAT[name]) for name in SETTINGS}
    level = out["reflection"]
    out["reflection"] = level if isinstance(level, str) else ReflectionLevel.parse(level).name.lower()
    out["detectors"] = recorded_detectors(out["detectors"])
    out["memory"] = out["memory"] is not False
    return out


# --- the fields as the source writes them ----------------------------------------------------

@dataclass(frozen=True)
class FieldDoc:
    """A config field as its class's source writes it: its default (when a literal) and the
    text of its ``#:`` comment."""

    name: str
    annotation: str
    doc: str
    default: Any = dataclasses.MISSING


@functools.cache
def field_docs(module: str, cls: str) -> dict[str, FieldDoc]:
    """The fields of class ``cls`` in this package's ``module`` ("reflection.config"), read from
    the source: the ``#:`` comment lines right above each field, and its default when it is a
    literal.  Nothing is imported."""
    base = Path(__file__).resolve().parent.joinpath(*module.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    source = path.read_text(encoding="utf-8")
    # Only the class is parsed (from its line to the next one at the margin): a few milliseconds.
    found_class = re.search(rf"^class {cls}\b", source, re.M)
    if found_class is None:
        raise LookupError(f"no class {cls} in {path}")
    rest = source[found_class.start():]
    after = re.search(r"\n(?=\S)", rest)
    source = rest[:after.start()] if after else rest
    lines = source.splitlines()
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    found: dict[str, FieldDoc] = {}
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        doc: list[str] = []
        row = item.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#:"):
            doc.insert(0, lines[row].strip()[2:].strip())
            row -= 1
        default: Any = dataclasses.MISSING
        if item.value is not None:
            try:
                default = ast.literal_eval(item.value)
            except ValueError:
                # names are this module's: another module's name would mean something else here
                default = _named_default(item.value) if module == "config" else dataclasses.MISSING
        found[item.target.id] = FieldDoc(item.target.id, ast.unparse(item.annotation), " ".join(doc), default)
    return found


def _named_default(value: ast.expr) -> Any:
    """A default written as a name of this module or an attribute of one (``DEFAULT_MODEL``,
    ``StructuredMode.AUTO.value``); anything else is not read (MISSING)."""
    if isinstance(value, ast.Attribute):
        owner = _named_default(value.value)
        return dataclasses.MISSING if owner is dataclasses.MISSING else getattr(owner, value.attr,
                                                                               dataclasses.MISSING)
    if isinstance(value, ast.Name):
        return vars(sys.modules[__name__]).get(value.id, dataclasses.MISSING)
    return dataclasses.MISSING


def field_of(path: str) -> FieldDoc:
    """The field at a dotted path of ``AgentConfig`` ("reflection.spin_threshold")."""
    head, _, tail = path.partition(".")
    if not tail:
        return field_docs("config", "AgentConfig")[head]
    return field_docs(*FEATURES[head])[tail]


# --- the options ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Option:
    """One option of ``%%memfit_task``: its flag, the setting it fills (a name of ``FLAT``), and
    where else it appears (a ``%config MemfitMagics`` traitlet, a flag of the CLI's ``run``).

    An option with a setting takes its type, default and help from that setting's field; the
    others (switches of the magic) say their own."""

    flag: str
    #: The flat setting it fills (``FLAT``); None: the option is the magic's own.
    setting: str | None = None
    metavar: str | None = None
    #: Help of an option without a setting (with one: the field's comment).
    text: str = ""
    #: What the option's default is, when the field's default does not say it.
    default_text: str | None = None
    #: The same for the CLI's flag, when it differs.
    cli_default_text: str | None = None
    #: The allowed values (lowercase), when there is a fixed set.
    choices: tuple[str, ...] | None = None
    #: A switch: present or not (``store_true``).
    switch: bool = False
    #: The %config MemfitMagics traitlet (None: none).
    trait: str | None = None
    #: Also a flag of ``python -m memfit_jupyter run``.
    cli: bool = True
    #: The smallest value allowed (numbers), and whether it must be above it.
    minimum: float | None = None
    above: bool = False
    #: Other argparse keyword arguments (``nargs``, ``const``).
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def field(self) -> FieldDoc | None:
        return field_of(FLAT[self.setting]) if self.setting else None

    @property
    def type(self) -> type:
        """The value's type: int, float, str, or bool for a switch."""
        if self.switch:
            return bool
        f = self.field
        words = set(re.findall(r"\w+", f.annotation)) if f else set()
        return int if "int" in words else float if "float" in words else str

    @property
    def default(self) -> Any:
        f = self.field
        return False if self.switch else (None if f is None or f.default is dataclasses.MISSING else f.default)

    @property
    def help(self) -> str:
        """What the option does (plain text; ``code`` marks stay)."""
        f = self.field
        return (f.doc if f and f.doc else self.text).replace("``", "`")

    def default_shown(self, cli: bool = False) -> str:
        """The default as a person reads it (of the CLI's flag, with ``cli``)."""
        if cli and self.cli_default_text is not None:
            return self.cli_default_text
        if self.default_text is not None:
            return self.default_text
        value = self.default
        if self.switch or value is None:
            return "off" if self.switch else "none"
        return f"`{value}`" if isinstance(value, str) else str(value)

    def argparse_kwargs(self, cli: bool = False) -> dict[str, Any]:
        """Keyword arguments of ``ArgumentParser.add_argument`` (every default None: unset), for
        the magic or (``cli``) the CLI."""
        text = f"{self.help} (default {self.default_shown(cli).replace('`', '')})"
        kwargs: dict[str, Any] = {"help": text.replace("%", "%%"), "dest": self.dest}
        if self.switch:
            kwargs["action"] = "store_true"
            return kwargs
        kwargs["metavar"] = self.metavar
        if self.choices:
            kwargs["choices"] = self.choices
        elif self.type is not str:
            kwargs["type"] = self.type
        kwargs.update(self.extra)
        return kwargs


_LEVELS = "|".join(REFLECTION_CHOICES)
#: ``%%memfit_task``'s options, in the order of its help and of the README's table.
OPTIONS: tuple[Option, ...] = (
    Option("--model", "model", "M", trait="model",
           default_text=f"`MemfitMagics.model`, `$MEMFIT_MODEL`, then `{DEFAULT_MODEL}` (with a note)",
           cli_default_text=f"`{DEFAULT_MODEL}`"),
    Option("--fast-model", "fast_model", "M", trait="fast_model", default_text="the primary model"),
    Option("--fallback-model", "fallback_model", "M", trait="fallback_model"),
    Option("--api-base", "api_base", "URL", trait="api_base", default_text="each provider's own"),
    Option("--fast-api-base", None, "URL", "Base URL for the fast tier only.", "`--api-base`",
           trait="fast_api_base"),
    Option("--fallback-api-base", None, "URL", "Base URL for the fallback tier only.", "`--api-base`",
           trait="fallback_api_base"),
    Option("--structured", "structured", "MODE", choices=tuple(m.value for m in StructuredMode), trait="structured"),
    Option("--max-iterations", "max_iterations", "N", trait="max_iterations", minimum=1),
    Option("--max-cost", "max_cost_usd", "USD", trait="max_cost_usd", minimum=0, above=True),
    Option("--max-duration", "max_duration_seconds", "S", trait="max_duration_seconds", minimum=0, above=True),
    Option("--max-calls", "max_recursive_calls", "N", trait="max_recursive_calls", minimum=0),
    Option("--reflection", "reflection", "LEVEL", choices=REFLECTION_CHOICES, trait="reflection"),
    # ReflectionConfig.spin_threshold is at least 2 (one action is no repetition): the same bound here.
    Option("--spin-threshold", "spin_threshold", "N", trait="spin_threshold", minimum=2),
    Option("--spin-judge", switch=True,
           text="Ask the model to judge layer 1's spin findings (layer 2, the `logic_spin` detector; "
                "off by default, `detectors={\"logic_spin\": True}` in Python)."),
    # reflection.config.SPIN_WARNINGS, written out: reading the options imports no feature package
    Option("--spin-warnings", "spin_warnings", "WHERE", choices=("view", "prompt"), trait="spin_warnings"),
    Option("--strategy", "strategy", "S", choices=tuple(s.value for s in SynthesisStrategy), trait="strategy"),
    Option("--samples", "samples", "K", trait="samples", minimum=1),
    Option("--tools", "tools", "NAME,NAME...", trait="tools", default_text="all"),
    Option("--approve", text="Each tool call waits for Approve / Reject in the widget (`--approve-tools always`).",
           switch=True, cli=False),
    Option("--approve-tools", "approve_tools", "KIND|NAME,...", trait="approve_tools"),
    Option("--sandbox", "sandbox", "MODE", choices=SANDBOX_CHOICES, trait="sandbox"),
    Option("--memory", "memory", "PATH", trait="memory_path",
           default_text="`.memfit/` in the working directory"),
    Option("--no-memory", text="Run without long-term memory.", switch=True),
    # memory.triage.TRIAGE_AT, written out: reading the options imports no feature package
    Option("--memory-triage", "memory_triage", "WHEN", choices=("rules", "end", "events"), trait="memory_triage"),
    Option("--memory-recall", "memory_recall", "BYTES", trait="memory_recall", minimum=0),
    Option("--oracle", "oracle", "CMD", trait="oracle", default_text="off"),
    Option("--max-trials", "max_trials", "N", trait="max_trials", minimum=1),
    Option("--plan", "plan", "FILE", trait="plan", default_text="off"),
    Option("--progress", "progress", "FILE", trait="progress", default_text="`progress.md`"),
    Option("--context-window", "context_window", "N", trait="context_window", minimum=1,
           default_text="the model's"),
    Option("--step", text="Start paused: Step (or `run.step()` in a later cell) runs one iteration.",
           switch=True, cli=False),
    Option("--name", metavar="VAR", text="Bind the `Run` to this variable in your namespace.", cli=False),
    Option("--quiet", text="Show only the final summary.", switch=True, cli=False),
    Option("--otel", metavar="ENDPOINT|FILE", cli=False, default_text="off (`otel_endpoint`)",
           text="Export the run live as OpenTelemetry spans: an OTLP/HTTP endpoint, a file (OTLP/JSON), "
                "or bare: `MemfitMagics.otel_endpoint`, then `$OTEL_EXPORTER_OTLP_ENDPOINT`.",
           extra=(("nargs", "?"), ("const", True))),
)


#: Where a fork's memory writes go: an overlay of its parent's store, or that store itself.
FORK_MEMORY_MODES = ("overlay", "write-through")

#: A fork's options on a command line (``%memfit fork``, ``python -m memfit_jupyter fork``): each
#: flag with its ``ArgumentParser.add_argument`` keyword arguments; ``fork_changes`` reads them.
FORK_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--at", {"type": int, "required": True, "metavar": "K", "help": "the first step that runs live"}),
    ("--guidance", {"metavar": "TEXT", "help": "step K's prompt carries this where a reflection goes"}),
    ("--observation", {"metavar": "TEXT", "help": "what step K's tool gives back (the tool does not run)"}),
    ("--action", {"metavar": "JSON", "help": 'step K\'s action instead of the model\'s: {"tool": ..., "params": ...}'}),
    ("--model", {"metavar": "M", "help": "the model from step K on"}),
    ("--reflection", {"metavar": "LEVEL", "help": "the reflection level from step K on"}),
    ("--spin-threshold", {"type": int, "metavar": "N", "help": "the spin detector's threshold from step K on"}),
    ("--max-iterations", {"type": int, "metavar": "N", "help": "the iteration limit from step K on"}),
    ("--max-cost", {"type": float, "metavar": "USD", "help": "the cost limit from step K on"}),
    ("--api-base", {"metavar": "URL", "help": "the model server from step K on (a saved trace's own is used only "
                                              "once this process has called it)"}),
    ("--oracle", {"metavar": "CMD", "help": "the failure diary's oracle command from step K on (a saved trace's own "
                                            "is run only once this process has run it)"}),
    ("--approve-tools", {"metavar": "KIND|NAME,...", "help": "which tool calls wait for a person from step K on (a "
                                                           "saved trace's own is kept only where it asks as much "
                                                           "as the default)"}),
    ("--sandbox", {"choices": SANDBOX_CHOICES, "help": "where shell and python run from step K on"}),
    ("--memory", {"metavar": "|".join(FORK_MEMORY_MODES) + "|STORE", "default": "overlay",
                  "help": "where the fork's memory writes go: an overlay of the parent's store (default), that "
                          "store itself (write-through), or an overlay of the store at this folder or URL"}),
    ("--workdir", {"metavar": "DIR", "help": "the fork's working folder (default: a new temporary one)"}),
)


def fork_changes(values: dict[str, Any], unquote: Callable[[str], str] = str) -> dict[str, Any]:
    """``Agent.fork``'s changes from the parsed ``FORK_FLAGS`` (``--at``, ``--memory`` and
    ``--workdir`` are its own arguments).  ``unquote``: what a text option goes through (IPython
    keeps a quoted option's quotes).  ValueError with one line when ``--action`` is not JSON."""
    changes: dict[str, Any] = {}
    for key in ("guidance", "observation", "model", "reflection", "spin_threshold", "max_iterations", "api_base",
                "oracle", "approve_tools", "sandbox"):
        value = values.get(key)
        if value is not None:
            changes[key] = unquote(value) if isinstance(value, str) else value
    if values.get("max_cost") is not None:
        changes["max_cost_usd"] = values["max_cost"]
    if values.get("action") is not None:
        try:
            changes["action"] = json.loads(unquote(values["action"]))
        except ValueError as exc:
            raise ValueError(f"--action must be JSON such as {{\"tool\": \"read_file\", \"params\": "
                             f"{{\"path\": \"x\"}}}}: {exc}") from None
    return changes


#: Blame's options on a command line (``%memfit blame``, ``python -m memfit_jupyter blame``): each
#: flag with its ``ArgumentParser.add_argument`` keyword arguments.
BLAME_FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--budget", {"type": float, "metavar": "USD",
                  "help": "what the forks may spend together, a hard limit (default: 3x the run's cost)"}),
    ("--oracle", {"metavar": "CMD", "help": "shell command run in each fork's folder (exit 0 = success)"}),
    ("--api-base", {"metavar": "URL", "help": "the forks' model server (a saved trace's own is used only once this "
                                              "process has called it)"}),
    ("--approve-tools", {"metavar": "KIND|NAME,...", "help": "which of the forks' tool calls wait for a person (a "
                                                           "saved trace's own is kept only where it asks as much "
                                                           "as the default)"}),
    ("--oracle-timeout", {"type": float, "default": None, "metavar": "S",
                          "help": "seconds the oracle command may judge one fork; then it is killed (default 300)"}),
)


def check_bounds(values: Mapping[str, Any], options: Iterable[Option] = OPTIONS) -> None:
    """ValueError with one line for the first option below its minimum (``values`` by dest)."""
    for opt in options:
        value = values.get(opt.dest)
        if opt.minimum is None or value is None:
            continue
        if (opt.above and value <= opt.minimum) or (not opt.above and value < opt.minimum):
            bound = f"greater than {opt.minimum:g}" if opt.above else f"at least {opt.minimum:g}"
            raise ValueError(f"{opt.flag} must be {bound}, got {value:g}")


def agent_kwargs(values: Mapping[str, Any], workdir: str | Path = ".") -> dict[str, Any]:
    """``Agent`` keyword arguments from option values by dest (None: unset): the magic's and the
    CLI's one reading of their options.  ``--no-memory`` and ``--memory`` contradict each other;
    ``--spin-judge`` switches the layer-2 detector on; ``--api-base`` may be a JSON object of
    tier -> URL (``api_base_of``), and the per-tier base URLs become one ``api_base`` mapping.

    A plan file (``--plan``, relative to ``workdir``, where the agent will work) is read and
    checked here (``check_plan``): the run would read it only once started,
    after writing the scenario's files and its memory, and fail with them left behind.  Bad
    values are a ValueError with one line."""
    if values.get("memory") and values.get("no_memory"):
        raise ValueError("--memory and --no-memory contradict each other: give one")
    kwargs = {opt.setting: values[opt.dest] for opt in OPTIONS
              if opt.setting and values.get(opt.dest) is not None}
    if values.get("no_memory"):
        kwargs["memory"] = False
    if values.get("spin_judge"):
        kwargs["detectors"] = {"logic_spin": True}
    base = api_base_of(values.get("api_base"))
    if base is not None:
        kwargs["api_base"] = base
    own = {tier: values[f"{tier}_api_base"] for tier in ("fast", "fallback") if values.get(f"{tier}_api_base")}
    if own:
        # The base given for every tier (or per tier) serves the others unless they have their own.
        shared = dict(base) if isinstance(base, dict) else {tier: base for tier in TIERS if base}
        kwargs["api_base"] = {**shared, **own}
    for key in ("reflection", "strategy", "structured"):
        if isinstance(kwargs.get(key), str):
            kwargs[key] = kwargs[key].lower()
    if kwargs.get("plan"):
        check_plan(Path(workdir), kwargs["plan"], kwargs.get("model") or DEFAULT_MODEL)
    return kwargs


def check_plan(workdir: Path, plan: str, model: str) -> None:
    """PlanError (a ValueError) with one line when ``plan`` (in ``workdir``) is not a plan file:
    missing, a folder, unreadable, not a JSON list of features.  A scripted scenario
    (``memfit/plan-demo``) places its own plan there when the run starts: a missing file it will
    place is no error."""
    path = workdir / plan
    if model.startswith("memfit/") and not path.exists():
        from .llm.scenarios import load_scenario

        placed = load_scenario(model.split("/", 1)[1]).files  # an unknown scenario: its own one line
        if any((workdir / rel).resolve() == path.resolve() for rel in placed):
            return
    from .context.longhorizon import load_plan

    load_plan(path)


#: The model tiers, the keys of a per-tier ``api_base`` (``Agent.tiers``).
TIERS = ("primary", "fast", "fallback")


def api_base_of(value: Any) -> Any:
    """``--api-base`` as ``Agent`` takes it: a URL for every tier as it is, or, for a value that
    starts with "{", the JSON object of tier -> URL it writes (``{"primary": "http://..."}``, as
    ``run --help`` and the README say): taken as a URL, such a text would be sent as one.  A
    malformed one is a ValueError with one line, which quotes none of its URLs (one may hold a
    password)."""
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return value
    from .errors import json_error_text

    how = f"a JSON object of tier -> URL (tiers: {', '.join(TIERS)})"
    try:
        bases = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"--api-base is not valid JSON ({json_error_text(exc)}): give a URL or {how}") from None
    if not isinstance(bases, dict) or not bases:
        raise ValueError(f"--api-base names no tier: give a URL or {how}")
    unknown = [str(tier) for tier in bases if tier not in TIERS]
    if unknown:
        raise ValueError(f"--api-base names unknown tier(s) {', '.join(unknown)}: give {how}")
    for tier, url in bases.items():
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"--api-base: the URL of tier {tier} must be a non-empty string, "
                             f"got {'an empty one' if isinstance(url, str) else type(url).__name__}")
    return bases


def check_models(kwargs: Mapping[str, Any]) -> None:
    """UnknownModelError (a ValueError) with one line for a tier's model no provider serves, before
    the run starts: a run would find out at its first call, after writing its memory.  A
    ``memfit/`` scenario is checked by ``Agent`` itself, without litellm; only another model
    imports it (the run would anyway)."""
    models = [kwargs.get(name) for name in ("model", "fast_model", "fallback_model")]
    if not any(isinstance(m, str) and m and not m.startswith("memfit/") for m in models):
        return
    from .llm.backend import check_model

    for model in models:
        if isinstance(model, str) and model and not model.startswith("memfit/"):
            check_model(model)


def _written(opt: Option) -> str:
    """The option as one writes it: ``--max-cost USD``, ``--otel [ENDPOINT|FILE]``."""
    if opt.switch or not opt.metavar:
        return opt.flag
    return f"{opt.flag} [{opt.metavar}]" if opt.extra else f"{opt.flag} {opt.metavar}"


def usage(width: int = 92) -> str:
    """The usage of ``%%memfit_task``, every option in brackets, wrapped at ``width``."""
    head = "%%memfit_task "
    lines, line = [], head
    for word in (f"[{_written(opt)}]" for opt in OPTIONS):
        if len(line) + len(word) > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(head)
        line += word + " "
    lines.append(line.rstrip())
    return "\n".join([*lines, "<the task, in plain language, on the following lines>"])


def options_table() -> str:
    """The README's usage of ``%%memfit_task`` and table of its options (Markdown)."""
    bar = chr(92) + "|"  # a | inside a table cell
    rows = ["```", usage(), "```", "", "| option | default | what it does |", "|---|---|---|"]
    for opt in OPTIONS:
        rows.append(f"| `{_written(opt).replace('|', bar)}` | {opt.default_shown()} | {opt.help.replace('|', bar)} |")
    return "\n".join(rows)


README = Path(__file__).resolve().parent.parent / "README.md"
TABLE_START = "<!-- %%memfit_task options: python -m memfit_jupyter.config --write -->"
TABLE_END = "<!-- end of the %%memfit_task options -->"


def readme_with_table(text: str) -> str:
    """``text`` (the README) with its options table replaced by ``options_table()``."""
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    return f"{text[:start]}\n{options_table()}\n{text[end:]}"


if __name__ == "__main__":  # pragma: no cover - the README's table, written or printed
    if "--write" in sys.argv[1:]:
        README.write_text(readme_with_table(README.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote the options table into {README}")
    else:
        print(options_table())
