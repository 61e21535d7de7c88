"""The working directory, step by step: what each step changed, kept so that a fork can start
from the files as they were at any step.

A live run's tool runner (``live.LiveTools``) scans the working directory before the run's
first tool call, whatever the tool (the *base*: the files as the run found them, scenario files
included; a run that only reads is forked from them too), and after each call that may write.
A scan hashes a file again when its size, mtime, inode or change time moved (a file swapped by
``mv`` or rewritten with its mtime set back is a change; a change time cannot be set), or when
it changed so recently that a second write in the same timestamp tick would not show.
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
     "limit": "why content was not kept",                            # when a limit was hit
     "unread": ["path", "folder/"]}                                  # when what could not be read changed

A manifest entry (in ``changed`` and the base) is a file's ``<sha>`` (``+x`` after it: the
owner may execute it; the rest of a mode is not kept), ``link:<target>`` for a symbolic link
(restored when it points inside the folder) or ``dir`` for a folder that holds nothing recorded.
A file that cannot be read, or a folder that cannot be listed, keeps the state it was last read
in (a new one is named by its stat) and is listed in ``unread`` while that lasts.

Restoring step k (``restore``) is the base plus the changes of the steps before k, written into
an empty folder.  What cannot be exact is said: a limit hit (a file's bytes were not kept and the
parent's folder no longer holds them), a file that could not be read, a link that points out of
the folder, a trace with no records, effects outside the folder.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import json
import os
import posixpath
import re
import shutil
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from .known import note_folder

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
        """Whether blob ``sha`` is kept; one that is is marked used now (its mtime, which ``prune``
        goes by: a blob is written once, and a later run that changes a file back to it uses it)."""
        path = self.path(sha)
        try:
            os.utime(path)
        except FileNotFoundError:
            return False
        except OSError:  # a store this user may read, not write
            return path.is_file()
        return True

    def put(self, data: bytes) -> tuple[str, int]:
        """Keep ``data``; its SHA-256 and the bytes written (0 when it was already there)."""
        sha = hashlib.sha256(data).hexdigest()
        target = self.path(sha)
        if self.has(sha):
            return sha, 0
        target.parent.mkdir(parents=True, exist_ok=True)
        # A name of its own: two runs of one kernel (threads) may put the same bytes at once.
        tmp = target.with_name(f".{sha}.{os.getpid()}.{os.urandom(6).hex()}{TMP_MARK}")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return sha, len(data)

    def read(self, sha: str) -> bytes:
        path = self.path(sha)
        data = path.read_bytes()
        with contextlib.suppress(OSError):  # a fork restored from it: used now
            os.utime(path)
        return data

    def shards(self) -> list[Path]:
        """The store's own folders, ``<root>/<sha[:2]>``: two lowercase hex digits, real folders
        (a link of that name may lead anywhere)."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if _SHARD.fullmatch(p.name) and p.is_dir() and not p.is_symlink())

    def blobs(self) -> Iterator[tuple[Path, os.stat_result]]:
        """Every blob kept, with its stat (a temporary file a put left behind too)."""
        for folder in self.shards():
            for path in folder.iterdir():
                with contextlib.suppress(OSError):
                    if _BLOB.fullmatch(path.name) or TMP_MARK in path.name:
                        yield path, path.stat()

    def prune(self, older_than_s: float, now: float | None = None) -> tuple[int, int]:
        """Remove the blobs no run has kept or read for ``older_than_s`` seconds: how many, and
        their bytes.  A fork of a run that used one says which file it could not restore.

        Nothing but the blobs and the shard folders they leave empty is removed: the root may be a
        folder named by mistake (``--store .``), whose own empty folders are not the store's.  A
        root that holds things and no shard folder is not a blob store: ValueError, one line, and
        nothing is touched."""
        if not self.shards() and self.root.is_dir():
            others = sorted(p.name for p in self.root.iterdir() if not p.name.startswith("."))
            if others:
                raise ValueError(f"{self.root} is not a blob store: it holds {others[0]!r}"
                                 f"{f' and {len(others) - 1} more' if len(others) > 1 else ''} but no folder of blobs "
                                 "(named by two hex digits); nothing was pruned")
        cutoff = (time.time() if now is None else now) - older_than_s
        removed = freed = 0
        for path, st in list(self.blobs()):
            if st.st_mtime < cutoff:
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed, freed = removed + 1, freed + st.st_size
        for folder in self.shards():
            with contextlib.suppress(OSError):
                folder.rmdir()  # only an empty one goes
        return removed, freed


#: A manifest entry's mark of a file its owner may execute, of a symbolic link, of an empty folder.
EXEC_MARK = "+x"
LINK_PREFIX = "link:"
DIR_ENTRY = "dir"
#: A file changed less than this before a scan is hashed again at the next one: a second write in
#: the same timestamp tick (a jiffy on Linux, up to 2 s on FAT) leaves its stat as it was.
RECHECK_NS = 2 * 10**9


@dataclass(slots=True)
class FileState:
    """What a scan found at a path: a file (``sha``: its content's SHA-256, or its stat id), a
    symbolic link (``link:`` and its target) or an empty folder (``dir``).  The stat fields tell
    whether it must be read again: a user can set an mtime back, not a change time."""

    size: int
    mtime_ns: int
    sha: str
    ino: int = 0
    ctime_ns: int = 0
    executable: bool = False
    #: Changed just before the scan (or not readable): the next scan reads it again.
    recheck: bool = field(default=False, compare=False)

    @property
    def entry(self) -> str:
        """The manifest's entry for it."""
        return self.sha + EXEC_MARK if self.executable else self.sha

    @property
    def is_file(self) -> bool:
        return self.sha != DIR_ENTRY and not self.sha.startswith(LINK_PREFIX)


def _sha_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


MANY_FILES = "the working directory holds more than"


class TooManyFiles(Exception):
    """The folder holds more files than ``WorkspaceConfig.max_files``."""


#: How a file too large to keep is named instead of by its hash: its size and mtime (reading
#: gigabytes of data files at every step would cost more than the step).
STAT_PREFIX = "stat-"
#: A blob's name, and a file's content as a manifest entry names it (an mtime before 1970 is negative).
_BLOB = re.compile(r"[0-9a-f]{64}")
#: A blob store's shard folder: the first two hex digits of its blobs' names.
_SHARD = re.compile(r"[0-9a-f]{2}")
_CONTENT = re.compile(r"(?:[0-9a-f]{64}|stat-([0-9]+)-(-?[0-9]+))(?:\+x)?")


class UnsafeRecord(ValueError):
    """A trace's workspace record that a fork must not follow: a path outside the working
    directory, a blob name that is not a digest, a field of another type, a path under a file
    (a damaged or hand-made trace: a recording never holds one)."""


def safe_rel(rel: Any) -> bool:
    """Whether ``rel`` is a path inside a folder, as ``scan`` records one (relative, no ``..``)."""
    if not isinstance(rel, str) or not rel or "\x00" in rel:
        return False
    path = PurePosixPath(rel)
    return not path.is_absolute() and ".." not in path.parts and rel == path.as_posix()


def _digest(sha: Any) -> bool:
    """Whether ``sha`` names a blob as the store names one (a SHA-256)."""
    return isinstance(sha, str) and _BLOB.fullmatch(sha) is not None


def _entry_ok(entry: Any) -> bool:
    """Whether ``entry`` is a manifest entry as ``FileState.entry`` makes one."""
    if not isinstance(entry, str):
        return False
    if entry.startswith(LINK_PREFIX):
        return len(entry) > len(LINK_PREFIX) and "\x00" not in entry
    return entry == DIR_ENTRY or _CONTENT.fullmatch(entry) is not None


def _check_files(files: Any, where: str) -> dict[str, str]:
    if not isinstance(files, dict):
        raise UnsafeRecord(f"{where} lists its files as {type(files).__name__}, not as path -> digest")
    for rel, sha in files.items():
        if not safe_rel(rel):
            raise UnsafeRecord(f"{where} names a file outside the working directory: {str(rel)[:80]!r}")
        if not _entry_ok(sha):
            raise UnsafeRecord(f"{where} names the content of {rel} by {str(sha)[:80]!r}, which is not a digest")
    return files


def _check_paths(paths: Any, where: str, what: str) -> list[str]:
    if paths is None:
        return []
    if not isinstance(paths, list) or not all(isinstance(rel, str) for rel in paths):
        raise UnsafeRecord(f"{where} lists its {what} as {type(paths).__name__}, not as a list of paths")
    return paths


def _check_tree(files: dict[str, str]) -> None:
    """Refuse a state that lists a path under another entry (``a.txt`` and ``a.txt/b``): no
    folder holds both, and writing the second would go through the first."""
    folders: set[str] = set()
    for rel in files:
        parent = rel.rpartition("/")[0]
        while parent and parent not in folders:
            if parent in files:
                raise UnsafeRecord(f"the workspace records list {rel[:80]!r} under {parent[:80]!r}, "
                                   "which they list as a file, a link or an empty folder")
            folders.add(parent)
            parent = parent.rpartition("/")[0]


def _stat_id(size: int, mtime_ns: int) -> str:
    return f"{STAT_PREFIX}{size}-{mtime_ns}"


def _stat_of(sha: str) -> tuple[int, int] | None:
    """The size and mtime a stat id names (None: ``sha`` is a hash)."""
    match = _CONTENT.fullmatch(sha)
    return (int(match[1]), int(match[2])) if match is not None and match[1] is not None else None


def scan(root: Path, previous: dict[str, FileState], max_files: int,
         max_hash_bytes: int | None = None, secret: tuple[str, ...] = SECRET_FILES,
         unread: list[str] | None = None) -> dict[str, FileState]:
    """The files, symbolic links and empty folders under ``root`` (relative POSIX paths), a file
    hashed where its stat moved since ``previous`` or it was due a recheck; a file over
    ``max_hash_bytes``, or named as a ``secret`` file is, is named by its size and mtime instead
    (never read).  A file that cannot be read, or a folder that cannot be listed, keeps its
    ``previous`` state (a new file is named by its stat) and is added to ``unread`` (a folder
    with a final ``/``)."""
    is_secret = secret_names(tuple(secret))
    found: dict[str, FileState] = {}
    not_read = unread if unread is not None else []
    recent = time.time_ns() - RECHECK_NS

    def keep_previous(rel: str, st: os.stat_result | None) -> None:
        not_read.append(rel)
        old = previous.get(rel)
        if old is not None:
            found[rel] = replace(old, recheck=True)
        elif st is not None:
            found[rel] = FileState(st.st_size, st.st_mtime_ns, _stat_id(st.st_size, st.st_mtime_ns), st.st_ino,
                                   st.st_ctime_ns, bool(st.st_mode & stat.S_IXUSR), True)

    def walk(folder: str, prefix: str) -> int:
        """Scan ``folder`` (``prefix``: its path and a ``/``); the entries recorded under it."""
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except FileNotFoundError:
            return 0
        except OSError:  # not listable: what it held is as it was last listed
            not_read.append(prefix or "./")
            held = [rel for rel in previous if rel.startswith(prefix)]
            found.update((rel, previous[rel]) for rel in held)
            if prefix and not held:
                found[prefix[:-1]] = FileState(0, 0, DIR_ENTRY)
            return len(held) or 1
        count = 0
        for entry in entries:
            name = entry.name
            rel = prefix + name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name not in EXCLUDED_DIRS:
                        count += walk(entry.path, rel + "/")
                    continue
                if name.endswith(TMP_MARK):
                    continue
                st = entry.stat(follow_symlinks=False)
                old = previous.get(rel)
                if (old is not None and not old.recheck and old.ino == st.st_ino and old.ctime_ns == st.st_ctime_ns
                        and old.mtime_ns == st.st_mtime_ns and old.size == st.st_size):
                    found[rel] = old
                elif stat.S_ISREG(st.st_mode):
                    size = st.st_size
                    if (max_hash_bytes is not None and size > max_hash_bytes) or is_secret(name.lower()):
                        sha = _stat_id(size, st.st_mtime_ns)
                    else:
                        try:
                            sha = _sha_of(entry.path)
                        except FileNotFoundError:
                            continue
                        except OSError:
                            keep_previous(rel, st)
                            count += 1
                            continue
                    found[rel] = FileState(size, st.st_mtime_ns, sha, st.st_ino, st.st_ctime_ns,
                                           bool(st.st_mode & stat.S_IXUSR), st.st_ctime_ns >= recent)
                elif stat.S_ISLNK(st.st_mode) and name not in EXCLUDED_DIRS:
                    found[rel] = FileState(st.st_size, st.st_mtime_ns, LINK_PREFIX + os.readlink(entry.path),
                                           st.st_ino, st.st_ctime_ns)
                else:  # a socket, a pipe, a device: nothing a folder can be given back
                    continue
            except FileNotFoundError:  # removed while the scan ran
                continue
            except OSError:
                keep_previous(rel, None)
                if rel not in found:
                    continue
            count += 1
            if len(found) > max_files:
                raise TooManyFiles(f"{MANY_FILES} {max_files} files: it is not recorded")
        if not count and prefix:
            found[prefix[:-1]] = FileState(0, 0, DIR_ENTRY)
            count = 1
        return count

    walk(str(root), "")
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
        note_folder(self.workdir)  # a fork of this run's saved trace may read it (known.py)
        self.config = config or WorkspaceConfig()
        if blobs is None:
            blobs = BlobStore(Path(self.config.store or default_store()).resolve())
        self.blobs = blobs
        self.manifest = manifest
        self.kept_bytes = 0
        self.limit: str | None = None
        self._limit_said: str | None = None  # the limit as the last record said it
        self._base: str | None = None
        self._write_base = write_base
        self.stopped = False  # too many files: nothing is scanned any more
        self.unread: list[str] = []  # what the last scan could not read (kept as it was)
        self._unread_said: list[str] = []  # ... as the last record said it

    def _keep(self, rel: str, state: FileState) -> None:
        """Keep a changed file's bytes, within the limits (past them, only its hash is recorded);
        a secret file's never (``scan`` named it by its stat); a link's or a folder's: none."""
        if not state.is_file or self.config.is_secret(rel) or self.blobs.has(state.sha):
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
        unread: list[str] = []
        try:
            found = scan(self.workdir, self.manifest or {}, self.config.max_files, self.config.max_file_bytes,
                         self.config.secret_files, unread)
        except TooManyFiles as exc:
            self.stopped = True
            self.limit = str(exc)
            return None
        self.unread = sorted(unread)
        return found

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
        listing = json.dumps({rel: s.entry for rel, s in sorted(self.manifest.items())}, sort_keys=True)
        try:
            self._base, written = self.blobs.put(listing.encode())
        except OSError as exc:  # the tool runs all the same; forks of the run say they are not exact
            self.limit = f"the base listing could not be kept in {self.blobs.root}: {exc.strerror or exc}"
            return
        self.kept_bytes += written

    def after(self, tool_name: str) -> dict[str, Any] | None:
        """After a tool call: the record of what it changed, or None when it changed nothing."""
        if not self.config.enabled or self.manifest is None:
            return None
        current = None if tool_name in READ_ONLY_TOOLS else self._scan()  # a read changes nothing
        changed: dict[str, str] = {}
        deleted: list[str] = []
        kept = self.kept_bytes
        if current is not None:
            manifest = self.manifest
            moved = [rel for rel, state in current.items() if manifest.get(rel) is not state]  # most are the same object
            for rel in sorted(moved):
                old, state = manifest.get(rel), current[rel]
                if old is None or old.entry != state.entry:
                    self._keep(rel, state)
                    changed[rel] = state.entry
            deleted = sorted(set(self.manifest) - set(current))
            self.manifest = current
        record: dict[str, Any] = {"store": str(self.blobs.root)}
        if self._base is not None:
            record["base"], self._base = self._base, None
        limit_changed = self.limit != self._limit_said  # since the last record: in before() too
        unread_changed = self.unread != self._unread_said
        if not (changed or deleted or "base" in record or limit_changed or unread_changed):
            return None
        record.update(changed=changed, deleted=deleted, bytes=self.kept_bytes - kept)
        if limit_changed:
            record["limit"] = self._limit_said = self.limit
        if unread_changed:
            record["unread"] = self._unread_said = self.unread
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
    """The files (path -> manifest entry) at the start of step ``k``, the stores that hold them,
    the problems met on the way (a missing base, a folder too big to scan, what could not be
    read), the limits hit (a file whose bytes were not kept is still exact if the parent's folder
    has the same content), and whether the trace holds a base at all (a run whose tools never
    wrote took none).  A record a fork must not follow raises ``UnsafeRecord``."""
    problems: list[str] = []
    limits: list[str] = []
    stores: list[BlobStore] = []
    files: dict[str, str] = {}
    base_seen = False
    unread: tuple[int, list[str]] = (0, [])  # what could not be read, as the last record before k says
    all_records = records(events, before=10**9)
    by_name: dict[str, BlobStore] = {}  # most records name the same store: one BlobStore each
    for it, rec in all_records:
        where = f"the workspace record of step {it}"
        name = rec.get("store", "")
        if not isinstance(name, str):
            raise UnsafeRecord(f"{where} names its blob store by {type(name).__name__}, not by a folder")
        limit = rec.get("limit")
        if limit is not None and not isinstance(limit, str):
            raise UnsafeRecord(f"{where} gives its limit as {type(limit).__name__}, not as text")
        store = by_name.get(name)
        if store is None:
            store = by_name[name] = BlobStore(name)
            if all(s.root != store.root for s in stores):
                stores.append(store)
        first = "base" in rec and not base_seen
        if first:
            base_seen = True
            if not _digest(rec["base"]):
                raise UnsafeRecord(f"{where} names its base by {str(rec['base'])[:80]!r}, which is not a digest")
            try:
                listing = json.loads(store.read(rec["base"]))
            except (OSError, ValueError):
                problems.append(f"the base listing {rec['base'][:12]} is not in the blob store {store.root}")
            else:
                files = dict(_check_files(listing, f"the base listing {rec['base'][:12]}"))
        if it >= k:
            # The base was taken before step ``it``: what it could not hold is said at any step.
            if first and limit and MANY_FILES in limit:
                problems.append(f"step {it}: {limit}")
            if first and rec.get("unread"):
                unread = (it, _check_paths(rec["unread"], where, "unread paths"))
            continue
        if limit:
            (problems if MANY_FILES in limit else limits).append(f"step {it}: {limit}")
        files.update(_check_files(rec.get("changed") or {}, where))
        for rel in _check_paths(rec.get("deleted"), where, "deleted files"):
            files.pop(rel, None)
        if "unread" in rec:
            unread = (it, _check_paths(rec["unread"], where, "unread paths"))
    for rel in unread[1]:
        what = "listed" if rel.endswith("/") else "read"
        problems.append(f"{rel[:200]}: could not be {what} when step {unread[0]} was recorded: the fork has it "
                        f"as it was last {what}, or from the parent's folder, which may differ")
    _check_tree(files)
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
        st = candidate.lstat()
        if not stat.S_ISREG(st.st_mode):
            return None
        named = _stat_of(sha)
        if named is not None:
            return candidate.read_bytes() if (st.st_size, st.st_mtime_ns) == named else None
        data = candidate.read_bytes()  # read once: hashed here, written by the caller
        return data if hashlib.sha256(data).hexdigest() == sha else None
    return None


def restore(events: list[dict[str, Any]], k: int, target: str | Path,
            parent_workdir: str | Path | None = None, checked: bool = False,
            config: WorkspaceConfig | None = None, withheld: str | None = None) -> Restored:
    """Write the files of the start of step ``k`` into ``target`` (an empty folder, made here).

    Bytes come from the blob stores the records name; a file whose bytes were not kept (a limit)
    is taken from ``parent_workdir`` when it still holds the same content (read, never written).
    ``checked``: the caller has just found ``target`` empty or absent (``fork._folders``).
    ``config``: the parent's (which files it named secret), when it is known.  ``withheld``: why
    ``parent_workdir`` may not be read (a folder a saved trace names), said in each problem
    where it would have been.  A damaged record raises ``UnsafeRecord`` before anything is written.
    """
    folder = Path(target)
    if not checked and folder.exists() and any(folder.iterdir()):
        raise ValueError(f"the fork's working directory {folder} is not empty")
    files, stores, problems, limits, based = state_at(events, k)
    folder.mkdir(parents=True, exist_ok=True)
    made = {folder}  # folders that exist: a file's folder is made once, not asked for each file
    done = Restored(folder, problems=list(problems), caveats=[f"a limit was hit ({x})" for x in limits])
    parent = Path(parent_workdir) if parent_workdir and not withheld else None
    closed = f"the parent's folder {parent_workdir} {withheld}" if parent_workdir and withheld else ""
    # What a scan of the folder would find, known from the writes: a scan reads and hashes every
    # file again.  Left to the scan where the writes may not be all it would find.
    cfg = config or WorkspaceConfig()
    manifest: dict[str, FileState] | None = {} if len(files) <= cfg.max_files else None
    if not based and not problems:
        # A trace with no base and no writer before step k (recorded when the base was taken by
        # the first tool that may write): the folder at step k is the one the run found, which
        # only the parent's folder still has.
        if closed:
            done.problems.append(f"no step wrote, so the trace holds no snapshot of the files the run found, and {closed}")
        else:
            _copy_folder(parent, folder, done, cfg)
        manifest = None
    links: list[tuple[str, str]] = []
    for rel, entry in sorted(files.items()):
        if entry.startswith(LINK_PREFIX):
            links.append((rel, entry[len(LINK_PREFIX):]))
            continue
        data: bytes | None = None
        executable = entry.endswith(EXEC_MARK)
        sha = entry[:-len(EXEC_MARK)] if executable else entry
        named = None
        if entry != DIR_ENTRY:
            named = _stat_of(sha)
            data = None if named is not None else _read_blob(stores, sha)  # a stat names no blob
            if data is None:
                data = _copy_from(parent, rel, sha)
            if data is None:
                if named is not None and cfg.is_secret(rel):
                    done.problems.append(f"{rel}: a file that holds keys is never kept in a snapshot, and " + (
                        closed or "the parent's folder no longer has it as it was"))
                    continue
                what = f"{named[0]} bytes" if named is not None else sha[:12]
                done.problems.append(f"{rel}: its content ({what}) was not kept and " + (
                    closed or "the parent's folder no longer has it"))
                continue
        path = folder / rel
        try:  # named by its size and mtime: the copy keeps the mtime, so that a fork of this fork finds it the same
            _write(path, data, executable, named[1] if named is not None else None, made)
        except OSError as exc:
            done.problems.append(f"{rel}: cannot be written in the fork's folder: {exc.strerror or exc}")
            manifest = None
            continue
        if data is not None:
            done.files += 1
            done.bytes += len(data)
        if manifest is not None:
            manifest = _noted(manifest, rel, path, entry, data, cfg)
    done.manifest = _links(folder, links, done, manifest, cfg)
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


def _write(path: Path, data: bytes | None, executable: bool, mtime_ns: int | None, made: set[Path]) -> None:
    """Write a file (an empty folder: ``data`` None), executable as ``chmod +x`` makes one (the
    umask decides the rest of the mode), with ``mtime_ns`` when given."""
    if data is None:
        path.mkdir(parents=True, exist_ok=True)
        made.add(path)
        return
    if path.parent not in made:
        path.parent.mkdir(parents=True, exist_ok=True)
        made.add(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                 0o777 if executable else 0o666)
    with open(fd, "wb") as f:
        f.write(data)
    if mtime_ns is not None:
        with contextlib.suppress(OSError, ValueError, OverflowError):
            os.utime(path, ns=(mtime_ns, mtime_ns))


def _links(folder: Path, links: list[tuple[str, str]], done: Restored,
           manifest: dict[str, FileState] | None, cfg: WorkspaceConfig) -> dict[str, FileState] | None:
    """Make the symbolic links (after the files: nothing is written through one) that point
    inside ``folder``; one that would lead out of it, where a fork's writes would reach files not
    its own (the parent's, by an absolute path), is not made, and said."""
    real = os.path.realpath(folder)
    made: list[tuple[str, Path, str]] = []
    for rel, target in links:
        lexical = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if target.startswith("/") or lexical == ".." or lexical.startswith("../"):
            done.problems.append(f"{rel}: a symbolic link to {target[:200]}, outside the working directory: not restored")
            continue
        path = folder / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, path)
        except OSError as exc:
            done.problems.append(f"{rel}: cannot be written in the fork's folder: {exc.strerror or exc}")
            manifest = None
            continue
        made.append((rel, path, target))
    for rel, path, target in made:  # through another link, a target inside by its text may lead out
        reached = os.path.realpath(path)
        if reached != real and not reached.startswith(real + os.sep):
            with contextlib.suppress(OSError):
                path.unlink()
            done.problems.append(f"{rel}: a symbolic link to {target[:200]}, outside the working directory: not restored")
            if manifest is not None:
                manifest.pop(rel, None)
            continue
        done.files += 1
        if manifest is not None:
            manifest = _noted(manifest, rel, path, LINK_PREFIX + target, None, cfg)
    return manifest


def _noted(manifest: dict[str, FileState], rel: str, path: Path, entry: str, data: bytes | None,
           cfg: WorkspaceConfig) -> dict[str, FileState] | None:
    """``manifest`` with the entry just written at ``path``, as ``scan`` would state it (None where
    a scan would not find it as written: an excluded folder, a temporary name, another kind)."""
    parts = PurePosixPath(rel).parts
    if not parts or any(p in EXCLUDED_DIRS for p in parts[:-1]):
        return None
    try:
        st = path.lstat()
    except OSError:
        return None
    if data is None:  # an empty folder, a link
        link = entry.startswith(LINK_PREFIX)
        if parts[-1] in EXCLUDED_DIRS or not (stat.S_ISLNK if link else stat.S_ISDIR)(st.st_mode):
            return None
        manifest[rel] = FileState(st.st_size, st.st_mtime_ns, entry, st.st_ino, st.st_ctime_ns) if link \
            else FileState(0, 0, DIR_ENTRY)
        return manifest
    if parts[-1].endswith(TMP_MARK) or not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
        return None
    sha = _stat_id(st.st_size, st.st_mtime_ns) if st.st_size > cfg.max_file_bytes or cfg.is_secret(rel) \
        else hashlib.sha256(data).hexdigest()
    # Not marked for a second reading: these are the bytes just written and hashed here (a scan
    # would read every restored file again, which is what this manifest saves).
    manifest[rel] = FileState(st.st_size, st.st_mtime_ns, sha, st.st_ino, st.st_ctime_ns,
                              bool(st.st_mode & stat.S_IXUSR))
    return manifest


def _copy_folder(parent: Path | None, folder: Path, done: Restored, cfg: WorkspaceConfig) -> None:
    """The parent's files as they are now, copied into ``folder`` (within the parent's limits, ``cfg``)."""
    if parent is None or not parent.is_dir():
        done.caveats.append("no step wrote, so the trace holds no snapshot of the files the run found, "
                            "and the parent's folder is not here: the folder starts empty")
        return
    unread: list[str] = []
    try:
        found = scan(parent, {}, cfg.max_files, cfg.max_file_bytes, unread=unread)
    except TooManyFiles as exc:
        done.problems.append(f"the parent's folder cannot be copied: {exc}")
        return
    done.problems += [f"{rel[:200]}: cannot be read in the parent's folder: not copied" for rel in unread]
    made = {folder}
    links: list[tuple[str, str]] = []
    for rel, state in sorted(found.items()):
        if not state.is_file:
            if state.sha == DIR_ENTRY:
                _write(folder / rel, None, False, None, made)
            else:
                links.append((rel, state.sha[len(LINK_PREFIX):]))
            continue
        if done.bytes + state.size > cfg.max_bytes:
            done.problems.append(f"the parent's folder holds over max_bytes ({cfg.max_bytes}): {rel} and "
                                 "the files after it are not copied")
            return
        with contextlib.suppress(OSError):
            data = (parent / rel).read_bytes()
            _write(folder / rel, data, state.executable, None, made)
            done.files += 1
            done.bytes += len(data)
    _links(folder, links, done, None, cfg)
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
