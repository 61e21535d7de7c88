"""The trace's JSON Schema, generated from the event classes, and TypeScript types from the schema.

``trace_schema()`` is the schema of ``Run.trace()`` (``application/vnd.memfit.run+json``):
one definition per event class of ``events.py`` (its serialised fields; ``optional()``
fields are not required, ``hidden()`` fields are not there).  ``typescript()`` turns
it into the types the JupyterLab extension compiles with (``labextension/src/trace-types.ts``);
a test fails when that file and the Python classes drift apart.  Regenerate it with::

    python -m memfit_jupyter.schema --write
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from pathlib import Path
from typing import Any

from . import events as ev

SCHEMA_ID = "https://memfit.invalid/schema/trace-v1.json"
TS_PATH = Path(__file__).resolve().parent.parent / "labextension" / "src" / "trace-types.ts"
#: The widget protocol's types, from ``jupyter/protocol.py`` (``protocol_typescript()``).
PROTOCOL_TS_PATH = TS_PATH.with_name("protocol-types.ts")
_SCALARS: dict[Any, dict[str, Any]] = {str: {"type": "string"}, int: {"type": "integer"},
                                       float: {"type": "number"}, bool: {"type": "boolean"},
                                       type(None): {"type": "null"}}


def _json_type(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a Python annotation (the subset the event classes use)."""
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [_json_type(a) for a in args]
        if all(m.keys() <= {"type", "items", "additionalProperties"} and not m.get("items")
               and not m.get("additionalProperties") for m in members):
            # plain types (str | None, str | dict[str, Any]): one list of types, which a validator
            # checks at once, where anyOf tries each branch in turn
            return {"type": [m["type"] for m in members]}
        return {"anyOf": members}
    if origin is list:
        return {"type": "array", "items": _json_type(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object", "additionalProperties": _json_type(args[1]) if len(args) == 2 else {}}
    raise TypeError(f"no JSON Schema for the annotation {hint!r}")


def _def_name(cls: type) -> str:
    return cls.__name__ + "Event"


def event_schema(cls: type[ev.Event]) -> dict[str, Any]:
    """The schema of one serialised event of class ``cls``."""
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {"type": {"const": cls.TYPE}, "iteration": {"type": "integer"},
                             "ts": {"type": "number"}}
    required = ["type", "iteration", "ts"]
    for f in dataclasses.fields(cls):
        if f.name in ("iteration", "ts") or not f.metadata.get("trace", True):
            continue
        props[f.name] = _json_type(hints[f.name])
        if f.default is not ev.UNSET:
            required.append(f.name)
    return {"type": "object", "description": " ".join((cls.__doc__ or "").split()), "properties": props,
            "required": required, "additionalProperties": False}


def traced_classes() -> list[type[ev.Event]]:
    """Every event class that appears in traces, in catalogue order."""
    return [cls for shapes in ev.REGISTRY.values() for cls in shapes if cls.TRACED]


def live_classes() -> list[type[ev.Event]]:
    """The event classes sent to a live view only, never kept in a trace (``ModelDelta``)."""
    return [cls for shapes in ev.REGISTRY.values() for cls in shapes if not cls.TRACED]


def settings_schema() -> dict[str, Any]:
    """The schema of a trace's ``settings``: the limits a replay applies are typed (from
    ``ExecutionGuarantees``' fields and ``max_iterations``); other settings are free."""
    from .reliability.guarantees import ExecutionGuarantees

    hints = typing.get_type_hints(ExecutionGuarantees)
    props = {f.name: _json_type(hints[f.name]) for f in dataclasses.fields(ExecutionGuarantees)}
    return {"type": "object", "properties": {**props, "max_iterations": {"type": "integer"}}}


def header_schema() -> dict[str, Any]:
    """The trace's schema without the events' definitions (``trace.Trace.load`` checks each event
    against its own class's schema, so that an error names the event)."""
    schema = {k: v for k, v in trace_schema().items() if k not in ("$defs", "$schema", "$id")}
    schema["properties"] = {**schema["properties"], "events": {"type": "array"}}
    return schema


def trace_schema() -> dict[str, Any]:
    """The JSON Schema of a trace (``Run.trace()``)."""
    defs = {_def_name(cls): event_schema(cls) for cls in traced_classes()}
    number = {"type": "number"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "memfit run trace (application/vnd.memfit.run+json)",
        "type": "object",
        "required": ["version", "task", "events"],
        "properties": {
            "version": {"const": 1},
            "run_id": {"type": "string"},
            "task": {"type": "string"},
            "model": {"type": "string"},
            "tiers": {"type": "object", "additionalProperties": {"type": "string"}},
            "status": {"type": "string"},
            "answer": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "reason": {"type": "string"},
            "started_at": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "settings": settings_schema(),
            "workdir": {"type": "string"},
            "limits": {"type": "object", "additionalProperties": number},
            "totals": {"type": "object"},
            "events": {"type": "array", "items": {"$ref": "#/$defs/TraceEvent"}},
            # where an imported run came from (load_trajectory) and what analyze found
            "source": {"type": "object"},
            "analysis": {"type": "object"},
            # a fork's parent ({run, at, changes, ...}) and a run's forks made in its process (fork.py)
            "parent": {"type": "object"},
            "forks": {"type": "array", "items": {"type": "object"}},
            # the failure diary's oracle ({command} or {callable}), and where the run's store was
            "oracle": {"type": "object"},
            "memory_store": {"type": "object"},
        },
        "$defs": {"TraceEvent": {"anyOf": [{"$ref": f"#/$defs/{name}"} for name in defs]}, **defs},
    }


# --- TypeScript ---------------------------------------------------------------------------
def _ts(schema: dict[str, Any]) -> str:
    if "const" in schema:
        return json.dumps(schema["const"]).replace('"', "'")
    if "anyOf" in schema:
        return " | ".join(_ts(s) for s in schema["anyOf"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[1]
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_ts({"type": k}) for k in kind)
    if kind == "array":
        inner = _ts(schema.get("items", {}))
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if kind == "object":
        value = schema.get("additionalProperties", {})
        return f"Record<string, {_ts(value) if isinstance(value, dict) else 'unknown'}>"
    return {"string": "string", "integer": "number", "number": "number", "boolean": "boolean",
            "null": "null"}.get(kind or "", "unknown")


def typescript(schema: dict[str, Any] | None = None) -> str:
    """TypeScript declarations of the trace schema (what ``labextension/src/trace-types.ts`` holds)."""
    schema = schema or trace_schema()
    defs = {k: v for k, v in schema["$defs"].items() if k != "TraceEvent"}
    lines = ["// Generated from memfit_jupyter/events.py by `python -m memfit_jupyter.schema --write`.",
             "// Do not edit: a test fails when this file and the Python event classes differ.", ""]
    for name, d in defs.items():
        if d.get("description"):
            lines.append(f"/** {d['description']} */")
        lines.append(f"export interface {name} {{")
        for prop, s in d["properties"].items():
            mark = "" if prop in d["required"] else "?"
            lines.append(f"  {prop}{mark}: {_ts(s)};")
        lines += ["}", ""]
    lines.append("/** Any event of a trace. */")
    lines.append("export type TraceEvent =")
    lines += [f"  | {name}" for name in defs]
    lines[-1] += ";"
    lines += ["", "/** A saved run: `Run.trace()`, the application/vnd.memfit.run+json payload. */",
              "export interface Trace {"]
    for prop, s in schema["properties"].items():
        mark = "" if prop in schema["required"] else "?"
        lines.append(f"  {prop}{mark}: {_ts(s)};")
    lines += ["}", ""]
    for cls in live_classes():  # the live view's own messages: typed like the rest, outside Trace
        d = event_schema(cls)
        lines.append(f"/** Live only, never in a trace: {d['description']} */")
        lines.append(f"export interface {_def_name(cls)} {{")
        for prop, s in d["properties"].items():
            lines.append(f"  {prop}{'' if prop in d['required'] else '?'}: {_ts(s)};")
        lines += ["}", ""]
    return "\n".join(lines)


# --- the widget protocol --------------------------------------------------------------------
def _protocol_ts(hint: Any, names: dict[Any, str]) -> str:
    """The TypeScript of an annotation of ``jupyter/protocol.py`` (named types by their names)."""
    for value, name in names.items():
        if hint is value:
            return name
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a).replace('"', "'") for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_protocol_ts(a, names) for a in args)
    if origin is list:
        inner = _protocol_ts(args[0], names)
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if origin is dict:
        return f"Record<string, {_protocol_ts(args[1], names)}>"
    return _ts(_json_type(hint))


def protocol_typescript() -> str:
    """TypeScript declarations of the widget's messages, its controls and the memory and compare
    payloads (what ``labextension/src/protocol-types.ts`` holds), from ``jupyter/protocol.py``."""
    from .jupyter import protocol as p

    names: dict[Any, str] = {p.ActionName: "ActionName", **{cls: cls.__name__ for cls in p.TYPES}}
    lines = ["// Generated from memfit_jupyter/jupyter/protocol.py by `python -m memfit_jupyter.schema --write`.",
             "// Do not edit: a test fails when this file and the Python protocol differ.", "",
             "/** The actions the front end may ask for (`{action: name, ...}`). */",
             f"export type ActionName = {_protocol_ts(p.ActionName, {})};",
             f"export const ACTION_NAMES: ActionName[] = {json.dumps(list(p.ACTIONS))};".replace('"', "'"), "",
             "/** The figures of `run.estimate()` that the view shows. */",
             f"export const ESTIMATE_KEYS: (keyof Estimate)[] = {json.dumps(list(p.ESTIMATE_KEYS))};"
             .replace('"', "'"), ""]
    for cls in p.TYPES:
        lines.append(f"/** {' '.join((cls.__doc__ or '').split())} */")
        lines.append(f"export interface {cls.__name__} {{")
        hints = typing.get_type_hints(cls)
        for field, hint in hints.items():
            mark = "" if field in cls.__required_keys__ else "?"
            lines.append(f"  {field}{mark}: {_protocol_ts(hint, names)};")
        lines += ["}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--write" in args:
        TS_PATH.write_text(typescript())
        PROTOCOL_TS_PATH.write_text(protocol_typescript())
        print(f"wrote {TS_PATH} and {PROTOCOL_TS_PATH}")
    elif "--ts" in args:
        print(typescript(), end="")
    else:
        print(json.dumps(trace_schema(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
