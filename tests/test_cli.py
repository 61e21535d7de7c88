"""``python -m memfit_jupyter`` in the terminal, called in-process (``__main__.main``) or run as a
person runs it (a new interpreter): what a run prints and writes where, and the one line each bad
input gets, with nothing written and no key printed back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memfit_jupyter.__main__ import main, write_trace


def test_a_run_says_where_it_writes_and_shows_a_file_read_in_full(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "add up data.txt"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"writing the scenario's files (those not there yet) and its memory (.memfit/) "
                      f"into {tmp_path.resolve()}")
    assert (tmp_path / "data.txt").exists() and (tmp_path / ".memfit").is_dir()
    read = out.index(next(line for line in out if "read_file(" in line))
    lines = (tmp_path / "data.txt").read_text().split()
    assert len(lines) > 1
    assert out[read + 1:read + 1 + len(lines)] == [f"      -> {lines[0]}", *(f"         {x}" for x in lines[1:])]
    assert not [line for line in out if line.strip() == "[context]"]


def test_without_memory_only_the_scenario_files_are_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "add up data.txt", "--no-memory"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("writing the scenario's files (those not there yet) into")
    assert not (tmp_path / ".memfit").exists()


@pytest.mark.parametrize("judge", [False, True])
def test_spin_judge_switches_the_layer_2_detector_on(tmp_path, monkeypatch, judge):
    monkeypatch.chdir(tmp_path)
    args = ["run", "find the version", "--model", "memfit/logic-spin", "--reflection", "auto", "--no-memory",
            "--trace", "t.json", *(["--spin-judge"] if judge else [])]
    main(args)
    trace = json.loads((tmp_path / "t.json").read_text())
    assert trace["settings"]["detectors"] == {"logic_spin": judge}
    judged = [e for e in trace["events"] if e["type"] == "spin" and e.get("layer") == 2]
    assert bool(judged) is judge


def test_a_long_output_shows_its_first_lines_and_how_many_more(capsys):
    from memfit_jupyter.__main__ import OUTPUT_LINES, _print_event
    from memfit_jupyter.events import Observation

    _print_event(Observation(iteration=1, tool="read_file", ok=True, output="\n".join(map(str, range(12))),
                             error=None, data={}, duration_s=0.0))
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == OUTPUT_LINES and shown[-1].endswith(f"... ({12 - OUTPUT_LINES} more lines)")


def test_two_traces_that_cannot_be_written_go_to_two_files(tmp_path, capsys):
    trace = {"run_id": "abc123", "task": "t", "events": []}
    where = []
    for _ in range(2):
        assert write_trace(trace, str(tmp_path / "missing-dir" / "run.json")) == 2
        where.append(capsys.readouterr().err.strip().rsplit(" written to ", 1)[1])
    assert where[0] != where[1] and all(json.loads(open(w).read()) == trace for w in where)
    for w in where:
        os.unlink(w)


@pytest.mark.parametrize("content, expected", [
    ("hello", "not JSON (Expecting value at line 1, column 1)"),
    ('{"task": "unterminated', "not JSON (Unterminated string starting at line 1, column 10)"),
])
def test_text_that_is_not_json_says_where_in_one_phrase(tmp_path, monkeypatch, capsys, content, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text(content)
    assert main(["replay", "bad.json"]) == 2
    err = capsys.readouterr().err
    assert expected in err and " at at " not in err


def test_a_key_pasted_into_an_option_is_not_echoed(tmp_path, monkeypatch, capsys):
    key = "sk-proj-ENV4sQ9wL2xN7pR1tV6yZ3bC8d"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as end:
        main(["run", "add up data.txt", "--max-cost", key])
    err = capsys.readouterr().err
    assert end.value.code == 2 and "invalid float value: '[REDACTED]'" in err and key not in err


# --- bad input through the command line itself (a new interpreter, as a person runs it) -----------

#: A key of the shape people paste, in the environment as it would be, then typed into an option.
KEY = "sk-proj-ZZtopSecretValue1234567890abcdef"


def cli(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "memfit_jupyter", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def assert_refused(done: subprocess.CompletedProcess[str], cwd, *, kept=()) -> str:
    """Exit code 2, one line on stderr, no key in the output, and nothing written in ``cwd``
    (which held only ``kept``); the line."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert KEY not in done.stdout + done.stderr
    assert sorted(os.listdir(cwd)) == sorted(kept)
    return lines[0]


@pytest.mark.parametrize("args", [
    ("run", "task", "--tools", KEY),
    ("run", "task", "--approve-tools", KEY),
    ("run", "task", "--model", f"memfit/{KEY}"),
    ("replay", f"{KEY}.json"),
    ("snapshots", "--store", f"x{KEY}"),
], ids=["tools", "approve-tools", "scenario", "replay", "snapshots"])
def test_a_key_typed_where_a_name_goes_is_not_printed_back(tmp_path, args):
    """The one-line errors quote what was typed: the key is redacted from them."""
    line = assert_refused(cli(*args, cwd=tmp_path), tmp_path)
    assert "[REDACTED]" in line


def test_a_plan_is_checked_before_anything_is_written(tmp_path):
    """The run read its plan only once started, after placing the scenario's files and .memfit/."""
    line = assert_refused(cli("run", "task", "--plan", "nosuch.json", cwd=tmp_path), tmp_path)
    assert "plan file 'nosuch.json' does not exist" in line
    line = assert_refused(cli("run", "task", "--plan", ".", cwd=tmp_path), tmp_path)
    assert "is a folder" in line
    (tmp_path / "plan.json").write_text('[{"id": 1, "desc": "x"')
    line = assert_refused(cli("run", "task", "--plan", "plan.json", cwd=tmp_path), tmp_path, kept=["plan.json"])
    assert "plan file plan.json is not valid JSON" in line
    # a scripted scenario places its own plan when it starts: not missing
    done = cli("run", "Build the features listed in features.json.", "--model", "memfit/plan-demo",
               "--plan", "features.json", "--no-memory", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_model_no_provider_serves_is_refused_before_the_run_starts(tmp_path):
    line = assert_refused(cli("run", "task", "--model", "nosuchprovider/xyz", cwd=tmp_path), tmp_path)
    assert "unknown model 'nosuchprovider/xyz'" in line


def test_a_memory_url_that_is_not_postgresql_makes_no_folders(tmp_path):
    """Taken as a path, the URL made folders named after its password."""
    done = cli("run", "task", "--memory", "https://u:hunter2hunter2@x/y", cwd=tmp_path)
    line = assert_refused(done, tmp_path)
    assert "https:// URL" in line and "hunter2hunter2" not in done.stdout + done.stderr


def test_the_api_base_s_json_form_sets_a_base_per_tier(tmp_path):
    base = '{"primary": "http://127.0.0.1:18779/v1", "fast": "http://127.0.0.1:18780/v1"}'
    done = cli("run", "add up data.txt", "--api-base", base, "--no-memory", "--trace", "t.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / "t.json").read_text())["settings"]
    assert settings["api_base"] == json.loads(base)


@pytest.mark.parametrize("base, says", [
    ('{"primary": ', "--api-base is not valid JSON"),
    ('{"primary": 8080}', "--api-base: the URL of tier primary must be a non-empty string, got int"),
    ('{"slow": "http://127.0.0.1:1/v1"}', "--api-base names unknown tier(s) slow"),
])
def test_a_malformed_per_tier_api_base_is_one_line(tmp_path, base, says):
    assert says in assert_refused(cli("run", "task", "--api-base", base, cwd=tmp_path), tmp_path)


@pytest.mark.parametrize("value", ["0", "1"])
def test_the_spin_threshold_s_bound_is_the_one_the_config_keeps(tmp_path, value):
    """0 was refused with "at least 1", and then 1 with "at least 2"."""
    line = assert_refused(cli("run", "task", "--spin-threshold", value, cwd=tmp_path), tmp_path)
    assert line == f"error: --spin-threshold must be at least 2, got {value}"


def closed_reader(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    """A command whose stdout's reader has gone before it writes (``... | head`` once head ended)."""
    read, write = os.pipe()
    os.close(read)  # every write now fails with EPIPE: Python ignores SIGPIPE and raises BrokenPipeError
    try:
        return subprocess.run([sys.executable, "-m", *args], cwd=cwd, stdout=write, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True, timeout=300)
    finally:
        os.close(write)


def test_a_reader_that_goes_away_gets_no_traceback_and_a_run_still_writes_its_trace(tmp_path):
    done = closed_reader("memfit_jupyter", "run", "add up data.txt", "--trace", "run.json", cwd=tmp_path)
    assert done.stderr == "" and done.returncode == 0, done.stderr[-2000:]
    trace = json.loads((tmp_path / "run.json").read_text())
    assert trace["events"][-1]["type"] == "run_end" and trace["events"][-1]["status"] == "done"
    for command in (("memfit_jupyter", "scenarios"), ("memfit_jupyter.tasks", "list")):
        listed = closed_reader(*command, cwd=tmp_path)  # 1: not all of it was read
        assert listed.stderr == "" and listed.returncode == 1, (command, listed.stderr[-2000:])


def test_fork_runs_a_saved_run_on_from_a_step_with_a_change_and_writes_the_child_s_trace(tmp_path):
    """The premature finish at step 3, forked there with guidance: the child reads the third ledger
    and is right; it prints its own steps only, and its trace names its parent."""
    work = tmp_path / "work"
    work.mkdir()
    done = cli("run", "What is the total number of crates in north.txt, south.txt and east.txt?",
               "--model", "memfit/premature-finish", "--no-memory", "--trace", "../parent.json", cwd=work)
    assert done.returncode == 0, done.stderr
    parent = json.loads((tmp_path / "parent.json").read_text())
    assert "295" not in (parent["answer"] or "")
    before = sorted(os.listdir(work))
    forked = cli("fork", "parent.json", "--at", "3", "--guidance", "finish refused (premature_finish): the task names east.txt, which has not been opened yet",
                 "--workdir", "child", "--trace", "child.json", cwd=tmp_path)
    assert forked.returncode == 0, forked.stderr
    lines = forked.stdout.splitlines()
    assert lines[0] == (f"steps 1-2 of run {parent['run_id']} from its recording, live from step 3 in "
                        f"{(tmp_path / 'child').resolve()}")
    assert lines[1].startswith(f"[  3] fork of run {parent['run_id']} at step 3: ") and "east.txt" in lines[1]
    assert not any(line.startswith(("[  1]", "[  2]")) for line in lines)  # the parent's steps are not shown again
    assert "status: done" in lines[-1] and "295" in lines[-1]
    child = json.loads((tmp_path / "child.json").read_text())
    assert child["parent"]["run"] == parent["run_id"] and child["parent"]["at"] == 3
    assert sorted(os.listdir(work)) == before  # the parent's folder is only read


def test_blame_names_the_step_of_a_saved_failure_and_bad_input_is_one_line(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    cli("run", "What is the total number of crates in north.txt, south.txt and east.txt?",
        "--model", "memfit/premature-finish", "--no-memory", "--trace", "../parent.json", cwd=work)
    blamed = cli("blame", "parent.json", cwd=tmp_path)
    assert blamed.returncode == 0, blamed.stderr
    assert "Blame step 3 " in blamed.stdout.splitlines()[-1] and "success" in blamed.stdout
    fine = tmp_path / "fine"
    fine.mkdir()
    cli("run", "add up data.txt", "--no-memory", "--trace", "../fine.json", cwd=fine)
    nothing = assert_refused(cli("blame", "fine.json", cwd=tmp_path), tmp_path,
                             kept=["fine", "fine.json", "parent.json", "work"])
    assert "nothing to blame" in nothing
    for args, says in [(("fork", "parent.json", "--at", "9"), "step"),
                       (("fork", "parent.json", "--at", "2", "--action", "{not json"), "--action must be JSON"),
                       (("fork", "parent.json"), "--at"),
                       (("fork", "nosuch.json", "--at", "2"), "nosuch.json"),
                       (("blame", "parent.json", "--budget", "lots"), "--budget")]:
        line = assert_refused(cli(*args, cwd=tmp_path), tmp_path, kept=["fine", "fine.json", "parent.json", "work"])
        assert says in line, (args, line)


def test_a_saved_run_s_oracle_command_runs_in_a_new_process_only_when_given_again(tmp_path):
    """A new interpreter has run no command: blame (and fork) of a saved diary run refuses the
    command its trace names in one line, before any fork; given again (--oracle), it runs."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "judged.txt"
    command = f"touch {marker}; false"
    done = cli("run", "do the task", "--model", "memfit/diary", "--no-memory", "--oracle", command,
               "--max-trials", "2", "--trace", "../parent.json", cwd=work)
    assert done.returncode != 2, done.stderr
    assert json.loads((tmp_path / "parent.json").read_text())["oracle"] == {"command": command}
    marker.unlink()  # the run's own trials ran it; what follows must not, unless it is given again
    kept = ["parent.json", "work"]
    for args in (("blame", "parent.json"), ("fork", "parent.json", "--at", "2", "--workdir", "child")):
        line = assert_refused(cli(*args, cwd=tmp_path), tmp_path, kept=kept)
        assert f"the run's oracle is the command {command!r}, which this process has not run" in line, line
        assert "(--oracle)" in line and not marker.exists()
    forked = cli("fork", "parent.json", "--at", "2", "--workdir", "child", "--oracle", command, cwd=tmp_path)
    assert forked.returncode in (0, 1) and "error" not in forked.stderr, forked.stderr
    assert marker.exists()
    marker.unlink()
    blamed = cli("blame", "parent.json", "--oracle", command, cwd=tmp_path)
    assert blamed.returncode in (0, 1), blamed.stderr  # a step found, or none: the forks were judged
    assert marker.exists() and "error" not in blamed.stdout.split("Blame", 1)[0]


def test_fork_reads_the_parent_s_store_where_the_trace_says_or_where_memory_names_it(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    done = cli("run", "What is the total of the numbers in the numbers file?", "--model", "memfit/memory-lesson",
               "--memory", "store", "--trace", "../parent.json", cwd=work)
    assert done.returncode == 0, done.stderr
    forked = cli("fork", "parent.json", "--at", "2", "--workdir", "child", "--trace", "child.json", cwd=tmp_path)
    assert forked.returncode == 0, forked.stderr
    child = json.loads((tmp_path / "child.json").read_text())
    assert child["parent"]["memory"] == "overlay" and child["memory_store"]["over"] == {"path": str(work / "store")}
    (work / "store").rename(tmp_path / "moved")
    again = cli("fork", "parent.json", "--at", "2", "--workdir", "again", "--memory", "moved", "--trace", "again.json",
                cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    moved = json.loads((tmp_path / "again.json").read_text())
    assert moved["parent"]["memory"] == "overlay" and moved["memory_store"]["over"] == {"path": str(tmp_path / "moved")}
    kept = sorted(os.listdir(tmp_path))
    line = assert_refused(cli("fork", "parent.json", "--at", "2", "--memory", "nowhere", cwd=tmp_path), tmp_path, kept=kept)
    assert "'nowhere' is no folder" in line
