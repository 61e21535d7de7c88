"""The memory store: adding, searching, deleting, export/import, secrets, embedders, index files."""

import contextlib
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memfit_jupyter.errors import StoreError
from memfit_jupyter.memory import MemoryStore, StoreWarning
from memfit_jupyter.memory.embedders import HashingEmbedder, get_embedder

FACTS = [
    ("pytest -x stops at the first failing test", ["pytest"], ["how do I stop pytest at the first failure?"]),
    ("polars scan_csv reads large csv files lazily", ["polars", "csv"], ["how to read a big csv?"]),
    ("the sqlite database is locked when two writers collide; set busy_timeout", ["sqlite"], []),
    ("restart the jupyter kernel after pip install", ["jupyter"], ["why does import fail after install?"]),
    ("matplotlib figures need plt.show() outside notebooks", ["matplotlib"], []),
]


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "mem")
    for content, tags, qs in FACTS:
        assert s.add(content, tags=tags, questions=qs)
    yield s
    s.close()


def test_add_get_delete_len(store):
    assert len(store) == 5
    first = store.list(limit=1)[0]
    assert first.content.startswith("matplotlib")  # newest first
    got = store.get(first.id)
    assert got.tags == ["matplotlib"] and got.r_score == 0.5
    assert store.delete(first.id) is True
    assert store.delete(first.id) is False
    assert store.get(first.id) is None and len(store) == 4
    assert all(m.id != first.id for m in store.search("matplotlib figures plt.show", k=5))


def test_search_ranks_the_relevant_memory_first_with_breakdown(store):
    results = store.search("how can I read a huge csv file", k=3)
    assert results[0].content.startswith("polars scan_csv")
    top = results[0]
    assert 0 < top.score <= 1.0 and top.score == top.breakdown["final"]
    for key in ("r", "c", "t", "a", "p", "o", "e", "keyword_bonus", "semantic", "final"):
        assert key in top.breakdown
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_search_byte_limit_and_tags(store):
    results = store.search("pytest sqlite polars", k=10, bytes_limit=60)
    assert results.content_bytes <= 60 and len(results) >= 1
    only = store.search("file", tags=["sqlite"])
    assert [m.tags for m in only] == [["sqlite"]]
    assert store.search_by_tags(["csv", "polars"], match_all=True)[0].tags == ["polars", "csv"]
    with pytest.raises(ValueError, match="empty"):
        store.search("  ")


def test_ranking_modes_are_selectable(tmp_path):
    with MemoryStore(tmp_path / "m", ranking="weighted") as s:
        s.add("alpha beta", scores={"r": 1.0})
        s.add("gamma delta", scores={"r": 0.0})
        res = s.search("gamma")
        # the weighted formula: core .25 + nothing beats core .0 + bonus .23 for the matching one
        assert res[0].content == "alpha beta"
        assert s.search("gamma", ranking="hybrid")[0].content == "gamma delta"


def test_scores_are_validated(tmp_path):
    with MemoryStore(tmp_path / "m") as s:
        with pytest.raises(ValueError, match="unknown score"):
            s.add("x", scores={"z": 1})
        with pytest.raises(ValueError, match="non-empty"):
            s.add("   ")
        for bad in ([0.9] * 7, "high", 0.5):
            with pytest.raises(ValueError, match="scores must be a dict of c, o, r, e, p, a, t, got"):
                s.add("x", scores=bad)
        assert len(s) == 0
        mid = s.add("y", scores={"r_score": 2.0, "e": -1})
        assert s.get(mid).r_score == 1.0 and s.get(mid).e_score == 0.0


def test_bad_items_raise_one_clear_value_error(tmp_path):
    with MemoryStore(tmp_path / "m") as s:
        with pytest.raises(ValueError, match="tags must be a list of strings, got 5"):
            s.add("x", tags=5)
        with pytest.raises(ValueError, match="questions must be a list of strings, got 3"):
            s.add_many([{"content": "x", "questions": 3}])
        with pytest.raises(ValueError, match="a memory is a dict or a MemoryEntity, got int"):
            s.add_many([5])
        bad = tmp_path / "tags.jsonl"  # what %memfit_memory import shows as one line
        bad.write_text('{"content": "ok"}\n{"content": "tagged", "tags": 7}\n')
        with pytest.raises(ValueError, match="tags must be a list of strings, got 7"):
            s.import_(bad)
        assert len(s) == 0  # nothing of the batch went in
        assert s.get(s.add("y", tags=None, questions=())).tags == []


def test_secrets_are_redacted_before_storing(tmp_path):
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    with MemoryStore(tmp_path / "m") as s:
        mid = s.add(f"the deploy failed with key {key}", tags=[f"token={key}"], questions=[f"is {key} valid?"])
        e = s.get(mid)
        assert key not in e.content and "[REDACTED]" in e.content
        assert key not in json.dumps(e.to_dict())
    raw = (tmp_path / "m" / "memory.sqlite3").read_bytes()
    assert key.encode() not in raw


def test_an_export_to_a_folder_is_refused_and_leaves_nothing(store, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(out)
    for where in (out, ".", "sub/.."):
        (out / "sub").mkdir(exist_ok=True)
        with pytest.raises(IsADirectoryError, match="it is a folder; give a file name"):
            store.export(where)
    assert sorted(p.name for p in out.iterdir()) == ["sub"] and not list((out / "sub").iterdir())
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_export_import_round_trip(store, tmp_path):
    path = tmp_path / "export.jsonl"
    assert store.export(path) == 5
    with MemoryStore(tmp_path / "other") as other:
        assert other.import_(path) == {"added": 5, "duplicates": 0}
        assert sorted(m.content for m in other.list()) == sorted(m.content for m in store.list())
        assert {m.id for m in other.list()} == {m.id for m in store.list()}
        assert other.import_(path) == {"added": 0, "duplicates": 5}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "ok"}\nnot json\n')
    with MemoryStore(tmp_path / "third") as third, pytest.raises(ValueError, match="bad.jsonl:2"):
        third.import_(bad)


def test_other_embedder_gives_clear_error_and_reindex_fixes(store, tmp_path):
    path = store.path
    store.close()
    with pytest.raises(StoreError, match="reindex"):
        MemoryStore(path, embedder="hashing-256")
    with MemoryStore(path) as s:  # opens with the embedder it records
        assert s.embedder.id == "hashing-384"
        assert s.reindex("hashing-256") == 5
    with MemoryStore(path, embedder="hashing-256") as s:
        assert s.info()["dims"] == 256
        assert s.search("big csv file")[0].content.startswith("polars")
    with pytest.raises(StoreError, match="unknown embedder"):
        get_embedder("word2vec")


def test_truncated_index_is_rebuilt_with_a_warning(store):
    path = store.path
    store.close()
    index = path / "index.usearch"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    with pytest.warns(StoreWarning, match="rebuilding"):
        s = MemoryStore(path)
    assert s.info()["indexed"] == 5
    assert s.search("stop pytest at first failure")[0].content.startswith("pytest -x")
    s.close()
    with warnings_as_errors():
        MemoryStore(path).close()  # the rebuilt index was saved: no warning now


def test_missing_or_stale_index_is_rebuilt(store):
    path = store.path
    store.close()
    meta = json.loads((path / "index.json").read_text())
    (path / "index.json").write_text(json.dumps({**meta, "hw_key": 999}))
    with pytest.warns(StoreWarning, match="stale"):
        MemoryStore(path).close()
    (path / "index.usearch").unlink()
    with pytest.warns(StoreWarning, match="missing"):
        s = MemoryStore(path)
    assert len(s) == 5 and s.info()["indexed"] == 5
    s.close()


def test_two_store_objects_see_each_others_writes(tmp_path):
    a = MemoryStore(tmp_path / "m")
    b = MemoryStore(tmp_path / "m")
    mid = a.add("gradient clipping stops exploding losses", tags=["training"])
    assert b.search("exploding loss")[0].id == mid
    assert b.delete(mid)
    assert a.search("exploding loss") == []
    a.close()
    b.close()


def test_store_path_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreError, match="is a file"):
        MemoryStore(f)


def test_closed_store_says_so(tmp_path):
    s = MemoryStore(tmp_path / "m")
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.search("x")


def test_hashing_embedder_is_deterministic_and_unit():
    e = HashingEmbedder(64)
    v = e.embed(["Failed to open file", "failing to open files", ""])
    assert v.shape == (3, 64)
    assert abs(float((v[0] ** 2).sum()) - 1) < 1e-5 and float(abs(v[2]).sum()) == 0.0
    assert float(v[0] @ v[1]) > 0.5
    assert (HashingEmbedder(64).embed(["Failed to open file"]) == v[:1]).all()


def test_importing_memory_does_not_import_usearch():
    code = ("import sys, memfit_jupyter.memory, memfit_jupyter; "
            "assert 'usearch' not in sys.modules, 'usearch imported'; "
            "assert 'litellm' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


class warnings_as_errors:
    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings()
        self._cm.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)


def test_exact_scan_of_a_small_store_matches_the_graph_and_follows_changes(tmp_path):
    exact = MemoryStore(tmp_path / "exact")  # 5 memories: below exact_below, a matrix product
    graph = MemoryStore(tmp_path / "graph", exact_below=0)  # always the HNSW graph
    try:
        for s in (exact, graph):
            for content, tags, qs in FACTS:
                s.add(content, tags=tags, questions=qs)
        for content, _, _ in FACTS:
            a = [(e.content, round(sim, 5)) for e, sim in exact.search_by_semantics(content, 3)]
            b = [(e.content, round(sim, 5)) for e, sim in graph.search_by_semantics(content, 3)]
            assert a == b and a[0][0] == content
        new = exact.add("numpy argpartition finds the top k without a full sort", tags=["numpy"])
        assert exact.search_by_semantics("numpy argpartition top k", 1)[0][0].id == new
        exact.delete(new)
        assert all(e.id != new for e, _ in exact.search_by_semantics("numpy argpartition top k", 5))
        # another store object's write is seen too
        other = MemoryStore(tmp_path / "exact")
        late = other.add("git bisect finds the commit that broke a test", tags=["git"])
        other.close()
        assert exact.search_by_semantics("git bisect broke test", 1)[0][0].id == late
    finally:
        exact.close()
        graph.close()


def test_every_memory_the_graph_holds_is_found_by_its_own_vector(tmp_path):
    # Added in batches as runs add them; a memory the graph cannot reach is lost to every search
    # (usearch 2.26 adding on several threads left about 1 in 1,000 so; 64 dimensions: a store's
    # graph like any other, and quick to fill with enough memories to show it).
    import numpy as np

    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((20000, 64)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    with MemoryStore(tmp_path / "m", embedder=HashingEmbedder(dim=64), exact_below=0, dedup=False) as store:
        ids: list = []
        for s in range(0, len(vecs), 40):
            ids += store.add_many([{"content": f"memory {i}"} for i in range(s, s + 40)], vectors=vecs[s : s + 40])
        assert None not in ids
        index = store._vectors.index
        index.expansion_search = 200  # a wide beam: what is missed then is not reachable at all
        found = np.asarray(index.search(vecs, 1).keys).reshape(-1).tolist()
        held = store._db.entities(found)
        missed = [i for i, key in enumerate(found) if key not in held or held[key].id != ids[i]]
        assert missed == [], f"{len(missed)} of {len(vecs)} memories are not found by their own vector"


def test_failed_batch_leaves_neither_rows_nor_index_entries(tmp_path):
    with MemoryStore(tmp_path / "m") as store:
        store.add("a memory that was there before", tags=["old"])
        # large enough that the graph is built while SQLite writes; the repeated id fails the insert
        items = [{"id": f"m{i}", "content": f"distinct fact number {i} about topic {i * 37 % 101}"}
                 for i in range(100)]
        items.append({"id": "m5", "content": "another memory that reuses an id"})
        with pytest.raises(StoreError, match="cannot add"):
            store.add_many(items)
        assert len(store) == 1 and store.info()["indexed"] == 1
        assert store.get("m5") is None
        assert [e.content for e, _ in store.search_by_semantics("distinct fact number 7", 3)] == [
            "a memory that was there before"]
        ids = store.add_many(items[:100])  # the same batch without the clash goes in whole
        assert all(ids) and len(store) == 101 and store.info()["indexed"] == 101


@given(st.lists(st.text()))
def test_stored_lists_read_back_exactly(values):
    # tags and questions are stored as JSON and read back on every search by a faster path
    from memfit_jupyter.memory.db import json_list, list_of

    assert list_of(json_list(values)) == values


def _recorded_count(path):
    import sqlite3

    with contextlib.closing(sqlite3.connect(path / "memory.sqlite3")) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'count'").fetchone()
    return None if row is None else int(row[0])


def _set_recorded_count(path, value):
    import sqlite3

    with contextlib.closing(sqlite3.connect(path / "memory.sqlite3")) as db, db:
        if value is None:
            db.execute("DELETE FROM meta WHERE key = 'count'")
        else:
            db.execute("UPDATE meta SET value = ? WHERE key = 'count'", (str(value),))


def test_recorded_count_follows_adds_duplicates_and_deletes(store):
    assert _recorded_count(store.path) == len(store) == 5
    assert store.add(*FACTS[0][:2], questions=FACTS[0][2]) is None  # a duplicate adds nothing
    ids = store.add_many([{"content": f"note {i} on subject {i}"} for i in range(3)])
    assert store.delete(ids[1]) and not store.delete(ids[1])
    assert _recorded_count(store.path) == len(store) == 7


@pytest.mark.parametrize("recorded", [None, 999])
def test_store_without_or_with_a_wrong_recorded_count_opens_without_rebuilding(store, recorded):
    # a store from before the count was kept, or one where it drifted: the saved index is still
    # used (it agrees with the rows) and the count is recorded again
    path = store.path
    store.close()
    _set_recorded_count(path, recorded)
    with warnings_as_errors():
        s = MemoryStore(path)
    assert s.info()["indexed"] == len(s) == 5 == _recorded_count(path)
    s.close()


def test_a_store_indexed_by_an_older_text_analysis_is_reindexed_on_open(tmp_path):
    import sqlite3

    from memfit_jupyter.memory.db import DB_NAME
    from memfit_jupyter.memory.text import ANALYZER

    with MemoryStore(tmp_path / "m") as store:
        store.add("she loved the pottery class", tags=["hobby"])
        store.add("the build failed twice", tags=["ci"])
    conn = sqlite3.connect(tmp_path / "m" / DB_NAME)
    with conn:  # as an older analysis left it: other tokens in the index, another name in meta
        conn.execute("UPDATE memories_fts SET content = 'lov potteri'")
        conn.execute("UPDATE meta SET value = 'suffix-1' WHERE key = 'analyzer'")
    conn.close()
    with MemoryStore(tmp_path / "m") as again:
        found = [e.content for e, _ in again.search_lexical("loving pottery", 5)]
        assert found == ["she loved the pottery class"]
        assert [e.content for e, _ in again.search_lexical("failing builds", 5)] == ["the build failed twice"]
    conn = sqlite3.connect(tmp_path / "m" / DB_NAME)
    assert conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone() == (ANALYZER,)
    conn.close()
