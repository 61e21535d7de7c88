"""The working directory, step by step: what each step changed, kept so that a fork can start
from the files as they were at any step.

A live run's tool runner (``live.LiveTools``) scans the working directory before the run's
first tool call, whatever the tool (the *base*: the files as the run found them, scenario files
included; a run that only reads is forked from them too), and after each call that may write.
What changed is kept content-addressed: each file's bytes once, as a blob named by its SHA-256, in a blob store (``default_store()``: the user's cache
folder, shared by every run, unless ``WorkspaceConfig.store`` says otherwise).  It is kept out of
the working folder so that a run leaves nothing there but what its tools wrote, and out of the
memory store, which holds what the agent learnt, not copies of your files.  Files that hold keys
by their nature (``.env``, ``*.pem``, ``id_rsa``, ``.netrc``...: ``WorkspaceConfig.secret_files``)
are never read nor copied: they are named by their size and mtime, as a file too large to keep
is, and a fork takes them from the parent's folder while they are unchanged there.  The step's
observation event names it in ``data["workspace"]``::

    {"store": "/abs/blobs", "base": "<sha of the base manifest>",   # the first step only
     "changed": {"path": "<sha>"}, "deleted": ["path"], "bytes": 123,
     "limit": "why content was not kept"}                            # when a limit was hit

Restoring step k (``restore``) is the base plus the changes of the steps before k, written into
an empty folder.  What cannot be exact is said: a limit hit (a file's bytes were not kept and the
parent's folder no longer holds them), a trace with no records, effects outside the folder.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

#: Folders a scan does not enter: memfit's own state, version control, caches, environments.
EXCLUDED_DIRS = frozenset({".memfit", ".git", ".hg", "node_modules", "__pycache__", ".ipynb_checkpoints",
                           ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})
#: Tools that never change files: no scan around them.
READ_ONLY_TOOLS = frozenset({"read_file", "finish", "ask_user"})
#: Tools whose effects may reach past the working directory (and the Python namespace).
UNBOUNDED_TOOLS = frozenset({"python", "shell"})
#: The temporary name write_file and modify_code write through (never part of a snapshot).
TMP_MARK = ".memfit-tmp"
#: Where the data of an observation keeps its workspace record.
DATA_KEY = "workspace"
#: File names (shell patterns, any case) whose bytes a snapshot never keeps: files that exist to
#: hold keys.  A ``.env`` copied into the blob store would outlive the key's rotation there.
SECRET_FILES = (".env", ".env.*", "*.env", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
                "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc", ".pgpass", ".git-credentials",
                ".npmrc", ".pypirc", "credentials", "credentials.json", "client_secret*.json",
                "service-account*.json", "*.tfvars", "secrets.yaml", "secrets.yml", "secrets.json", "secrets.toml")


@dataclass(frozen=True)
class WorkspaceConfig:
    """How a run records its working directory (what ``Run.fork`` restores).

    ``Agent(extensions=[WorkspaceConfig(max_bytes=...)])`` changes it for an agent's runs.
    """

    #: Record what each step changed; off, forks of the run start from an empty folder.
    enabled: bool = True
    #: The blob store's folder (None: ``default_store()``, in the user's cache folder).
    store: str | None = None
    #: File bytes one run may keep; past it steps record hashes only and the trace says so.
    max_bytes: int = 64 * 2**20
    #: A file larger than this is recorded by its hash only.
    max_file_bytes: int = 16 * 2**20
    #: A folder with more files than this is not scanned (the trace says so).
    max_files: int = 5000
    #: File names whose bytes are never kept (shell patterns matched against the name, any case).
    secret_files: tuple[str, ...] = SECRET_FILES

    def is_secret(self, rel: str) -> bool:
        """Whether the file at ``rel`` is one whose bytes a snapshot never keeps."""
        return secret_names(self.secret_files)(rel.rsplit("/", 1)[-1].lower()) is not None


@functools.cache
def secret_names(patterns: tuple[str, ...]) -> Any:
    """One compiled pattern for all of ``patterns`` (its ``match``): asked of every file of every scan."""
    return re.compile("|".join(fnmatch.translate(p.lower()) for p in patterns) or "(?!)").match


def default_store() -> Path:
    """The blob store used when ``WorkspaceConfig.store`` is None: ``snapshots`` in memfit's
    cache folder (``$MEMFIT_CACHE``, else ``$XDG_CACHE_HOME/memfit-jupyter``, else
    ``~/.cache/memfit-jupyter``)."""
    base = os.environ.get("MEMFIT_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memfit-jupyter"
    return Path(base) / "snapshots"


def config_of(agent: Any) -> WorkspaceConfig:
    """The agent's ``WorkspaceConfig`` (given among its extensions or configs), or the default."""
    for obj in [*getattr(agent, "extensions", ()), *getattr(agent, "configs", {}).values()]:
        if isinstance(obj, WorkspaceConfig):
            return obj
    return WorkspaceConfig()


class BlobStore:
    """Content-addressed file bytes: ``<root>/<sha[:2]>/<sha>``, written once, never changed."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def has(self, sha: str) -> bool:
        return self.path(sha).is_file()

    def put(self, data: bytes) -> tuple[str, int]:
        """Keep ``data``; its SHA-256 and the bytes written (0 when it was already there)."""
        sha = hashlib.sha256(data).hexdigest()
        target = self.path(sha)
        if target.is_file():
            return sha, 0
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{sha}.{os.getpid()}{TMP_MARK}")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        return sha, len(data)

    def read(self, sha: str) -> bytes:
        return self.path(sha).read_bytes()


@dataclass(slots=True)
class FileState:
    size: int
    mtime_ns: int
    sha: str


def _sha_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


MANY_FILES = "the working directory holds more than"


class TooManyFiles(Exception):
    """The folder holds more files than ``WorkspaceConfig.max_files``."""


#: How a file too large to keep is named instead of by its hash: its size and mtime (reading
#: gigabytes of data files at every step would cost more than the step).
STAT_PREFIX = "stat-"
_HEX = frozenset("0123456789abcdef")


class UnsafeRecord(ValueError):
    """A trace's workspace record that a fork must not follow: a path outside the working
    directory, or a blob name that is not a digest (a damaged or hand-made trace: a recording
    never holds one)."""


def safe_rel(rel: Any) -> bool:
    """Whether ``rel`` is a path inside a folder, as ``scan`` records one (relative, no ``..``)."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        return False
    path = PurePosixPath(rel)
    return not path.is_absolute() and ".." not in path.parts and rel == path.as_posix()


def _digest(sha: Any) -> bool:
    """Whether ``sha`` names a blob as the store names one (a SHA-256), or a file's stat."""
    if not isinstance(sha, str):
        return False
    if sha.startswith(STAT_PREFIX):
        return all(part.isdigit() for part in sha[len(STAT_PREFIX):].split("-", 1))
    return len(sha) == 64 and _HEX.issuperset(sha)


def _check_files(files: Any, where: str) -> dict[str, str]:
    if not isinstance(files, dict):
        raise UnsafeRecord(f"{where} lists its files as {type(files).__name__}, not as path -> digest")
    for rel, sha in files.items():
        if not safe_rel(rel):
            raise UnsafeRecord(f"{where} names a file outside the working directory: {str(rel)[:80]!r}")
        if not _digest(sha):
            raise UnsafeRecord(f"{where} names the content of {rel} by {str(sha)[:80]!r}, which is not a digest")
    return files


def _stat_id(size: int, mtime_ns: int) -> str:
    return f"{STAT_PREFIX}{size}-{mtime_ns}"


def scan(root: Path, previous: dict[str, FileState], max_files: int,
         max_hash_bytes: int | None = None, secret: tuple[str, ...] = SECRET_FILES) -> dict[str, FileState]:
    """The regular files under ``root`` (relative POSIX paths), hashed where size or mtime moved;
    a file over ``max_hash_bytes``, or named as a ``secret`` file is, is named by its size and
    mtime instead (never read)."""
    is_secret = secret_names(tuple(secret))
    found: dict[str, FileState] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in EXCLUDED_DIRS)
        for name in files:
            if TMP_MARK in name:
                continue
            full = Path(folder) / name
            with contextlib.suppress(OSError):
                st = full.lstat()
                if not full.is_file() or full.is_symlink():
                    continue
                rel = full.relative_to(root).as_posix()
                old = previous.get(rel)
                if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                    found[rel] = old
                elif (max_hash_bytes is not None and st.st_size > max_hash_bytes) or is_secret(name.lower()):
                    found[rel] = FileState(st.st_size, st.st_mtime_ns, _stat_id(st.st_size, st.st_mtime_ns))
                else:
                    found[rel] = FileState(st.st_size, st.st_mtime_ns, _sha_of(full))
                if len(found) > max_files:
                    raise TooManyFiles(f"{MANY_FILES} {max_files} files: it is not recorded")
    return found


class WorkspaceRecorder:
    """One run's record of its working directory (see the module docstring)."""

    def __init__(self, workdir: str | Path, config: WorkspaceConfig | None = None,
                 manifest: dict[str, FileState] | None = None, write_base: bool = False,
                 blobs: BlobStore | None = None, resolved: bool = False):
        """``manifest``: the files already there (a fork's restored folder, whose base is in its
        parent's record); without it, the first scan is the base.  ``write_base``: record
        ``manifest`` as the base all the same (a fork whose recorded prefix holds no base).
        ``blobs``: the blob store, already resolved (a fork's: its parent's, when the config's
        store is the same); ``resolved``: ``workdir`` is already absolute and resolved."""
        self.workdir = Path(workdir) if resolved else Path(workdir).resolve()
        self.config = config or WorkspaceConfig()
        if blobs is None:
            blobs = BlobStore(Path(self.config.store or default_store()).resolve())
        self.blobs = blobs
        self.manifest = manifest
        self.kept_bytes = 0
        self.limit: str | None = None
        self._base: str | None = None
        self._write_base = write_base
        self.stopped = False  # too many files: nothing is scanned any more

    def _keep(self, rel: str, state: FileState) -> None:
        """Keep a changed file's bytes, within the limits (past them, only its hash is recorded);
        a secret file's never (``scan`` named it by its stat)."""
        if self.config.is_secret(rel) or self.blobs.has(state.sha):
            return
        if state.size > self.config.max_file_bytes:
            self.limit = f"{rel} is {state.size} bytes, over max_file_bytes ({self.config.max_file_bytes})"
            return
        if self.kept_bytes + state.size > self.config.max_bytes:
            self.limit = f"the run kept {self.kept_bytes} bytes of files; max_bytes is {self.config.max_bytes}"
            return
        with contextlib.suppress(OSError):
            sha, written = self.blobs.put((self.workdir / rel).read_bytes())
            if sha != state.sha:  # changed under us between the scan and the read: keep what the scan saw
                state.sha = sha
            self.kept_bytes += written

    def _scan(self) -> dict[str, FileState] | None:
        if self.stopped or not self.workdir.is_dir():
            return None
        try:
            return scan(self.workdir, self.manifest or {}, self.config.max_files, self.config.max_file_bytes,
                        self.config.secret_files)
        except TooManyFiles as exc:
            self.stopped = True
            self.limit = str(exc)
            return None

    def before(self, tool_name: str) -> None:
        """Before a tool call: the first one takes the base."""
        if not self.config.enabled:
            return
        if self.manifest is None:
            current = self._scan()
            self.manifest = current if current is not None else {}
        elif not self._write_base:
            return
        self._write_base = False
        for rel, state in self.manifest.items():  # the base's bytes, in this run's own store
            self._keep(rel, state)
        listing = json.dumps({rel: s.sha for rel, s in sorted(self.manifest.items())}, sort_keys=True)
        self._base, written = self.blobs.put(listing.encode())
        self.kept_bytes += written

    def after(self, tool_name: str) -> dict[str, Any] | None:
        """After a tool call: the record of what it changed, or None when it changed nothing."""
        if not self.config.enabled or self.manifest is None:
            return None
        limit_before = self.limit
        current = None if tool_name in READ_ONLY_TOOLS else self._scan()  # a read changes nothing
        changed: dict[str, str] = {}
        deleted: list[str] = []
        kept = self.kept_bytes
        if current is not None:
            for rel, state in sorted(current.items()):
                old = self.manifest.get(rel)
                if old is None or old.sha != state.sha:
                    self._keep(rel, state)
                    changed[rel] = state.sha
            deleted = sorted(set(self.manifest) - set(current))
            self.manifest = current
        record: dict[str, Any] = {"store": str(self.blobs.root)}
        if self._base is not None:
            record["base"], self._base = self._base, None
        if not (changed or deleted or "base" in record or self.limit != limit_before):
            return None
        record.update(changed=changed, deleted=deleted, bytes=self.kept_bytes - kept)
        if self.limit is not None and self.limit != limit_before or (self.limit and "base" in record):
            record["limit"] = self.limit
        return record


# --- restoring a step -------------------------------------------------------------------------


@dataclass
class Restored:
    """What ``restore`` wrote, and why it may not be the parent's folder exactly."""

    folder: Path
    files: int = 0
    bytes: int = 0
    #: Why the folder may differ from the parent's at the step (empty: exact).
    problems: list[str] = field(default_factory=list)
    #: What a fork does not bring back, though the files are exact (the Python namespace...).
    caveats: list[str] = field(default_factory=list)
    #: The files written, as ``manifest_of(folder)`` would scan them right after (None: scan).
    manifest: dict[str, FileState] | None = field(default=None, repr=False)

    @property
    def exact(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "files": self.files, "bytes": self.bytes, "exact": self.exact,
                "problems": list(self.problems), "caveats": list(self.caveats)}


def records(events: Iterable[dict[str, Any]], before: int) -> list[tuple[int, dict[str, Any]]]:
    """The workspace records of the observations of iterations before ``before``, in order."""
    found = []
    for e in events:
        it = int(e.get("iteration") or 0)
        if e.get("type") == "observation" and it < before:
            rec = (e.get("data") or {}).get(DATA_KEY)
            if isinstance(rec, dict):
                found.append((it, rec))
    return found


def state_at(events: list[dict[str, Any]], k: int) -> tuple[dict[str, str], list[BlobStore], list[str], list[str], bool]:
    """The files (path -> sha) at the start of step ``k``, the stores that hold them, the problems
    met on the way (a missing base, a folder too big to scan), the limits hit (a file whose
    bytes were not kept is still exact if the parent's folder has the same content), and whether
    the trace holds a base at all (a run whose tools never wrote took none)."""
    problems: list[str] = []
    limits: list[str] = []
    stores: list[BlobStore] = []
    files: dict[str, str] = {}
    base_seen = False
    all_records = records(events, before=10**9)
    by_name: dict[str, BlobStore] = {}  # most records name the same store: one BlobStore each
    for it, rec in all_records:
        name = rec.get("store", "")
        store = by_name.get(name)
        if store is None:
            store = by_name[name] = BlobStore(name)
            if all(s.root != store.root for s in stores):
                stores.append(store)
        if "base" in rec and not base_seen:
            base_seen = True
            if not _digest(rec["base"]):
                raise UnsafeRecord(f"the workspace record of step {it} names its base by {str(rec['base'])[:80]!r}, "
                                   "which is not a digest")
            try:
                listing = json.loads(store.read(rec["base"]))
            except (OSError, ValueError):
                problems.append(f"the base listing {rec['base'][:12]} is not in the blob store {store.root}")
            else:
                files = dict(_check_files(listing, f"the base listing {rec['base'][:12]}"))
        if it >= k:
            continue
        if rec.get("limit"):
            (problems if MANY_FILES in rec["limit"] else limits).append(f"step {it}: {rec['limit']}")
        files.update(_check_files(rec.get("changed") or {}, f"the workspace record of step {it}"))
        for rel in rec.get("deleted") or ():
            if isinstance(rel, str):
                files.pop(rel, None)
    if not base_seen:
        ran = {int(e.get("iteration") or 0) for e in events if e.get("type") == "observation" and _ran(e)}
        writers = [e for e in events if e.get("type") == "action" and int(e.get("iteration") or 0) < k
                   and e.get("tool") not in READ_ONLY_TOOLS and e.get("tool")
                   and int(e.get("iteration") or 0) in ran]
        if writers:
            problems.append("the trace records no workspace (it ran before snapshots, or with them off): "
                            "the files its steps wrote are not restored")
    return files, stores, problems, limits, base_seen


#: How the error of an observation begins whose tool never ran: a call the person rejected
#: (``steering``), an unknown tool (``live.LiveTools``), parameters that do not fit
#: (``Tool.__call__``); and "NAME was not run: ", a call the tool policy refused (``ToolPolicy.refusal``).
_NOT_RUN = ("the person rejected this tool call", "unknown tool ", "invalid parameters: ")


def _ran(observation: dict[str, Any]) -> bool:
    """Whether the tool of a recorded observation ran (and so may have written)."""
    if observation.get("ok"):
        return True
    error = str(observation.get("error") or "")
    return not error.startswith((*_NOT_RUN, f"{observation.get('tool')} was not run: "))


def _copy_from(folder: Path | None, rel: str, sha: str) -> bytes | None:
    """The parent's file ``rel``, if it still has the recorded content."""
    if folder is None:
        return None
    candidate = folder / rel
    with contextlib.suppress(OSError):
        if not candidate.is_file():
            return None
        st = candidate.stat()
        same = (_stat_id(st.st_size, st.st_mtime_ns) == sha) if sha.startswith(STAT_PREFIX) else (
            _sha_of(candidate) == sha)
        if same:
            return candidate.read_bytes()
    return None


def restore(events: list[dict[str, Any]], k: int, target: str | Path,
            parent_workdir: str | Path | None = None, checked: bool = False,
            config: WorkspaceConfig | None = None) -> Restored:
    """Write the files of the start of step ``k`` into ``target`` (an empty folder, made here).

    Bytes come from the blob stores the records name; a file whose bytes were not kept (a limit)
    is taken from ``parent_workdir`` when it still holds the same content (read, never written).
    ``checked``: the caller has just found ``target`` empty or absent (``fork._folders``).
    ``config``: the parent's (which files it named secret), when it is known.
    """
    folder = Path(target)
    if not checked and folder.exists() and any(folder.iterdir()):
        raise ValueError(f"the fork's working directory {folder} is not empty")
    folder.mkdir(parents=True, exist_ok=True)
    made = {folder}  # folders that exist: a file's folder is made once, not asked for each file
    files, stores, problems, limits, based = state_at(events, k)
    done = Restored(folder, problems=list(problems), caveats=[f"a limit was hit ({x})" for x in limits])
    parent = Path(parent_workdir) if parent_workdir else None
    # What a scan of the folder would find, known from the writes: a scan reads and hashes every
    # file again.  Left to the scan where the writes may not be all it would find.
    cfg = config or WorkspaceConfig()
    manifest: dict[str, FileState] | None = {} if len(files) <= cfg.max_files else None
    if not based and not problems:
        # A trace with no base and no writer before step k (recorded when the base was taken by
        # the first tool that may write): the folder at step k is the one the run found, which
        # only the parent's folder still has.
        _copy_folder(parent, folder, done)
        manifest = None
    for rel, sha in sorted(files.items()):
        data = _read_blob(stores, sha)
        if data is None:
            data = _copy_from(parent, rel, sha)
        if data is None:
            if sha.startswith(STAT_PREFIX) and cfg.is_secret(rel):
                done.problems.append(f"{rel}: a file that holds keys is never kept in a snapshot, and the "
                                     "parent's folder no longer has it as it was")
                continue
            what = f"{sha.split('-')[1]} bytes" if sha.startswith(STAT_PREFIX) else sha[:12]
            done.problems.append(f"{rel}: its content ({what}) was not kept and the parent's folder no "
                                 "longer has it")
            continue
        path = folder / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        path.write_bytes(data)
        if sha.startswith(STAT_PREFIX):  # named by its size and mtime: the copy keeps the mtime, so that
            with contextlib.suppress(OSError, ValueError):  # a fork of this fork finds it the same
                mtime_ns = int(sha.rsplit("-", 1)[1])
                os.utime(path, ns=(mtime_ns, mtime_ns))
        done.files += 1
        done.bytes += len(data)
        if manifest is not None:
            manifest = _noted(manifest, rel, path, data, cfg)
    done.manifest = manifest
    tools = {str(e.get("tool")) for e in events if e.get("type") == "action" and int(e.get("iteration") or 0) < k}
    if tools & UNBOUNDED_TOOLS:
        done.caveats.append("steps before this one ran " + " and ".join(sorted(tools & UNBOUNDED_TOOLS))
                            + ": what they did outside the working directory, and Python variables they set, "
                            "are not restored")
    return done


def _read_blob(stores: list[BlobStore], sha: str) -> bytes | None:
    """The bytes of blob ``sha`` from the first store that has it (read where it is, not asked
    first whether it is there), or None."""
    for store in stores:
        with contextlib.suppress(OSError):
            return store.read(sha)
    return None


def _noted(manifest: dict[str, FileState], rel: str, path: Path, data: bytes,
           cfg: WorkspaceConfig) -> dict[str, FileState] | None:
    """``manifest`` with the file just written at ``path``, as ``scan`` would state it (None where
    a scan would not find it as written: an excluded folder, a temporary name, not a regular file)."""
    parts = PurePosixPath(rel).parts
    if not parts or TMP_MARK in parts[-1] or any(p in EXCLUDED_DIRS for p in parts[:-1]):
        return None
    try:
        st = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
        return None
    sha = _stat_id(st.st_size, st.st_mtime_ns) if st.st_size > cfg.max_file_bytes or cfg.is_secret(rel) \
        else hashlib.sha256(data).hexdigest()
    manifest[rel] = FileState(st.st_size, st.st_mtime_ns, sha)
    return manifest


def _copy_folder(parent: Path | None, folder: Path, done: Restored) -> None:
    """The parent's files as they are now, copied into ``folder`` (within the default limits)."""
    if parent is None or not parent.is_dir():
        done.caveats.append("no step wrote, so the trace holds no snapshot of the files the run found, "
                            "and the parent's folder is not here: the folder starts empty")
        return
    cfg = WorkspaceConfig()
    try:
        found = scan(parent, {}, cfg.max_files, cfg.max_file_bytes)
    except TooManyFiles as exc:
        done.problems.append(f"the parent's folder cannot be copied: {exc}")
        return
    for rel, state in sorted(found.items()):
        if done.bytes + state.size > cfg.max_bytes:
            done.problems.append(f"the parent's folder holds over max_bytes ({cfg.max_bytes}): {rel} and "
                                 "the files after it are not copied")
            return
        with contextlib.suppress(OSError):
            data = (parent / rel).read_bytes()
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            done.files += 1
            done.bytes += len(data)
    done.caveats.append("no step wrote, so the trace holds no snapshot of the files the run found: "
                        "they are copied from the parent's folder as it is now")


def manifest_of(folder: str | Path, config: WorkspaceConfig | None = None) -> dict[str, FileState]:
    """The files of a restored folder, as a recorder's starting manifest."""
    cfg = config or WorkspaceConfig()
    try:
        return scan(Path(folder).resolve(), {}, cfg.max_files, cfg.max_file_bytes, cfg.secret_files)
    except TooManyFiles:
        return {}


def remove(folder: str | Path) -> None:
    """Remove a folder a fork made (a fork that could not be started leaves nothing behind)."""
    shutil.rmtree(folder, ignore_errors=True)
