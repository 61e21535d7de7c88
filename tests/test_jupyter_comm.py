"""Step, Approve and interrupt through a running kernel, as the browser drives them.

One kernel for the module (jupyter_client).  Button clicks are sent as the
browser sends them: a ``comm_msg`` to the button's comm with
``{"method": "custom", "content": {"event": "click"}}``.
"""

from __future__ import annotations

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

    def button(self, description):
        """The comm id of the newest visible button with this label."""
        found = [cid for cid, s in self.widgets.items()
                 if s.get("_model_name") == "ButtonModel" and s.get("description") == description]
        assert found, f"no {description!r} button"
        return found[-1]

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
    assert kernel.value("[e.data.get('state') for e in gated.events if e.type == 'approval'][:2]") == \
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
