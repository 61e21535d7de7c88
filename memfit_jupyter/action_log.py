"""The run's action records: one ``ActionRecord`` per iteration, written from its events.

Like the timeline (``timeline.py``), the records are a view of the event stream: an
``Action`` and the ``Observation`` that follows it make one record; an observation with no
action before it (a reply that gave no usable action) makes an ``invalid_reply`` record.
"""

from __future__ import annotations

from . import events as ev
from .records import ActionRecord

#: The action type of the record of a reply that gave no usable action.
INVALID_REPLY = "invalid_reply"


class ActionLog:
    """The records built so far (``records``), in iteration order."""

    def __init__(self) -> None:
        self.records: list[ActionRecord] = []
        self._action: ev.Action | None = None

    def apply(self, event: ev.Event) -> None:
        """Take ``event`` into the records (only actions and observations count)."""
        if isinstance(event, ev.Action):
            self._action = event
        elif isinstance(event, ev.Observation):
            act, self._action = self._action, None
            i = event.iteration or 0
            if act is None:
                record = ActionRecord(iteration=i, thought="", action_type=INVALID_REPLY, tool="", params={},
                                      ok=False, error=event.error, data=dict(event.data))
            else:
                record = ActionRecord(iteration=i, thought=act.thought, action_type=act.action_type,
                                      tool=act.tool, params=act.params, output=event.output, ok=event.ok,
                                      error=event.error, duration_s=event.duration_s, data=dict(event.data))
                if act.reflection:
                    record.data["requested_reflection"] = act.reflection
            self.records.append(record)
