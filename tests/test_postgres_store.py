"""The PostgreSQL + pgvector store on a real server (tests/pg_server.py): the store API, the
same dedup verdicts and rankings as the SQLite store, export/import between the two,
``%memfit_memory`` and an agent's run on it, and eight writer processes with planted
cross-process duplicates (on both backends)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pg_server import fresh_schema, postgres_url

from memfit_jupyter import Agent, MemoryStore
from memfit_jupyter.errors import StoreError
from memfit_jupyter.memory import open_store

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pg_url():
    with postgres_url() as url:
        yield url


@pytest.fixture
def pg(pg_url):
    schema = fresh_schema()
    store = MemoryStore(pg_url, schema=schema)
    yield store
    if not store._closed:
        store.drop()
        store.close()


NOTES = [
    ("pytest -x stops at the first failing test", ["pytest", "testing"], ["how do I stop pytest early?"]),
    ("polars scan_csv reads a large csv file lazily", ["polars", "csv"], []),
    ("restart the kernel after pip install so the new package imports", ["jupyter", "pip"], []),
    ("git rebase main, then fix the conflicts and continue", ["git"], ["how to update my branch?"]),
    ("usearch add raises on an existing key: remove it first", ["usearch"], []),
    ("the failing shell command needed quotes around the path", ["failures", "failures:shell"], []),
]


def fill(store) -> list[str | None]:
    return [store.add(c, tags=t, questions=q) for c, t, q in NOTES]


def test_store_api_on_postgres(pg, monkeypatch):
    assert type(pg).__name__ == "PostgresStore" and len(pg) == 0
    ids = fill(pg)
    assert all(ids) and len(pg) == len(NOTES)
    m = pg.get(ids[0])
    assert m.content == NOTES[0][0] and m.tags == ["pytest", "testing"]
    assert m.potential_questions == ["how do I stop pytest early?"]
    assert [e.id for e in pg.list(limit=2)] == [ids[-1], ids[-2]]  # newest first
    assert pg.tags()["failures"] == 1 and [e.id for e in pg.failures("shell")] == [ids[-1]]
    assert [e.id for e in pg.search_by_tags(["git"])] == [ids[3]]
    assert pg.search_by_semantics("stop pytest at the first failure", limit=1)[0][0].id == ids[0]
    assert pg.search_lexical("lazily csv", limit=1)[0][0].id == ids[1]
    found = pg.search("how do I stop pytest at the first failure", k=3)
    assert found[0].id == ids[0] and set(found[0].breakdown) >= {"r", "c", "t", "keyword_bonus", "final"}
    picked = pg.search("restart the kernel after pip install", k=5, bytes_limit=80)
    assert picked[0].id == ids[2] and sum(len(r.content.encode()) for r in picked) <= 80
    assert [r.id for r in pg.search("anything at all", tags=["git"])] == [ids[3]]
    # 2 of 3: the same content and tags again is a duplicate; the same tags alone is not
    assert pg.add(NOTES[0][0], tags=NOTES[0][1]) is None
    assert pg.add("a different note about tests", tags=NOTES[0][1]) is not None
    assert pg.delete(ids[1]) and not pg.delete(ids[1]) and pg.get(ids[1]) is None
    # secrets never enter the store
    monkeypatch.setenv("MEMFIT_TEST_TOKEN", "s3cr3t-value-abcdef123456")
    from memfit_jupyter.secrets import refresh_env_secrets

    refresh_env_secrets()
    sid = pg.add("the deploy used s3cr3t-value-abcdef123456 and password: hunter2hunter2", tags=["deploy"])
    stored = pg.get(sid).content
    assert "s3cr3t" not in stored and "hunter2" not in stored and "[REDACTED]" in stored
    info = pg.info()
    assert info["count"] == len(pg) and info["embedder"] == "hashing-384" and info["dims"] == 384


def test_embedder_check_reindex_and_bad_urls(pg_url):
    schema = fresh_schema()
    store = MemoryStore(pg_url, schema=schema)
    store.add("vectors of another size need a reindex", tags=["index"])
    with pytest.raises(StoreError, match="reindex"):
        MemoryStore(pg_url, schema=schema, embedder="hashing-64")
    assert store.reindex("hashing-64") == 1 and store.embedder.id == "hashing-64"
    reopened = MemoryStore(pg_url, schema=schema)
    assert reopened.embedder.id == "hashing-64"
    assert reopened.search("reindex size", k=1)[0].content.startswith("vectors of another size")
    reopened.close()
    store.drop()
    store.close()
    with pytest.raises(StoreError) as err:
        MemoryStore("postgresql://nobody:pw-that-must-not-show@127.0.0.1:1/none", schema="s")
    assert "pw-that-must-not-show" not in str(err.value) and len(str(err.value).splitlines()) == 1
    with pytest.raises(ValueError, match="schema"):
        MemoryStore(pg_url, schema="Robert'); DROP TABLE x;--")


def _corpus(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9))) for _ in range(800)]
    tags = [f"tag{i}" for i in range(30)]
    items = []
    for i in range(n):
        words = " ".join(rng.choice(vocab) for _ in range(rng.randint(6, 14)))
        items.append({"content": f"{words} {i}", "tags": rng.sample(tags, rng.randint(1, 3)),
                      "questions": [f"what about {rng.choice(vocab)}?"] if i % 3 == 0 else []})
    # planted near-duplicates: the same note reworded a little, with the same tags
    for i in range(0, n, 7):
        src = items[i]
        items.append({"content": src["content"] + " indeed", "tags": list(src["tags"]),
                      "questions": list(src["questions"])})
    return items


def test_a_store_indexed_by_an_older_text_analysis_is_reindexed_on_open(pg_url):
    from memfit_jupyter.memory.text import ANALYZER

    schema = fresh_schema()
    with MemoryStore(pg_url, schema=schema) as store:
        store.add("she loved the pottery class", tags=["hobby"])
        store.add("the build failed twice", tags=["ci"])
        # as an older analysis left it: other tokens in the index, another name in meta
        store._x(f"UPDATE {schema}.postings SET term = 'old_' || term")
        store._x(f"UPDATE {schema}.meta SET value = 'suffix-1' WHERE key = 'analyzer'")
        assert store.search_lexical("loving pottery", 5) == []
    with MemoryStore(pg_url, schema=schema) as again:
        assert [e.content for e, _ in again.search_lexical("loving pottery", 5)] == ["she loved the pottery class"]
        assert [e.content for e, _ in again.search_lexical("failing builds", 5)] == ["the build failed twice"]
        assert again._x(f"SELECT value FROM {schema}.meta WHERE key = 'analyzer'").fetchone() == (ANALYZER,)
        again.drop()


def test_a_schema_1_store_moves_its_full_text_to_postings_on_open(pg_url):
    """Schema 1 kept a tsvector column; opening such a store builds the postings and drops it."""
    schema = fresh_schema()
    with MemoryStore(pg_url, schema=schema) as store:
        store.add("scan_csv reads the file lazily", tags=["polars"])
        store.add("the build failed twice", tags=["ci"], questions=["why did ci fail?"])
        store._x(f"ALTER TABLE {schema}.memories ADD COLUMN fts tsvector")
        store._x(f"DELETE FROM {schema}.postings")
        store._x(f"UPDATE {schema}.text_stats SET rows = 0, tokens = 0")
        store._x(f"UPDATE {schema}.meta SET value = '1' WHERE key = 'schema'")
    with MemoryStore(pg_url, schema=schema) as again:
        assert [e.content for e, _ in again.search_lexical("failing builds", 5)] == ["the build failed twice"]
        assert [e.content for e, _ in again.search_lexical("scan_csv", 5)] == ["scan_csv reads the file lazily"]
        assert [e.content for e, _ in again.search_lexical("csv", 5)] == ["scan_csv reads the file lazily"]
        assert again._x(f"SELECT rows FROM {schema}.text_stats").fetchone() == (2,)
        assert again._x("SELECT count(*) FROM information_schema.columns WHERE table_schema = %s "
                        "AND column_name = 'fts'", (schema,)).fetchone() == (0,)
        assert again._x(f"SELECT value FROM {schema}.meta WHERE key = 'schema'").fetchone() == ("2",)
        again.drop()


def test_same_dedup_verdicts_and_rankings_as_sqlite(pg, tmp_path):
    items = _corpus(300, seed=3)
    lite = MemoryStore(tmp_path / "lite")
    try:
        ids_lite = lite.add_many([dict(it) for it in items[:150]]) + [lite.add(**it) for it in items[150:]]
        ids_pg = pg.add_many([dict(it) for it in items[:150]]) + [pg.add(**it) for it in items[150:]]
        assert [i is None for i in ids_pg] == [i is None for i in ids_lite]
        assert 0 < sum(i is None for i in ids_pg) < len(items) and len(pg) == len(lite)
        content_of = {i: items[n]["content"] for n, i in enumerate(ids_pg) if i}
        content_lite = {i: items[n]["content"] for n, i in enumerate(ids_lite) if i}
        rng = random.Random(5)
        for _ in range(20):
            q = " ".join(rng.choice(items)["content"].split()[:4])
            for mode in ("semantic", "weighted"):
                a = [content_of[r.id] for r in pg.search(q, k=5, ranking=mode)]
                b = [content_lite[r.id] for r in lite.search(q, k=5, ranking=mode)]
                assert a == b, (q, mode)
            # full text: the BM25 of SQLite's FTS5, so the same scores, and the same hybrid ranking
            lex_pg = [(round(v, 9), content_of[e.id]) for e, v in pg.search_lexical(q, 30)]
            lex_lite = [(round(v, 9), content_lite[e.id]) for e, v in lite.search_lexical(q, 30)]
            assert lex_pg and sorted(lex_pg) == sorted(lex_lite), q
            a = [content_of[r.id] for r in pg.search(q, k=5)]
            b = [content_lite[r.id] for r in lite.search(q, k=5)]
            assert a == b, (q, "hybrid")
        # the statistics BM25 reads follow deletes as they follow writes
        for i in [i for i in ids_pg if i][:40]:
            assert pg.delete(i)
        rows, tokens = pg._x(f"SELECT rows, tokens FROM {pg.schema}.text_stats").fetchone()
        assert rows == len(pg) and tokens == pg._x(
            f"SELECT coalesce(sum(dl), 0) FROM (SELECT DISTINCT key, dl FROM {pg.schema}.postings) d").fetchone()[0]
    finally:
        lite.close()


def test_export_import_between_backends(pg, tmp_path):
    lite = MemoryStore(tmp_path / "lite")
    try:
        fill(lite)
        assert lite.export(tmp_path / "lite.jsonl") == len(NOTES)
        assert pg.import_(tmp_path / "lite.jsonl") == {"added": len(NOTES), "duplicates": 0}
        assert pg.import_(tmp_path / "lite.jsonl")["duplicates"] == len(NOTES)  # again: all repeats
        assert {m.to_dict()["content"] for m in pg.list()} == {c for c, _, _ in NOTES}
        assert pg.get(lite.list()[0].id).to_dict() == lite.list()[0].to_dict()  # ids and scores kept
        pg.add("only in the team store", tags=["team"])
        assert pg.export(tmp_path / "pg.jsonl") == len(NOTES) + 1
        back = MemoryStore(tmp_path / "back")
        assert back.import_(tmp_path / "pg.jsonl")["added"] == len(NOTES) + 1
        assert back.search("team store", k=1)[0].content == "only in the team store"
        back.close()
    finally:
        lite.close()


def test_an_agent_and_the_magic_use_the_postgres_store(pg_url, tmp_path):
    schema = fresh_schema()
    url = f"{pg_url}"
    store = open_store(url, schema=schema)
    assert open_store(url) is store  # one per URL and process, as for a directory
    result = Agent(model="memfit/memory-lesson", memory=store, workdir=tmp_path).start(
        "Sum the numbers in data.txt").run()
    assert result.status in ("done", "failed") and len(store) >= 1  # the run's lessons are in PostgreSQL
    from types import SimpleNamespace

    from memfit_jupyter.jupyter.memory_magic import memfit_memory

    magics = SimpleNamespace(shell=None, memory_path=url)
    memfit_memory(magics, 'add "team lesson: pin the litellm range" --tags team')
    df = memfit_memory(magics, "search pin litellm")
    assert df["content"][0] == "team lesson: pin the litellm range"
    assert memfit_memory(magics, "list --tag team").height == 1
    store.drop()
    store.close()


def test_memory_magic_in_a_real_kernel_on_postgres(pg_url, tmp_path):
    """``%memfit_memory`` unchanged on PostgreSQL, in a real kernel (nbclient), on a database of
    its own so the store is the URL's default one (schema ``memfit``), as a team would have it."""
    import nbformat
    import psycopg
    from nbclient import NotebookClient

    db = fresh_schema()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {db}")
    from urllib.parse import urlsplit, urlunsplit

    url = urlunsplit(urlsplit(pg_url)._replace(path=f"/{db}"))
    try:
        (tmp_path / "lessons.jsonl").write_text(json.dumps(
            {"content": "an imported lesson: quote paths with spaces", "tags": ["shell"]}) + "\n")
        cells = [
            "%load_ext memfit_jupyter",
            f"%config MemfitMagics.memory_path = {url!r}",
            '%memfit_memory add "team lesson: pin the litellm range" --tags team --question "which litellm?"',
            "%memfit_memory import lessons.jsonl",
            "df = %memfit_memory search pin litellm\nprint(df['content'][0])",
            "team = %memfit_memory list --tag team\nprint(team['content'].to_list())",
            "%memfit_memory",
            "%memfit_memory show no-such-id",
            "%memfit_memory export team.jsonl",
        ]
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
        NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
        text = ["".join(o.get("text", "") + o.get("evalue", "") + o.get("data", {}).get("text/plain", "")
                        for o in c.outputs) for c in nb.cells]
        for i in (2, 3, 4, 5, 6, 8):  # (a UsageError is a line on stderr, not an error output)
            assert "Error" not in text[i] and not any(o.output_type == "error" for o in nb.cells[i].outputs), (i, text[i])
        assert "imported 1 memories" in text[3]
        assert nb.cells[4].outputs[-1].text.strip() == "team lesson: pin the litellm range", text[4]
        assert "team lesson" in text[5] and "imported lesson" not in text[5]
        assert "2 memories" in text[6] and "postgresql://" in text[6]
        assert len(text[7].strip().splitlines()) == 1 and "no-such-id" in text[7]  # one clear line
        assert "exported 2 memories" in text[8]
        # What the kernel wrote is in the server, for any other process that opens the URL.
        other = MemoryStore(url)
        try:
            assert sorted(m.content for m in other.list()) == [
                "an imported lesson: quote paths with spaces", "team lesson: pin the litellm range"]
            assert other.get(other.list(tag="team")[0].id).potential_questions == ["which litellm?"]
        finally:
            other.close()
        assert len((tmp_path / "team.jsonl").read_text().splitlines()) == 2
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


WRITER = textwrap.dedent("""
    import json, os, sys, time
    from memfit_jupyter import MemoryStore

    target, schema, items_path, go = sys.argv[1:5]
    items = json.load(open(items_path))
    kwargs = {"schema": schema} if target.startswith("postgresql://") else {}
    store = MemoryStore(target, **kwargs)
    while not os.path.exists(go):
        time.sleep(0.01)
    ids = []
    for start in range(0, len(items), 20):
        ids += store.add_many(items[start:start + 20])
    store.close()
    print(json.dumps(ids))
""")


def _writer_items(seed: int = 11) -> tuple[list[list[dict]], list[dict]]:
    """Eight writers' 1,000 memories each; 100 planted ones, each written by three writers."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(5, 9)))
             for _ in range(3000)]

    def note(tag: str) -> dict:
        return {"content": " ".join(rng.choice(vocab) for _ in range(12)), "tags": [tag, f"t{rng.randint(0, 40)}"]}

    planted = [note("planted") for _ in range(100)]
    per_writer: list[list[dict]] = [[] for _ in range(8)]
    for j, p in enumerate(planted):
        for w in {j % 8, (j + 3) % 8, (j + 5) % 8}:
            per_writer[w].append(p)
    for w in range(8):
        per_writer[w] += [note(f"w{w}") for _ in range(1000 - len(per_writer[w]))]
        rng.shuffle(per_writer[w])
    return per_writer, planted


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_eight_writers_lose_nothing_and_store_each_planted_duplicate_once(backend, tmp_path, request):
    per_writer, planted = _writer_items()
    if backend == "postgres":
        target, schema = request.getfixturevalue("pg_url"), fresh_schema()
    else:
        target, schema = str(tmp_path / "shared"), ""
    MemoryStore(target, **({"schema": schema} if schema else {})).close()  # created once, before the race
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = []
    for w, items in enumerate(per_writer):
        path = tmp_path / f"items{w}.json"
        path.write_text(json.dumps(items))
        procs.append(subprocess.Popen([sys.executable, str(script), target, schema, str(path), str(go)],
                                      stdout=subprocess.PIPE, text=True, env=env))
    time.sleep(1.0)
    go.write_text("")
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))
    store = MemoryStore(target, **({"schema": schema} if schema else {}))
    try:
        stored = {m.content: m for m in store.list()}
        unique = {it["content"] for items in per_writer for it in items}
        assert len(unique) == 8 * 1000 - 200  # 100 planted notes, each written three times
        assert set(stored) == unique and len(store) == len(unique)  # none lost, none twice
        assert sum(1 for m in store.list() if "planted" in m.tags) == len(planted)
        kept = [i for ids in results for i in ids if i]
        assert len(kept) == len(unique) and len(set(kept)) == len(kept)
        for items, ids in zip(per_writer, results, strict=True):  # each writer's own notes all kept
            for it, i in zip(items, ids, strict=True):
                if "planted" not in it["tags"]:
                    assert i is not None
    finally:
        if schema:
            store.drop()
        store.close()


def test_an_overlay_over_postgres_stores_nothing_its_base_holds_unless_hidden(pg, tmp_path):
    """A fork's overlay of a PostgreSQL store reads both as one store and does not write again
    what the store holds (``PostgresStore.repeats``, as ``MemoryStore.repeats``)."""
    from memfit_jupyter.memory.overlay import Overlay
    from memfit_jupyter.memory.store import MemoryStore as SqliteStore

    ids = fill(pg)
    top = SqliteStore(tmp_path / "top", embedder=pg.embedder)
    overlay = Overlay(pg, top, hidden=[ids[3]])
    again = overlay.add_many([{"content": c, "tags": t, "questions": q} for c, t, q in NOTES])
    assert [i is None for i in again] == [True, True, True, False, True, True]  # the hidden one is new here
    assert [e.content for e in top.list()] == [NOTES[3][0]] and len(overlay) == len(NOTES)
    assert pg.repeats([{"content": NOTES[0][0], "tags": NOTES[0][1], "questions": NOTES[0][2]}]) == [True]


def test_an_overlay_over_postgres_scores_its_lexical_finds_on_both_stores_rows(pg, tmp_path):
    """A fork's overlay of a PostgreSQL store under a SQLite one: BM25 on the statistics of the
    two together (each store's own and the hidden rows' out), as one store of the rows scores it."""
    from memfit_jupyter.memory.overlay import Overlay
    from memfit_jupyter.memory.store import MemoryStore as SqliteStore

    ids = fill(pg)
    mine = [("the shell command failed twice on a path with spaces", ["failures"], []),
            ("quote the path in the shell command", ["shell"], ["why did the shell command fail?"])]
    top = SqliteStore(tmp_path / "top", embedder=pg.embedder)
    one = SqliteStore(tmp_path / "one", embedder=pg.embedder)
    for c, t, q in mine:
        top.add(c, tags=t, questions=q)
    for c, t, q in [n for i, n in enumerate(NOTES) if i != 5] + mine:
        one.add(c, tags=t, questions=q)
    overlay = Overlay(pg, top, hidden=[ids[5]])
    for query in ("failing shell command path", "pytest failing test", "csv file"):
        found = [overlay.candidates(overlay.embed_query(query), query), one.candidates(one.embed_query(query), query)]
        got, want = ({next(e.content for e in c.entities if e.id == i): s for i, s in c.lexical.items()} for c in found)
        assert got.keys() == want.keys() and want, query
        for text, score in want.items():
            assert abs(got[text] - score) <= 1e-9 * max(1.0, score), (query, text, got[text], score)


def test_a_fork_of_a_saved_run_reads_its_postgres_store_and_the_trace_holds_no_password(pg_url, tmp_path):
    """The trace names the server's store with no password, and a fork of the saved trace in a
    process that has the store open reads it, writing nothing there."""
    import json
    from urllib.parse import urlsplit, urlunsplit

    from memfit_jupyter.memory.overlay import Overlay

    parts = urlsplit(pg_url)
    secret = "s3cret-pw-9f2c"  # the test server trusts local logins: the password is carried, not checked
    user, _, host = parts.netloc.rpartition("@")
    login = f"{(user or 'postgres').split(':', 1)[0]}:{secret}@{host}"
    url = urlunsplit(parts._replace(netloc=login, query="&".join(q for q in (parts.query, "sslmode=disable",
                                                                               "password=" + secret) if q)))
    schema = fresh_schema()
    store = open_store(url, schema=schema)
    prior = store.add("the numbers of this project are kept in numbers.txt", tags=["numbers"])
    (tmp_path / "parent").mkdir()
    run = Agent(model="memfit/memory-lesson", memory=store, workdir=tmp_path / "parent").start(
        "Sum the numbers in data.txt")
    run.run()
    saved = json.loads(json.dumps(run.trace()))
    assert secret not in json.dumps(saved)
    where = saved["memory_store"]
    assert where["schema"] == schema and "sslmode=disable" in where["url"] and secret not in where["url"]
    before = sorted((e.id, e.content) for e in store.list())
    child = Agent.fork(saved, 1, workdir=tmp_path / "child")
    assert child.parent["memory"] == "overlay" and isinstance(child.memory.live, Overlay)
    assert [e.id for e in child.memory.live.list()] == [prior]  # what the run learnt is hidden at step 1
    child.run()
    assert sorted((e.id, e.content) for e in store.list()) == before
    store.drop()
    store.close()
