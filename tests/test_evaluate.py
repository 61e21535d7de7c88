"""evaluate(): the runs of tasks x variants x repeats, judged by each task's oracle, and the
summary's intervals; one clear error and nothing in ``out`` for bad input."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import polars as pl
import pytest

from memfit_jupyter.evaluate import VARIANTS, evaluate, summarise
from memfit_jupyter.evaluate.seeding import SeedRelay
from memfit_jupyter.evaluate.stats import mcnemar_exact, paired_bootstrap, wilson
from memfit_jupyter.evaluate.variants import settings_for
from memfit_jupyter.tasks import Task, get, tasks

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_wilson_intervals_match_the_textbook():
    lo, hi = wilson(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.2775, abs=1e-4)
    lo, hi = wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert wilson(0, 0) == (0.0, 1.0)


def test_mcnemar_and_the_paired_bootstrap():
    assert mcnemar_exact(0, 5) == pytest.approx(0.0625)  # 2 * 0.5**5
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert paired_bootstrap([1, 1, 1, 1]) == (1.0, 1.0)
    lo, hi = paired_bootstrap([1, 0, 0, -1, 1, 0, 1, 0], resamples=500, seed=3)
    assert lo < 0.25 < hi and (lo, hi) == paired_bootstrap([1, 0, 0, -1, 1, 0, 1, 0], resamples=500, seed=3)


@pytest.mark.slow  # eight runs twice over; the diary's evaluation below runs the same path once
def test_an_evaluation_on_the_scripted_model_is_judged_and_summarised(tmp_path):
    chosen = tasks(["arith-sum", "fix-add"])
    out = tmp_path / "ev"
    ev = evaluate(chosen, ["bare", "default"], model="memfit/demo", repeats=2, out=out, max_parallel=2)
    runs = ev.runs
    assert runs.height == 2 * 2 * 2 and ev.baseline == "bare" and ev.out == out.resolve()
    assert sorted(set(runs["variant"])) == ["bare", "default"] and sorted(set(runs["seed"])) == [0, 1]
    for row in runs.to_dicts():
        # each verdict is the task's oracle on what the run left behind, asked again here
        task = get(row["task"])
        work = out / "runs" / row["run"] / "work"
        answer = json.loads(open(row["trace"]).read())["answer"]
        assert task.judge(work, answer).passed == row["passed"]
        assert row["calls"] >= 1 and row["tokens"] > 0
    summary = ev.summary
    assert summary["variant"].to_list() == ["bare", "default"]
    for row in summary.to_dicts():
        group = runs.filter(runs["variant"] == row["variant"])
        assert row["runs"] == group.height and row["successes"] == int(group["passed"].sum())
        assert row["success_lo"] <= row["success"] <= row["success_hi"]
        assert row["tokens_mean"] == pytest.approx(group["tokens"].mean())
    default = summary.row(1, named=True)
    assert default["pairs"] == 4 and default["change_lo"] <= default["change"] <= default["change_hi"]
    bare = summary.row(0, named=True)
    assert bare["change"] is None
    assert default["change"] == pytest.approx(default["success"] - bare["success"])
    assert "<svg" in ev.chart("t") and "bare" in ev.chart()
    # the same evaluation over the same out reads its runs back instead of running them again
    again = evaluate(chosen, ["bare", "default"], model="memfit/demo", repeats=2, out=out, max_parallel=2)
    assert again.runs["run"].to_list() == runs["run"].to_list()
    assert again.runs["passed"].to_list() == runs["passed"].to_list()


@pytest.mark.slow  # two evaluations, one stopped; the fast tier keeps the diary's below
def test_an_evaluation_stopped_part_way_is_summarised_from_what_out_holds(tmp_path):
    out = tmp_path / "ev"
    with pytest.raises(FileNotFoundError, match="no finished run"):
        evaluate(tasks(["arith-sum"]), ["bare", "default"], model="memfit/demo", out=out, finished_only=True)
    assert not out.exists()
    # one task ran under both variants, the other under bare only (as if stopped there)
    evaluate(tasks(["arith-sum"]), ["bare", "default"], model="memfit/demo", out=out, max_parallel=1)
    evaluate(tasks(["fix-add"]), ["bare"], model="memfit/demo", out=out, max_parallel=1)
    ev = evaluate(tasks(["arith-sum", "fix-add"]), ["bare", "default"], model="memfit/demo", out=out,
                  finished_only=True)
    # bare finished both tasks, default one: its change is over that one pair
    assert ev.runs.height == 3 and set(ev.runs.filter(ev.runs["variant"] == "default")["task"]) == {"arith-sum"}
    assert ev.summary["runs"].to_list() == [2, 1] and ev.summary["pairs"].to_list() == [None, 1]
    # a run whose baseline has not finished has no pair, and does not count
    flipped = evaluate(tasks(["arith-sum", "fix-add"]), ["bare", "default"], model="memfit/demo", out=out,
                       baseline="default", finished_only=True)
    assert flipped.runs.height == 2 and set(flipped.runs["task"]) == {"arith-sum"}


def test_the_variants_of_a_task_and_seed_work_in_the_same_place_and_keep_their_own_files(tmp_path):
    """The prompt names the working directory: variants compared on a task and seed must see the
    same one (else the path alone changes a small model's reply), one after another, even with
    two worker processes, and each run's files end in its own directory for its oracle."""
    out = tmp_path / "ev"
    ev = evaluate(tasks(["arith-sum", "fix-add"]), ["bare", "default", "memory"], model="memfit/demo",
                  repeats=2, out=out, max_parallel=2)
    for (task, seed), group in ev.runs.group_by("task", "seed"):
        places = set()
        for row in group.iter_rows(named=True):
            trace = json.loads(open(row["trace"]).read())
            place = str(out / "places" / f"{task}-s{seed}")
            assert place in json.dumps(trace) and str(row["run"]) not in json.dumps(trace["events"][1:])
            places.add(place)
            work = out / "runs" / row["run"] / "work"
            assert set(get(task).files) <= {p.name for p in work.iterdir()}
            assert (work / ".memfit").exists() is (row["variant"] != "bare")  # the run's own store, moved with it
        assert len(places) == 1 and group.height == 3
    assert not [p for p in (out / "places").iterdir() if p.is_dir()]  # every run's files moved to its own folder


def test_the_diary_judges_its_trials_with_the_task_s_own_oracle(tmp_path):
    ev = evaluate(tasks(["fix-add"]), ["diary"], model="memfit/demo", out=tmp_path / "d", max_parallel=1)
    trace = json.loads(open(ev.runs["trace"][0]).read())
    trials = [e for e in trace["events"] if e["type"] == "trial"]
    # the oracle output is the task's check command's: "$ <python> -m memfit_jupyter.tasks check fix-add"
    assert trials and all("memfit_jupyter.tasks check fix-add" in t["oracle_output"] for t in trials)
    assert ev.runs["passed"][0] == any(t["passed"] for t in trials)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"variants": {"odd": {"reflection_depth": 3}}}, ValueError, "variant 'odd': unknown setting 'reflection_depth'"),
    ({"variants": ["bare", "telepathy"]}, ValueError, "unknown variant(s) telepathy"),
    ({"tasks": [Task("no-oracle", "arith", "Say hi.", {"a.txt": "x"})]}, ValueError, "has no oracle"),
    ({"repeats": 0}, ValueError, "repeats must be"),
    ({"baseline": "default", "variants": ["bare"]}, ValueError, "baseline 'default' is not among"),
    ({"model": "nosuchprovider/model-x"}, Exception, "nosuchprovider/model-x"),
    ({"model": "openai/x", "api_base": "http://127.0.0.1:9/v1"}, RuntimeError, "cannot start"),
])
def test_bad_input_is_one_error_and_nothing_in_out(tmp_path, kwargs, error, message):
    out = tmp_path / "never"
    call = {"tasks": tasks(["arith-sum"]), "variants": ["bare"], "model": "memfit/demo", "out": out, **kwargs}
    with pytest.raises(error) as info:
        evaluate(call.pop("tasks"), call.pop("variants"), **call)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not out.exists()


def test_the_variants_each_switch_on_one_mechanism():
    assert VARIANTS["bare"] == {"reflection": "none", "memory": False}
    assert VARIANTS["default"] == {}
    for name in ("spin", "synthesis", "diary", "reflection-standard"):
        assert VARIANTS[name]["memory"] is False
    assert VARIANTS["synthesis"]["samples"] > 1 and VARIANTS["diary"]["max_trials"] > 1
    assert VARIANTS["memory"]["reflection"] == "none" and VARIANTS["memory"]["memory"] is None
    # synthesis draws its samples through sub_query: it joins the evaluation's tools
    assert settings_for({"tools": ["read_file", "finish"]}, VARIANTS["synthesis"])["tools"] == [
        "read_file", "finish", "sub_query"]
    assert "tools" not in settings_for({}, VARIANTS["synthesis"])
    assert settings_for({"tools": ["read_file"]}, {"tools": ["shell"]})["tools"] == ["shell"]


class _Echo(BaseHTTPRequestHandler):
    """A stand-in model server: answers with the JSON body it got, in two streamed pieces."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        half = len(body) // 2
        self.wfile.write(body[:half])
        self.wfile.flush()
        self.wfile.write(body[half:])


def test_the_seed_relay_stamps_seed_and_temperature_on_each_request():
    import urllib.request

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with SeedRelay(f"http://127.0.0.1:{server.server_address[1]}/v1", temperature=0.7) as relay:
            for seed in (3, 11):
                body = json.dumps({"model": "m", "messages": [], "temperature": 0}).encode()
                req = urllib.request.Request(relay.api_base(seed) + "/chat/completions", body,
                                             {"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=10) as r:
                    got = json.loads(r.read())
                assert got == {"model": "m", "messages": [], "temperature": 0.7, "seed": seed, "cache_prompt": False}
    finally:
        server.shutdown()
        server.server_close()


def test_summarise_pairs_runs_by_task_and_seed():
    import polars as pl

    rows = []
    for variant, passed in (("bare", [0, 0, 1, 0]), ("x", [1, 1, 1, 0])):
        for i, p in enumerate(passed):
            rows.append({"model": "m", "variant": variant, "task": f"t{i % 2}", "seed": i // 2, "passed": bool(p),
                         "tokens": 100, "calls": 2, "seconds": 1.0, "error": None})
    s = summarise(pl.DataFrame(rows, schema_overrides={"error": pl.String}), "bare", resamples=500)
    x = s.row(1, named=True)
    assert x["change"] == pytest.approx(0.5) and x["pairs"] == 4
    assert x["mcnemar_p"] == pytest.approx(0.5)  # 2 discordant pairs, both for x
    assert x["tokens_per_success"] == pytest.approx(400 / 3)


def test_run_keys_do_not_depend_on_the_server_s_address():
    # a local server starts on a new port each time: the same evaluation must find its runs again
    from memfit_jupyter.evaluate import _specs

    chosen = {"bare": VARIANTS["bare"]}
    one, _ = _specs(tasks(["arith-sum"]), chosen, {"model": "openai/m", "api_base": "http://127.0.0.1:1/v1"}, 2, 0)
    two, _ = _specs(tasks(["arith-sum"]), chosen, {"model": "openai/m", "api_base": "http://127.0.0.1:2/v1"}, 2, 0)
    assert [s.key for s in one] == [s.key for s in two] and len({s.key for s in one}) == 2
    other, _ = _specs(tasks(["arith-sum"]), chosen, {"model": "openai/other"}, 2, 0)
    assert {s.key for s in other}.isdisjoint(s.key for s in one)


def test_a_shared_store_variant_runs_in_turn_and_a_later_run_recalls_what_an_earlier_one_kept(tmp_path):
    """``recall``: one store for the variant's runs, repeat by repeat and task by task, so that
    repeat 1 of a task starts with what repeat 0 of it kept (memory across tasks)."""
    out = tmp_path / "ev"
    ev = evaluate(tasks(["arith-sum", "fix-add"]), ["bare", "recall"], model="memfit/demo", repeats=2, out=out)
    assert (out / "stores" / "recall").is_dir() and not (out / "stores" / "bare").exists()
    recalled = {}
    for row in ev.runs.filter(pl.col("variant") == "recall").iter_rows(named=True):
        trace = json.loads(open(row["trace"]).read())
        (recall,) = [e for e in trace["events"] if e["type"] == "memory" and e["op"] == "recall"]
        recalled[(row["task"], row["repeat"])] = [r["content"] for r in recall["results"]]
    assert recalled[("arith-sum", 0)] == [] and recalled[("fix-add", 0)] == []  # the store was empty then
    assert any("data.txt" in c for c in recalled[("arith-sum", 1)])
    assert any("add.py" in c for c in recalled[("fix-add", 1)])
    with pytest.raises(ValueError, match="max_parallel must be 1"):
        evaluate(tasks(["arith-sum"]), ["recall"], model="memfit/demo", out=tmp_path / "p", max_parallel=2)
