"""Ranking and keyword bonus against hand-computed cases (MECHANISMS.md §3.4-3.5)."""

import pytest

from memfit_jupyter.memory.entity import MemoryEntity
from memfit_jupyter.memory.ranking import (
    RankingConfig,
    core_score,
    keyword_bonus,
    rank,
    rrf,
    select_by_bytes,
    weighted_score,
)
from memfit_jupyter.memory.text import keywords, stem


def entity(id="m", content="", tags=(), questions=(), **scores):
    base = {f"{k}_score": 0.0 for k in "corepat"}
    base.update({f"{k}_score": v for k, v in scores.items()})
    return MemoryEntity(id=id, content=content, tags=list(tags), potential_questions=list(questions), **base)


def test_core_weights_are_the_seeds():
    assert core_score(entity(r=1)) == pytest.approx(0.25)
    assert core_score(entity(c=1)) == pytest.approx(0.20)
    assert core_score(entity(t=1)) == pytest.approx(0.15)
    assert core_score(entity(a=1)) == pytest.approx(0.15)
    assert core_score(entity(p=1)) == pytest.approx(0.10)
    assert core_score(entity(o=1)) == pytest.approx(0.10)
    assert core_score(entity(e=1)) == pytest.approx(0.05)
    # 0.25*.8 + .2*.5 + .15*.4 + .15*.9 + .1*.2 + .1*.6 + .05*.1
    assert core_score(entity(r=.8, c=.5, t=.4, a=.9, p=.2, o=.6, e=.1)) == pytest.approx(0.58)


def test_keywords_drop_stopwords_and_stem():
    assert keywords("Why is the SQLite database locked?") == ["sqlite", "databas", "lock"]
    assert stem("failing") == stem("failed") == "fail"
    # a suffix stripper leaves "lov" and "love" apart; Snowball does not
    assert stem("loved") == stem("love") == stem("loving")
    # function words go before stemming ("does" would stem to "doe", "would" stays)
    assert keywords("What did she say she would do about her family?") == ["say", "famili"]


def test_keyword_bonus_hand_computed():
    e = entity(content="the sqlite database was locked", tags=["sqlite"],
               questions=["why is the database locked?"], r=1)
    # content 3/3 * .10 + tags 1/3 * .08 + questions 2/3 * .05 + contains .05 + all .03
    expected = 0.10 + 0.08 / 3 + 0.05 * 2 / 3 + 0.05 + 0.03
    assert keyword_bonus(e, "sqlite database locked") == pytest.approx(expected)
    assert weighted_score(e, "sqlite database locked") == pytest.approx(0.25 + expected)


def test_keyword_bonus_partial_match_has_no_all_bonus():
    e = entity(content="sqlite locked")
    # 1/2 of the keywords in content: .05, plus contains .05; not all
    assert keyword_bonus(e, "sqlite timeout") == pytest.approx(0.10)
    assert keyword_bonus(entity(content="nothing here"), "sqlite timeout") == 0.0
    assert keyword_bonus(e, "the of and") == 0.0  # no keywords at all


def test_keyword_bonus_is_capped_and_final_is_at_most_one():
    e = entity(content="sqlite lock", tags=["sqlite", "lock"], questions=["sqlite lock"],
               **{k: 1.0 for k in "corepat"})
    # .10 + .08 + .05 + .05 + .03 = .31 -> capped at .3
    assert keyword_bonus(e, "sqlite lock") == pytest.approx(0.3)
    assert weighted_score(e, "sqlite lock") == 1.0


def test_rrf_scaled():
    assert rrf([1, 1]) == pytest.approx(1.0)
    assert rrf([2, None]) == pytest.approx((1 / 62) / (2 / 61))
    assert rrf([None, None]) == 0.0


def test_rank_hybrid_formula_and_order():
    a = entity("a", content="sqlite lock timeout", r=0.4)
    b = entity("b", content="polars csv", r=1.0)
    cfg = RankingConfig(mode="hybrid", weight=0.5, fusion="rrf")
    out = rank([a, b], "sqlite lock", semantic={"a": 0.8, "b": 0.1}, lexical={"a": 3.0}, config=cfg)
    weighted_a = 0.25 * 0.4 + keyword_bonus(a, "sqlite lock")
    weighted_b = 0.25
    # a: first in both lists -> relevance 1; b: second semantically, no lexical match
    assert out[0].id == "a"
    assert out[0].breakdown["final"] == pytest.approx(0.5 * weighted_a + 0.5 * 1.0, abs=1e-6)
    assert out[1].breakdown["relevance"] == pytest.approx((1 / 62) / (2 / 61), abs=1e-6)
    assert out[1].breakdown["final"] == pytest.approx(0.5 * weighted_b + 0.5 * (1 / 62) / (2 / 61), abs=1e-6)
    assert set(out[0].breakdown) >= {"r", "c", "t", "a", "p", "o", "e", "keyword_bonus", "semantic", "final"}


def test_rank_weighted_mode_ignores_similarity():
    a = entity("a", content="x", r=0.4)
    b = entity("b", content="y", r=1.0)
    out = rank([a, b], "query", semantic={"a": 1.0, "b": 0.0}, lexical={}, config=RankingConfig(mode="weighted"))
    assert [m.id for m in out] == ["b", "a"]
    assert out[0].score == pytest.approx(0.25)
    semantic = rank([a, b], "query", semantic={"a": 1.0, "b": 0.0}, lexical={},
                    config=RankingConfig(mode="semantic", weight=0.5))
    assert semantic[0].id == "a" and semantic[0].score == pytest.approx(0.5 * 0.1 + 0.5)


def test_bad_ranking_config():
    with pytest.raises(ValueError, match="unknown ranking"):
        RankingConfig(mode="magic")
    with pytest.raises(ValueError, match="weight"):
        RankingConfig(weight=2)


def test_select_by_bytes_skips_what_does_not_fit():
    items = rank([entity("a", content="x" * 60, r=1), entity("b", content="y" * 50, r=.5),
                  entity("c", content="z" * 30)], "q", semantic={}, lexical={}, config=RankingConfig(mode="weighted"))
    assert [m.id for m in select_by_bytes(items, 100)] == ["a", "c"]
    assert [m.id for m in select_by_bytes(items, 10)] == []
    assert len(select_by_bytes(items, None)) == 3


def test_fusion_weighs_a_find_alike_whichever_retriever_made_it():
    only_sem = entity("s", content="unrelated words")
    only_lex = entity("l", content="sqlite lock")
    both = entity("b", content="sqlite lock again")
    found = {"semantic": ["b", "s"], "lexical": ["b", "l"]}
    # the lexical-only find is close to the query too: its cosine must not earn it a second term
    out = rank([only_sem, only_lex, both], "sqlite lock", semantic={"s": 0.3, "l": 0.9, "b": 0.8},
               lexical={"b": 2.0, "l": 1.5}, found=found, config=RankingConfig(weight=1.0, fusion="rrf"))
    rel = {m.id: m.breakdown["relevance"] for m in out}
    assert rel["b"] == pytest.approx(1.0)
    assert rel["s"] == pytest.approx(rel["l"]) == pytest.approx((1 / 62) / (2 / 61), abs=1e-6)
    assert out[0].id == "b"


def test_scores_rerank_near_ties_only():
    cfg = RankingConfig(fusion="rrf")  # hybrid, w = 0.95
    bound = (1 - cfg.weight) / cfg.weight
    important = entity("i", content="nothing shared", **{k: 1.0 for k in "corepat"})
    plain = entity("p", content="nothing shared either")
    for ahead, tie in ((12, False), (1, True)):
        # the plain memory is first in the vector search; the important one `ahead` places lower
        ids = ["p"] + [f"x{n}" for n in range(ahead - 1)] + ["i"]
        others = [entity(i, content="filler") for i in ids[1:-1]]
        out = rank([important, plain, *others], "query words", semantic={}, lexical={},
                   found={"semantic": ids}, config=cfg)
        order = [m.id for m in out]
        rel = {m.id: m.breakdown["relevance"] for m in out}
        assert (rel["p"] - rel["i"] < bound) is tie
        assert (order.index("i") < order.index("p")) is tie  # scores of 1 win a near-tie, nothing more
    # a memory no retriever found stays below every memory one did, whatever its scores
    out = rank([important, plain], "query", semantic={}, lexical={}, found={"semantic": ["p"]}, config=cfg)
    assert [m.id for m in out] == ["p", "i"]


def _recall_at_5(store, queries, ranking=None):
    return sum(len({m.id for m in store.search(q["q"], k=5, ranking=ranking)} & set(q["relevant"]))
               / len(q["relevant"]) for q in queries) / len(queries)


def test_varied_scores_do_not_move_recall_of_the_default_ranking(tmp_path):
    # The labelled set with distractors, once with default scores and once with random scores
    # (as triage writes them, unrelated to any later query): the default ranking's recall@5 stays
    # within 2 points; the weighted formula, where the query-independent score dominates, does not.
    import json
    import random
    from pathlib import Path

    from memfit_jupyter.memory import MemoryStore

    data = json.loads((Path(__file__).parent / "benchmarks" / "data" / "memory_eval.json").read_text())
    rnd = random.Random(3)
    words = sorted({w.strip(".,;:()'") for t in data["memories"].values() for w in t.split() if len(w) > 3})
    items = [{"id": mid, "content": text} for mid, text in data["memories"].items()]
    items += [{"id": f"d{i}", "content": "Checked {} while reviewing {}; the {} stayed {}.".format(
        *rnd.sample(words, 4))} for i in range(300)]
    recalls = {}
    for name, scored in (("default", items), ("random", [
            dict(it, scores={k: rnd.uniform(0.1, 0.9) for k in "corepat"}) for it in items])):
        with MemoryStore(tmp_path / name, dedup=False) as store:
            store.add_many(scored)
            recalls[name] = (_recall_at_5(store, data["queries"]), _recall_at_5(store, data["queries"], "weighted"))
    assert recalls["default"][0] > 0.5
    assert abs(recalls["default"][0] - recalls["random"][0]) <= 0.02
    assert recalls["default"][1] - recalls["random"][1] > 0.05


def test_convex_fusion_scores_every_candidate_by_both_retrievers():
    a = entity("a", content="x")
    b = entity("b", content="y")
    c = entity("c", content="z")
    cfg = RankingConfig(weight=1.0, fusion="convex", alpha=0.3)
    out = rank([a, b, c], "q", semantic={"a": 0.9, "b": 0.5, "c": 0.1}, lexical={"b": 4.0, "c": 2.0}, config=cfg)
    rel = {m.id: m.breakdown["relevance"] for m in out}
    assert rel["a"] == pytest.approx(0.3)  # best cosine, no BM25 match
    assert rel["b"] == pytest.approx(0.3 * 0.5 + 0.7)  # cosine half way, best BM25
    assert rel["c"] == pytest.approx(0.7 * 0.5)
    assert [m.id for m in out] == ["b", "c", "a"]
    with pytest.raises(ValueError, match="fusion"):
        RankingConfig(fusion="magic")
