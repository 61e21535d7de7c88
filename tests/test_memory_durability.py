"""Durability: SIGKILL in the middle of writes, two processes writing at once."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

from memfit_jupyter.memory import MemoryStore

WRITER = textwrap.dedent("""
    import sys, random
    from memfit_jupyter.memory import MemoryStore
    path, name, count, flush_every = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    words = [f"w{i}" for i in range(5000)]
    rnd = random.Random(name)
    store = MemoryStore(path, dedup=False)
    print("ready", flush=True)
    for i in range(count):
        text = f"{name} {i} " + " ".join(rnd.sample(words, 12))
        mid = store.add(text, tags=[name])
        print(mid, flush=True)          # printed only once add has returned
        if flush_every and i % flush_every == 0:
            store.flush()               # index writes in flight when the kill lands
    store.close()
    print("done", flush=True)
""")


def writer(tmp_path, path, name, count, flush_every=0):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen([sys.executable, str(script), str(path), name, str(count), str(flush_every)],
                            stdout=subprocess.PIPE, text=True, env=env)


def test_sigkill_mid_writes_loses_no_returned_add(tmp_path):
    path = tmp_path / "store"
    proc = writer(tmp_path, path, "killed", 100_000, flush_every=3)
    assert proc.stdout.readline().strip() == "ready"
    returned = [proc.stdout.readline().strip() for _ in range(60)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the index may be rebuilt: that is allowed
        store = MemoryStore(path)
    try:
        for mid in returned:
            assert store.get(mid) is not None, mid
        assert len(store) >= len(returned)
        assert store.info()["indexed"] == len(store)
        probe = store.get(returned[-1])
        assert store.search(probe.content, k=1)[0].id == probe.id
    finally:
        store.close()


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "store"
    MemoryStore(path).close()
    procs = [writer(tmp_path, path, name, 40) for name in ("alpha", "beta")]
    outputs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    ids = [line for out in outputs for line in out if line not in ("ready", "done")]
    assert len(ids) == 80
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # each writer saved its index: opening needs no rebuild
        store = MemoryStore(path)
    try:
        assert len(store) == 80 and store.info()["indexed"] == 80
        assert all(store.get(i) is not None for i in ids)
        assert len(store.list(tag="alpha")) == 40 and len(store.list(tag="beta")) == 40
        for mid in ids[::10]:
            m = store.get(mid)
            assert store.search_by_semantics(m.content, 1)[0][0].id == mid
    finally:
        store.close()


BATCH_WRITER = textwrap.dedent("""
    import sys, time
    from memfit_jupyter.memory import MemoryStore
    store = MemoryStore(sys.argv[1], dedup=False)
    for b in range(5):  # 2,500 memories; the index is saved once, at 2,000
        store.add_many([{"content": f"batch {b} memory {i} about topic {i % 37}", "tags": [f"t{i % 5}"]}
                        for i in range(500)])
    print("ready", len(store), flush=True)
    time.sleep(600)  # killed here, never closed
""")


def test_deleting_the_wal_after_a_sigkill_loses_no_finished_batch(tmp_path):
    path = tmp_path / "store"
    script = tmp_path / "batches.py"
    script.write_text(BATCH_WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().split() == ["ready", "2500"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    for name in ("memory.sqlite3-wal", "memory.sqlite3-shm"):  # what a person cleaning up may do
        (path / name).unlink(missing_ok=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = MemoryStore(path)
    try:
        assert [str(w.message) for w in caught] == []
        assert len(store) == 2500 and store.info()["indexed"] == 2500
        assert store.search("batch 4 memory 499 about topic 18", k=1)[0].content == \
            "batch 4 memory 499 about topic 18"
    finally:
        store.close()


def test_a_rebuild_into_fewer_vectors_keeps_the_old_index_and_says_so(tmp_path, caplog):
    path = tmp_path / "store"
    with MemoryStore(path, dedup=False) as store:
        store.add_many([{"content": f"early memory {i}"} for i in range(1000)])
    older = (path / "memory.sqlite3").read_bytes()  # closed: everything is in the database file
    with MemoryStore(path, dedup=False) as store:
        store.add_many([{"content": f"later memory {i}"} for i in range(1500)])
    index_bytes = (path / "index.usearch").read_bytes()
    (path / "memory.sqlite3").write_bytes(older)  # an older copy of the database comes back
    with caplog.at_level("ERROR", logger="memfit_jupyter.memory"), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = MemoryStore(path)
    try:
        kept = sorted(path.glob("index.usearch.kept-*"))
        assert len(kept) == 1 and kept[0].read_bytes() == index_bytes
        assert len(list(path.glob("index.json.kept-*"))) == 1
        messages = [str(w.message) for w in caught]
        assert len(messages) == 1 and "LOST MEMORIES" in messages[0] and str(kept[0]) in messages[0]
        assert "holds 2500 vectors but the database has only 1000 memories" in messages[0]
        assert any(str(kept[0]) in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
        assert len(store) == 1000 and store.info()["indexed"] == 1000
    finally:
        store.close()


OPENER = textwrap.dedent("""
    import sys, warnings
    from memfit_jupyter.memory import MemoryStore
    print("ready", flush=True)
    sys.stdin.readline()  # go
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = MemoryStore(sys.argv[1])
        store.add_many([{"content": f"{sys.argv[2]} memory {i}"} for i in range(5)])
        store.close()
    print("warnings", [str(w.message) for w in caught], flush=True)
""")


@pytest.mark.slow  # six rounds of two new interpreters racing
def test_two_processes_opening_a_new_store_at_once_print_no_warning(tmp_path):
    """The second opener used to find no index file yet, then (its first use of usearch taking a
    while) a store the first had already added to: "index missing: rebuilding".  Several rounds,
    the second a little behind the first each time: before the fix most rounds warned."""
    script = tmp_path / "opener.py"
    script.write_text(OPENER)
    for round, behind in enumerate((0.05, 0.1, 0.15, 0.2, 0.1, 0.2)):
        path = tmp_path / f"store{round}"
        procs = [subprocess.Popen([sys.executable, str(script), str(path), name], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True) for name in ("first", "second")]
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for p, wait in zip(procs, (behind, 0), strict=True):
            p.stdin.write("go\n")
            p.stdin.flush()
            time.sleep(wait)
        outs = [p.communicate(timeout=120)[0] for p in procs]
        assert all(o.strip().endswith("warnings []") for o in outs), (round, outs)
        with MemoryStore(path) as store:
            assert len(store) == 10 and store.info()["indexed"] == 10
