"""The typed event stream: one dataclass per type, subscribe by class, records and timeline as views."""

from __future__ import annotations

import json

import pytest

from memfit_jupyter import Agent
from memfit_jupyter import events as ev
from memfit_jupyter.records import ActionRecord


def start(tmp_path, model="memfit/demo", **kw):
    return Agent(model=model, workdir=tmp_path, memory=False, **kw).start("add up the numbers in data.txt")


def test_every_event_of_a_run_is_typed_and_serialises_as_before(tmp_path):
    run = start(tmp_path)
    run.run()
    assert run.events and all(type(e) is not ev.Event and isinstance(e, ev.Event) for e in run.events)
    for e in run.events:
        d = e.to_dict()
        assert list(d)[:3] == ["type", "iteration", "ts"] and d["type"] == e.type
        again = ev.from_dict(json.loads(json.dumps(d)))
        assert type(again) is type(e) and again.to_dict() == d


def test_subscribe_by_class_gets_only_those_events(tmp_path):
    run = start(tmp_path, model="memfit/spin-demo", reflection="auto", detectors={"logic_spin": True},
                spin_warnings="prompt")
    seen, every, guidance = [], [], []
    run.subscribe(seen.append, ev.Observation, ev.Action)
    run.subscribe(every.append)
    run.subscribe(guidance.append, ev.Guidance)
    run.run()
    assert seen and {type(e) for e in seen} == {ev.Observation, ev.Action}
    assert every == run.events  # an untyped subscriber gets the trace's events, in order
    # what the loop told the model is an event too, though not part of the trace
    assert guidance and all(isinstance(g, ev.Guidance) for g in guidance)
    assert {g.kind for g in guidance} >= {"reflection", "logic_spin_warning"}
    assert not any(e["type"] == "guidance" for e in run.trace()["events"])
    assert not any(isinstance(e, ev.Guidance) for e in run.events)


def test_records_are_built_from_the_action_and_observation_events(tmp_path):
    run = start(tmp_path)
    run.run()
    actions = [e for e in run.events if isinstance(e, ev.Action)]
    observations = [e for e in run.events if isinstance(e, ev.Observation)]
    assert len(run.records) == len(observations) == len(actions)
    for record, act, obs in zip(run.records, actions, observations, strict=True):
        assert isinstance(record, ActionRecord)
        assert (record.tool, record.params, record.thought) == (act.tool, act.params, act.thought)
        assert (record.output, record.ok, record.error, record.duration_s) == (obs.output, obs.ok, obs.error,
                                                                               obs.duration_s)


def test_the_timeline_is_written_from_the_events(tmp_path):
    run = start(tmp_path, model="memfit/spin-demo", spin_warnings="prompt")
    run.run()
    kinds = [e.kind for e in run.timeline.entries]
    assert kinds[0] == "task"
    assert kinds.count("observation") == len(run.records) - sum(r.action_type == "invalid_reply"
                                                                 for r in run.records)
    # a fresh timeline fed the same events (plus the guidance) ends up the same
    from memfit_jupyter.timeline import Timeline

    again = Timeline(run.task)
    fed = []
    other = start(tmp_path / "again", model="memfit/spin-demo", spin_warnings="prompt")
    other.subscribe(fed.append, ev.Event)
    other.run()
    for e in fed:
        again.apply(e)
    assert [(x.kind, x.content) for x in again.entries] == [(x.kind, x.content) for x in other.timeline.entries]
    assert any(k == "logic_spin_warning" for k in kinds)


def test_the_string_form_makes_the_same_typed_event_and_refuses_unknown_fields(tmp_path):
    run = start(tmp_path)
    note = run.emit("note", text="hello", source="magic")
    assert isinstance(note, ev.Note) and note.to_dict()["source"] == "magic"
    assert "source" not in run.emit(ev.Note(text="plain")).to_dict()
    with pytest.raises(ValueError, match="no field"):
        run.emit("note", text="x", colour="red")
    with pytest.raises(ValueError, match="unknown event type"):
        run.emit("telepathy", text="x")
    assert ev.make("guarantee", violated=False, override=True, confirmed=True, limit="max_cost_usd",
                   message="m", limits={}, previous={}, cost_usd=0.0, elapsed_s=0.0,
                   recursive_calls=0).__class__ is ev.GuaranteeOverride


def test_mapping_reads_keep_working_for_subscribers(tmp_path):
    run = start(tmp_path)
    run.run()
    end = run.events[-1]
    assert end["type"] == "run_end" and end.get("status") == "done" and end.get("nope", 1) == 1
    assert "status" in end and "nope" not in end
    err = ev.Error(message="m")
    assert "traceback" not in err and err.get("traceback") is None


def test_secrets_are_redacted_in_typed_events(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnopqrstuvwxyz0123")
    run = start(tmp_path)
    e = run.emit(ev.Note(text="key sk-test-abcdefghijklmnopqrstuvwxyz0123 here"))
    assert "abcdefghijklmnopqrstuvwxyz0123" not in json.dumps(e.to_dict())
