"""memfit-jupyter: watch, steer and teach self-correcting LLM agents inside Jupyter.

``%load_ext memfit_jupyter`` registers ``%%memfit_task``, ``%memfit_memory``,
``%memfit`` and ``%memfit_demo`` (a failure mode of ``catalogue()``, on and off).
The Python API works without Jupyter::

    from memfit_jupyter import Agent
    result = Agent(model="memfit/demo").start("add up data.txt").run()

Importing this package is cheap: names load on first use, and litellm,
IPython, ipywidgets and usearch load only when something needs them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .version import __version__ as __version__

_EXPORTS = {
    "Agent": ".agent",
    "AgentConfig": ".config",
    "Run": ".agent",
    "ExecutionGuarantees": ".reliability.guarantees",
    "ReflectionLevel": ".records",
    "SynthesisStrategy": ".records",
    "RecursiveResult": ".records",
    "BudgetMetrics": ".records",
    "GracefulDegradationPlan": ".records",
    "ActionRecord": ".records",
    "RunResult": ".records",
    "ToolResult": ".records",
    "Tool": ".tools",
    "Param": ".tools",
    "Event": ".events",
    "scenarios": ".llm.scenarios",
    "catalogue": ".study.catalogue",
    "MemfitError": ".errors",
    "UnknownModelError": ".errors",
    "UnknownScenarioError": ".errors",
    "UnknownToolError": ".errors",
    "PathOutsideWorkdirError": ".errors",
    "StoreError": ".errors",
    "MemoryStore": ".memory",
    "MemoryEntity": ".memory",
    "load_trajectory": ".trajectories",
    "TrajectoryFormatError": ".trajectories",
    "analyze": ".study.analysis",
    "sweep": ".sweep",
    "compare": ".study.compare",
    "Comparison": ".study.compare",
    "blame": ".study.intervention",
    "Blame": ".study.intervention",
    "family": ".study.family",
    "Family": ".study.family",
    "ForkError": ".fork",
}

__all__ = sorted([*_EXPORTS, "load_ipython_extension", "unload_ipython_extension", "__version__"])

if TYPE_CHECKING:  # pragma: no cover
    from .agent import Agent, Run
    from .config import AgentConfig
    from .errors import (
        MemfitError,
        PathOutsideWorkdirError,
        StoreError,
        UnknownModelError,
        UnknownScenarioError,
        UnknownToolError,
    )
    from .events import Event
    from .fork import ForkError
    from .jupyter.ipython import Shell
    from .llm.scenarios import scenarios
    from .memory import MemoryEntity, MemoryStore
    from .records import (
        ActionRecord,
        BudgetMetrics,
        GracefulDegradationPlan,
        RecursiveResult,
        ReflectionLevel,
        RunResult,
        SynthesisStrategy,
        ToolResult,
    )
    from .reliability.guarantees import ExecutionGuarantees
    from .study.analysis import analyze
    from .study.catalogue import catalogue
    from .study.compare import Comparison, compare
    from .study.family import Family, family
    from .study.intervention import Blame, blame
    from .sweep import sweep
    from .tools import Param, Tool
    from .trajectories import TrajectoryFormatError, load_trajectory


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memfit_jupyter' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


def load_ipython_extension(ipython: Shell) -> None:
    """``%load_ext memfit_jupyter``: register the magics (litellm is not imported)."""
    from .jupyter.magics import load

    load(ipython)


def unload_ipython_extension(ipython: Shell) -> None:
    from .jupyter.magics import unload

    unload(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "memfit-jupyter"}]
