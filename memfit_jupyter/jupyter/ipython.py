"""Typed doors to the IPython APIs the magics and displays use.

IPython's ``magic_arguments`` decorators, its ``line_magic``/``cell_magic`` markers and
``display`` carry no annotations in some IPython releases and partial ones in others.  The
magics go through these functions instead, which say what each call takes and gives back, so
that the type check reads the same whatever IPython release is installed.  Each one calls
IPython's own function: the behaviour is IPython's.

``IPython.display`` is imported on the first ``display`` call, not when the magics load.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from IPython.core import magic as _magic
from IPython.core import magic_arguments as _magic_arguments
from IPython.core.error import UsageError

F = TypeVar("F", bound=Callable[..., Any])

#: An IPython decorator seen from here: it marks the function it is given (and gives it back).
_Mark = Callable[[Callable[..., Any]], object]


def magic_arguments(name: str | None = None) -> Callable[[F], F]:
    """IPython's ``magic_arguments``: builds the magic's parser from its ``argument`` marks.
    ``name`` is the command name the usage line shows."""
    mark = cast("Callable[[str | None], _Mark]", _magic_arguments.magic_arguments)(name)

    def decorate(func: F) -> F:
        mark(func)  # IPython's decorator sets the parser on the function and returns it
        return func

    return decorate


def argument(*flags: str, **options: Any) -> Callable[[F], F]:
    """IPython's ``argument``: one ``ArgumentParser.add_argument(*flags, **options)``."""
    mark = cast("Callable[..., _Mark]", _magic_arguments.argument)(*flags, **options)

    def decorate(func: F) -> F:
        mark(func)  # adds itself to the function's list of argument marks and returns it
        return func

    return decorate


def parse_argstring(magic: Callable[..., object], line: str) -> argparse.Namespace:
    """The options of ``line`` parsed by the parser ``magic_arguments`` put on ``magic``."""
    parse = cast("Callable[[Callable[..., object], str], argparse.Namespace]", _magic_arguments.parse_argstring)
    return parse(magic, line)


def _typed(mark: _Mark) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        mark(func)  # records the method's name for ``magics_class`` and returns it
        return func

    return decorate


#: IPython's markers of a ``Magics`` method as a line, cell, or line-and-cell magic.
line_magic = _typed(cast("_Mark", _magic.line_magic))
cell_magic = _typed(cast("_Mark", _magic.cell_magic))
line_cell_magic = _typed(cast("_Mark", _magic.line_cell_magic))


def user_namespace(magics: _magic.Magics) -> dict[str, Any]:
    """The namespace of the shell the magics are registered with (where ``--name`` binds)."""
    shell = magics.shell
    if shell is None:
        raise UsageError("these magics are not registered with an IPython shell")
    namespace: dict[str, Any] = shell.user_ns
    return namespace


class ShellEvents(Protocol):
    """The shell's event hooks (``post_run_cell`` and the others)."""

    callbacks: dict[str, list[Callable[..., Any]]]

    def register(self, event: str, function: Callable[..., Any]) -> None: ...

    def unregister(self, event: str, function: Callable[..., Any]) -> None: ...


class Shell(Protocol):
    """What loading the extension uses of IPython's ``InteractiveShell``."""

    events: ShellEvents

    def register_magics(self, *objs: type[_magic.Magics]) -> None: ...


class OutputHandle(Protocol):
    """An output shown with a display id, which later updates replace in place."""

    def update(self, obj: object, *, raw: bool = ..., metadata: dict[str, Any] | None = ...) -> None: ...


def display(*objs: object, raw: bool = False, metadata: dict[str, Any] | None = None) -> None:
    """IPython's ``display``: each object (with ``raw``, each a MIME bundle) to the cell's output."""
    from IPython import display as _display

    show = cast("Callable[..., object]", _display.display)
    show(*objs, raw=raw, metadata=metadata)


def display_updatable(data: dict[str, Any], metadata: dict[str, Any]) -> OutputHandle:
    """A MIME bundle to the cell's output, with the handle that updates it in place."""
    from IPython import display as _display

    show = cast("Callable[..., OutputHandle]", _display.display)
    return show(data, raw=True, metadata=metadata, display_id=True)
