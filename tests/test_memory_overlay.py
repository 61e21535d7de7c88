"""The memory overlay: reads see the base and the top store, writes stay with the top one; a fork's
memory is an overlay of its parent's store, which the fork leaves as it was."""

from __future__ import annotations

import pytest

from memfit_jupyter import Agent, MemoryStore
from memfit_jupyter.fork import ForkError, ForkStore
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
    child = parent.fork(1, workdir=tmp_path / "child",
                        action={"tool": "memory_insert", "params": {"content": "the child's own lesson: read twice"}})
    assert isinstance(child.memory, ForkStore) and isinstance(child.memory.live, Overlay)
    child.run()
    assert _rows(store) == before
    overlay = child.memory.live
    assert [c for _, c, _ in _rows(overlay.top)] == ["the child's own lesson: read twice"]  # its triage found
    # what the parent's store holds already, and stored nothing again
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




def test_an_overlay_reads_as_one_store_holding_the_childs_rows_and_the_parents_visible_ones(tmp_path):
    """Hidden rows take no place in k or the byte limit; the two stores' finds are ranked together
    (each store ranked its own apart: a weak row of the child's outranked the parent's match);
    tags, counts and length are those of the rows a read sees."""
    base, top, one = (MemoryStore(tmp_path / n) for n in ("base", "top", "one"))
    parents = ["pytest -x stops the test run at the first failure",
               "pytest --maxfail=1 also stops pytest after one failure",
               "the CI pipeline runs on every push to main", "numpy arrays are row-major by default"]
    childs = ["a failure in the nightly job was a flaky network"]
    for text in parents:
        base.add(text, tags=["testing"])
    for text in childs:
        top.add(text, tags=["ci"])
    for text in parents:
        one.add(text, tags=["testing"])
    for text in childs:
        one.add(text, tags=["ci"])
    query = "how do I stop pytest at the first failure"
    overlay = Overlay(base, top)
    assert [r.content for r in overlay.search(query, k=3)] == [r.content for r in one.search(query, k=3)]

    later = [base.add(f"pytest {w} stops pytest at the first failure, learnt later", tags=["later"])
             for w in ("-x", "--exitfirst")]
    hiding = Overlay(base, top, hidden=later)
    for k in (1, 2):
        assert [r.content for r in hiding.search(query, k=k)] == [r.content for r in one.search(query, k=k)]
    first = one.search(query, k=1)[0]
    assert [r.content for r in hiding.search(query, k=None, bytes_limit=first.entity.size)] == [first.content]
    assert hiding.tags() == {"testing": 4, "ci": 1} and len(hiding) == 5 == len(hiding.list())
    assert hiding.delete(next(e.id for e in base.list() if e.content == parents[3]))
    assert len(hiding) == 4 == len(hiding.list()) and hiding.tags()["testing"] == 3


def test_the_model_picks_among_the_tags_a_read_sees_and_both_stores_are_searched_with_them(tmp_path):
    from types import SimpleNamespace

    base, top = MemoryStore(tmp_path / "base"), MemoryStore(tmp_path / "top")
    base.add("numbers are in numbers.txt", tags=["numbers"])
    hidden = base.add("the launch code is in vault-9", tags=["launchcodes-vault9"])
    top.add("the deploy checklist lives in ops/checklist.md", tags=["deploy"])
    asked: list[str] = []

    class Picker:  # a model answering the tag question: it picks "deploy"
        def call(self, purpose, messages, **kw):
            asked.append(messages[-1]["content"])
            return SimpleNamespace(ok=True, value=SimpleNamespace(tags=["deploy"]))

    found = Overlay(base, top, hidden=[hidden]).search("where is the checklist", k=5, llm=Picker())
    assert asked and "launchcodes" not in asked[0] and "deploy" in asked[0]
    assert found.selected_tags == ["deploy"] and found[0].content == "the deploy checklist lives in ops/checklist.md"


def test_a_fork_of_a_fork_embeds_as_the_first_store_and_memory_must_name_a_store(tmp_path):
    import pytest

    from memfit_jupyter.fork import ForkError
    from memfit_jupyter.memory.embedders import HashingEmbedder

    (tmp_path / "parent").mkdir()
    store = MemoryStore(tmp_path / "store", embedder=HashingEmbedder(dim=128))
    run = Agent(model="memfit/memory-lesson", workdir=tmp_path / "parent", memory=store).start(
        load_scenario("memory-lesson").task)
    run.run()
    child = run.fork(2, workdir=tmp_path / "child")
    child.run()
    grandchild = child.fork(3, workdir=tmp_path / "grandchild")
    assert grandchild.memory.live.top.embedder.id == store.embedder.id == "hashing-128"
    with pytest.raises(ForkError, match="holds no memory store"):
        run.fork(2, workdir=tmp_path / "other", memory=tmp_path / "parent")
    assert not (tmp_path / "parent" / "memory.sqlite3").exists() and not (tmp_path / "other").exists()


def test_what_the_agent_saved_with_archival_memory_insert_after_the_fork_step_is_hidden(tmp_path):
    (tmp_path / "parent").mkdir()
    run = Agent(model="memfit/memory-lesson", workdir=tmp_path / "parent", memory=True).start(
        load_scenario("memory-lesson").task)
    run.run()
    fact = "the answer key lives in zebra.cfg"
    saver = run.fork(2, workdir=tmp_path / "saver", memory="write-through",
                     action={"tool": "archival_memory_insert", "params": {"content": fact}})
    saver.run()
    (saved,) = [e.id for e in run.memory.list() if e.content == fact]
    child = saver.fork(1, workdir=tmp_path / "child")
    assert saved in child.memory.live.hidden
    assert all(r.content != fact for r in child.memory.live.search("where is the answer key zebra.cfg", k=5))


def _saved(run_over_a_store):
    """The store, its earlier memory's id, and the run's trace as saved (``conftest.run_over_a_store``)."""
    import json

    store, prior, run = run_over_a_store
    return store, prior, json.loads(json.dumps(run.trace()))


def test_a_fork_of_a_saved_trace_reads_the_parents_store_where_the_trace_says_it_was(tmp_path, run_over_a_store):
    store, prior, saved = _saved(run_over_a_store)
    assert saved["memory_store"] == {"path": str(store.path.resolve())}
    before = _rows(store)
    assert len(before) > 1  # and what the run learnt, which a fork at step 1 does not see
    child = Agent.fork(saved, 1, workdir=tmp_path / "child")
    assert child.parent["memory"] == "overlay" and [e.id for e in child.memory.live.list()] == [prior]
    child.run()
    assert _rows(store) == before  # read, never written
    given = Agent.fork(saved, 1, workdir=tmp_path / "given", memory=store.path)
    assert given.parent["memory"] == "overlay" and [e.id for e in given.memory.live.list()] == [prior]


def test_a_fork_of_a_saved_trace_says_when_its_parents_store_is_gone_or_unnamed(tmp_path, run_over_a_store, caplog,
                                                                                  monkeypatch):
    store, _, saved = _saved(run_over_a_store)
    store.close()
    moved = store.path.rename(tmp_path / "moved")
    gone = Agent.fork(saved, 1, workdir=tmp_path / "gone")
    assert gone.parent["memory"] == "own" and not gone.memory.live.list()
    assert "reads none of its parent's memories: its store cannot be read" in caplog.text
    assert str(store.path) in caplog.text and not store.path.exists()  # nothing made where it was
    caplog.clear()
    unnamed = Agent.fork({k: v for k, v in saved.items() if k != "memory_store"}, 1, workdir=tmp_path / "unnamed")
    assert unnamed.parent["memory"] == "own" and "the trace does not say where the parent's store is" in caplog.text
    # A folder outside the working directory that this process does not have open: a trace does
    # not choose what a fork reads (and puts in its prompts and its trace); memory= names it.
    moved_where = {**saved, "memory_store": {"path": str(moved)}}
    caplog.clear()
    assert Agent.fork(moved_where, 1, workdir=tmp_path / "far").parent["memory"] == "own"
    assert f"its store is in {moved.resolve()}, outside the working directory, and this process" in caplog.text
    assert Agent.fork(moved_where, 1, workdir=tmp_path / "named", memory=moved).parent["memory"] == "overlay"
    monkeypatch.chdir(tmp_path)  # inside the working directory: read where the trace says
    assert Agent.fork(moved_where, 1, workdir=tmp_path / "found").parent["memory"] == "overlay"
    for bad in ({"path": ""}, {"url": "https://example.org/db"}, {"path": "a\x00b"},
                {"path": str(moved), "over": {"path": str(moved)}, "hidden": "all"}):
        caplog.clear()
        child = Agent.fork({**saved, "memory_store": bad}, 1, workdir=tmp_path / f"bad{len(caplog.records)}-{id(bad)}")
        assert child.parent["memory"] == "own" and "its store cannot be read" in caplog.text, bad
    with pytest.raises(ForkError, match="memory_store must be object"):  # not a record at all: as replay reads it
        Agent.fork({**saved, "memory_store": ["not", "a", "record"]}, 1, workdir=tmp_path / "not-a-record")
    assert not (tmp_path / "not-a-record").exists()
    # A server's store is read only when this process has it open: a trace does not log in anywhere.
    caplog.clear()
    server = {**saved, "memory_store": {"url": "postgresql://ann@127.0.0.1:9/team"}}
    assert Agent.fork(server, 1, workdir=tmp_path / "server").parent["memory"] == "own"
    assert "has not connected to (postgresql://ann@127.0.0.1:9/team)" in caplog.text


def test_a_fork_of_a_saved_fork_reads_its_own_memories_over_its_parents_as_it_did(tmp_path, run_over_a_store):
    import json

    store, prior, saved = _saved(run_over_a_store)
    lesson = "the child's own lesson: read the file twice"
    child = Agent.fork(saved, 2, workdir=tmp_path / "child",
                       action={"tool": "memory_insert", "params": {"content": lesson}})
    child.run()
    overlay = child.memory.live
    hidden = sorted(overlay.hidden)
    assert hidden, "what the parent learnt from step 2 on is hidden from the child"
    kept = child.trace()
    assert kept["memory_store"] == {"path": str(overlay.top.path.resolve()), "over": saved["memory_store"],
                                    "hidden": hidden}
    seen = sorted(e.id for e in overlay.list())
    grandchild = Agent.fork(json.loads(json.dumps(kept)), 3, workdir=tmp_path / "grandchild")
    assert grandchild.parent["memory"] == "overlay"
    read = grandchild.memory.live.base  # the saved child's memory, opened again from its record
    assert isinstance(read, Overlay) and sorted(e.id for e in read.list()) == seen
    assert lesson in {e.content for e in grandchild.memory.live.list()}
    assert all(e.id not in hidden for e in grandchild.memory.live.list())
    replayed = Agent.replay(kept, workdir=tmp_path / "replay")
    replayed.run()
    assert replayed.trace()["memory_store"] == kept["memory_store"]


def test_what_the_parent_holds_the_child_does_not_store_again_unless_it_is_hidden(tmp_path):
    base, top = MemoryStore(tmp_path / "base"), MemoryStore(tmp_path / "top")
    held = "the deploy script lives in ops/deploy.sh"
    base.add(held, tags=["ops"], questions=["where is the deploy script?"])
    later = base.add("the staging database is called stage-db", tags=["db"], questions=["what is staging called?"])
    overlay = Overlay(base, top, hidden=[later])
    again = overlay.add_many([{"content": held, "tags": ["ops"], "questions": ["where is the deploy script?"]},
                              {"content": "the staging database is called stage-db", "tags": ["db"],
                               "questions": ["what is staging called?"]}])
    assert again[0] is None and again[1] is not None  # the hidden one the child's past did not know
    assert [e.content for e in top.list()] == ["the staging database is called stage-db"]
    assert overlay.add(held, tags=["ops"], questions=["where is the deploy script?"]) is None


def test_a_fork_with_no_change_stores_what_its_parent_stored_and_no_more(tmp_path):
    (tmp_path / "parent").mkdir()
    store = MemoryStore(tmp_path / "store")
    first = Agent(model="memfit/memory-lesson", workdir=tmp_path / "parent", memory=store).start(
        load_scenario("memory-lesson").task)
    first.run()
    second = Agent(model="memfit/memory-lesson", workdir=tmp_path / "parent", memory=store).start(
        load_scenario("memory-lesson").task)
    second.run()  # finds what the first run stored: its triage adds nothing
    child = second.fork(2, workdir=tmp_path / "child")
    child.run()

    def triage(run):
        return [(e.iteration, e.added, e.duplicates) for e in run.events if e.TYPE == "memory" and e.op == "triage"]

    assert triage(child) == triage(second) and not child.memory.live.top.list()
    assert len(child.memory.live) == len(store)


class _Counting:
    """An embedder (the hashing one underneath) that counts the texts it is asked to embed: an
    embedder may be a model paid by the call."""

    def __init__(self):
        from memfit_jupyter.memory.embedders import HashingEmbedder

        self.inner = HashingEmbedder()
        self.id, self.dim = self.inner.id, self.inner.dim
        self.texts = 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_an_overlay_write_embeds_each_item_once(tmp_path):
    embedder = _Counting()
    base = MemoryStore(tmp_path / "base", embedder=embedder)
    top = MemoryStore(tmp_path / "top", embedder=embedder)
    base.add("the deploy script lives in ops/deploy.sh", tags=["ops"], questions=["where is the deploy script?"])
    overlay = Overlay(base, top)
    items = [{"content": "the deploy script lives in ops/deploy.sh", "tags": ["ops"],
              "questions": ["where is the deploy script?"]},
             {"content": "the staging database is called stage-db", "tags": ["db"],
              "questions": ["what is staging called?"]},
             {"content": "builds need the VPN up first", "tags": ["ops"]}]
    embedder.texts = 0
    ids = overlay.add_many(items)
    assert ids[0] is None and ids[1] is not None and ids[2] is not None
    assert embedder.texts == 5  # three contents, two question sets: once each, for the base's check and the write
    assert sorted(e.content for e in top.list()) == ["builds need the VPN up first",
                                                      "the staging database is called stage-db"]


def test_a_fork_reads_a_parents_store_given_by_its_folder_and_writes_nothing_there_even_to_repair_it(tmp_path, run_over_a_store):
    import hashlib

    import pytest

    from memfit_jupyter.errors import StoreError
    from memfit_jupyter.memory.store import open_store

    store, prior, saved = _saved(run_over_a_store)
    store.close()  # a saved run: its store is not open in this process
    (store.path / "index.usearch").write_bytes(b"not an index")  # damaged since

    def files():  # the store's own files (SQLite makes its -wal and -shm beside any reader)
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(store.path.iterdir())
                if p.is_file() and not p.name.endswith(("-wal", "-shm"))}

    before = files()
    with pytest.warns(UserWarning, match="rebuilding it from SQLite \\(in memory"):
        child = Agent.fork(saved, 1, workdir=tmp_path / "child", memory=store.path)
    child.run()
    base = child.memory.live.base
    assert base.read_only and prior in {e.id for e in child.memory.live.list()}
    assert base.search("where are the numbers kept?", k=3)[0].id == prior  # the index, rebuilt in memory
    with pytest.raises(StoreError, match="opened to read"):
        base.add("a write into the parent's store")
    base.close()
    assert files() == before
    with pytest.warns(UserWarning, match="rebuilding it from SQLite$"):
        assert not open_store(store.path).read_only  # opened to write, it is repaired as ever
    assert files() != before


#: Notes of a parent's store and of a child's (a fork's) for the lexical scores' test.
PARENT_NOTES = ["the deploy script lives in ops/deploy.sh", "the staging database is called stage-db",
                "numpy arrays are row-major by default", "pytest -x stops at the first failure",
                "the CI pipeline runs on every push to main", "a flaky network broke the nightly upload once",
                "the docs are built with sphinx", "the cache folder is ~/.cache/memfit"]
CHILD_NOTES = ["the nightly upload failed on a flaky network", "a flaky network dropped the upload twice",
               "retry the nightly upload after a network error"]


def lexical_by_content(store, query):
    found = store.candidates(store.embed_query(query), query)
    content = {e.id: e.content for e in found.entities}
    return {content[i]: s for i, s in found.lexical.items()}


def test_the_two_stores_lexical_finds_are_scored_on_both_stores_rows_together(tmp_path):
    """BM25 as one store holding the child's rows and the parent's visible ones scores them: each
    store alone scored on its own rows, where a word most of the child's few rows share weighs
    next to nothing (FTS5's IDF floor) however rare it is among the parent's."""
    base, top, one = (MemoryStore(tmp_path / n) for n in ("base", "top", "one"))
    hidden = [base.add(text) for text in PARENT_NOTES][5]  # the parent's flaky-network note: learnt later
    for text in CHILD_NOTES:
        top.add(text)
    for text in [t for t in PARENT_NOTES if t != PARENT_NOTES[5]] + CHILD_NOTES:
        one.add(text)
    overlay = Overlay(base, top, hidden=[hidden])
    for query in ("flaky network upload", "nightly upload", "deploy script", "stage-db numpy"):
        got, want = lexical_by_content(overlay, query), lexical_by_content(one, query)
        assert got.keys() == want.keys() and want, query
        for text, score in want.items():
            assert abs(got[text] - score) <= 1e-9 * max(1.0, score), (query, text, got[text], score)
    # The child's notes outrank the parent's on the words they share, as in the one store.
    ranked = [r.content for r in overlay.search("flaky network upload", k=3)]
    assert ranked == [r.content for r in one.search("flaky network upload", k=3)]


def test_a_store_url_is_recorded_and_shown_with_no_password_anywhere_in_it():
    from memfit_jupyter.memory.postgres import safe_url, without_password

    assert without_password("postgresql://ann:pw%40x@db.local:5432/mem?sslmode=require&password=pw2&sslpassword=k") \
        == "postgresql://ann@db.local:5432/mem?sslmode=require"
    assert without_password("postgresql://db.local/mem") == "postgresql://db.local/mem"
    assert without_password("postgres://ann@db.local/mem?PASSWORD=x") == "postgres://ann@db.local/mem"
    # and what messages show: the password in its place as ***, wherever it was
    assert safe_url("postgresql://ann:pw@db.local/mem?host=/run/pg&password=pw2") \
        == "postgresql://ann:***@db.local/mem?host=/run/pg&password=***"
