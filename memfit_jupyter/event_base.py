"""The machinery of typed events: the ``Event`` base, the ``@event`` class maker, the registry.

The event classes themselves are in ``events.py``; this module knows how any of
them serialises (``to_dict``), reads like a dict, and is made back from a dict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, dataclass_transform

# Fields whose values come from the wall clock; a replay takes them from its recording.
TIMING_FIELDS = ("ts", "latency_s", "duration_s")


class _Unset:
    """The value of a field that this event leaves out of its serialised form."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Any = _Unset()


def hidden(*, default: Any = None) -> Any:
    """A field that stays in the process: never serialised (trace version 1 has no place for it)."""
    return field(default=default, metadata={"trace": False})


def optional(*, default: Any = UNSET) -> Any:
    """A field that some events of a type carry and others leave out (``default=UNSET``)."""
    return field(default=default)


@dataclass(kw_only=True, slots=True)
class Event:
    """Base of every event: the iteration it belongs to and when it happened.

    ``iteration`` None means "the run's current iteration" (``emit`` fills it in);
    ``ts`` is set by ``emit`` from the run's clock.
    """

    TYPE: ClassVar[str] = ""
    #: Whether the event is part of the trace (``Guidance`` is not).
    TRACED: ClassVar[bool] = True
    _FIELDS: ClassVar[tuple[tuple[str, bool], ...]] = ()
    #: The names of ``_FIELDS``, traced or not (what ``Run.emit`` redacts).
    _FIELD_NAMES: ClassVar[tuple[str, ...]] = ()

    iteration: int | None = None
    ts: float = 0.0

    @property
    def type(self) -> str:
        return self.TYPE

    def to_dict(self) -> dict[str, Any]:
        """The serialised event: what the trace holds."""
        out: dict[str, Any] = {"type": self.TYPE, "iteration": self.iteration, "ts": self.ts}
        for name, traced in self._FIELDS:
            if traced:
                value = getattr(self, name)
                if value is not UNSET:
                    out[name] = value
        return out

    def fields(self) -> dict[str, Any]:
        """The event's own fields (serialised ones, without type, iteration and ts)."""
        d = self.to_dict()
        for key in ("type", "iteration", "ts"):
            d.pop(key)
        return d

    # Mapping-style reads, so that subscribers may treat an event as its dict.
    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return self.TYPE
        if key in self._names():
            value = getattr(self, key)
            if value is not UNSET:
                return value
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: str) -> bool:
        return self.get(key, UNSET) is not UNSET

    @classmethod
    def _names(cls) -> frozenset[str]:
        return _NAMES[cls]


_NAMES: dict[type, frozenset[str]] = {}
#: Every event class by its ``type``, in declaration order (a type may have several shapes).
REGISTRY: dict[str, list[type[Event]]] = {}

E = TypeVar("E", bound=type[Event])


@dataclass_transform(kw_only_default=True, field_specifiers=(field, hidden, optional))
def event(type_name: str, *, traced: bool = True) -> Callable[[E], E]:
    """Make an event class: a keyword-only dataclass registered under ``type_name``."""

    def wrap(cls: E) -> E:
        made = dataclass(kw_only=True, slots=True)(cls)
        made.TYPE = type_name
        made.TRACED = traced
        own = [f for f in dataclasses.fields(made) if f.name not in ("iteration", "ts")]
        made._FIELDS = tuple((f.name, f.metadata.get("trace", True)) for f in own)
        made._FIELD_NAMES = tuple(f.name for f in own)
        _NAMES[made] = frozenset(("iteration", "ts", *(f.name for f in own)))
        REGISTRY.setdefault(type_name, []).append(made)
        return made  # type: ignore[return-value]

    return wrap



def make(type_name: str, iteration: int | None = None, **fields: Any) -> Event:
    """The typed event for ``type_name`` and ``fields`` (the shape whose fields they fit).

    >>> make("note", text="hello").to_dict()["text"]
    'hello'
    """
    return make_of(type_name, iteration, fields)


def make_of(type_name: str, iteration: int | None, fields: dict[str, Any]) -> Event:
    """``make(type_name, iteration, **fields)`` with the fields as a dict (``Run.emit`` has them
    so: passed on without being unpacked and packed again)."""
    shapes = REGISTRY.get(type_name)
    if not shapes:
        raise ValueError(f"unknown event type {type_name!r}: each type is a class in memfit_jupyter.events")
    keys = fields.keys()  # a view: compared with each shape's names without making a set
    for cls in shapes:
        if keys <= _NAMES[cls]:
            return cls(iteration=iteration, **fields)
    names = ", ".join(sorted(keys - shapes[0]._names()))
    raise ValueError(f"{type_name} events have no field(s) {names}")


def from_dict(d: dict[str, Any]) -> Event:
    """A serialised event (a trace's) as its typed event again."""
    fields = {k: v for k, v in d.items() if k not in ("type", "iteration", "ts")}
    e = make(d["type"], d.get("iteration"), **fields)
    e.ts = d.get("ts", 0.0)
    return e
