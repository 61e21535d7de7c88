"""``python -m memfit_jupyter`` in the terminal, called in-process (``__main__.main``): what a run
prints and writes where, and the one line each bad input gets."""

from __future__ import annotations

import json
import os

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
