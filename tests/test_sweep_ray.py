"""Sweeps on a real local Ray (``ray.init(num_cpus=2)``): the 24 runs give the results they give
one by one, and a Ray worker killed mid-run is retried.  Ray starts once for this module: its
start-up is heavy on a 2-core machine."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from test_sweep import GRID, SHARED, TASKS, by_run, solo_results

from memfit_jupyter.sweep import sweep
from memfit_jupyter.sweep.spec import expand

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local_ray():
    import ray  # tests/run.sh installs the ray extra: its absence is a failure, not a skip

    # Ray's workers import memfit_jupyter from this checkout, like the test process.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    for attempt in range(3):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})
            break
        except Exception as exc:  # Ray gives its raylet 30 s to register: a loaded machine can miss that
            ray.shutdown()
            if "timed out during startup" not in str(exc) or attempt == 2:
                raise
    yield ray
    ray.shutdown()


def _running_task_pids() -> list[int]:
    """Ray workers that are carrying out a run now (Ray names the process after the task)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes().startswith(b"ray::_execute"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def test_24_runs_on_ray_equal_one_by_one_even_when_a_worker_dies(local_ray, tmp_path):
    killed = []

    def kill_one_worker(p):
        if p.done >= 3 and not killed:
            pids = _running_task_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])

    # "ray__" and "solo_" have the same length: the runs' prompts are the same size.
    df = sweep(TASKS, GRID, settings=SHARED, engine="ray", out=tmp_path / "ray__", progress=kill_one_worker)
    assert df.height == 24 and df["error"].null_count() == 24, df.filter(df["error"].is_not_null())
    assert killed, "no Ray worker was running a run to kill"
    assert df["attempts"].max() == 2  # the killed run, tried again
    assert by_run(df) == solo_results(expand(TASKS, GRID, SHARED), tmp_path / "solo_")
