"""The failure catalogue: each scripted failure mode, its published class, and its on/off pair.

Every scenario file declares ``classes``: the failure classes it shows, as ids of two
published taxonomies (an empty list says it shows none: a healthy or load-generating run).

- MAST (Cemri et al., "Why Do Multi-Agent LLM Systems Fail?", arXiv 2503.13657): 14 modes
  in three categories, ``FM-1.1`` to ``FM-3.3``.
- TRAIL (Deshpande et al., "TRAIL: Trace Reasoning and Agentic Issue Localization",
  arXiv 2505.08638): reasoning, system execution and planning errors in agent traces,
  written ``TRAIL:<leaf>`` here (the paper names its leaves but gives them no ids).

A scenario that reproduces a failure mode also has a ``[mode]`` table: its id and name,
the mechanism that catches or prevents it, what to look at, and two sides, ``on`` and
``off``, each with a label, the settings of that side and what its run must show::

    [mode]
    id = "step-repetition"
    name = "Same-action spin"
    mechanism = "spin detection ..."
    look_at = "status, iterations and the spin alerts"
    verify = "{python} check.py | grep -qx OK"   # optional: run in the folder afterwards

    [mode.off]
    label = "reflection none"
    agent = { reflection = "none", max_iterations = 8 }   # Agent keyword arguments
    run = { max_format_retries = 0 }                      # settings of the run's model client
    context = { warning_ratio = 100, flush_ratio = 100 }  # a ContextConfig
    ask_user = "notes.txt"                                # what the person answers
    expect = { status = "failed", absent = ["spin"] }

``catalogue()`` builds the table from these files, so a new scenario appears in it by
itself; ``run_pair(mode)`` runs both sides and ``check`` says where a run differs from
what its side expects.  ``{python}`` in a command is the running interpreter.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: MAST's 14 modes: id -> (name, category).
MAST = {
    "FM-1.1": ("Disobey task specification", "system design"),
    "FM-1.2": ("Disobey role specification", "system design"),
    "FM-1.3": ("Step repetition", "system design"),
    "FM-1.4": ("Loss of conversation history", "system design"),
    "FM-1.5": ("Unaware of termination conditions", "system design"),
    "FM-2.1": ("Conversation reset", "inter-agent misalignment"),
    "FM-2.2": ("Fail to ask for clarification", "inter-agent misalignment"),
    "FM-2.3": ("Task derailment", "inter-agent misalignment"),
    "FM-2.4": ("Information withholding", "inter-agent misalignment"),
    "FM-2.5": ("Ignored other agent's input", "inter-agent misalignment"),
    "FM-2.6": ("Reasoning-action mismatch", "inter-agent misalignment"),
    "FM-3.1": ("Premature termination", "task verification"),
    "FM-3.2": ("No or incomplete verification", "task verification"),
    "FM-3.3": ("Incorrect verification", "task verification"),
}

#: TRAIL's leaf categories: id -> (name, root category).
TRAIL = {
    "TRAIL:language-only-hallucination": ("Language-only hallucination", "reasoning"),
    "TRAIL:tool-related-hallucination": ("Tool-related hallucination", "reasoning"),
    "TRAIL:poor-information-retrieval": ("Poor information retrieval", "reasoning"),
    "TRAIL:tool-output-misinterpretation": ("Tool output misinterpretation", "reasoning"),
    "TRAIL:incorrect-problem-identification": ("Incorrect problem identification", "reasoning"),
    "TRAIL:tool-selection-errors": ("Tool selection errors", "reasoning"),
    "TRAIL:formatting-errors": ("Formatting errors", "reasoning"),
    "TRAIL:instruction-non-compliance": ("Instruction non-compliance", "reasoning"),
    "TRAIL:tool-definition-issues": ("Tool definition issues", "system execution"),
    "TRAIL:environment-setup-errors": ("Environment setup errors", "system execution"),
    "TRAIL:rate-limiting": ("Rate limiting", "system execution"),
    "TRAIL:authentication-errors": ("Authentication errors", "system execution"),
    "TRAIL:service-errors": ("Service errors", "system execution"),
    "TRAIL:resource-not-found": ("Resource not found", "system execution"),
    "TRAIL:resource-exhaustion": ("Resource exhaustion", "system execution"),
    "TRAIL:timeout-issues": ("Timeout issues", "system execution"),
    "TRAIL:context-handling-failures": ("Context handling failures", "planning and coordination"),
    "TRAIL:resource-abuse": ("Resource abuse", "planning and coordination"),
    "TRAIL:goal-deviation": ("Goal deviation", "planning and coordination"),
    "TRAIL:task-orchestration": ("Task orchestration", "planning and coordination"),
}

CLASSES = {**MAST, **TRAIL}
SIDES = ("on", "off")
#: What a side's ``expect`` may say, and what each key checks.
EXPECT_KEYS = {
    "status": "the run's status",
    "signals": "every one of these signals is in the trace",
    "absent": "none of these signals is in the trace",
    "answer_contains": "the answer contains this text",
    "answer_lacks": "the answer does not contain this text",
    "verify": "the mode's verify command afterwards: passes | fails",
    "max_cost_usd": "the run cost at most this",
    "min_cost_usd": "the run cost more than this",
    "within_window": "every prompt fitted in the model's context window (true | false)",
}
_SIDE_KEYS = {"label", "agent", "run", "context", "ask_user", "expect"}
_GUARANTEE_KEYS = ("max_cost_usd", "max_duration_seconds", "max_recursive_calls")


@dataclass(frozen=True)
class Side:
    """One side of a mode's pair: its settings and what its run must show."""

    label: str
    agent: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    ask_user: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Mode:
    """A failure mode of the catalogue, as its scenario file declares it."""

    id: str
    name: str
    scenario: str
    classes: tuple[str, ...]
    mechanism: str
    look_at: str
    description: str
    task: str
    on: Side
    off: Side
    verify: str | None = None
    #: Fork here to fix it: the step of the off run at which a fork with ``changes`` ends as the
    #: on side does (``[mode.fix]``: ``at`` and fork changes such as ``guidance``), or None.
    fix: dict[str, Any] | None = None

    def fix_line(self) -> str:
        """The "fork here to fix it" line of the mode ("" when one step is not at fault)."""
        if not self.fix:
            return ""
        changes = " ".join(f"--{k.replace('_', '-')} {shlex.quote(str(v))}" for k, v in self.fix.items() if k != "at")
        return f"%memfit fork RUN --at {self.fix['at']} {changes}"

    def side(self, name: str) -> Side:
        if name not in SIDES:
            raise ValueError(f"a side is 'on' or 'off', got {name!r}")
        return self.on if name == "on" else self.off


def problems(scenario: Any) -> list[str]:
    """What is wrong with a scenario's declared classes and mode (empty when nothing is)."""
    found = []
    if scenario.classes is None:
        found.append(f"{scenario.name}: no 'classes' (declare its MAST / TRAIL ids, or [] for none)")
    else:
        found += [f"{scenario.name}: unknown class {c!r}" for c in scenario.classes if c not in CLASSES]
    mode = scenario.mode
    if not mode:
        return found
    if not scenario.classes:
        found.append(f"{scenario.name}: a failure mode needs at least one class")
    for key in ("id", "name", "mechanism", "look_at", "on", "off"):
        if not mode.get(key):
            found.append(f"{scenario.name}: [mode] has no {key!r}")
    for side in SIDES:
        spec = mode.get(side) or {}
        found += [f"{scenario.name}: [mode.{side}] has unknown key {k!r}" for k in set(spec) - _SIDE_KEYS]
        expect = spec.get("expect") or {}
        if "status" not in expect:
            found.append(f"{scenario.name}: [mode.{side}] expects no status")
        found += [f"{scenario.name}: [mode.{side}] expects unknown {k!r}" for k in set(expect) - set(EXPECT_KEYS)]
        if "verify" in expect and not mode.get("verify"):
            found.append(f"{scenario.name}: [mode.{side}] expects verify but [mode] has no verify command")
    fix = mode.get("fix")
    if fix is not None:
        from ..fork import STEP_CHANGES

        if not isinstance(fix.get("at"), int) or fix["at"] < 1:
            found.append(f"{scenario.name}: [mode.fix] needs at = the step to fork at")
        found += [f"{scenario.name}: [mode.fix] has unknown change {k!r}" for k in set(fix) - {"at", *STEP_CHANGES}]
    return found


def _side(spec: dict[str, Any]) -> Side:
    return Side(label=spec.get("label", ""), agent=dict(spec.get("agent", {})), run=dict(spec.get("run", {})),
                context=dict(spec.get("context", {})), ask_user=spec.get("ask_user"),
                expect=dict(spec.get("expect", {})))


def modes() -> list[Mode]:
    """Every failure mode of the built-in scenarios, in scenario order."""
    from ..llm.scenarios import load_scenario, scenario_names

    found = []
    for name in scenario_names():
        s = load_scenario(name)
        m = s.mode
        if not m:
            continue
        found.append(Mode(id=m["id"], name=m["name"], scenario=name, classes=tuple(s.classes or ()),
                          mechanism=" ".join(m["mechanism"].split()), look_at=" ".join(m["look_at"].split()),
                          description=" ".join(s.description.split()), task=s.task,
                          on=_side(m["on"]), off=_side(m["off"]), verify=m.get("verify"),
                          fix=dict(m["fix"]) if m.get("fix") else None))
    return found


def mode(name: str) -> Mode:
    """The mode with this id or scenario name; an unknown name is an error that lists them."""
    for m in modes():
        if name in (m.id, m.scenario):
            return m
    raise ValueError(f"unknown failure mode {name!r}; modes: {', '.join(m.id for m in modes())}")


def _expected(expect: dict[str, Any]) -> str:
    parts = [str(expect.get("status", "?"))]
    parts += [f"shows {s}" for s in expect.get("signals", ())]
    parts += [f"no {s}" for s in expect.get("absent", ())]
    if "answer_contains" in expect:
        parts.append(f"answer has {expect['answer_contains']!r}")
    if "answer_lacks" in expect:
        parts.append(f"answer lacks {expect['answer_lacks']!r}")
    if "verify" in expect:
        parts.append(f"check {expect['verify']}")
    if "max_cost_usd" in expect:
        parts.append(f"cost <= ${expect['max_cost_usd']:g}")
    if "min_cost_usd" in expect:
        parts.append(f"cost > ${expect['min_cost_usd']:g}")
    if "within_window" in expect:
        parts.append("prompts fit the window" if expect["within_window"] else "prompts overflow the window")
    return "; ".join(parts)


def catalogue() -> Any:
    """Every failure mode as a polars DataFrame: id, name, its MAST and TRAIL classes, the
    scenario that reproduces it, the mechanism, and what the on and off runs show; ordered
    by class (MAST's modes first).

    >>> from memfit_jupyter import catalogue
    >>> catalogue().select("id", "mast", "trail").head(3)      # doctest: +SKIP
    """
    import polars as pl

    rows = []
    # MAST modes first, in the taxonomy's order, then the TRAIL-only ones.
    for m in sorted(modes(), key=lambda m: (m.classes[0] if m.classes else "~", m.id)):
        mast = [c for c in m.classes if c in MAST]
        trail = [c for c in m.classes if c in TRAIL]
        rows.append({
            "id": m.id, "name": m.name,
            "mast": ", ".join(f"{c} {MAST[c][0]}" for c in mast),
            "trail": ", ".join(TRAIL[c][0] for c in trail),
            "category": CLASSES[m.classes[0]][1] if m.classes else "",
            "scenario": m.scenario, "mechanism": m.mechanism,
            "on": m.on.label, "off": m.off.label,
            "expect_on": _expected(m.on.expect), "expect_off": _expected(m.off.expect),
            "fix": m.fix_line(),
            "classes": list(m.classes),
        })
    return pl.DataFrame(rows, schema_overrides={"classes": pl.List(pl.String)})


# --- running a pair ---------------------------------------------------------------------------


def _command(text: str) -> str:
    return text.replace("{python}", shlex.quote(sys.executable))


def agent_for(m: Mode, side: str, workdir: str | Path, *, model: str | None = None, **extra: Any) -> Any:
    """The ``Agent`` of one side of ``m``: the scenario's scripted model, or ``model``."""
    from ..agent import Agent
    from ..reliability.guarantees import ExecutionGuarantees

    s = m.side(side)
    kwargs = dict(s.agent)
    limits = {k: kwargs.pop(k) for k in _GUARANTEE_KEYS if k in kwargs}
    if limits:
        kwargs["guarantees"] = ExecutionGuarantees(**limits)
    if isinstance(kwargs.get("oracle"), str):
        kwargs["oracle"] = _command(kwargs["oracle"])
    guards = kwargs.pop("guards", None)
    if guards:
        from ..reliability.guards import GuardConfig

        kwargs["extensions"] = [*kwargs.get("extensions", ()), GuardConfig.only(guards)]
    if s.ask_user is not None:
        answer = s.ask_user
        kwargs["ask_user"] = lambda question: answer
    kwargs.update(extra)
    agent = Agent(model=model or f"memfit/{m.scenario}", workdir=workdir, **kwargs)
    if s.context:
        from ..context.tiers import ContextConfig

        agent.context_config = ContextConfig(**s.context)
    return agent


def start(m: Mode, side: str, workdir: str | Path, *, model: str | None = None, **extra: Any) -> Any:
    """A ``Run`` of one side of ``m`` in ``workdir``, not started.  With a real ``model`` the
    scenario's files are placed first (the scripted model places them itself)."""
    from ..llm.scenarios import load_scenario

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if model and not model.startswith("memfit/"):
        for rel, content in load_scenario(m.scenario).files.items():
            target = workdir / rel
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
    run = agent_for(m, side, workdir, model=model, **extra).start(m.task)
    for key, value in m.side(side).run.items():
        setattr(run.llm, key, value)  # the model client's settings, e.g. max_format_retries
    return run


def verify(m: Mode, workdir: str | Path) -> str | None:
    """The mode's verify command in ``workdir``: "passes", "fails", or None when it has none."""
    if not m.verify:
        return None
    done = subprocess.run(_command(m.verify), shell=True, cwd=workdir, capture_output=True, timeout=120)
    return "passes" if done.returncode == 0 else "fails"


def signals(trace: dict[str, Any]) -> set[str]:
    """What a trace shows, as the ``expect`` tables name it: each event type, and the
    detail that tells its kind apart (``spin:<detector>``, ``guard:<name>``,
    ``reflection:<LEVEL>``, ``breaker:<to_state>``, ``context:<watermark>``, ``tool:<name>``)."""
    detail = {"spin": "detector", "guard": "guard", "reflection": "level_name", "breaker": "to_state",
              "context": "watermark", "action": "tool"}
    found = set()
    for e in trace["events"]:
        kind = e["type"]
        found.add(kind)
        key = detail.get(kind)
        if key and e.get(key) is not None:
            found.add(f"{'tool' if kind == 'action' else kind}:{e[key]}")
    return found


def outcome(m: Mode, trace: dict[str, Any], workdir: str | Path | None = None) -> dict[str, Any]:
    """What a run of ``m`` showed, in the terms of ``expect``."""
    from ..llm.scenarios import load_scenario

    calls = [e for e in trace["events"] if e["type"] == "model_call"]
    window = trace["settings"].get("context_window") or load_scenario(m.scenario).context_window
    return {
        "status": trace["status"], "answer": trace.get("answer") or "", "signals": signals(trace),
        "iterations": trace["totals"]["iterations"], "cost_usd": trace["totals"]["cost_usd"],
        "peak_prompt_tokens": max((e["prompt_tokens"] for e in calls), default=0), "window": window,
        "verify": verify(m, workdir) if workdir is not None else None,
    }


def check(expect: dict[str, Any], seen: dict[str, Any]) -> list[str]:
    """Where ``seen`` (an ``outcome``) differs from ``expect``: one line per difference."""
    wrong = []
    if "status" in expect and seen["status"] != expect["status"]:
        wrong.append(f"status {seen['status']!r}, expected {expect['status']!r}")
    wrong += [f"no {s} in the trace" for s in expect.get("signals", ()) if s not in seen["signals"]]
    wrong += [f"{s} in the trace" for s in expect.get("absent", ()) if s in seen["signals"]]
    if "answer_contains" in expect and expect["answer_contains"] not in seen["answer"]:
        wrong.append(f"the answer lacks {expect['answer_contains']!r}: {seen['answer'][:80]!r}")
    if "answer_lacks" in expect and expect["answer_lacks"] in seen["answer"]:
        wrong.append(f"the answer has {expect['answer_lacks']!r}: {seen['answer'][:80]!r}")
    if "verify" in expect and seen["verify"] != expect["verify"]:
        wrong.append(f"the check afterwards {seen['verify']}, expected it {expect['verify']}")
    if "max_cost_usd" in expect and seen["cost_usd"] > expect["max_cost_usd"]:
        wrong.append(f"cost ${seen['cost_usd']:.4f} > ${expect['max_cost_usd']:g}")
    if "min_cost_usd" in expect and seen["cost_usd"] <= expect["min_cost_usd"]:
        wrong.append(f"cost ${seen['cost_usd']:.4f} <= ${expect['min_cost_usd']:g}")
    if "within_window" in expect and (seen["peak_prompt_tokens"] <= seen["window"]) != expect["within_window"]:
        wrong.append(f"peak prompt {seen['peak_prompt_tokens']} tokens, window {seen['window']}")
    return wrong


def run_pair(name: str, root: str | Path, *, model: str | None = None) -> dict[str, dict[str, Any]]:
    """Run both sides of mode ``name`` to the end, each in its own folder under ``root``.

    Returns, per side, the ``run``, its ``outcome`` and the ``problems`` against what the
    side expects (always checked against the scripted model's expectations).
    """
    m = mode(name)
    pair = {}
    for side in SIDES:
        workdir = Path(root) / m.scenario / side
        run = start(m, side, workdir, model=model)
        run.run()
        seen = outcome(m, run.trace(), workdir)
        pair[side] = {"run": run, "outcome": seen, "problems": check(m.side(side).expect, seen)}
    return pair


class _CallableModule(types.ModuleType):
    """``memfit_jupyter.catalogue()`` is the function, yet importing the submodule
    ``memfit_jupyter.catalogue`` puts the module in that place on the package: so the module
    itself answers a call with the table, and both spellings work."""

    def __call__(self) -> Any:
        return catalogue()


sys.modules[__name__].__class__ = _CallableModule
