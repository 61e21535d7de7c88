"""The failure diary (Reflexion): trials judged by an external oracle, lessons kept in memory.

``Agent(oracle="pytest -q tests_x.py", max_trials=3)`` (or an oracle callable).
The whole loop is one run:

1. at the start, the three past failures most similar to the task (same task
   kind) are fetched from memory and shown in the system prompt;
2. a trial is the agent working until it calls ``finish``;
3. ``finish`` runs the oracle: a shell command (exit code 0 passes; its output
   is the feedback) or a Python check.  The model never judges itself;
4. on failure, a ``lesson`` call turns the trajectory and the oracle's output
   into one concrete, reusable rule; it is stored in memory with the tags
   ``failures`` and ``failures:<kind>`` (the namespace ("failures", kind)),
   shown in the system prompt, and the next trial starts with a fresh queue;
5. after the last failed trial the run ends as ``escalated``.

Each trial is a ``trial`` event.  ``failures(store)`` lists the diary.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..known import note_command
from ..secrets import redact

if TYPE_CHECKING:  # polars is imported at first use
    import polars as pl

    from ..protocols import AgentView, RunView

FAILURES_TAG = "failures"
PAST_FAILURES_K = 3
ORACLE_TIMEOUT_S = 300.0
ORACLE_OUTPUT_CHARS = 4000
_FIELD = re.compile(r"^(Lesson|Kind|Task|Oracle): ?(.*)$")


def kind_tag(kind: str) -> str:
    return f"{FAILURES_TAG}:{kind}"


def task_kind(agent: AgentView) -> str:
    """The kind of task, the second half of the diary's namespace.

    ``agent.task_kind`` when set; else the program the oracle runs
    (``python -m pytest -q t.py`` -> ``pytest``), or the check function's name.
    """
    kind = getattr(agent, "task_kind", None)
    if not kind:
        oracle = agent.oracle
        if isinstance(oracle, str):
            try:
                words = shlex.split(oracle)
            except ValueError:
                words = oracle.split()
            words = [w for w in words if "=" not in w]  # VAR=value prefixes
            while words and (os.path.basename(words[0]).startswith("python") or words[0] == "-m"):
                words = words[1:]
            kind = os.path.basename(words[0]) if words else "shell"
        else:
            name = getattr(oracle, "__name__", "") or type(oracle).__name__
            kind = "python-check" if name.startswith("<") else name
    return re.sub(r"[^\w.-]+", "-", str(kind).strip().lower()) or "task"


def _clip(text: str, limit: int = ORACLE_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit // 3
    return text[:head] + f"\n... [{len(text) - limit} characters cut] ...\n" + text[-(limit - head):]


def run_command(command: str, cwd: str | os.PathLike[str], timeout_s: float) -> tuple[int, str, str] | None:
    """Run ``command`` with the shell in ``cwd``: its exit code, stdout and stderr (a byte that is
    not UTF-8 replaced, not an error), or None when it did not end within ``timeout_s`` seconds.

    It runs in a session (process group) of its own: on a timeout, or when the person interrupts
    the kernel, the whole group is killed.  Killing the shell alone would leave what it started (a
    test server, a ``sleep``) running with no parent, holding the output pipes open."""
    proc = subprocess.Popen(command, shell=True, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None
    except BaseException:
        _kill_group(proc)
        raise
    return proc.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc``'s process group and reap ``proc``.  The group is killed before its leader is
    reaped, while the leader's id cannot name another group.  The output is not waited for: a
    child that left the group could hold the pipes open."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


#: The shell's exit code for a command it did not find.
NOT_FOUND = 127


def not_found(code: int, stderr: str) -> str | None:
    """The shell's own line saying that a command was not found (exit code 127), else None.  An
    oracle that says so judged nothing: every trial or fork would fail alike."""
    if code != NOT_FOUND:
        return None
    return next((line.strip()[:200] for line in stderr.splitlines() if "not found" in line), None)


def run_oracle(oracle: str | Callable[..., Any], run: RunView, timeout_s: float = ORACLE_TIMEOUT_S
               ) -> tuple[bool, str]:
    """Ask the external oracle.  Returns (passed, output).

    A command passes on exit code 0; its output is stdout and stderr.  A callable
    gets the run if it takes an argument, and may return a bool, ``(bool, text)``,
    a dict with ``passed``/``output``, or an object with ``.passed``; raising fails.
    """
    passed, output, _ = _ask(oracle, run, timeout_s)
    return passed, output


def _ask(oracle: str | Callable[..., Any], run: RunView, timeout_s: float) -> tuple[bool, str, str | None]:
    """``run_oracle``'s verdict, and the shell's "not found" line when the command could not run."""
    if isinstance(oracle, str):
        note_command(oracle)  # a fork of this run's saved trace may run it again (known.py)
        done = run_command(oracle, run.agent.workdir, timeout_s)
        if done is None:
            return False, redact(f"$ {oracle}\nthe oracle timed out after {timeout_s:g} s"), None
        code, stdout, stderr = done
        out = f"$ {oracle}\nexit code {code}\n{stdout}{stderr}"
        missing = not_found(code, stderr)
        # redacted whole: a cut could split a key
        return code == 0, _clip(redact(out)), None if missing is None else redact(missing)
    return (*_call(oracle, run), None)


def _call(oracle: Callable[..., Any], run: RunView) -> tuple[bool, str]:
    """A check function's verdict, from whichever of the forms ``run_oracle`` takes it returned."""
    try:
        takes_run = bool(inspect.signature(oracle).parameters)
    except (TypeError, ValueError):
        takes_run = True
    try:
        value = oracle(run) if takes_run else oracle()
    except Exception as exc:
        return False, redact(f"the oracle check raised {type(exc).__name__}: {exc}")
    if isinstance(value, tuple) and value:
        passed, text = bool(value[0]), " ".join(str(v) for v in value[1:])
    elif isinstance(value, dict):
        passed, text = bool(value.get("passed")), str(value.get("output", ""))
    elif hasattr(value, "passed"):
        passed, text = bool(value.passed), str(getattr(value, "output", "") or "")
    else:
        passed, text = bool(value), ""
    return passed, _clip(redact(text or ("the check passed" if passed else "the check returned False")))


def lesson_content(lesson: str, kind: str, task: str, oracle_output: str) -> str:
    """How a lesson is kept in memory: the rule first (what retrieval shows), then its context."""
    tail = " ".join(oracle_output.split())[-300:]
    return redact(f"Lesson: {lesson}\nKind: {kind}\nTask: {task}\nOracle: {tail}")


def parse_lesson(content: str) -> dict[str, str]:
    fields = {}
    for line in content.splitlines():
        m = _FIELD.match(line)
        if m:
            fields[m.group(1).lower()] = m.group(2)
    return fields


class FailureDiary:
    """The trial loop of one run."""

    def __init__(self, agent: AgentView, oracle: str | Callable[..., Any] | None = None):
        if agent.max_trials < 1:
            raise ValueError("max_trials must be at least 1")
        chosen = agent.oracle if oracle is None else oracle
        if chosen is None:
            raise ValueError("the failure diary needs an oracle: a shell command or a check function")
        if isinstance(chosen, str) and not chosen.strip():  # ``sh -c ""`` exits 0: every trial would pass
            raise ValueError("the failure diary's oracle is an empty command: give a shell command or a check function")
        self.oracle = chosen
        self.max_trials = int(agent.max_trials)
        self.kind = task_kind(agent)
        self.trial = 1
        self.lessons: list[str] = []
        self.past: list[str] = []
        self.retrieved = False
        self.reset_pending = False

    # --- memory -------------------------------------------------------------------------
    def retrieve(self, run: RunView, store: Any) -> None:
        """Fetch the most similar past failures of this kind (once, at the start)."""
        self.retrieved = True
        if store is None:
            return
        try:
            results = list(store.search(run.task, k=PAST_FAILURES_K, tags=[kind_tag(self.kind)]))
        except Exception as exc:  # a broken store must not stop the task
            run.emit("error", message=f"failure diary: memory search failed: {type(exc).__name__}: {exc}")
            return
        self.past = [parse_lesson(r.content).get("lesson") or r.content for r in results]
        run.emit("memory", op="failures", query=run.task,
                 results=[{"id": getattr(r, "id", None), "content": r.content,
                           "score": float(getattr(r, "score", 0.0) or 0.0),
                           "breakdown": dict(getattr(r, "breakdown", None) or {})} for r in results],
                 added=[], bytes=sum(len(r.content.encode()) for r in results))

    def section(self) -> str:
        parts = []
        if self.past:
            parts.append("Lessons from past failures on similar tasks:\n" + "\n".join(f"- {x}" for x in self.past))
        if self.lessons:
            parts.append("Lessons from the failed trials of this task (apply them):\n"
                         + "\n".join(f"- trial {i}: {x}" for i, x in enumerate(self.lessons, 1)))
        parts.append(f"Trial {self.trial} of {self.max_trials}: when you call finish, an external check "
                     "(the oracle) decides whether the task is done.")
        return "\n\n".join(parts)

    # --- the trial loop -----------------------------------------------------------------
    def judge(self, run: RunView) -> dict[str, Any]:
        """The oracle's verdict on this trial; ``not_found`` when its command could not be run."""
        passed, output, missing = _ask(self.oracle, run, ORACLE_TIMEOUT_S)
        verdict: dict[str, Any] = {"trial": self.trial, "passed": passed, "output": output}
        if missing is not None:
            verdict["not_found"] = missing
        return verdict

    def reflect(self, run: RunView, oracle_output: str) -> str:
        """One concrete, reusable lesson from the trajectory and the oracle's output."""
        from ..llm.prompts import json_system

        trajectory = run.timeline.text(max_chars=6000)
        messages = [
            {"role": "system", "content": json_system("lesson", (
                "An agent attempted a task and an external check (the oracle) says it failed. "
                "Find the root cause and state ONE concrete rule that avoids this failure next time: "
                "specific (names, values, commands), reusable on similar tasks, one or two sentences."),
                "lesson")},
            {"role": "user", "content": (f"Task: {run.task}\n\nTrajectory (oldest first):\n{trajectory}\n\n"
                                         f"Oracle output:\n{oracle_output}")},
        ]
        reply = run.llm.call("lesson", messages, tier="primary", iteration=run.iteration)
        if reply.ok and reply.value.lesson.strip():
            return " ".join(reply.value.lesson.split())
        # The oracle's verdict is still worth keeping when the reflection call fails.
        last = [line for line in oracle_output.splitlines() if line.strip()][-1:] or ["no output"]
        return f"The oracle failed with: {last[0][:200]}; fix that before calling finish."

    def store(self, run: RunView, store: Any, lesson: str, oracle_output: str) -> Any:
        if store is None:
            return None
        try:
            return store.add(lesson_content(lesson, self.kind, run.task, oracle_output),
                             tags=(FAILURES_TAG, kind_tag(self.kind)), questions=(run.task,),
                             scores={"a": 0.9, "r": 0.8})
        except Exception as exc:
            run.emit("error", message=f"failure diary: could not store the lesson: {type(exc).__name__}: {exc}")
            return None


def failures(store: Any, kind: str | None = None, limit: int = 1000) -> pl.DataFrame:
    """The failure diary as a polars DataFrame: id, kind, lesson, task, oracle, created_at."""
    import polars as pl

    tag = kind_tag(kind) if kind else FAILURES_TAG
    rows = []
    for item in _tagged(store, tag, limit):
        fields = parse_lesson(item.content)
        rows.append({"id": str(getattr(item, "id", "")), "kind": fields.get("kind", ""),
                     "lesson": fields.get("lesson", item.content), "task": fields.get("task", ""),
                     "oracle": fields.get("oracle", ""), "created_at": str(getattr(item, "created_at", ""))})
    schema = {c: pl.Utf8 for c in ("id", "kind", "lesson", "task", "oracle", "created_at")}
    return pl.DataFrame(rows, schema=schema)


def _tagged(store: Any, tag: str, limit: int) -> list[Any]:
    """Every memory with ``tag``: through ``store.list`` when the store has it, else a tag search."""
    lister = getattr(store, "list", None)
    if callable(lister):
        items = list(lister(tag=tag, limit=limit))
    else:
        items = list(store.search(tag, k=limit, tags=[tag]))
    return [getattr(i, "entity", i) for i in items]
