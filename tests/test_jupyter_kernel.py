"""The magics in a real kernel (nbclient): outputs, the trace, widget state, errors.

One notebook, executed once for the module in a fresh kernel whose working
directory is a temporary folder; each test reads its cell's outputs.
"""

from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.kernel

RUN_MIME = "application/vnd.memfit.run+json"
#: A key of the shape people paste, typed into options where it does not belong.
KEY = "sk-proj-ZZtopSecretValue1234567890abcdef"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

CELLS = {
    "load": "import sys\n%load_ext memfit_jupyter\nprint('litellm loaded:', 'litellm' in sys.modules)",
    "demo": "%%memfit_task --model memfit/demo --name run1\nWhat is the total of the numbers in data.txt?",
    "check_demo": "print(type(run1).__name__, run1.status, run1.iteration)",
    "bad_args": "%%memfit_task --max-iterations lots\nx",
    "unknown_option": "%%memfit_task --frobnicate\nx",
    "bad_model": "%%memfit_task --model memfit/no-such-scenario\nx",
    "bad_tool": "%%memfit_task --tools python,teleport\nx",
    "key_model": f"%%memfit_task --model {KEY}\nx",
    "key_scenario": f"%%memfit_task --model memfit/{KEY}\nx",
    "key_tools": f"%%memfit_task --tools {KEY}\nx",
    "key_iterations": f"%%memfit_task --max-iterations {KEY}\nx",
    "open_quote": "%%memfit_task --oracle 'ls --no-memory\nadd up data.txt",
    "pg_store": "%%memfit_task --memory postgresql://bob:pw@127.0.0.1:1/db\nadd up data.txt",
    "url_store": "%%memfit_task --memory https://u:hunter2hunter2@x/y\nadd up data.txt",
    "no_plan": "%%memfit_task --plan nosuch.json --no-memory\nadd up data.txt",
    "plan_folder": "%%memfit_task --plan . --no-memory\nadd up data.txt",
    "spin_one": "%%memfit_task --spin-threshold 1\nx",
    "bad_api_base": "%%memfit_task --api-base '{\"slow\": \"http://127.0.0.1:1/v1\"}'\nx",
    "api_base": ("%%memfit_task --quiet --no-memory --name run_api "
                 "--api-base '{\"primary\": \"http://127.0.0.1:18779/v1\"}'\nWhat is the total of the numbers in data.txt?"),
    "check_api_base": "print(repr(run_api.agent.api_base))",
    "no_url_folder": "import os\nprint('written:', [n for n in os.listdir('.') if n.endswith(':')])",
    "no_model": "%%memfit_task --quiet --name run2 --reflection deep\nWhat is the total of the numbers in data.txt?",
    "status": "%memfit",
    "task_help": "print(get_ipython().object_inspect_text('%%memfit_task'))",
    "bad_sub": "%memfit frobnicate",
    "config": "%config MemfitMagics.model = 'memfit/unknown-tool'\n%config MemfitMagics.max_iterations = 7",
    "configured": "%%memfit_task --name run3\nWhat is the total of the numbers in data.txt?",
    "boom": (
        "from memfit_jupyter import Agent\n"
        "from memfit_jupyter.jupyter.display import show\n"
        "class Boom:\n"
        "    def before_iteration(self, run):\n"
        "        if run.iteration == 2:\n"
        "            raise RuntimeError('the plug-in broke')\n"
        "boom = Agent(model='memfit/demo', extensions=[Boom()]).start('add up data.txt')\n"
        "view = show(boom)"
    ),
    "after_boom": "print('kernel alive', boom.status)",
}


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("kernel")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(src, metadata={"name": name}) for name, src in CELLS.items()]
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()
    return notebook


def outputs(nb, name):
    for cell in nb.cells:
        if cell.metadata.get("name") == name:
            return cell.outputs
    raise KeyError(name)


def text_of(outs):
    parts = []
    for o in outs:
        if o.output_type == "stream":
            parts.append(o.text)
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}\n" + "\n".join(o.traceback))
        elif "data" in o and "text/plain" in o.data:
            parts.append(o.data["text/plain"])
    return "".join(parts)


def bundle(outs):
    found = [o for o in outs if o.output_type == "display_data" and RUN_MIME in o.data]
    assert len(found) == 1, [o.get("data", {}).keys() for o in outs]
    return found[0]


def widget_state(nb):
    return nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]


def test_load_ext_does_not_import_litellm(nb):
    assert "litellm loaded: False" in text_of(outputs(nb, "load"))


def test_demo_run_outputs_one_bundle_that_names_its_live_widget(nb):
    outs = outputs(nb, "demo")
    assert not any(WIDGET_MIME in o.get("data", {}) for o in outs)  # nothing to go missing on reopen
    out = bundle(outs)
    assert {RUN_MIME, "text/plain", "text/html"} <= set(out.data)
    trace = out.data[RUN_MIME]
    assert trace["status"] == "done"
    assert "42" in trace["answer"]
    assert [e["type"] for e in trace["events"]][0] == "run_start"
    assert trace["events"][-1]["type"] == "run_end"
    assert "done" in out.data["text/plain"] and "42" in out.data["text/plain"]
    html = out.data["text/html"]
    assert "<script" not in html and "read_file" in html and "data.txt add up to 42" in html
    assert out.metadata[RUN_MIME]["live_widget"]
    json.dumps(trace)  # the payload is JSON as it is
    assert "Run done 3" in text_of(outputs(nb, "check_demo"))


def test_the_live_widget_state_saved_with_the_notebook_holds_controls_not_html(nb):
    out = bundle(outputs(nb, "demo"))
    model = widget_state(nb)[out.metadata[RUN_MIME]["live_widget"]]
    assert model["model_name"] == "MemfitRunModel" and model["model_module"] == "memfit-jupyter"
    controls = model["state"]["controls"]
    assert controls["status"] == "done" and controls["buttons"] == []
    assert controls["count"] == len(out.data[RUN_MIME]["events"])
    assert "<div" not in json.dumps(model["state"])


@pytest.mark.parametrize("name, message", [
    ("bad_args", "argument --max-iterations: invalid int value: 'lots'"),
    ("unknown_option", "unrecognized arguments: --frobnicate"),
    ("bad_model", "unknown scenario 'no-such-scenario'; available:"),
    ("bad_tool", "unknown tool(s) teleport"),
    ("bad_sub", "unknown subcommand 'frobnicate' for %memfit; valid: status"),
    ("key_model", "unknown model '[REDACTED]'"),
    ("key_scenario", "unknown scenario '[REDACTED]'"),
    ("key_tools", "unknown tool(s) [REDACTED]"),
    ("key_iterations", "argument --max-iterations: invalid int value: '[REDACTED]'"),
    ("open_quote", "No closing quotation"),
    ("pg_store", "cannot open memory store 'postgresql://bob:[REDACTED]@127.0.0.1:1/db'"),
    ("url_store", "a memory store cannot be at a https:// URL"),
    ("no_plan", "nosuch.json' does not exist"),
    ("plan_folder", "' is a folder"),
    ("spin_one", "--spin-threshold must be at least 2, got 1"),
    ("bad_api_base", "--api-base names unknown tier(s) slow"),
])
def test_bad_input_is_a_one_line_usage_error(nb, name, message):
    text = text_of(outputs(nb, name))
    assert text.startswith("UsageError: ") and message in text
    assert "Traceback" not in text
    assert len(text.strip().splitlines()) == 1
    assert KEY not in text and "hunter2hunter2" not in text  # a key typed into an option is not shown


def test_a_refused_cell_writes_nothing_and_a_per_tier_api_base_is_a_mapping(nb):
    """The URL store made a folder "https:" (named after the URL's password below it); the JSON of
    --api-base was taken as a URL, its quotes and all."""
    assert "written: []" in text_of(outputs(nb, "no_url_folder"))
    assert "{'primary': 'http://127.0.0.1:18779/v1'}" in text_of(outputs(nb, "check_api_base"))


def test_no_model_uses_demo_with_a_visible_note_and_quiet_has_no_widget(nb):
    outs = outputs(nb, "no_model")
    assert not any(WIDGET_MIME in o.get("data", {}) for o in outs)
    out = bundle(outs)
    trace = out.data[RUN_MIME]
    assert trace["model"] == "memfit/demo" and trace["status"] == "done"
    notes = [e["text"] for e in trace["events"] if e["type"] == "note"]
    assert any("using the offline scripted model memfit/demo" in n for n in notes)
    assert not any("not available" in n for n in notes)  # every option has its feature
    assert "using the offline scripted model" in out.data["text/html"]


def test_status_lists_tiers_defaults_and_scenarios(nb):
    text = text_of(outputs(nb, "status"))
    for expected in ("model tiers", "primary", "max_cost_usd: 1.0", "max_iterations: 20", "demo:", "spin-demo:"):
        assert expected in text


def test_the_cell_magic_s_help_shows_its_usage_with_two_percent_signs_and_every_option(nb):
    text = " ".join(text_of(outputs(nb, "task_help")).split())
    assert "%%memfit_task [--model M]" in text and "%%%" not in text
    for flag in ("--api-base URL", "--fast-api-base URL", "--structured MODE", "--max-cost USD", "--otel"):
        assert flag in text
    assert "Most iterations a run may take. (default 20)" in text


def test_config_sets_model_and_defaults(nb):
    trace = bundle(outputs(nb, "configured")).data[RUN_MIME]
    assert trace["model"] == "memfit/unknown-tool"
    assert trace["limits"]["max_iterations"] == 7
    assert trace["status"] == "done"
    failed = [e for e in trace["events"] if e["type"] == "observation" and not e["ok"]]
    assert "unknown tool 'web_search'" in failed[0]["error"]


def test_exception_in_the_loop_is_shown_and_kept_and_kernel_survives(nb):
    outs = outputs(nb, "boom")
    trace = bundle(outs).data[RUN_MIME]
    assert trace["status"] == "failed"
    errors = [e for e in trace["events"] if e["type"] == "error"]
    assert "the plug-in broke" in errors[0]["message"]
    assert "the plug-in broke" in bundle(outs).data["text/html"]
    assert widget_state(nb)[bundle(outs).metadata[RUN_MIME]["live_widget"]]["state"]["controls"]["status"] == "failed"
    assert "kernel alive failed" in text_of(outputs(nb, "after_boom"))
