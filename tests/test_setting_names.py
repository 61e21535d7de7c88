"""The first-built variants are selected by names that say what they do; the one older name they
shared is still read as each new name (user code and saved settings may carry it), and an
unknown name is one line that lists the names."""

from __future__ import annotations

import pytest

from memfit_jupyter.memory import MemoryStore
from memfit_jupyter.memory.dedup import DedupConfig
from memfit_jupyter.memory.ranking import RankingConfig
from memfit_jupyter.memory.triage import TriageConfig, contextual_input, render_entries
from memfit_jupyter.reflection.config import ReflectionConfig
from memfit_jupyter.timeline import Entry

OLD = "seed"  #: the older name of the four


@pytest.mark.parametrize("make, field, new", [
    (lambda v: ReflectionConfig(spin_rules=v), "spin_rules", "repetition"),
    (lambda v: RankingConfig(mode=v), "mode", "weighted"),
    (lambda v: DedupConfig(rule=v), "rule", "lenient"),
    (lambda v: TriageConfig(format=v), "format", "chinese"),
], ids=["spin_rules", "ranking", "dedup", "triage"])
def test_the_older_name_is_read_as_the_new_one(make, field, new):
    assert getattr(make(OLD), field) == new
    assert make(OLD) == make(new)
    with pytest.raises(ValueError) as bad:
        make("loud")
    assert new in str(bad.value) and OLD not in str(bad.value) and "\n" not in str(bad.value)


def test_the_functions_that_take_a_triage_format_read_the_older_name_too():
    entries = [Entry(kind="action", iteration=1, content='{"tool": "read_file", "params": {"path": "x"}}')]
    assert render_entries(entries, OLD) == render_entries(entries, "chinese") != render_entries(entries)
    chinese = contextual_input(2, "run1", "diff", "running", False, None, format="chinese")
    assert chinese.startswith("ReAct迭代 2/run1") and contextual_input(
        2, "run1", "diff", "running", False, None, format=OLD) == chinese


def test_a_store_ranked_by_the_older_name_ranks_by_the_weighted_score(tmp_path):
    with MemoryStore(tmp_path / "m", ranking=OLD) as store:
        assert store.ranking.mode == "weighted" and store.info()["ranking"] == "weighted"
