"""Durability: SIGKILL in the middle of writes, two processes writing at once."""

import os
import signal
import subprocess
import sys
import textwrap
import warnings

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
