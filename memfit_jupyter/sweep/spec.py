"""What a sweep runs: one ``RunSpec`` per combination of a task and the grid's settings.

A spec is plain JSON (task and settings), so it crosses process and Ray boundaries
unchanged, and its key (a hash of that JSON) names the run's directory: the same
combination lands in the same place in every sweep over ``out``, which is what makes a
sweep resumable.  The row a finished run contributes to the sweep's DataFrame is made
from its serialised trace alone (``row_from_trace``), so a resumed sweep reads the rows
of finished runs back from disk exactly as they were.

Specs hold the real task and settings, in this process and in the workers they are handed
to; what is written to disk or shown is redacted (``secrets.redact``): ``RunSpec.kept`` is
a spec as ``sweep.json`` keeps it, and rows show settings and names redacted.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..secrets import redact, redact_obj

#: Grid keys that are limits of ``ExecutionGuarantees`` rather than ``Agent`` arguments.
GUARANTEE_KEYS = ("max_cost_usd", "max_duration_seconds", "max_recursive_calls")
#: Agent arguments a sweep sets itself (each run gets its own working directory) or that need
#: a person at the keyboard, which no worker process has.
RESERVED_KEYS = ("workdir", "namespace", "approve", "ask_user", "extensions", "extra_tools")
#: Event types that mean a mechanism fired, with the test that says it did.
MECHANISMS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "reflection": lambda e: True,
    "spin": lambda e: bool(e.get("is_spinning")),
    "synthesis": lambda e: True,
    "guarantee": lambda e: bool(e.get("violated")),
    "breaker": lambda e: bool(e.get("to_state")) or bool(e.get("rejected")),
    "degradation": lambda e: True,
    "context": lambda e: e.get("watermark") in ("warning", "flush"),
    "trial": lambda e: True,
    "escalation": lambda e: True,
    "memory": lambda e: e.get("op") == "insert" and bool(e.get("added")),
}


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run of a sweep: its task, its settings and the key that names its directory."""

    task: str
    settings: dict[str, Any]
    key: str
    #: The task's name when ``tasks`` was a mapping (else the task itself, shortened).
    name: str
    #: Files the run's working directory starts with (path -> text); ``evaluate``'s tasks bring them.
    files: dict[str, str] = field(default_factory=dict)
    #: Runs with the same place work in the same working directory path, one after another
    #: (``runner.execute``): the prompt names that path, so runs meant to differ only in their
    #: settings (``evaluate``'s variants of one task and seed) get equal prompts.  None: the
    #: run's own directory.
    place: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"task": self.task, "settings": self.settings, "key": self.key, "name": self.name}
        if self.files:
            data["files"] = self.files
        if self.place is not None:
            data["place"] = self.place
        return data

    def kept(self) -> dict[str, Any]:
        """``to_json`` as ``sweep.json`` keeps it on disk: every secret redacted, and under
        ``"redacted"`` what lost one (``"task"``, ``"files"``, ``"settings.<name>"``): the values
        a run that has not finished needs given again (``resume``).  The key stays the real
        values' hash, so a run keeps its directory."""
        data = self.to_json()
        settings = {k: redact_obj(v) for k, v in self.settings.items()}
        kept: dict[str, Any] = {**data, "task": redact(self.task), "settings": settings, "name": redact(self.name)}
        lost = ["task"] if kept["task"] != self.task else []
        if self.files:
            kept["files"] = redact_obj(self.files)
            if _differs(kept["files"], self.files):
                lost.append("files")
        lost += [f"settings.{k}" for k, v in self.settings.items() if _differs(settings[k], v)]
        if lost:
            kept["redacted"] = lost
        return kept

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSpec:
        return cls(data["task"], dict(data["settings"]), data["key"], data["name"], dict(data.get("files") or {}),
                   data.get("place"))

    def worst_case_cost(self) -> float:
        """The most this run can spend: its own hard cost limit (``ExecutionGuarantees``)."""
        from ..reliability.guarantees import ExecutionGuarantees

        return float(self.settings.get("max_cost_usd", ExecutionGuarantees().max_cost_usd))


def run_key(task: str, settings: Mapping[str, Any]) -> str:
    blob = json.dumps({"task": task, "settings": settings}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def expand(tasks: Iterable[str] | Mapping[str, str] | str, grid: Mapping[str, Iterable[Any]] | None,
           common: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """Every combination of a task and one value per grid key, in a stable order.

    >>> [s.settings for s in expand(["t"], {"model": ["memfit/demo", "memfit/spin-demo"]})]
    [{'model': 'memfit/demo'}, {'model': 'memfit/spin-demo'}]
    """
    if isinstance(tasks, str):
        tasks = [tasks]
    # A name is only shown (the task column, the progress display, sweep.json): redacted here,
    # before shortening could cut a key to something that no longer looks like one.
    named = ([(redact(n) if isinstance(n, str) else n, t) for n, t in tasks.items()] if isinstance(tasks, Mapping)
             else [(_short(redact(str(t))), t) for t in tasks])
    if not named:
        raise ValueError("no tasks: give at least one task")
    for name, task in named:
        if not isinstance(task, str) or not task.strip():
            raise ValueError(f"task {name!r} is empty: say what the agent should do")
    grid = dict(grid or {})
    for key, values in list(grid.items()):
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise ValueError(f"grid[{key!r}] must be a list of values, got {values!r}")
        grid[key] = list(values)
        if not grid[key]:
            raise ValueError(f"grid[{key!r}] is empty: give at least one value")
    settings_base = dict(common or {})
    for key in [*grid, *settings_base]:
        check_setting(key)
    specs, seen = [], set()
    for name, task in named:
        for combo in itertools.product(*grid.values()):
            settings = {**settings_base, **dict(zip(grid, combo, strict=True))}
            _check_json(settings)
            key = run_key(task.strip(), settings)
            if key in seen:
                raise ValueError(f"task {name!r} appears twice with the same settings")
            seen.add(key)
            specs.append(RunSpec(task.strip(), settings, key, name))
    return specs


def check_setting(key: str) -> None:
    """A grid key must be an ``Agent`` argument or a guarantee limit that a worker can honour."""
    import inspect

    from ..agent import Agent

    if key in RESERVED_KEYS:
        raise ValueError(f"{key!r} cannot be swept: each run of a sweep gets its own working directory "
                         "and runs without a person at the keyboard")
    allowed = set(inspect.signature(Agent.__init__).parameters) - {"self", "guarantees", *RESERVED_KEYS}
    if key not in allowed and key not in GUARANTEE_KEYS:
        raise ValueError(f"unknown setting {key!r}; settings are: {', '.join(sorted(allowed | set(GUARANTEE_KEYS)))}")


def validate(specs: Iterable[RunSpec]) -> None:
    """Make each distinct set of settings into an ``Agent`` once, here, so that an unknown model,
    tool or bad value is one clear error before anything runs, not one per worker."""
    from ..agent import Agent

    seen = set()
    for spec in specs:
        blob = json.dumps(spec.settings, sort_keys=True)
        if blob not in seen:
            seen.add(blob)
            Agent(**agent_kwargs(spec.settings))


def _check_json(settings: Mapping[str, Any]) -> None:
    try:
        json.dumps(settings, sort_keys=True)
    except TypeError as exc:
        raise ValueError(f"sweep settings must be JSON values (strings, numbers, lists...): {exc}") from None


def _differs(a: Any, b: Any) -> bool:
    """Whether two JSON values differ as JSON (a tuple and the list redaction made of it do not)."""
    return json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True)


def _short(task: str) -> str:
    line = " ".join(str(task).split())
    return line if len(line) <= 40 else line[:39] + "…"


def agent_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``Agent(**...)`` arguments for a spec's settings (the limits become ``guarantees``)."""
    from ..reliability.guarantees import ExecutionGuarantees

    kwargs = {k: v for k, v in settings.items() if k not in GUARANTEE_KEYS}
    limits = {k: settings[k] for k in GUARANTEE_KEYS if k in settings}
    if limits:
        kwargs["guarantees"] = ExecutionGuarantees(**limits)
    return kwargs


def mechanisms(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """The mechanisms that fired in a run, by name, sorted."""
    fired = {e.get("type") for e in events if e.get("type") in MECHANISMS and MECHANISMS[e["type"]](e)}
    return sorted(t for t in fired if t)


def _shown(spec: RunSpec) -> dict[str, Any]:
    """The columns a row takes from its spec, redacted: a row is shown (the DataFrame, the
    progress display), and an ``api_base`` may carry a password."""
    return {"run": spec.key, "task": redact(spec.name), **{k: redact_obj(v) for k, v in spec.settings.items()}}


def row_from_trace(spec: RunSpec, trace: Mapping[str, Any], trace_path: Path, attempts: int) -> dict[str, Any]:
    """The DataFrame row of a finished run, read from its trace."""
    totals = trace.get("totals") or {}
    tokens = totals.get("tokens") or {}
    return {
        **_shown(spec),
        "status": trace.get("status"), "iterations": totals.get("iterations"),
        "cost_usd": totals.get("cost_usd"), "prompt_tokens": tokens.get("prompt"),
        "completion_tokens": tokens.get("completion"), "tokens": tokens.get("total"),
        "duration_s": totals.get("duration_s"), "mechanisms": mechanisms(trace.get("events") or ()),
        "answer": trace.get("answer"), "trace": str(trace_path), "attempts": attempts, "error": None,
    }


def row_without_trace(spec: RunSpec, status: str, error: str, attempts: int) -> dict[str, Any]:
    """The row of a run that has no trace: it failed to run, or the sweep did not start it."""
    return {
        **_shown(spec),
        "status": status, "iterations": None, "cost_usd": 0.0, "prompt_tokens": None,
        "completion_tokens": None, "tokens": None, "duration_s": None, "mechanisms": [],
        "answer": None, "trace": None, "attempts": attempts, "error": redact(error),
    }
