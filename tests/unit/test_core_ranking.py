"""``ranking.HybridRanker``: pure, order-independent, stop-word-proof lexical fusion."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.ranking import ENGLISH_STOPWORDS, HybridRanker, Reranker
from betterdb_memory.core.text import fold_suffix
from betterdb_memory.errors import ConfigurationError


def item(mid: str, content: str) -> MemoryItem:
    return MemoryItem(
        id=mid, content=content, importance=0.5, created_at=0.0, last_accessed_at=0.0, access_count=0
    )


CANDIDATES = [
    (item("m1", "The user likes hiking in the mountains on weekends."), 0.40),
    (item("m2", "Caroline started a pottery class in Sweden last May."), 0.52),
    (item("m3", "The user's favourite colour is green."), 0.55),
    (item("m4", "Melanie painted a sunrise over the lake."), 0.58),
    (item("m5", "They talked about the weather for a while."), 0.60),
    (item("m6", "Caroline went to the support group on Tuesday."), 0.61),
]


def ids(ranked: list[tuple[MemoryItem, float]]) -> list[str]:
    return [it.id for it, _ in ranked]


def test_stop_word_query_returns_the_dense_order_and_scores() -> None:
    """A query of stop words only has no terms: dense order, similarity = 1 - distance / 2."""
    ranked = HybridRanker().rerank("What is it that they were doing there?", CANDIDATES)
    assert ids(ranked) == [it.id for it, _ in CANDIDATES]
    assert [s for _, s in ranked] == [1 - d / 2 for _, d in CANDIDATES]


def test_stop_words_in_the_query_change_nothing() -> None:
    """Function words added to a query leave order and scores exactly as they were."""
    ranker = HybridRanker()
    wordy = "Where was the pottery class that Caroline had, and when was it?"
    assert ranker.terms(wordy) == ("potteri", "class", "carolin")
    assert ranker.rerank(wordy, CANDIDATES) == ranker.rerank("Caroline pottery class", CANDIDATES)
    assert ids(ranker.rerank(wordy, CANDIDATES))[0] == "m2"


def test_shared_stop_words_never_lift_a_candidate() -> None:
    """A memory full of the query's function words gains nothing; one shared content word does."""
    cands = [
        (item("a", "it is what it is and that was that, was it not?"), 0.5),
        (item("b", "Sunrise over the lake"), 0.5),
    ]
    ranked = HybridRanker().rerank("what is it that was not the sunrise", cands)
    assert ids(ranked) == ["b", "a"]
    assert ranked[1][1] == 0.75  # "a": its dense similarity, untouched


def test_exact_rare_term_lifts_a_candidate_above_closer_ones() -> None:
    ranked = HybridRanker().rerank("Who went to a support group?", CANDIDATES)
    assert ids(ranked)[0] == "m6"  # dense rank 6 of 6
    dense = dict((it.id, 1 - d / 2) for it, d in CANDIDATES)
    fused = dict((it.id, s) for it, s in ranked)
    assert fused["m6"] > dense["m6"]
    assert fused["m1"] == dense["m1"]  # no shared term: its dense similarity, unchanged


@pytest.mark.parametrize("seed", range(20))
def test_shuffled_input_gives_the_same_output(seed: int) -> None:
    """Input position never decides anything, ties included (two pairs share a distance)."""
    cands = [*CANDIDATES, (item("m7", "Caroline painted too."), 0.58), (item("m0", "Pottery!"), 0.52)]
    ranker = HybridRanker()
    expected = ranker.rerank("Caroline pottery painting", cands)
    shuffled = cands[:]
    random.Random(seed).shuffle(shuffled)
    assert ranker.rerank("Caroline pottery painting", shuffled) == expected


def test_ties_are_broken_by_fused_then_dense_then_id() -> None:
    cands = [(item("z", "pottery"), 0.6), (item("y", "pottery"), 0.6), (item("x", "weather"), 0.2)]
    ranked = HybridRanker(alpha=100.0).rerank("pottery", cands)
    assert ids(ranked) == ["y", "z", "x"]


def test_idf_comes_from_the_candidates() -> None:
    """A term in every candidate tells them apart less than a term in one."""
    docs = ["Caroline likes tea", "Caroline likes coffee", "Caroline likes pottery"]
    scores = HybridRanker().lexical_scores("Caroline pottery", docs)
    assert scores[0] == scores[1] > 0  # "Caroline" only
    assert scores[2] - scores[0] > scores[0]  # "pottery" adds more than "Caroline" gave


def test_alpha_zero_is_the_dense_ranking() -> None:
    ranked = HybridRanker(alpha=0).rerank("Caroline pottery Sweden", CANDIDATES)
    assert ids(ranked) == [it.id for it, _ in CANDIDATES]


def test_unicode_text_matches_by_characters() -> None:
    cands = [(item("a", "我喜欢喝茶"), 0.3), (item("b", "她去了斯德哥尔摩"), 0.5)]
    assert ids(HybridRanker().rerank("斯德哥尔摩", cands)) == ["b", "a"]


def test_empty_candidates() -> None:
    assert HybridRanker().rerank("anything", []) == []


def test_is_a_reranker() -> None:
    assert isinstance(HybridRanker(), Reranker)


@pytest.mark.parametrize(
    ("word", "folded"),
    [
        ("painting", "paint"),
        ("painted", "paint"),
        ("paints", "paint"),
        ("paint", "paint"),
        ("loved", "love"),
        ("love", "love"),
        ("hoping", "hope"),
        ("hopping", "hop"),
        ("running", "run"),
        ("planes", "plane"),
        ("planning", "plan"),
        ("dancing", "danc"),
        ("dance", "danc"),
        ("studies", "studi"),
        ("studied", "studi"),
        ("study", "studi"),
        ("agreed", "agre"),
        ("class", "class"),
        ("falling", "fall"),
        ("café", "café"),  # non-ASCII: left alone
        ("größe", "größe"),
        ("mp3s", "mp3s"),  # not all letters
        ("bus", "bus"),  # 3 letters or fewer
    ],
)
def test_fold_suffix(word: str, folded: str) -> None:
    assert fold_suffix(word) == folded


@pytest.mark.parametrize(
    "kwargs",
    [{"alpha": -1}, {"alpha": math.nan}, {"k1": math.inf}, {"b": 1.5}, {"b": -0.1}, {"alpha": True}],
)
def test_out_of_range_parameters_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        HybridRanker(**kwargs)  # type: ignore[arg-type]


def test_stop_list_keeps_content_words() -> None:
    assert {"won", "need", "us", "may", "will"} & ENGLISH_STOPWORDS == {"will"}


_WORDS = ["caroline", "pottery", "the", "a", "sweden", "lake", "is", "tea", "painted", "ölfarbe", "茶"]
_texts = st.lists(st.sampled_from(_WORDS), max_size=8).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(
    query=_texts,
    docs=st.lists(
        st.tuples(_texts, st.floats(min_value=0.0, max_value=2.0, allow_nan=False)), min_size=1, max_size=12
    ),
    data=st.data(),
)
def test_properties_scores_in_unit_interval_and_order_free(
    query: str, docs: list[tuple[str, float]], data: st.DataObject
) -> None:
    """Fused similarity is in [dense, 1], and any permutation of the input gives the same output."""
    ranker = HybridRanker()
    cands = [(item(f"m{i}", text), dist) for i, (text, dist) in enumerate(docs)]
    fused = ranker.fuse(query, cands)
    for c in fused:
        assert 0.0 <= c.dense <= c.similarity <= 1.0
        assert 0.0 <= c.lexical <= 1.0
    assert [(c.similarity, c.dense) for c in fused] == sorted(
        ((c.similarity, c.dense) for c in fused), reverse=True
    )
    permuted = data.draw(st.permutations(cands))
    assert ranker.rerank(query, permuted) == ranker.rerank(query, cands)


@settings(max_examples=200, deadline=None)
@given(
    query=_texts,
    docs=st.lists(_texts, min_size=1, max_size=12),
    k1=st.floats(min_value=0.0, max_value=3.0),
    b=st.floats(min_value=0.0, max_value=1.0),
)
def test_lexical_scores_are_the_documented_bm25_share_exactly(
    query: str, docs: list[str], k1: float, b: float
) -> None:
    """The module docstring's formula, written document by document: the ranker's
    term-by-term loop gives the same floats."""
    ranker = HybridRanker(k1=k1, b=b)
    terms = sorted(set(ranker.terms(query)))
    if not terms:
        assert ranker.lexical_scores(query, docs) == [0.0] * len(docs)
        return
    counts = [{t: ranker.terms(d).count(t) for t in set(ranker.terms(d))} for d in docs]
    lengths = [len(ranker.terms(d)) for d in docs]
    n, avg = len(docs), sum(lengths) / len(docs)
    idf = {
        t: math.log(
            1.0 + (n - sum(1 for c in counts if t in c) + 0.5) / (sum(1 for c in counts if t in c) + 0.5)
        )
        for t in terms
    }
    expected = []
    for c, length in zip(counts, lengths, strict=True):
        norm = k1 * (1.0 - b + b * length / avg) if avg > 0 else k1
        acc = 0.0
        for t in terms:
            tf = c.get(t, 0)
            if tf:
                acc += idf[t] * (tf * (k1 + 1.0) / (tf + norm)) / (k1 + 1.0)
        expected.append(min(1.0, acc / sum(idf[t] for t in terms)))
    assert ranker.lexical_scores(query, docs) == expected


# -- rank(): the pure ranking step of recall ----------------------------------------------------


def _item(mid: str, content: str = "x", importance: float = 0.5, at_ms: int = 1_000_000) -> Any:
    from betterdb_memory.core.models import MemoryItem

    return MemoryItem(mid, content, importance, at_ms, at_ms, 0)


def test_rank_gates_on_the_knn_distance_and_scores_by_the_documented_formula() -> None:
    from betterdb_memory.core.ranking import rank
    from betterdb_memory.core.scoring import Weights

    cands = [(_item("near"), 0.1), (_item("edge"), 0.33), (_item("far"), 0.5)]
    hits = rank(cands, k=5, threshold=0.33, weights=Weights(), half_life_seconds=1000.0, now=1000.0)
    assert [h.item.id for h in hits] == ["near", "edge"]  # 0.33 is admitted: a ceiling, inclusive
    near = hits[0]
    assert near.similarity == 1 - 0.1 / 2 and near.distance == 0.1
    assert abs(near.score - (0.6 * 0.95 + 0.25 * 1.0 + 0.15 * 0.5)) < 1e-9


def test_rank_lets_a_reranker_reorder_but_never_admit_or_invent() -> None:
    from betterdb_memory.core.ranking import rank
    from betterdb_memory.core.scoring import Weights

    class Reverse:
        def rerank(self, query: str, candidates: Any) -> Any:
            ghost = (_item("ghost"), 1.0)
            return [ghost, *[(item, 0.99 if item.id == "b" else 0.0) for item, _ in candidates]]

    cands = [(_item("a"), 0.05), (_item("b"), 0.2), (_item("c"), 1.5)]
    hits = rank(cands, k=3, threshold=0.5, weights=Weights(1, 0, 0), half_life_seconds=1.0, now=0.0,
                reranker=Reverse(), query="q")  # fmt: skip
    assert [h.item.id for h in hits] == ["b", "a"]  # reordered; "c" past the threshold; no ghost
    assert hits[0].distance == 0.2 and hits[0].similarity == 0.9  # the KNN values stay


# -- the re-ranked recall's gate (issue 16) ---------------------------------------------------


def test_gate_opens_on_the_ceiling_or_a_standing_out_nearest() -> None:
    from betterdb_memory.core.ranking import Gate

    gate = Gate(0.52, 0.18)
    assert gate.opens([0.50, 0.9, 0.95])  # nearest within the ceiling
    assert gate.opens([0.60, 0.80, 0.85])  # beyond it, but 0.20 nearer than the median 0.80
    assert not gate.opens([0.60, 0.70, 0.75])  # beyond it and crowded by its neighbours
    assert not gate.opens([])
    assert Gate(0.52).opens([0.52]) and not Gate(0.52).opens([0.53, 1.2, 1.3])  # ceiling alone
    # The median of an even count is the mean of the middle two.
    assert Gate(0.1, 0.2).opens([0.3, 0.4, 0.6, 0.9]) and not Gate(0.1, 0.21).opens([0.3, 0.4, 0.6, 0.9])


def test_gate_near_miss_is_a_closed_gate_that_almost_opened() -> None:
    from betterdb_memory.core.ranking import Gate

    gate = Gate(0.52, 0.18)
    assert gate.near_miss([0.55, 0.60, 0.62])  # within 1.1 x the ceiling
    assert gate.near_miss([0.70, 0.865, 0.9])  # margin 0.165 >= 0.9 x 0.18 = 0.162
    assert not gate.near_miss([0.70, 0.75, 0.8])
    assert not gate.near_miss([0.5, 0.9])  # open: not a miss at all


def test_rank_with_a_gate_decides_once_then_ranks_every_candidate() -> None:
    from betterdb_memory.core.ranking import Gate, rank
    from betterdb_memory.core.scoring import Weights

    cands = [(_item("a"), 0.5), (_item("b"), 0.9), (_item("text-only"), 1.2)]
    opts: dict[str, Any] = {"k": 5, "threshold": 0.52, "weights": Weights(1, 0, 0), "half_life_seconds": 1.0}
    hits = rank(cands, now=0.0, gate=Gate(0.52, None), knn_distances=[0.5, 0.9], **opts)
    assert [h.item.id for h in hits] == ["a", "b", "text-only"]  # open: no per-hit distance cut
    assert rank(cands, now=0.0, gate=Gate(0.4, None), knn_distances=[0.5, 0.9], **opts) == []
    # Without a gate the threshold cuts each hit, the reference's meaning.
    assert [h.item.id for h in rank(cands, now=0.0, **opts)] == ["a"]


def test_query_words_are_unfolded_unique_sorted_content_words() -> None:
    from betterdb_memory.core.ranking import query_words

    assert query_words("Where did Melanie paint the paintings, and where did she paint?") == (
        "melanie",
        "paint",
        "paintings",
    )
    assert query_words("what is it?") == ()


def test_default_ranker_constants_are_the_measured_ones() -> None:
    ranker = HybridRanker()
    assert (ranker.alpha, ranker.k1, ranker.b) == (4.0, 0.5, 0.0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 2.0),  # distance
            st.floats(0.0, 1.0),  # importance
            st.integers(0, 2_000_000_000_000),  # created_at ms
            st.integers(0, 2_000_000_000_000),  # last_accessed_at ms
        ),
        min_size=1,
        max_size=30,
    ),
    st.floats(0.0, 3_000_000_000.0),
    st.floats(1.0, 1e9),
    st.booleans(),
)
def test_rank_scores_are_scoring_composite_exactly(
    rows: list[tuple[float, float, int, int]], now: float, half_life: float, rerank: bool
) -> None:
    """rank inlines composite's arithmetic: the scores and explain parts must be identical."""
    from betterdb_memory.core.ranking import rank
    from betterdb_memory.core.scoring import Weights, composite

    cands = [
        (MemoryItem(id=f"m{i}", content=f"word{i % 3} note", importance=imp, created_at=c,
                    last_accessed_at=a, access_count=0), d)
        for i, (d, imp, c, a) in enumerate(rows)
    ]  # fmt: skip
    weights = Weights(0.5, 0.3, 0.2)
    ranker = HybridRanker() if rerank else None
    hits = rank(cands, k=len(cands), threshold=2.0, weights=weights, half_life_seconds=half_life, now=now,
                reranker=ranker, query="word1" if rerank else None, explain=True)  # fmt: skip
    lifted = dict((it.id, s) for it, s in ranker.rerank("word1", cands)) if ranker else {}
    assert len(hits) == len(cands)
    for h in hits:
        d = h.distance if h.item.id not in lifted else 2.0 * (1.0 - min(1.0, max(0.0, lifted[h.item.id])))
        parts = composite(distance=d, importance=h.item.importance, created_at=h.item.created_at / 1000.0,
                          last_accessed_at=h.item.last_accessed_at / 1000.0, now=now, weights=weights,
                          half_life_seconds=half_life)  # fmt: skip
        assert h.score == parts.score and h.explain == parts
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


class _Wrapped:
    """``HybridRanker`` through the ``Reranker`` protocol only (``rank``'s general path)."""

    def __init__(self, ranker: HybridRanker) -> None:
        self.ranker = ranker

    def rerank(self, query: str, candidates: Any) -> list[tuple[MemoryItem, float]]:
        return self.ranker.rerank(query, candidates)


@pytest.mark.parametrize("seed", range(30))
def test_rank_shortcut_for_hybrid_ranker_equals_the_protocol_path(seed: int) -> None:
    """``rank`` calls the shipped ranker's fused scores directly: same hits, scores and order as
    through ``rerank``, ties and duplicate ids included (a duplicate sends it the general way)."""
    from betterdb_memory.core.ranking import rank
    from betterdb_memory.core.scoring import Weights

    rng = random.Random(seed)
    words = ["pottery", "class", "sweden", "lake", "sunrise", "green", "hiking", "the", "user"]
    cands = []
    for i in range(rng.randint(1, 60)):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        created = rng.choice([0, 1_000, 2_000_000])
        it = MemoryItem(
            id=f"m{rng.randint(0, 40) if seed % 3 == 0 else i}", content=text,
            importance=rng.choice([0.1, 0.5, 0.9]), created_at=created,
            last_accessed_at=created + rng.choice([0, 5_000]), access_count=rng.choice([0, 2]),
            valid_from=rng.choice([created, 500]),
        )  # fmt: skip
        cands.append((it, rng.choice([0.0, 0.3, 0.3, 0.7, 1.2, 2.0, -0.1])))
    ranker = HybridRanker(b=rng.choice([0.0, 0.0, 0.75]))
    for query in ("pottery class", "the user", "green lake sunrise hiking", "nothing here"):
        for explain in (False, True):
            args: dict[str, Any] = dict(k=len(cands), threshold=1.0, weights=Weights(0.6, 0.25, 0.15),
                                        half_life_seconds=3600.0, now=5_000.0, query=query, explain=explain)  # fmt: skip
            fast = rank(cands, reranker=ranker, **args)
            slow = rank(cands, reranker=_Wrapped(ranker), **args)
            assert [(h.item.id, h.score, h.similarity, h.distance, h.explain) for h in fast] == [
                (h.item.id, h.score, h.similarity, h.distance, h.explain) for h in slow
            ]
            assert all(a.item is b.item for a, b in zip(fast, slow, strict=True))
