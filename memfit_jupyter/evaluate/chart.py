"""The evaluation's chart for a notebook: success with its interval per variant, and the change
against the baseline with its interval, as inline SVG (no plotting library needed)."""

from __future__ import annotations

from html import escape
from typing import Any

_W, _ROW, _LEFT, _PANEL = 720, 22, 150, 260


def chart(summary: Any, title: str = "") -> str:
    """SVG of ``Evaluation.summary`` (a polars DataFrame): one row per variant (and model)."""
    rows = summary.to_dicts()
    h = 40 + _ROW * len(rows) + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{h}" font-family="sans-serif" '
           f'font-size="12">']
    if title:
        out.append(f'<text x="4" y="14" font-weight="bold">{escape(title)}</text>')
    x0, x1 = _LEFT, _LEFT + _PANEL + 40

    def sx(v: float) -> float:  # success: 0..1
        return x0 + v * _PANEL

    def dx(v: float) -> float:  # change: -1..1
        return x1 + (v + 1) / 2 * _PANEL

    out.append(f'<text x="{x0}" y="32">success (95 % Wilson)</text>')
    out.append(f'<text x="{x1}" y="32">change against the baseline (95 % paired bootstrap)</text>')
    top = 40
    out.append(f'<line x1="{dx(0)}" y1="{top}" x2="{dx(0)}" y2="{top + _ROW * len(rows)}" stroke="#9ca3af"/>')
    for i, r in enumerate(rows):
        y = top + _ROW * i + _ROW / 2
        label = r["variant"] + (f" / {r['model']}" if r.get("model") else "")
        out.append(f'<text x="4" y="{y + 4}">{escape(label[:24])}</text>')
        out.append(f'<line x1="{sx(r["success_lo"])}" y1="{y}" x2="{sx(r["success_hi"])}" y2="{y}" '
                   'stroke="#2563eb" stroke-width="2"/>')
        out.append(f'<circle cx="{sx(r["success"])}" cy="{y}" r="4" fill="#2563eb"/>')
        if r.get("change") is not None:
            colour = "#16a34a" if r["change_lo"] > 0 else "#dc2626" if r["change_hi"] < 0 else "#6b7280"
            out.append(f'<line x1="{dx(r["change_lo"])}" y1="{y}" x2="{dx(r["change_hi"])}" y2="{y}" '
                       f'stroke="{colour}" stroke-width="2"/>')
            out.append(f'<circle cx="{dx(r["change"])}" cy="{y}" r="4" fill="{colour}"/>')
    base = top + _ROW * len(rows) + 16
    for v in (0, 0.5, 1):
        out.append(f'<text x="{sx(v) - 8}" y="{base}">{v:g}</text>')
    for v in (-1, 0, 1):
        out.append(f'<text x="{dx(v) - 8}" y="{base}">{v:+g}</text>')
    out.append("</svg>")
    return "".join(out)
