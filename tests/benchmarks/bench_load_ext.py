"""How long ``%load_ext memfit_jupyter`` takes in a fresh kernel, against ``%load_ext jupyter_ai_magics``.

Both are measured in the same run, in the same environment: a virtualenv
(``--system-site-packages``, so it sees this project) under
``~/.cache/memfit-bench/venv`` where jupyter-ai-magics is installed if it is
missing, so the shared environment is left alone.  Each extension is loaded
in ``ROUNDS`` fresh kernels; the time is measured inside the kernel around
the ``%load_ext`` call; the median is reported.

    python tests/benchmarks/bench_load_ext.py

Targets: memfit under 0.3 s and at most 0.2x jupyter_ai_magics.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROUNDS = 5
VENV = Path.home() / ".cache" / "memfit-bench" / "venv"
PROBE = (
    "import time, sys\n"
    "t = time.perf_counter()\n"
    "get_ipython().run_line_magic('load_ext', {ext!r})\n"
    "dt = time.perf_counter() - t\n"
    "print('MEMFIT_BENCH', dt, 'litellm' in sys.modules, sys.prefix)"
)


def venv_python() -> Path | None:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(VENV)], check=True)
    have = subprocess.run([str(python), "-c", "import jupyter_ai_magics"], capture_output=True)
    if have.returncode != 0:
        print("installing jupyter-ai-magics into", VENV, flush=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "jupyter-ai-magics"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print("could not install jupyter-ai-magics:", done.stderr.strip().splitlines()[-1:])
            return None
    return python


def measure(python: Path, ext: str) -> tuple[float, bool]:
    """Seconds for one %load_ext in a fresh kernel started with ``python``; litellm imported?"""
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpec

    with tempfile.TemporaryDirectory() as cwd:
        km = KernelManager()
        # the kernel runs on the benchmark's virtualenv, whatever the installed kernelspecs say
        km._kernel_spec = KernelSpec(argv=[str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                                     display_name="memfit-bench", language="python")
        km.start_kernel(cwd=cwd)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            out: list[str] = []
            reply = kc.execute_interactive(PROBE.format(ext=ext), timeout=120,
                                           output_hook=lambda m: out.append(m["content"].get("text", "")))
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"%load_ext {ext} failed: {reply['content'].get('evalue')}")
            line = next(ln for ln in "".join(out).splitlines() if ln.startswith("MEMFIT_BENCH"))
            _, seconds, litellm, prefix = line.split()
            assert prefix == str(VENV) or python == Path(sys.executable), prefix
            return float(seconds), litellm == "True"
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)


def main() -> dict:
    python = venv_python()
    results = {}
    exts = ["memfit_jupyter", "jupyter_ai_magics"] if python else ["memfit_jupyter"]
    python = python or Path(sys.executable)
    for ext in exts:
        runs = [measure(python, ext) for _ in range(ROUNDS)]
        results[ext] = {"median_s": statistics.median(t for t, _ in runs), "runs_s": [round(t, 4) for t, _ in runs],
                        "imports_litellm": any(flag for _, flag in runs)}
    memfit = results["memfit_jupyter"]["median_s"]
    report = {"results": results, "target_s": 0.3, "target_ratio": 0.2}
    if "jupyter_ai_magics" in results:
        report["ratio"] = round(memfit / results["jupyter_ai_magics"]["median_s"], 4)
    else:
        report["ratio"] = None
        report["note"] = "jupyter-ai-magics could not be installed: no baseline"
    report["meets_targets"] = memfit < 0.3 and (report["ratio"] is None or report["ratio"] <= 0.2)
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
