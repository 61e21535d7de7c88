"""The Ray engine: each run is a Ray task (``pip install 'memfit-jupyter[ray]'``).

``ray.init()`` starts a local Ray unless one is running or ``address=`` names a cluster
(``"auto"``, ``"ray://head:10001"``).  Runs ask for ``resources`` (default one CPU).
Ray's own task retries are off: a run whose worker died comes back as ``LostWorker`` and
the sweep retries it like any failed attempt, the same way on both engines.  The runs
write their traces under ``out``, so on a cluster ``out`` must be on storage that every
node and the caller share.
"""

from __future__ import annotations

from typing import Any

from . import runner
from .engines import Ended, LostWorker


class RayEngine:
    name = "ray"

    def __init__(self, out: str, max_parallel: int, *, address: str | None = None,
                 resources: dict[str, Any] | None = None, ray_init: dict[str, Any] | None = None):
        try:
            import ray
        except ImportError:
            raise ImportError("engine='ray' needs Ray: pip install 'memfit-jupyter[ray]'") from None
        self._ray = ray
        self.out = out
        self.max_parallel = max_parallel
        if not ray.is_initialized():
            options = {"include_dashboard": False, "log_to_driver": False, **(ray_init or {})}
            if address is not None:
                options["address"] = address
            ray.init(**options)
        resources = {"num_cpus": 1, **(resources or {})}
        # The workers import this package by name: they inherit the caller's environment
        # (PYTHONPATH included) on a local Ray; a cluster's nodes must have it installed.
        self._task = ray.remote(max_retries=0, **resources)(_execute)
        self._cpus_per_run = float(resources.get("num_cpus", 1) or 1)

    def default_parallel(self) -> int:
        cpus = self._ray.cluster_resources().get("CPU", 1)
        return max(1, int(cpus // self._cpus_per_run))

    def submit(self, spec_json: dict[str, Any]) -> Any:
        # Ray's workers keep the environment Ray was started with (it outlives a sweep).
        return self._task.remote(spec_json, self.out, runner.secrets_now())

    def wait(self, handles: list[Any], timeout: float) -> list[Ended]:
        ray = self._ray
        done, rest = ray.wait(list(handles), num_returns=1, timeout=timeout)
        if done and rest:  # and whatever else has ended by now, without waiting longer
            done += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        ended: list[Ended] = []
        for ref in done:
            try:
                ended.append((ref, ray.get(ref), None))
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                    ray.exceptions.OutOfMemoryError) as exc:
                ended.append((ref, None, LostWorker(f"the Ray worker died during the run ({type(exc).__name__})")))
            except ray.exceptions.RayTaskError as exc:
                ended.append((ref, None, exc.as_instanceof_cause()))
        return ended

    def close(self) -> None:
        """Leave Ray running: the next sweep reuses it (``ray.shutdown()`` stops a local one)."""


def _execute(spec_json: dict[str, Any], out: str, secrets: dict[str, Any] | None = None) -> dict[str, Any]:
    runner.warm()
    return runner.execute(spec_json, out, secrets)
