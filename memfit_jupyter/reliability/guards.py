"""Guards: checks for failure modes that no spin detector sees, because the loop is not stuck.

Each guard catches one published failure class (see ``memfit_jupyter.catalogue``) where a
plain rule, or the model asked one narrow question, can honestly tell:

- ``unverified_finish`` (MAST FM-3.2, FM-3.3): the task names a check (a command in
  backticks, a test file) and the agent finishes with no passing run of *that* check since
  its last change, or after running some other check instead.  The finish is refused.
- ``premature_finish`` (FM-3.1): the task names files that are in the working directory
  and the agent finishes without having touched one of them.  The finish is refused.
- ``termination_condition`` (FM-1.5): the task says what ends it ("prints OK"), an
  observation showed exactly that, and the agent went on anyway.  It is told to finish.
- ``reasoning_action_mismatch`` (FM-2.6): after an action that changes something, the
  model is asked at the reflection step whether the action carries out its own thought;
  when it says no, the agent is told what its thought said and what the action did.
- ``task_derailment`` (FM-2.3): the same call asks whether the action works toward the
  task; when it says no, the agent is told to come back to the task.

A refused finish is a failed action like any other (recorded, reflected on); a guard
refuses at most ``max_refusals`` times per run and then lets the finish through, so an
agent that cannot run the check still ends.  Every firing is a ``guard`` event: guard,
reason, iteration.  All guards are off unless switched on:
``Agent(extensions=[GuardConfig.only("all")])``.

On real runs (``tests/benchmarks/guards_eval.py``: 145 mini-swe-agent runs on SWE-bench
tasks with their evaluation reports), the rules fire on resolved runs as follows:
``unverified_finish`` 3 of 73 (and 10 of 72 unresolved), ``termination_condition`` 0 of 73;
``premature_finish`` fires on most of them (46 of 73, counting only files the run saw),
because those prompts name files as context, not as inputs: switch it on for tasks that
list what they must read.  The judged guards were not measured (they need a judge model).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..events import Guidance
from ..records import ActionRecord, ToolResult

if TYPE_CHECKING:
    from ..protocols import AgentView, RunView
    from ..tools import Tool, ToolContext

GUARDS = ("unverified_finish", "premature_finish", "termination_condition", "reasoning_action_mismatch",
          "task_derailment")
#: Tools whose actions change the working directory: a check must come after the last of them.
CHANGING_TOOLS = ("write_file", "modify_code")
#: Tools that can run a check.
RUNNING_TOOLS = ("shell", "python")

_BACKTICKS = re.compile(r"`([^`\n]+)`")
#: Programs that run checks: a span in backticks is a check command only if it starts with one
#: (issue texts put code identifiers in backticks too, and those are no checks).
RUNNERS = ("python", "python3", "pytest", "py.test", "tox", "nox", "make", "npm", "npx", "yarn", "pnpm",
           "cargo", "go", "node", "bash", "sh", "ruff", "mypy")
_TEST_FILE = re.compile(r"\b((?:tests?_\w+|\w+_tests?|check\w*)\.py)\b")
#: A file name: a path with an extension that has a letter (so "2.4.1" is not one) and two
#: characters or more, but for the one-letter ones of source files (so "e.g" is not one).
_FILE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?=[A-Za-z0-9]*[A-Za-z])(?:[A-Za-z0-9]{2,8}|[chrsm]))\b")
_END = re.compile(r"\b(?:prints?|outputs?)\s+([\"'`]?)([^\s\"'`,;]+?)\1(?=[\s.,;]|$)")


@dataclass
class GuardConfig:
    """Which guards run, and how far they go.  All off by default.

    >>> GuardConfig.only(["unverified_finish"]).enabled("unverified_finish")
    True
    """

    #: Guards switched on by name (missing names are off).
    guards: dict[str, bool] = field(default_factory=dict)
    #: A guard refuses at most this many finishes per run, then lets the next one through.
    max_refusals: int = 2
    #: The tools whose successful actions the reasoning-action check looks at.
    judged_tools: tuple[str, ...] = ("write_file", "modify_code", "shell")

    def __post_init__(self) -> None:
        unknown = sorted(set(self.guards) - set(GUARDS))
        if unknown:
            raise ValueError(f"unknown guard(s) {', '.join(unknown)}; guards are: {', '.join(GUARDS)}")

    @classmethod
    def only(cls, names: str | Iterable[str]) -> GuardConfig:
        """The guards ``names`` on (``"all"`` for every one), the others off."""
        if isinstance(names, str):
            names = GUARDS if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
        return cls(guards={n: True for n in names})

    def enabled(self, name: str) -> bool:
        return bool(self.guards.get(name, False))

    @classmethod
    def from_agent(cls, agent: AgentView) -> GuardConfig | None:
        for ext in getattr(agent, "extensions", ()):
            if isinstance(ext, cls):
                return ext
        return None


# --- what the task names ---------------------------------------------------------------------


def named_checks(task: str) -> list[str]:
    """The checks a task names: commands in backticks that start with a test runner or an
    interpreter, and test files; each as the text an action must mention to count as running
    it (a command's file, else the command)."""
    found: list[str] = []
    for command in _BACKTICKS.findall(task):
        program = command.split()[0] if command.split() else ""
        if program not in RUNNERS and not program.startswith("./"):
            continue
        files = _FILE.findall(command)
        key = files[0] if files else command.strip()
        if key not in found:
            found.append(key)
    for name in _TEST_FILE.findall(task):
        if name not in found:
            found.append(name)
    return found


def named_files(task: str) -> list[str]:
    """The file names a task mentions, in order."""
    found: list[str] = []
    for name in _FILE.findall(task):
        if name not in found:
            found.append(name)
    return found


def end_condition(task: str) -> str | None:
    """What the task says its end looks like ("prints OK" -> "OK"), or None."""
    match = _END.search(task)
    return match.group(2) if match else None


def _text(record: ActionRecord) -> str:
    return json.dumps(record.params, ensure_ascii=False, default=str)


def _actions(run: RunView) -> list[ActionRecord]:
    return [r for r in run.records if r.tool and r.action_type != "invalid_reply"]


# --- the finish guards -----------------------------------------------------------------------


def unverified(task: str, records: list[ActionRecord]) -> str | None:
    """Why finishing now would be unverified, or None."""
    checks = named_checks(task)
    if not checks:
        return None
    last_change = max((i for i, r in enumerate(records) if r.tool in CHANGING_TOOLS and r.ok), default=-1)
    runs = [r for r in records[last_change + 1:] if r.tool in RUNNING_TOOLS]
    named = " or ".join(checks)
    mine = [r for r in runs if any(c in _text(r) for c in checks)]
    if mine:
        if mine[-1].ok:
            return None
        return f"the last run of the check the task names ({named}) failed: {mine[-1].error}"
    since = "since the last change" if last_change >= 0 else "at all"
    if runs:
        other = runs[-1].params.get("command") or runs[-1].params.get("code") or runs[-1].tool
        return (f"the task names a check ({named}), but what ran {since} was another one ({str(other)[:80]}): "
                "run the check the task names, then finish")
    return f"the task names a check ({named}) and nothing ran it {since}: run it, then finish"


def premature(task: str, records: list[ActionRecord], exists: Callable[[str], bool],
              managed: Iterable[str] = ()) -> str | None:
    """Why finishing now would be premature, or None: named files that exist, untouched.
    ``managed`` files are read for the agent by the harness (a plan file): they do not count."""
    touched = " ".join(_text(r) for r in records if r.tool != "finish")
    missing = [f for f in named_files(task) if f not in managed and exists(f) and f not in touched]
    if not missing:
        return None
    return (f"the task names {', '.join(missing)}, which you have not opened yet: "
            "finish once every part of the task is done")


class GuardMonitor:
    """The guards of one run."""

    def __init__(self, config: GuardConfig, run: RunView):
        self.config = config
        self.run = run
        self.refusals: dict[str, int] = {}
        self._end_seen: int | None = None  # the iteration whose observation met the end condition
        self._end_warned = False

    def tools(self, builtin_finish: Tool) -> list[Tool]:
        """A ``finish`` that the finish guards may refuse.  It replaces the run's finish and,
        when the guards let it through, calls the one it replaced (the failure diary's or the
        plan's finish comes from an extension listed earlier; else the built-in one)."""
        if not (self.config.enabled("unverified_finish") or self.config.enabled("premature_finish")):
            return []
        from ..tools import Tool

        inner = _replaced_finish(self.run, builtin_finish, skip=self)

        def guarded_finish(ctx: ToolContext, answer: str) -> ToolResult:
            refusal = self.refuse(ctx)
            return refusal if refusal is not None else inner.fn(ctx, answer=answer)

        return [Tool(inner.name, inner.description, inner.params, guarded_finish)]

    def refuse(self, ctx: ToolContext) -> ToolResult | None:
        run = ctx.run if ctx.run is not None else self.run  # a context made by hand: this monitor's run
        records = _actions(run)
        checks: tuple[tuple[str, Callable[[], str | None]], ...] = (
            ("unverified_finish", lambda: unverified(run.task, records)),
            ("premature_finish", lambda: premature(run.task, records, lambda f: _exists(ctx, f),
                                                   managed=_managed(run))),
        )
        for name, why in checks:
            if not self.config.enabled(name) or self.refusals.get(name, 0) >= self.config.max_refusals:
                continue
            reason = why()
            if reason:
                self.refusals[name] = self.refusals.get(name, 0) + 1
                run.emit("guard", guard=name, reason=reason, refused="finish",
                         refusals=self.refusals[name], max_refusals=self.config.max_refusals)
                return ToolResult(ok=False, error=f"finish refused ({name}): {reason}")
        return None

    # --- after each action ---------------------------------------------------------------
    def after_action(self, run: RunView, record: ActionRecord) -> None:
        if self.config.enabled("termination_condition"):
            self._termination(run, record)
        judged = self.config.enabled("reasoning_action_mismatch") or self.config.enabled("task_derailment")
        if judged and record.ok and record.tool in self.config.judged_tools:
            self._judge(run, record)

    def _termination(self, run: RunView, record: ActionRecord) -> None:
        condition = end_condition(run.task)
        if condition is None or record.tool == "finish":
            return
        if self._end_seen is not None and not self._end_warned:
            self._end_warned = True
            reason = (f"the task ends when the output is {condition!r}; iteration {self._end_seen} showed it, "
                      f"and the run went on with {record.tool}")
            run.emit("guard", iteration=record.iteration, guard="termination_condition", reason=reason)
            run.emit(Guidance(kind="guard_warning", iteration=record.iteration, text=(
                f"[TERMINATION CONDITION MET] {reason}. The task is done: call finish with the answer now, "
                "unless the task asks for something more.")))
            return
        lines = [line.strip() for line in (record.output or "").splitlines()]
        if record.ok and record.tool in RUNNING_TOOLS and condition in lines and self._end_seen is None:
            self._end_seen = record.iteration

    def _judge(self, run: RunView, record: ActionRecord) -> None:
        """The step check: one model call at the reflection step asks whether the action carries
        out its thought and whether it works toward the task; each no is its guard's finding."""
        from ..errors import RunEnded
        from ..llm.prompts import json_system

        messages = [
            {"role": "system", "content": json_system("reflection", (
                "You check one step of an agent. matches_thought: does the action carry out what its own "
                "thought says? A thought that says 'append' or 'keep' and an action that overwrites does not; "
                "a thought about one file and an action on another does not. serves_task: does the action "
                "work toward the task, rather than something the task did not ask for?"),
                "summary, suggestions, matches_thought (bool), mismatch_reason, serves_task (bool), "
                "derailment_reason")},
            {"role": "user", "content": (
                f"[STEP CHECK]\nTask: {run.task}\nThought: {record.thought}\n"
                f"Action: {record.tool} {_text(record)[:1500]}\nObservation: {(record.output or '')[:500]}")},
        ]
        try:
            result = run.llm.call("reflection", messages, tier="fast", iteration=record.iteration)
        except RunEnded:
            raise
        except Exception:  # a failed check must not stop the run; the model_call event has it
            return
        if not result.ok:
            return
        reply = result.value
        action = f"{record.tool} {_text(record)[:300]}"
        if self.config.enabled("reasoning_action_mismatch") and not getattr(reply, "matches_thought", True):
            reason = reply.mismatch_reason or reply.summary or "the action does not do what the thought says"
            run.emit("guard", iteration=record.iteration, guard="reasoning_action_mismatch", reason=reason)
            run.emit(Guidance(kind="guard_warning", iteration=record.iteration, text=(
                f"[REASONING-ACTION MISMATCH] At iteration {record.iteration} your thought was: "
                f"{record.thought!r}; the action was {action}. {reason}. "
                "Put right what the action did before you go on.")))
        if self.config.enabled("task_derailment") and not getattr(reply, "serves_task", True):
            reason = reply.derailment_reason or reply.summary or "the action does not work toward the task"
            run.emit("guard", iteration=record.iteration, guard="task_derailment", reason=reason)
            run.emit(Guidance(kind="guard_warning", iteration=record.iteration, text=(
                f"[TASK DERAILMENT] At iteration {record.iteration} the action was {action}. {reason}. "
                f"Come back to the task: {run.task}")))


def _replaced_finish(run: RunView, builtin_finish: Tool, skip: GuardMonitor) -> Tool:
    """The finish the run would have without the guards: the last one its agent's extra tools
    or its other extensions provide, else the built-in one."""
    found = builtin_finish
    candidates = list(getattr(run.agent, "extra_tools", ()))
    for ext in run.extensions:
        if getattr(ext, "guards", None) is not skip:
            candidates.extend(getattr(ext, "tools", lambda: ())())
    for tool in candidates:
        if tool.name == "finish":
            found = tool
    return found


def _managed(run: RunView) -> list[str]:
    """Files the harness reads and writes for the agent: the plan and progress files."""
    agent = run.agent
    return [str(f) for f in (getattr(agent, "plan", None), getattr(agent, "progress", None)) if f]


def _exists(ctx: ToolContext, name: str) -> bool:
    try:
        return ctx.resolve(name).exists()
    except Exception:  # outside the working directory: not a file of the task's
        return False


def monitor_for(run: RunView) -> GuardMonitor | None:
    """The guards of ``run``: None unless its agent has a ``GuardConfig`` with a guard on."""
    config = GuardConfig.from_agent(run.agent)
    if config is None or not any(config.enabled(g) for g in GUARDS):
        return None
    return GuardMonitor(config, run)
