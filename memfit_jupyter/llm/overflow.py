"""A prompt over the model's context window: flush the tiered context so the call can be sent again.

The provider said the prompt is too long (``context_window``): the window the
run believed in was too large, or unknown.  The tiered context then takes the
prompt's own size as the window (so the next watermark checks are honest) and
flushes, moving the oldest entries to recall behind a recursive summary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .tokens import estimate_message_tokens

if TYPE_CHECKING:
    from ..protocols import RunView


def flush_for_overflow(run: RunView) -> bool:
    """Flush ``run``'s tiered context after an overflow; whether anything was moved out."""
    context = getattr(run, "context", None)
    tiers = getattr(context, "tiers", None)
    if tiers is None:
        return False
    prompt = estimate_message_tokens(run.last_prompt or run.next_prompt())
    # The window the provider enforces is below this prompt; keep the smaller of the two beliefs.
    window = min(tiers.window or prompt, prompt)
    tiers.window = max(1, window)
    used = tiers.used_tokens(run)
    evicted = tiers.flush(run)
    if not evicted:
        return False
    run.emit("context", used_tokens=used, window=tiers.window, ratio=round(used / tiers.window, 4),
             watermark="flush", evicted=len(evicted), recall_size=len(tiers.recall),
             summary=tiers.summary, reason="the provider said the prompt is over the context window")
    return True
