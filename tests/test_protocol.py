"""The widget protocol's TypeScript types come from ``jupyter/protocol.py``; what the widget, the
memory panel and a comparison really send has exactly the keys those types name."""

from __future__ import annotations

import typing

import pytest

from memfit_jupyter import Agent, compare
from memfit_jupyter.jupyter import protocol as p
from memfit_jupyter.jupyter.memory_widget import ranking_payload
from memfit_jupyter.jupyter.widget import RunWidget
from memfit_jupyter.memory import MemoryStore
from memfit_jupyter.schema import PROTOCOL_TS_PATH, protocol_typescript


def keys(cls) -> set[str]:
    return set(typing.get_type_hints(cls))


def test_the_typescript_protocol_types_are_generated_from_the_python_ones():
    assert PROTOCOL_TS_PATH.read_text() == protocol_typescript(), (
        "labextension/src/protocol-types.ts differs from memfit_jupyter/jupyter/protocol.py: "
        "run `python -m memfit_jupyter.schema --write`")


def test_the_controls_a_live_run_syncs_are_the_protocol_s(tmp_path):
    run = Agent(model="memfit/demo", workdir=tmp_path, memory=False,
                approve=lambda call: None).start("add up data.txt")  # None: the call waits for the person
    widget = RunWidget(run, step=True)
    widget.refresh_controls()
    controls = widget.model.controls
    assert set(controls) == keys(p.Controls) == p.Controls.__required_keys__
    assert set(controls["estimate"]) == set(p.ESTIMATE_KEYS) == keys(p.Estimate) - {"error"}
    seen = set(controls["buttons"])
    widget._on_msg(None, {"action": "step"}, None)  # the first action waits for approval
    controls = widget.model.controls
    assert set(controls["approval"]) == keys(p.Approval)
    seen |= set(controls["buttons"])
    assert seen and seen <= set(p.ACTIONS)


def test_the_memory_and_compare_payloads_are_the_protocol_s(tmp_path):
    with MemoryStore(tmp_path / "m") as store:
        store.add("the numbers in data.txt add up to 42", tags=["sums"])
        payload = ranking_payload(store.search("numbers"), query="numbers")
    assert set(payload) == keys(p.MemoryPayload) and payload["results"]
    assert all(set(r) == keys(p.MemoryResult) for r in payload["results"])
    a = Agent(model="memfit/spin-demo", workdir=tmp_path / "a", memory=False).start("add up data.txt")
    b = Agent(model="memfit/demo", workdir=tmp_path / "b", memory=False).start("add up data.txt")
    cmp = compare(a, b).payload()
    assert set(cmp) == keys(p.ComparePayload) and cmp["diverged"] is not None
    assert set(cmp["diverged"]) == keys(p.Diverged)
    assert all(set(row) == keys(p.CompareRow) for row in cmp["rows"])


@pytest.mark.parametrize("cls", p.TYPES)
def test_every_protocol_type_is_declared_in_typescript(cls):
    assert f"export interface {cls.__name__} {{" in protocol_typescript()
