"""memfit_jupyter.compare(a, b): two runs (or traces) side by side."""

from __future__ import annotations

import logging

import pytest

import memfit_jupyter
from memfit_jupyter import Agent
from memfit_jupyter.study.compare import COMPARE_MIME, Comparison


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    logging.disable(logging.WARNING)
    try:
        on = Agent(model="memfit/spin-demo", workdir=tmp_path_factory.mktemp("on"), memory=False,
                   spin_warnings="prompt")
        off = Agent(model="memfit/spin-demo", workdir=tmp_path_factory.mktemp("off"), memory=False,
                    spin_threshold=99)
        a, b = on.start("add up data.txt"), off.start("add up data.txt")
        cmp = memfit_jupyter.compare(a, b, labels=("spin on", "spin off"))  # not started: run first
    finally:
        logging.disable(logging.NOTSET)
    return a, b, cmp


def test_compare_names_outcome_cost_divergence_and_mechanisms(pair):
    a, b, cmp = pair
    assert isinstance(cmp, Comparison) and a.done and b.done
    rows = {label: (va, vb) for label, _, va, vb in cmp.rows}
    assert rows["outcome"] == (a.status, b.status)
    assert rows["iterations"] == (a.iteration, b.iteration)
    assert rows["cost"] == (a.trace()["totals"]["cost_usd"], b.trace()["totals"]["cost_usd"])
    spins = [sum(e.type == "spin" and bool(e.get("is_spinning")) for e in r.events) for r in (a, b)]
    assert rows.get("spin alerts", (0, 0)) == tuple(spins)
    # where the two first took a different action
    acts = [[(e.iteration, e.tool, e.params) for e in r.events if e.type == "action"] for r in (a, b)]
    first = next(i for i, (x, y) in enumerate(zip(*acts, strict=False)) if x != y)
    assert cmp.diverged_at == acts[0][first][0]
    assert cmp.diverged_actions[0].startswith(acts[0][first][1] + "(")


def test_compare_shows_as_its_own_mime_type_with_both_runs(pair):
    a, b, cmp = pair
    bundle = cmp._repr_mimebundle_()
    payload = bundle[COMPARE_MIME]
    assert payload["labels"] == ["spin on", "spin off"]
    assert [t["run_id"] for t in payload["runs"]] == [a.id, b.id]
    assert payload["diverged"]["iteration"] == cmp.diverged_at
    assert "spin on" in bundle["text/plain"] and "<script" not in bundle["text/html"]


def test_compare_takes_traces_and_says_what_it_cannot_take(pair):
    a, b, _ = pair
    same = memfit_jupyter.compare(a.trace(), a.trace())
    assert same.diverged_at is None and "the same actions" in repr(same)
    with pytest.raises(ValueError, match="not a memfit trace"):
        memfit_jupyter.compare({"task": "x"}, a.trace())
    with pytest.raises(TypeError, match="runs or traces"):
        memfit_jupyter.compare(42, a.trace())
