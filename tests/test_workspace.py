"""The working directory, step by step: a fork at each step sees the parent's files as they were
at that step (binary and deleted files included), the parent's folder is never written, and a
limit that was hit is named in the trace and makes the fork say it is not exact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.fork import ForkError
from memfit_jupyter.llm.scenarios import load_scenario
from memfit_jupyter.workspace import EXCLUDED_DIRS, WorkspaceConfig

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
