"""The working directory, step by step: a fork at each step sees the parent's files as they were
at that step (binary and deleted files included), the parent's folder is never written, and a
limit that was hit is named in the trace and makes the fork say it is not exact."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.fork import ForkError
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.workspace import EXCLUDED_DIRS, FileState, WorkspaceConfig

SCENARIO = "file-edits"


def _files(folder: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not set(rel.parts) & EXCLUDED_DIRS:
            out[rel.as_posix()] = path.read_bytes()
    return out


def _parent(workdir: Path, **agent):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "given.bin").write_bytes(b"\x00\x01binary that was there before the run\xfe")
    run = Agent(model=f"memfit/{SCENARIO}", workdir=workdir, memory=False, **agent).start(load_scenario(SCENARIO).task)
    at_step: dict[int, dict[str, bytes]] = {}
    # The action of step k is emitted before its tool runs: the folder is as it was at step k's start.
    run.subscribe(lambda e: at_step.setdefault(e.iteration, _files(workdir)) if e.TYPE == "action" else None)
    run.run()
    return run, at_step


def test_a_fork_at_each_step_sees_the_parents_files_at_that_step(tmp_path):
    parent, at_step = _parent(tmp_path / "parent")
    assert parent.result.status == "done"
    final = _files(tmp_path / "parent")
    assert "notes/old.txt" not in final and final["stamp.bin"].startswith(b"\x89PNG")
    trace_before = json.dumps(parent.trace())
    assert len(at_step) == parent.iteration >= 6
    for k, expected in at_step.items():
        child = parent.fork(k, workdir=tmp_path / f"fork{k}")
        assert _files(tmp_path / f"fork{k}") == expected, f"step {k}"
        assert child.parent["workspace"]["exact"], child.parent["workspace"]["problems"]
    assert at_step[1]["given.bin"].startswith(b"\x00\x01") and "notes/old.txt" in at_step[4]
    assert "notes/old.txt" not in at_step[5] and at_step[3]["stamp.bin"].endswith(b"\x00\xff")
    assert at_step[4]["summary.md"].startswith(b"Summary of the notes")
    assert _files(tmp_path / "parent") == final  # never written by a fork
    after = parent.trace()
    assert [f["at"] for f in after.pop("forks")] == sorted(at_step)
    assert json.dumps(after) == trace_before  # the parent's trace: only the list of its forks is new


@pytest.mark.parametrize("config", [WorkspaceConfig(), WorkspaceConfig(max_file_bytes=100)])
def test_what_restore_says_it_wrote_is_what_a_scan_of_the_folder_finds(config, tmp_path):
    """A fork's recorder starts from the files ``restore`` wrote, not from a scan of them: the same
    manifest, large files (named by size and time, not hash) included."""
    from memfit_jupyter.workspace import manifest_of, restore

    work = tmp_path / "parent"
    work.mkdir()
    (work / "data.bin").write_bytes(bytes(range(256)) * 8)
    parent, at_step = _parent(work, extensions=[config])
    events = parent.trace()["events"]
    for k in at_step:
        done = restore(events, k, tmp_path / f"r{k}", work)
        assert done.manifest is not None and done.manifest == manifest_of(tmp_path / f"r{k}"), f"step {k}"


def test_a_fork_runs_on_in_its_own_folder_and_records_its_own_steps(tmp_path):
    parent, at_step = _parent(tmp_path / "parent")
    final = _files(tmp_path / "parent")
    child = parent.fork(3, workdir=tmp_path / "child")
    child.run()
    assert _files(tmp_path / "child") == final  # the scripted model goes on as the parent did
    assert _files(tmp_path / "parent") == final
    grandchild = child.fork(5, workdir=tmp_path / "grandchild")
    assert _files(tmp_path / "grandchild") == at_step[5]
    assert grandchild.parent["run"] == child.id
    saved = json.loads(json.dumps(child.trace()))

    from_trace = Agent.fork(saved, 6, workdir=tmp_path / "from-trace")
    assert _files(tmp_path / "from-trace") == at_step[6]
    assert from_trace.parent["workspace"]["exact"]


def test_a_fork_at_the_first_step_keeps_the_base_for_its_own_forks(tmp_path):
    parent, at_step = _parent(tmp_path / "parent")
    child = parent.fork(1, workdir=tmp_path / "child")
    child.run()
    grandchild = child.fork(3, workdir=tmp_path / "grandchild")
    assert _files(tmp_path / "grandchild") == at_step[3]
    assert grandchild.parent["workspace"]["exact"]


def test_a_limit_hit_is_named_in_the_trace_and_the_fork_says_it_is_not_exact(tmp_path):
    parent, at_step = _parent(tmp_path / "parent", extensions=[WorkspaceConfig(max_file_bytes=100)])
    limits = [o["data"]["workspace"]["limit"] for o in parent.trace()["events"]
              if o["type"] == "observation" and "limit" in (o.get("data") or {}).get("workspace", {})]
    assert any("stamp.bin is 258 bytes, over max_file_bytes (100)" in x for x in limits), limits
    with pytest.raises(ForkError, match=r"cannot be exact: stamp.bin: its content \(258 bytes\) was not kept"):
        parent.fork(4, workdir=tmp_path / "strict", exact=True)
    assert not (tmp_path / "strict").exists()
    loose = parent.fork(4, workdir=tmp_path / "loose")
    workspace = loose.parent["workspace"]
    assert not workspace["exact"] and any("max_file_bytes" in c for c in workspace["caveats"])
    # the parent's folder no longer holds the first stamp: it is missing, and that is said
    assert "stamp.bin" not in _files(tmp_path / "loose")
    assert any("stamp.bin: its content" in p for p in workspace["problems"])
    assert _files(tmp_path / "loose") == {k: v for k, v in at_step[4].items() if k != "stamp.bin"}
    loose.run()
    (event,) = [e for e in loose.events if e.TYPE == "fork"]
    assert event.workspace["exact"] is False


def test_snapshots_off_leave_the_fork_an_empty_folder_and_say_so(tmp_path):
    parent, _ = _parent(tmp_path / "parent", extensions=[WorkspaceConfig(enabled=False)])
    assert not any("workspace" in (o.get("data") or {}) for o in parent.trace()["events"] if o["type"] == "observation")
    child = parent.fork(3, workdir=tmp_path / "child")
    assert not child.parent["workspace"]["exact"]
    assert "records no workspace" in child.parent["workspace"]["problems"][0]


def test_a_large_file_the_run_never_changed_comes_from_the_parents_folder_exactly(tmp_path):
    work = tmp_path / "parent"
    work.mkdir()
    (work / "data.bin").write_bytes(bytes(range(256)) * 8)  # 2 KB: over the limit below
    parent, at_step = _parent(work, extensions=[WorkspaceConfig(max_file_bytes=1024)])
    child = parent.fork(3, workdir=tmp_path / "child")
    assert (tmp_path / "child" / "data.bin").read_bytes() == (work / "data.bin").read_bytes()
    workspace = child.parent["workspace"]
    assert any("data.bin is 2048 bytes" in c for c in workspace["caveats"])
    # the stamp (258 bytes) was kept; the big file is the parent's, unchanged: the fork is exact
    assert workspace["exact"], workspace["problems"]
    assert _files(tmp_path / "child") == at_step[3]


def test_a_folder_with_too_many_files_is_not_recorded_and_the_fork_says_so(tmp_path):
    parent, _ = _parent(tmp_path / "parent", extensions=[WorkspaceConfig(max_files=2)])
    child = parent.fork(3, workdir=tmp_path / "child")
    assert not child.parent["workspace"]["exact"]
    assert "holds more than 2 files" in " ".join(child.parent["workspace"]["problems"])


def _reading_run(parent: Path):
    parent.mkdir()
    (parent / "mine.txt").write_text("put there by the person\n")
    run = Agent(model="memfit/premature-finish", workdir=parent, memory=False).start(
        load_scenario("premature-finish").task)
    run.run()
    assert {e.get("tool") for e in run.trace()["events"] if e["type"] == "action"} <= {"read_file", "finish"}
    return run


def test_a_run_that_only_read_is_forked_with_the_files_it_found(tmp_path):
    """The base is taken at a run's first tool call, a read too: a saved trace of a run that only
    read is forked exactly, even once the parent's folder is gone."""
    run = _reading_run(tmp_path / "parent")
    found = _files(tmp_path / "parent")
    saved = json.loads(json.dumps(run.trace()))
    shutil.rmtree(tmp_path / "parent")
    child = Agent.fork(saved, 2, workdir=tmp_path / "child")
    assert _files(tmp_path / "child") == found
    assert (tmp_path / "child" / "mine.txt").read_text() == "put there by the person\n"
    assert child.parent["workspace"]["exact"]


def test_a_trace_without_a_base_is_forked_with_the_parents_folder(tmp_path):
    """A trace that holds no base (recorded before bases were taken at any first tool call) and
    no write before the fork step: the fork copies the parent's folder as it is, and says so."""
    run = _reading_run(tmp_path / "parent")
    saved = json.loads(json.dumps(run.trace()))
    for e in saved["events"]:
        (e.get("data") or {}).pop("workspace", None)
    child = Agent.fork(saved, 2, workdir=tmp_path / "child")
    assert _files(tmp_path / "child") == _files(tmp_path / "parent")
    assert any("copied from the parent's folder" in c for c in child.parent["workspace"]["caveats"])
    assert child.parent["workspace"]["exact"]


def test_a_run_whose_writes_were_refused_is_forked_exactly_from_the_files_it_found(tmp_path):
    """Writing calls that the tool policy refused never ran, so no base was taken and no file
    changed: the fork starts with the folder the run found, and is exact."""
    workdir = tmp_path / "parent"
    run, _ = _parent(workdir, approve_tools="always", max_iterations=3)
    events = run.trace()["events"]
    refused = [e for e in events if e["type"] == "observation" and "was not run" in (e.get("error") or "")]
    assert refused and any(e.get("tool") not in ("read_file", "finish") for e in refused)
    assert not any((e.get("data") or {}).get("workspace") for e in events if e["type"] == "observation")
    child = Agent.fork(run, 2, workdir=tmp_path / "child")
    assert child.parent["workspace"]["exact"], child.parent["workspace"]["problems"]
    assert _files(tmp_path / "child") == _files(workdir)


def _record_with(trace: dict, change, tmp_path: Path) -> dict:
    """``trace`` with ``change`` made to its first workspace record that lists a changed file."""
    trace = json.loads(json.dumps(trace))
    for e in trace["events"]:
        record = (e.get("data") or {}).get("workspace") if e["type"] == "observation" else None
        if record and record.get("changed"):
            change(record, tmp_path)
            return trace
    raise AssertionError("the run changed no file")


def _sha(record: dict) -> str:
    return next(iter(record["changed"].values()))


@pytest.mark.parametrize("change, expected", [
    (lambda r, _: r["changed"].update({"../escaped.txt": _sha(r)}),
     "names a file outside the working directory: '../escaped.txt'"),
    (lambda r, _: r["changed"].update({"notes/../../escaped.txt": _sha(r)}), "outside the working directory"),
    (lambda r, tmp: r["changed"].update({str(tmp / "space" / "escaped.txt"): _sha(r)}), "outside the working directory"),
    (lambda r, _: r["changed"].update({"fine.txt": "../../../../etc/hostname"}), "which is not a digest"),
    (lambda r, _: r.update({"changed": ["a.txt"]}), "lists its files as list"),
])
def test_a_trace_whose_records_name_paths_outside_the_folder_is_refused_and_nothing_is_written(change, expected, tmp_path):
    parent, _ = _parent(tmp_path / "parent")
    damaged = _record_with(parent.trace(), change, tmp_path)
    before = _files(tmp_path / "parent")
    with pytest.raises(ForkError, match="this trace cannot be forked: the workspace record of step") as err:
        Agent.fork(damaged, parent.iteration, workdir=tmp_path / "space" / "child")
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "space" / "child").exists() and not (tmp_path / "space" / "escaped.txt").exists()
    assert _files(tmp_path / "parent") == before


KEY = b"OPENAI_API_KEY=sk-proj-ws7Hq2XbN4mLp9RvT3kZ8yJd1FcA6eGi\n"
PRIVATE = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n"


def _blobs_holding(store: Path, secret: bytes) -> list[Path]:
    return [p for p in store.rglob("*") if p.is_file() and secret.strip() in p.read_bytes()]


def test_files_that_hold_keys_are_never_copied_into_the_blob_store_and_forks_take_them_from_the_parent(tmp_path):
    """``.env``, private keys and the like are named by size and mtime, never read: a fork takes
    them from the parent's folder while they are unchanged there (its own forks too), and says so
    once the key was rotated; no blob holds them."""
    store = tmp_path / "blobs"
    work = tmp_path / "parent"
    (work / "deploy").mkdir(parents=True)
    (work / ".env").write_bytes(KEY)
    (work / "deploy" / "id_ed25519").write_bytes(PRIVATE)
    parent, at_step = _parent(work, extensions=[WorkspaceConfig(store=str(store))])
    assert parent.result.status == "done" and at_step[3][".env"] == KEY
    assert store.is_dir() and not _blobs_holding(store, KEY) and not _blobs_holding(store, PRIVATE)
    (base,) = [e["data"]["workspace"]["base"] for e in parent.trace()["events"]
               if e["type"] == "observation" and "base" in (e.get("data") or {}).get("workspace", {})]
    listing = json.loads((store / base[:2] / base).read_bytes())
    assert listing[".env"].startswith("stat-") and listing["deploy/id_ed25519"].startswith("stat-")
    assert not listing["given.bin"].startswith("stat-")  # an ordinary file is kept by its hash

    child = parent.fork(3, workdir=tmp_path / "child")
    assert _files(tmp_path / "child") == at_step[3] and child.parent["workspace"]["exact"]
    child.run()
    grandchild = child.fork(2, workdir=tmp_path / "grandchild")  # in the parent's prefix: the child's copy
    assert _files(tmp_path / "grandchild") == at_step[2] and grandchild.parent["workspace"]["exact"]

    (work / ".env").write_bytes(b"OPENAI_API_KEY=sk-proj-rotated000000000000000000000\n")
    rotated = parent.fork(3, workdir=tmp_path / "rotated")
    assert not (tmp_path / "rotated" / ".env").exists()
    assert (tmp_path / "rotated" / "deploy" / "id_ed25519").read_bytes() == PRIVATE
    (problem,) = rotated.parent["workspace"]["problems"]
    assert problem == (".env: a file that holds keys is never kept in a snapshot, and the parent's folder "
                       "no longer has it as it was")
    with pytest.raises(ForkError, match=r"cannot be exact: \.env: a file that holds keys"):
        parent.fork(3, workdir=tmp_path / "strict", exact=True)
    assert not _blobs_holding(store, KEY)


@pytest.mark.parametrize("name, secret", [
    (".env", True), ("app/.env.local", True), ("prod.env", True), ("certs/Server.PEM", True), ("id_rsa", True),
    ("home/.ssh/id_ed25519.pub", True), (".netrc", True), ("client_secret_123.apps.json", True),
    ("secrets.py", False), ("environment.yml", False), ("notes/.envelope.txt", False), ("keys.txt", False),
])
def test_which_file_names_hold_keys(name, secret):
    assert WorkspaceConfig().is_secret(name) is secret
    assert WorkspaceConfig(secret_files=()).is_secret(name) is False


# --- what a scan sees, with runs whose tools do a given thing at a given step ----------------


def _tree(folder: Path) -> dict[str, tuple]:
    """Everything a fork should give back: files (bytes, executable), links (target), folders."""
    out: dict[str, tuple] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if set(rel.parts) & EXCLUDED_DIRS:
            continue
        if path.is_symlink():
            out[rel.as_posix()] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel.as_posix()] = ("dir",)
        else:
            try:
                out[rel.as_posix()] = ("file", path.read_bytes(), bool(path.stat().st_mode & stat.S_IXUSR))
            except PermissionError:
                out[rel.as_posix()] = ("unreadable",)
    return out


def _scripted(workdir: Path, steps: dict, **agent):
    """A run of the bench-loop model whose python, shell and write_file tools do ``steps[k](folder)``
    at step k (nothing at the others), and the folder at the start of each step."""
    from memfit_jupyter.records import ToolResult
    from memfit_jupyter.tools import Param, Tool

    def act(ctx, **params):
        do = steps.get(ctx.run.iteration)
        if do is not None:
            do(Path(ctx.workdir))
        return ToolResult(output="done")

    tools = [Tool(name, "test", {p: Param() for p in params}, act, access=access) for name, params, access in
             (("python", ["code"], "exec"), ("shell", ["command"], "exec"), ("write_file", ["path", "content"], "write"))]
    workdir.mkdir(parents=True, exist_ok=True)
    run = Agent(model="memfit/bench-loop", workdir=workdir, memory=False, reflection="none",
                max_iterations=max(steps) + 1, extra_tools=tools, **agent).start("keep counting")
    at_step: dict[int, dict[str, tuple]] = {}
    run.subscribe(lambda e: at_step.setdefault(e.iteration, _tree(workdir)) if e.TYPE == "action" else None)
    run.run()
    assert len(at_step) == max(steps) + 1
    return run, at_step


T0 = 1_700_000_000_000_000_000


def test_a_swap_with_mv_or_a_rewrite_that_sets_the_mtime_back_is_recorded(tmp_path):
    """Same sizes, same mtimes (as tar, unzip or cp -p leave them): the forks still get the
    swapped and the rewritten contents (the next test: the inode and the change time tell)."""
    work = tmp_path / "parent"
    work.mkdir()
    for name, text in (("x.txt", "XXXX"), ("y.txt", "YYYY")):
        (work / name).write_text(text)
        os.utime(work / name, ns=(T0, T0))

    def swap(w):
        os.rename(w / "x.txt", w / "tmp")
        os.rename(w / "y.txt", w / "x.txt")
        os.rename(w / "tmp", w / "y.txt")

    def rewrite(w):
        st = (w / "x.txt").stat()
        (w / "x.txt").write_text("CCCC")
        os.utime(w / "x.txt", ns=(st.st_atime_ns, st.st_mtime_ns))

    parent, at_step = _scripted(work, {2: swap, 3: rewrite})
    assert at_step[3]["x.txt"][1] == b"YYYY" and at_step[4]["x.txt"][1] == b"CCCC"
    for k in at_step:
        child = parent.fork(k, workdir=tmp_path / f"fork{k}")
        assert _tree(tmp_path / f"fork{k}") == at_step[k], f"step {k}"
        assert child.parent["workspace"]["exact"]


def test_a_scan_reads_a_file_again_when_its_inode_or_change_time_moved(tmp_path):
    """Past the recheck window (the previous states marked settled), only the stat tells."""
    from memfit_jupyter.workspace import scan

    (tmp_path / "x.txt").write_text("XXXX")
    (tmp_path / "y.txt").write_text("YYYY")
    for name in ("x.txt", "y.txt"):
        os.utime(tmp_path / name, ns=(T0, T0))
    before = {rel: dataclasses.replace(s, recheck=False) for rel, s in scan(tmp_path, {}, 100).items()}
    assert scan(tmp_path, before, 100) == before
    os.rename(tmp_path / "x.txt", tmp_path / "tmp")
    os.rename(tmp_path / "y.txt", tmp_path / "x.txt")
    os.rename(tmp_path / "tmp", tmp_path / "y.txt")
    after = scan(tmp_path, before, 100)
    assert (after["x.txt"].sha, after["y.txt"].sha) == (before["y.txt"].sha, before["x.txt"].sha)


def test_a_file_changed_just_before_a_scan_is_read_again_at_the_next(tmp_path):
    """Two writes in one timestamp tick leave the stat as it was: a state marked for a recheck is
    hashed again, a settled one is not (the state below is what the scan saw before the second write)."""
    from memfit_jupyter.workspace import scan

    (tmp_path / "a.txt").write_text("BBBB")
    (now,) = scan(tmp_path, {}, 100).values()
    assert now.recheck  # written a moment ago
    seen = dataclasses.replace(now, sha=hashlib.sha256(b"AAAA").hexdigest())
    assert scan(tmp_path, {"a.txt": seen}, 100)["a.txt"].sha == now.sha
    settled = dataclasses.replace(seen, recheck=False)
    assert scan(tmp_path, {"a.txt": settled}, 100)["a.txt"] is settled


def test_a_folder_too_big_at_the_first_tool_call_makes_a_fork_at_any_step_not_exact(tmp_path):
    work = tmp_path / "parent"
    work.mkdir()
    for i in range(10):
        (work / f"f{i}.txt").write_text(str(i))
    parent, at_step = _scripted(work, {1: lambda w: (w / "new.txt").write_text("n"), 2: None},
                                extensions=[WorkspaceConfig(max_files=5)])
    for k in at_step:
        child = parent.fork(k, workdir=tmp_path / f"fork{k}")
        assert not child.parent["workspace"]["exact"], f"step {k}"
        assert "holds more than 5 files" in " ".join(child.parent["workspace"]["problems"])
    with pytest.raises(ForkError, match="cannot be exact: step 1: the working directory holds more than 5 files"):
        parent.fork(1, workdir=tmp_path / "strict", exact=True)


def test_a_file_dated_before_1970_is_forked_with_its_mtime(tmp_path):
    """A secret or too-large file is named by its size and mtime, which may be negative."""
    work = tmp_path / "parent"
    work.mkdir()
    old = -86_400_000_000_000  # 1969-12-31
    (work / ".env").write_bytes(KEY)
    (work / "big.bin").write_bytes(bytes(range(256)) * 8)
    for name in (".env", "big.bin"):
        os.utime(work / name, ns=(old, old))
    parent, at_step = _scripted(work, {1: lambda w: (w / "a.txt").write_text("a"), 2: None},
                                extensions=[WorkspaceConfig(max_file_bytes=1024)])
    child = parent.fork(2, workdir=tmp_path / "child")
    assert child.parent["workspace"]["exact"], child.parent["workspace"]["problems"]
    assert _tree(tmp_path / "child") == at_step[2]
    assert [(tmp_path / "child" / n).stat().st_mtime_ns for n in (".env", "big.bin")] == [old, old]
    child.run()
    grandchild = child.fork(2, workdir=tmp_path / "grandchild")  # finds the child's copies as they were
    assert _tree(tmp_path / "grandchild") == at_step[2] and grandchild.parent["workspace"]["exact"]


@pytest.mark.parametrize("change, expected", [
    (lambda r: r["changed"].update({f"{next(iter(r['changed']))}/inner": _sha(r)}),
     "under '{first}', which they list as a file, a link or an empty folder"),
    (lambda r: r.update(store=123), "names its blob store by int, not by a folder"),
    (lambda r: r.update(store=["blobs"]), "names its blob store by list, not by a folder"),
    (lambda r: r.update(limit=5), "gives its limit as int, not as text"),
    (lambda r: r.update(deleted=5), "lists its deleted files as int, not as a list of paths"),
    (lambda r: r.update(deleted=[5]), "lists its deleted files as list, not as a list of paths"),
    (lambda r: r.update(unread="a.txt"), "lists its unread paths as str, not as a list of paths"),
    (lambda r: r["changed"].update({"c.txt": "stat-12"}), "by 'stat-12', which is not a digest"),
    (lambda r: r["changed"].update({"c.txt": _sha(r) + "+w"}), "which is not a digest"),
])
def test_a_damaged_workspace_record_is_one_line_and_nothing_is_written(change, expected, tmp_path):
    parent, _ = _parent(tmp_path / "parent")
    trace = parent.trace()
    first = next(iter(next(e["data"]["workspace"] for e in trace["events"] if e["type"] == "observation"
                            and (e.get("data") or {}).get("workspace", {}).get("changed"))["changed"]))
    damaged = _record_with(trace, lambda record, _: change(record), tmp_path)
    with pytest.raises(ForkError, match="^this trace cannot be forked: ") as err:
        Agent.fork(damaged, parent.iteration, workdir=tmp_path / "child")
    assert expected.format(first=first) in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "child").exists()


def test_links_executable_bits_and_empty_folders_are_forked_and_links_out_of_the_folder_are_said(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not the run's")

    def make(w):
        (w / "data.csv").write_text("x,y\n1,2\n")
        (w / "run.sh").write_text("#!/bin/sh\necho hi\n")
        os.chmod(w / "run.sh", 0o755)
        os.symlink("data.csv", w / "latest.csv")
        (w / "d").mkdir()
        (w / "d" / "f.txt").write_text("f")
        os.symlink("d", w / "dlink")
        os.symlink("../data.csv", w / "d" / "up.csv")
        os.symlink("nowhere", w / "dangling")
        (w / "empty" / "inner").mkdir(parents=True)
        (w / "only-cache" / "__pycache__").mkdir(parents=True)
        (w / "notes.memfit-tmp.txt").write_text("a file of the user's")

    def change(w):
        os.chmod(w / "run.sh", 0o644)  # the mode only
        (w / "empty" / "inner" / "now.txt").write_text("not empty")
        (w / "d" / "f.txt").unlink()
        (w / "d" / "up.csv").unlink()

    def escape(w):
        os.symlink(str(outside), w / "absolute")
        os.symlink("../outside.txt", w / "up")
        os.symlink(".", w / "self")
        os.symlink("self/../outside.txt", w / "through")  # inside by its text, out through "self"

    parent, at_step = _scripted(tmp_path / "parent", {1: make, 2: change, 3: escape})
    assert at_step[2]["run.sh"] == ("file", b"#!/bin/sh\necho hi\n", True) and at_step[3]["run.sh"][2] is False
    for k in (1, 2, 3):
        child = parent.fork(k, workdir=tmp_path / f"fork{k}")
        assert _tree(tmp_path / f"fork{k}") == at_step[k], f"step {k}"
        assert child.parent["workspace"]["exact"], child.parent["workspace"]["problems"]
    assert at_step[2]["empty/inner"] == ("dir",) and at_step[2]["only-cache"] == ("dir",)
    assert at_step[3]["d"] == ("dir",) and at_step[3]["empty/inner/now.txt"][1] == b"not empty"

    loose = parent.fork(4, workdir=tmp_path / "fork4")
    problems = loose.parent["workspace"]["problems"]
    assert sorted(p.split(":")[0] for p in problems) == ["absolute", "through", "up"], problems
    assert all("outside the working directory: not restored" in p for p in problems)
    assert _tree(tmp_path / "fork4") == {k: v for k, v in at_step[4].items() if k not in ("absolute", "up", "through")}
    with pytest.raises(ForkError, match="cannot be exact: absolute: a symbolic link to"):
        parent.fork(4, workdir=tmp_path / "strict", exact=True)
    assert outside.read_text() == "not the run's"


def test_what_restore_writes_of_links_modes_and_folders_is_what_a_scan_finds(tmp_path):
    from memfit_jupyter.workspace import manifest_of, restore

    def make(w):
        (w / "run.sh").write_text("#!/bin/sh\n")
        os.chmod(w / "run.sh", 0o700)
        os.symlink("run.sh", w / "go")
        (w / "out" / "logs").mkdir(parents=True)

    parent, at_step = _scripted(tmp_path / "parent", {1: make, 2: None})
    done = restore(parent.trace()["events"], 2, tmp_path / "r", tmp_path / "parent")
    assert set(done.manifest) == {"run.sh", "go", "out/logs"}
    assert done.manifest == manifest_of(tmp_path / "r")


def _as_another_user():
    """Run as a user the permissions apply to: tests usually run as root, who reads any file."""
    if os.geteuid() != 0:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def nobody():
        try:
            os.setegid(65534)
            os.seteuid(65534)
        except PermissionError:  # root without CAP_SETUID (some containers)
            os.setegid(0)
            pytest.skip("root cannot switch to another user here, and root reads any file")
        try:
            yield
        finally:
            os.seteuid(0)
            os.setegid(0)
    return nobody()


def _open_folder(name: str) -> Path:
    """A folder another user can reach (pytest's tmp_path sits in a folder only its owner enters)."""
    folder = Path(tempfile.mkdtemp(prefix=f"memfit-{name}-"))
    folder.chmod(0o777)
    return folder


@pytest.mark.skipif(not hasattr(os, "seteuid"), reason="needs POSIX users")
def test_what_cannot_be_read_keeps_its_last_state_and_the_fork_says_it_is_not_exact(tmp_path):
    """chmod 000: a file that cannot be read is not a deleted file, nor is a folder that cannot be listed."""
    work, store = _open_folder("work"), _open_folder("blobs")
    try:
        def make(w):
            (w / "locked.txt").write_text("made at step 1")
            (w / "box").mkdir()
            (w / "box" / "inner.txt").write_text("inner")

        def lock(w):
            os.chmod(w / "locked.txt", 0)
            os.chmod(w / "box", 0)

        def unlock(w):
            os.chmod(w / "locked.txt", 0o644)
            os.chmod(w / "box", 0o755)

        with _as_another_user():
            parent, _ = _scripted(work, {1: make, 2: lock, 3: unlock, 4: None},
                                  extensions=[WorkspaceConfig(store=str(store))])
        unread = [(e["iteration"], e["data"]["workspace"].get("unread")) for e in parent.trace()["events"]
                  if e["type"] == "observation" and "unread" in (e.get("data") or {}).get("workspace", {})]
        assert unread == [(2, ["box/", "locked.txt"]), (3, [])]
        at3 = parent.fork(3, workdir=tmp_path / "fork3")
        assert (tmp_path / "fork3" / "locked.txt").read_text() == "made at step 1"
        assert (tmp_path / "fork3" / "box" / "inner.txt").read_text() == "inner"
        assert [p.split(":")[0] for p in at3.parent["workspace"]["problems"]] == ["box/", "locked.txt"]
        assert "could not be listed when step 2 was recorded" in at3.parent["workspace"]["problems"][0]
        assert parent.fork(4, workdir=tmp_path / "fork4").parent["workspace"]["exact"]  # readable again
    finally:
        for folder in (work, store):
            for path in [folder, *folder.rglob("*")]:
                with contextlib.suppress(OSError):
                    path.chmod(0o755)
            shutil.rmtree(folder, ignore_errors=True)


def test_a_folder_that_cannot_be_listed_keeps_what_it_held(tmp_path):
    """A folder whose path is past PATH_MAX cannot be listed even by root: its files are not
    deleted, and the scan says so."""
    from memfit_jupyter.workspace import scan

    deep = os.open(tmp_path, os.O_RDONLY)
    name = "d" * 250
    try:
        for _ in range(20):  # 20 x 251 bytes: past PATH_MAX (4096)
            os.mkdir(name, dir_fd=deep)
            inner = os.open(name, os.O_RDONLY, dir_fd=deep)
            os.close(deep)
            deep = inner
    finally:
        os.close(deep)
    rel = "/".join([name] * 20)
    previous = {rel + "/f.txt": FileState(1, 0, "0" * 64)}
    unread: list[str] = []
    found = scan(tmp_path, previous, 100, unread=unread)
    assert found[rel + "/f.txt"] is previous[rel + "/f.txt"]
    assert len(unread) == 1 and rel.startswith(unread[0].rstrip("/"))


def test_concurrent_puts_of_the_same_bytes_all_succeed(tmp_path):
    """Two runs of one kernel put the same base listing at once: each write has a name of its own."""
    from memfit_jupyter.workspace import TMP_MARK, BlobStore

    store = BlobStore(tmp_path / "blobs")
    rounds, threads = 40, 8
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def put():
        for n in range(rounds):
            start.wait()
            try:
                store.put(f"listing {n}".encode() * 5000)
            except BaseException as exc:
                errors.append(exc)

    workers = [threading.Thread(target=put) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    kept = [p for p in (tmp_path / "blobs").rglob("*") if p.is_file()]
    assert len(kept) == rounds and not [p for p in kept if p.name.endswith(TMP_MARK)]


def test_a_blob_store_that_cannot_be_written_does_not_stop_the_run(tmp_path):
    """The base listing could not be kept: the tools run, the trace says why, forks are not exact."""
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the store should be")
    parent, at_step = _scripted(tmp_path / "parent", {1: lambda w: (w / "a.txt").write_text("a"), 2: None},
                                extensions=[WorkspaceConfig(store=str(blocked))])
    assert (tmp_path / "parent" / "a.txt").read_text() == "a"
    (record,) = [e["data"]["workspace"] for e in parent.trace()["events"]
                 if e["type"] == "observation" and (e.get("data") or {}).get("workspace")]
    assert record["limit"].startswith(f"the base listing could not be kept in {blocked}")
    assert not parent.fork(2, workdir=tmp_path / "child").parent["workspace"]["exact"]


def test_the_snapshot_store_is_pruned_of_what_no_run_used_and_a_fork_says_what_it_lost(tmp_path, capsys):
    """A blob's mtime is when a run last kept or a fork last read it: pruning goes by it, and a fork
    of a run whose blob went says which file it lacks."""
    import os
    import time

    from memfit_jupyter.__main__ import main

    store = tmp_path / "blobs"
    parent, _ = _parent(tmp_path / "parent", extensions=[WorkspaceConfig(store=str(store))])
    blobs = sorted(p for p in store.rglob("*") if p.is_file())
    assert blobs
    month_ago = time.time() - 31 * 86400
    for p in blobs:
        os.utime(p, (month_ago, month_ago))
    parent.fork(2, workdir=tmp_path / "early")  # reads the blobs of the files at step 2: used now
    used = {p for p in blobs if p.stat().st_mtime > month_ago + 86400}
    assert used and used != set(blobs)
    assert main(["snapshots", "--store", str(store)]) == 0
    assert f"{len(blobs)} blob(s)" in capsys.readouterr().out
    assert main(["snapshots", "--store", str(store), "--prune-older-than", "30"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"removed {len(blobs) - len(used)} blob(s)")
    assert {p for p in blobs if p.exists()} == used
    shutil.rmtree(tmp_path / "parent")  # nor has the parent's folder the files any more
    child = Agent.fork(json.loads(json.dumps(parent.trace())), parent.iteration, workdir=tmp_path / "child")
    assert not child.parent["workspace"]["exact"] and any(
        "was not kept" in p or "not in the blob store" in p for p in child.parent["workspace"]["problems"])
    for bad, expected in ((["--prune-older-than", "-1"], "0 or more"), (["--store", str(tmp_path / "none")], "no blob store")):
        assert main(["snapshots", *bad]) == 2 and expected in capsys.readouterr().err


def test_pruning_removes_only_the_stores_own_folders_and_refuses_a_folder_that_is_not_a_store(tmp_path):
    """A store named by mistake (``--store .``): the folder's own empty folders are not the
    store's, and a folder with no blob folder in it is refused with nothing touched."""
    import subprocess
    import sys
    import time

    from memfit_jupyter.__main__ import main
    from memfit_jupyter.workspace import BlobStore

    store = BlobStore(tmp_path / "blobs")
    shas = [store.put(f"bytes {i}".encode())[0] for i in range(2)]
    old, used = shas[0], next(s for s in shas[1:] if s[:2] != shas[0][:2])  # in two shard folders
    month_ago = time.time() - 31 * 86400
    os.utime(store.path(old), (month_ago, month_ago))
    for name in ("emptydir", "AB", ".hidden"):  # not shard folders, empty
        (store.root / name).mkdir()
    (store.root / "notes.txt").write_text("the person's own file")
    assert main(["snapshots", "--store", str(store.root), "--prune-older-than", "30"]) == 0
    assert not store.path(old).parent.exists() and store.path(used).is_file()  # its emptied shard went
    assert all((store.root / name).is_dir() for name in ("emptydir", "AB", ".hidden"))
    assert (store.root / "notes.txt").read_text() == "the person's own file"

    foreign = tmp_path / "project"
    (foreign / "emptydir").mkdir(parents=True)
    (foreign / "keepme").mkdir()
    (foreign / "keepme" / "file.txt").write_text("kept")
    with pytest.raises(ValueError, match="is not a blob store: it holds 'emptydir' and 1 more") as err:
        BlobStore(foreign).prune(30 * 86400)
    assert "\n" not in str(err.value)
    done = subprocess.run([sys.executable, "-m", "memfit_jupyter", "snapshots", "--store", ".", "--prune-older-than", "30"],
                          cwd=foreign, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode != 0 and "is not a blob store" in done.stderr
    assert (foreign / "emptydir").is_dir() and (foreign / "keepme" / "file.txt").read_text() == "kept"
    assert BlobStore(tmp_path / "none").prune(0) == (0, 0)  # no store yet: nothing to do
