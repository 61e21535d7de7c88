"""Memory in runs: the default store, triage (at the run's end, or at events), the task search, the tools."""

import json

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.memory import MemoryStore, SearchResults, open_store
from memfit_jupyter.memory.triage import contextual_input, handle_memory, heuristic_entities

TASK = "What is the total of the numbers in the numbers file?"


def memory_events(run, op=None):
    return [e for e in run.events if e.type == "memory" and (op is None or e["op"] == op)]


def test_the_default_triage_keeps_the_lesson_by_rules_with_no_model_call(tmp_path):
    first = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="auto").start(TASK)
    assert first.run().status == "done"
    # by default one triage by rules, when the run ends: the failed read's error and the outcome
    (triage,) = memory_events(first, "triage")
    assert triage.iteration == 3 and triage["source"] == "heuristic" and len(triage["added"]) == 2
    assert not [e for e in first.events if e.type == "model_call" and e["purpose"] == "triage"]
    contents = sorted(m.content for m in first.memory.search("numbers file", k=5))
    assert contents == [
        f'Failure seen: read_file(path="numbers.csv") failed: no such file: numbers.csv (Task: {TASK})',
        f'Task outcome: Task: {TASK} Done by: read_file(path="numbers.txt"), '
        'finish(answer="The numbers add up to 42.")']  # the error once, though a reflection echoed it
    second = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="auto").start(TASK)
    second.run()
    (found,) = memory_events(second, "task_search")
    assert any("numbers.txt" in r["content"] for r in found["results"])


def test_triage_at_the_end_keeps_the_lesson_in_one_call(tmp_path):
    first = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="auto",
                  memory_triage="end").start(TASK)
    assert first.run().status == "done"
    # one model triage, when the run ends, over all three steps (the failed read among them)
    (triage,) = memory_events(first, "triage")
    assert triage.iteration == 3 and triage["added"] and triage["source"] == "model"
    calls = [e for e in first.events if e.type == "model_call" and e["purpose"] == "triage"]
    assert len(calls) == 1 and "numbers.txt" in json.dumps(calls[0].fields())
    second = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="auto",
                   memory_triage="end").start(TASK)
    second.run()
    (found,) = memory_events(second, "task_search")
    assert "numbers.txt" in found["results"][0]["content"]


def test_a_lesson_from_one_run_is_found_by_the_next(tmp_path):
    first = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="auto",
                  memory_triage="events").start(TASK)
    assert first.run().status == "done"
    assert (tmp_path / ".memfit" / "memory.sqlite3").exists()
    triage = memory_events(first, "triage")
    # triaged at events: the failed read (iteration 1) and the finish (3); the plain read in between is not
    assert [e.iteration for e in triage] == [1, 3] and triage[0]["added"] and triage[0]["source"] == "model"
    assert triage[1]["duplicates"] == 1  # the same lesson again: 2-of-3 dedup
    for e in triage:
        assert set(e.fields()) >= {"op", "query", "results", "added", "bytes"}
    second = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="auto",
                   memory_triage="events").start(TASK)
    second.run()
    (found,) = memory_events(second, "task_search")
    assert found["query"] == TASK and found["bytes"] <= 4096
    top = found["results"][0]
    assert "numbers.txt" in top["content"]
    assert set(top["breakdown"]) >= {"r", "c", "t", "a", "p", "o", "e", "keyword_bonus", "semantic", "final"}
    # the model picked a tag for the task search (the "tags" purpose)
    assert any(e.type == "model_call" and e["purpose"] == "tags" for e in second.events)
    assert len(second.memory) == 1


def test_memory_off_and_explicit_stores(tmp_path):
    off = Agent(model="memfit/demo", workdir=tmp_path, memory=False).start("add up data.txt")
    off.run()
    assert off.memory is None and not memory_events(off)
    assert not (tmp_path / ".memfit").exists()
    assert "memory_search" not in off.tools
    by_path = Agent(model="memfit/demo", workdir=tmp_path, memory="notes/mem").start("add up data.txt")
    assert by_path.memory.path == tmp_path / "notes" / "mem"
    store = MemoryStore(tmp_path / "own")
    mine = Agent(model="memfit/demo", workdir=tmp_path, memory=store).start("add up data.txt")
    assert mine.memory is store
    store.close()


class Notes:
    """A store of the caller's own: it searches and adds, and keeps what it was given."""

    def __init__(self):
        self.added = []

    def search(self, query, k=10, bytes_limit=None, **_):
        return SearchResults([], query=query, bytes_limit=bytes_limit)

    def add(self, content, tags=(), questions=(), **_):
        self.added.append(content)
        return f"n{len(self.added)}"


class FullNotes(Notes):
    """The same with what triage and a run's end call."""

    def add_many(self, items):
        return [self.add(i["content"]) for i in items]

    def flush(self):
        pass


def test_a_store_object_needs_what_the_run_calls(tmp_path):
    # one without add_many and flush would fail at every triage and at the run's end: refused at once
    with pytest.raises(TypeError, match=r"got Notes \(a store needs add_many, flush\)"):
        Agent(model="memfit/memory-lesson", workdir=tmp_path, memory=Notes()).start(TASK)
    notes = FullNotes()
    run = Agent(model="memfit/memory-lesson", workdir=tmp_path, memory=notes, memory_triage="end").start(TASK)
    assert run.run().status == "done" and run.memory is notes
    assert not [e for e in run.events if e.type == "error"]
    assert notes.added and memory_events(run, "triage")[0]["added"] == ["n1"]


def test_memory_tools(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path).start("add up data.txt")
    insert, search = run.tools["memory_insert"], run.tools["memory_search"]
    ok = insert(run.tool_context, {"content": "data.txt holds one number per line", "tags": ["data"]})
    assert ok.ok and ok.data["memory_id"]
    again = insert(run.tool_context, {"content": "data.txt holds one number per line", "tags": ["data"]})
    assert again.ok and again.data["duplicate"]
    found = search(run.tool_context, {"query": "what is in data.txt", "bytes_limit": 200})
    assert found.ok and "one number per line" in found.output
    bad = search(run.tool_context, {"query": "x", "bytes_limit": 0})
    assert not bad.ok
    ops = [e["op"] for e in memory_events(run)]
    assert ops == ["insert", "insert", "search"]
    # reflections search the same store through run.memory with their byte limit
    assert run.memory.search("data.txt numbers", bytes_limit=2048)[0].content.startswith("data.txt")


def test_default_store_is_shared_in_the_process(tmp_path):
    a = Agent(model="memfit/demo", workdir=tmp_path).start("x")
    b = Agent(model="memfit/demo", workdir=tmp_path).start("y")
    assert a.memory is b.memory is open_store(tmp_path / ".memfit")


def test_contextual_input_is_english_or_the_chinese_labelled_format():
    text = contextual_input(3, "run1", "[action #3] ...", "running", False, None, format="chinese")
    assert text == "ReAct迭代 3/run1: [action #3] ...\n任务状态: running\n完成状态: false\n原因: <nil>"
    text = contextual_input(3, "run1", "#3 finish(answer=\"42\")", "running", True, "finish", task="Add them up")
    assert text == "Task: Add them up\n#3 finish(answer=\"42\")\nFinished: yes"
    text = contextual_input(2, "run1", "#2 read_file(path=\"a\")\n-> FAILED: no such file", "running", False,
                            "timed out", task="t")
    assert text.endswith("Finished: no (timed out)")  # a reason the steps do not already say


def test_heuristic_triage_without_a_model(tmp_path):
    text = contextual_input(2, "r", "[observation #2] ERROR: no such file: config.yaml", "running", False,
                            "no such file: config.yaml")
    assert heuristic_entities("[observation #1] 42") == []
    with MemoryStore(tmp_path / "m") as store:
        outcome = handle_memory(store, text, llm=None)
        assert outcome["source"] == "heuristic" and len(outcome["added"]) == 1
        kept = store.get(outcome["added"][0])
        assert "config.yaml" in kept.content and "failure" in kept.tags and kept.a_score == 0.7
        assert handle_memory(store, text, llm=None)["duplicates"] == 1


def test_rules_triage_of_the_english_input_keeps_each_failed_call_once_and_how_the_task_was_done():
    from memfit_jupyter.memory.triage import contextual_input

    diff = "\n".join([
        '#1 shell(command="cat vals.txt"): read it',
        "-> FAILED: exit 1: cat: vals.txt: No such file or directory",
        "[reflection] the action failed: cat: vals.txt: No such file or directory",
        '#2 shell(command="cat values.txt"): the right name',
        "-> 3 4 5",
        '#3 shell(command="cat vals.txt"): again',
        "-> FAILED: exit 1: cat: vals.txt: No such file or directory",
        '#4 finish(answer="12"): sum',
    ])
    text = contextual_input(4, "r", diff, "done", True, None, format="english", task="Add the values")
    kept = [e["content"] for e in heuristic_entities(text)]
    assert kept == [
        'Failure seen: shell(command="cat vals.txt") failed: exit 1: cat: vals.txt: No such file or directory'
        ' (Task: Add the values)',
        'Task outcome: Task: Add the values Done by: shell(command="cat values.txt"), finish(answer="12")',
    ]
    unfinished = contextual_input(2, "r", "\n".join(diff.splitlines()[:2]), "failed", False, None,
                                  format="english", task="Add the values")
    assert [e["content"][:13] for e in heuristic_entities(unfinished)] == ["Failure seen:"]


def test_a_run_recalls_what_memory_holds_for_its_task_into_the_system_prompt(tmp_path):
    first = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="none").start(TASK)
    first.run()
    assert not memory_events(first, "recall")  # recall is off unless asked for
    unrelated = "Kept for another task: the deploy key rotates every Monday at noon."
    first.memory.add(unrelated, tags=["deploy"])
    second = Agent(model="memfit/memory-lesson", workdir=tmp_path, reflection="none", memory_recall=2048).start(TASK)
    second.step()
    (recall,) = memory_events(second, "recall")
    recalled = [r["content"] for r in recall["results"]]
    assert recall.iteration == 0 and recall["query"] == TASK
    assert any("no such file: numbers.csv" in c for c in recalled) and unrelated not in recalled
    system = second.next_prompt()[0]["content"]
    assert "From earlier runs, memory holds" in system and 'read_file(path="numbers.csv") failed' in system
    assert "deploy key" not in system
    second.run()
    # replayed elsewhere, the recall comes from the recording, and the run is the same event for event
    recorded = json.loads(json.dumps(second.trace()))
    assert recorded["settings"]["memory_recall"] == 2048
    replayed = Agent.replay(recorded, workdir=tmp_path / "elsewhere")
    replayed.run()
    assert json.dumps(replayed.trace()["events"]) == json.dumps(recorded["events"])
    # a fresh store recalls nothing and the prompt has no such section
    fresh = Agent(model="memfit/memory-lesson", workdir=tmp_path / "fresh", memory_recall=2048).start(TASK)
    fresh.step()
    (none,) = memory_events(fresh, "recall")
    assert none["results"] == [] and "From earlier runs" not in fresh.next_prompt()[0]["content"]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4k"])
def test_memory_recall_takes_a_whole_number_of_bytes(tmp_path, bad):
    with pytest.raises((ValueError, TypeError), match="memory_recall|recall_bytes"):
        Agent(model="memfit/demo", workdir=tmp_path, memory_recall=bad).start("x")
