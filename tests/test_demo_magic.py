"""``%memfit_demo`` in a real kernel (nbclient): the note, one view of the pair (the compare view,
each side live from its run's widget model, saved as the comparison) and the on/off table; the
catalogue with no mode; one-line errors."""

from __future__ import annotations

import re

import pytest
from kernel_cells import execute, outputs, text_of

pytestmark = pytest.mark.kernel

RUN_MIME = "application/vnd.memfit.run+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
COMPARE_MIME = "application/vnd.memfit.compare+json"

CELLS = {
    "load": "%load_ext memfit_jupyter",
    "spin": "%memfit_demo step-repetition --dir spin --name pair",
    "after": "print(sorted(pair), pair['on'].status, pair['off'].status)",
    "quiet": "%memfit_demo premature-finish --quiet --dir early",
    "table": "df = %memfit_demo\nprint(df.height, df.columns[:4])",
    "unknown": "%memfit_demo no-such-mode",
    "bad_model": "%memfit_demo spin-demo --model 'not a model'",
}


@pytest.fixture(scope="module")
def nb(tmp_path_factory):
    return execute(CELLS, tmp_path_factory.mktemp("demo"), timeout=180)


def test_a_mode_runs_on_and_off_side_by_side(nb):
    outs = outputs(nb, "spin")
    assert not [o for o in outs if o.output_type == "error"]
    note = outs[0].data
    assert "Same-action spin (step-repetition, scenario spin-demo)" in note["text/plain"]
    assert "FM-1.3 Step repetition (system design)" in note["text/plain"] and "Look at:" in note["text/plain"]
    assert "<b>Same-action spin</b>" in note["text/html"]
    # One view of the pair: no widget view (its repr would be the saved output), no run drawn twice.
    assert not [o for o in outs if WIDGET_MIME in o.get("data", {}) or RUN_MIME in o.get("data", {})]
    assert "HBox(" not in text_of(outs) and "VBox(" not in text_of(outs)
    (pair_out,) = [o for o in outs if COMPARE_MIME in o.get("data", {})]
    pair_view = pair_out.data[COMPARE_MIME]
    traces = pair_view["runs"]
    assert [t["status"] for t in traces] == ["done", "failed"]
    assert traces[1]["settings"]["reflection"] == "none"
    assert pair_view["labels"] == ["on: reflection auto, spin judge on, warnings in the prompt", "off: reflection none"]
    # each side names the live widget model that drew it while it ran
    ids = pair_out.metadata[COMPARE_MIME]["live_widgets"]
    assert len(ids) == 2 and all(isinstance(i, str) and i for i in ids) and ids[0] != ids[1]
    # the fallback for viewers without the extension reads like the view: no raw floats, no None
    fallback = pair_out.data["text/html"]
    assert "None" not in fallback and "$0.0" in fallback
    assert not re.search(r"\d\.\d{5,}", fallback), fallback
    table = outs[-1].data
    assert "as_stated" in table["text/html"] and "spin:same_action_type" in table["text/html"]
    assert table["text/plain"].splitlines()[1].startswith("off (reflection none): failed, 8 iterations")
    assert all(line.endswith("as stated: yes") for line in table["text/plain"].splitlines())
    assert text_of(outputs(nb, "after")).strip() == "['off', 'on'] done failed"


def test_each_side_works_in_its_own_folder(nb):
    from pathlib import Path

    root = Path(nb.metadata["workdir"]) / "early"
    assert (root / "on" / "east.txt").is_file() and (root / "off" / "east.txt").is_file()


def test_quiet_shows_no_widget_and_the_guard(nb):
    outs = outputs(nb, "quiet")
    assert not any(WIDGET_MIME in o.get("data", {}) for o in outs)
    (pair_out,) = [o for o in outs if COMPARE_MIME in o.get("data", {})]
    assert pair_out.metadata[COMPARE_MIME]["live_widgets"] == [None, None]
    traces = pair_out.data[COMPARE_MIME]["runs"]
    assert ["295" in (t["answer"] or "") for t in traces] == [True, False]
    assert "guard:premature_finish" in outs[-1].data["text/html"]


def test_no_mode_is_the_catalogue(nb):
    from memfit_jupyter import catalogue

    said = text_of(outputs(nb, "table"))
    assert f"{catalogue().height} ['id', 'name', 'mast', 'trail']" in said.splitlines(), said


@pytest.mark.parametrize("name, message", [
    ("unknown", "UsageError: unknown failure mode 'no-such-mode'; modes: "),
    ("bad_model", "UsageError: invalid model"),
])
def test_bad_input_is_one_line(nb, name, message):
    text = text_of(outputs(nb, name)).strip()
    assert text.startswith(message) and "\n" not in text
