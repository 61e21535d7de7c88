"""Synthesis strategies and confidence on hand-made samples; the disagree scenario end to end."""

import pytest

from memfit_jupyter import Agent
from memfit_jupyter.reliability.confidence import Sample, Similarity, coherence, score
from memfit_jupyter.reliability.synthesis import majority, synthesize


def samples(*items):
    return score([Sample(answer=a, stated=c, reasoning=list(r)) for a, c, r in items])


SPLIT = [
    ("1648", 0.9, ["The treaties were signed in Münster and Osnabrück in 1648"]),
    ("It was signed in 1648.", 0.85, ["October 1648"]),
    ("1658", 0.2, ["maybe 1658, not sure"]),
    ("1658", 0.25, ["I guess 1658"]),
    ("in 1658", 0.2, ["perhaps 1658"]),
]


def test_similarity_is_semantic_about_numbers_not_exact_strings():
    sim = Similarity()
    assert sim("1648", "It was signed in 1648.") >= 0.6
    assert sim("1648", "1658") < 0.3
    assert sim("Paris", "paris") == 1.0


def test_weighted_takes_the_heaviest_cluster_not_the_biggest():
    s = samples(*SPLIT)
    result = synthesize(s, "weighted")
    assert "1648" in result.answer
    assert majority(s) in ("1658", "in 1658")  # plain majority goes the other way
    assert 0.4 < result.share < 0.7  # a share of the weight, not all of it
    assert "2 of 5 samples" in result.rationale and "Münster" in result.rationale
    assert len(result.clusters) == 2


def test_consensus_says_so_when_no_cluster_passes_and_answers_when_one_does():
    none = synthesize(samples(*SPLIT), "consensus")
    assert none.answer is None and none.no_consensus and "no consensus" in none.rationale
    agree = synthesize(samples(("42", 0.9, ["6*7=42"]), ("42", 0.8, ["6 times 7 is 42"]),
                               ("The answer is 42", 0.85, ["42"]), ("41", 0.3, ["maybe 41"])), "consensus")
    assert "42" in agree.answer and not agree.no_consensus and agree.confidence > 0.5


def test_diverse_lists_the_alternatives_with_confidences():
    result = synthesize(samples(*SPLIT, ("1748", 0.1, ["no idea"])), "diverse")
    assert result.answer is None
    answers = [a["answer"] for a in result.alternatives]
    assert len(answers) == 3 and any("1648" in a for a in answers) and "1748" in answers
    confs = [a["confidence"] for a in result.alternatives]
    assert all(0 <= c <= 1 for c in confs) and confs[-1] < confs[0]


def test_bad_strategy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown synthesis strategy 'best'"):
        synthesize(samples(*SPLIT), "best")


def test_confidence_factors_and_low_confidence_flag():
    s = samples(("42", 0.9, ["6*7 is 42"]), ("42", 0.9, ["6*7=42"]), ("42", 0.8, ["42"]))
    assert all(x.confidence > 0.7 for x in s)
    lone = samples(("17", 0.1, ["no idea, a guess"]), ("93", 0.1, ["maybe"]), ("5", 0.1, ["unclear"]))
    result = synthesize(lone, "weighted")
    assert result.low_confidence and result.confidence < 0.3
    fields = result.event_fields("q")
    assert fields["low_confidence"] is True and all(x["low_confidence"] for x in fields["samples"])
    assert coherence([], "x", Similarity()) is None
    failed = score([Sample(answer="", ok=False), Sample(answer="a", stated=0.9)])
    assert failed[0].confidence == 0.0 and failed[1].factors["stated"] == 0.9


@pytest.mark.parametrize("strategy, answer", [
    ("weighted", "The Peace of Westphalia was signed in 1648."),
    ("consensus", "The samples do not agree well enough to answer; see the alternatives in the synthesis."),
    ("diverse", "The samples disagree; the alternatives are offered for the person to choose."),
])
def test_disagree_scenario(tmp_path, strategy, answer):
    run = Agent(model="memfit/disagree", strategy=strategy, samples=6, workdir=tmp_path, memory=False).start(
        "In which year was the Peace of Westphalia signed?")
    result = run.run()
    assert result.status == "done" and result.answer == answer
    event = next(e for e in run.trace()["events"] if e["type"] == "synthesis")
    assert event["strategy"] == strategy and len(event["samples"]) == 6 and len(event["clusters"]) == 3
    assert any(s["low_confidence"] for s in event["samples"])  # the lone 1748 guess is flagged
    obs = next(e for e in run.trace()["events"] if e["type"] == "observation" and e["tool"] == "sub_query")
    rr = obs["data"]["recursive_result"]
    assert set(rr) == {"content", "confidence", "reasoning_trace", "cost"} and rr["cost"]["calls"] == 6
    if strategy == "diverse":
        with pytest.raises(ValueError, match="0 to 2"):
            run.choose(7)
        picked = run.choose(1)
        *_, last, changed = run.trace()["events"]
        assert last["type"] == "synthesis" and last["choice"] == {"index": 1, "answer": picked["answer"]}
        # the run had ended: the choice is its answer now (an event of its own)
        assert changed["type"] == "answer" and run.result.answer == changed["answer"] == picked["answer"]


def test_sub_query_outside_a_run_says_so_in_one_line(tmp_path):
    from memfit_jupyter.reliability.recursive import SubQueryTool
    from memfit_jupyter.tools import ToolContext

    result = SubQueryTool().tool()(ToolContext(workdir=tmp_path), {"question": "which year?"})
    assert not result.ok and result.error == "sub_query asks the run's models: it works only inside a run"
