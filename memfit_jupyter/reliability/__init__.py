"""Reliability (docs/MECHANISMS.md §4): execution guarantees, circuit breakers, confidence-weighted synthesis,
and the guards of ``guards.py`` (off unless switched on).

``extension_for(run)`` plugs it into every run: the run's model calls go
through its agent's per-tier breakers (the ``breakers`` service), the ``sub_query``
tool is added, shell commands get no more time than the run has left, and a
limit that a sub-query ran into ends the run (degraded) once its observation
is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..extension import Hooks
from .config import ReliabilityConfig

if TYPE_CHECKING:
    from ..protocols import RunView
    from ..records import ActionRecord
    from ..tools import Tool



class ReliabilityExtension(Hooks):
    """The run's hooks for reliability; provides ``breakers`` (the run's model calls go through them)."""

    def __init__(self, run: RunView):
        from .breakers import RunBreakers, breakers_for
        from .recursive import SubQueryTool

        self.breakers = RunBreakers(breakers_for(run.agent), run.emit)
        self.sub_query = SubQueryTool()
        config = run.agent.config(ReliabilityConfig) if hasattr(run.agent, "config") else ReliabilityConfig()
        self.shell_timeout_s = getattr(run.tool_context, "shell_timeout_s", config.shell_timeout_s)
        from .guards import monitor_for

        self.guards = monitor_for(run)  # None unless a GuardConfig switches a guard on

    def provides(self) -> dict[str, Any]:
        return {"breakers": self.breakers}

    def on_start(self, run: RunView) -> None:
        # litellm takes seconds to import on a first call: import it now, under the run's time
        # budget, so that the import is not a model call's (a timeout the breakers would count).
        from .guarantees import load_model_library

        load_model_library(run)

    def tools(self) -> list[Tool]:
        from ..tools import BUILTIN_TOOLS

        guarded = self.guards.tools(BUILTIN_TOOLS["finish"]) if self.guards is not None else []
        return [self.sub_query.tool(), *guarded]

    def before_iteration(self, run: RunView) -> None:
        # A shell command must not outlive the run's time budget.
        left = max(0.05, run.budget.remaining_time())
        run.tool_context.shell_timeout_s = min(self.shell_timeout_s, left)

    def after_action(self, run: RunView, record: ActionRecord) -> None:
        if self.guards is not None:
            self.guards.after_action(run, record)
        stopped, self.sub_query.stopped = self.sub_query.stopped, None
        if stopped is not None:
            raise stopped


def extension_for(run: RunView) -> ReliabilityExtension:
    return ReliabilityExtension(run)
