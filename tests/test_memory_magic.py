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


def test_the_summary_s_html_shows_a_store_s_path_as_text_not_markup(tmp_path):
    """A store's path (and its metadata) is text: in the summary's text/html it is escaped."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    folder = tmp_path / "<img src=x onerror=alert(1)>"
    magics = SimpleNamespace(shell=None, memory_path=str(folder))
    with capture_output() as shown:
        memfit_memory(magics, "")
    open_store(str(folder)).close()
    html = next(o.data["text/html"] for o in shown.outputs if "text/html" in o.data)
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


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


def test_run_reads_the_memory_a_run_reads_a_fork_s_overlay_or_a_saved_run_s_store(tmp_path, capsys,
                                                                                  run_over_a_store):
    """``--run``: a fork's memory is its own store over its parent's, without what it does not
    see; a saved trace's is the store it names; only reading subcommands take a run."""
    store, prior, run = run_over_a_store
    lesson = "the child's own lesson: quote every path"
    child = run.fork(1, workdir=tmp_path / "child", action={"tool": "memory_insert", "params": {"content": lesson}})
    child.run()
    saved = tmp_path / "child.json"
    saved.write_text(json.dumps(child.trace()))
    magics = SimpleNamespace(shell=SimpleNamespace(user_ns={"run": run, "child": child}),
                             memory_path=str(tmp_path / "elsewhere"))
    listed = memfit_memory(magics, "--run child list")
    own = set(listed["id"].to_list())
    hidden = child.memory.live.hidden
    assert hidden and own == {e.id for e in child.memory.live.list()} and not own & hidden
    assert {prior} | {e.id for e in child.memory.live.top.list()} == own  # what the parent learnt at step 1 on is not there
    assert lesson in listed["content"].to_list()
    assert own == set(memfit_memory(magics, f"--run {saved} list")["id"].to_list())  # the saved child's, reopened
    assert set(memfit_memory(magics, f"--run {child.id} list")["id"].to_list()) == own  # by its id
    found = memfit_memory(magics, "--run child search quote every path -k 3")
    assert found["content"][0] == lesson
    capsys.readouterr()
    memfit_memory(magics, "--run child")
    summary = capsys.readouterr().out
    assert f"{len(own)} memories" in summary and f"over {store.path}" in summary
    assert memfit_memory(magics, f"--run run show {prior}").id == prior  # a run in hand's own store
    assert not (tmp_path / "elsewhere").exists()  # the configured store was not touched
    for line, message in [("--run", "needs a run"), ("--run nobody list", "no run named 'nobody'"),
                          ("--run child add x", "reads a run's memory; add writes"),
                          ("--run child delete abc", "delete writes"), ("--run child frob", "unknown subcommand")]:
        with pytest.raises(UsageError, match=message):
            memfit_memory(magics, line)
    blind = tmp_path / "blind.json"
    blind.write_text(json.dumps({k: v for k, v in run.trace().items() if k != "memory_store"}))
    with pytest.raises(UsageError, match="does not say where its store was"):
        memfit_memory(magics, f"--run {blind} list")


@pytest.mark.kernel
def test_run_in_a_real_kernel_reads_a_forks_memory_and_refuses_writes_in_one_line(tmp_path):
    cells = [
        "%load_ext memfit_jupyter",
        "from memfit_jupyter import Agent\n"
        "import os\n"
        "os.makedirs('parent', exist_ok=True)\n"
        "run = Agent(model='memfit/memory-lesson', workdir='parent', memory='store').start('Sum the numbers in data.txt')\n"
        "run.run()\n"
        "child = run.fork(1, workdir='child', action={'tool': 'memory_insert', 'params': {'content': 'lesson of the fork'}})\n"
        "child.run()",
        "df = %memfit_memory --run child search lesson of the fork",
        "print(df['content'][0], sorted(df['id']) == sorted(e.id for e in child.memory.live.search('lesson of the fork')))",
        "%memfit_memory --run child add x",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert not [o for c in nb.cells[:4] for o in c.outputs if o.output_type == "error"]
    assert [o for o in nb.cells[2].outputs if o.output_type == "display_data" and MIME in o.data]  # the ranking panel
    assert nb.cells[3].outputs[0].text.strip() == "lesson of the fork True"
    err = "".join(o.get("text", "") + o.get("evalue", "") for o in nb.cells[4].outputs)
    assert "reads a run's memory; add writes" in err and "Traceback" not in err
