"""The task suite: enough tasks in each family, and oracles that fail on the untouched files,
pass on the reference solution, and say the same as a command."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

import pytest

from memfit_jupyter.tasks import FAMILIES, SUITE, TIERS, Task, check_command, get, prepare, tasks


def test_the_suite_has_at_least_24_tasks_in_four_families():
    assert len(SUITE) >= 24 and len({t.name for t in SUITE}) == len(SUITE)
    counts = Counter(t.family for t in SUITE)
    assert set(counts) == set(FAMILIES) and min(counts.values()) >= 6
    assert all(t.check is not None and t.files and t.solution for t in SUITE)


def test_every_family_has_tasks_in_every_tier():
    counts = Counter((t.family, t.tier) for t in SUITE)
    assert all(counts[(f, tier)] >= 2 for f in FAMILIES for tier in TIERS)
    easy = tasks(tiers=["easy"])
    assert easy and all(t.tier == "easy" and '"' in t.prompt and t.prompt.startswith("Call shell") for t in easy)
    assert [t.family for t in tasks(tiers=["medium"], per_family=1)] == list(FAMILIES)
    with pytest.raises(ValueError, match="unknown task tier"):
        tasks(tiers=["trivial"])


def test_an_easy_task_is_solved_by_its_own_command(tmp_path):
    """The command an easy prompt gives does the task (run here as the agent's shell would)."""
    for task in tasks(tiers=["easy"]):
        work = prepare(task, tmp_path / task.name)
        command = task.prompt.split('"', 1)[1].rsplit('"', 1)[0]
        if shutil.which(command.split()[0]) is None:  # jq is not everywhere
            continue
        subprocess.run(command, shell=True, cwd=work, check=True)
        verdict = task.judge(work)
        assert verdict.passed, (task.name, verdict.detail)


#: Each "fix" oracle runs pytest twice in a new interpreter: the fast tier checks the first of them.
ORACLE_CASES = [pytest.param(t, marks=pytest.mark.slow if t.family == "fix" and t is not
                             next(s for s in SUITE if s.family == "fix") else ()) for t in SUITE]


@pytest.mark.parametrize("task", ORACLE_CASES, ids=lambda t: t.name)
def test_each_oracle_fails_untouched_and_passes_solved(task: Task, tmp_path):
    untouched = prepare(task, tmp_path / "untouched")
    assert not task.judge(untouched).passed
    solved = prepare(task, tmp_path / "solved")
    for rel, text in task.solution.items():
        (solved / rel).write_text(text)
    verdict = task.judge(solved)
    assert verdict.passed, verdict.detail


def test_value_answers_count_from_the_file_or_the_final_answer_but_not_a_copy_of_the_input(tmp_path):
    task = get("arith-max")
    work = prepare(task, tmp_path)
    assert task.judge(work, "91").passed and task.judge(work, "The largest is 91.").passed
    assert not task.judge(work, "17 4 91 38").passed  # the input repeated is no answer
    assert not task.judge(work, "90").passed
    author = get("extract-author")
    assert author.judge(work, "ada lovelace").passed
    assert not author.judge(work, "Meeting notes, 3 March. Written by Ada Lovelace. Next meeting: Friday.").passed


def test_a_fix_does_not_pass_by_changing_the_tests(tmp_path):
    task = get("fix-add")
    work = prepare(task, tmp_path)
    (work / "test_add.py").write_text("def test_add():\n    assert True\n")
    verdict = task.judge(work)
    assert not verdict.passed and "changed or removed" in verdict.detail


def test_the_oracle_command_says_what_the_check_says(tmp_path):
    task = get("multi-upper")
    work = prepare(task, tmp_path)
    failed = subprocess.run(check_command(task), shell=True, cwd=work, capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stdout.startswith("FAIL: upper.txt was not written")
    (work / "upper.txt").write_text("MEMFIT\n")
    passed = subprocess.run(check_command(task), shell=True, cwd=work, capture_output=True, text=True)
    assert passed.returncode == 0 and passed.stdout.startswith("PASS")
    bad = subprocess.run(check_command("no-such-task"), shell=True, cwd=work, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown task 'no-such-task'" in bad.stderr


def test_choosing_tasks_by_name_and_family():
    two = tasks(per_family=2)
    assert [t.family for t in two] == [f for f in FAMILIES for _ in range(2)]
    assert [t.name for t in tasks(["fix-add", "arith-sum"])] == ["fix-add", "arith-sum"]
    with pytest.raises(ValueError, match="unknown task family"):
        tasks(families=["poetry"])
    with pytest.raises(KeyError, match="unknown task"):
        get("nope")


def test_the_check_command_line_says_how_it_is_used_and_lists_the_suite(tmp_path):
    """--help exits 0 with the usage; list names every task; a bad name or no command is exit 2."""
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "memfit_jupyter.tasks", *args], cwd=tmp_path,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)

    helped = cli("--help")
    assert helped.returncode == 0 and "check" in helped.stdout and "list" in helped.stdout
    listed = cli("list")
    assert listed.returncode == 0 and [line.split("\t")[0] for line in listed.stdout.splitlines()] == [
        t.name for t in SUITE]
    unknown = cli("check", "no-such-task")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: unknown task 'no-such-task'")
    assert cli().returncode == 2
