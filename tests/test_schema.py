"""The trace's JSON Schema comes from the event classes; the labextension's TypeScript types from it."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from memfit_jupyter import Agent, scenarios
from memfit_jupyter import events as ev
from memfit_jupyter.schema import TS_PATH, event_schema, trace_schema, typescript


@pytest.fixture(scope="module")
def validator():
    schema = trace_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def test_the_typescript_types_are_generated_from_the_python_event_classes():
    assert TS_PATH.read_text() == typescript(), (
        "labextension/src/trace-types.ts differs from the event classes: "
        "run `python -m memfit_jupyter.schema --write`")


def test_every_traced_event_class_has_its_definition():
    defs = trace_schema()["$defs"]
    for shapes in ev.REGISTRY.values():
        for cls in shapes:
            assert (cls.__name__ + "Event" in defs) == cls.TRACED
    note = event_schema(ev.Note)
    assert "timeline" not in note["properties"]  # hidden fields never leave the process
    assert "source" not in note["required"] and "text" in note["required"]


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_every_scenario_trace_validates(name, tmp_path, validator):
    extra = {"oracle": "false", "max_trials": 2} if name == "diary" else {}
    run = Agent(model=f"memfit/{name}", workdir=tmp_path, memory=False, **extra).start("do the task")
    run.run()
    trace = json.loads(json.dumps(run.trace()))
    errors = sorted(validator.iter_errors(trace), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}"[:300] for e in errors[:5]]


def test_the_person_s_changes_validate_too(tmp_path, validator):
    burnt = Agent(model="memfit/budget-burn", workdir=tmp_path, memory=False).start("do the task")
    assert burnt.run().status == "degraded"
    burnt.override(confirm=True, max_cost_usd=3.0)
    burnt.run()
    split = Agent(model="memfit/disagree", workdir=tmp_path / "b", memory=None, strategy="diverse",
                  samples=6).start("In which year was the Peace of Westphalia signed?")
    split.run()
    split.choose(0)
    for run in (burnt, split):
        trace = json.loads(json.dumps(run.trace()))
        assert not list(validator.iter_errors(trace))
    kinds = {type(e) for e in burnt.events} | {type(e) for e in split.events}
    assert {ev.GuaranteeOverride, ev.SynthesisChoice, ev.Memory} <= kinds


def test_a_wrong_field_fails_validation(validator):
    trace = {"version": 1, "task": "t", "events": [{"type": "note", "iteration": 0, "ts": 0.0, "text": 3}]}
    assert list(validator.iter_errors(trace))
    trace["events"][0]["text"] = "fine"
    assert not list(validator.iter_errors(trace))
    trace["events"][0]["colour"] = "red"
    assert list(validator.iter_errors(trace))


def test_a_family_s_traces_validate_with_their_header_records(tmp_path, validator):
    """A parent with a fork, the fork (its parent record, its overlay's memory record) and the
    diary's oracle: the header's keys the schema describes."""
    (tmp_path / "parent").mkdir()
    run = Agent(model="memfit/memory-lesson", workdir=tmp_path / "parent", memory=True, oracle="true").start(
        "Sum the numbers in data.txt")
    run.run()
    child = run.fork(2, workdir=tmp_path / "child")
    child.run()
    for one in (run, child):
        trace = json.loads(json.dumps(one.trace()))
        assert not list(validator.iter_errors(trace))
    parent, kid = run.trace(), child.trace()
    assert parent["forks"][0]["run"] == child.id and kid["parent"]["run"] == run.id
    assert parent["oracle"] == {"command": "true"} and "over" in kid["memory_store"]
    assert list(validator.iter_errors({**kid, "memory_store": "a folder"}))
    assert list(validator.iter_errors({**parent, "forks": {"run": child.id}}))
