"""The failure catalogue: every scenario declares its classes, and every mode's on/off pair,
run for real with its scripted model, shows what its scenario file says it shows."""

from __future__ import annotations

import logging

import pytest

from memfit_jupyter import catalogue
from memfit_jupyter.llm.scenarios import _defaults, _load, load_scenario, scenario_names
from memfit_jupyter.study.catalogue import (
    CLASSES,
    MAST,
    TRAIL,
    check,
    mode,
    modes,
    problems,
    run_pair,
)

MODE_IDS = [m.id for m in modes()]


@pytest.fixture(autouse=True)
def _quiet_engine_warnings():
    # Breaker openings and guarantee violations are logged as warnings; here the traces say it.
    logger = logging.getLogger("memfit_jupyter")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.mark.parametrize("name", scenario_names())
def test_every_scenario_declares_known_classes(name):
    assert problems(load_scenario(name)) == []


def test_a_scenarios_latency_delays_every_reply_that_sets_none():
    s = _load("slow", 'task = "t"\nclasses = []\nlatency_s = 0.3\n[[action]]\n'
              'replies = ["{}", { raw = "x", delay_s = 0.0 }, { fault = "timeout" }]\n', _defaults())
    assert [r.delay_s for r in s.rules["action"][0].replies] == [0.3, 0.0, 0.3]
    assert {r.delay_s for rule in s.rules["reflection"] for r in rule.replies} == {0.3}  # the defaults' too
    assert {r.delay_s for rule in load_scenario("demo").rules["reflection"] for r in rule.replies} == {0.0}
    with pytest.raises(ValueError, match="latency_s must be a number of seconds"):
        _load("bad", 'task = "t"\nlatency_s = -1\n', _defaults())


def test_a_scenario_without_classes_or_with_an_unknown_class_is_flagged():
    bare = _load("bare", 'task = "t"\n[[action]]\nreplies = ["{}"]\n', _defaults())
    assert bare.classes is None
    assert problems(bare) == ["bare: no 'classes' (declare its MAST / TRAIL ids, or [] for none)"]
    wrong = _load("wrong", 'task = "t"\nclasses = ["FM-9.9"]\n', _defaults())
    assert problems(wrong) == ["wrong: unknown class 'FM-9.9'"]
    healthy = _load("healthy", 'task = "t"\nclasses = []\n', _defaults())
    assert problems(healthy) == []
    # A failure mode must name a class, a status for each side, and only known expectations.
    text = ('task = "t"\nclasses = []\n[mode]\nid = "x"\nname = "X"\nmechanism = "m"\nlook_at = "l"\n'
            '[mode.on]\nlabel = "on"\nexpect = { status = "done", colour = "red" }\n'
            '[mode.off]\nlabel = "off"\nexpect = { verify = "fails" }\n')
    found = problems(_load("x", text, _defaults()))
    assert "x: a failure mode needs at least one class" in found
    assert "x: [mode.on] expects unknown 'colour'" in found
    assert "x: [mode.off] expects no status" in found
    assert "x: [mode.off] expects verify but [mode] has no verify command" in found


def test_the_class_ids_are_the_published_ones():
    assert len(MAST) == 14 and {i.split(".")[0] for i in MAST} == {"FM-1", "FM-2", "FM-3"}
    assert MAST["FM-1.3"][0] == "Step repetition" and MAST["FM-2.6"][0] == "Reasoning-action mismatch"
    assert {root for _, root in TRAIL.values()} == {"reasoning", "system execution", "planning and coordination"}
    assert all(c.startswith("TRAIL:") for c in TRAIL)


def test_catalogue_is_a_table_built_from_the_scenario_files():
    table = catalogue()
    assert table.columns[:6] == ["id", "name", "mast", "trail", "category", "scenario"]
    assert {"mechanism", "on", "off", "expect_on", "expect_off", "classes"} <= set(table.columns)
    assert table.height == len(modes()) and table["id"].n_unique() == table.height
    declared = {n for n in scenario_names() if load_scenario(n).mode}
    assert set(table["scenario"]) == declared
    for row in table.iter_rows(named=True):
        assert row["classes"] and all(c in CLASSES for c in row["classes"]), row["id"]
        assert row["mast"] or row["trail"]
        assert row["expect_on"] != row["expect_off"], row["id"]  # on and off must differ somehow
    spin = table.filter(table["scenario"] == "spin-demo").row(0, named=True)
    assert spin["mast"] == "FM-1.3 Step repetition" and spin["expect_off"].startswith("failed")


def test_unknown_mode_is_one_clear_line():
    with pytest.raises(ValueError) as err:
        mode("no-such-mode")
    assert "unknown failure mode 'no-such-mode'; modes: " in str(err.value) and "\n" not in str(err.value)
    assert mode("spin-demo") == mode("step-repetition")


@pytest.mark.parametrize("mode_id", MODE_IDS)
def test_each_mode_shows_on_and_off_what_it_states(mode_id, tmp_path):
    pair = run_pair(mode_id, tmp_path)
    for side in ("on", "off"):
        assert pair[side]["problems"] == [], (side, pair[side]["outcome"]["status"], pair[side]["problems"])
    on, off = pair["on"]["outcome"], pair["off"]["outcome"]
    # The two sides are distinguishable from what the catalogue checks.
    assert check(mode(mode_id).off.expect, on) or check(mode(mode_id).on.expect, off), mode_id


def test_check_reports_a_run_that_differs_from_its_row(tmp_path):
    pair = run_pair("step-repetition", tmp_path)
    seen = pair["off"]["outcome"]
    # The off run, held against what the on side states, fails on every point it differs.
    assert check(mode("step-repetition").on.expect, seen) == [
        "status 'failed', expected 'done'", "no spin:same_action_type in the trace"]
    assert check({"status": "failed", "absent": ["spin"]}, seen) == []
