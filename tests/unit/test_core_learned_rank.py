"""``core.learned_rank``: the learned ranker's features, order independence, constants and cost."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from betterdb_memory.core import learned_rank
from betterdb_memory.core.learned_rank import (
    CALIBRATION,
    FEATURES,
    FITTED,
    WEIGHTS,
    LearnedRanker,
    columns,
    features,
    profile,
)
from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.ranking import Gate, HybridRanker, Reranker, rank
from betterdb_memory.core.scoring import DEFAULT_HALF_LIFE_SECONDS, DEFAULT_WEIGHTS


def item(mid: str, content: str, created: int = 0, thread: str | None = "t1") -> MemoryItem:
    return MemoryItem(
        id=mid,
        content=content,
        importance=0.5,
        created_at=created,
        last_accessed_at=created,
        access_count=0,
        thread_id=thread,
    )


CANDIDATES = [
    (item("m1", "Melanie: What have you been painting lately?", 1), 0.50),
    (item("m2", "Caroline: A sunset over the lake, with my pottery class.", 2), 0.55),
    (item("m3", "Melanie: The weather was lovely in Sweden last May.", 3), 0.48),
    (item("m4", "Caroline: I went to the support group on Tuesday.", 4), 0.60),
    (item("m5", "Melanie: Thanks, see you soon!", 5), 0.62),
    (item("m6", "Caroline: The painting class starts again next week.", 6), 0.58),
]
QUERY = "What did Caroline paint at her pottery class?"


def col(name: str, query: str = QUERY, cands: Sequence[tuple[MemoryItem, float]] = CANDIDATES) -> list[float]:
    cols = columns(
        query,
        [it.content for it, _ in cands],
        [d for _, d in cands],
        [it.id for it, _ in cands],
        [learned_rank.thread_order(it) for it, _ in cands],
    )
    return cols[FEATURES.index(name)]


def test_constants_are_one_weight_per_feature_finite_and_documented() -> None:
    assert len(WEIGHTS) == len(FEATURES) == len(set(FEATURES))
    assert all(math.isfinite(w) for w in WEIGHTS)
    assert all(math.isfinite(c) for c in CALIBRATION)
    assert "bench/train_learned_rank.py" in FITTED  # how the constants were made
    assert "held out by conversation" in FITTED


def test_rerank_keeps_every_candidate_and_scores_in_unit_interval() -> None:
    ranked = LearnedRanker().rerank(QUERY, CANDIDATES)
    assert sorted(it.id for it, _ in ranked) == sorted(it.id for it, _ in CANDIDATES)
    assert all(0.0 <= s <= 1.0 for _, s in ranked)
    sims = [s for _, s in ranked]
    assert sims == sorted(sims, reverse=True)  # the calibration is increasing: order = score order


def test_the_answer_rises_above_the_dense_order() -> None:
    """m2 holds the query's rarest words and its speaker: first, though m3 is nearer by meaning."""
    ranked = LearnedRanker().rerank(QUERY, CANDIDATES)
    assert ranked[0][0].id == "m2"
    assert min(CANDIDATES, key=lambda c: c[1])[0].id == "m3"


def test_output_does_not_depend_on_input_order() -> None:
    ranker = LearnedRanker()
    expected = [(it.id, s) for it, s in ranker.rerank(QUERY, CANDIDATES)]
    rng = random.Random(28)
    for _ in range(20):
        shuffled = CANDIDATES[:]
        rng.shuffle(shuffled)
        assert [(it.id, s) for it, s in ranker.rerank(QUERY, shuffled)] == expected


def test_is_a_reranker_and_runs_inside_rank() -> None:
    ranker = LearnedRanker()
    assert isinstance(ranker, Reranker)
    hits = rank(
        CANDIDATES,
        k=3,
        threshold=0.54,
        weights=DEFAULT_WEIGHTS,
        half_life_seconds=DEFAULT_HALF_LIFE_SECONDS,
        now=0.0,
        reranker=ranker,
        query=QUERY,
        gate=Gate(0.54, 0.18),
    )
    assert next(h.item.id for h in hits) == "m2"
    assert len(hits) == 3


def test_empty_candidates_and_stop_word_queries() -> None:
    assert LearnedRanker().rerank(QUERY, []) == []
    assert features(QUERY, [], [], []) == []
    # No terms: no lexical evidence, the order is the dense one (the fitted dense weights are positive).
    ranked = LearnedRanker().rerank("what is it that they were doing?", CANDIDATES)
    assert col("lexical", "what is it that they were doing?") == [0.0] * len(CANDIDATES)
    assert next(it.id for it, _ in ranked) == "m3"


def test_lexical_is_hybrid_rankers() -> None:
    expected = HybridRanker().lexical_scores(QUERY, [it.content for it, _ in CANDIDATES])
    assert col("lexical") == pytest.approx(expected)


def test_dense_features() -> None:
    dense = col("dense")
    assert dense == pytest.approx([1 - d for _, d in CANDIDATES])
    z = col("dense_z")
    assert sum(z) == pytest.approx(0.0, abs=1e-9)
    rr = col("dense_rr")
    assert rr[2] == 1.0  # m3 is the nearest
    assert sorted(rr, reverse=True) == [1 / (1 + r) for r in range(len(CANDIDATES))]


def test_coverage_rarest_and_proximity() -> None:
    cov = col("coverage")
    # Terms of the query: caroline, paint, pottery, class (stop words out, "paint" folded).
    assert cov[1] == pytest.approx(3 / 4)  # m2: caroline, pottery, class
    assert cov[4] == 0.0
    assert col("rarest")[1] == pytest.approx(1.0)  # pottery: the query's rarest term among the candidates
    prox = col("proximity")
    assert prox[1] == pytest.approx(1.0)  # "pottery class": adjacent terms
    assert prox[4] == 0.0  # fewer than two terms matched


def test_speaker_is_the_leading_name_named_by_the_query() -> None:
    spk = col("speaker")
    assert spk == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]  # Caroline's turns
    assert col("speaker", "What did Melanie paint?") == [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    assert profile("no speaker here: a colon later").speaker == frozenset({"no", "speaker", "here"})
    assert profile("https://example.com/a").speaker == frozenset({"https"})
    assert profile("- a list item").speaker == frozenset()


def test_neighbours_are_adjacent_in_their_thread() -> None:
    lex = col("lexical")
    prev, nxt = col("prev_lex"), col("next_lex")
    assert prev[0] == 0.0 and nxt[-1] == 0.0  # first and last of the thread
    assert prev[2] == pytest.approx(lex[1]) and nxt[0] == pytest.approx(lex[1])
    # Another thread's memory is nobody's neighbour.
    split = [
        (item(it.id, it.content, it.created_at, "t2" if it.id == "m2" else "t1"), d) for it, d in CANDIDATES
    ]
    assert col("prev_lex", cands=split)[2] == pytest.approx(lex[0])  # m3's previous in t1 is m1
    assert col("next_lex", cands=split)[1] == 0.0  # m2 is alone in t2
    # No neighbour key: no neighbour features.
    ranker = LearnedRanker(neighbour_key=None)
    cols = columns(
        QUERY,
        [it.content for it, _ in CANDIDATES],
        [d for _, d in CANDIDATES],
        [it.id for it, _ in CANDIDATES],
    )
    assert cols[FEATURES.index("prev_lex")] == [0.0] * len(CANDIDATES)
    assert len(ranker.rerank(QUERY, CANDIDATES)) == len(CANDIDATES)


def test_weights_are_validated() -> None:
    with pytest.raises(ValueError, match="weights expected"):
        LearnedRanker(weights=(1.0,))


class _Counting:
    """Delegates to HybridRanker, counting ``terms`` calls."""

    def __init__(self) -> None:
        self.inner = HybridRanker()
        self.calls = 0

    def terms(self, text: str) -> tuple[str, ...]:
        self.calls += 1
        return self.inner.terms(text)


def test_cost_by_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per recall: the query tokenised once, each candidate's text profiled once and then cached,
    and a bounded number of sorts (two rankings, the thread order, the result, one per candidate
    holding two query terms or more): O(n x query terms + n log n), like HybridRanker."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(300)]
    cands = [
        (
            item(f"c{i:03d}", " ".join(rng.choice(words) for _ in range(12)), i, f"t{i % 3}"),
            rng.uniform(0.3, 0.9),
        )
        for i in range(100)
    ]
    query = " ".join(words[:6])
    counting = _Counting()
    monkeypatch.setattr(learned_rank, "_RANKER", counting)
    learned_rank.profile.cache_clear()
    sorts = 0
    real_sorted = sorted

    def counting_sorted(*args: Any, **kwargs: Any) -> Any:
        nonlocal sorts
        sorts += 1
        return real_sorted(*args, **kwargs)

    monkeypatch.setattr(learned_rank, "sorted", counting_sorted, raising=False)
    ranker = LearnedRanker()
    ranker.rerank(query, cands)
    assert learned_rank.profile.cache_info().misses == 100
    assert counting.calls == 1 + 100  # the query, then each candidate once (profile's cache)
    matched_two = sum(1 for it, _ in cands if len({t for t in it.content.split() if t in query.split()}) >= 2)
    assert sorts <= 5 + matched_two
    counting.calls = sorts = 0
    ranker.rerank(query, cands)
    assert counting.calls == 1  # every candidate's profile came from the cache
    assert learned_rank.profile.cache_info().misses == 100


# -- date features: the query's time expressions (the package's one parser) against valid_from --

MAY_2023 = 1_683_504_000_000  # 2023-05-08T00:00:00Z
JUNE_2023 = 1_686_182_400_000  # 2023-06-08T00:00:00Z
MAY_2022 = 1_651_968_000_000  # 2022-05-08T00:00:00Z
NOW = 1_764_547_200_000  # 2025-12-01T00:00:00Z


def _date_cols(query: str, dates: Sequence[int] | None) -> dict[str, list[float]]:
    cols = columns(
        query,
        [it.content for it, _ in CANDIDATES[:3]],
        [d for _, d in CANDIDATES[:3]],
        [it.id for it, _ in CANDIDATES[:3]],
        None,
        dates,
        NOW,
    )
    return {n: cols[FEATURES.index(n)] for n in ("month", "year", "day")}


def test_month_year_and_day_features_match_the_candidates_dates() -> None:
    dates = [MAY_2023, JUNE_2023, MAY_2022]
    got = _date_cols("What did Caroline paint on 8 May, 2023?", dates)
    assert got == {"month": [1.0, 0.0, 1.0], "year": [1.0, 1.0, 0.0], "day": [1.0, 0.0, 0.0]}
    assert _date_cols("What did Caroline paint in June?", dates)["month"] == [0.0, 1.0, 0.0]
    # No time expression, or no dates: the date features are 0.
    zero = {"month": [0.0] * 3, "year": [0.0] * 3, "day": [0.0] * 3}
    assert _date_cols("What did Caroline paint?", dates) == zero
    assert _date_cols("What did Caroline paint on 8 May, 2023?", None) == zero


def _dated(mid: str, content: str, created: int, valid_from: int | None) -> MemoryItem:
    return MemoryItem(
        id=mid, content=content, importance=0.5, created_at=created, last_accessed_at=created,
        access_count=0, thread_id="t1", valid_from=valid_from,
    )  # fmt: skip


def test_the_ranker_dates_a_candidate_by_valid_from_else_created_at() -> None:
    """Two equal turns: the one whose valid_from (or, without one, created_at) is in the month asked wins."""
    query = "What did Caroline paint in May 2023?"
    text = "Caroline: I painted a sunset."
    ranker = LearnedRanker(neighbour_key=None)
    by_valid_from = [(_dated("a", text, NOW, JUNE_2023), 0.5), (_dated("b", text, NOW, MAY_2023), 0.5)]
    assert [it.id for it, _ in ranker.rerank(query, by_valid_from)] == ["b", "a"]
    by_created = [(_dated("a", text, MAY_2023, None), 0.5), (_dated("b", text, JUNE_2023, None), 0.5)]
    assert [it.id for it, _ in ranker.rerank(query, by_created)] == ["a", "b"]
    # "last month" counts from the latest candidate's created_at (June 2023: May), not the clock
    # (which would name no candidate's month and leave the tie to the id).
    june_first = [(_dated("a", text, JUNE_2023, None), 0.5), (_dated("b", text, MAY_2023, None), 0.5)]
    assert [it.id for it, _ in ranker.rerank("What did Caroline paint last month?", june_first)] == ["b", "a"]


def test_thread_order_is_event_time_then_write_time_then_id() -> None:
    turn = "Caroline: x"
    late_write_early_event = _dated("z", turn, 500, MAY_2022)
    early_write_late_event = _dated("a", turn, 100, MAY_2023)
    same_date_first = _dated("m", turn, 200, MAY_2023)
    same_date_second = _dated("b", turn, 300, MAY_2023)
    undated = _dated("u", turn, MAY_2023 + 1, None)
    keys = {
        it.id: learned_rank.thread_order(it)
        for it in (late_write_early_event, early_write_late_event, same_date_first, same_date_second, undated)
    }
    assert sorted(keys, key=lambda i: keys[i]) == ["z", "a", "m", "b", "u"]  # type: ignore[arg-type,return-value]


def test_only_conversation_turns_have_neighbours() -> None:
    """A memory outside a thread, or one whose text does not open with "Name:", has no thread place."""
    assert learned_rank.thread_order(item("f", "Caroline: x", 1, thread=None)) is None
    assert learned_rank.thread_order(item("f", "Caroline moved to Boston in 2019.", 1)) is None
    assert learned_rank.thread_order(item("f", "User: I moved to Boston in 2019.", 1)) is not None
    facts = [
        (item(f"f{i}", text, 0), d)
        for i, (text, d) in enumerate(
            [
                ("Caroline asked about the painting class.", 0.5),
                ("Melanie took up pottery last year.", 0.55),
                ("Caroline's cat is called Miso.", 0.6),
            ]
        )
    ]
    cols = columns(
        QUERY,
        [it.content for it, _ in facts],
        [d for _, d in facts],
        [it.id for it, _ in facts],
        [learned_rank.thread_order(it) for it, _ in facts],
    )
    assert cols[FEATURES.index("next_lex")] == [0.0] * 3


# -- the vectorised ranker against the plain loop it replaced (issue 28: faster, same output) --

_NAMES = ("Caroline", "Melanie", "Jon", "Gina")
_WORDS = (
    "painting pottery class camping beach sunset adoption agency support group concert guitar "
    "violin festival kids family dog library book poem recipe garden hiking lake sweden grandma "
    "necklace career school friends summer trip museum canvas workshop charity race paint painted"
)
_VOCAB = _WORDS.split()
_DAY = 86_400_000


def _fixed_inputs() -> list[tuple[str, list[tuple[MemoryItem, float]]]]:
    """Seeded recalls with what makes ranking tricky: ties, duplicates, threads, scopes, dates."""
    rng = random.Random(2028)
    queries = [
        "What did Caroline paint at her pottery class?",
        "What did Melanie say about the beach and the sunset in May 2023?",
        "When did Jon go hiking on 8 May, 2023?",
        "What did Gina bake last month for the charity race?",
        "what is it that they were doing?",  # stop words only
        "Which book did Caroline read in 1965?",
        "pottery pottery class class paint painting painted",
    ]
    out = []
    for size in (1, 2, 7, 50, 100):
        for query in queries:
            cands = []
            for _ in range(size):
                words = " ".join(rng.choice(_VOCAB) for _w in range(rng.randint(0, 14)))
                text = f"{rng.choice(_NAMES)}: {words}" if rng.random() < 0.8 else f"a note about {words}"
                if cands and rng.random() < 0.1:
                    text = cands[-1][0].content  # a duplicate text
                created = 1_700_000_000_000 + rng.randint(0, 3) * _DAY
                valid = rng.choice([None, created, -86_400_000 * 3000 + rng.randint(0, 99) * _DAY * 9])
                valid = valid if valid is not None or rng.random() < 0.5 else 1_683_504_000_000
                it = MemoryItem(
                    id=f"m{rng.randint(0, 10**6):07d}" if rng.random() < 0.95 else "m-dup",
                    content=text, importance=0.5, created_at=created, last_accessed_at=created,
                    access_count=0, thread_id=rng.choice(["t1", "t1", "t1", "t2", None, ""]),
                    agent_id=rng.choice([None, "", "a1"]), namespace=rng.choice([None, "n1"]),
                    valid_from=valid,
                )  # fmt: skip
                dist = round(rng.uniform(0.3, 0.9), 2) if rng.random() < 0.5 else rng.uniform(0.3, 0.9)
                cands.append((it, dist))
            out.append((query, cands))
    # Exact ties: the same text at the same distance, ids against the input order.
    twins = [
        (item(f"z{9 - i}", "Caroline: pottery class" if i < 3 else "a pottery note", 5, None), 0.5)
        for i in range(6)
    ]
    out += [(queries[0], twins), (queries[0], twins[::-1] + [c for _, c in out[-1:] for c in c[:20]])]
    return out


@pytest.mark.parametrize(
    "key",
    [learned_rank.thread_order, None, lambda it: ("x", it.thread_id or "", it.created_at, it.id)],
    ids=["thread_order", "none", "custom"],
)
def test_the_vectorised_ranker_gives_the_reference_order_and_scores(key: Any) -> None:
    """Same order, scores and similarities (within 1e-9; in fact the same bits) as the plain loop.

    ``learned_rank_reference`` is a frozen copy of the scoring before it was vectorised;
    ``bench/bench_rank.py --check`` runs the same comparison over LoCoMo.
    """
    from tests.unit.learned_rank_reference import ReferenceRanker
    from tests.unit.learned_rank_reference import columns as reference_columns

    new, old = LearnedRanker(neighbour_key=key), ReferenceRanker(neighbour_key=key)
    for query, cands in _fixed_inputs():
        got, want = new.rerank(query, cands), old.rerank(query, cands)
        assert [it.id for it, _ in got] == [it.id for it, _ in want]
        assert [it for it, _ in got] == [it for it, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-9, rel=0)
        assert new.scores(query, cands) == pytest.approx(old.scores(query, cands), abs=1e-9, rel=0)
        args = (
            query,
            [it.content for it, _ in cands],
            [d for _, d in cands],
            [it.id for it, _ in cands],
            [key(it) for it, _ in cands] if key is not None else None,
            [it.valid_from if it.valid_from is not None else it.created_at for it, _ in cands],
            max(it.created_at for it, _ in cands),
        )
        for mine, theirs in zip(columns(*args), reference_columns(*args), strict=True):  # type: ignore[arg-type]
            assert mine == pytest.approx(theirs, abs=1e-12, rel=0)


@pytest.mark.parametrize(
    "text",
    [
        "Caroline: I went to the pottery class.",
        "  Mel Smith: hi",
        "Mary Ann Lee Jones: four words is not a speaker",
        "memory 12: the user prefers window seats",
        "123: numbers are not names",
        "_x: underscores neither",
        "Zoë: a name in another script",
        "Dr. Who: dots are part of a name",
        "no colon at all",
        "",
        "A" * 60 + ": too far for the speaker pattern",
    ],
)
def test_is_turn_is_the_profile_speaker(text: str) -> None:
    """``is_turn`` reads the speaker pattern alone: the same answer as the text's ``Profile``."""
    from betterdb_memory.core.learned_rank import is_turn, profile

    assert is_turn(text) == bool(profile(text).speaker)
