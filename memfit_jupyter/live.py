"""The live world a run works in: the clock that stamps its events and the runner of its tools.

A run is given a ``protocols.Clock`` and a ``protocols.ToolRunner``; these are the live ones, a
replay's recorded ones are in ``replay.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .events import Event
from .records import ToolResult

if TYPE_CHECKING:
    from .protocols import RunView


class LiveClock:
    """Timestamps from the process's monotonic clock, relative to the run's start."""

    def stamp(self, event: Event, index: int, elapsed: float) -> None:
        event.ts = round(elapsed, 6)

    def cancelled_next(self) -> dict[str, Any] | None:
        return None  # a live run is cancelled by the person, not by a recording

    def resume_next(self, run: Any) -> bool:
        return False


class LiveTools:
    """Runs the tools for real, and places a scenario's files in the working directory.

    Before the first tool call and around each tool that may write, the working directory is
    recorded (``workspace.py``): the files the run found, and what each call changed, go into the
    observations' ``data["workspace"]``, so a fork can restore any step.
    """

    #: Whether shell and python run (in the agent's sandbox); a replay's recorded tools do not.
    runs_tools = True

    def __init__(self, recorder: Any = None):
        #: The run's ``workspace.WorkspaceRecorder`` (made on the first tool call when not given).
        self.recorder = recorder

    def place_files(self, run: RunView) -> list[str]:
        from .llm.scenarios import load_scenario

        placed = []
        for rel, content in load_scenario(run.agent.model.split("/", 1)[1]).files.items():
            target = run.tool_context.resolve(rel)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
                placed.append(rel)
        return placed

    def __call__(self, run: RunView, iteration: int, act: Any, tool: Any) -> ToolResult:
        if tool is None:
            return ToolResult(ok=False, error=f"unknown tool {act.tool!r}; available: {', '.join(sorted(run.tools))}")
        run.budget.check_time(f"tool {act.tool}")
        recorder = None if getattr(tool, "internal", False) else self._recorder(run)
        if recorder is not None:
            recorder.before(act.tool)
        result: ToolResult = tool(run.tool_context, act.params)
        record = recorder.after(act.tool) if recorder is not None else None
        if record is not None:
            from .workspace import DATA_KEY

            result.data = {**result.data, DATA_KEY: record}
        return result

    def _recorder(self, run: RunView) -> Any:
        if self.recorder is None:
            from .workspace import WorkspaceRecorder, config_of

            self.recorder = WorkspaceRecorder(run.tool_context.workdir, config_of(run.agent))
        return self.recorder
