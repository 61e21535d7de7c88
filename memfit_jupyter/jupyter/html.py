"""The static summary of a run: ``text/html`` and ``text/plain`` for viewers without the extension.

JupyterLab draws the run itself from ``application/vnd.memfit.run+json`` (the
labextension ranks above HTML); nbviewer, GitHub, VS Code and an HTML export
show this summary instead.  It names the run's key facts, quiet runs
included: status, iterations, cost, spin alerts, reflection levels, breakers,
the degradation, warnings and the actions taken.  No script, no colours of its
own: it inherits the page's, so it reads in light and dark themes.
"""

from __future__ import annotations

from html import escape
from typing import Any

from .state import RunFacts, facts

#: The font of memfit's static HTML (the status table uses it too); colours come from the page.
FONT = "font-family:var(--jp-ui-font-family,sans-serif);font-size:13px;line-height:1.4"
#: Actions listed in the summary; a longer run lists its first and last ones.
MAX_ACTIONS = 12


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def fmt_value(kind: str, value: Any, limit: int = 300) -> str:
    """A value as the run view writes it (labextension/src/dom.ts ``money``, ``seconds``,
    ``count``): ``$0.0168``, ``6.30 s``, ``1,234``; nothing is ``—``, never ``None``."""
    if value is None or value == "":
        return "—"
    if kind in ("money", "seconds", "count") and not isinstance(value, bool):
        try:
            n = float(value)
        except (TypeError, ValueError):
            return _clip(str(value), limit)
        if kind == "money":
            return f"${n:.2f}" if n >= 1 else f"${n:.4f}"
        if kind == "seconds":
            return f"{n:.0f} s" if n >= 10 else f"{n:.2f} s"
        return f"{int(n):,}" if n.is_integer() else f"{n:,}"
    return _clip(str(value), limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def _mechanism_lines(f: RunFacts) -> list[str]:
    lines = []
    if f.reflections:
        lines.append("reflections: " + ", ".join(f"{k} ×{v}" for k, v in sorted(f.reflections.items())))
    if f.spins:
        lines.append(f"spin alerts: {len(f.spins)} (first: {_clip(f.spins[0], 200)})")
    if f.breakers:
        lines.append("breakers: " + "; ".join(f.breakers[:6]) + (" …" if len(f.breakers) > 6 else ""))
    if f.limits:
        lines.append("limits reached: " + "; ".join(f.limits[:3]))
    if f.syntheses:
        low = f", {f.low_confidence} with low confidence" if f.low_confidence else ""
        lines.append(f"syntheses: {', '.join(sorted(set(f.syntheses)))} ×{len(f.syntheses)}{low}")
    if f.trials:
        lines.append("oracle trials: " + " ".join("passed" if p else "failed" for p in f.trials))
    if f.degradation:
        lines.append(f"degraded: {f.degradation}")
    for message in f.errors[:3]:
        lines.append(f"error: {_clip(message, 300)}")
    if f.warnings:
        lines.append(f"warnings: {len(f.warnings)} (last: {_clip(f.warnings[-1], 200)})")
    return lines


def _actions(f: RunFacts) -> list[str]:
    shown = f.actions
    if len(shown) > MAX_ACTIONS:
        half = MAX_ACTIONS // 2
        shown = [*f.actions[:half], (-1, f"… {len(f.actions) - MAX_ACTIONS} more", None), *f.actions[-half:]]
    out = []
    for i, tool, ok in shown:
        mark = "" if ok is None else " ok" if ok else " failed"
        out.append(tool if i < 0 else f"#{i} {tool}{mark}")
    return out


def render_html(trace: dict[str, Any], *, quiet: bool = False) -> str:
    """A short, self-contained HTML summary (quiet runs get the same facts: they are the record)."""
    f = facts(trace)
    head = (f"<b>memfit run</b> <code>{_e(f.run_id)}</code> · <b>{_e(f.status)}</b> after "
            f"{f.iterations} iteration(s) · ${f.cost_usd:.4f} · {f.calls} model call(s) · "
            f"{f.tokens:,} tokens · {f.duration_s:.1f} s")
    rows = [f"<div>{head}</div>", f"<div><b>task</b> {_e(_clip(f.task, 500))}</div>",
            f"<div><b>model</b> <code>{_e(f.model)}</code></div>"]
    if f.answer:
        rows.append(f"<div><b>answer</b> {_e(_clip(str(f.answer), 1000))}</div>")
    if f.reason and f.status != "done":
        rows.append(f"<div><b>why it ended</b> {_e(f.reason)}</div>")
    items = [*_mechanism_lines(f), *(f"note: {_clip(n, 300)}" for n in f.notes[:5])]
    if items:
        rows.append("<ul style=\"margin:2px 0 2px 18px;padding:0\">"
                    + "".join(f"<li>{_e(x)}</li>" for x in items) + "</ul>")
    if f.actions:
        rows.append(f"<div><b>actions</b> {_e(' · '.join(_actions(f)))}</div>")
    return (f'<div class="memfit-summary" data-run-id="{_e(f.run_id)}" '
            f'style="{FONT};border:1px solid var(--jp-border-color2,#8884);border-radius:4px;padding:6px 8px;max-width:960px">'
            + "".join(rows) + "</div>")


def render_text(trace: dict[str, Any], *, quiet: bool = False) -> str:
    """A plain-text summary of the run, for ``text/plain``."""
    f = facts(trace)
    lines = [f"memfit run {f.run_id}: {f.status} after {f.iterations} iteration(s), ${f.cost_usd:.4f}, "
             f"{f.calls} model call(s), {f.duration_s:.1f} s",
             f"model: {f.model}", f"task: {f.task}"]
    if f.answer:
        lines.append(f"answer: {f.answer}")
    if f.reason and f.status != "done":
        lines.append(f"reason: {f.reason}")
    lines += [f"  {x}" for x in _mechanism_lines(f)]
    if not quiet:
        lines += [f"  {a}" for a in _actions(f)]
    return "\n".join(lines)
