"""The interface every feature of a run plugs in through.

An extension is any object with the hooks of ``Extension``; the feature packages
(context, memory, reliability, reflection) each make one per run with their
``extension_for(run)``, in that order, and derive from ``Hooks`` so that they
declare only the hooks they use.  What an extension provides to the others
(the memory store, the context tiers, the breakers) it returns from
``provides()``: the run keeps it in ``run.services``, nothing is set on the run.

A user's own object may implement any subset of the hooks
(``Agent(extensions=[obj])``); ``adapt`` gives it the others as no-ops.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .protocols import RunView
    from .records import ActionRecord, RunResult
    from .tools import Tool

#: Feature packages that may contribute an extension to every run, in hook order.
EXTENSION_MODULES = ("context", "memory", "reliability", "reflection")
#: The hooks, in the order a run calls them.
HOOKS = ("tools", "provides", "on_start", "before_iteration", "system_sections", "prompt_tail", "after_action",
         "on_finish")


@runtime_checkable
class Extension(Protocol):
    """What the run calls, and when."""

    def tools(self) -> list[Tool]:
        """Tools this extension adds to the run (asked once, when the run is made)."""
        ...

    def provides(self) -> dict[str, Any]:
        """Services for the other extensions and the views, by name (``run.services``)."""
        ...

    def on_start(self, run: RunView) -> None:
        """The run starts (after ``run_start``); may raise ``RunEnded``."""
        ...

    def before_iteration(self, run: RunView) -> None:
        """An iteration begins, before its prompt is built."""
        ...

    def system_sections(self, run: RunView) -> list[str]:
        """Sections this extension adds to the system prompt (the stable part of every prompt)."""
        ...

    def prompt_tail(self, run: RunView) -> list[str]:
        """Sections that change from one iteration to the next: they go after the timeline, so
        the prompt before them stays the same and providers' prompt caching serves it."""
        ...

    def after_action(self, run: RunView, record: ActionRecord) -> None:
        """An action and its observation were recorded; may raise ``RunEnded``."""
        ...

    def on_finish(self, run: RunView, result: RunResult) -> None:
        """The run ended (before ``run_end``)."""
        ...


class Hooks:
    """Every hook of ``Extension``, doing nothing: derive from it and override what you use."""

    def tools(self) -> list[Tool]:
        return []

    def provides(self) -> dict[str, Any]:
        return {}

    def on_start(self, run: RunView) -> None:
        pass

    def before_iteration(self, run: RunView) -> None:
        pass

    def system_sections(self, run: RunView) -> list[str]:
        return []

    def prompt_tail(self, run: RunView) -> list[str]:
        return []

    def after_action(self, run: RunView, record: ActionRecord) -> None:
        pass

    def on_finish(self, run: RunView, result: RunResult) -> None:
        pass


class _Partial(Hooks):
    """A user's object with some of the hooks: those it has are its own, the rest do nothing."""

    def __init__(self, obj: Any):
        self.obj = obj
        for name in HOOKS:
            hook = getattr(obj, name, None)
            if callable(hook):
                setattr(self, name, hook)

    @property
    def name(self) -> str:
        return type(self.obj).__name__


def adapt(obj: Any) -> Extension:
    """``obj`` as a full ``Extension`` (itself when it has every hook)."""
    if all(callable(getattr(obj, name, None)) for name in HOOKS):
        return obj  # type: ignore[no-any-return]
    return _Partial(obj)


def name_of(ext: Any) -> str:
    """The name a trace records for an extension (its class, or the wrapped object's)."""
    return ext.name if isinstance(ext, _Partial) else type(ext).__name__


def extensions_for(run: RunView, given: Iterable[Any]) -> list[Extension]:
    """The extensions of ``run``: the agent's own (``given``), then those the feature packages
    make for it, in hook order.  What each provides goes into ``run.services`` as it comes,
    so that the next ones may use it."""
    found = [adapt(e) for e in given if not _is_config(e)]
    for ext in found:
        run.services.update(ext.provides())
    for name in EXTENSION_MODULES:
        made = importlib.import_module(f"{__package__}.{name}").extension_for(run)
        if made is not None:
            found.append(adapt(made))
            run.services.update(made.provides())
    return found


def _is_config(obj: Any) -> bool:
    """A feature's config given among the extensions (as before ``configs=``): not an extension."""
    return dataclasses.is_dataclass(obj) and not any(callable(getattr(obj, h, None))
                                                     for h in ("after_action", "before_iteration", "tools"))
