"""Widget traffic and kernel time of a 500-iteration scripted run, throttled and not.

In one fresh kernel: ``%%memfit_task --model memfit/long-run --max-iterations 500``
is run with ``%config MemfitMagics.throttle_ms`` at 100 (the default) and at 0
(re-render on every event), and once with ``--quiet`` (no widget) as the
baseline.  Reported: the widget messages the kernel sent on iopub
(``comm_open`` + ``comm_msg``), the bytes of those messages, and the kernel
time of the cell (measured inside the kernel).

The widget sends the run's serialized events in batches (one custom message per batch),
never HTML; "unthrottled" sends one batch per event.

    python tests/benchmarks/bench_widget.py

Measured here (2 loaded cores): throttled 228 messages / 0.89 MB, unthrottled 2,708 / 1.22 MB
(ratio 0.084); the HTML widget this replaced sent 540 / 1.7 MB throttled and 4,723 / 20.3 MB
unthrottled.  Kernel time with the widget was within noise of the quiet run (0.93x).
"""

from __future__ import annotations

import json
import tempfile
import time
from queue import Empty

ITERATIONS = 500
CELL = (
    "import time as _t\n_t0 = _t.perf_counter()\n"
    "get_ipython().run_cell_magic('memfit_task', '--model memfit/long-run --max-iterations {n} {flags}',"
    " 'Keep counting until you are stopped.')\n"
    "print('MEMFIT_BENCH', _t.perf_counter() - _t0)"
)


def run_cell(kc, code: str) -> dict:
    msg_id = kc.execute(code)
    comm, nbytes, seconds = 0, 0, None
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=300)
        except Empty:
            raise TimeoutError("no reply from the kernel") from None
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            comm += 1
            nbytes += len(json.dumps(msg["content"]))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and "MEMFIT_BENCH" in msg["content"]["text"]:
            seconds = float(msg["content"]["text"].split()[1])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    return {"widget_messages": comm, "widget_bytes": nbytes, "kernel_s": round(seconds or 0.0, 3)}


def main() -> dict:
    from jupyter_client import KernelManager

    with tempfile.TemporaryDirectory() as cwd:
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=cwd)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            kc.execute_interactive("%load_ext memfit_jupyter", timeout=60)
            # warm up: litellm's import and the first scripted call are not what is measured
            kc.execute_interactive("%%memfit_task --model memfit/demo --quiet\nadd up data.txt", timeout=120)
            results = {}
            for label, setup, flags in (
                ("quiet (no widget)", "", "--quiet"),
                ("throttled 100 ms", "%config MemfitMagics.throttle_ms = 100", ""),
                ("unthrottled", "%config MemfitMagics.throttle_ms = 0", ""),
            ):
                if setup:
                    kc.execute_interactive(setup, timeout=60)
                started = time.perf_counter()
                results[label] = run_cell(kc, CELL.format(n=ITERATIONS, flags=flags))
                results[label]["wall_s"] = round(time.perf_counter() - started, 3)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    base = results["quiet (no widget)"]["kernel_s"]
    throttled, raw = results["throttled 100 ms"], results["unthrottled"]
    report = {
        "iterations": ITERATIONS,
        "results": results,
        "throttled_vs_unthrottled_messages": round(throttled["widget_messages"] / max(1, raw["widget_messages"]), 4),
        "throttled_kernel_s_over_quiet": round(throttled["kernel_s"] / base, 3) if base else None,
        "unthrottled_kernel_s_over_quiet": round(raw["kernel_s"] / base, 3) if base else None,
    }
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
