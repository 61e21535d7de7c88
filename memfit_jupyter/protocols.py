"""What the engine shows the code that plugs into it: narrow views of a run, its agent, its
clock and its tool runner.

The feature packages (``context/``, ``memory/``, ``reliability/``, ``reflection/``, ``llm/``), the
tools and the trace writer annotate what they are given with these Protocols, never with the
concrete ``run.Run`` or ``agent.Agent``: they sit below the engine and do not import it, not even
for type checking.  A ``Run`` is a ``RunView``, an ``Agent`` an ``AgentView`` (and, to the run it
starts, a ``RunAgent``); the Protocols say what a hook may read and do, and mypy checks that the
engine gives it.

Types owned by a layer above this module (the model client, the budget tracker, the backends)
appear here as small Protocols of their own or as ``Any``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .events import Event
    from .records import (
        ActionRecord,
        BudgetMetrics,
        Entry,
        GracefulDegradationPlan,
        RunResult,
        ToolResult,
    )

T = TypeVar("T")


class Clock(Protocol):
    """What stamps a run's events with their times (``live.LiveClock``, ``replay.RecordedClock``)."""

    def stamp(self, event: Event, index: int, elapsed: float) -> None:
        """Set ``event``'s time; ``index`` is its place in the trace (-1: not traced), ``elapsed``
        the seconds since the run started."""
        ...

    def cancelled_next(self) -> dict[str, Any] | None:
        """A recording's ``run_end`` where the person cancelled it, when the run is there (a replay)."""
        ...

    def resume_next(self, run: Any) -> bool:
        """Once the run has ended: make the recording's choice to go on (a replay); whether it did."""
        ...


class ToolRunner(Protocol):
    """What runs a run's tools (``live.LiveTools``, ``replay.RecordedTools``)."""

    #: Whether shell and python run for real (and so in the agent's sandbox).
    runs_tools: bool

    def place_files(self, run: RunView) -> list[str]:
        """Place a scripted scenario's files in the working directory; the paths placed."""
        ...

    def __call__(self, run: RunView, iteration: int, act: Any, tool: Any) -> ToolResult:
        """Run ``tool`` (None: not a known tool) for the action ``act`` of ``iteration``."""
        ...


class AgentView(Protocol):
    """The settings of a run's agent that a feature reads (``agent.Agent``'s, by name)."""

    @property
    def model(self) -> str: ...

    @property
    def fast_model(self) -> str | None: ...

    @property
    def tiers(self) -> dict[str, str]: ...

    @property
    def workdir(self) -> Path: ...

    @property
    def max_iterations(self) -> int: ...

    @property
    def max_bad_replies(self) -> int: ...

    @property
    def context_window(self) -> int | None: ...

    @property
    def memory(self) -> Any: ...

    @property
    def strategy(self) -> Any: ...

    @property
    def samples(self) -> int: ...

    @property
    def oracle(self) -> Any: ...

    @property
    def max_trials(self) -> int: ...

    @property
    def failure_threshold(self) -> int: ...

    @property
    def recovery_timeout(self) -> float: ...

    @property
    def plan(self) -> Any: ...

    @property
    def progress(self) -> Any: ...

    @property
    def reflection(self) -> Any: ...

    @property
    def spin_threshold(self) -> Any: ...

    @property
    def max_consecutive_spin_warnings(self) -> Any: ...

    @property
    def spin_warnings(self) -> Any: ...

    @property
    def detectors(self) -> Any: ...

    @property
    def configs(self) -> dict[type, Any]: ...

    @property
    def extensions(self) -> list[Any]: ...

    def config(self, cls: type[Any]) -> Any:
        """The agent's config of a feature, by its class."""
        ...

    def settings(self) -> dict[str, Any]:
        """The serialisable settings, as recorded in a trace."""
        ...


class RunAgent(AgentView, Protocol):
    """What a run asks of the agent that starts it (``agent.Agent``), beyond what its features
    read: what its tools are given, and how a fork of it is made.  The settings a fork switches at
    its step (``fork.switch_settings``) are writable."""

    model: str
    fast_model: str | None
    fallback_model: str | None
    max_iterations: int
    max_trials: int
    guarantees: Any
    strategy: Any
    samples: int
    api_base: Any
    oracle: Any
    structured: str
    approve_tools: str
    sandbox: str
    namespace: dict[str, Any]
    ask_user: Callable[[str], str] | None
    #: Who decides a tool call the policy asks about (``steering.Approvals``), or None.
    approve: Callable[[dict[str, Any]], Any] | None
    extra_tools: list[Any]
    tool_names: Any
    otel: Any

    def model_options(self) -> dict[str, dict[str, Any]]:
        """Keyword arguments for the model client, per model of the tiers."""
        ...

    def fork(self, parent: Any, at: int, **changes: Any) -> Any:
        """A run whose steps before ``at`` are ``parent``'s, live from ``at`` (``fork.fork``)."""
        ...


class BudgetView(Protocol):
    """What a run has spent and may still spend (``reliability.guarantees.BudgetTracker``)."""

    spent: BudgetMetrics
    recursive_calls: int
    guarantees: Any

    def elapsed(self) -> float: ...

    def remaining_cost(self) -> float: ...

    def remaining_time(self) -> float: ...

    def check_time(self, operation: str) -> float: ...

    def check_recursive(self) -> None: ...

    def charge(self, what: str, fn: Callable[[], T]) -> T: ...


class TimelineView(Protocol):
    """What the model sees of the past (``timeline.Timeline``): its entries, and the text of them."""

    @property
    def entries(self) -> list[Entry]: ...

    def queue(self) -> list[Entry]: ...

    def text(self, since: int = 0, kinds: tuple[str, ...] | None = None, max_chars: int | None = None) -> str: ...


class RunView(Protocol):
    """What a hook, a tool or a view may read of a run and do to it (``run.Run``)."""

    @property
    def id(self) -> str: ...

    @property
    def task(self) -> str: ...

    @property
    def iteration(self) -> int: ...

    @property
    def status(self) -> str: ...

    @property
    def started_at(self) -> str: ...

    @property
    def agent(self) -> AgentView: ...

    @property
    def events(self) -> list[Event]: ...

    @property
    def records(self) -> list[ActionRecord]: ...

    @property
    def result(self) -> RunResult | None: ...

    @property
    def elapsed(self) -> float: ...

    @property
    def last_prompt(self) -> list[dict[str, str]] | None: ...

    @property
    def prompt_workdir(self) -> str: ...

    @property
    def services(self) -> dict[str, Any]: ...

    @property
    def memory(self) -> Any: ...

    @property
    def budget(self) -> BudgetView: ...

    @property
    def timeline(self) -> TimelineView: ...

    @property
    def llm(self) -> Any:
        """The run's model client (``llm.client.LLMClient``): ``call(purpose, messages, ...)``."""
        ...

    @property
    def backend(self) -> Any:
        """What answers the model calls (``llm.backend.Backend``): prices, context windows."""
        ...

    @property
    def tools(self) -> dict[str, Any]: ...

    @property
    def tool_context(self) -> Any: ...

    @property
    def extensions(self) -> Sequence[Any]: ...

    @property
    def parent(self) -> dict[str, Any] | None: ...

    @property
    def forks(self) -> Sequence[Any]: ...

    def emit(self, event: Event | str, iteration: int | None = None, **fields: Any) -> Event: ...

    def subscribe(self, callback: Callable[[Any], None], *types: type[Event]) -> Callable[[], None]: ...

    def run(self) -> RunResult: ...

    def reopen(self, note: str | None = None) -> None: ...

    def override(self, confirm: bool = False, **limits: Any) -> Any: ...

    def choose(self, index: int) -> dict[str, Any]: ...

    def next_prompt(self) -> list[dict[str, str]]: ...

    def estimate(self) -> dict[str, Any]: ...

    def best_answer(self) -> str | None: ...

    def degradation_plan(self, reason: str, tried: list[str] | None = None,
                         recommendations: list[str] | None = None, *,
                         limit: str | None = None) -> GracefulDegradationPlan: ...

    def trace(self) -> dict[str, Any]: ...
