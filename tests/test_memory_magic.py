"""``%memfit_memory``: every subcommand, bad input, the ranking panel; in-process and in a real kernel."""

from __future__ import annotations

import json
from types import SimpleNamespace

import nbformat
import polars as pl
import pytest
from IPython.core.error import UsageError
from nbclient import NotebookClient

from memfit_jupyter.jupyter.memory_magic import memfit_memory
from memfit_jupyter.jupyter.memory_widget import MIME, ranking_html, ranking_payload
from memfit_jupyter.memory import open_store


@pytest.fixture
def magics(tmp_path):
    m = SimpleNamespace(shell=None, memory_path=str(tmp_path / "mem"))
    yield m
    open_store(m.memory_path).close()


def test_add_search_list_show_delete(magics, capsys):
    memfit_memory(magics, 'add "pytest -x stops at the first failure" --tags pytest,testing '
                          '--question "how to stop pytest early?"')
    memfit_memory(magics, "add polars scan_csv reads big csv files lazily --tags polars")
    assert "stored as" in capsys.readouterr().out
    memfit_memory(magics, "add polars scan_csv reads big csv files lazily --tags polars")
    assert "duplicate" in capsys.readouterr().out
    df = memfit_memory(magics, "search how do I stop pytest early -k 5")
    assert isinstance(df, pl.DataFrame)
    assert df["content"][0].startswith("pytest -x")
    assert {"r", "c", "t", "a", "p", "o", "e", "keyword_bonus", "semantic", "final"} <= set(df.columns)
    assert df["final"].to_list() == sorted(df["final"].to_list(), reverse=True)
    assert "memory ranking for 'how do I stop pytest early'" in capsys.readouterr().out
    tagged = memfit_memory(magics, "search csv --tags polars --bytes 100")
    assert tagged["tags"].to_list() == [["polars"]]
    listed = memfit_memory(magics, "list --tag pytest --limit 5")
    assert listed.height == 1 and listed["potential_questions"][0].to_list() == ["how to stop pytest early?"]
    mid = listed["id"][0]
    assert memfit_memory(magics, f"show {mid}").id == mid
    memfit_memory(magics, f"delete {mid}")
    assert memfit_memory(magics, "list").height == 1


def test_search_ranks_by_the_weighted_score_under_its_name_and_its_older_one(magics, capsys):
    memfit_memory(magics, 'add "pytest -x stops at the first failure" --tags pytest')
    memfit_memory(magics, "add polars scan_csv reads big csv files lazily --tags polars")
    weighted = memfit_memory(magics, "search stop pytest early --ranking weighted")
    assert memfit_memory(magics, "search stop pytest early --ranking seed")["final"].to_list() \
        == weighted["final"].to_list()
    assert weighted["final"].to_list() != memfit_memory(magics, "search stop pytest early")["final"].to_list()
    capsys.readouterr()


def test_summary_export_import_reindex(magics, tmp_path, capsys):
    memfit_memory(magics, "add the cluster queue is slow on mondays --tags infra")
    memfit_memory(magics, "")
    assert "1 memories, embedder hashing-384 (384 dims)" in capsys.readouterr().out
    out = tmp_path / "dump.jsonl"
    memfit_memory(magics, f"export {out}")
    assert json.loads(out.read_text().splitlines()[0])["content"].startswith("the cluster queue")
    other = SimpleNamespace(shell=None, memory_path=str(tmp_path / "other"))
    memfit_memory(other, f"import {out}")
    assert "imported 1 memories" in capsys.readouterr().out
    memfit_memory(other, "reindex --embedder hashing-128")
    assert "re-embedded 1 memories with hashing-128" in capsys.readouterr().out
    assert memfit_memory(other, "search cluster queue")["content"][0].startswith("the cluster")
    open_store(other.memory_path).close()


def test_failures_lists_the_diary(magics):
    store = open_store(magics.memory_path)
    store.add("Lesson: run pytest before finishing\nKind: code\nTask: fix f", tags=["failures", "failures:code"])
    store.add("an ordinary memory", tags=["misc"])
    df = memfit_memory(magics, "failures")
    assert df.height == 1 and "pytest" in df["lesson"][0]
    assert memfit_memory(magics, "failures code").height == 1
    assert memfit_memory(magics, "failures other").height == 0


@pytest.mark.parametrize("line,message", [
    ("frobnicate", "unknown subcommand 'frobnicate'"),
    ("search", "search:"),
    ("search x -k 0", "-k must be at least 1"),
    ("search x -k lots", "search:"),
    ("search x --bytes -5", "--bytes must be positive"),
    ("search x --tags ,", "--tags is empty"),
    ("search x --ranking magic", "search:"),
    ("show nope", "no memory with id 'nope'"),
    ("delete nope", "no memory with id 'nope'"),
    ("list --limit 0", "--limit must be at least 1"),
    ("import /no/such/file.jsonl", "no such file"),
    ("reindex --embedder word2vec", "unknown embedder"),
    ('add "unclosed', "No closing quotation"),
])
def test_bad_input_is_a_one_line_usage_error(magics, line, message):
    with pytest.raises(UsageError, match=message) as info:
        memfit_memory(magics, line)
    assert "\n" not in str(info.value).strip()


def test_ranking_html_is_self_contained_and_sorted(tmp_path):
    store = open_store(tmp_path / "m")
    store.add("alpha <b>beta</b>", tags=["x"], scores={"r": 0.9})
    store.add("gamma delta", scores={"c": 1.0})
    payload = ranking_payload(store.search("alpha gamma"), "alpha gamma", None)
    html = ranking_html(payload)
    assert "&lt;b&gt;beta" in html and "<b>beta</b>" not in html
    # static: JupyterLab runs no script in an output (the extension sorts on a header click)
    assert html.count("<tr data-rank") == 2 and "<script" not in html and "http" not in html
    by_c = ranking_html(payload, sort="c").split("<tbody>")[1]
    assert by_c.index("gamma delta") < by_c.index("alpha &lt;b&gt;")
    store.close()


@pytest.mark.kernel
def test_ranking_panel_in_a_real_kernel(tmp_path):
    cells = [
        "%load_ext memfit_jupyter",
        "%memfit_memory add restart the kernel after pip install --tags jupyter",
        "df = %memfit_memory search why does import fail after pip install",
        "print(type(df).__name__, df.height)",
        "%memfit_memory search x -k nope",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    panel = [o for o in nb.cells[2].outputs if o.output_type == "display_data"]
    assert len(panel) == 1
    data = panel[0].data
    # the ranking is the static bundle (drawn and sorted by the extension): nothing to go missing
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert data[MIME]["results"][0]["content"].startswith("restart the kernel")
    assert "text/html" in data and "text/plain" in data
    assert nb.cells[3].outputs[0].text.strip() == "DataFrame 1"
    err = "".join(o.get("text", "") + o.get("evalue", "") for o in nb.cells[4].outputs)
    assert "%memfit_memory search:" in err and "Traceback" not in err  # IPython shows a UsageError as one line
    assert (tmp_path / ".memfit" / "memory.sqlite3").exists()
