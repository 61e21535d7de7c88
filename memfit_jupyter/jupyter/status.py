"""What ``%memfit`` shows: model tiers and breaker states, defaults, scenarios."""

from __future__ import annotations

import os
from html import escape
from typing import Any

from .config import MemfitSettings, resolve_model


def _tiers(magics: Any) -> dict[str, str]:
    model, note = resolve_model(None, magics.model)
    return {"primary": model + (f"  ({note})" if note else ""), "fast": magics.fast_model or "(primary)",
            "fallback": magics.fallback_model or "(none)"}


def breaker_metrics(magics: Any) -> dict[str, Any]:
    """Breaker metrics per tier of the last run's agent (empty before the first run)."""
    run = getattr(magics, "last_run", None)
    return dict(run.agent.breakers.metrics()) if run is not None else {}


def breaker_line(m: Any) -> str:
    """One tier's breaker in one line: model, state, counters, next probe, last error."""
    if not isinstance(m, dict):
        return str(m)
    parts = [f"{m.get('failures', 0)} failure(s) in a row", f"{m.get('successes', 0)} ok",
             f"{m.get('rejected', 0)} turned away"]
    if m.get("next_probe_in_s") is not None:
        parts.append(f"next probe in {m['next_probe_in_s']:.1f} s")
    if m.get("last_error"):
        parts.append(f"last error: {str(m['last_error'])[:100]}")
    return f"{m.get('state', '?')} ({m.get('model', '')}): " + ", ".join(parts)


def _defaults(magics: Any) -> dict[str, Any]:
    return {name: getattr(magics, name) for name in sorted(MemfitSettings.class_trait_names(config=True))}


def _scenarios() -> dict[str, str]:
    from ..llm.scenarios import scenarios

    return scenarios()


def sections(magics: Any, which: str) -> list[tuple[str, dict[str, Any]]]:
    """What ``%memfit`` shows, section by section, redacted: a default may be a URL with its
    password (``api_base``, a PostgreSQL ``memory_path``), and the view is displayed raw."""
    from ..secrets import redact_obj

    out = []
    if which in ("status", "tiers"):
        out.append(("model tiers", _tiers(magics)))
        metrics = {tier: breaker_line(m) for tier, m in breaker_metrics(magics).items()}
        out.append(("circuit breakers (last run's agent)",
                    metrics or {"(none)": "no run yet"}))
    if which in ("status", "defaults"):
        out.append(("defaults (%config MemfitMagics.<name> = ...)", _defaults(magics)))
        out.append(("environment", {"MEMFIT_MODEL": os.environ.get("MEMFIT_MODEL", "(unset)"),
                                    "working directory": os.getcwd()}))
    if which in ("status", "scenarios"):
        out.append(("scenarios (--model memfit/<name>)", _scenarios()))
    return [(title, redact_obj(items)) for title, items in out]


def status_text(magics: Any, which: str) -> str:
    lines = []
    for title, items in sections(magics, which):
        lines.append(f"{title}:")
        lines.extend(f"  {k}: {v}" for k, v in items.items())
    return "\n".join(lines)


def status_html(magics: Any, which: str) -> str:
    from .html import FONT

    parts = []
    for title, items in sections(magics, which):
        rows = "".join(f'<tr><td style="padding:0 8px 0 0;vertical-align:top"><code>{escape(str(k))}</code></td>'
                       f"<td>{escape(str(v))}</td></tr>" for k, v in items.items())
        parts.append(f'<div style="margin:4px 0"><b>{escape(title)}</b><table>{rows}</table></div>')
    return f'<div class="memfit-status" style="{FONT}">{"".join(parts)}</div>'
