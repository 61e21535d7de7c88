"""The variants an evaluation compares: named sets of ``Agent`` settings.

``bare`` is the loop with nothing added (no reflection, no spin detection, no memory);
``default`` is the agent as it comes; the others switch on one mechanism over ``bare``.
A variant's ``oracle`` may be ``TASK_ORACLE``: each task's own oracle command goes there
(the failure diary judges its trials with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..reflection.config import DETECTORS

#: Stands for the task's oracle command in a variant's settings.
TASK_ORACLE = "<task oracle>"
_NO_SPIN = {"detectors": {d: False for d in DETECTORS}, "max_consecutive_spin_warnings": 0}
_BARE = {"reflection": "none", "memory": False}

#: The variants by name.  Reflection alone forces a level on every action with spin detection off;
#: spin detection alone forces MINIMAL reflection (a record, no model call) so that only the
#: detectors and their warnings and exit act; memory alone is a fresh store per run (a run's
#: own triage and searches: memory across runs would make a run depend on the order they ran in).
VARIANTS: dict[str, dict[str, Any]] = {
    "bare": dict(_BARE),
    "default": {},
    "reflection-minimal": {"reflection": "minimal", "memory": False, **_NO_SPIN},
    "reflection-standard": {"reflection": "standard", "memory": False, **_NO_SPIN},
    "reflection-deep": {"reflection": "deep", "memory": False, **_NO_SPIN},
    "reflection-auto": {"reflection": "auto", "memory": False, **_NO_SPIN},
    "spin": {"reflection": "minimal", "memory": False},
    "memory": {"reflection": "none", "memory": None},
    "synthesis": {**_BARE, "samples": 3},
    "diary": {**_BARE, "oracle": TASK_ORACLE, "max_trials": 3},
}


def resolve(variants: Mapping[str, Mapping[str, Any]] | list[str] | tuple[str, ...] | None
            ) -> dict[str, dict[str, Any]]:
    """Variant names (of ``VARIANTS``) or a mapping name -> settings, as a mapping."""
    if variants is None:
        return {k: dict(v) for k, v in VARIANTS.items()}
    if isinstance(variants, Mapping):
        out = {}
        for name, settings in variants.items():
            if not isinstance(settings, Mapping):
                raise ValueError(f"variant {name!r} must map settings to values, got {settings!r}")
            out[str(name)] = dict(settings)
        return out
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {', '.join(map(str, unknown))}; variants: {', '.join(VARIANTS)}")
    return {v: dict(VARIANTS[v]) for v in variants}
