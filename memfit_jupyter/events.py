"""Typed events: the single record of what a run did, as a person sees it.

Every event is a flat dict once serialised: ``type``, ``iteration``, ``ts``
(seconds since the run started) and the fields of its record.  The run's
event list *is* the trace; the widget, the HTML rendering and the saved
notebook output are all built from it.

Event types used by the engine (feature modules add their own; renderers
show unknown types with a generic card):

=============  ===========================================================
run_start      task, model tiers, limits
model_call     purpose, model, tier, tokens, cost, latency, reply, error
action         thought, action_type, tool, params
observation    tool, ok, output, error, duration_s
note           text (guidance or a message injected into the timeline)
error          message (an exception the loop caught and survived)
run_end        status, answer, reason
=============  ===========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Fields whose values come from the wall clock; replay restores them from the
# recording so that replayed events compare equal byte for byte.
TIMING_FIELDS = ("ts", "latency_s", "duration_s")


@dataclass(slots=True)
class Event:
    type: str
    iteration: int
    ts: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "iteration": self.iteration, "ts": self.ts, **self.data}

    def __getitem__(self, key: str) -> Any:
        if key == "type":
            return self.type
        if key == "iteration":
            return self.iteration
        if key == "ts":
            return self.ts
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default
