"""The Ray side of tests/test_sweep_ray.py, in a process of its own: ``ray.init`` starts a
local Ray (``num_cpus=2``) and has, once, aborted the process that called it (a C++ check in
Ray's GCS client), which must not take pytest down with it.

    python tests/sweep_ray_child.py OUT [--kill-worker-after N]

Prints ``RAY_STARTING`` just before ``ray.init`` and ``RAY_STARTED`` once Ray is up (the test
tells "Ray did not start" from "this script or the sweep went wrong" by them), and finally ``RESULT <json>``: the rows (run, status, iterations, cost_usd, attempts, error) and
the pid of the Ray worker it killed, if asked to kill one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sweep import GRID, SHARED, TASKS  # noqa: E402  (the same 24 runs as the local tests)


def running_task_pids() -> list[int]:
    """Ray workers carrying out a run now (Ray names the process after its task)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if (proc / "cmdline").read_bytes().startswith(b"ray::_execute"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def main() -> None:
    out = sys.argv[1]
    kill_after = int(sys.argv[sys.argv.index("--kill-worker-after") + 1]) if "--kill-worker-after" in sys.argv else None
    # The raylet gives the dashboard agent (a Python process it starts) a fixed 15 s to write
    # its port to a file and aborts when it is late (ray-project/ray#65983).  On a fresh
    # machine the agent's first imports read Ray's modules from a cold disk: importing them
    # here first puts them in the page cache.  On two cores busy with other work the agent
    # waits for the CPU: Ray's processes start at a higher priority (where allowed) and go
    # back to this process's own once Ray is up, so the runs themselves get no advantage.
    import psutil
    import ray
    import ray.dashboard.agent  # noqa: F401

    from memfit_jupyter.sweep import sweep

    me = psutil.Process()
    own = me.nice()
    with contextlib.suppress(OSError):
        me.nice(own - 10)
    print("RAY_STARTING", flush=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})
    for proc in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error, OSError):
            proc.nice(own)
    print("RAY_STARTED", flush=True)

    killed: list[int] = []

    def progress(p) -> None:
        if kill_after is not None and p.done >= kill_after and not killed:
            pids = running_task_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])

    df = sweep(TASKS, GRID, settings=SHARED, engine="ray", out=out, progress=progress)
    rows = df.select("run", "status", "iterations", "cost_usd", "attempts", "error").to_dicts()
    print("RESULT " + json.dumps({"rows": rows, "killed": killed}), flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
