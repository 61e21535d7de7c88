"""Scripted scenarios: TOML files that script a model's replies, call by call.

A scenario file holds, for each purpose of call (``action``, ``reflection``,
``spin``, ``triage``, ``tags``, ``sample``, ``summary``, ``lesson``), a list of
rules::

    [[action]]
    when = ["[SPIN DETECTED]"]      # every string must be in the prompt (optional)
    unless = ["..."]                # none may be (optional)
    then = "last"                   # past the last reply: "last" (repeat it),
                                    # "cycle", or "next" (fall through to the next rule)
    replies = [
      { tool = "shell", action_type = "explore", params = { command = "ls" } },
      { fault = "rate_limit" },     # rate_limit | timeout | server_error | malformed | empty
      { raw = "not json at all" },  # sent as it is
    ]

The first rule whose conditions hold answers; its n-th use in a run gives its
n-th reply.  Conditions on prompt text let a scripted agent react to guidance
injected into its context, as a real model would.  ``defaults.toml`` answers
every purpose that a scenario does not script.  ``classes`` and the ``[mode]``
table say which published failure classes a scenario shows and how its failure
mode is demoed (see ``memfit_jupyter/study/catalogue.py``).  A top-level ``latency_s``
is how long each of the scenario's replies takes unless the reply sets ``delay_s``
(the defaults' replies included): a hosted model's latency, for a demo that needs
calls to take real time.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from ..errors import UnknownScenarioError

FAULTS = ("rate_limit", "timeout", "server_error", "malformed", "empty")


@dataclass(frozen=True, slots=True)
class Reply:
    text: str | None = None
    fault: str | None = None
    delay_s: float = 0.0
    #: Only for "timeout": how long the fault waits before raising (capped by the call's timeout).
    hang_s: float = 0.05
    #: Tokens the reply claims to use, overriding the length-based count (for budget scenarios).
    completion_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    replies: tuple[Reply, ...]
    when: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    then: str = "last"

    def matches(self, prompt: str) -> bool:
        return all(w in prompt for w in self.when) and not any(u in prompt for u in self.unless)

    def reply_at(self, n: int) -> Reply | None:
        if n < len(self.replies):
            return self.replies[n]
        if self.then == "cycle":
            return self.replies[n % len(self.replies)]
        if self.then == "last":
            return self.replies[-1]
        return None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    input_cost_per_token: float
    output_cost_per_token: float
    context_window: int
    rules: dict[str, tuple[Rule, ...]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    task: str = ""
    #: MAST / TRAIL failure classes the scenario shows (None: the file declares none, see study/catalogue.py).
    classes: tuple[str, ...] | None = None
    #: The failure mode it reproduces, with its on/off pair (the ``[mode]`` table, see study/catalogue.py).
    mode: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return f"memfit/{self.name}"


def _reply(item: Any, latency_s: float = 0.0) -> Reply:
    if isinstance(item, str):
        return Reply(text=item, delay_s=latency_s)
    if not isinstance(item, dict):
        raise ValueError(f"a scripted reply must be a table or a string, got {item!r}")
    item = dict(item)
    delay = float(item.pop("delay_s", latency_s))
    hang = float(item.pop("hang_s", 0.05))
    tokens = item.pop("completion_tokens", None)
    if "fault" in item:
        fault = item["fault"]
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; faults are: {', '.join(FAULTS)}")
        return Reply(fault=fault, delay_s=delay, hang_s=hang)
    if "raw" in item:
        return Reply(text=str(item["raw"]), delay_s=delay, completion_tokens=tokens)
    return Reply(text=json.dumps(item, ensure_ascii=False), delay_s=delay, completion_tokens=tokens)


def _rules(items: list[dict[str, Any]], latency_s: float = 0.0) -> tuple[Rule, ...]:
    rules = []
    for item in items:
        when = item.get("when", ())
        unless = item.get("unless", ())
        rules.append(
            Rule(
                replies=tuple(_reply(r, latency_s) for r in item["replies"]),
                when=(when,) if isinstance(when, str) else tuple(when),
                unless=(unless,) if isinstance(unless, str) else tuple(unless),
                then=item.get("then", "last"),
            )
        )
    return tuple(rules)


def _load(name: str, text: str, defaults: dict[str, Any] | None) -> Scenario:
    data = tomllib.loads(text)
    pricing = {**(defaults or {}).get("pricing", {}), **data.get("pricing", {})}
    latency_s = float(data.get("latency_s", 0.0))
    if latency_s < 0:
        raise ValueError(f"{name}: latency_s must be a number of seconds, not {latency_s!r}")
    rules: dict[str, tuple[Rule, ...]] = {}
    for purpose in ("action", "reflection", "spin", "triage", "tags", "sample", "summary", "lesson"):
        own = _rules(data.get(purpose, []), latency_s)
        fallback = _rules((defaults or {}).get(purpose, []), latency_s)
        rules[purpose] = own + fallback
    return Scenario(
        name=name,
        description=data.get("description", "").strip(),
        input_cost_per_token=float(pricing.get("input_cost_per_token", 1e-6)),
        output_cost_per_token=float(pricing.get("output_cost_per_token", 2e-6)),
        context_window=int(pricing.get("context_window", 32_000)),
        rules=rules,
        files=dict(data.get("files", {})),
        task=data.get("task", ""),
        classes=tuple(data["classes"]) if "classes" in data else None,
        mode=dict(data.get("mode", {})),
    )


def _dir() -> Traversable:
    return resources.files(__package__) / "scenarios"


@cache
def _defaults() -> dict[str, Any]:
    return tomllib.loads((_dir() / "defaults.toml").read_text())


def scenario_names() -> list[str]:
    """The built-in scenarios' names."""
    return sorted(
        p.name.removesuffix(".toml")
        for p in _dir().iterdir()
        if p.name.endswith(".toml") and p.name != "defaults.toml"
    )


@cache
def load_scenario(name: str) -> Scenario:
    """The scenario ``name``; an unknown name is an error that lists the available ones."""
    path = _dir() / f"{name}.toml"
    if name == "defaults" or not path.is_file():
        raise UnknownScenarioError(
            f"unknown scenario {name!r}; available: {', '.join(scenario_names())}"
        )
    return _load(name, path.read_text(), _defaults())


def scenarios() -> dict[str, str]:
    """Every built-in scenario with its one-line description."""
    return {n: " ".join(load_scenario(n).description.split()) for n in scenario_names()}
