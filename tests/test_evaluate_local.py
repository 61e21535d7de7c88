"""The evaluation instrument on a real model: 2 tasks x 2 variants x 1 repeat on SmolLM2-135M
(llama-server at 127.0.0.1, tests/local_model.py), so that it cannot silently break.  The tasks
are of the easy tier, whose prompts give a shell command: the runs' shell goes through the
sandbox that evaluations use by default.

A sampling model may do anything: the assertions are on structure and consistency (every
run judged by its oracle, the seed reaching the server, the summary agreeing with the
runs), never on outcomes.
"""

from __future__ import annotations

import json

import pytest
from local_model import LocalModel, missing

from memfit_jupyter.evaluate import evaluate
from memfit_jupyter.records import STATUSES
from memfit_jupyter.sandbox import bwrap_problem
from memfit_jupyter.tasks import get, tasks

pytestmark = [pytest.mark.local_model, pytest.mark.skipif(missing() is not None, reason=str(missing()))]


def test_two_tasks_two_variants_on_the_local_model(tmp_path):
    with LocalModel.start(log_dir=tmp_path) as lm:
        ev = evaluate(tasks(["arith-count-lines-cmd", "multi-sort-cmd"]), ["bare", "default"], model=lm.model,
                      api_base=lm.api_base, repeats=1, seed=5, out=tmp_path / "ev", max_parallel=1,
                      settings={"tools": ["read_file", "write_file", "shell", "finish"], "structured": "schema",
                                "max_iterations": 2, "max_duration_seconds": 240})
    runs = ev.runs
    assert runs.height == 4 and set(runs["variant"]) == {"bare", "default"} and set(runs["seed"]) == {5}
    for row in runs.to_dicts():
        assert row["status"] in STATUSES and row["error"] is None
        trace = json.loads(open(row["trace"]).read())
        # the run sampled through the relay with its repeat's seed
        assert trace["settings"]["api_base"].endswith("/seed/5")
        if bwrap_problem() is None:
            # no shell call waited for a person who is not there (the sandbox lets the policy allow it)
            assert not [e for e in trace["events"] if e["type"] == "approval" and e["state"] == "rejected"]
        calls = [e for e in trace["events"] if e["type"] == "model_call"]
        assert row["calls"] == len(calls) >= 1
        assert row["tokens"] == sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls)
        work = ev.out / "runs" / row["run"] / "work"
        assert get(row["task"]).judge(work, trace["answer"]).passed == row["passed"]
    for row in ev.summary.to_dicts():
        group = runs.filter(runs["variant"] == row["variant"])
        assert row["runs"] == 2 and row["successes"] == int(group["passed"].sum())
        assert 0.0 <= row["success_lo"] <= row["success"] <= row["success_hi"] <= 1.0
        if row["variant"] == "default":
            assert row["pairs"] == 2 and row["change_lo"] <= row["change"] <= row["change_hi"]
