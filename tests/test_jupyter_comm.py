"""Step, Approve, Override, choices, escalation and interrupt through a running kernel, as the browser
drives them.

One kernel for the module (jupyter_client).  Button clicks are sent as the
browser sends them: a ``comm_msg`` to the button's comm with
``{"method": "custom", "content": {"event": "click"}}``; a typed value is a ``comm_msg`` with
``{"method": "update", "state": {...}}``.
"""

from __future__ import annotations

import ast
import shlex
import sys
import time
from queue import Empty

import pytest
from jupyter_client import KernelManager


class Kernel:
    def __init__(self, cwd):
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=str(cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        #: comm id -> widget state, from every comm_open seen on iopub.
        self.widgets: dict[str, dict] = {}

    def track(self, msg):
        """Keep ``widgets`` up to date from comm messages, as the browser's widget manager does."""
        c = msg["content"]
        if msg["msg_type"] == "comm_open":
            self.widgets[c["comm_id"]] = dict(c["data"]["state"])
        elif msg["msg_type"] == "comm_msg":
            if c["data"].get("method") == "update" and c["comm_id"] in self.widgets:
                self.widgets[c["comm_id"]].update(c["data"]["state"])

    def _drain(self, msg_id, timeout=60):
        """Collect iopub messages of one request until the kernel is idle again."""
        msgs = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.kc.get_iopub_msg(timeout=1)
            except Empty:
                continue
            self.track(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            msgs.append(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return msgs
        raise TimeoutError("the kernel did not go idle")

    def execute(self, code, timeout=60):
        msg_id = self.kc.execute(code)
        msgs = self._drain(msg_id, timeout)
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        return reply, msgs

    def value(self, expr):
        _, msgs = self.execute(f"print(repr({expr}))")
        return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream").strip()

    def click(self, comm_id):
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id,
                                               "data": {"method": "custom", "content": {"event": "click"}}})
        self.kc.shell_channel.send(msg)
        return self._drain(msg["header"]["msg_id"])

    def set_value(self, comm_id, value):
        """Type a value into a widget, as the browser's widget manager sends it."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
            "method": "update", "state": {"value": value}, "buffer_paths": []}})
        self.kc.shell_channel.send(msg)
        self.widgets[comm_id]["value"] = value
        return self._drain(msg["header"]["msg_id"])

    def button(self, description, prefix=False):
        """The comm id of the newest button with this label (or a label that starts with it)."""
        found = [cid for cid, s in self.widgets.items()
                 if s.get("_model_name") == "ButtonModel"
                 and (s.get("description", "").startswith(description) if prefix
                      else s.get("description") == description)]
        assert found, f"no {description!r} button"
        return found[-1]

    def visible(self, comm_id):
        """Whether the widget's layout shows it (the browser reads the same layout model)."""
        layout = self.widgets[self.widgets[comm_id]["layout"].removeprefix("IPY_MODEL_")]
        return layout.get("display") != "none"

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    k = Kernel(tmp_path_factory.mktemp("comm"))
    reply, _ = k.execute("%load_ext memfit_jupyter")
    assert reply["content"]["status"] == "ok"
    yield k
    k.close()


def test_magic_help(kernel):
    reply, _ = kernel.execute("%%memfit_task?")
    pages = [p for p in reply["content"].get("payload", []) if p.get("source") == "page"]
    text = pages[0]["data"]["text/plain"]
    for option in ("--max-iterations", "--max-cost", "--reflection", "--no-memory", "--step", "--quiet"):
        assert option in text


def test_step_button_runs_exactly_one_iteration(kernel):
    reply, msgs = kernel.execute("%%memfit_task --step --model memfit/demo --name stepped\n"
                                 "What is the total of the numbers in data.txt?")
    assert reply["content"]["status"] == "ok"
    assert kernel.value("stepped.iteration") == "0"
    assert kernel.value("stepped.status") == "'pending'"
    step = kernel.button("Step")
    prompt = [s for s in kernel.widgets.values() if s.get("_dom_classes") == ["memfit-prompt"]]
    assert prompt and prompt[-1]["layout"]  # the next prompt is on offer in step mode
    kernel.click(step)
    assert kernel.value("stepped.iteration") == "1"
    kernel.click(step)
    assert kernel.value("stepped.iteration") == "2"
    # run.step() in another cell moves the same run, and the saved output follows it
    _, msgs = kernel.execute("stepped.step()")
    assert kernel.value("stepped.status") == "'done'"
    updates = [m for m in msgs if m["msg_type"] == "update_display_data"]
    assert updates and updates[-1]["content"]["data"]["application/vnd.memfit.run+json"]["status"] == "done"
    headers = [s["value"] for s in kernel.widgets.values() if s.get("_dom_classes") == ["memfit-header"]]
    assert "done" in headers[-1]


def test_approve_and_reject_buttons(kernel):
    kernel.execute("%%memfit_task --approve --model memfit/demo --name gated\n"
                   "What is the total of the numbers in data.txt?")
    assert kernel.value("gated.waiting_for_approval['tool']") == "'read_file'"
    kernel.click(kernel.button("Reject"))
    assert kernel.value("[e.get('state') for e in gated.events if e.type == 'approval'][:2]") == \
        "['waiting', 'rejected']"
    assert kernel.value("gated.records[0].ok") == "False"
    assert kernel.value("gated.waiting_for_approval is not None") == "True"
    kernel.click(kernel.button("Approve"))
    assert kernel.value("gated.records[1].ok") == "True"


def test_interrupt_cancels_a_running_loop(kernel):
    def cards():
        return sum(s.get("value", "").count('class="memfit-card"') for s in kernel.widgets.values()
                   if s.get("_dom_classes") == ["memfit-cards"])

    before = cards()
    msg_id = kernel.kc.execute("%%memfit_task --model memfit/long-run --max-iterations 300 --name slow\n"
                               "Count until stopped [slow]")
    # wait until the loop is going: its cards appear on iopub
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if cards() >= before + 2:
            break
        try:
            msg = kernel.kc.get_iopub_msg(timeout=0.5)
        except Empty:
            continue
        kernel.track(msg)
    kernel.km.interrupt_kernel()
    kernel._drain(msg_id)
    assert kernel.value("slow.status") == "'cancelled'"
    assert kernel.value("slow.trace()['events'][-1]['type']") == "'run_end'"
    assert kernel.value("slow.iteration < 300") == "True"
    headers = [s["value"] for s in kernel.widgets.values() if s.get("_dom_classes") == ["memfit-header"]]
    assert "cancelled" in headers[-1] and "interrupted" in headers[-1]


def test_override_button_asks_for_confirmation_then_the_run_goes_on(kernel):
    kernel.execute("%%memfit_task --model memfit/budget-burn --name burnt\n"
                   "Summarise each of the four chapters in book/, then give an overall summary.")
    assert kernel.value("burnt.status") == "'degraded'"
    override = kernel.button("Override limits…")
    assert kernel.visible(override)
    kernel.click(override)  # only asks: nothing changes until the person confirms
    assert kernel.value("burnt.status") == "'degraded'"
    assert kernel.value("[e.get('override') for e in burnt.events if e.type == 'guarantee']").count("True") == 0
    confirm = kernel.button("Confirm override")
    assert kernel.visible(confirm) and not kernel.visible(override)
    amount = [cid for cid, s in kernel.widgets.items()
              if s.get("_model_name") == "FloatTextModel" and s.get("description") == "max $"][-1]
    kernel.set_value(amount, 3.0)
    kernel.click(confirm)
    assert kernel.value("burnt.status") == "'done'"
    assert kernel.value("[(e['confirmed'], e['limits']['max_cost_usd']) for e in burnt.trace()['events'] "
                        "if e['type'] == 'guarantee' and e.get('override')]") == "[(True, 3.0)]"
    assert kernel.value("1.0 < burnt.result.cost_usd <= 3.0") == "True"


def test_diverse_choice_buttons_record_the_choice(kernel):
    kernel.execute("%%memfit_task --model memfit/disagree --strategy diverse --samples 6 --name split\n"
                   "In which year was the Peace of Westphalia signed?")
    alternatives = kernel.value("[a['answer'] for a in [e for e in split.events if e.type == 'synthesis']"
                                "[-1]['alternatives']]")
    assert alternatives.startswith("[") and alternatives.count(",") >= 1
    kernel.click(kernel.button("1: ", prefix=True))
    choice = kernel.value("[e.get('choice') for e in split.events if e.type == 'synthesis'][-1]")
    assert choice.startswith("{'index': 1, 'answer': ")
    assert kernel.value("split.trace()['events'][-1]['choice']['index']") == "1"
    # the choice is made: the buttons are gone
    boxes = [s for s in kernel.widgets.values() if s.get("_dom_classes") == ["memfit-choices"]]
    layout = kernel.widgets[boxes[-1]["layout"].removeprefix("IPY_MODEL_")]
    assert layout.get("display") == "none"


def test_escalation_asks_the_person_and_more_trials_go_on(kernel, tmp_path):
    oracle = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {sys.executable} -m pytest -q -p no:cacheprovider tests_slug.py"
    kernel.execute(f"import os; os.chdir({str(tmp_path)!r})")
    kernel.execute(f"%%memfit_task --model memfit/diary --oracle {shlex.quote(oracle)} --max-trials 1 "
                   "--no-memory --name diaried\nWrite slugify(text) in slug.py so that tests_slug.py passes.")
    assert kernel.value("diaried.status") == "'escalated'"
    more, diary, stop = (kernel.button(d) for d in ("Try 2 more trials", "Open the diary", "Stop"))
    assert all(kernel.visible(b) for b in (more, diary, stop))
    kernel.click(diary)
    lessons = [s["value"] for s in kernel.widgets.values() if s.get("_dom_classes") == ["memfit-diary"]]
    assert "Lessons from this run" in lessons[-1]
    kernel.click(more)
    assert kernel.value("diaried.status") == "'done'"
    assert kernel.value("[(e['trial'], e['max_trials'], e['passed']) "
                        "for e in diaried.events if e.type == 'trial']") == "[(1, 1, False), (2, 3, True)]"
    assert kernel.value("[e['choice'] for e in diaried.trace()['events'] if e['type'] == 'escalation']") == \
        "['open_diary', 'more_trials']"
    assert not kernel.visible(more)


def test_stop_leaves_the_run_escalated_and_is_recorded(kernel):
    kernel.execute("%%memfit_task --model memfit/demo --oracle false --max-trials 1 --no-memory --name halted\n"
                   "What is the total of the numbers in data.txt?")
    assert kernel.value("halted.status") == "'escalated'"
    stop = kernel.button("Stop")
    kernel.click(stop)
    assert kernel.value("halted.status") == "'escalated'"
    assert kernel.value("[e['choice'] for e in halted.trace()['events'] if e['type'] == 'escalation']") == "['stop']"
    assert not kernel.visible(stop) and not kernel.visible(kernel.button("Try 2 more trials"))


def test_a_step_that_asks_for_a_heartbeat_takes_the_next_step_too(kernel):
    kernel.execute("%%memfit_task --step --model memfit/context-overflow --no-memory --name paged\n"
                   "Read the nine regional ledgers (north.txt, south.txt, east.txt, west.txt, central.txt, "
                   "harbor.txt, mountain.txt, river.txt, valley.txt) and report the grand total.")
    step = kernel.button("Step")
    moves = []
    for _ in range(12):
        kernel.click(step)
        moves.append(ast.literal_eval(kernel.value("[r.tool for r in paged.records]")))
        if "core_memory_append" in moves[-1]:
            break
    steps = [b[len(a):] for a, b in zip([[]] + moves[:-1], moves, strict=True)]
    assert steps[-1][0] == "core_memory_append" and len(steps[-1]) == 2  # the heartbeat's step came with it
    assert all(len(s) == 1 for s in steps[:-1])  # any other click: exactly one iteration


def test_memfit_shows_the_breaker_states_of_the_last_run(kernel):
    kernel.execute("%%memfit_task --model memfit/outage --fallback-model memfit/demo --quiet --name out\n"
                   "What is the total of the numbers in data.txt?")
    assert kernel.value("out.status") == "'done'"
    _, msgs = kernel.execute("%memfit tiers")
    shown = [m["content"]["data"] for m in msgs if m["msg_type"] == "display_data"][-1]
    text = shown["text/plain"]
    section = text.split("circuit breakers (last run's agent):", 1)[1].splitlines()
    chips = {line.split(":", 1)[0].strip(): line.split(":", 1)[1] for line in section[1:3]}
    assert chips["primary"].strip().startswith("OPEN (memfit/outage)")
    assert "turned away" in chips["primary"] and "next probe in" in chips["primary"]
    assert chips["fallback"].strip().startswith("CLOSED (memfit/demo)")
    assert "OPEN" in shown["text/html"]


def test_ask_user_goes_to_the_person_through_the_input_box(kernel):
    code = "%%memfit_task --model memfit/ask-user --no-memory --name asked\nSummarise the file I mean."
    msg_id = kernel.kc.execute(code, allow_stdin=True)
    request = kernel.kc.get_stdin_msg(timeout=60)  # what JupyterLab turns into an input box
    assert request["msg_type"] == "input_request"
    assert "Which file should I summarise?" in request["content"]["prompt"]
    kernel.kc.input("notes.txt")
    kernel._drain(msg_id)
    assert kernel.value("asked.status") == "'done'"
    assert kernel.value("asked.records[0].output") == "'notes.txt'"
    assert "ship the release on Friday" in kernel.value("asked.result.answer")


def test_ask_user_with_no_input_box_lets_the_agent_decide(kernel):
    msg_id = kernel.kc.execute("%%memfit_task --model memfit/ask-user --no-memory --name unasked\n"
                               "Summarise the file I mean.", allow_stdin=False)  # no input box
    kernel._drain(msg_id)
    assert kernel.value("unasked.status") == "'done'"
    assert "No person can answer here" in kernel.value("unasked.records[0].output")


def test_ask_user_from_a_step_click_does_not_wait_for_an_input_box(kernel):
    reply, _ = kernel.execute("%%memfit_task --step --model memfit/ask-user --no-memory --name stepask\n"
                              "Summarise the file I mean.")  # this cell could take input; the click cannot
    assert reply["content"]["status"] == "ok"
    kernel.click(kernel.button("Step"))
    assert kernel.value("stepask.iteration") == "1"
    assert "No person can answer here" in kernel.value("stepask.records[0].output")
