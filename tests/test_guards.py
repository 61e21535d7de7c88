"""The guards of reliability/guards.py: what they read in a task, that they stay quiet on
healthy scripted runs, and that a refusing guard still lets a run end."""

from __future__ import annotations

import logging

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.reliability.guards import (
    GUARDS,
    GuardConfig,
    end_condition,
    named_checks,
    named_files,
)


@pytest.fixture(autouse=True)
def _quiet_engine_warnings():
    logger = logging.getLogger("memfit_jupyter")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


def test_what_a_task_names():
    task = "Fix mean() in stats.py so that `python check.py` prints OK."
    assert named_checks(task) == ["check.py"]
    assert named_files(task) == ["stats.py", "check.py"]
    assert end_condition(task) == "OK"
    assert named_checks("Write slugify(text) in slug.py so that tests_slug.py passes.") == ["tests_slug.py"]
    assert named_checks("Run `make lint` first.") == ["make lint"]
    # Version numbers and sentences are not files; a question has no end condition or check.
    assert named_files("Which version, 2.4.1 or 2.5? Ask the person.") == []
    assert named_files("Read data/sales.csv and data/regions.txt.") == ["data/sales.csv", "data/regions.txt"]
    assert end_condition("What is the total of the numbers in data.txt?") is None
    assert named_checks("What is the total of the numbers in data.txt?") == []


def test_guard_names_are_checked():
    with pytest.raises(ValueError, match="unknown guard.s. nope; guards are: unverified_finish"):
        GuardConfig.only(["nope"])
    assert all(GuardConfig.only("all").enabled(g) for g in GUARDS)
    assert not any(GuardConfig().enabled(g) for g in GUARDS)  # off unless switched on


@pytest.mark.parametrize("scenario", ["demo", "healthy-long", "plan-demo", "code-spin", "context-overflow"])
def test_no_guard_fires_on_a_run_that_goes_right(scenario, tmp_path):
    kwargs = {"plan": "features.json", "progress": "progress.md"} if scenario == "plan-demo" else {}
    if scenario == "code-spin":
        kwargs["spin_warnings"] = "prompt"  # the scripted model goes right once warned
    runs = {}
    for side, extensions in (("with", [GuardConfig.only("all")]), ("without", [])):
        agent = Agent(model=f"memfit/{scenario}", workdir=tmp_path / side, memory=False,
                      extensions=extensions, **kwargs)
        run = agent.start(load_scenario(scenario).task)
        run.run()
        runs[side] = run
    guarded, plain = runs["with"], runs["without"]
    assert [e for e in guarded.events if e.type == "guard"] == []
    assert guarded.status == plain.status == "done"
    assert [r.tool for r in guarded.records] == [r.tool for r in plain.records]
    # The judge did look at every change (one reflection-purpose call each), and found nothing.
    changes = [r for r in guarded.records if r.ok and r.tool in ("write_file", "modify_code", "shell")]
    assert reflection_calls(guarded) == reflection_calls(plain) + len(changes)


def reflection_calls(run) -> int:
    return sum(e.type == "model_call" and e["purpose"] == "reflection" for e in run.events)


def test_a_refusing_guard_lets_the_finish_through_after_max_refusals(tmp_path):
    # diary without an oracle finishes without running tests_slug.py, again and again.
    agent = Agent(model="memfit/diary", workdir=tmp_path, memory=False, reflection="auto",
                  extensions=[GuardConfig.only(["unverified_finish"])])
    run = agent.start(load_scenario("diary").task)
    result = run.run()
    guards = [e for e in run.events if e.type == "guard"]
    assert [g["refusals"] for g in guards] == [1, 2]
    assert all("tests_slug.py" in g["reason"] and "nothing ran it" in g["reason"] for g in guards)
    refused = [r for r in run.records if r.tool == "finish" and not r.ok]
    assert len(refused) == 2 and refused[0].error.startswith("finish refused (unverified_finish): ")
    assert result.status == "done"  # the third finish goes through
    # Each refused finish was reflected on like any failed action.
    levels = [e["level_name"] for e in run.events if e.type == "reflection" and e["tool"] == "finish"]
    assert levels[:2] == ["CRITICAL", "CRITICAL"]


def test_a_finish_called_with_a_hand_made_context_is_judged_against_the_monitors_run(tmp_path):
    from memfit_jupyter.tools import ToolContext

    agent = Agent(model="memfit/diary", workdir=tmp_path, memory=False,
                  extensions=[GuardConfig.only(["unverified_finish"])])
    run = agent.start(load_scenario("diary").task)
    result = run.tools["finish"](ToolContext(workdir=tmp_path), {"answer": "done"})
    assert not result.ok and result.error.startswith("finish refused (unverified_finish): ")
    assert [e["refusals"] for e in run.events if e.type == "guard"] == [1]
