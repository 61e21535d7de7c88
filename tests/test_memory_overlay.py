"""The memory overlay: reads see the base and the top store, writes stay with the top one; a fork's
memory is an overlay of its parent's store, which the fork leaves as it was."""

from __future__ import annotations

from memfit_jupyter import Agent, MemoryStore
from memfit_jupyter.fork import ForkStore
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.memory.overlay import Overlay


def _rows(store):
    return sorted((e.id, e.content, tuple(e.tags)) for e in store.list())


def test_reads_merge_writes_stay_on_top_and_a_deleted_base_row_is_only_hidden(tmp_path):
    base = MemoryStore(tmp_path / "base")
    top = MemoryStore(tmp_path / "top")
    kept = base.add("the deploy script lives in ops/deploy.sh", tags=["ops"])
    gone = base.add("the staging database is called stage-db", tags=["db"])
    before = _rows(base)
    overlay = Overlay(base, top)
    mine = overlay.add("the deploy needs the VPN up first", tags=["ops"])
    assert mine is not None and top.get(mine) is not None and base.get(mine) is None
    found = [r.content for r in overlay.search("deploy script VPN", k=5)]
    assert "the deploy script lives in ops/deploy.sh" in found and "the deploy needs the VPN up first" in found
    assert overlay.tags()["ops"] == 2
    assert overlay.delete(gone) and overlay.get(gone) is None and base.get(gone) is not None
    assert all(r.id != gone for r in overlay.search("staging database", k=5))
    assert len(overlay) == 2 and overlay.get(kept) is not None
    overlay.flush()
    assert _rows(base) == before


def test_a_fork_writes_to_its_overlay_and_leaves_the_parents_store_as_it_was(tmp_path):
    memory = tmp_path / "memory"
    work = tmp_path / "parent"
    work.mkdir()
    task = load_scenario("memory-lesson").task or "do the task"
    Agent(model="memfit/memory-lesson", workdir=work, memory=str(memory)).start(task).run()
    parent = Agent(model="memfit/memory-lesson", workdir=work, memory=str(memory)).start(task)
    parent.run()
    store = parent.memory
    before = _rows(store)
    assert before, "the parent's store holds what its runs learnt"
    child = parent.fork(1, workdir=tmp_path / "child")
    assert isinstance(child.memory, ForkStore) and isinstance(child.memory.live, Overlay)
    child.run()
    assert _rows(store) == before
    overlay = child.memory.live
    assert len(overlay.top) > 0, "the child's triage kept something, in its own store"
    assert {c for _, c, _ in before} <= {e.content for e in overlay.list()} | {c for _, c, _ in _rows(overlay.top)}
    searched = [e for e in child.events if e.TYPE == "memory" and e.op == "task_search" and e.iteration >= 1]
    assert searched and searched[0].results, "the child reads the parent's memories"


def test_write_through_writes_to_the_parents_store(tmp_path):
    memory = tmp_path / "memory"
    work = tmp_path / "parent"
    work.mkdir()
    task = load_scenario("memory-lesson").task or "do the task"
    parent = Agent(model="memfit/memory-lesson", workdir=work, memory=str(memory)).start(task)
    parent.run()
    for row in parent.memory.list():  # forgotten since: what the child learns again is new to the store
        parent.memory.delete(row.id)
    before = len(parent.memory)
    child = parent.fork(1, memory="write-through", workdir=tmp_path / "child")
    assert child.memory.live is parent.memory
    child.run()
    assert child.parent["memory"] == "write-through"
    added = [i for e in child.events if e.TYPE == "memory" and e.iteration >= 1 for i in e.added or ()
             if isinstance(i, str)]
    assert added, "the child's triage kept something"
    assert len(parent.memory) == before + len(added)
