"""The travelling report: one self-contained, offline HTML file that draws a run (or a
comparison of two) with the full interactive view, for a bug report, a lesson or a paper's
appendix.

The page holds the trace as JSON and the run view's own renderer (the labextension's
TypeScript, bundled without JupyterLab: ``labextension/src/report.ts``, built into
``memfit_jupyter/report_static/memfit-report.js``), inlined: no CDN, no server, no network.
Open it from disk in any browser; it follows the reader's light or dark preference.

>>> run.to_html("report.html")                      # doctest: +SKIP
>>> compare(a, b).to_html("pair.html")              # doctest: +SKIP
>>> %memfit export run report.html                  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import shlex
from html import escape
from pathlib import Path
from typing import Any

from ..secrets import redact_obj

#: The bundled renderer the page inlines (built with the labextension: ``jlpm build``).
SCRIPT = Path(__file__).resolve().parents[1] / "report_static" / "memfit-report.js"


def _payload(obj: Any) -> tuple[str, dict[str, Any], str]:
    """(kind, data, title) of what a report draws: a run, a trace or a comparison."""
    if callable(getattr(obj, "payload", None)):  # a comparison (compare.Comparison)
        return "compare", obj.payload(), f"memfit compare: {obj.labels[0]} vs {obj.labels[1]}"
    if isinstance(obj, dict):
        if not isinstance(obj.get("events"), list):
            raise ValueError("not a memfit trace: a dict with a list of 'events' is expected")
        trace = obj
    elif callable(getattr(obj, "trace", None)):
        trace = obj.trace()
    else:
        raise TypeError(f"a report draws a run, a trace or a comparison, got {type(obj).__name__}")
    return "run", trace, f"memfit run {trace.get('run_id', '')}: {str(trace.get('task') or '')[:80]}"


def _script_text(text: str) -> str:
    """Text safe inside a <script> element: nothing in it can close the element.  ``<\\/`` and
    ``\\u003c!--`` mean the same as ``</`` and ``<!--`` in a JSON or JavaScript string, where alone
    such text occurs."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE).replace("<!--", "\\u003c!--")


def report_html(obj: Any) -> str:
    """The report page of a run, a trace or a comparison, as one HTML string."""
    kind, data, title = _payload(obj)  # what it is asked to draw is checked first
    if not SCRIPT.is_file():
        raise FileNotFoundError(f"the report's renderer is not built ({SCRIPT}): run `jlpm build` in labextension/")
    # A trace given as a dict, or another agent's run, may not have been redacted as a run's events are.
    payload = json.dumps({"kind": kind, "data": redact_obj(data)}, ensure_ascii=False, default=str)
    from ..version import __version__

    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        # Nothing may be fetched: the page is whole as it is.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{escape(title)}</title></head><body>"
        "<div id=\"memfit-report\">Loading the run view… (it needs JavaScript)</div>"
        f"<div class=\"memfit-report-footer\">memfit-jupyter {escape(__version__)} · a self-contained report: "
        "the trace and its viewer are in this file</div>"
        f"<script type=\"application/json\" id=\"memfit-report-data\">{_script_text(payload)}</script>"
        f"<script>{_script_text(SCRIPT.read_text(encoding='utf-8'))}</script>"
        "</body></html>\n"
    )


def write_report(obj: Any, path: str | Path) -> Path:
    """Write the report of ``obj`` (a run, a trace or a comparison) to ``path``; returns the path.
    The page is built whole before the file is written, so a failure leaves no half-written file."""
    page = report_html(obj)
    target = Path(path).expanduser()
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a folder: give the report's file name, e.g. {target / 'report.html'}")
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(target)
    return target


def export_magic(namespace: dict[str, Any], line: str) -> Path:
    """``%memfit export RUN PATH``: RUN names a run, a trace or a comparison in the namespace.
    Returns the file written; the magic says so."""
    from IPython.core.error import UsageError

    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%memfit export: {exc}") from None
    if len(words) != 2:
        raise UsageError("usage: %memfit export RUN PATH (RUN: a variable holding a run, a trace or a comparison)")
    name, path = words
    if name not in namespace:
        raise UsageError(f"%memfit export: no variable {name!r} (use --name NAME on %%memfit_task to keep a run)")
    try:
        target = write_report(namespace[name], path)
    except (TypeError, ValueError, OSError) as exc:
        raise UsageError(f"%memfit export: {exc}") from None
    return target
