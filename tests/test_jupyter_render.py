"""Rendering of every event type (state fold, HTML, text) and the settings, without a kernel."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.jupyter.config import FALLBACK_DEMO_MODEL, load_dotenv_file, resolve_model
from memfit_jupyter.jupyter.html import render_html, render_text
from memfit_jupyter.jupyter.state import RunState

EVENTS = [
    {"type": "run_start", "iteration": 0, "ts": 0, "task": "t <b>", "tiers": {"primary": "memfit/demo"}},
    {"type": "action", "iteration": 1, "ts": 0, "thought": "look <here>", "action_type": "read",
     "tool": "read_file", "params": {"path": "a.txt"}, "reflection": None},
    {"type": "model_call", "iteration": 1, "ts": 0, "ok": True, "cost_usd": 0.5, "prompt_tokens": 10,
     "completion_tokens": 5},
    {"type": "observation", "iteration": 1, "ts": 0, "tool": "read_file", "ok": False, "output": "x" * 1000,
     "error": "no such file", "duration_s": 0.01, "data": {}},
    {"type": "reflection", "iteration": 1, "ts": 0, "level": 4, "level_name": "CRITICAL",
     "trigger": "action failed", "suggestions": ["list the directory"], "summary": "it failed",
     "impact": {"negative_effects": ["no progress"]}, "memory_used": ["m1"]},
    {"type": "spin", "iteration": 1, "ts": 0, "layer": 2, "is_spinning": True, "reason": "same cat again",
     "suggestions": ["stop"], "next_actions": ["ls"]},
    {"type": "breaker", "iteration": 1, "ts": 0, "tier": "primary", "from_state": "CLOSED", "to_state": "OPEN",
     "failures": 3},
    {"type": "synthesis", "iteration": 1, "ts": 0, "strategy": "diverse", "answer": None, "confidence": 0.2,
     "low_confidence": True, "alternatives": [{"answer": "A"}, {"answer": "B"}], "clusters": []},
    {"type": "memory", "iteration": 1, "ts": 0, "op": "search", "query": "files",
     "results": [{"id": "m1", "content": "a memory", "score": 0.7, "breakdown": {"r": 0.5, "final": 0.7}}]},
    {"type": "context", "iteration": 1, "ts": 0, "used_tokens": 75, "window": 100, "ratio": 0.75,
     "watermark": "warning", "summary": "so far"},
    {"type": "telepathy", "iteration": 1, "ts": 0, "signal": "strong"},
    {"type": "degradation", "iteration": 1, "ts": 0, "reason": "cost limit", "partial_result": "half",
     "explanation": "stopped", "recommendations": ["raise it"], "cost_usd": 1.0, "duration_s": 2,
     "calls": 3, "iterations": 1, "tried": []},
    {"type": "run_end", "iteration": 1, "ts": 0, "status": "degraded", "answer": "half", "reason": "cost limit"},
]


def test_fold_routes_each_event_to_its_part():
    state = RunState()
    changed = [state.apply(e) for e in EVENTS]
    assert changed[1] == {"card:1", "gauges"}
    assert "spin" in changed[5] and "breakers" in changed[6] and changed[10] == {"card:1"}
    card = state.cards[1]
    assert card.ok is False and card.cost_usd == 0.5 and card.reflections[0]["level"] == 4
    assert card.others[0]["type"] == "telepathy"
    assert state.breakers["primary"]["state"] == "OPEN"
    assert state.status == "degraded" and state.totals["cost_usd"] == 0.5


def test_html_renders_every_panel_escaped_and_without_script():
    trace = {"run_id": "r1", "task": "t <b>", "model": "memfit/demo", "status": "degraded", "answer": "half",
             "reason": "cost limit", "events": EVENTS, "totals": {"cost_usd": 0.5, "iterations": 1},
             "limits": {"max_cost_usd": 1.0, "max_iterations": 20}}
    html = render_html(trace)
    assert "<script" not in html and "<style" not in html
    assert "t &lt;b&gt;" in html and "look &lt;here&gt;" in html
    for text in ("L4 CRITICAL", "action failed", "list the directory", "Spin detected (layer 2",
                 "primary: OPEN", "low confidence", "Alternatives", "a memory", "75%", "telepathy",
                 "strong", "Degraded", "raise it", "no such file"):
        assert text in html, text
    assert "<details" in html  # the long observation expands
    text = render_text(trace)
    assert "degraded" in text and "#1 read read_file [failed]" in text
    quiet = render_html(trace, quiet=True)
    assert "read_file" not in quiet and "Degraded" in quiet


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
