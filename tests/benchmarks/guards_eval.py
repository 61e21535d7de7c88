"""How often the guard rules would fire on real agents' runs: their false-alarm rate on runs
that solved their task, and their firing rate on runs that did not.

    python tests/benchmarks/guards_eval.py DIR

``DIR`` holds mini-swe-agent trajectories (``*.traj.json``) and SWE-bench evaluation reports
(``report.json``, ``"resolved": true|false``) for the same instances, anywhere below it.  The
data is public and is not committed; one set that has both is in the history of the GitHub
repository SWE-agent/mini-swe-agent (commit dfddc507, folders ``output/`` and
``logs/run_evaluation/``)::

    git clone https://github.com/SWE-agent/mini-swe-agent /tmp/mswe-repo
    cd /tmp/mswe-repo && git checkout dfddc507 && python tests/benchmarks/guards_eval.py /tmp/mswe-repo

Protocol.  Each trajectory is read with ``load_trajectory`` and its steps become action records
(an ``edit`` command counts as a change, every command as something that can run a check).  At
the run's submit, the finish guards' rules are applied as they would have been live:
``unverified_finish`` (the task names a check and no passing run of it came after the last
change) and ``premature_finish`` (a file the task names that no command mentioned; with no
checkout at hand every named file counts as present, an upper bound, and again counting only
the files whose names showed up in one of the run's observations).  The
``termination_condition`` rule fires when a step follows an observation showing the end the
task named.  The model-judged ``reasoning_action_mismatch`` guard needs a judge and is left out.
A resolved run that a guard fires on is a false alarm; the rate on unresolved runs is shown
for comparison, not as a detection rate (an unresolved run may have been verified and still
be wrong).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memfit_jupyter import load_trajectory
from memfit_jupyter.records import ActionRecord
from memfit_jupyter.reliability.guards import end_condition, premature, unverified
from memfit_jupyter.trajectories import TrajectoryFormatError


def records_of(trace: dict) -> tuple[list[ActionRecord], bool]:
    """The run's steps as records (up to its submit), and whether it submitted."""
    observations = {e["iteration"]: e for e in trace["events"] if e["type"] == "observation"}
    records = []
    for e in trace["events"]:
        if e["type"] != "action":
            continue
        if e.get("action_type") == "submit":
            return records, True
        obs = observations.get(e["iteration"], {})
        tool = "write_file" if e.get("action_type") == "edit" else "shell"
        records.append(ActionRecord(iteration=e["iteration"], thought=e.get("thought") or "",
                                    action_type=e.get("action_type") or "", tool=tool,
                                    params=dict(e.get("params") or {}), output=obs.get("output") or "",
                                    ok=bool(obs.get("ok", True)), error=obs.get("error")))
    return records, False


def went_on_past_the_end(task: str, records: list[ActionRecord]) -> bool:
    condition = end_condition(task)
    if condition is None:
        return False
    for i, r in enumerate(records):
        if r.ok and r.tool == "shell" and condition in [line.strip() for line in (r.output or "").splitlines()]:
            return i + 1 < len(records)
    return False


def main(folder: str) -> int:
    root = Path(folder)
    resolved = {}
    for report in root.rglob("report.json"):
        for instance, result in json.loads(report.read_text()).items():
            resolved[instance] = bool(result.get("resolved"))
    counts: dict[tuple[str, bool], int] = {}
    runs = {True: 0, False: 0}
    unreadable: list[str] = []
    for path in sorted(root.rglob("*.traj.json")):
        instance = path.name.removesuffix(".traj.json")
        if instance not in resolved:
            continue
        try:
            trace = load_trajectory(path)
        except TrajectoryFormatError as exc:  # a truncated or missing file: counted, not guessed
            unreadable.append(f"{path.name}: {str(exc).split(';')[0]}")
            continue
        records, submitted = records_of(trace)
        if not submitted:
            continue
        ok = resolved[instance]
        runs[ok] += 1
        task = trace["task"]
        seen = "\n".join(r.output or "" for r in records)
        fired = {
            "unverified_finish": unverified(task, records) is not None,
            "premature_finish": premature(task, records, lambda _name: True) is not None,
            # Present as far as the run saw: the name showed up in one of its observations.
            "premature_finish (seen)": premature(task, records, seen.__contains__) is not None,
            "termination_condition": went_on_past_the_end(task, records),
        }
        for name, hit in fired.items():
            counts[(name, ok)] = counts.get((name, ok), 0) + hit
    print(f"submitted runs with a report: {runs[True]} resolved, {runs[False]} unresolved; "
          f"{len(unreadable)} unreadable" + (f" ({'; '.join(unreadable)})" if unreadable else ""))
    for name in ("unverified_finish", "premature_finish", "premature_finish (seen)", "termination_condition"):
        fa, fu = counts.get((name, True), 0), counts.get((name, False), 0)
        print(f"{name:24s} fires on {fa}/{runs[True]} resolved runs (false-alarm rate "
              f"{fa / max(1, runs[True]):.1%}), on {fu}/{runs[False]} unresolved ({fu / max(1, runs[False]):.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
