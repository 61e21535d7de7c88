"""Sweeps on local worker processes: results equal to runs one by one, resume after a kill,
a worker that dies, the sweep-wide budget, bad input, and ``%%memfit_sweep`` in a real kernel."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import polars as pl
import pytest
from nbclient import NotebookClient

from memfit_jupyter import Agent
from memfit_jupyter.errors import UnknownModelError
from memfit_jupyter.secrets import REDACTED
from memfit_jupyter.sweep import resume, sweep
from memfit_jupyter.sweep.spec import expand

ROOT = Path(__file__).resolve().parents[1]
TASKS = {"total": "What is the total of the numbers in data.txt?",
         "count": "How many numbers does data.txt hold?"}
#: 2 tasks x 6 scripted scenarios x 2 iteration limits = 24 runs: finishing, spinning, failing
#: on bad output, unknown tools, samples that disagree, a budget that runs out.
GRID = {"model": ["memfit/demo", "memfit/spin-demo", "memfit/unknown-tool", "memfit/bad-output",
                  "memfit/disagree", "memfit/budget-burn"],
        "max_iterations": [4, 12]}
SHARED = {"memory": False}
KEYS = ("status", "iterations", "cost_usd")


def solo_results(specs, out: Path) -> dict[str, tuple]:
    """Each run by itself, through the public API, in a directory laid out as the sweep's
    (the prompt names the working directory, so its length is part of the token count)."""
    from memfit_jupyter.sweep.spec import agent_kwargs

    results = {}
    for spec in specs:
        work = out / "runs" / spec.key / "work"
        work.mkdir(parents=True)
        r = Agent(**agent_kwargs(spec.settings), workdir=work).start(spec.task).run()
        results[spec.key] = (r.status, r.iterations, r.cost_usd)
    return results


def by_run(df: pl.DataFrame) -> dict[str, tuple]:
    return {row["run"]: tuple(row[k] for k in KEYS) for row in df.iter_rows(named=True)}


@pytest.mark.slow  # worker processes
def test_24_runs_equal_one_by_one(tmp_path):
    # "local" and "solo_" have the same length: the runs' prompts are the same size.
    df = sweep(TASKS, GRID, settings=SHARED, out=tmp_path / "local", max_parallel=2, progress=False)
    assert df.height == 24
    assert set(df.columns) >= {"run", "task", "model", "max_iterations", "status", "iterations", "cost_usd",
                               "tokens", "duration_s", "mechanisms", "trace", "attempts"}
    assert df["error"].null_count() == 24 and (df["attempts"] == 1).all()
    # The scenarios end in different ways, and mechanisms fired.
    assert {"done", "failed", "degraded"} <= set(df["status"])
    assert "spin" in df.filter(pl.col("model") == "memfit/spin-demo")["mechanisms"].explode().to_list()
    expected = solo_results(expand(TASKS, GRID, SHARED), tmp_path / "solo_")
    assert by_run(df) == expected
    for row in df.iter_rows(named=True):  # each run has its own directory and whole trace
        trace = json.loads(Path(row["trace"]).read_text())
        assert trace["status"] == row["status"] and trace["totals"]["cost_usd"] == row["cost_usd"]
        assert Path(trace["workdir"]) == Path(row["trace"]).parent / "work"
    # Again over the same out: nothing is redone, the rows are read back as they were.
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "local").glob("runs/*/trace.json")}
    again = sweep(TASKS, GRID, settings=SHARED, out=tmp_path / "local", max_parallel=2, progress=False)
    assert again.equals(df)
    assert {p: p.stat().st_mtime_ns for p in before} == before


SCRIPT = textwrap.dedent("""
    import json, sys
    from memfit_jupyter import sweep

    def show(p):
        print(json.dumps({"done": p.done, "running": p.running, "failed": p.failed}), flush=True)

    if __name__ == "__main__":
        if sys.argv[2:] == ["resume"]:  # from what the sweep keeps in out alone
            df = sweep.resume(sys.argv[1], max_parallel=2, progress=show)
        else:
            df = sweep(["Count slowly. [slow]", "Keep counting, slowly. [slow]"], {"max_iterations": [2, 3, 4, 5, 6]},
                       settings={"model": "memfit/long-run", "memory": False}, out=sys.argv[1],
                       max_parallel=2, progress=show)
        print("RESULT " + df.select("run", "status", "iterations", "attempts").write_json(), flush=True)
""")


def _start(tmp_path: Path, out: Path, *extra: str) -> subprocess.Popen:
    script = tmp_path / "run_sweep.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen([sys.executable, str(script), str(out), *extra], stdout=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)


def _result(proc: subprocess.Popen) -> list[dict]:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    line = next(li for li in out.splitlines() if li.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _workers(pid: int) -> list[int]:
    """The sweep's worker processes: children of its fork server that run a run."""
    workers = []
    for child in _children(pid):
        workers += _children(child)
    return workers


def _wait_for(predicate, seconds: float = 120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.slow  # worker processes
def test_killed_sweep_resumes_without_redoing_finished_runs(tmp_path):
    out = tmp_path / "out"
    proc = _start(tmp_path, out)
    _wait_for(lambda: len(list(out.glob("runs/*/trace.json"))) >= 2)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers, mid-sweep
    proc.wait()
    finished = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("runs/*/trace.json")}
    assert 2 <= len(finished) < 10
    rows = _result(_start(tmp_path, out, "resume"))  # sweep.resume(out): the runs listed in out/sweep.json
    assert [r["status"] for r in rows] == ["failed"] * 10 and [r["iterations"] for r in rows] == [2, 3, 4, 5, 6] * 2
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in finished} == finished  # not redone
    assert len(list(out.glob("runs/*/trace.json"))) == 10
    resumed = {p.parent.name for p in finished}
    for r in rows:  # runs cut short by the kill were tried again; finished ones once
        assert (r["attempts"] == 1) if r["run"] in resumed else (r["attempts"] >= 1)
    assert not list(out.glob("runs/*/.trace.json.*"))  # no half-written trace anywhere


@pytest.mark.slow  # worker processes
def test_a_worker_that_dies_mid_run_is_retried(tmp_path):
    out = tmp_path / "out"
    proc = _start(tmp_path, out)
    first = proc.stdout.readline()  # the sweep has started
    assert json.loads(first)["done"] == 0
    victim = _wait_for(lambda: (_workers(proc.pid) or [None])[0])
    _wait_for(lambda: list(out.glob("runs/*/attempts.json")))
    time.sleep(0.3)  # into a run
    os.kill(victim, signal.SIGKILL)
    rows = _result(proc)
    assert [r["status"] for r in rows] == ["failed"] * 10  # every run ended as it does by itself
    assert [r["iterations"] for r in rows] == [2, 3, 4, 5, 6] * 2
    assert max(r["attempts"] for r in rows) == 2
    errors = [json.loads(p.read_text()).get("errors") for p in out.glob("runs/*/attempts.json")]
    assert any(e and "LostWorker" in e[0] for e in errors)


@pytest.mark.slow  # worker processes
def test_sweep_budget_is_hard(tmp_path):
    # Each run may spend up to 0.012 (a run's first call must afford a whole reply: 1,024 tokens
    # at $8e-6); the sweep 0.025: two run at once, and a run starts only when the finished runs'
    # spend plus the running runs' worst cases leaves room for it.
    seen = []
    df = sweep(["What is the total of the numbers in data.txt?"], {"max_iterations": [3, 4, 5, 6, 7, 8]},
               settings={"model": "memfit/demo", "memory": False, "max_cost_usd": 0.012},
               out=tmp_path / "b", max_parallel=2, max_cost_usd=0.025, progress=seen.append)
    ran = df.filter(pl.col("status") != "skipped")
    skipped = df.filter(pl.col("status") == "skipped")
    assert ran.height >= 2 and skipped.height >= 1
    assert ran["cost_usd"].sum() <= 0.025
    assert all("worst case" in e for e in skipped["error"])
    for p in seen:  # never more committed than the budget
        assert p.cost_usd + p.reserved_usd <= 0.025 + 1e-12
    # A larger budget over the same out runs only what was skipped.
    more = sweep(["What is the total of the numbers in data.txt?"], {"max_iterations": [3, 4, 5, 6, 7, 8]},
                 settings={"model": "memfit/demo", "memory": False, "max_cost_usd": 0.012},
                 out=tmp_path / "b", max_parallel=2, max_cost_usd=1.0, progress=False)
    assert (more["status"] != "skipped").all()
    assert more.filter(pl.col("run").is_in(ran["run"].to_list()))["attempts"].to_list() == [1] * ran.height


@pytest.mark.slow  # worker processes
def test_a_run_whose_attempts_file_holds_other_json_counts_from_scratch(tmp_path):
    # attempts.json is the sweep's own bookkeeping; one that holds valid JSON of another shape
    # (edited by hand, or written by something else) is treated like an unreadable one, as no
    # attempts, rather than crashing the sweep that reads it back.
    task = ["What is the total of the numbers in data.txt?"]
    settings = {"model": "memfit/demo", "memory": False}
    first = sweep(task, {"max_iterations": [3, 4]}, settings=settings, out=tmp_path / "s", progress=False)
    keys = first["run"].to_list()
    (tmp_path / "s" / "runs" / keys[0] / "attempts.json").write_text("[1, 2]")
    (tmp_path / "s" / "runs" / keys[1] / "attempts.json").write_text('{"errors": []}')
    (tmp_path / "s" / "runs" / keys[1] / "trace.json").unlink()  # this one runs again
    again = sweep(task, {"max_iterations": [3, 4]}, settings=settings, out=tmp_path / "s", progress=False)
    assert again["status"].to_list() == first["status"].to_list()
    assert again["attempts"].to_list() == [1, 1]


def test_bad_input_is_one_clear_error_before_anything_runs(tmp_path):
    with pytest.raises(UnknownModelError):
        sweep(["t"], {"model": ["memfit/demo", "memfit/no-such-scenario"]}, out=tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="unknown setting 'max_iteration'"):
        sweep(["t"], {"max_iteration": [1]}, out=tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="cannot be swept"):
        sweep(["t"], {"workdir": ["a"]}, out=tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="is empty"):
        sweep(["t"], {"model": []}, out=tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="unknown engine"):
        sweep(["t"], {}, engine="dask", out=tmp_path / "x", progress=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        sweep(["t"], {}, out=tmp_path / "file", progress=False)
    assert not (tmp_path / "x" / "runs").exists()


#: A key shaped like OpenAI's (redacted by its look) and a proxy's password (only its place in
#: a URL says it is one).
KEY = "sk-proj-LITERAL9876543210zyxwvutQQQ"
PASSWORD = "hunter2-proxy-7f3a9c"
#: What a leak is found by: part of the key finds it cut short too (a name shortened for display).
SECRETS = (KEY[8:19], PASSWORD)


def _files_holding(out: Path) -> list[str]:
    """Every file under ``out`` whose bytes hold a secret."""
    return [f"{p}: {s}" for p in out.rglob("*") if p.is_file() for s in SECRETS if s.encode() in p.read_bytes()]


def _shows(df: pl.DataFrame) -> list[str]:
    return [s for s in SECRETS if s in df.write_json()]


def _one_line_refusal(out: Path, **options) -> str:
    with pytest.raises(ValueError) as refused:
        resume(out, progress=False, **options)
    message = str(refused.value)
    assert len(message.splitlines()) == 1, message
    return message


def test_sweep_json_and_the_frame_keep_secrets_redacted_without_running(tmp_path):
    # A budget below every run's worst case skips them all: sweep.json, the frame and resume's
    # checks, with no worker process started.
    base = f"https://proxy:{PASSWORD}@llm.example/v1"
    settings = {"model": "memfit/demo", "memory": False, "api_base": base, "max_cost_usd": 0.01}
    plain = "What is the total of the numbers in data.txt?"
    df = sweep([f"Sum data.txt, token {KEY}", plain], None, settings=settings, out=tmp_path / "both",
               max_cost_usd=0.001, progress=False)
    assert df["status"].to_list() == ["skipped", "skipped"]
    assert _shows(df) == [] and df["task"][0] == f"Sum data.txt, token {REDACTED}"
    assert _files_holding(tmp_path / "both") == []
    # The task that held a key decides, whatever else is given: no setting can make up for it.
    assert "call sweep() again" in _one_line_refusal(tmp_path / "both", api_base=base, max_cost_usd=0.001)

    df = sweep([plain], None, settings=settings, out=tmp_path / "plain", max_cost_usd=0.001, progress=False)
    assert _shows(df) == [] and _files_holding(tmp_path / "plain") == []
    assert "give it again" in _one_line_refusal(tmp_path / "plain", max_cost_usd=0.001)
    again = resume(tmp_path / "plain", api_base=base, max_cost_usd=0.001, progress=False)
    assert again.equals(df)


@pytest.mark.slow  # worker processes
def test_secrets_stay_out_of_the_sweep_folder_and_frame_and_resume_takes_them_again(tmp_path):
    out = tmp_path / "sw"
    base = f"https://proxy:{PASSWORD}@llm.example/v1"
    shown = f"https://proxy:{REDACTED}@llm.example/v1"
    tasks = {"keyed": f"What is the total of the numbers in data.txt? (service token: {KEY})",
             "plain": "What is the total of the numbers in data.txt?"}
    settings = {"model": "memfit/demo", "memory": False, "api_base": base}  # scripted: no server
    df = sweep(tasks, {"max_iterations": [6]}, settings=settings, out=out, max_parallel=2, progress=False)
    assert df["status"].to_list() == ["done", "done"]
    assert df["api_base"].to_list() == [shown, shown]
    assert _shows(df) == [] and _files_holding(out) == []
    manifest = json.loads((out / "sweep.json").read_text())["runs"]
    assert [r.get("redacted") for r in manifest] == [["task", "settings.api_base"], ["settings.api_base"]]
    keyed, plain = (out / "runs" / k / "trace.json" for k in df["run"])
    kept = keyed.stat().st_mtime_ns

    # A run that did not finish needs the password: without it, or with another, nothing runs.
    plain.unlink()
    message = _one_line_refusal(out)
    assert f'api_base="{shown}"' in message and "give it again" in message and PASSWORD not in message
    assert "is another one" in _one_line_refusal(out, api_base="https://proxy:other@elsewhere.example/v1")
    assert "kept in full" in _one_line_refusal(out, api_base=base, model="memfit/demo")
    assert not plain.exists()
    assert json.loads((plain.parent / "attempts.json").read_text())["attempts"] == 1

    # Given again, it is put back: the run is done again, the finished one read back.
    again = resume(out, api_base=base, progress=False)
    assert again["status"].to_list() == ["done", "done"] and again["attempts"].to_list() == [1, 2]
    assert again["api_base"].to_list() == [shown, shown] and _shows(again) == []
    assert plain.exists() and keyed.stat().st_mtime_ns == kept
    assert _files_holding(out) == []

    # A task that held a key is kept redacted: only the sweep's own call can go on with it.
    keyed.unlink()
    message = _one_line_refusal(out, api_base=base)
    assert "task of run" in message and "call sweep() again" in message and KEY not in message
    assert not keyed.exists()
    last = sweep(tasks, {"max_iterations": [6]}, settings=settings, out=out, max_parallel=2, progress=False)
    assert last["status"].to_list() == ["done", "done"] and last["attempts"].to_list() == [2, 2]
    assert _shows(last) == [] and _files_holding(out) == []


@pytest.mark.slow  # worker processes
def test_a_secret_set_after_the_workers_started_and_a_url_password_typed_alone_stay_out(tmp_path, monkeypatch):
    settings = {"model": "memfit/demo", "memory": False}
    sweep(["What is the total of the numbers in data.txt?"], None, settings=settings, out=tmp_path / "first",
          max_parallel=1, progress=False)  # the workers' fork server starts with the environment of now
    late = "Vq8ZmR2xLp4TnW7yKc3H"  # set since: no pattern knows it, only the environment names it a secret
    monkeypatch.setenv("MEMFIT_LATE_API_KEY", late)
    password = "Tr0ub4dor-and-3"
    task = f"What is the total of the numbers in data.txt? The deploy code is {late}, the proxy's {password}."
    out = tmp_path / "late"
    df = sweep([task], None, settings={**settings, "api_base": f"https://proxy:{password}@llm.example/v1"},
               out=out, max_parallel=1, progress=False)
    assert df["status"].to_list() == ["done"]
    trace = json.loads((out / "runs" / df["run"][0] / "trace.json").read_text())
    assert late not in json.dumps(trace) and password not in json.dumps(trace)
    assert trace["task"].count(REDACTED) == 2
    held = [str(p) for p in out.rglob("*") if p.is_file() for v in (late, password) if v.encode() in p.read_bytes()]
    assert held == [] and late not in df.write_json() and password not in df.write_json()


class _Proxy(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that notes the Authorization header of every request: what a
    run sends is what it was given (a URL's user and password become a Basic header)."""

    seen: list[str] = []

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(self.headers.get("Authorization") or "")
        reply = {"answer": "ok", "confidence": 0.9, "reasoning": ["scripted"]}
        raw = json.dumps({"id": "c", "object": "chat.completion", "created": int(time.time()), "model": "m",
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": json.dumps(reply)}}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.mark.slow  # worker processes
def test_runs_get_the_real_password_that_sweep_json_keeps_redacted(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        out = tmp_path / "sw"
        base = f"http://proxy:{PASSWORD}@127.0.0.1:{server.server_address[1]}/v1"
        real = "Basic " + base64.b64encode(f"proxy:{PASSWORD}".encode()).decode()
        settings = {"model": "openai/proxied", "api_base": base, "memory": False, "max_iterations": 1,
                    "context_window": 32_000}
        _Proxy.seen = []
        df = sweep(["Say ok."], None, settings=settings, out=out, max_parallel=1, progress=False)
        assert _Proxy.seen and set(_Proxy.seen) == {real}
        (out / "runs" / df["run"][0] / "trace.json").unlink()
        _Proxy.seen = []
        resume(out, api_base=base, progress=False)  # the worker gets the value given again, not sweep.json's
        assert _Proxy.seen and set(_Proxy.seen) == {real}
        assert _files_holding(out) == []
    finally:
        server.shutdown()
        server.server_close()


def test_package_name_stays_callable_and_import_is_light():
    import memfit_jupyter.sweep.spec  # noqa: F401  (binds the package on memfit_jupyter)

    assert callable(memfit_jupyter.sweep)
    code = ("import sys, memfit_jupyter; memfit_jupyter.sweep; import memfit_jupyter.sweep.core; "
            "print(sorted(m for m in ('ray', 'litellm', 'IPython', 'psycopg') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"


@pytest.mark.kernel
def test_sweep_magic_in_a_real_kernel(tmp_path):
    cells = [
        "%load_ext memfit_jupyter",
        "%%memfit_sweep --grid model=memfit/demo,memfit/unknown-tool --set memory=false --out sw --max-parallel 2"
        " --name df\ntotal: What is the total of the numbers in data.txt?",
        "print(type(df).__name__, df.height, sorted(df['status']))",
        "%memfit_sweep --task hi --grid model=memfit/nope",
        "%memfit_sweep --grid model=memfit/demo",
        "again = %memfit_sweep --resume sw --quiet\nprint(again.equals(df))",
        "%memfit_sweep --resume nowhere",
        "%memfit_sweep --resume sw --grid model=memfit/demo",
        "%memfit_sweep --task hi --resources num_cpus=2",
        "%memfit_sweep --task hi --engine ray --resources num_cpus",
        "%memfit_sweep --resume sw --set api_base=http://127.0.0.1:9/v1",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = [o for o in nb.cells[1].outputs if o.output_type == "display_data"]
    assert shown and "application/vnd.jupyter.widget-view+json" in shown[0].data, nb.cells[1].outputs
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    values = [m["state"].get("value", "") for m in state.values() if m["model_name"] == "HTMLModel"]
    assert any("2/2 done" in v and "finished" in v for v in values)
    assert nb.cells[2].outputs[0].text.strip() == "DataFrame 2 ['done', 'done']"
    errors = ["".join(o.get("text", "") + o.get("evalue", "") for o in nb.cells[i].outputs) for i in (3, 4, 6, 7, 8, 9, 10)]
    for err in errors:  # IPython shows a UsageError as one line, no traceback
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "unknown scenario 'nope'" in errors[0] and "no tasks" in errors[1]
    assert "no sweep to resume" in errors[2] and "give no tasks" in errors[3]
    assert "--resources is for --engine ray" in errors[4] and "KEY=V" in errors[5]
    assert "api_base is kept in full" in errors[6]  # --set with --resume: only settings kept redacted
    # --resume read the finished runs back: the same rows, nothing run again
    assert nb.cells[5].outputs[-1].text.strip() == "True", nb.cells[5].outputs
    assert {json.loads(p.read_text())["attempts"] for p in (tmp_path / "sw").glob("runs/*/attempts.json")} == {1}


def test_resources_option_parses_to_ray_options():
    from memfit_jupyter.jupyter.sweep_magic import parse_resources

    assert parse_resources(["num_cpus=2,memory=4e9", "num-gpus=0.5"]) == {"num_cpus": 2, "memory": 4e9,
                                                                         "num_gpus": 0.5}
