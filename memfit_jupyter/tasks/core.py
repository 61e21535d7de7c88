"""What a task is, how its files are laid out, and how its oracle is asked."""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: The task families, in the order tables show them.
FAMILIES = ("arith", "extract", "fix", "multi")
#: How much a task leaves to the agent: ``easy`` (the prompt names the one tool call that does it,
#: e.g. the exact shell command), ``medium`` (the prompt names the tool and what it must do, the agent
#: writes the call) and ``hard`` (the prompt says only what is wanted: the agent chooses the steps).
TIERS = ("easy", "medium", "hard")
#: The file a task asks its value to be written to (the diary's oracle command reads only files).
ANSWER_FILE = "answer.txt"
#: Longest a pytest oracle may run.
PYTEST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Verdict:
    """An oracle's answer: passed or not, and a line that says why."""

    passed: bool
    detail: str = ""


@dataclass(frozen=True)
class Task:
    """One task: its prompt, the files it starts from, and its oracle."""

    #: Unique name (``family-what``).
    name: str
    #: One of ``FAMILIES``.
    family: str
    #: What the agent is told.
    prompt: str
    #: Files written into the empty working directory before the run: path -> text.
    files: Mapping[str, str] = field(default_factory=dict)
    #: The oracle: ``check(workdir, answer)`` -> Verdict (None: the task cannot be judged).
    check: Callable[[Path, str | None], Verdict] | None = None
    #: Files that solve the task (written over ``files``): the proof that the oracle can pass.
    solution: Mapping[str, str] = field(default_factory=dict)
    #: One of ``TIERS``.
    tier: str = "hard"

    def judge(self, workdir: str | Path, answer: str | None = None) -> Verdict:
        """The oracle on a run's working directory and final answer; an oracle that raises fails."""
        if self.check is None:
            raise ValueError(f"task {self.name!r} has no oracle")
        try:
            return self.check(Path(workdir), answer)
        except Exception as exc:  # a broken result (a file that is not JSON...) is a failure
            return Verdict(False, f"the check raised {type(exc).__name__}: {exc}")


_REGISTRY: dict[str, Task] = {}


def register(task: Task) -> Task:
    if task.name in _REGISTRY:
        raise ValueError(f"task {task.name!r} is defined twice")
    if task.family not in FAMILIES:
        raise ValueError(f"task {task.name!r}: unknown family {task.family!r}")
    if task.tier not in TIERS:
        raise ValueError(f"task {task.name!r}: unknown tier {task.tier!r}")
    _REGISTRY[task.name] = task
    return task


def get(name: str) -> Task:
    """The task of the suite called ``name`` (the package's ``__init__`` imports ``suite``, which
    registers them, before this module is used)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; tasks: {', '.join(_REGISTRY)}") from None


def prepare(task: Task, workdir: str | Path) -> Path:
    """Write the task's files into ``workdir`` (created if needed)."""
    root = Path(workdir)
    for rel, text in task.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def check_command(task: Task | str) -> str:
    """The shell command that runs ``task``'s oracle in the current directory (exit 0 passes)."""
    name = task if isinstance(task, str) else task.name
    return f"{shlex.quote(sys.executable)} -m memfit_jupyter.tasks check {shlex.quote(name)}"


# --- the checks the suite is made of --------------------------------------------------------
def _read(path: Path) -> str | None:
    return path.read_text(errors="replace") if path.is_file() else None


def _tokens(text: str) -> list[str]:
    return re.findall(r"[-+]?\d+(?:\.\d+)?|[\w@.'-]+", text.lower())


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+(?:\.\d+)?", text.replace(",", ""))]


#: A value answer may hold this many characters besides the value ("The total is 42.").
ANSWER_SLACK = 40


def value_check(expected: str | float, inputs: Mapping[str, str] | None = None, *, tol: float = 1e-6
                ) -> Callable[[Path, str | None], Verdict]:
    """Passes when ``answer.txt`` or the final answer holds ``expected`` and little else: a number
    (a number in the text within ``tol``, and no other number of the task's ``inputs``) or a
    phrase (its words, in order, case-insensitive), in at most ``ANSWER_SLACK`` characters more
    than the value.  So an answer that repeats the input file is no answer."""
    numeric = isinstance(expected, int | float)
    others = {x for text in (inputs or {}).values() for x in _numbers(text)} if numeric else set()
    others = {x for x in others if abs(x - float(expected)) > tol} if numeric else set()

    def holds(text: str) -> bool:
        text = text.strip()
        if len(text) > len(str(expected)) + ANSWER_SLACK:
            return False
        if numeric:
            found = _numbers(text)
            return any(abs(x - float(expected)) <= tol for x in found) and not others.intersection(found)
        want = " ".join(_tokens(str(expected)))
        return bool(want) and want in " ".join(_tokens(text))

    def check(workdir: Path, answer: str | None) -> Verdict:
        for where, text in ((ANSWER_FILE, _read(workdir / ANSWER_FILE)), ("the final answer", answer)):
            if text and holds(text):
                return Verdict(True, f"{where} holds {expected!r}")
        return Verdict(False, f"neither {ANSWER_FILE} nor the final answer holds {expected!r}")

    return check


def file_check(path: str, test: Callable[[str], bool], what: str) -> Callable[[Path, str | None], Verdict]:
    """Passes when ``path`` exists in the working directory and ``test(its text)`` holds."""

    def check(workdir: Path, answer: str | None) -> Verdict:
        text = _read(workdir / path)
        if text is None:
            return Verdict(False, f"{path} was not written")
        return Verdict(True, f"{path}: {what}") if test(text) else Verdict(False, f"{path} does not hold {what}")

    return check


def pytest_check(test_file: str, original: str) -> Callable[[Path, str | None], Verdict]:
    """Passes when ``pytest -q test_file`` passes in the working directory and the test file is
    still the one the task gave (a run that edits or deletes the tests does not pass)."""
    digest = hashlib.sha256(original.encode()).hexdigest()

    def check(workdir: Path, answer: str | None) -> Verdict:
        text = _read(workdir / test_file)
        if text is None or hashlib.sha256(text.encode()).hexdigest() != digest:
            return Verdict(False, f"{test_file} was changed or removed")
        try:
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file],
                                  cwd=workdir, capture_output=True, text=True, timeout=PYTEST_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return Verdict(False, f"pytest {test_file} timed out")
        last = (proc.stdout.strip().splitlines() or [""])[-1]
        return Verdict(proc.returncode == 0, f"pytest {test_file}: {last}")

    return check
