"""The trace of a run: its settings, totals and events, as one JSON-serialisable dict.

``trace_of(run)`` writes it; ``Trace.load(obj)`` is the one reader (a dict, a path, a
saved output's MIME bundle), checked against the schema generated from the event
classes (``schema.py``), its events made again as those classes.
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import MemfitError, json_error_text
from .event_base import REGISTRY, Event
from .secrets import redact_obj

if TYPE_CHECKING:
    from .protocols import RunView

#: The version of the serialised format (``application/vnd.memfit.run+json``).
TRACE_VERSION = 1


def trace_of(run: RunView) -> dict[str, Any]:
    """``run`` as the ``application/vnd.memfit.run+json`` payload (``Run.trace()``)."""
    spent = run.budget.spent
    g = run.budget.guarantees  # the run's own: an override may have raised them
    header = {
        "version": TRACE_VERSION,
        "run_id": run.id,
        "task": run.task,
        "model": run.agent.model,
        "tiers": run.agent.tiers,
        "status": run.status,
        "answer": run.result.answer if run.result else None,
        "reason": run.result.reason if run.result else "",
        "started_at": run.started_at,
        "settings": run.agent.settings(),
        "workdir": run.prompt_workdir,
        "limits": {"max_cost_usd": g.max_cost_usd, "max_duration_seconds": g.max_duration_seconds,
                   "max_recursive_calls": g.max_recursive_calls,
                   "max_iterations": run.agent.max_iterations},
        "totals": {
            "cost_usd": spent.cost_usd,
            "tokens": {"prompt": spent.prompt_tokens, "completion": spent.completion_tokens,
                       "total": spent.prompt_tokens + spent.completion_tokens, **_cached(run)},
            "calls": spent.calls,
            "iterations": run.iteration,
            "recursive_calls": run.budget.recursive_calls,
            "duration_s": (run.result.duration_s if run.result else run.elapsed),
            **_unpriced(run),
        },
        **_family(run),
        **_oracle(run),
        **_memory_store(run),
    }
    # The events were redacted when they were emitted; the rest (the task, the answer, the
    # settings) goes through the same function here.
    return {**redact_obj(header), "events": [e.to_dict() for e in run.events]}


def _oracle(run: RunView) -> dict[str, Any]:
    """``oracle``: the failure diary's oracle, when the run had one (it is in every prompt, and a
    fork of the saved run runs it from its step): ``{"command": ...}``, or ``{"callable": name}``
    for a Python function, which a saved trace cannot hold.  A replay keeps its recording's."""
    recorded = getattr(run, "recorded_oracle", None)
    if recorded is not None:
        return {"oracle": recorded}
    from .replay import RECORDED_ORACLE

    oracle = run.agent.oracle
    if oracle is None or oracle == RECORDED_ORACLE:  # a replay of a trace that named none
        return {}
    if isinstance(oracle, str):
        return {"oracle": {"command": oracle}}
    return {"oracle": {"callable": str(getattr(oracle, "__qualname__", None) or type(oracle).__name__)}}


def _memory_store(run: RunView) -> dict[str, Any]:
    """``memory_store``: where the run's long-term memory is (``memory/where.py``), so that a fork
    of the saved run reads it.  A replay keeps its recording's (it opened no store)."""
    if hasattr(run, "recorded_memory_store"):
        recorded = run.recorded_memory_store
        return {"memory_store": recorded} if recorded else {}
    where = getattr(run.memory, "where", None)  # the store says (each kind of store its own way)
    found = where() if callable(where) else None
    return {"memory_store": found} if found else {}


def _family(run: RunView) -> dict[str, Any]:
    """``parent`` (the fork this run is) and ``forks`` (its children made in this process), when
    there are any: a run tree can be drawn from saved traces alone (``fork.py``)."""
    out: dict[str, Any] = {}
    if run.parent:
        out["parent"] = run.parent
    if run.forks:
        out["forks"] = fork_summary(run)
    return out


def fork_summary(run: RunView) -> list[dict[str, Any]]:
    """The forks of ``run`` made in this process, for the run view's tree: each one's run id, the
    step it forked at, its changes, and how it ended (status, answer, cost, iterations).

    Redacted: the changes are what a person typed, kept as given in the child (its live action
    runs with them), and the tree is synced to the page and saved with the notebook."""
    out = []
    for child in run.forks:
        record = child.parent or {}
        result = child.result
        out.append(redact_obj({"run": child.id, "at": record.get("at"), "changes": record.get("changes", {}),
                               "status": child.status, "answer": result.answer if result else None,
                               "cost_usd": child.budget.spent.cost_usd, "iterations": child.iteration,
                               "exact": (record.get("workspace") or {}).get("exact", True)}))
    return out


def _cached(run: RunView) -> dict[str, int]:
    """``{"cached": n}``: the prompt tokens providers served from their prompt caches, when any
    call reported some (absent otherwise, so traces of providers that say nothing stay as they were)."""
    n = sum(getattr(e, "cached_tokens", 0) or 0 for e in run.events if e.TYPE == "model_call")
    return {"cached": n} if n else {}


def _unpriced(run: RunView) -> dict[str, list[str]]:
    """``{"unpriced": [model, ...]}``: the models called that have no known price, whose calls
    cost counts as $0 (absent when every model has one, so priced runs' traces stay as they were)."""
    prices = getattr(run.llm.backend, "prices", None)
    if prices is None:
        return {}
    models = dict.fromkeys(str(getattr(e, "model", "")) for e in run.events if e.TYPE == "model_call")
    unpriced = []
    for model in models:
        try:
            price_in, price_out = prices(model)
        except Exception:  # a backend that cannot say: the price is not known
            price_in = price_out = 0.0
        if not (price_in or price_out):
            unpriced.append(model)
    return {"unpriced": unpriced} if unpriced else {}


# --- reading --------------------------------------------------------------------------
#: The trace versions this project has written (only version 1 so far): a reader refuses others.
READ_VERSIONS = (TRACE_VERSION,)
#: Deepest nesting a trace may have.  Real traces nest a dozen levels; a deeper one is refused
#: before anything recursive (validation, redaction, JSON writing) walks it.
MAX_DEPTH = 100
#: Keys other tools put on an event beside its fields (``analyze`` marks the events it placed).
ANNOTATIONS = ("analysis",)
#: The MIME type a notebook keeps a run under (the views import it from here).
RUN_MIME = "application/vnd.memfit.run+json"


class TraceError(MemfitError, ValueError):
    """A trace that cannot be read as one: the message is one line saying what and where."""


class TraceWarning(UserWarning):
    """A trace was read, but part of it was not understood (an event type this memfit lacks)."""


def payload_of(obj: Any, name: str = "the input") -> Any:
    """The trace inside ``obj`` when it is a saved output (a MIME bundle, a notebook output with
    ``data``, or a notebook whose outputs hold one run); ``obj`` itself otherwise."""
    if isinstance(obj, dict) and isinstance(obj.get("cells"), list) and "nbformat" in obj:
        runs = [o["data"][RUN_MIME] for c in obj["cells"] if isinstance(c, dict)
                for o in c.get("outputs") or () if isinstance(o, dict) and RUN_MIME in (o.get("data") or {})]
        if len(runs) != 1:
            raise TraceError(f"{name} is a notebook with {len(runs)} memfit runs in its outputs: "
                             "one is needed (save the one you mean with run.trace())")
        return runs[0]
    if isinstance(obj, dict):
        if RUN_MIME in obj:
            return obj[RUN_MIME]
        data = obj.get("data")
        if isinstance(data, dict) and RUN_MIME in data:
            return data[RUN_MIME]
    return obj


def is_trace(obj: Any) -> bool:
    """Whether ``obj`` has the shape of a memfit trace (or a saved output holding one): a dict with
    a ``version`` and a list of ``events``.  The one test of "is this a trace?"; whether it is a
    good one is ``Trace.load``'s to say."""
    try:
        obj = payload_of(obj)
    except TraceError:  # a notebook with several runs, or none: not one trace
        return False
    return isinstance(obj, dict) and "version" in obj and isinstance(obj.get("events"), list)


def too_deep(obj: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``obj`` nests deeper than ``limit`` (walked level by level, without recursion)."""
    if not isinstance(obj, dict | list):
        return False
    level, depth = [obj], 0
    while level:
        if depth > limit:
            return True
        below = []
        for value in level:
            for item in value.values() if isinstance(value, dict) else value:
                if isinstance(item, dict | list):
                    below.append(item)
        level, depth = below, depth + 1
    return False


def _read_text(path: Path) -> str:
    """The text of the trace file at ``path``, or ``TraceError`` with one line."""
    if not path.is_file():
        raise TraceError(f"no such file: {path}" if not path.exists() else f"not a file: {path}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"{path} is not a memfit trace: it is not text") from None


def _read_json(path: Path) -> Any:
    return loads(_read_text(path), str(path))


def loads(text: str, name: str = "the input") -> Any:
    """JSON text, or ``TraceError`` with one line (also for nesting too deep to parse)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{name} is not a memfit trace: not JSON ({json_error_text(exc)})") from None
    except RecursionError:
        raise TraceError(f"{name} is not a memfit trace: it nests deeper than JSON can be read here "
                         f"(a trace nests at most {MAX_DEPTH} levels)") from None


def _check_version(data: dict[str, Any], name: str) -> None:
    if "version" not in data:
        raise TraceError(f"{name} is not a memfit trace: it has no 'version'")
    v = data["version"]
    if type(v) is not int or v not in READ_VERSIONS:
        known = ", ".join(map(str, READ_VERSIONS))
        raise TraceError(f"{name} has trace version {json.dumps(v)[:40]}; this memfit reads version {known}")


def _schema_error(exc: Exception, where: str) -> str:
    """A fastjsonschema error as 'where: field must be ...' (its ``data.`` prefix dropped)."""
    message = str(getattr(exc, "message", exc))
    return f"{where}: {message.removeprefix('data.').removeprefix('data ')}"[:300]


@functools.cache
def _header_validator() -> Callable[[Any], Any]:
    import fastjsonschema  # compiles the generated schema to Python: a 20k-step trace checks fast

    from .schema import header_schema

    return fastjsonschema.compile(header_schema())


_EVENT_VALIDATORS: dict[type[Event], Callable[[Any], Any]] = {}


def _event_validator(cls: type[Event]) -> Callable[[Any], Any]:
    """The compiled check of one event class's schema (compiled when first needed)."""
    check = _EVENT_VALIDATORS.get(cls)
    if check is None:
        import fastjsonschema

        from .schema import event_schema

        check = _EVENT_VALIDATORS[cls] = fastjsonschema.compile(event_schema(cls))
    return check


def _check_header(data: dict[str, Any], name: str) -> None:
    _check_version(data, name)
    try:
        _header_validator()(data)
    except ValueError as exc:  # fastjsonschema's JsonSchemaValueException
        raise TraceError(_schema_error(exc, f"{name} is not a valid memfit trace")) from None


def _typed(i: int, e: Any, name: str) -> Event | str:
    """Event ``i`` as its typed event, or the type name when it is of a type this memfit lacks."""
    if not isinstance(e, dict):
        raise TraceError(f"{name}: event {i} is {type(e).__name__} {json.dumps(e, default=str)[:40]}, "
                         "not an object")
    kind = e.get("type")
    shapes = [cls for cls in REGISTRY.get(kind, ()) if cls.TRACED] if isinstance(kind, str) else []
    if not shapes:
        if not isinstance(kind, str):
            raise TraceError(f"{name}: event {i} has no type")
        return kind
    if any(k in e for k in ANNOTATIONS):
        e = {k: v for k, v in e.items() if k not in ANNOTATIONS}
    keys = e.keys() - {"type", "iteration", "ts"}
    fitting = [cls for cls in shapes if keys <= cls._names()] or shapes
    first: Exception | None = None
    for cls in fitting:
        try:
            _event_validator(cls)(e)
        except ValueError as exc:  # fastjsonschema's JsonSchemaValueException
            first = first or exc
            continue
        made = cls(iteration=e["iteration"], **{k: e[k] for k in keys})
        made.ts = e["ts"]
        return made
    assert first is not None
    raise TraceError(_schema_error(first, f"{name}: event {i} ({kind})"))


@dataclass
class Trace:
    """A trace, read and checked: its serialised form (``data``) and its typed ``events``.

    ``Trace.load`` is the one reader of traces: from a dict, a path, a saved output's MIME
    bundle, or a ``Run``.  It refuses (``TraceError``, one line) what is not a trace, a version
    this memfit did not write, a field of the wrong type (against the schema generated from the
    event classes, ``schema.py``) and nesting deeper than ``MAX_DEPTH``.

    >>> Trace.load({"version": 1, "task": "t", "events": []}).task
    't'
    """

    #: The serialised trace (the dict as read: untyped readers and writers take this).
    data: dict[str, Any]
    #: Its events as the classes of ``events.py``, in order (events of unknown types left out).
    events: list[Event] = field(default_factory=list)
    #: What was read but not understood (events of unknown types, with ``unknown="warn"``).
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, obj: Any, *, unknown: str = "error", strict: bool = True) -> Trace:
        """The trace in ``obj`` (a dict, a path, a saved output's bundle, a ``Run``, a ``Trace``).

        ``unknown`` says what an event of a type this memfit lacks does: ``"error"`` refuses the
        trace (a replay cannot reproduce what it does not know); ``"warn"`` keeps it in ``data``
        (the views show it as a generic card), leaves it out of ``events`` and warns
        (``TraceWarning``) once, naming the types.

        ``strict=False`` is for a view that shows what it can of any payload (the static
        summary of a saved output): nothing is refused but what is not a trace's shape at all,
        and each event that does not fit its class is left out of ``events`` and named in
        ``warnings`` (no warning is raised: the reader that loaded the trace said it).
        """
        if isinstance(obj, Trace):
            return obj
        if not strict:
            return cls._lenient(payload_of(obj.trace() if callable(getattr(obj, "trace", None)) else obj))
        name = "the input"
        if isinstance(obj, str | Path):
            name = str(obj)
            obj = _read_json(Path(obj))
        elif callable(getattr(obj, "trace", None)):
            obj = obj.trace()
        data = payload_of(obj, name)
        if not isinstance(data, dict) or not isinstance(data.get("events"), list) or "task" not in data:
            raise TraceError(f"{name} is not a memfit trace: a JSON object with 'task' and 'events' is expected")
        if too_deep(data):
            raise TraceError(f"{name} is not a memfit trace: it nests more than {MAX_DEPTH} levels deep")
        _check_header(data, name)
        events: list[Event] = []
        unknowns: dict[str, int] = {}
        for i, e in enumerate(data["events"]):
            typed = _typed(i, e, name)
            if isinstance(typed, str):
                if unknown != "warn":
                    raise TraceError(f"{name}: event {i} has the type {typed!r}, which this memfit "
                                     "does not know (a newer version may have written it)")
                unknowns[typed] = unknowns.get(typed, 0) + 1
            else:
                events.append(typed)
        trace = cls(data, events)
        if unknowns:
            said = ", ".join(f"{k} ×{n}" for k, n in unknowns.items())
            trace.warnings.append(f"events of types this memfit does not know were kept but not read: {said}")
            warnings.warn(f"{name}: {trace.warnings[-1]}", TraceWarning, stacklevel=2)
        return trace

    @classmethod
    def _lenient(cls, data: Any) -> Trace:
        if not isinstance(data, dict) or not isinstance(data.get("events"), list):
            raise TraceError("the input is not a memfit trace: a JSON object with 'events' is expected")
        events: list[Event] = []
        skipped: list[str] = []
        for i, e in enumerate(data["events"]):
            try:
                typed = _typed(i, e, "the input")
            except TraceError as exc:
                skipped.append(str(exc))
                continue
            if isinstance(typed, str):
                skipped.append(f"event {i} has the type {typed!r}, which this memfit does not know")
            else:
                events.append(typed)
        return cls(data, events, skipped)

    @classmethod
    def read_header(cls, path: str | Path) -> dict[str, Any]:
        """The top-level fields of the trace at ``path`` without its events (``events`` is the
        number of events): the events are skipped, not parsed, so a big trace is listed fast."""
        p = Path(path)
        header = _scan_header(_read_text(p), str(p))
        _check_header({**header, "events": []}, str(p))
        return header

    # --- what readers ask first -----------------------------------------------------------
    @property
    def header(self) -> dict[str, Any]:
        """Everything but the events."""
        return {k: v for k, v in self.data.items() if k != "events"}

    @property
    def task(self) -> str:
        return str(self.data.get("task") or "")

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.data.get("settings") or {})

    def of_type(self, *types: type[E]) -> list[E]:
        """The events of the given classes, in order."""
        return [e for e in self.events if isinstance(e, types)]

    def has(self, type_name: str) -> bool:
        return any(e.TYPE == type_name for e in self.events)


E = TypeVar("E", bound=Event)

_WS = re.compile(r"\s*")
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _scan_header(text: str, name: str) -> dict[str, Any]:
    """The top-level fields of the JSON object ``text``; its ``events`` array is skipped by a
    string-aware bracket scan (and counted), never parsed."""
    decoder = json.JSONDecoder()
    out: dict[str, Any] = {}
    i = _WS.match(text).end()  # type: ignore[union-attr]
    if not text.startswith("{", i):
        raise TraceError(f"{name} is not a memfit trace: a JSON object with 'task' and 'events' is expected")
    i += 1
    try:
        while True:
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text.startswith("}", i):
                return out
            key, i = decoder.raw_decode(text, i)
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if not text.startswith(":", i):
                raise ValueError("':' expected")
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            if key == "events" and text.startswith("[", i):
                out["events"], i = _skip_array(text, i)
            else:
                out[key], i = decoder.raw_decode(text, i)
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if text.startswith(",", i):
                i += 1
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{name} is not a memfit trace: not JSON near character {i} ({exc})"[:300]) from None


def _skip_array(text: str, i: int) -> tuple[int, int]:
    """(number of objects in the array at ``i``, the index after it)."""
    depth = count = 0
    for m in _TOKENS.finditer(text, i):
        token = m.group()
        if token in "[{":
            if depth == 1 and token == "{":
                count += 1
            depth += 1
        elif token in "]}":
            depth -= 1
            if depth == 0:
                return count, m.end()
    raise ValueError("the events array does not end")
