"""``%memfit_demo``: one line to demo a failure mode of the catalogue, mechanism on and off.

::

    %memfit_demo                                  the catalogue: every mode with its classes
    %memfit_demo MODE [--model M] [--dir PATH] [--name VAR] [--quiet]

``MODE`` is a mode id or its scenario's name (``%memfit_demo step-repetition``,
``%memfit_demo spin-demo``).  Under a short note on what the mode is, which published
class it belongs to and what to look at, one view holds the pair: the compare view
(``memfit_jupyter.compare``), each side drawn live while it runs and saved as the
comparison of the two runs; below it, a table that holds what each side showed against
what the catalogue says it shows.  Offline by default (the scenario's scripted model); with
``--model`` any model runs the same task and settings, and the table then tells what it
did without holding it to the scripted model's outcomes.  Each side works in its own
folder under ``--dir`` (default: a new scratch folder), with its own memory store.
"""

from __future__ import annotations

import html
import tempfile
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, magics_class

from .ipython import argument, line_magic, magic_arguments, parse_argstring, user_namespace

#: Every pair shown in this kernel, by mode id (the last one of each): its outcomes, for ``summary()``.
SHOWN_PAIRS: dict[str, dict[str, Any]] = {}
#: The signals worth a column in the table, in order (others are left out).
SHOWN = ("spin", "guard", "breaker", "format_error", "degradation", "trial", "synthesis", "context")


def explanation(m: Any, model: str | None = None) -> tuple[str, str]:
    """The note above the two runs: (text/plain, text/html)."""
    from ..study.catalogue import CLASSES

    classes = [f"{c} {CLASSES[c][0]} ({CLASSES[c][1]})" for c in m.classes]
    rows = [("Published class", "; ".join(classes)), ("Task", m.task), ("Mechanism", m.mechanism),
            ("On", m.on.label), ("Off", m.off.label), ("Look at", m.look_at)]
    if model:
        rows.append(("Model", f"{model}: a real model; the scripted outcomes are not expected of it"))
    plain = f"{m.name} ({m.id}, scenario {m.scenario})\n" + "\n".join(f"  {k}: {v}" for k, v in rows)
    # One line each, tight: the note sits above the comparison, which is what the cell is for.
    # The task and the two settings are the comparison's title and labels right below: not repeated.
    lines = "".join(f"<div><b>{html.escape(k)}</b>: {html.escape(v)}</div>" for k, v in rows
                    if k not in ("Task", "On", "Off"))
    rich = (f"<div class='memfit-demo' style='line-height:1.35'><div style='font-size:1.15em'>"
            f"<b>{html.escape(m.name)}</b> ({html.escape(m.id)}, scenario <code>{html.escape(m.scenario)}</code>)"
            f"</div><div style='margin:2px 0'>{html.escape(m.description)}</div>{lines}</div>")
    return plain, rich


def outcome_table(m: Any, seen: dict[str, dict[str, Any]], scripted: bool) -> Any:
    """One row per side: what its run showed, what the catalogue says it shows, and whether they agree."""
    import polars as pl

    from ..study.catalogue import _expected, check

    rows = []
    for side in ("on", "off"):
        s = seen[side]
        expect = m.side(side).expect
        wrong = check(expect, s)
        named = [*m.on.expect.get("signals", ()), *m.on.expect.get("absent", ()),
                 *m.off.expect.get("signals", ()), *m.off.expect.get("absent", ())]
        shown = _notable(s["signals"], named)
        rows.append({
            "side": side, "setting": m.side(side).label, "status": s["status"], "iterations": s["iterations"],
            "cost_usd": round(s["cost_usd"], 4), "peak_prompt_tokens": s["peak_prompt_tokens"],
            "signals": ", ".join(shown) or "-", "check_afterwards": s["verify"] or "-",
            "catalogue_says": _expected(expect),
            "as_stated": ("yes" if not wrong else "no: " + "; ".join(wrong)) if scripted else "(real model)",
            "answer": (s["answer"] or "")[:80],
        })
    return pl.DataFrame(rows)


def _notable(signals: set[str], named: list[str]) -> list[str]:
    """The signals of the kinds in SHOWN (the detailed ones, spin:code_modify, else the kind)
    and those the mode's expectations name; not the context tier's ordinary "ok"."""
    found = []
    for kind in SHOWN:
        detailed = sorted(x for x in signals if x.startswith(kind + ":") and x != "context:ok")
        found += detailed or ([kind] if kind in signals and kind != "context" else [])
    found += sorted(x for x in set(named) & signals if x not in found)
    return found


@magics_class
class DemoMagics(Magics):
    """``%memfit_demo``."""

    @magic_arguments()
    @argument("mode", nargs="?", help="a failure mode id or scenario name; none: the catalogue")
    @argument("--model", help="run the mode's task with this model instead of its scripted one")
    @argument("--dir", metavar="PATH", help="folder for the two runs (default: a new scratch folder)")
    @argument("--name", metavar="VAR", help="bind {'on': run, 'off': run} to this variable")
    @argument("--quiet", action="store_true", help="nothing live: the comparison once both runs have ended, and the table")
    @line_magic
    def memfit_demo(self, line: str) -> Any:
        """Run a failure mode's on/off pair side by side; with no mode, show the catalogue."""
        from ..study.catalogue import catalogue, mode

        args = parse_argstring(self.memfit_demo, line)
        if not args.mode:
            return catalogue()
        try:
            m = mode(args.mode)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.name and not args.name.isidentifier():
            raise UsageError(f"--name must be a Python identifier, got {args.name!r}")
        root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix=f"memfit-demo-{m.id}-"))
        runs = self._start(m, root, args.model)
        if args.name:
            user_namespace(self)[args.name] = runs
        self._show(m, runs, root, args.model, quiet=args.quiet)
        return None

    def _start(self, m: Any, root: Path, model: str | None) -> dict[str, Any]:
        from ..study.catalogue import start

        runs = {}
        for side in ("on", "off"):
            try:
                runs[side] = start(m, side, root / side, model=model, namespace={})
            except (ValueError, TypeError) as exc:  # an unknown model, a bad setting
                raise UsageError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
        return runs

    def _show(self, m: Any, runs: dict[str, Any], root: Path, model: str | None, quiet: bool) -> None:
        """The note, then one view of the pair: the compare view, each side live while it runs
        (its widget model streams it; no output holds a widget), saved as the comparison of the
        two finished runs; then the on/off table."""
        from ..study.catalogue import outcome
        from .capture import captured_logs
        from .display import CompareDisplay, RunDisplay
        from .ipython import display

        plain, rich = explanation(m, model)
        display({"text/plain": plain, "text/html": rich}, raw=True)
        views = {side: RunDisplay(run, quiet=quiet) for side, run in runs.items()}
        pair = CompareDisplay((views["on"], views["off"]), labels=(f"on: {m.on.label}", f"off: {m.off.label}"))
        if not quiet:
            pair.show()  # live from the start: each side fills in as it runs
        for side, run in runs.items():
            with captured_logs(run):
                try:
                    widget = views[side].widget
                    if widget is not None:
                        widget.run_to_end()
                    else:
                        run.run()
                except KeyboardInterrupt:  # between two steps: the engine catches the rest
                    run.cancel("interrupted by the person")
            views[side].settle()
            if not quiet:
                pair.update()
        pair.update()  # the saved record: the two finished runs
        seen = {side: outcome(m, runs[side].trace(), root / side) for side in runs}
        scripted = model is None or model.startswith("memfit/")
        table = outcome_table(m, seen, scripted=scripted)
        SHOWN_PAIRS[m.id] = {"mode": m, "table": table, "model": model or f"memfit/{m.scenario}", "runs": runs}
        display({"text/html": outcome_html(table), "text/plain": outcome_text(table)}, raw=True)


def outcome_text(table: Any) -> str:
    """The on/off table as plain text: one line per side (a wide table does not fit a terminal)."""
    lines = []
    for r in table.iter_rows(named=True):
        lines.append(f"{r['side']} ({r['setting']}): {r['status']}, {r['iterations']} iterations, "
                     f"${r['cost_usd']:.4f}; signals: {r['signals']}; check afterwards: {r['check_afterwards']}; "
                     f"the catalogue says: {r['catalogue_says']}; as stated: {r['as_stated']}")
    return "\n".join(lines)


#: The table's columns the cell shows (the DataFrame in ``summary()`` keeps them all).
OUTCOME_COLUMNS = (("side", "side"), ("setting", "setting"), ("status", "status"), ("iterations", "iterations"),
                   ("cost_usd", "cost"), ("signals", "signals"), ("check_afterwards", "check afterwards"),
                   ("catalogue_says", "the catalogue says"), ("as_stated", "as_stated"))


def outcome_html(table: Any) -> str:
    """The on/off table as a compact HTML table, one line per side (a column nobody filled in,
    such as a check afterwards most modes have not, is left out)."""
    from .html import FONT, fmt_value

    rows = list(table.iter_rows(named=True))
    shown = [(key, title) for key, title in OUTCOME_COLUMNS
             if key in table.columns and any(r[key] not in ("-", "", None) for r in rows)]
    cell = "padding:1px 10px 1px 0;text-align:left;vertical-align:top"
    head = "".join(f"<th style='{cell}'>{html.escape(title)}</th>" for _, title in shown)
    body = "".join("<tr>" + "".join(
        f"<td style='{cell}'>{html.escape(fmt_value('money' if key == 'cost_usd' else 'text', r[key]))}</td>"
        for key, _ in shown) + "</tr>" for r in rows)
    return (f"<div class='memfit-demo-outcome' style='{FONT}'><table style='border-collapse:collapse'>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")


def summary() -> Any:
    """One row per side of every pair ``%memfit_demo`` showed in this kernel, in the order shown:
    the mode, its classes, what the run showed and whether it is what the catalogue states."""
    import polars as pl

    frames = [entry["table"].with_columns(pl.lit(mode_id).alias("mode"),
                                          pl.lit(", ".join(entry["mode"].classes)).alias("classes"),
                                          pl.lit(entry["model"]).alias("model"))
              for mode_id, entry in SHOWN_PAIRS.items()]
    if not frames:
        return pl.DataFrame()
    frame = pl.concat(frames)
    return frame.select("mode", "classes", *[c for c in frame.columns if c not in ("mode", "classes")])
