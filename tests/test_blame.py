"""Blame by intervention: on every catalogue mode whose failure one step is at fault (the modes
with a ``[mode.fix]``), blame of the off run names that step within 3x the run's own cost; the
oracle may be a callable or a command; ``%memfit fork`` and ``%memfit blame`` in a real kernel."""

from __future__ import annotations

import sys

import pytest
from kernel_cells import execute, outputs, text_of
from test_diary import gone

import memfit_jupyter.study.catalogue  # noqa: F401  (the module; the package attribute is the function)
from memfit_jupyter.fork import ForkError
from memfit_jupyter.study.intervention import SKIPPED, blame, candidates, corrections

catalogue = sys.modules["memfit_jupyter.study.catalogue"]
FIXED = [m.id for m in catalogue.modes() if m.fix]
RUN_MIME = "application/vnd.memfit.run+json"


def test_the_modes_one_step_is_at_fault_in_say_where_to_fork():
    assert len(FIXED) >= 7
    table = catalogue.catalogue()
    lines = dict(zip(table["id"], table["fix"], strict=True))
    for mode_id in FIXED:
        m = catalogue.mode(mode_id)
        assert lines[mode_id].startswith(f"%memfit fork RUN --at {m.fix['at']} --guidance ")
    assert lines["step-repetition"] == ""  # a spin has no one step at fault
    assert not any(p for s in ("premature-finish", "diary") for p in catalogue.problems(
        __import__("memfit_jupyter.llm.scenarios", fromlist=["load_scenario"]).load_scenario(s)))


@pytest.mark.parametrize("mode_id", FIXED)
def test_blame_names_the_step_at_fault_within_three_times_the_runs_cost(mode_id, tmp_path):
    m = catalogue.mode(mode_id)
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()
    cost = run.trace()["totals"]["cost_usd"]
    assert catalogue.check({k: v for k, v in m.on.expect.items() if k in ("status", "answer_contains", "verify")},
                           catalogue.outcome(m, run.trace(), tmp_path / "off")), "the off run fails"
    found = blame(run, workdir=tmp_path / "forks")
    assert found.step == m.fix["at"], found.frame
    assert found.spent <= 3 * cost
    assert found.frame.columns == ["step", "change", "outcome", "cost", "status", "run"]
    assert found.frame.filter(found.frame["outcome"] == "success")["step"].to_list() == [m.fix["at"]]
    assert found.forks and found.forks[-1].parent["at"] == m.fix["at"] and run.forks == found.forks


def test_a_callable_oracle_that_nothing_satisfies_blames_no_step_and_keeps_to_the_budget(tmp_path):
    m = catalogue.mode("premature-finish")
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()
    budget = run.trace()["totals"]["cost_usd"]
    found = blame(run, oracle=lambda child: False, budget=budget, workdir=tmp_path / "forks")
    assert found.step is None and set(found.frame["outcome"]) <= {"failure"}
    assert found.stopped.startswith("the budget") or found.frame.height == sum(
        len(corrections(run.trace(), s)) for s in candidates(run.trace()))
    assert found.spent <= budget


def test_the_budget_is_a_hard_limit_and_the_fork_that_reaches_it_stops_there(tmp_path):
    from memfit_jupyter import Agent

    run = Agent(model="memfit/spin-demo", workdir=tmp_path / "off", memory=False).start("Find the total of data.txt")
    run.run()
    budget = 1.5 * run.trace()["totals"]["cost_usd"]
    found = blame(run, oracle=lambda child: False, budget=budget, workdir=tmp_path / "forks")
    assert 0 < found.spent <= budget, found
    assert found.stopped == f"the budget (${budget:.4f}) ran out in the fork at step {found.forks[-1].parent['at']}"
    last = found.forks[-1]
    assert last.status == "degraded"
    assert [e.limit for e in last.events if e.TYPE == "guarantee"] == ["max_cost_usd"]
    assert all(f.status != "degraded" for f in found.forks[:-1])  # the ones before it had what they needed


def test_blame_of_a_saved_trace_naming_an_unknown_server_refuses_before_any_fork(tmp_path):
    """The trace's server is not one this process called: one line, no fork made; api_base=
    given, each fork takes it (its scripted model answers as before: the server is named, not called)."""
    import json

    m = catalogue.mode("premature-finish")
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()
    saved = json.loads(json.dumps(run.trace()))
    base = "http://192.0.2.7:8000/v1"  # TEST-NET-1: no machine answers there
    next(e for e in saved["events"] if e["type"] == "run_start")["settings"]["api_base"] = base
    with pytest.raises(ForkError, match=f"sends its model calls to {base} .api_base., a server this process"):
        blame(saved, workdir=tmp_path / "forks")
    assert not (tmp_path / "forks").exists()
    found = blame(saved, workdir=tmp_path / "given", api_base=base)
    assert found.forks and all(child.agent.api_base == base for child in found.forks)
    assert "api_base" not in " ".join(found.frame["change"].to_list())  # the frame shows the corrections


def test_blame_gives_each_fork_the_tool_policy_it_is_given(tmp_path):
    """approve_tools= goes to every fork, as api_base= does: with 'always' and nobody to ask,
    no fork's tool call runs from its step on."""
    m = catalogue.mode("premature-finish")
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()
    found = blame(run, workdir=tmp_path / "forks", approve_tools="always")
    assert found.forks and all(child.agent.approve_tools == "always" for child in found.forks)
    for child in found.forks:
        at = child.parent["at"]
        ran = [e for e in child.trace()["events"] if e["type"] == "observation" and e["iteration"] >= at
               and e.get("tool") not in (None, "finish")]
        assert all(not e["ok"] and "was not run" in e["error"] for e in ran)


def test_a_command_oracle_runs_in_each_forks_folder(tmp_path):
    m = catalogue.mode("premature-finish")
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()
    found = blame(run, oracle="test -f east.txt && grep -q 295 /dev/null || true", workdir=tmp_path / "forks")
    assert found.step == run.iteration  # the command passes everywhere: the latest step is named
    for budget in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ForkError, match="budget must be a finite number of dollars more than 0"):
            blame(run, budget=budget)
    assert run.forks == found.forks  # no fork was made by the refused calls


def _failed(tmp_path):
    run = catalogue.start(catalogue.mode("premature-finish"), "off", tmp_path / "off")
    run.run()
    return run


def test_an_empty_or_missing_oracle_command_is_one_line_before_the_budget_goes(tmp_path):
    """``sh -c ""`` exits 0 and a command the shell does not find exits 127 in every fork: the
    first would call every fork a success, the second every one a failure."""
    run = _failed(tmp_path)
    for empty in ("", "   "):
        with pytest.raises(ForkError, match="the oracle is an empty command") as err:
            blame(run, oracle=empty, workdir=tmp_path / "forks")
        assert "\n" not in str(err.value) and run.forks == []  # refused before any fork
    with pytest.raises(ForkError, match="oracle command could not be run .*exit code 127: .*no-such-oracle-xq: .*not found") as err:
        blame(run, oracle="no-such-oracle-xq --check", workdir=tmp_path / "forks")
    assert "\n" not in str(err.value) and len(run.forks) == 1  # the first fork it was to judge, no more
    with pytest.raises(ForkError, match="oracle_timeout_s must be a finite number of seconds more than 0"):
        blame(run, oracle="true", oracle_timeout_s=0)
    assert len(run.forks) == 1


def test_an_oracle_that_runs_too_long_is_killed_with_what_it_started(tmp_path):
    """``oracle_timeout_s`` bounds each fork's judging; the command's process group is killed
    whole, so a child it left in the background does not run on, and the fork is a failure."""
    run = _failed(tmp_path)
    pid_file = tmp_path / "child.pid"
    oracle = (f"test -e {pid_file} && exit 0; "  # the forks after the first pass at once
              f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}; sleep 60 >/dev/null 2>&1")
    found = blame(run, oracle=oracle, oracle_timeout_s=2, workdir=tmp_path / "forks")
    first = found.frame.row(0, named=True)
    assert first["outcome"] == "failure" and "the oracle command ran past 2 s and was killed" in first["status"]
    assert found.step == first["step"]  # the next change at that step passed
    child = int(pid_file.read_text())
    assert gone(child), f"the oracle's child {child} still runs"


def test_a_run_that_did_not_fail_has_nothing_to_blame_and_bad_budgets_are_one_line(tmp_path):
    from memfit_jupyter import Agent

    ok = Agent(model="memfit/demo", workdir=tmp_path / "ok", memory=False).start(
        "What is the total of the numbers in data.txt?")
    ok.run()
    assert ok.status == "done"
    with pytest.raises(ForkError, match="did not fail .*there is nothing to blame") as err:
        blame(ok, workdir=tmp_path / "forks")
    assert "\n" not in str(err.value) and ok.forks == [] and not (tmp_path / "forks").exists()
    assert blame(ok, oracle=lambda child: False, steps=[2], workdir=tmp_path / "forks").step is None  # judged otherwise
    m = catalogue.mode("premature-finish")
    on = catalogue.start(m, "on", tmp_path / "on")  # the mechanism on: the mode's expected outcome
    on.run()
    with pytest.raises(ForkError, match="as its failure mode expects"):
        blame(on)
    for budget in ("1", True):
        with pytest.raises(ForkError, match=f"budget must be a number of dollars, got {type(budget).__name__}"):
            blame(ok, budget=budget)


def test_a_key_in_a_change_or_in_what_the_oracle_says_stays_out_of_the_result(tmp_path, monkeypatch):
    """The frame, the repr and the HTML are shown and saved with the notebook: a key typed into a
    change, or quoted by an oracle that failed, is redacted there (before a cut that would hide it)."""
    env_key, typed = "sk-proj-ENV4sQ9wL2xN7pR1tV6yZ3bC8d", "sk-proj-TYPED5Hj2Kl9Mn4Pq7Rs1Tu6Vw"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    m = catalogue.mode("premature-finish")
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()

    def oracle(child):
        raise RuntimeError(f"401 for {'x' * 100} {env_key}")  # past the cut of the status column

    found = blame(run, oracle=oracle, changes=[{"guidance": f"use {typed} and {env_key}"}], steps=[2],
                  workdir=tmp_path / "forks")
    shown = " ".join([str(found.frame.to_dicts()), repr(found), found._repr_html_()])
    assert "[REDACTED]" in found.frame["change"][0] and "oracle failed: RuntimeError: 401" in found.frame["status"][0]
    for secret in (env_key, typed, env_key[:14], typed[:14]):
        assert secret not in shown


def test_blame_takes_a_saved_trace_file_and_finds_what_it_finds_on_the_run(tmp_path):
    import json

    m = catalogue.mode(FIXED[0])
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(run.trace()))
    found = blame(str(path), workdir=tmp_path / "forks")
    assert found.step == m.fix["at"] and run.forks == []  # the run in this process is not its parent here
    with pytest.raises(ForkError, match="no such file"):
        blame(tmp_path / "missing.json")


def test_candidates_are_the_flagged_steps_and_the_steps_before_them():
    trace = {"events": [
        {"type": "run_start", "iteration": 0}, {"type": "action", "iteration": 1, "tool": "shell"},
        {"type": "observation", "iteration": 1, "ok": True}, {"type": "action", "iteration": 2, "tool": "shell"},
        {"type": "observation", "iteration": 2, "ok": True}, {"type": "action", "iteration": 3, "tool": "shell"},
        {"type": "observation", "iteration": 3, "ok": False}, {"type": "action", "iteration": 4, "tool": "x"},
        {"type": "observation", "iteration": 4, "ok": True},
        {"type": "reflection", "iteration": 4, "level": 3, "suggestions": ["read the file first"]}],
        "model": "openai/x"}
    assert candidates(trace) == [4, 3, 2]
    assert corrections(trace, 4)[0]["guidance"].endswith("- read the file first")
    assert corrections(trace, 4)[-1] == {"observation": SKIPPED}


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("forkmagic")
    cells = {
        "load": "%load_ext memfit_jupyter",
        "parent": "import sys, memfit_jupyter.study.catalogue\n"
                  "cat = sys.modules['memfit_jupyter.study.catalogue']\n"
                  "m = cat.mode('premature-finish')\n"
                  "run = cat.start(m, 'off', 'off'); run.run(); print(run.status, run.iteration)",
        "fork": "%memfit fork run --at 3 --guidance 'finish refused (premature_finish): east.txt is unread' "
                "--name child --quiet",
        "after": "print(child.status, child.result.answer, child.parent['at'], len(run.forks))\n"
                 "print(repr(child.parent['changes']['guidance']))",
        "blame": "df = %memfit blame run --name found\nprint(found.step, df.height)",
        "by_id": "%memfit fork $child.id --at 4 --observation 'nothing more' --name grandchild --quiet\n"
                 "print(grandchild.parent['run'] == child.id, grandchild.status)",
        "bad_step": "%memfit fork run --at 99",
        "bad_change": "%memfit fork run --at 2 --action '{\"tool\": \"nope\"}'",
        "no_run": "%memfit blame nothing_here",
        "slow_oracle": "%memfit blame run --oracle 'sleep 30' --oracle-timeout 0.5 --name slow\n"
                       "print(slow.step, slow.frame['status'][0])",
        "bad_timeout": "%memfit blame run --oracle-timeout 0",
    }
    return execute(cells, workdir, timeout=300)


@pytest.mark.kernel
def test_the_fork_magic_runs_the_child_and_binds_it(nb):
    assert "done 3" in text_of(outputs(nb, "parent"))
    shown = [o for o in outputs(nb, "fork") if RUN_MIME in o.get("data", {})]
    assert shown and shown[-1]["data"][RUN_MIME]["parent"]["at"] == 3
    assert "done The total is 295 crates" in text_of(outputs(nb, "after"))
    said = text_of(outputs(nb, "after")).strip().splitlines()
    assert said[0].endswith("3 1") and said[1] == "'finish refused (premature_finish): east.txt is unread'"


@pytest.mark.kernel
def test_a_run_is_found_by_its_id_among_the_forks(nb):
    assert text_of(outputs(nb, "by_id")).strip().splitlines()[-1] == "True done"


@pytest.mark.kernel
def test_the_blame_magic_returns_its_frame(nb):
    assert text_of(outputs(nb, "blame")).strip().splitlines()[-1] == "3 1"


@pytest.mark.kernel
def test_the_blame_magic_kills_an_oracle_at_its_timeout(nb):
    """--oracle-timeout reaches blame: each fork's judge is cut off after 0.5 s, not 300."""
    said = text_of(outputs(nb, "slow_oracle")).strip().splitlines()[-1]
    assert said.startswith("None oracle failed: TimeoutError: the oracle command ran past 0.5 s"), said


@pytest.mark.kernel
@pytest.mark.parametrize("cell, expected", [
    ("bad_step", "UsageError: step 99 is outside the run: it has steps 1..3"),
    ("bad_change", "UsageError: unknown tool 'nope'; the run's tools:"),
    ("no_run", "UsageError: no run named 'nothing_here'"),
    ("bad_timeout", "UsageError: oracle_timeout_s must be a finite number of seconds more than 0, got 0.0"),
])
def test_bad_magic_input_is_one_line(nb, cell, expected):
    said = text_of(outputs(nb, cell)).strip()  # IPython prints a UsageError as one line on stderr
    assert said.startswith(expected) and "\n" not in said, said


def test_the_person_stopping_the_search_keeps_what_it_found_so_far(tmp_path):
    m = catalogue.mode("premature-finish")
    run = catalogue.start(m, "off", tmp_path / "off")
    run.run()
    judged = []

    def oracle(child):
        judged.append(child.parent["at"])
        if len(judged) == 2:
            raise KeyboardInterrupt  # what Jupyter's stop button raises, here while the second fork is judged
        return False

    found = blame(run, oracle=oracle, workdir=tmp_path / "forks")
    assert found.stopped == f"interrupted by the person in the fork at step {judged[1]}"
    assert len(found.forks) == 2 and run.forks == found.forks and found.step is None
    assert found.frame["status"].to_list()[-1] == "interrupted by the person while the oracle judged it"
    assert found.frame.height == 2 and found.spent == sum(found.frame["cost"])
