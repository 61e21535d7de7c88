"""Sweeps on a real local Ray (``ray.init(num_cpus=2)``): the 24 runs give the results they give
one by one; a sweep killed mid-way resumes without redoing its finished runs; a Ray worker
killed mid-run is retried.

Ray runs in a child process (tests/sweep_ray_child.py): ``ray.init`` once aborted the process
that called it, in Ray's own GCS client, and that must cost this test, not the whole pytest
run.  Only when Ray does not come up (the child dies before it prints ``RAY_STARTED``) is the
child started again; after three such starts the test is skipped, saying why.  Whatever
happens once Ray is up counts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_sweep import GRID, SHARED, TASKS, solo_results

from memfit_jupyter.sweep.spec import expand

pytestmark = pytest.mark.slow  # a local Ray cluster in a child process

ROOT = Path(__file__).resolve().parents[1]
CHILD = ROOT / "tests" / "sweep_ray_child.py"
KEYS = ("status", "iterations", "cost_usd")


def _ray_log_tail(since: float) -> str:
    """The fatal line of the newest raylet log written since ``since``: why Ray did not start."""
    logs = sorted((p for p in Path("/tmp/ray").glob("session_*/logs/raylet.out") if p.stat().st_mtime >= since),
                  key=lambda p: p.stat().st_mtime)
    if not logs:
        return ""
    fatal = [li for li in logs[-1].read_text(errors="replace").splitlines() if " C " in li[:40] or "Check failed" in li]
    return (fatal or [""])[-1][:300]


def _start(out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen([sys.executable, str(CHILD), str(out), *extra], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def _started(proc: subprocess.Popen) -> str:
    """Read the child's lines until Ray is up: the last of RAY_STARTING / RAY_STARTED it printed."""
    seen = ""
    for line in proc.stdout:
        if line.strip() in ("RAY_STARTING", "RAY_STARTED"):
            seen = line.strip()
            if seen == "RAY_STARTED":
                return seen
    proc.wait()
    return seen


def _with_ray(out: Path, *extra: str) -> subprocess.Popen:
    """A child with Ray up, or a skip once ``ray.init`` failed three times."""
    why = ""
    for _ in range(3):
        since = time.time()
        proc = _start(out, *extra)
        seen = _started(proc)
        if seen == "RAY_STARTED":
            return proc
        err = proc.stderr.read().strip()
        assert seen == "RAY_STARTING", f"the child failed before starting Ray:\n{err[-3000:]}"
        lines = err.splitlines()
        why = (lines[-1] if lines else f"exit code {proc.returncode}")[:300] + " " + _ray_log_tail(since)
    pytest.skip(f"a local Ray did not start here (three tries): {why.strip()}")


def _finish(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, f"the Ray sweep ended with code {proc.returncode}:\n{out[-2000:]}\n{err[-3000:]}"
    line = next(li for li in out.splitlines() if li.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _traces(out: Path) -> dict[Path, tuple[int, int]]:
    return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("runs/*/trace.json")}


def test_24_runs_on_ray_resume_after_a_kill_and_equal_one_by_one(tmp_path):
    # "ray__" and "solo_" have the same length: the runs' prompts are the same size.
    out = tmp_path / "ray__"
    first = _with_ray(out)
    deadline = time.monotonic() + 300
    while len(_traces(out)) < 3 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGKILL)  # the driver, its Ray and the runs in flight, mid-sweep
    first.wait()
    finished = _traces(out)
    assert 3 <= len(finished) < 24, f"{len(finished)} runs finished before the kill"

    # Resumed on a new local Ray; there a worker is killed under a run, which is retried.
    result = _finish(_with_ray(out, "--kill-worker-after", str(len(finished) + 2)))
    rows = result["rows"]
    assert len(rows) == 24 and all(r["error"] is None for r in rows), [r for r in rows if r["error"]]
    assert len(_traces(out)) == 24
    assert {p: v for p, v in _traces(out).items() if p in finished} == finished  # not redone
    assert result["killed"], "no Ray worker was running a run to kill"
    resumed = {p.parent.name for p in finished}
    assert all(r["attempts"] == 1 for r in rows if r["run"] in resumed)
    errors = [json.loads(p.read_text()).get("errors") or [] for p in out.glob("runs/*/attempts.json")]
    assert any("LostWorker" in e for errs in errors for e in errs)  # the run under the killed worker, retried
    got = {r["run"]: tuple(r[k] for k in KEYS) for r in rows}
    assert got == solo_results(expand(TASKS, GRID, SHARED), tmp_path / "solo_")
