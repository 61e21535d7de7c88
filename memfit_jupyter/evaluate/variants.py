"""The variants an evaluation compares: named sets of ``Agent`` settings.

``bare`` is the loop with nothing added (no reflection, no spin detection, no memory);
``default`` is the agent as it comes (``first-defaults``: as it first came, ``config.FIRST_DEFAULTS``);
the others switch on one mechanism over ``bare``.  A run's key hashes its variant's settings, not
the defaults under them: after the defaults change, give ``default`` runs a new ``out`` (and
measure in a new one anyway since the variants of a task and seed share a working directory
path: runs made before each had their own, named in their prompt).
A variant's ``oracle`` may be ``TASK_ORACLE``: each task's own oracle command goes there
(the failure diary judges its trials with it); its ``memory`` may be ``SHARED_STORE``: one store
for all its runs, run in order (``recall`` measures memory across tasks that way).  A variant's ``tools`` whose names all start
with ``+`` add those tools to the evaluation's (``synthesis`` adds ``sub_query``, the tool
through which K samples are drawn and combined).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..config import FIRST_DEFAULTS
from ..reflection.config import DETECTORS

#: Stands for the task's oracle command in a variant's settings.
TASK_ORACLE = "<task oracle>"
#: A variant's ``memory`` setting: one store for all the variant's runs (``<out>/stores/<variant>``),
#: which then run one after another, repeat by repeat and task by task in the order given, so
#: that a run finds what the runs before it kept (memory across tasks).
SHARED_STORE = "<shared store>"
_NO_SPIN = {"detectors": {d: False for d in DETECTORS}, "max_consecutive_spin_warnings": 0}
_BARE = {"reflection": "none", "memory": False}

#: The variants by name.  Reflection alone forces a level on every action with spin detection off;
#: spin detection alone forces MINIMAL reflection (a record, no model call) so that only the
#: detectors and their warnings in the model's prompt act (``spin-judge``: with the layer-2
#: judge, off by default; ``spin-exit``: ending the run after 3 warnings, as the seed did);
#: memory alone is a fresh store per run (a run's own triage and searches: memory across runs
#: would make a run depend on the order they ran in), triaged by rules as it comes
#: (``memory-model``: by the model).  ``default-exit`` is the default with the seed's spin exit
#: after 3 warnings: its prompts are the default's until the exit, so against ``default`` it
#: measures only what stopping early saves on failing runs and loses on passing ones.
VARIANTS: dict[str, dict[str, Any]] = {
    "bare": dict(_BARE),
    "default": {},
    "first-defaults": dict(FIRST_DEFAULTS),
    "reflection-minimal": {"reflection": "minimal", "memory": False, **_NO_SPIN},
    "reflection-standard": {"reflection": "standard", "memory": False, **_NO_SPIN},
    "reflection-deep": {"reflection": "deep", "memory": False, **_NO_SPIN},
    "reflection-auto": {"reflection": "auto", "memory": False, **_NO_SPIN},
    "spin": {"reflection": "minimal", "memory": False, "spin_warnings": "prompt"},
    "spin-judge": {"reflection": "minimal", "memory": False, "detectors": {"logic_spin": True},
                   "spin_warnings": "prompt"},
    "spin-exit": {"reflection": "minimal", "memory": False, "spin_warnings": "prompt",
                  "max_consecutive_spin_warnings": 3},
    "default-exit": {"max_consecutive_spin_warnings": 3},
    "memory": {"reflection": "none", "memory": None},
    # memory with the model's triage at the run's end (the default before triage by rules)
    "memory-model": {"reflection": "none", "memory": None, "memory_triage": "end"},
    # the fourth measurement's candidate: the default then (triage at events), named
    # memory across tasks: the default, its runs sharing one store, each starting with what memory
    # holds for its task (1 KB)
    "recall": {"memory": SHARED_STORE, "memory_recall": 1024},
    "lean": {"reflection": "minimal", "detectors": {"logic_spin": False}, "memory_triage": "events",
             "spin_warnings": "prompt"},
    "synthesis": {**_BARE, "samples": 3, "tools": ["+sub_query"]},
    "diary": {**_BARE, "oracle": TASK_ORACLE, "max_trials": 3},
}


def settings_for(shared: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """A variant's settings over the evaluation's: ``own`` wins, but ``+tool`` names add to the
    shared tools (to every tool when the evaluation names none)."""
    settings = {**shared, **own}
    extra = own.get("tools")
    if isinstance(extra, list | tuple) and extra and all(str(t).startswith("+") for t in extra):
        base = shared.get("tools")
        if base is None:
            settings.pop("tools")  # every tool is there already
        else:
            names = [base] if isinstance(base, str) else list(base)
            settings["tools"] = list(dict.fromkeys([*names, *(str(t)[1:] for t in extra)]))
    return settings


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
