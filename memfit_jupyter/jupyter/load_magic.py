"""``%memfit_load``: another agent's run (or a saved memfit trace) in the run view.

::

    %memfit_load PATH [--format F] [--analyze] [--judge MODEL] [--name VAR] [--quiet]

``PATH`` is a mini-swe-agent ``.traj.json``, a SWE-agent ``.traj``, an OpenHands
event stream or completion log, OTLP/JSON spans, or a memfit trace.  The run is
shown as a saved ``%%memfit_task`` output is (``application/vnd.memfit.run+json``
with text and HTML), so it renders in JupyterLab with no kernel.  ``--analyze``
first puts the reflection levels and spin findings on it (``memfit_jupyter.analyze``;
no model call unless ``--judge`` names one); ``--name VAR`` binds the trace.
A file that is missing or in no known format is one line of error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, magics_class

from .ipython import argument, line_magic, magic_arguments, parse_argstring, user_namespace


def bundle(trace: dict[str, Any], *, quiet: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (data, metadata) that show a trace: the run MIME type, text and HTML (redacted)."""
    from .display import trace_bundle

    return trace_bundle(trace, quiet=quiet)


def summary_line(trace: dict[str, Any]) -> str:
    source = trace.get("source") or {}
    analysis = trace.get("analysis")
    line = (f"{source.get('format', 'memfit')} run, {trace.get('totals', {}).get('iterations', '?')} steps, "
            f"status {trace.get('status')}")
    if analysis is not None:
        found = sorted({f["detector"] for f in analysis["findings"] if f["confirmed"]})
        ended = analysis.get("spin_exit")
        line += (f"; analysis: {analysis['warnings']} warning(s)"
                 + (f" ({', '.join(found)})" if found else "")
                 + (f", a memfit run would have ended at step {ended['iteration']}" if ended else ""))
    return line


@magics_class
class LoadMagics(Magics):
    @magic_arguments()
    @argument("path", help="the trajectory file")
    @argument("--format", default="auto",
              help="mini-swe-agent, swe-agent, openhands, otlp, memfit (default: auto)")
    @argument("--analyze", action="store_true", help="put reflection and spin findings on it first")
    @argument("--judge", default=None, help="a model for layer 2 (with --analyze; default: none, no calls)")
    @argument("--name", default=None, help="bind the trace to this variable")
    @argument("--quiet", action="store_true", help="the summary only, no step cards")
    @line_magic
    def memfit_load(self, line: str = "") -> None:
        """Show a run recorded by another agent (or a saved memfit trace) in the run view."""
        from ..study.analysis import analyze
        from ..trajectories import TrajectoryFormatError, load_trajectory
        from .ipython import display

        try:
            args = parse_argstring(self.memfit_load, line)
        except UsageError:
            raise
        except SystemExit:  # argparse on bad arguments
            raise UsageError(f"%memfit_load: bad arguments: {line!r}; see %memfit_load?") from None
        if args.judge and not args.analyze:
            raise UsageError("%memfit_load: --judge needs --analyze")
        path = Path(args.path.strip("'\"")).expanduser()
        try:
            trace = load_trajectory(path, format=args.format)
            if args.analyze:
                trace = analyze(trace, judge=args.judge)
        except (TrajectoryFormatError, ValueError) as exc:
            raise UsageError(f"%memfit_load: {exc}") from None
        data, metadata = bundle(trace, quiet=args.quiet)
        display({"text/plain": summary_line(trace)}, raw=True)
        display(data, metadata=metadata, raw=True)
        if args.name:
            user_namespace(self)[args.name] = trace
