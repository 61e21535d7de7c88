"""Settings of reflection and spin detection; each default is explained in docs/MECHANISMS.md §1-2."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..records import ReflectionLevel
from ..reliability.limits import check_number

if TYPE_CHECKING:
    from ..protocols import AgentView

#: The named detectors; each can be switched off with ``Agent(detectors={name: False})``.
DETECTORS = (
    "same_action_type",     # layer 1: the last N actions share action type and tool
    "logic_spin",           # layer 2: the model confirms a layer-1 spin
    "code_modify",          # layer 3: small modify_code edits in the same region, in a row
    "repeat_observation",   # the same action with the same observation, N times in a row
    "alternation",          # A, B, A, B: two actions taking turns
    "repeated_error",       # the same error, N times in a row
    "empty_replies",        # the model gave no usable reply, N times in a row
    "edit_rerun",           # edit, rerun the same check, the same failing result, N cycles
    "monologue",            # N messages in a row with no observation (OpenHands' pattern)
    "context_window",       # N context condensations in a row (OpenHands' pattern)
)
#: Detectors that are off unless ``detectors`` names them on: the layer-2 judge, whose model call
#: paid for nothing measured (docs/EVIDENCE.md).  A trace records each of them, on or off
#: (``config.settings_of``); one that names none of them ran with them on (``config.as_run``).
DETECTORS_OFF = ("logic_spin",)
#: "progress": detectors that ask for repetition without progress (reflection/detectors.py);
#: "repetition": the first-built detectors, which fire on repetition alone, whatever it found
#: (reflection/repetition_detectors.py).
SPIN_RULES = ("progress", "repetition")
#: Older names of the spin rules, still read (user code and saved settings may carry them).
SPIN_RULE_ALIASES = {"seed": "repetition"}
#: Where a spin warning goes: to the person only (the trace, the run view), or into the model's prompt too.
SPIN_WARNINGS = ("view", "prompt")
#: Which reflections the prompt's cache keeps, and where the cache goes in the prompt.
CACHE_KINDS = ("informative", "all")
PROMPT_PLACES = ("end", "system")


@dataclass
class ReflectionConfig:
    """How reflection and spin detection behave.  Every default is in docs/MECHANISMS.md §1-2.

    ``Agent(reflection=..., spin_threshold=..., max_consecutive_spin_warnings=...,
    detectors=...)`` fill the common fields; to change the others, give it whole::

        Agent(model="memfit/spin-demo", configs=[ReflectionConfig(iteration_threshold=8)])
    """

    #: "auto" (the decision tree) or a forced level for every action; NONE turns reflection
    #: and spin detection off.  MINIMAL by default (a record of every action, no model call):
    #: on both local models the decision tree's reflections cost more tokens per success than
    #: they won (docs/EVIDENCE.md); "auto" was the first default (config.FIRST_DEFAULTS).
    reflection: str | ReflectionLevel = "minimal"
    #: Layer 1: this many actions in a row with the same action type and tool fire it.
    spin_threshold: int = 3
    #: The decision tree's STANDARD-on-spin branch starts after this iteration (from iteration 6 on).
    iteration_threshold: int = 5
    #: Memory search depth in bytes by level (2 KB / 5 KB / 10 KB).
    memory_bytes: dict[int, int] = field(default_factory=lambda: {
        ReflectionLevel.STANDARD: 2 * 1024, ReflectionLevel.DEEP: 5 * 1024,
        ReflectionLevel.CRITICAL: 10 * 1024})
    #: How many recent reflections go into the next prompt.
    cache_size: int = 3
    #: Which reflections the prompt's cache keeps: "informative" (a model's summary or
    #: suggestions, a failure reflected on above MINIMAL, a spin when its warnings go into the
    #: prompt: a MINIMAL reflection, failed or not, tells the model nothing it has not just read)
    #: or "all" (as first built: every reflection, MINIMAL ones too).
    cache_kinds: str = "informative"
    #: Where the cached reflections go: "end" (after the timeline: they change every iteration,
    #: so the prompt before them stays a stable prefix for prompt caching) or "system" (in the
    #: system prompt, as first built).
    prompt_place: str = "end"
    #: Layer 3: edits whose start and end are within this many lines are in the same region.
    region_tolerance: int = 5
    #: Layer 3: an edit of at most this many lines is small.
    small_edit_lines: int = 3
    #: Layer 3: this many small same-region edits in a row fire it.
    code_spin_count: int = 3
    #: Layer 3: look for modify_code edits among this many recent actions.
    code_spin_window: int = 10
    #: Spin warnings given before the next confirmed spin ends the run (0 = never end it, the
    #: default: on 1,045 recorded SWE-bench runs an exit after 3, the first default, ended 4.8%
    #: of the resolved runs to save 5.7% of the failed runs' steps; docs/EVIDENCE.md).
    max_consecutive_spin_warnings: int = 0
    #: Where a confirmed spin's warning goes (SPIN_WARNINGS): "view" (the default) shows it to the
    #: person, as the spin events in the trace, the run view and its alerts, and leaves the
    #: model's prompt as it was; "prompt" also puts the warning into the model's timeline, as
    #: first built (config.FIRST_DEFAULTS). On both local models the warning in the prompt cost
    #: 1.5x a bare run's tokens at 8 iterations and changed no outcome (docs/EVIDENCE.md). A spin
    #: exit counts the spins warned of either way.
    spin_warnings: str = "view"
    #: This many iterations in a row with no spin reset the warning count.
    quiet_reset: int = 5
    #: The same action with the same observation this many times in a row (None = spin_threshold).
    repeat_observation_threshold: int | None = None
    #: The same error this many times in a row (None = spin_threshold).
    repeated_error_threshold: int | None = None
    #: A/B alternation: this many full A-B cycles fire it (3 = A, B, A, B, A, B, as OpenHands counts).
    alternation_cycles: int = 3
    #: Unusable model replies in a row that warn (the loop gives up on them only at the agent's
    #: `max_bad_replies`). Two in a row happen in 2% of healthy real runs.
    empty_replies_threshold: int = 3
    #: Detectors switched on or off by name (missing names are on, but for the layer-2 judge,
    #: logic_spin, which is off unless named: its model call cost ~1,800-2,100 tokens a run on the
    #: local models for no success measured; docs/EVIDENCE.md).
    detectors: dict[str, bool] = field(default_factory=dict)
    #: How much of the recent timeline goes into the analysis prompts.
    timeline_chars: int = 3000
    #: Which detectors decide (SPIN_RULES): "progress" asks for repetition without progress;
    #: "repetition" keeps the first-built layers, which fire on repetition alone.
    spin_rules: str = "progress"
    #: Progress: a step's output is new when not seen among this many steps before it.
    progress_window: int = 10
    #: repeat_observation: repeats count when at most this many steps apart.
    repeat_gap: int = 3
    #: edit_rerun: this many edit-then-same-result cycles fire it ...
    rerun_cycles: int = 2
    #: ... each rerun at most this many steps after its edit.
    rerun_gap: int = 6
    #: OpenHands' pattern: this many messages in a row with no observation.
    monologue_threshold: int = 3
    #: OpenHands' pattern: this many context condensations in a row.
    context_window_threshold: int = 3

    def __post_init__(self) -> None:
        if self.reflection != "auto":
            self.reflection = ReflectionLevel.parse(self.reflection)
        check_number("spin_threshold", self.spin_threshold, at_least=2, integer=True)
        check_number("max_consecutive_spin_warnings (0: never end the run)", self.max_consecutive_spin_warnings,
                     at_least=0, integer=True)
        if self.spin_warnings not in SPIN_WARNINGS:
            raise ValueError(f"spin_warnings must be one of {', '.join(SPIN_WARNINGS)}, got {self.spin_warnings!r}")
        if self.cache_kinds not in CACHE_KINDS:
            raise ValueError(f"cache_kinds must be one of {', '.join(CACHE_KINDS)}, got {self.cache_kinds!r}")
        if self.prompt_place not in PROMPT_PLACES:
            raise ValueError(f"prompt_place must be one of {', '.join(PROMPT_PLACES)}, got {self.prompt_place!r}")
        self.spin_rules = SPIN_RULE_ALIASES.get(self.spin_rules, self.spin_rules)
        if self.spin_rules not in SPIN_RULES:
            raise ValueError(f"unknown spin_rules {self.spin_rules!r}; choose one of: {', '.join(SPIN_RULES)}")
        unknown = sorted(set(self.detectors) - set(DETECTORS))
        if unknown:
            raise ValueError(f"unknown detector(s) {', '.join(unknown)}; detectors are: {', '.join(DETECTORS)}")

    def enabled(self, detector: str) -> bool:
        return bool(self.detectors.get(detector, detector not in DETECTORS_OFF))

    @property
    def forced(self) -> ReflectionLevel | None:
        return None if self.reflection == "auto" else ReflectionLevel.parse(self.reflection)

    @classmethod
    def from_agent(cls, agent: AgentView) -> ReflectionConfig:
        """The config for an agent: its own (``agent.config(ReflectionConfig)``), an explicit
        ReflectionConfig among its extensions, else one made from its settings."""
        configs = getattr(agent, "configs", None)
        own = configs.get(cls) if isinstance(configs, dict) else None
        if isinstance(own, cls):
            return own
        for ext in getattr(agent, "extensions", ()):
            if isinstance(ext, cls):
                return ext
        return cls(reflection=agent.reflection, spin_threshold=agent.spin_threshold,
                   max_consecutive_spin_warnings=agent.max_consecutive_spin_warnings,
                   spin_warnings=agent.spin_warnings,
                   detectors=dict(agent.detectors))
