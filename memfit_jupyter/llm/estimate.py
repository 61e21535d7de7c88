"""What a run is expected to cost before it spends anything: ``run.estimate()``.

From the model's prices (litellm's, or a scenario's) and the prompt the next
action call would send: the expected cost of one iteration (the action call,
plus a reflection and a triage call where an iteration makes them: a reflection level
that calls the model, triage at events), the worst case at the
calls' output caps, and how many iterations the cost limit pays for.  Reply
sizes are the run's own longest replies once it has some, else typical sizes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .client import DEFAULT_MAX_TOKENS
from .tokens import estimate_message_tokens

if TYPE_CHECKING:
    from ..protocols import RunView

#: Output tokens a reply of each purpose typically takes, before the run has seen one.
TYPICAL_REPLY_TOKENS = {"action": 120, "reflection": 150, "triage": 120}
#: Prompt tokens of a reflection or a triage call, relative to the action prompt (they send less).
SIDE_CALL_PROMPT_SHARE = 0.5


def estimate(run: RunView) -> dict[str, Any]:
    """The expected and worst-case cost of the next iteration of ``run``, and what the budget buys.

    >>> run.estimate()["iteration_cost_usd"]      # doctest: +SKIP
    0.00042
    """
    client = run.llm
    model = client.model_for("primary")
    price_in, price_out = run.backend.prices(model)
    prompt = estimate_message_tokens(run.next_prompt())
    longest = getattr(client, "_longest", {})
    side = [p for p, on in (("reflection", _reflects(run)), ("triage", _triages(run))) if on]
    calls = [("action", prompt)] + [(p, int(prompt * SIDE_CALL_PROMPT_SHARE)) for p in side]
    expected = sum(t * price_in + longest.get(p, TYPICAL_REPLY_TOKENS[p]) * price_out for p, t in calls)
    worst = sum(t * price_in + DEFAULT_MAX_TOKENS * price_out for _, t in calls)
    left = run.budget.remaining_cost()
    return {
        "model": model,
        "structured": client.mode_for(model),
        "prices_per_token": {"input": price_in, "output": price_out},
        "prompt_tokens": prompt,
        "calls_per_iteration": len(calls),
        "iteration_cost_usd": round(expected, 8),
        "iteration_worst_case_usd": round(worst, 8),
        "budget_left_usd": round(left, 8),
        "iterations_affordable": (None if expected <= 0 else int(left // expected)),
        "priced": price_in > 0 or price_out > 0,
    }


def _reflects(run: RunView) -> bool:
    """Whether an iteration's reflection calls the model: "auto" may; NONE and MINIMAL never do."""
    from ..records import ReflectionLevel

    level = getattr(run.agent, "reflection", "auto")
    return level == "auto" or ReflectionLevel.parse(level) >= ReflectionLevel.STANDARD


def _triages(run: RunView) -> bool:
    """Whether an iteration may triage: at events; at the run's end (the default) it is one call a run."""
    if getattr(run, "memory", None) is None:
        return False
    config = getattr(run.agent, "config", None)
    return getattr(getattr(config, "memory", None), "triage_at", "events") == "events"
