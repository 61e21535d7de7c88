"""2-of-3 deduplication (MECHANISMS.md §3.6) at each threshold, in the store and in batches."""

import math

import numpy as np
import pytest

from memfit_jupyter.memory import DedupConfig, MemoryStore
from memfit_jupyter.memory.dedup import Probe, compare, jaccard, probe_of
from memfit_jupyter.memory.items import prepare, question_texts


def unit(cos):
    """A 2-d unit vector whose cosine with [1, 0] is ``cos``."""
    return np.array([cos, math.sqrt(max(0.0, 1 - cos * cos))], dtype=np.float32)


BASE = Probe(frozenset({"a", "b", "c", "d"}), unit(1.0), unit(1.0))


def probe(tags=("a", "b", "c", "d"), q=1.0, c=1.0):
    return Probe(frozenset(tags), None if q is None else unit(q), unit(c))


def test_jaccard():
    assert jaccard(frozenset("abcd"), frozenset("abcde")) == pytest.approx(0.8)
    assert jaccard(frozenset(), frozenset()) is None
    assert jaccard(frozenset("a"), frozenset()) is None  # one side without tags: nothing to compare


@pytest.mark.parametrize("tags,hit", [(("a", "b", "c", "d", "e"), True), (("a", "b", "c", "e"), False)])
def test_tag_threshold(tags, hit):
    # tags at 0.8 (4/5) or 0.6 (3/5), questions repeat, content does not: the tags decide
    dup, sims = compare(probe(tags=tags, q=1.0, c=0.0), BASE, DedupConfig())
    assert dup is hit


@pytest.mark.parametrize("q,hit", [(0.85, True), (0.84, False)])
def test_question_threshold(q, hit):
    dup, sims = compare(probe(tags=("x",), q=q, c=0.95), BASE, DedupConfig())
    assert sims["tags"] == 0.0
    assert dup is hit


@pytest.mark.parametrize("c,hit", [(0.9, True), (0.89, False)])
def test_content_threshold(c, hit):
    dup, _ = compare(probe(q=0.0, c=c), BASE, DedupConfig())
    assert dup is hit


def test_one_of_three_is_not_a_duplicate_and_three_is():
    assert not compare(probe(tags=("x",), q=0.0, c=1.0), BASE, DedupConfig())[0]
    assert compare(probe(), BASE, DedupConfig())[0]


def test_a_missing_signal_is_not_agreement():
    # no tags and no questions on either side: content alone is one of three, never a duplicate
    lone = Probe(frozenset(), None, unit(1.0))
    assert not compare(lone, Probe(frozenset(), None, unit(1.0)), DedupConfig())[0]
    assert compare(lone, Probe(frozenset(), None, unit(0.95)), DedupConfig(min_matches=1))[0]
    # tags on one side only do not match either; with questions and content repeating it is 2 of 3
    assert not compare(probe(tags=(), q=None, c=1.0), BASE, DedupConfig())[0]
    assert compare(probe(tags=(), q=1.0, c=1.0), BASE, DedupConfig())[0]
    dup, sims = compare(probe(tags=(), q=None, c=1.0), BASE, DedupConfig())
    assert sims["tags"] is None and sims["questions"] is None


def test_the_lenient_rule_stays_selectable():
    """rule="lenient": no tags on either side agree, an answer may repeat its question, and new
    keywords do not keep a twin; the default keeps all three."""
    lenient = DedupConfig(rule="lenient")
    lone = Probe(frozenset(), None, unit(1.0), content="the store is doing great")
    twin = Probe(frozenset(), None, unit(0.95), content="the store is doing great now, with new staff")
    assert compare(twin, lone, lenient)[0] and not compare(twin, lone, DedupConfig())[0]
    question = Probe(frozenset({"jon"}), unit(1.0), unit(1.0), asks=True, content="how is the store?")
    answer = Probe(frozenset({"jon"}), unit(1.0), unit(0.95), asks=False, content="how is the store")
    assert compare(answer, question, lenient)[0]
    assert compare(answer, question, DedupConfig())[0]  # tags and questions still repeat: 2 of 3
    assert not compare(Probe(frozenset(), None, unit(1.0), asks=False, content="how is the store"),
                       Probe(frozenset(), None, unit(1.0), asks=True, content="how is the store?"), DedupConfig())[0]
    with pytest.raises(ValueError, match="rule"):
        DedupConfig(rule="nope")


def test_an_answer_to_its_twins_question_is_kept():
    question = Probe(frozenset({"jon", "gina"}), None, unit(1.0), asks=True)
    answer = Probe(frozenset({"jon", "gina"}), None, unit(0.95), asks=False)
    restated = Probe(frozenset({"jon", "gina"}), None, unit(0.95), asks=True)
    assert not compare(answer, question, DedupConfig())[0]  # same tags, near-twin content
    assert compare(restated, question, DedupConfig())[0]  # the same question again


def _said(content, cos, tags=("audrey", "24 october, 2023")):
    return probe_of(content, tags, None, unit(cos))


OLD = _said("Audrey: Thanks! Appreciate it, feeling better each day. And wow that Sushi looks phenomenal. "
            "I know what to get for dinner tonight.", 1.0)


@pytest.mark.parametrize("content,hit", [
    ("Audrey: Enjoy! Now I'm gonna order some sushi for tonight. Thanks!", False),  # adds enjoy, order...
    ("Audrey: Thanks! I know what to get for dinner tonight.", True),  # all of it already said
    ("Audrey: thanks, appreciate it! That sushi looks phenomenal.", True),  # case and punctuation aside
    ("Audrey: Thanks! I know what to get for dinner tonight at 7.", False),  # a number is information
])
def test_a_twin_that_says_something_new_is_kept(content, hit):
    # same speaker and day (tags repeat), content at cosine 0.95: the words decide the content's vote
    assert compare(_said(content, 0.95), OLD, DedupConfig())[0] is hit


def test_new_words_is_a_threshold_and_can_be_turned_off():
    one_new = _said("Audrey: Thanks! I know what to order for dinner tonight, sushi again.", 0.95)  # order
    two_new = _said("Audrey: Thanks! I know what to order for dinner tonight, with miso.", 0.95)  # order, miso
    assert not compare(one_new, OLD, DedupConfig())[0]
    assert compare(one_new, OLD, DedupConfig(new_words=1))[0]
    assert not compare(two_new, OLD, DedupConfig(new_words=1))[0]
    assert compare(two_new, OLD, DedupConfig(new_words=2))[0]
    assert compare(_said("Audrey: Enjoy! Now I'm gonna order some sushi.", 0.95), OLD, DedupConfig(new_words=None))[0]
    assert not compare(two_new, OLD, DedupConfig(new_words=None, content_similarity_threshold=0.96))[0]
    with pytest.raises(ValueError):
        DedupConfig(new_words=-1)


def test_store_keeps_a_same_day_twin_with_news_and_refuses_a_repeat(tmp_path):
    # the store's path (stored candidates, then the batch): vectors planted at cosine 0.95
    rng = np.random.default_rng(4)
    base = rng.standard_normal((1, 384)).astype(np.float32)
    base /= np.linalg.norm(base)
    tags = ["audrey", "24 october, 2023"]
    first = {"content": OLD.content, "tags": tags}
    news = {"content": "Audrey: Enjoy! Now I'm gonna order some sushi for tonight. Thanks!", "tags": tags}
    repeat = {"content": "Audrey: Thanks! I know what to get for dinner tonight.", "tags": tags}
    vecs = np.concatenate([base, _near(base, 0.95, rng), _near(base, 0.95, rng)])
    with MemoryStore(tmp_path / "seq") as seq, MemoryStore(tmp_path / "batch") as batch:
        apart = [seq.add_many([it], vectors=vecs[n : n + 1])[0] is not None
                 for n, it in enumerate([first, news, repeat])]
        together = [i is not None for i in batch.add_many([first, news, repeat], vectors=vecs)]
    assert apart == together == [True, True, False]


def test_asks_reads_question_marks():
    from memfit_jupyter.memory.dedup import asks

    assert asks("Jon: Hey Gina! How's the store going?") and asks("店里怎么样？")
    assert not asks("Gina: Hey Jon! The store's doing great!")


def test_thresholds_are_configurable():
    loose = DedupConfig(content_similarity_threshold=0.5, min_matches=1)
    assert compare(probe(tags=("x",), q=0.0, c=0.6), BASE, loose)[0]
    with pytest.raises(ValueError):
        DedupConfig(tag_overlap_threshold=1.5)


def test_store_add_returns_none_for_duplicate(tmp_path):
    with MemoryStore(tmp_path / "m") as store:
        first = store.add("restart the kernel after installing a package", tags=["jupyter", "install"],
                          questions=["why does the import fail after pip install?"])
        assert first is not None
        # same tags and questions, reworded content: 2 of 3
        again = store.add("after a pip install you must restart the kernel", tags=["install", "jupyter"],
                          questions=["why does the import fail after pip install?"])
        assert again is None
        # same content but different tags and questions: 1 of 3
        other = store.add("restart the kernel after installing a package", tags=["gpu"],
                          questions=["how do I use cuda?"])
        assert other is not None
        assert len(store) == 2
        off = MemoryStore(tmp_path / "n", dedup=False)
        assert off.add("x y z") and off.add("x y z")
        assert len(off) == 2
        off.close()


def test_batch_form_dedups_within_the_batch(tmp_path):
    with MemoryStore(tmp_path / "m") as store:
        store.add("the sqlite database is locked when two writers collide", tags=["sqlite"])
        ids = store.add_many([
            {"content": "the sqlite database is locked when two writers collide", "tags": ["sqlite"]},  # the store's
            {"content": "polars reads parquet files lazily with scan_parquet", "tags": ["polars"]},
            {"content": "polars reads parquet files lazily with scan_parquet", "tags": ["polars"]},  # the batch's
            {"content": "matplotlib needs plt.show() outside notebooks", "tags": ["polars"]},
            {"content": "matplotlib needs plt.show() outside notebooks"},  # untagged: content alone is 1 of 3
        ])
        assert ids[0] is None and ids[2] is None
        assert ids[1] and ids[3] and ids[4]
        assert len(store) == 4


def _twins(rng, n=60, dim=384):
    """Conversation-like twins: turns at cosine 0.95 with an earlier one, half of them answers to
    a question, tags a speaker or none, questions on some."""
    base = rng.standard_normal((n // 3, dim)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    vecs = np.concatenate([base, _near(base, 0.95, rng), _near(base, 0.97, rng)])
    items = []
    for i in range(n):
        topic = i % (n // 3)
        text = f"a turn about topic {topic}" + ("?" if (i // (n // 3)) == 0 and topic % 2 else "")
        tags = [["jon"], ["gina"], []][topic % 3] if i // (n // 3) < 2 else [["jon"], [], ["gina"]][topic % 3]
        item = {"content": text, "tags": tags}
        if topic % 4 == 0:
            item["questions"] = [f"what about topic {topic}?"]
        items.append(item)
    return items, vecs


@pytest.mark.parametrize("cfg", [DedupConfig(), DedupConfig(min_matches=1), DedupConfig(min_matches=3),
                                 DedupConfig(rule="lenient"),
                                 DedupConfig(content_similarity_threshold=0.96)])
def test_batch_and_one_by_one_decide_alike(tmp_path, cfg):
    items, vecs = _twins(np.random.default_rng(2))
    with MemoryStore(tmp_path / "batch", dedup=cfg) as batch, MemoryStore(tmp_path / "seq", dedup=cfg) as seq:
        together = [i is not None for i in batch.add_many(items, vectors=vecs)]
        apart = [seq.add_many([it], vectors=vecs[n : n + 1])[0] is not None for n, it in enumerate(items)]
    assert together == apart
    assert any(together) and (cfg.min_matches == 3 or not all(together))


def test_batch_matrix_agrees_with_pairwise_compare():
    from memfit_jupyter.memory.dedup import batch_repeats

    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 8)).astype(np.float32)
    probes = []
    for i in range(40):
        # near copies of a few bases, so that every threshold is crossed both ways
        v = base[i % 4] + rng.uniform(0, 0.5) * rng.standard_normal(8).astype(np.float32)
        q = None if i % 3 == 0 else base[(i // 2) % 4] + 0.3 * rng.standard_normal(8).astype(np.float32)
        tags = frozenset(rng.choice(list("abcde"), size=int(rng.integers(0, 4)), replace=False).tolist())
        # texts from a few words, so that some twins add a keyword and some do not
        text = "restart the kernel " + str(rng.choice(["", "", "after pip", "3 times"]))
        probes.append(Probe(tags, None if q is None else q / np.linalg.norm(q), v / np.linalg.norm(v),
                            asks=i % 7 == 0, content=text))
    for cfg in (DedupConfig(), DedupConfig(new_words=None), DedupConfig(new_words=1), DedupConfig(min_matches=1),
                DedupConfig(rule="lenient"), DedupConfig(rule="lenient", min_matches=1),
                DedupConfig(min_matches=3),
                DedupConfig(tag_overlap_threshold=0.5, content_similarity_threshold=0.8),
                DedupConfig(tag_overlap_threshold=0.0), DedupConfig(question_similarity_threshold=0.0)):
        m = batch_repeats(probes, cfg)
        expected = np.array([[j < i and compare(probes[i], probes[j], cfg)[0] for j in range(40)]
                             for i in range(40)])
        assert (m == expected).all()
        assert expected.any() and not expected.all()


def test_popular_tag_dedup_reads_a_bounded_number_of_memories(tmp_path):
    from memfit_jupyter.memory.candidates import TAG_SCAN, stored_candidates

    with MemoryStore(tmp_path / "m") as store:
        store.add_many([{"content": f"note {i} about topic {i * 7919 % 1000}", "tags": ["common"]}
                        for i in range(TAG_SCAN + 100)])
        probe = Probe(frozenset({"common"}), None, store.embed_query("something else entirely"))
        candidates = stored_candidates(store._db, store._vectors, [probe], store.dedup)[0]
        assert 0 < len(candidates) <= TAG_SCAN
        # the newest memories with the tag are the ones compared: a tags + questions repeat of
        # one (different content, so no nearest-neighbour hit) is still caught
        q = "when does the nightly job run?"
        assert store.add("the nightly job runs at two", tags=["common"], questions=[q])
        assert store.add("cron starts it after midnight", tags=["common"], questions=["where are logs?"])
        assert store.add("it begins at 2am every day", tags=["common"], questions=[q]) is None


@pytest.mark.parametrize("cfg", [DedupConfig(), DedupConfig(min_matches=1), DedupConfig(candidates=2)])
def test_small_store_matrix_dedup_agrees_with_the_graph(tmp_path, cfg):
    # below exact_below, dedup finds stored neighbours by a matrix product; with exact_below=0 it
    # walks the HNSW graph: on the same stream both keep exactly the same memories
    rng = np.random.default_rng(5)
    base = rng.standard_normal((30, 384)).astype(np.float32)
    topic = rng.integers(0, 30, 300)
    noise = rng.uniform(0.2, 0.4, (300, 1)).astype(np.float32)  # some pairs cross 0.9, some do not
    vecs = base[topic] + noise * rng.standard_normal((300, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    # same questions within a topic, tags of their own: a repeat needs the content neighbour search
    items = [{"content": f"memory about topic {t}", "tags": [f"t{i}"], "questions": [f"what about topic {t}?"]}
             for i, t in enumerate(topic)]
    kept = []
    for exact_below in (10_000, 0):
        with MemoryStore(tmp_path / f"m{exact_below}", dedup=cfg, exact_below=exact_below) as store:
            ids = []
            for s in range(0, 300, 10):  # small batches: most repeats are of stored rows
                ids += store.add_many(items[s : s + 10], vectors=vecs[s : s + 10])
            kept.append([i is not None for i in ids])
    assert kept[0] == kept[1]
    assert any(kept[0]) and not all(kept[0])




def _near(v, cos, rng):
    """Unit vectors at cosine ``cos`` from the unit rows of ``v``."""
    u = rng.standard_normal(v.shape).astype(np.float32)
    u -= (u * v).sum(1, keepdims=True) * v
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return (cos * v + np.sqrt(1 - cos * cos) * u).astype(np.float32)


@pytest.mark.parametrize("exact_below", [10_000, 0])
def test_store_keeps_what_pairwise_compare_against_every_kept_memory_keeps(tmp_path, exact_below):
    # Every path of the store's dedup: tagged memories without questions (decided by the tag index
    # alone while their tags are rare, by the vector search once "common" passes TAG_SCAN), untagged
    # ones, and ones with questions whose repeats share no tag.  The store must keep exactly what
    # comparing each memory with every memory kept before it keeps.
    from memfit_jupyter.memory.candidates import TAG_SCAN
    from memfit_jupyter.memory.dedup import batch_repeats

    rng = np.random.default_rng(11)
    dim = 384
    first = rng.standard_normal((40, dim)).astype(np.float32)
    first /= np.linalg.norm(first, axis=1, keepdims=True)
    filler = rng.standard_normal((TAG_SCAN + 40, dim)).astype(np.float32)
    filler /= np.linalg.norm(filler, axis=1, keepdims=True)
    mixed_base = rng.standard_normal((30, dim)).astype(np.float32)
    topic = rng.integers(0, 30, 300)
    mixed = mixed_base[topic] + rng.uniform(0.15, 0.45, (300, 1)).astype(np.float32) * rng.standard_normal(
        (300, dim)).astype(np.float32)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    items = (
        # repeated, far later, by near copies with the same popular tag: only the vector search sees them
        [{"content": f"first {i}", "tags": ["common"]} for i in range(40)]
        + [{"content": f"filler {i}", "tags": ["common"]} for i in range(len(filler))]
        + [{"content": f"again {i}", "tags": ["common"]} for i in range(40)]
        # questions and content repeated under tags of their own
        + [{"content": f"asked {i}", "tags": [f"own{i}"], "questions": [f"how is {i} done?"]} for i in range(20)]
        + [{"content": f"asked again {i}", "tags": [f"other{i}"], "questions": [f"how is {i} done?"]}
           for i in range(20)]
        + [{"content": f"mixed {topic[i]}", "tags": [["common", f"t{topic[i] % 3}"], [f"t{topic[i] % 3}"], []][i % 3],
            "questions": [f"what about topic {topic[i] % 2}?"] if i % 5 == 0 else []} for i in range(300)])
    vecs = np.concatenate([first, filler, _near(first, 0.95, rng), first[:20], _near(first[:20], 0.93, rng),
                           mixed])
    with MemoryStore(tmp_path / "m", exact_below=exact_below) as store:
        ids = []
        for s in range(0, len(items), 40):
            ids += store.add_many(items[s : s + 40], vectors=vecs[s : s + 40])
        assert len(store._db.tag_postings({"common"}, TAG_SCAN)["common"]) == TAG_SCAN  # "common" became popular
        entities = [prepare(it, "now") for it in items]
        with_q, texts = question_texts(entities)
        qvecs: list = [None] * len(entities)
        for i, v in zip(with_q, store.embedder.embed(texts), strict=True):
            qvecs[i] = v
    probes = [probe_of(e.content, e.tags, qvecs[i], vecs[i]) for i, e in enumerate(entities)]
    repeats = batch_repeats(probes, DedupConfig())  # [i, j]: i repeats the earlier j (pairwise compare)
    kept = np.zeros(len(probes), dtype=bool)
    for i in range(len(probes)):
        kept[i] = not (repeats[i] & kept).any()
    assert [i is not None for i in ids] == kept.tolist()
    start = 40 + len(filler)
    assert not kept[start : start + 40].any() and not kept[start + 60 : start + 80].any()
    assert 0.2 < kept[start + 80 :].mean() < 0.9  # both verdicts are common in the mixed stream
