"""Self-contained HTML and plain-text renderings of a run.

Every fragment uses inline ``style`` attributes only (no ``<style>`` block, no
script), so it reads the same in the live widget, in JupyterLab's HTML
fallback, in nbviewer and on GitHub.  Expanding parts use ``<details>``.
The fragments render a ``RunState`` (the fold of the events), so the live
widget and the saved output show the same thing.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from .state import Card, RunState

OBS_EXCERPT = 240
OBS_FULL = 4000
FONT = "font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;font-size:13px;line-height:1.4"
MONO = "font-family:SFMono-Regular,Menlo,Consolas,monospace;font-size:12px"
STATUS_COLOURS = {
    "pending": "#6b7280", "running": "#2563eb", "done": "#15803d", "failed": "#b91c1c",
    "degraded": "#b45309", "spin_exit": "#a21caf", "cancelled": "#4b5563", "escalated": "#c2410c",
}
#: Reflection levels 0-4: none, minimal, standard, deep, critical.
LEVEL_COLOURS = ("#9ca3af", "#64748b", "#2563eb", "#7c3aed", "#dc2626")
LEVEL_NAMES = ("NONE", "MINIMAL", "STANDARD", "DEEP", "CRITICAL")
BREAKER_COLOURS = {"CLOSED": "#15803d", "HALF_OPEN": "#b45309", "OPEN": "#b91c1c"}
WATERMARK_COLOURS = {"ok": "#15803d", "warning": "#b45309", "flush": "#b91c1c"}


def _e(value: Any) -> str:
    return escape("" if value is None else str(value))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def pill(text: str, colour: str, title: str = "") -> str:
    t = f' title="{_e(title)}"' if title else ""
    return (f'<span{t} style="display:inline-block;padding:0 6px;margin:0 2px;border-radius:9px;'
            f'background:{colour};color:#fff;font-size:11px;font-weight:600">{_e(text)}</span>')


def _box(body: str, colour: str = "#e5e7eb", background: str = "#fff") -> str:
    return (f'<div style="border:1px solid {colour};border-left:4px solid {colour};border-radius:4px;'
            f'background:{background};padding:6px 8px;margin:4px 0">{body}</div>')


def _list(items: list[Any]) -> str:
    if not items:
        return ""
    return '<ul style="margin:2px 0 2px 18px;padding:0">' + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def _fmt_usd(x: float | None) -> str:
    return f"${(x or 0.0):.4f}"


# --- header and gauges ------------------------------------------------------------------
def header_html(state: RunState) -> str:
    colour = STATUS_COLOURS.get(state.status, "#6b7280")
    tiers = " ".join(f"{_e(k)}: <code>{_e(v)}</code>" for k, v in state.tiers.items() if v and k != "primary")
    answer = ""
    if state.answer:
        answer = f'<div style="margin-top:4px"><b>Answer:</b> {_e(state.answer)}</div>'
    reason = f'<div style="color:#4b5563">{_e(state.reason)}</div>' if state.reason and state.status != "done" else ""
    return (f'<div style="{FONT}"><div><b>memfit</b> {pill(state.status, colour)} '
            f'<code>{_e(state.model)}</code> {tiers}</div>'
            f'<div style="margin-top:2px"><b>Task:</b> {_e(state.task)}</div>{answer}{reason}</div>')


def _gauge(label: str, value: float, limit: float | None, text: str) -> str:
    ratio = min(1.0, value / limit) if limit else 0.0
    colour = "#15803d" if ratio < 0.7 else "#b45309" if ratio < 0.95 else "#b91c1c"
    return (f'<div style="display:inline-block;width:170px;margin-right:10px;vertical-align:top">'
            f'<div style="font-size:11px;color:#374151">{_e(label)}: {_e(text)}</div>'
            f'<div style="height:6px;background:#e5e7eb;border-radius:3px">'
            f'<div style="height:6px;width:{ratio * 100:.1f}%;background:{colour};border-radius:3px"></div>'
            f"</div></div>")


def gauges_html(totals: dict[str, Any], limits: dict[str, Any], state: RunState | None = None) -> str:
    """Cost, time, recursive calls and iterations against their limits."""
    cost, max_cost = totals.get("cost_usd", 0.0), limits.get("max_cost_usd")
    secs, max_secs = totals.get("duration_s", 0.0), limits.get("max_duration_seconds")
    rec, max_rec = totals.get("recursive_calls", 0), limits.get("max_recursive_calls")
    its, max_its = totals.get("iterations", 0), limits.get("max_iterations")
    tokens = totals.get("tokens", {}).get("total", 0) if isinstance(totals.get("tokens"), dict) else 0
    parts = [
        _gauge("cost", cost, max_cost, f"{_fmt_usd(cost)} / {_fmt_usd(max_cost)}"),
        _gauge("time", secs, max_secs, f"{secs:.1f} s / {max_secs or 0:g} s"),
        _gauge("recursive calls", rec, max_rec, f"{rec} / {max_rec}"),
        _gauge("iterations", its, max_its, f"{its} / {max_its}"),
    ]
    extra = f'<span style="font-size:11px;color:#6b7280">{totals.get("calls", 0)} model calls, {tokens} tokens</span>'
    violations = ""
    if state is not None:
        bad = [g for g in state.guarantees if g.get("violated")]
        if bad:
            violations = "".join(pill(f"limit: {g.get('limit', '?')}", "#b91c1c", str(g.get("message", "")))
                                 for g in bad[-3:])
    return f'<div style="{FONT}">{"".join(parts)}{extra} {violations}</div>'


# --- iteration cards ----------------------------------------------------------------------
def reflection_badge(r: dict[str, Any]) -> str:
    """A level badge; the trigger as tooltip and caption; details expand to suggestions etc."""
    level = int(r.get("level") or 0)
    level = max(0, min(level, 4))
    name = r.get("level_name") or LEVEL_NAMES[level]
    trigger = r.get("trigger") or ""
    body = []
    if r.get("summary"):
        body.append(f"<div>{_e(r['summary'])}</div>")
    if r.get("suggestions"):
        body.append("<div><b>Suggestions</b></div>" + _list(r["suggestions"]))
    impact = r.get("impact") or {}
    for key, items in impact.items() if isinstance(impact, dict) else ():
        if items:
            body.append(f"<div><b>{_e(key.replace('_', ' '))}</b></div>" + _list(items if isinstance(items, list) else [items]))
    if r.get("memory_used"):
        body.append("<div><b>Memory used</b></div>" + _list(r["memory_used"]))
    if r.get("ok") is False and r.get("error"):
        body.append(f'<div style="color:#b91c1c">reflection failed: {_e(r["error"])}</div>')
    caption = f' <span style="font-size:11px;color:#6b7280">{_e(trigger)}</span>' if trigger else ""
    badge = pill(f"L{level} {name}", LEVEL_COLOURS[level], trigger)
    if not body:
        return f'<span style="margin-right:6px">{badge}{caption}</span>'
    return (f'<details style="display:inline-block;vertical-align:top;margin-right:6px">'
            f'<summary style="cursor:pointer">{badge}{caption}</summary>'
            f'<div style="padding:4px 8px;background:#f9fafb">{"".join(body)}</div></details>')


def _observation(card: Card) -> str:
    if card.ok is None:
        return '<div style="color:#6b7280">… waiting for the observation</div>'
    text = card.observation or ""
    if not card.ok:
        text = f"ERROR: {card.error}\n{text}".rstrip()
    colour = "#b91c1c" if not card.ok else "#111827"
    pre = f'<pre style="{MONO};white-space:pre-wrap;margin:2px 0;color:{colour}">'
    if len(text) <= OBS_EXCERPT:
        return f"{pre}{_e(text)}</pre>"
    return (f'<details><summary style="cursor:pointer">{pre}{_e(text[:OBS_EXCERPT])}…</pre></summary>'
            f"{pre}{_e(_clip(text, OBS_FULL))}</pre></details>")


def generic_html(e: dict[str, Any]) -> str:
    """Any event the renderers do not know: its type and fields."""
    rows = "".join(
        f'<tr><td style="padding:0 6px;color:#6b7280;vertical-align:top">{_e(k)}</td>'
        f'<td style="{MONO}">{_e(_clip(v if isinstance(v, str) else json.dumps(v, default=str), 600))}</td></tr>'
        for k, v in e.items() if k not in ("type", "iteration", "ts"))
    return _box(f"<b>{_e(e.get('type', 'event'))}</b><table>{rows}</table>", "#9ca3af", "#f9fafb")


def spin_label(spin: dict) -> str:
    """"spin L1" for a layer, "spin: repeated_error" for a named detector."""
    layer = spin.get("layer", "?")
    if layer == "detector":
        return f"spin: {spin.get('detector') or 'detector'}"
    return f"spin L{layer}"


def card_html(card: Card) -> str:
    """One iteration: action, params, observation excerpt, duration, tokens, cost and badges."""
    if card.ok is None:
        status = pill("…", "#2563eb")
    else:
        status = pill("ok", "#15803d") if card.ok else pill("failed", "#b91c1c")
    meta = [f"{card.duration_s:.2f} s" if card.duration_s is not None else "",
            f"{card.prompt_tokens + card.completion_tokens} tok", _fmt_usd(card.cost_usd)]
    if card.format_errors:
        meta.append(f"{card.format_errors} format error(s)")
    head = (f'<div><b>#{card.iteration}</b> {_e(card.action_type)} · <code>{_e(card.tool or "-")}</code> '
            f'{status}<span style="float:right;color:#6b7280;font-size:11px">{_e(" · ".join(m for m in meta if m))}</span></div>')
    parts = [head]
    if card.thought:
        parts.append(f'<div style="color:#374151;font-style:italic">{_e(card.thought)}</div>')
    if card.params:
        params = _clip(json.dumps(card.params, ensure_ascii=False, default=str), 800)
        parts.append(f'<div style="{MONO};color:#1f2937">{_e(params)}</div>')
    if card.approval:
        state = card.approval.get("state")
        colour = {"waiting": "#b45309", "approved": "#15803d", "rejected": "#b91c1c"}.get(state, "#6b7280")
        parts.append(f"<div>{pill('approval: ' + str(state), colour, str(card.approval.get('reason') or ''))}</div>")
    parts.append(_observation(card))
    if card.reflections or card.spins:
        badges = "".join(reflection_badge(r) for r in card.reflections)
        badges += "".join(pill(spin_label(s), "#a21caf", str(s.get("reason", "")))
                          for s in card.spins if s.get("is_spinning", True))
        parts.append(f"<div>{badges}</div>")
    parts.extend(generic_html(e) for e in card.others)
    colour = "#e5e7eb" if card.ok is not False else "#fca5a5"
    return f'<div class="memfit-card" style="{FONT}">{_box("".join(parts), colour)}</div>'


# --- panels ---------------------------------------------------------------------------------
def spin_html(s: dict[str, Any] | None) -> str:
    if not s:
        return ""
    title = f"Spin detected (layer {s.get('layer', '?')}"
    if s.get("detector"):
        title += f", {s['detector']}"
    title += f") at iteration {s.get('iteration', '?')}"
    body = [f"<b>{_e(title)}</b>", f"<div>{_e(s.get('reason', ''))}</div>"]
    if s.get("suggestions"):
        body.append("<div><b>Suggestions</b></div>" + _list(s["suggestions"]))
    if s.get("next_actions"):
        body.append("<div><b>Next actions</b></div>" + _list(s["next_actions"]))
    counts = [f"{k.replace('_', ' ')}: {s[k]}" for k in ("consecutive_count", "warning_count") if s.get(k) is not None]
    if counts:
        body.append(f'<div style="font-size:11px;color:#6b7280">{_e(", ".join(counts))}</div>')
    return f'<div style="{FONT}">{_box("".join(body), "#a21caf", "#fdf4ff")}</div>'


def breakers_html(breakers: dict[str, dict[str, Any]], tiers: dict[str, str] | None = None) -> str:
    if not breakers:
        return ""
    chips = []
    for tier, b in breakers.items():
        state = b.get("state", "CLOSED")
        tip = ", ".join(f"{k}={b[k]}" for k in ("model", "failures", "successes", "rejected", "next_probe_at", "reason")
                        if b.get(k) not in (None, ""))
        chips.append(pill(f"{tier}: {state}", BREAKER_COLOURS.get(state, "#6b7280"), tip))
    return f'<div style="{FONT}"><b>Breakers</b> {"".join(chips)}</div>'


def synthesis_html(items: list[dict[str, Any]]) -> str:
    if not items:
        return ""
    s = items[-1]
    flag = pill("low confidence: review", "#b91c1c") if s.get("low_confidence") else ""
    body = [f"<b>Synthesis</b> ({_e(s.get('strategy', '?'))}) {flag}"]
    if s.get("question"):
        body.append(f"<div><b>Question:</b> {_e(s['question'])}</div>")
    if s.get("answer") is not None:
        body.append(f"<div><b>Answer:</b> {_e(s['answer'])} "
                    f"<span style='color:#6b7280'>(confidence {float(s.get('confidence') or 0):.2f})</span></div>")
    elif s.get("strategy") == "consensus":
        body.append("<div><b>No consensus</b>: no cluster passed the thresholds.</div>")
    rows = "".join(
        f"<tr><td>{_e(_clip(str(c.get('answer', '')), 200))}</td><td>{float(c.get('share') or 0):.0%}</td>"
        f"<td>{c.get('size', '')}</td><td>{float(c.get('confidence') or 0):.2f}</td></tr>"
        for c in s.get("clusters") or [])
    if rows:
        body.append('<table style="border-collapse:collapse"><tr><th align=left>cluster</th><th>share</th>'
                    f"<th>size</th><th>confidence</th></tr>{rows}</table>")
    if s.get("alternatives"):
        alts = [f"{i}. {a.get('answer', a) if isinstance(a, dict) else a}" for i, a in enumerate(s["alternatives"])]
        body.append("<div><b>Alternatives</b></div>" + _list(alts))
    if s.get("choice") is not None:
        body.append(f"<div><b>Chosen:</b> {_e(s['choice'])}</div>")
    if s.get("rationale"):
        body.append(f"<div style='color:#374151'>{_e(s['rationale'])}</div>")
    if len(items) > 1:
        body.append(f"<div style='font-size:11px;color:#6b7280'>{len(items)} syntheses in this run; the latest is shown</div>")
    return f'<div style="{FONT}">{_box("".join(body), "#0891b2", "#ecfeff")}</div>'


def memory_html(items: list[dict[str, Any]]) -> str:
    if not items:
        return ""
    m = items[-1]
    body = [f"<b>Memory</b> {_e(m.get('op', ''))}" + (f": <i>{_e(m.get('query'))}</i>" if m.get("query") else "")]
    dims = ("r", "c", "t", "a", "p", "o", "e", "keyword_bonus", "semantic", "final")
    rows = []
    for r in (m.get("results") or [])[:10]:
        b = r.get("breakdown") or {}
        cells = "".join(f"<td>{float(b[d]):.2f}</td>" if isinstance(b.get(d), int | float) else "<td></td>" for d in dims)
        rows.append(f"<tr><td>{_e(_clip(str(r.get('content', '')), 120))}</td><td>{float(r.get('score') or 0):.3f}</td>{cells}</tr>")
    if rows:
        head = "".join(f"<th>{d}</th>" for d in dims)
        body.append(f'<table style="border-collapse:collapse;font-size:11px"><tr><th align=left>memory</th>'
                    f"<th>score</th>{head}</tr>{''.join(rows)}</table>")
    if m.get("added"):
        body.append(f"<div>added: {_e(', '.join(map(str, m['added'])))}</div>")
    return f'<div style="{FONT}">{_box("".join(body), "#0d9488", "#f0fdfa")}</div>'


def context_html(c: dict[str, Any] | None) -> str:
    if not c:
        return ""
    ratio = float(c.get("ratio") or 0.0)
    colour = WATERMARK_COLOURS.get(c.get("watermark"), "#6b7280")
    bar = (f'<div style="height:8px;width:300px;background:#e5e7eb;border-radius:4px;display:inline-block">'
           f'<div style="height:8px;width:{min(ratio, 1.0) * 100:.1f}%;background:{colour};border-radius:4px"></div></div>')
    text = f"{c.get('used_tokens', '?')} / {c.get('window', '?')} tokens ({ratio:.0%}), {c.get('watermark', '')}"
    if c.get("evicted"):
        text += f", {c['evicted']} evicted, recall {c.get('recall_size', '?')}"
    summary = ""
    if c.get("summary"):
        summary = f"<details><summary>summary so far</summary><div>{_e(c['summary'])}</div></details>"
    return f'<div style="{FONT}"><b>Context</b> {bar} <span style="font-size:11px">{_e(text)}</span>{summary}</div>'


def degradation_html(d: dict[str, Any] | None) -> str:
    if not d:
        return ""
    body = [f"<b>Degraded</b>: {_e(d.get('reason', ''))}", f"<div>{_e(d.get('explanation', ''))}</div>"]
    if d.get("partial_result"):
        body.append(f"<div><b>Partial result</b></div><pre style='{MONO};white-space:pre-wrap'>"
                    f"{_e(_clip(str(d['partial_result']), 1500))}</pre>")
    if d.get("recommendations"):
        body.append("<div><b>Recommendations</b></div>" + _list(d["recommendations"]))
    if d.get("tried"):
        body.append("<div><b>Tried</b></div>" + _list(d["tried"]))
    body.append(f'<div style="font-size:11px;color:#6b7280">spent {_fmt_usd(d.get("cost_usd"))}, '
                f'{float(d.get("duration_s") or 0):.1f} s, {d.get("calls", 0)} calls, {d.get("iterations", 0)} iterations</div>')
    return f'<div style="{FONT}">{_box("".join(body), "#b45309", "#fffbeb")}</div>'


def trials_html(trials: list[dict[str, Any]]) -> str:
    if not trials:
        return ""
    rows = []
    for t in trials:
        if t.get("type") == "escalation":
            rows.append(f"<div><b>The person chose:</b> {_e(ESCALATION_CHOICES.get(t.get('choice'), t.get('choice')))}"
                        + (f" (max_trials now {_e(t.get('max_trials'))})" if t.get("choice") == "more_trials" else "")
                        + "</div>")
            continue
        mark = pill("passed", "#15803d") if t.get("passed") else pill("failed", "#b91c1c")
        lesson = f"<div><b>Lesson:</b> {_e(t['lesson'])}</div>" if t.get("lesson") else ""
        out = (f"<details><summary>oracle output</summary><pre style='{MONO};white-space:pre-wrap'>"
               f"{_e(_clip(str(t.get('oracle_output') or ''), 1500))}</pre></details>") if t.get("oracle_output") else ""
        rows.append(f"<div>Trial {t.get('trial', '?')}/{t.get('max_trials', '?')} {mark}{lesson}{out}</div>")
    return f'<div style="{FONT}">{_box("<b>Failure diary</b>" + "".join(rows), "#c2410c", "#fff7ed")}</div>'


ESCALATION_CHOICES = {"more_trials": "more trials", "open_diary": "open the diary", "stop": "stop"}


def diary_html(lessons: list[str], past: list[str]) -> str:
    """The lessons of an escalated run (and those from past failures), for the person deciding."""
    parts = []
    if lessons:
        parts.append("<b>Lessons from this run's trials</b><ol>" + "".join(f"<li>{_e(x)}</li>" for x in lessons)
                     + "</ol>")
    if past:
        parts.append("<b>Lessons from past failures on similar tasks</b><ul>"
                     + "".join(f"<li>{_e(x)}</li>" for x in past) + "</ul>")
    if not parts:
        parts.append("The diary has no lessons for this task yet.")
    return f'<div style="{FONT}">{_box("".join(parts), "#c2410c", "#fff7ed")}</div>'


def errors_html(errors: list[dict[str, Any]]) -> str:
    if not errors:
        return ""
    items = []
    for e in errors:
        tb = (f"<details><summary>traceback</summary><pre style='{MONO};white-space:pre-wrap'>"
              f"{_e(e['traceback'])}</pre></details>") if e.get("traceback") else ""
        items.append(f"<div><b>Error</b> (iteration {e.get('iteration', '?')}): {_e(e.get('message', ''))}{tb}</div>")
    return f'<div style="{FONT}">{_box("".join(items), "#b91c1c", "#fef2f2")}</div>'


def notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    return f'<div style="{FONT};color:#4b5563">' + "".join(f"<div>ℹ {_e(n)}</div>" for n in notes) + "</div>"


# --- whole runs -------------------------------------------------------------------------------
def state_of(trace: dict[str, Any]) -> RunState:
    return RunState.from_events(trace.get("events") or [], task=trace.get("task", ""),
                                model=trace.get("model", ""), tiers=dict(trace.get("tiers") or {}))


def render_html(trace: dict[str, Any], *, quiet: bool = False) -> str:
    """The whole run as one self-contained HTML fragment (no script, inline styles only)."""
    state = state_of(trace)
    state.status = trace.get("status", state.status)
    state.answer = trace.get("answer", state.answer)
    state.reason = trace.get("reason", state.reason)
    totals = dict(trace.get("totals") or {})
    parts = [header_html(state), gauges_html(totals, trace.get("limits") or {}, state), notes_html(state.notes)]
    if not quiet:
        parts += [breakers_html(state.breakers), spin_html(state.spin),
                  context_html(state.context)]
        parts += [card_html(state.cards[i]) for i in sorted(state.cards)]
        parts += [generic_html(e) for e in state.others]
        parts += [synthesis_html(state.synthesis), memory_html(state.memory), trials_html(state.trials)]
    parts += [degradation_html(state.degradation), errors_html(state.errors)]
    return (f'<div class="memfit-run" data-run-id="{_e(trace.get("run_id", ""))}" '
            f'style="{FONT};max-width:960px">' + "".join(p for p in parts if p) + "</div>")


def render_text(trace: dict[str, Any], *, quiet: bool = False) -> str:
    """A plain-text summary of the run, for ``text/plain``."""
    t = trace.get("totals") or {}
    lines = [f"memfit run {trace.get('run_id', '')}: {trace.get('status', '?')} after "
             f"{t.get('iterations', 0)} iteration(s), ${t.get('cost_usd', 0.0):.4f}, "
             f"{t.get('calls', 0)} model call(s), {t.get('duration_s', 0.0):.1f} s",
             f"model: {trace.get('model', '')}",
             f"task: {trace.get('task', '')}"]
    if trace.get("answer"):
        lines.append(f"answer: {trace['answer']}")
    if trace.get("reason") and trace.get("status") != "done":
        lines.append(f"reason: {trace['reason']}")
    if not quiet:
        state = state_of(trace)
        for i in sorted(state.cards):
            c = state.cards[i]
            mark = "ok" if c.ok else "failed" if c.ok is False else "..."
            lines.append(f"  #{i} {c.action_type} {c.tool} [{mark}]")
    return "\n".join(lines)
