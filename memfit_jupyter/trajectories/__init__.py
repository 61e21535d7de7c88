"""Runs recorded by other agents, as memfit traces.

``load_trajectory(path_or_dict, format="auto")`` reads a mini-swe-agent
``.traj.json`` (1.x and 2.x), a SWE-agent ``.traj``, an OpenHands event
stream, or OpenTelemetry GenAI / OpenInference spans as OTLP/JSON, and returns
a trace with the same schema as ``Run.trace()`` (``version``, ``events``...)
plus ``source`` naming the format.  The widget, the JupyterLab renderer,
``analyze`` and the spin detectors all read it like a run of memfit's own.

Anything else fails with one ``TrajectoryFormatError`` line that names the
formats; a trace is returned whole or not at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from ..errors import json_error_text
from ..secrets import redact_obj
from ..trace import MAX_DEPTH, Trace, TraceError, is_trace, too_deep
from . import mini_swe, openhands, otlp, swe_agent
from .common import (
    FORMAT_NAMES,
    TrajectoryFormatError,
    classify_command,
    command_program,
    format_error,
)

__all__ = ["FORMATS", "TrajectoryFormatError", "classify_command", "command_program", "detect_format",
           "load_trajectory", "read_json"]

class Importer(Protocol):
    """What each format's module gives: whether parsed JSON is in its format, and the trace of it."""

    def looks_like(self, data: Any) -> bool: ...

    def convert(self, data: Any, *, meta: dict[str, Any] | None = None) -> dict[str, Any]: ...


#: Importers by format name, in the order ``format="auto"`` tries them.
_IMPORTERS: dict[str, Importer] = {
    "mini-swe-agent": mini_swe,
    "swe-agent": swe_agent,
    "otlp": otlp,
    "openhands": openhands,
}
FORMATS = (*_IMPORTERS, "memfit")


def detect_format(data: Any) -> str:
    """The format name of already parsed JSON; raises ``TrajectoryFormatError`` when none fits."""
    if is_trace(data):
        return "memfit"
    for name, module in _IMPORTERS.items():
        if module.looks_like(data):
            return name
    kind = type(data).__name__
    keys = ", ".join(sorted(map(str, data))[:6]) if isinstance(data, dict) else ""
    raise format_error(f"unknown trajectory format ({kind}{' with keys ' + keys if keys else ''})")


def read_json(path: str | Path) -> Any:
    """A JSON file, or JSON lines (one export per line, as OTLP file exporters write)."""
    p = Path(path)
    if not p.is_file():
        raise TrajectoryFormatError(f"no trajectory file at {p}")
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        return json.loads(text)
    except RecursionError:
        raise format_error(f"{p.name} nests deeper than JSON can be read here") from None
    except ValueError as first:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) > 1:
            try:
                return [json.loads(line) for line in lines]
            except (ValueError, RecursionError):
                pass
        raise format_error(f"{p.name} is not JSON ({json_error_text(first)})") from None


def load_trajectory(path_or_dict: str | Path | dict[str, Any] | list[Any], format: str = "auto") -> dict[str, Any]:
    """Another agent's run (a path, or its parsed JSON) as a memfit trace.

    ``format`` is ``"auto"`` or one of ``FORMATS``.  The result has
    ``trace["source"]["format"]`` and, for files, ``trace["source"]["path"]``.
    """
    meta: dict[str, Any] = {}
    if isinstance(path_or_dict, (str, Path)):
        data = read_json(path_or_dict)
        meta["path"] = str(path_or_dict)
    else:
        data = path_or_dict
    if format != "auto" and format not in FORMATS:
        raise TrajectoryFormatError(f"unknown format {format!r}; formats are: {', '.join(FORMATS)}")
    if isinstance(data, dict | list) and too_deep(data):
        raise format_error(f"the input nests more than {MAX_DEPTH} levels deep")
    name = detect_format(data) if format == "auto" else format
    if name == "memfit":
        if not is_trace(data):
            raise format_error("not a memfit trace (no version and events)")
        try:
            return Trace.load(data, unknown="warn").data  # a memfit run's events were redacted as emitted
        except TraceError as exc:
            raise TrajectoryFormatError(str(exc)) from None
    try:
        trace = _IMPORTERS[name].convert(data, meta=meta)
    except TrajectoryFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise format_error(f"malformed {FORMAT_NAMES[name]} input ({type(exc).__name__}: {exc})") from None
    # Another agent's run keeps what its tools printed, keys too: redacted once here, so that every
    # view, report, comparison and export made from it is.
    return dict(redact_obj(trace))
