"""The static summary of a run (text/html, text/plain) and the settings, without a kernel.

The run itself is drawn by the JupyterLab extension (its tests: tests/test_labextension.py);
Python only writes the short summary that viewers without the extension show.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.jupyter.config import FALLBACK_DEMO_MODEL, load_dotenv_file, resolve_model
from memfit_jupyter.jupyter.html import render_html, render_text
from memfit_jupyter.jupyter.state import facts
from memfit_jupyter.trace import Trace

EVENTS = [
    {"type": "run_start", "iteration": 0, "ts": 0, "task": "t <b>", "tiers": {"primary": "memfit/demo"},
     "settings": {}, "tools": ["read_file"], "extensions": []},
    {"type": "action", "iteration": 1, "ts": 0, "thought": "look <here>", "action_type": "read",
     "tool": "read_file", "params": {"path": "a.txt"}, "reflection": None},
    {"type": "model_call", "iteration": 1, "ts": 0, "purpose": "action", "model": "memfit/demo",
     "tier": "primary", "attempt": 1, "ok": True, "cost_usd": 0.5, "prompt_tokens": 10,
     "completion_tokens": 5, "latency_s": 0.1, "max_tokens": None, "timeout_s": 30.0, "reply": "{}",
     "error": None, "error_kind": None},
    {"type": "observation", "iteration": 1, "ts": 0, "tool": "read_file", "ok": False, "output": "x" * 1000,
     "error": "no such file", "duration_s": 0.01, "data": {}},
    {"type": "reflection", "iteration": 1, "ts": 0, "level": 4, "level_name": "CRITICAL",
     "trigger": "action failed", "action_type": "read", "tool": "read_file", "success": False,
     "suggestions": ["list the directory"], "summary": "it failed",
     "impact": {"negative_effects": ["no progress"]}, "memory_used": ["m1"], "ok": True, "error": None},
    {"type": "spin", "iteration": 1, "ts": 0, "layer": 2, "detector": "logic_spin", "is_spinning": True,
     "reason": "same cat again", "suggestions": ["stop"], "next_actions": ["ls"], "action_type": "read",
     "consecutive_count": 3, "warning_count": 1, "is_task_progressing": False},
    {"type": "breaker", "iteration": 1, "ts": 0, "tier": "primary", "model": "memfit/demo", "failures": 3,
     "successes": 0, "rejected": 0, "opened_at": 1.0, "next_probe_at": 31.0, "from_state": "CLOSED",
     "to_state": "OPEN", "reason": "3 failures"},
    {"type": "synthesis", "iteration": 1, "ts": 0, "strategy": "diverse", "question": "q", "samples": [],
     "clusters": [], "answer": None, "confidence": 0.2, "share": 0.5, "low_confidence": True,
     "alternatives": [{"answer": "A"}, {"answer": "B"}], "no_consensus": True, "rationale": "",
     "recursive_calls": 2, "cost": {}},
    {"type": "memory", "iteration": 1, "ts": 0, "op": "search", "query": "files", "added": [], "bytes": 10,
     "results": [{"id": "m1", "content": "a memory", "score": 0.7, "breakdown": {"r": 0.5, "final": 0.7}}]},
    {"type": "context", "iteration": 1, "ts": 0, "used_tokens": 75, "window": 100, "ratio": 0.75,
     "watermark": "warning", "evicted": 0, "recall_size": 0, "summary": "so far"},
    {"type": "telepathy", "iteration": 1, "ts": 0, "signal": "strong"},
    {"type": "degradation", "iteration": 1, "ts": 0, "reason": "cost limit", "partial_result": "half",
     "explanation": "stopped", "recommendations": ["raise it"], "cost_usd": 1.0, "duration_s": 2,
     "calls": 3, "iterations": 1, "tried": []},
    {"type": "run_end", "iteration": 1, "ts": 0, "status": "degraded", "answer": "half", "reason": "cost limit"},
]


TRACE = {"version": 1, "run_id": "r1", "task": "t <b>", "model": "memfit/demo", "status": "degraded", "answer": "half",
         "reason": "cost limit", "events": EVENTS,
         "totals": {"cost_usd": 0.5, "iterations": 1, "calls": 1, "tokens": {"total": 15}, "duration_s": 2.0},
         "limits": {"max_cost_usd": 1.0, "max_iterations": 20}}


def test_facts_name_what_fired():
    f = facts(TRACE)
    # every event fits its class but the unknown one (left to the views' generic card)
    (skipped,) = Trace.load(TRACE, strict=False).warnings
    assert "'telepathy'" in skipped
    assert (f.status, f.iterations, f.cost_usd, f.calls, f.tokens) == ("degraded", 1, 0.5, 1, 15)
    assert f.actions == [(1, "read_file", False)]
    assert dict(f.reflections) == {"L4 critical": 1}
    assert f.spins == ["same cat again"] and f.breakers == ["primary CLOSED → OPEN"]
    assert f.syntheses == ["diverse"] and f.low_confidence == 1 and f.degradation == "cost limit"
    assert f.mechanisms()["failed actions"] == 1


@pytest.mark.parametrize("quiet", [False, True])
def test_summary_html_has_the_key_facts_escaped_and_no_script(quiet):
    html = render_html(TRACE, quiet=quiet)  # quiet runs keep the same facts: the summary is the record
    assert "<script" not in html and "<style" not in html
    assert "t &lt;b&gt;" in html and "look &lt;here&gt;" not in html
    for text in ("degraded", "1 iteration(s)", "$0.5000", "L4 critical ×1", "spin alerts: 1",
                 "primary CLOSED → OPEN", "1 with low confidence", "degraded: cost limit", "#1 read_file failed"):
        assert text in html, text
    assert "#00" not in html and "#fff" not in html  # no colours of its own: the page's theme shows through


def test_summary_text():
    text = render_text(TRACE)
    assert text.splitlines()[0] == "memfit run r1: degraded after 1 iteration(s), $0.5000, 1 model call(s), 2.0 s"
    assert "  #1 read_file failed" in text and "reflections: L4 critical ×1" in text
    assert "#1 read_file" not in render_text(TRACE, quiet=True)


def test_a_long_run_lists_its_first_and_last_actions():
    events = [{"type": "action", "iteration": i, "ts": 0, "thought": "", "action_type": "read", "tool": f"t{i}",
               "params": {}, "reflection": None} for i in range(1, 41)]
    html = render_html({**TRACE, "events": events})
    assert "#1 t1" in html and "#40 t40" in html and "… 28 more" in html and "#20 t20" not in html


def test_a_real_trace_renders():
    run = Agent(model="memfit/unknown-tool", memory=False).start("add up data.txt")
    html = render_html(run.trace())  # before it started
    assert "pending" in html


def test_model_choice_order(monkeypatch):
    monkeypatch.delenv("MEMFIT_MODEL", raising=False)
    assert resolve_model("memfit/a", "memfit/b") == ("memfit/a", None)
    assert resolve_model(None, "memfit/b") == ("memfit/b", None)
    model, note = resolve_model(None, None)
    assert model == FALLBACK_DEMO_MODEL and "offline" in note
    monkeypatch.setenv("MEMFIT_MODEL", "memfit/spin-demo")
    assert resolve_model(None, None)[0] == "memfit/spin-demo"


def test_dotenv_is_read_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMFIT_TEST_KEY", raising=False)
    assert load_dotenv_file(tmp_path) is False
    (tmp_path / ".env").write_text("MEMFIT_TEST_KEY=sk-test-123\n")
    assert load_dotenv_file(tmp_path) is True
    import os

    assert os.environ["MEMFIT_TEST_KEY"] == "sk-test-123"
    monkeypatch.delenv("MEMFIT_TEST_KEY")


@pytest.mark.parametrize("module", ["memfit_jupyter", "memfit_jupyter.jupyter"])
def test_import_is_light(module):
    code = (f"import sys, {module}\n"
            "heavy = [m for m in ('litellm', 'ipywidgets', 'IPython') if m in sys.modules]\n"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_compare_fallback_writes_values_as_the_view_does():
    from memfit_jupyter import compare
    from memfit_jupyter.jupyter.html import fmt_value

    assert [fmt_value("money", 0.016807999999999997), fmt_value("money", 2.5), fmt_value("seconds", 6.296698523994564),
            fmt_value("seconds", 12.4), fmt_value("count", 12345), fmt_value("text", None)] == [
        "$0.0168", "$2.50", "6.30 s", "12 s", "12,345", "—"]
    pending = {**TRACE, "status": "pending", "answer": None, "events": TRACE["events"][:1]}  # no answer yet
    from memfit_jupyter.trace import TraceWarning

    with pytest.warns(TraceWarning, match="telepathy"):  # TRACE carries an event type no one knows
        cmp = compare(TRACE, pending, labels=("a", "b"))
    page = cmp._repr_mimebundle_()["text/html"]
    assert "None" not in page and "—" in page and "$0.5000" in page
    assert "None" not in cmp._text()


@pytest.mark.labextension  # the page inlines the renderer that the extension's build writes
def test_the_report_is_one_offline_page_with_the_trace_inside(tmp_path):
    import json
    import re

    from memfit_jupyter import compare
    from memfit_jupyter.jupyter.report import SCRIPT, report_html, write_report
    from memfit_jupyter.trace import TraceWarning

    if not SCRIPT.is_file():
        pytest.fail("the report's renderer is not built: `jlpm build` in labextension/")
    trace = {**TRACE, "task": "a task that says </script><script>alert(1)</script>"}
    page = report_html(trace)
    # the trace comes back whole out of its script element; nothing in it closes the element
    data = re.search(r'<script type="application/json" id="memfit-report-data">(.*?)</script>', page, re.S)
    assert json.loads(data.group(1)) == {"kind": "run", "data": trace}
    assert page.count("</script>") == 2
    # nothing is fetched: no URL to load from, and the page forbids it
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', page)
    assert "default-src 'none'" in page
    with pytest.warns(TraceWarning, match="telepathy"):  # TRACE carries an event type no one knows
        pair = compare(trace, TRACE, labels=("x", "y"))
    target = write_report(pair, tmp_path / "pair.html")
    assert '"kind": "compare"' in target.read_text() and not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(IsADirectoryError):
        write_report(trace, tmp_path)
    with pytest.raises(TypeError):
        report_html(42)


@pytest.mark.parametrize("line, message", [
    ("", "usage: %memfit export RUN PATH"),
    ("nothing here.html", "no variable 'nothing'"),
    ("number out.html", "a report draws a run, a trace or a comparison, got int"),
    ("trace 'unclosed", "%memfit export: No closing quotation"),
])
def test_export_says_what_is_wrong_in_one_line(tmp_path, line, message):
    from IPython.core.error import UsageError

    from memfit_jupyter.jupyter.report import export_magic

    with pytest.raises(UsageError) as err:
        export_magic({"number": 1, "trace": TRACE}, line)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_memory_list_shows_stored_scores_and_a_nonsense_search_says_nothing_is_relevant():
    from memfit_jupyter.jupyter.memory_widget import bundle, ranking_payload
    from memfit_jupyter.memory.entity import MemoryEntity
    from memfit_jupyter.memory.ranking import core_score, rank, relevance_floor

    memories = [MemoryEntity(id="m1", content="CSV exports from billing use semicolons", tags=["csv"], r_score=0.9),
                MemoryEntity(id="m2", content="The quarterly report lives in data/reports", tags=["reports"])]
    listed = ranking_payload(memories)
    assert listed["score_label"] == "stored score" and listed["floor"] is None and not listed["nothing_relevant"]
    assert [r["score"] for r in listed["results"]] == [round(core_score(m), 6) for m in memories]
    assert all(r["score"] > 0 for r in listed["results"])
    # the floor is what hybrid convex ranking gives a memory with no word of the query at most
    assert relevance_floor() == pytest.approx(0.05 + 0.95 * 0.3)
    # a query no memory shares a word with: the closest by embedding still gets alpha
    nonsense = rank(memories, "zebra quantum", semantic={"m1": 0.04, "m2": 0.02}, lexical={})
    shown = ranking_payload(nonsense, "zebra quantum")
    assert shown["results"][0]["score"] > 0.25 and shown["nothing_relevant"] is True
    assert "Nothing relevant" in bundle(shown)["text/html"] and "Nothing relevant" in bundle(shown)["text/plain"]
    found = ranking_payload(rank(memories, "csv semicolons", semantic={"m1": 0.6, "m2": 0.1},
                                 lexical={"m1": 3.2}), "csv semicolons")
    assert found["nothing_relevant"] is False and found["results"][0]["id"] == "m1"
    assert found["results"][0]["score"] > found["floor"]
