"""Long-horizon work: a plan file and a progress file that survive any crash.

``Agent(plan="features.json", progress="progress.md")``.  The plan is a JSON
list of ``{"id", "desc", "passes": false, "priority"}``; priority 1 is the most
urgent (like P1 before P2), ties go in file order.  One run works through the
plan feature by feature:

1. resume: the state is rebuilt from the files alone (plan, progress tail,
   ``git log``), never from a previous run's history;
2. act: the current feature is shown in the system prompt; when the agent
   calls ``finish`` the run does not end: the feature is marked
   ``passes: true``, ``done: <id> — <summary>`` is appended to the progress
   file, a git checkpoint is committed when the working directory is a git
   repository, and the next feature starts with a fresh queue (the previous
   trajectory goes to recall);
3. the run ends when every feature passes.

Files are written atomically (a temporary file, then ``os.replace``), and the
plan is written before the progress line, so a crash at any point leaves a
plan that never makes a finished feature run again.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

PROGRESS_TAIL_LINES = 20


class PlanError(ValueError):
    """A plan file that cannot be used as it is."""


def write_atomic(path: Path, text: str, *, parents: bool = True) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never half
    (a full disk leaves the old one as it was, and no temporary file).  ``parents``: make the
    folders it goes in."""
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.memfit-tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_plan(path: Path) -> list[dict[str, Any]]:
    """The features of a plan file, checked.  Raises PlanError with a one-line reason.

    The CLI and the magic call it before a run starts (``config.agent_kwargs``), so each way a
    path can fail to be a plan says which: a folder is not "missing", and a file that cannot be
    read (permissions, not text) is one line too, not an OSError's traceback."""
    if path.is_dir():
        raise PlanError(f"plan file {str(path)!r} is a folder: give the JSON file of the plan")
    if not path.is_file():
        raise PlanError(f"plan file {str(path)!r} does not exist: write a JSON list of "
                        '{"id", "desc", "passes": false, "priority"}')
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise PlanError(f"plan file {path.name} cannot be read ({exc.strerror or type(exc).__name__})") from None
    except UnicodeDecodeError:
        raise PlanError(f"plan file {path.name} is not text: it must hold a JSON list of features") from None
    except json.JSONDecodeError as exc:
        raise PlanError(f"plan file {path.name} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, list):
        raise PlanError(f"plan file {path.name} must hold a JSON list of features")
    seen = set()
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str | int):
            raise PlanError(f"plan file {path.name}: feature #{i + 1} needs an 'id'")
        if item["id"] in seen:
            raise PlanError(f"plan file {path.name}: feature id {item['id']!r} appears twice")
        seen.add(item["id"])
        priority = item.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int | float):
            raise PlanError(f"plan file {path.name}: feature {item['id']!r} has a priority that is not a number")
    return data


def next_feature(features: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The most urgent feature that does not pass yet (priority 1 first, then file order)."""
    pending = [(f.get("priority", 0), i, f) for i, f in enumerate(features) if not f.get("passes")]
    return min(pending, key=lambda t: (t[0], t[1]))[2] if pending else None


def is_git_repo(workdir: Path) -> bool:
    try:
        proc = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=workdir,
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def git_commit(workdir: Path, message: str) -> str:
    """Commit everything under ``workdir``; return the short hash, or raise RuntimeError."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=workdir, capture_output=True, text=True, timeout=60)

    identity: list[str] = []
    if not git("config", "user.email").stdout.strip():  # a fresh machine: commit anyway
        identity = ["-c", "user.name=memfit", "-c", "user.email=memfit@localhost"]
    # The memory store changes on every run and has its own durability: keep it out of checkpoints.
    git("add", "-A", "--", ".", ":(exclude).memfit")
    proc = git(*identity, "commit", "--allow-empty", "-q", "-m", message)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(lines[-1] if lines else "git commit failed")
    return git("rev-parse", "--short", "HEAD").stdout.strip()


def git_log(workdir: Path, n: int = 10) -> str:
    proc = subprocess.run(["git", "log", "--oneline", f"-{n}"], cwd=workdir, capture_output=True,
                          text=True, timeout=10)
    return proc.stdout.strip() if proc.returncode == 0 else ""


class LongHorizon:
    """The plan and progress files of one run."""

    def __init__(self, workdir: Path, plan: str | None, progress: str | None):
        self.workdir = workdir
        self.plan_path = (workdir / plan) if plan else None
        if progress is None and plan is not None:
            progress = "progress.md"
        self.progress_path = (workdir / progress) if progress else None
        self.features: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.git = False
        #: Features marked done by this run, in order.
        self.done_here: list[str] = []

    # --- state from the files alone -------------------------------------------------------
    def load(self) -> None:
        """Read the plan (raises PlanError) and pick the current feature."""
        self.git = is_git_repo(self.workdir)
        if self.plan_path is not None:
            self.features = load_plan(self.plan_path)
            self.current = next_feature(self.features)

    def progress_tail(self, lines: int = PROGRESS_TAIL_LINES) -> str:
        if self.progress_path is None or not self.progress_path.is_file():
            return ""
        return "\n".join(self.progress_path.read_text().splitlines()[-lines:])

    def resume_note(self) -> str:
        """What a fresh run needs to know, rebuilt from the plan, the progress file and git."""
        parts = []
        if self.features and self.plan_path is not None:
            passed = [str(f["id"]) for f in self.features if f.get("passes")]
            tag = "[RESUME]" if passed else "[PLAN]"
            parts.append(f"{tag} Plan {self.plan_path.name}: {len(passed)} of {len(self.features)} "
                         f"feature(s) pass" + (f" ({', '.join(passed)}); do not redo them." if passed else "."))
        tail = self.progress_tail()
        if tail and self.progress_path is not None:
            parts.append(f"Progress file {self.progress_path.name} (last lines):\n{tail}")
        if self.git:
            log = git_log(self.workdir)
            if log:
                parts.append(f"git log:\n{log}")
        return "\n\n".join(parts)

    def section(self) -> str:
        if self.current is None:
            return ""
        done = sum(1 for f in self.features if f.get("passes"))
        return (f"Long-horizon plan ({done}/{len(self.features)} features pass). "
                f"Current feature: {self.current['id']} — {self.current.get('desc', '')}\n"
                "Work on this feature only. When it is done and checked, call finish with a one-line "
                "summary: the feature is then marked as passing and the next one is given to you.")

    # --- persisting ----------------------------------------------------------------------
    def mark_done(self, summary: str) -> dict[str, Any]:
        """Mark the current feature as passing; append progress; checkpoint. Returns what happened."""
        feature, plan_path = self.current, self.plan_path
        if feature is None or plan_path is None:  # only a loaded plan has a current feature
            return {"final": True}
        fid = feature["id"]
        # Re-read the plan: a person may have edited it while the agent worked.
        features = load_plan(plan_path)
        for f in features:
            if f["id"] == fid:
                f["passes"] = True
        write_atomic(plan_path, json.dumps(features, indent=2, ensure_ascii=False) + "\n")
        line = " ".join(summary.split())[:300]
        self.append_progress(f"done: {fid} — {line}")
        info: dict[str, Any] = {"feature_done": fid}
        if self.git:
            try:
                info["commit"] = git_commit(self.workdir, f"feat: {fid}")
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                info["commit_error"] = str(exc)
        self.features = features
        self.done_here.append(str(fid))
        self.current = next_feature(features)
        info["next"] = None if self.current is None else self.current["id"]
        info["final"] = self.current is None
        return info

    def note_flush(self, summary: str) -> None:
        """Keep a context flush's summary in the progress file, so that a resumed run sees it."""
        current = self.current["id"] if self.current else "-"
        self.append_progress(f"note: context flush during {current}: {' '.join(summary.split())[:300]}")

    def append_progress(self, line: str) -> None:
        if self.progress_path is None:
            return
        old = self.progress_path.read_text() if self.progress_path.is_file() else ""
        if old and not old.endswith("\n"):
            old += "\n"
        write_atomic(self.progress_path, old + line + "\n")
