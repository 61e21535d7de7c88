"""Small tool tasks with oracles: what ``evaluate`` measures success on.

Each ``Task`` brings the files it starts from (written into the run's empty working
directory) and an oracle, ``check(workdir, answer) -> Verdict``, that says pass or fail
from what the run left behind: the files in its working directory and its final answer.
The same check runs as a command, ``python -m memfit_jupyter.tasks check NAME`` in the
working directory (exit code 0 passes), which is what the failure diary's ``oracle=``
takes; the command sees only the files (a diary trial's answer is not passed to it), so
tasks that ask for a value ask for it in ``answer.txt`` too.

``SUITE`` holds 48 tasks in four families (``FAMILIES``): ``arith`` (arithmetic over
files), ``extract`` (a value from text, CSV or JSON), ``fix`` (a failing script, judged by
the pytest file beside it, which must stay as it was) and ``multi`` (read, compute, write
a file), each in three tiers (``TIERS``: ``easy``, the exact shell command is given;
``medium``, the program to use is named; ``hard``, only the goal is said).  They are small
on purpose: the local models this suite is run on have 135M and 270M parameters.
"""

from __future__ import annotations

from .core import FAMILIES, TIERS, Task, Verdict, check_command, get, prepare
from .suite import SUITE

__all__ = ["FAMILIES", "SUITE", "TIERS", "Task", "Verdict", "check_command", "get", "prepare", "tasks"]


def tasks(names: list[str] | None = None, families: list[str] | None = None, per_family: int | None = None,
          tiers: list[str] | None = None) -> list[Task]:
    """Tasks of the suite by name, or by family and tier (the first ``per_family`` of each family),
    in suite order."""
    if names is not None:
        return [get(n) for n in names]
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown task family {', '.join(unknown)}; families: {', '.join(FAMILIES)}")
    unknown = sorted(set(tiers or ()) - set(TIERS))
    if unknown:
        raise ValueError(f"unknown task tier {', '.join(unknown)}; tiers: {', '.join(TIERS)}")
    chosen = [t for t in SUITE if (families is None or t.family in families) and (tiers is None or t.tier in tiers)]
    if per_family is not None:
        seen: dict[str, int] = {}
        kept = []
        for t in chosen:
            seen[t.family] = seen.get(t.family, 0) + 1
            if seen[t.family] <= per_family:
                kept.append(t)
        chosen = kept
    return chosen
