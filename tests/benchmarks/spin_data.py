"""The real trajectories that ``spin_eval.py`` measures on: where they come from and how they
are turned into memfit traces.  Nothing here downloads; the data is never committed.

Fetch the three public repositories (about 270 MB together) and convert them::

    mkdir -p ~/src && cd ~/src
    git clone https://github.com/gruckion/mini-swe-agent          # d12a71affd95403b036b2bdbd827349b77bfffb9
    git clone https://github.com/gsmoon97/swe-agent-eval          # 2b8d930540ddaf0ae1290e718f1bd0741c70005e
    git clone https://github.com/RussellRyanH/CSCI-635-LiveSWE-Agent   # 2813cfb19465bb9f57d50ebd0798550480a2f836
    python tests/benchmarks/spin_eval.py extract ~/src/mini-swe-agent ~/src/swe-agent-eval \
        ~/src/CSCI-635-LiveSWE-Agent

``extract`` reads the files with ``git show`` at the commits above (a clone or a bare
mirror both work), converts each run with ``load_trajectory`` and writes one gzipped
JSON line per run to ``$MEMFIT_SPIN_DATA`` (default ``~/.cache/memfit-jupyter/spin_eval``).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memfit_jupyter import load_trajectory

#: Each source: which repository, which commit, which model, where the runs and the resolved flags are.
SOURCES = {
    "gemini-3-pro/mini-swe-agent-1.15": {
        "repo": "gruckion/mini-swe-agent", "commit": "d12a71affd95403b036b2bdbd827349b77bfffb9",
        "model": "gemini-3-pro-preview", "format": "mini-swe-agent 1.x (text actions)",
        "runs": "swebench_results/20251118_gemini-3-pro-74pct/trajs/",
        "resolved": "per-run report.json under swebench_results/20251118_gemini-3-pro-74pct/logs/",
    },
    "claude-3.5-sonnet/openhands": {
        "repo": "gsmoon97/swe-agent-eval", "commit": "2b8d930540ddaf0ae1290e718f1bd0741c70005e",
        "model": "claude-3.5-sonnet-20241022", "format": "OpenHands LLM completion logs",
        "runs": "evaluation/python/verified/20250329_OpenHands_Claude-3.5-Sonnet(Oct)/trajs/",
        "resolved": "evaluation/python/verified/20250329_OpenHands_Claude-3.5-Sonnet(Oct)/results/results.json",
    },
    "gpt-5-mini/mini-swe-agent-2.2": {
        "repo": "RussellRyanH/CSCI-635-LiveSWE-Agent", "commit": "2813cfb19465bb9f57d50ebd0798550480a2f836",
        "model": "gpt-5-mini", "format": "mini-swe-agent 2.x (tool calls)",
        "runs": "results/llm-ablation/gpt-5-mini/",
        "resolved": "per-run report.json under results/llm-ablation/gpt-5-mini/eval_results/",
    },
}


def data_dir() -> Path:
    return Path(os.environ.get("MEMFIT_SPIN_DATA") or Path.home() / ".cache" / "memfit-jupyter" / "spin_eval")


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def _files(repo: Path, commit: str) -> list[str]:
    return _git(repo, "ls-tree", "-r", "--name-only", commit).decode().splitlines()


def _json(repo: Path, commit: str, path: str) -> Any:
    return json.loads(_git(repo, "show", f"{commit}:{path}"))


def _instance(path: str) -> str:
    return path.rstrip("/").split("/")[-2]


def _resolved_reports(repo: Path, commit: str, files: list[str], under: str) -> dict[str, bool]:
    out = {}
    for f in files:
        if f.startswith(under) and f.endswith("/report.json"):
            report = _json(repo, commit, f)
            if "resolved" in report:  # one run's report, named by its folder
                out[_instance(f)] = bool(report["resolved"])
            else:  # SWE-bench's harness: {instance: report}
                for instance, r in report.items():
                    out[instance] = bool(r.get("resolved"))
    return out


def runs_of(name: str, repo: Path) -> Iterator[dict[str, Any]]:
    """Each run of one source: its id, model, resolved flag and the raw trajectory."""
    src = SOURCES[name]
    commit = src["commit"]
    files = _files(repo, commit)
    if name.startswith("gemini"):
        resolved = _resolved_reports(repo, commit, files, "swebench_results/20251118_gemini-3-pro-74pct/logs/")
        paths = [f for f in files if f.startswith(src["runs"]) and f.endswith(".traj.json")]
    elif name.startswith("claude"):
        results = _json(repo, commit, src["resolved"])
        resolved = {i: True for i in results["resolved"]} | {i: False for i in results.get("unresolved_ids", [])}
        paths = [f for f in files if f.startswith(src["runs"]) and f.endswith(".json")]
    else:
        resolved = _resolved_reports(repo, commit, files, src["runs"] + "eval_results/")
        paths = [f for f in files if f.startswith(src["runs"]) and f.endswith(".traj.json")]
    for path in sorted(paths):
        instance = _instance(path)
        yield {"id": f"{name}:{instance}", "source": name, "model": src["model"], "instance": instance,
               "resolved": resolved.get(instance, False), "path": path, "raw": _json(repo, commit, path)}


def which_source(repo: Path) -> str | None:
    """The source a clone holds, by its commits."""
    for name, src in SOURCES.items():
        try:
            _git(repo, "cat-file", "-e", src["commit"])
            return name
        except subprocess.CalledProcessError:
            continue
    return None


def extract(repos: list[Path]) -> Path:
    out_dir = data_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    for repo in repos:
        name = which_source(repo)
        if name is None:
            raise SystemExit(f"{repo}: none of the commits in spin_data.SOURCES is in this repository")
        target = out_dir / (name.replace("/", "__") + ".jsonl.gz")
        n = 0
        with gzip.open(target, "wt", encoding="utf-8") as f:
            for run in runs_of(name, repo):
                trace = load_trajectory(run.pop("raw"))
                f.write(json.dumps({**run, "trace": trace}) + "\n")
                n += 1
        print(f"{name}: {n} runs -> {target}")
    return out_dir


def load_runs(limit: int | None = None) -> list[dict[str, Any]]:
    """Every extracted run (``trace`` is the memfit trace)."""
    runs = []
    for path in sorted(data_dir().glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f):
                if limit is not None and n >= limit:
                    break
                runs.append(json.loads(line))
    if not runs:
        raise SystemExit(f"no extracted runs in {data_dir()}: see the fetch command in spin_data.py")
    return runs
