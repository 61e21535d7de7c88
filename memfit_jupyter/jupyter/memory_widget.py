"""The memory ranking panel: one bar per C.O.R.E. P.A.C.T. dimension, the keyword bonus, the
semantic term and the final score, sortable.

``MemoryRanking`` is a display object whose bundle carries
``application/vnd.memfit.memory+json`` (the payload: the JupyterLab extension
draws it, sortable by a click on a header), a static ``text/html`` table for
other viewers, and ``text/plain``.  It needs no kernel, so a saved notebook
shows it as it was.
"""

from __future__ import annotations

import html
import json
from collections.abc import Collection, Iterable
from typing import Any

from ..secrets import redact_obj
from .protocol import MemoryPayload, MemoryResult

MIME = "application/vnd.memfit.memory+json"
#: (key, label, colour) in the order of their weights (MECHANISMS.md §3.4).
BARS = (("r", "R relevance", "#4c78a8"), ("c", "C connectivity", "#f58518"), ("t", "T temporality", "#54a24b"),
        ("a", "A actionability", "#e45756"), ("p", "P preference", "#72b7b2"), ("o", "O origin", "#b279a2"),
        ("e", "E emotion", "#ff9da6"), ("keyword_bonus", "keyword bonus", "#9d755d"),
        ("semantic", "semantic", "#bab0ac"), ("final", "score", "#222222"))


def ranking_payload(items: Iterable[Any], query: str = "", bytes_limit: int | None = None,
                    floor: float | None = None) -> MemoryPayload:
    """The JSON payload from search results (``ScoredMemory``) or plain entities.

    Search results carry their final score and ``floor`` (default: ``relevance_floor()`` of
    the default ranking), the most a memory with no word of the query can score:
    ``nothing_relevant`` says when every result is at or under it.  Plain entities (a list has
    no query) carry their stored score: the weighted C.O.R.E. P.A.C.T. sum
    (``score_label`` "stored score"), never a final score of 0."""
    from ..memory.ranking import core_score, relevance_floor

    results: list[MemoryResult] = []
    searched = False
    for i, m in enumerate(items):
        if hasattr(m, "breakdown"):
            searched = True
            breakdown = {k: float(v) for k, v in m.breakdown.items()}
            entity = m.entity
        else:
            entity = m
            breakdown = {k: float(v) for k, v in m.scores.items()}
            breakdown["final"] = round(core_score(entity), 6)
        results.append({"rank": i + 1, "id": entity.id, "content": entity.content, "tags": list(entity.tags),
                        "score": breakdown.get("final", 0.0), "breakdown": breakdown})
    payload: MemoryPayload = {
        "version": 1, "query": query, "bytes_limit": bytes_limit,
        "bytes": sum(len(r["content"].encode()) for r in results),
        "dimensions": [k for k, _, _ in BARS], "results": results,
        "score_label": "final score" if searched or query else "stored score",
        "floor": None, "nothing_relevant": False}  # a list has no query: nothing to be relevant to
    if searched:
        cutoff = relevance_floor() if floor is None else floor
        payload["floor"] = cutoff
        payload["nothing_relevant"] = (cutoff is not None and bool(results)
                                       and all(r["score"] <= cutoff for r in results))
    return payload


def nothing_relevant_note(payload: MemoryPayload) -> str:
    """What to say when no result beats the floor (empty when some does)."""
    if not payload.get("nothing_relevant"):
        return ""
    return (f"Nothing relevant: no memory shares a word with the query; these are only the closest by "
            f"embedding (every score is at most {payload['floor']:.2f}, the most a memory can get without a "
            "matching word).")


def ranking_text(payload: MemoryPayload) -> str:
    head = f"memory ranking for {payload['query']!r}" if payload.get("query") else "memories"
    lines = [f"{head}: {len(payload['results'])} result(s), {payload.get('bytes', 0)} bytes"
             f" ({payload.get('score_label', 'final score')} first)"]
    if nothing_relevant_note(payload):
        lines.append(nothing_relevant_note(payload))
    for r in payload["results"]:
        b = r["breakdown"]
        dims = " ".join(f"{k.upper()}={b.get(k, 0):.2f}" for k in "rctapoe")
        lines.append(f"{r['rank']:>3}. {b.get('final', 0):.3f} [{r['id']}] {dims} kw={b.get('keyword_bonus', 0):.2f} "
                     f"sem={b.get('semantic', 0):.2f} | {r['content'][:80]}")
    return "\n".join(lines)


def _sorted(results: list[MemoryResult], key: str) -> list[MemoryResult]:
    if key == "rank":
        return sorted(results, key=lambda r: r["rank"])
    return sorted(results, key=lambda r: (-r["breakdown"].get(key, 0.0), r["rank"]))


def ranking_html(payload: MemoryPayload, sort: str = "final") -> str:
    """A self-contained static table, a bar per dimension, sorted by ``sort``: the fallback for
    viewers without the extension (no script: JupyterLab would not run it anyway)."""
    head = "".join(
        f'<th data-k="{k}" style="cursor:pointer;padding:2px 4px;font-weight:600" title="sort by {html.escape(label)}">'
        f"{html.escape(label.split()[0] if k in 'rctapoe' else label)}</th>" for k, label, _ in BARS)
    rows = []
    for r in _sorted(payload["results"], sort):
        b = r["breakdown"]
        cells = []
        for k, label, colour in BARS:
            v = float(b.get(k, 0.0))
            scale = v / 0.3 if k == "keyword_bonus" else v  # the bonus tops out at 0.3
            width = max(0.0, min(1.0, scale)) * 60
            cells.append(f'<td data-v="{v:.6f}" style="padding:2px 4px" title="{html.escape(label)} {v:.3f}">'
                         f'<div style="display:flex;align-items:center;gap:3px"><div style="width:60px;height:8px;'
                         f'background:#eee"><div style="width:{width:.1f}px;height:8px;background:{colour}"></div>'
                         f'</div><span style="font-size:10px">{v:.2f}</span></div></td>')
        tags = ", ".join(html.escape(t) for t in r["tags"])
        rows.append(f'<tr data-rank="{r["rank"]}"><td style="padding:2px 4px">{r["rank"]}</td>'
                    f'<td style="padding:2px 4px;max-width:420px"><code style="font-size:10px">{html.escape(r["id"])}'
                    f'</code> {html.escape(r["content"][:300])}<div style="color:#777;font-size:10px">{tags}</div></td>'
                    + "".join(cells) + "</tr>")
    title = (f"Memory ranking for <b>{html.escape(payload['query'])}</b>" if payload.get("query")
             else "Memories")
    return (f'<div class="memfit-memory" style="font-family:sans-serif;font-size:12px">'
            f'<div style="margin:2px 0">{title}: {len(payload["results"])} result(s), '
            f'{payload.get("bytes", 0)} bytes{"" if payload.get("bytes_limit") is None else " of " + str(payload["bytes_limit"])}'
            f' (sorted by {html.escape(payload.get("score_label", "final score") if sort == "final" else sort)})</div>'
            + (f'<div style="margin:2px 0"><i>{html.escape(nothing_relevant_note(payload))}</i></div>'
               if nothing_relevant_note(payload) else "")
            +
            f'<table style="border-collapse:collapse"><thead><tr><th>#</th><th align=left>memory</th>'
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def bundle(payload: MemoryPayload) -> dict[str, Any]:
    """The output bundle of a ranking, redacted (the query is what the person typed)."""
    data = {MIME: json.loads(json.dumps(payload)), "text/html": ranking_html(payload),
            "text/plain": ranking_text(payload)}
    return dict(redact_obj(data))


class MemoryRanking:
    """A static display of a ranking (works in any frontend, and with no kernel)."""

    def __init__(self, payload: MemoryPayload):
        self.payload = payload

    def _repr_mimebundle_(self, include: Collection[str] | None = None,
                          exclude: Collection[str] | None = None) -> dict[str, Any]:
        return bundle(self.payload)

    def __repr__(self) -> str:
        return ranking_text(self.payload)


def ranking_widget(payload: MemoryPayload) -> MemoryRanking:
    """The ranking as it shows in a notebook.  It is the static bundle: the JupyterLab extension
    draws it from ``application/vnd.memfit.memory+json`` and sorts it by a click on a header,
    with or without a kernel, so a reopened notebook still shows it (a widget would not)."""
    return MemoryRanking(payload)
