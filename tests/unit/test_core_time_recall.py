"""Time in a recall (core/time_recall.py): the plan, the engine clauses, the boost and the present order."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from betterdb_memory.core.models import MemoryHit, MemoryItem
from betterdb_memory.core.query import IndexLayout, MemoryFilter, build_filter, knn_search_args
from betterdb_memory.core.scoring import ScoreParts, Weights
from betterdb_memory.core.time_recall import (
    FUZZY_BOOST,
    TimePlan,
    boost_window,
    event_clause,
    history_clause,
    inside_clause,
    main_k,
    search_text,
    state_clause,
    supersede,
    time_plan,
    whole_items,
    window_first,
    window_k,
    with_window,
)
from betterdb_memory.errors import ValidationError

AS_OF = datetime(2024, 5, 8, 15, 0, tzinfo=UTC)  # a Wednesday
MAY_2023 = (1_682_899_200_000, 1_685_577_600_000)  # [2023-05-01, 2023-06-01) UTC


def _hit(
    mid: str, score: float, valid_from: int, explain: bool = True, valid_until: int | None = None
) -> MemoryHit:
    item = MemoryItem(
        id=mid, content=mid, importance=0.5, created_at=valid_from, last_accessed_at=valid_from,
        access_count=0, valid_from=valid_from, valid_until=valid_until,
    )  # fmt: skip
    parts = ScoreParts(score, 0.0, 0.5, Weights(), score) if explain else None
    return MemoryHit(item, score, score, 1.0 - score, parts)


def test_a_query_without_a_time_expression_is_a_question_about_the_present() -> None:
    plan = time_plan("Where does Ada live?", as_of=AS_OF)
    assert plan == TimePlan(window=None, present=False)  # as_of given: not the present
    plan = time_plan("Where does Ada live?")
    assert plan == TimePlan(window=None, present=True)
    assert (plan.filters, plan.boosts, plan.reorders, plan.mode) == (False, False, True, None)
    assert search_text("Where does Ada live?", plan) == "Where does Ada live?"


def test_a_vector_alone_has_no_window() -> None:
    assert time_plan(None) == TimePlan(window=None, present=True)


def test_an_exact_window_ranks_its_memories_first_and_searches_the_rest() -> None:
    plan = time_plan("What did I do in May 2023?", as_of=AS_OF)
    assert plan.window is not None
    assert (plan.window.start_ms, plan.window.end_ms) == MAY_2023
    assert (plan.filters, plan.boosts, plan.present, plan.mode) == (True, False, False, "filter")
    assert plan.reorders  # the window's memories are moved first before k is cut
    assert search_text("What did I do in May 2023?", plan) == "What did I do?"


def test_a_query_that_is_only_a_time_is_searched_whole() -> None:
    plan = time_plan("yesterday?", as_of=AS_OF)
    assert plan.window is not None
    assert search_text("yesterday?", plan) == "yesterday?"


def test_a_fuzzy_window_boosts() -> None:
    plan = time_plan("what did I read recently", as_of=AS_OF)
    assert (plan.filters, plan.boosts, plan.reorders, plan.mode) == (False, True, True, "boost")


def test_bad_tz_is_refused_even_without_a_time_expression() -> None:
    with pytest.raises(ValidationError) as err:
        time_plan("Where does Ada live?", tz="Mars/Olympus")
    assert err.value.code == "validation.timezone"


def test_event_clause_is_validity_window_with_its_fallback() -> None:
    plan = time_plan("in May 2023", as_of=AS_OF)
    assert plan.window is not None
    a, b = MAY_2023
    rng = f"[{a} ({b}]"
    assert event_clause(plan.window) == (
        f"-(-@valid_from:{rng} -(@created_at:{rng} -@valid_from:[-inf +inf]))"
    )
    old = IndexLayout(valid_from=False, state_from=False)
    assert event_clause(plan.window, old) == f"@created_at:{rng}"
    assert state_clause(plan.window) == f"@state_from:[-inf ({b}]"
    assert state_clause(plan.window, old) is None


def test_open_windows() -> None:
    since = time_plan("since March", as_of=AS_OF).window
    before = time_plan("before 2024", as_of=AS_OF).window
    assert since is not None and before is not None
    assert state_clause(since) == "@state_from:[-inf +inf]"
    assert state_clause(before) == "@state_from:[-inf (1704067200000]"
    assert "[-inf (1704067200000]" in event_clause(before)


def test_clauses_go_into_the_knn_filter_after_the_scope() -> None:
    flt = MemoryFilter(clauses=("@state_from:[-inf (5]",))
    assert build_filter(flt) == "@state_from:[-inf (5]"
    args = knn_search_args("idx", b"v", k=3, flt=flt, return_fields=("content",))
    assert args[2] == "(@state_from:[-inf (5])=>[KNN 3 @vector $vec AS __dist]"
    # a clause that starts with a negation is anchored on the match-all range
    neg = MemoryFilter(clauses=("-(-@valid_from:[1 (2])",))
    assert knn_search_args("idx", b"v", k=3, flt=neg)[2].startswith("(@created_at:[-inf +inf] -(")


def test_with_window_explains_the_window() -> None:
    plan = time_plan("in May 2023", as_of=AS_OF)
    hits = with_window([_hit("a", 0.5, 1), _hit("b", 0.4, 2, explain=False)], plan)
    assert hits[0].explain is not None
    assert (
        hits[0].explain.time_window == "'in May 2023' -> [2023-05-01T00:00:00.000Z, 2023-06-01T00:00:00.000Z)"
    )
    assert hits[1].explain is None
    assert with_window(hits, TimePlan()) == hits


def test_boost_lifts_the_hits_inside_a_fuzzy_window() -> None:
    plan = time_plan("what did I read recently", as_of=AS_OF)
    w = plan.window
    assert w is not None and w.start_ms is not None
    inside, outside = w.start_ms + 1, w.start_ms - 86_400_000
    weights = Weights()
    hits = boost_window([_hit("out", 0.7, outside), _hit("in", 0.6, inside)], w, weights)
    assert [h.item.id for h in hits] == ["in", "out"]
    assert hits[0].score == pytest.approx(0.6 + weights.similarity * FUZZY_BOOST)
    assert hits[0].explain is not None and hits[0].explain.score == hits[0].score


def test_supersede_puts_the_newer_first_and_names_it() -> None:
    hits = [_hit("lisbon", 0.98, 1), _hit("tea", 0.9, 5), _hit("berlin", 0.88, 2)]
    out = supersede(hits, [(0, 2)])
    assert [h.item.id for h in out] == ["berlin", "lisbon", "tea"]
    assert out[0].score == 0.98 and out[1].score < 0.98
    assert out[1].explain is not None and out[1].explain.superseded_by == "berlin"
    assert out[0].explain is not None and out[0].explain.superseded_by is None
    assert out[2] is hits[1]  # untouched
    assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)


def test_supersede_a_chain_names_the_newest() -> None:
    hits = [_hit("v1", 0.9, 1), _hit("v2", 0.8, 2), _hit("v3", 0.7, 3)]
    out = supersede(hits, [(0, 1), (0, 2), (1, 2)])
    assert [h.item.id for h in out] == ["v3", "v2", "v1"]
    assert [h.explain.superseded_by for h in out if h.explain is not None] == [None, "v3", "v3"]


def test_supersede_without_pairs_changes_nothing() -> None:
    hits = [_hit("a", 0.9, 1), _hit("b", 0.8, 2)]
    assert supersede(hits, []) == hits


def test_window_first_lifts_the_inside_above_the_rest_keeping_each_part_s_order() -> None:
    plan = time_plan("What did I do in May 2023?", as_of=AS_OF)
    assert plan.window is not None
    inside_date, outside_date = MAY_2023[0] + 1, MAY_2023[0] - 1
    hits = [_hit("out1", 0.9, outside_date), _hit("in1", 0.6, inside_date), _hit("out2", 0.5, outside_date),
            _hit("state", 0.4, outside_date), _hit("in2", 0.3, inside_date)]  # fmt: skip
    out = window_first(hits, plan.window, {"state"})  # "state": found by the window's states query
    assert [h.item.id for h in out] == ["in1", "state", "in2", "out1", "out2"]
    assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)
    assert out[0].score - 0.6 == pytest.approx(out[2].score - 0.3)  # one lift for the whole inside
    assert window_first(hits[:1], plan.window, set()) == hits[:1]  # nothing inside: unchanged


def test_inside_clause_is_events_or_states_anchored_on_a_positive_union() -> None:
    plan = time_plan("in May 2023", as_of=AS_OF)
    assert plan.window is not None
    a, b = MAY_2023
    rng = f"[{a} ({b}]"
    not_events = f"-@valid_from:{rng} -(@created_at:{rng} -@valid_from:[-inf +inf])"
    assert event_clause(plan.window) == f"-({not_events})"  # the events' clause, negated inside
    state = f"@state_from:[-inf ({b}]"
    union = f"(@valid_from:{rng} | {state} | @created_at:{rng})"
    other_time = f"(@valid_from:[-inf ({a}] | @valid_from:[{b} +inf])"
    assert inside_clause(plan.window) == f"{union} -(@created_at:{rng} {other_time} -{state})"
    # RediSearch 2.10.5: no negation below a union (the unions hold positive ranges only).
    for part in re.findall(r"\(([^()]*\|[^()]*)\)", inside_clause(plan.window)):
        assert "-" not in part.replace("-inf", ""), part
    no_states = IndexLayout(state_from=False)
    assert inside_clause(plan.window, no_states) == event_clause(plan.window)
    reference = IndexLayout(valid_from=False)  # an index without valid_from (created_at instead)
    assert inside_clause(plan.window, reference) == f"(@created_at:{rng} | {state})"
    args = knn_search_args("idx", b"v", k=3, flt=MemoryFilter(clauses=(inside_clause(plan.window),)))
    assert str(args[2]).startswith(f"({union} -(")  # not anchored on a match-all range


def test_inside_clause_of_open_windows() -> None:
    since = time_plan("since March", as_of=AS_OF).window
    before = time_plan("before 2024", as_of=AS_OF).window
    assert since is not None and before is not None
    a = since.start_ms
    assert inside_clause(since) == (
        f"(@valid_from:[{a} +inf] | @state_from:[-inf +inf] | @created_at:[{a} +inf])"
        f" -(@created_at:[{a} +inf] @valid_from:[-inf ({a}] -@state_from:[-inf +inf])"
    )
    assert inside_clause(before) == (
        "(@valid_from:[-inf (1704067200000] | @state_from:[-inf (1704067200000] | @created_at:[-inf (1704067200000])"
        " -(@created_at:[-inf (1704067200000] @valid_from:[1704067200000 +inf] -@state_from:[-inf (1704067200000])"
    )


def test_history_clause_is_the_versions_overlapping_the_window() -> None:
    plan = time_plan("in May 2023", as_of=AS_OF)
    assert plan.window is not None
    a, b = MAY_2023
    assert history_clause(plan.window) == (
        f"@valid_until:[({a} +inf] -(-@valid_from:[-inf ({b}] -(@created_at:[-inf ({b}] -@valid_from:[-inf +inf]))"
    )
    since = time_plan("since March", as_of=AS_OF).window
    before = time_plan("before 2024", as_of=AS_OF).window
    assert since is not None and before is not None
    assert history_clause(since) == f"@valid_until:[({since.start_ms} +inf]"
    assert history_clause(before).startswith("-(-@valid_from:[-inf (1704067200000]")
    flt = MemoryFilter(history=True, clauses=(history_clause(plan.window),))
    assert build_filter(flt).startswith("@valid_until:")  # positive first: no match-all anchor


def test_window_k_fills_k_with_room_to_choose_within_the_pool() -> None:
    assert window_k(5, 50) == 10
    assert window_k(1, 50) == 10
    assert window_k(10, 50) == 20
    assert window_k(40, 50) == 50  # never more than the recall's own pool
    assert window_k(3, 3) == 3


def test_main_k_is_k_within_the_pool() -> None:
    assert main_k(50, 5) == 5  # beside the window's 10: the places after them
    assert main_k(50, 40) == 40
    assert main_k(3, 5) == 3  # never more than the pool
    assert main_k(0, 5) == 1


def test_window_first_counts_a_past_version_valid_during_the_window() -> None:
    plan = time_plan("Where did Ada live in May 2023?", as_of=AS_OF)
    assert plan.window is not None
    a, b = MAY_2023
    hits = [
        _hit("berlin", 0.9, b + 1),  # current, began after the window
        _hit("porto", 0.8, a - 900, valid_until=a - 1),  # ended before it
        _hit("lisbon", 0.7, a - 500, valid_until=b + 500),  # valid across it
    ]
    assert [h.item.id for h in window_first(hits, plan.window, set())] == ["lisbon", "berlin", "porto"]


def test_whole_items_keeps_past_versions_and_drops_what_is_gone() -> None:
    hits = [_hit("a", 0.9, 1), _hit("past", 0.8, 1, valid_until=5), _hit("gone", 0.7, 1), _hit("b", 0.6, 1)]
    full_a = MemoryItem(
        id="a", content="A whole", importance=0.5, created_at=1, last_accessed_at=1, access_count=0
    )
    full_b = MemoryItem(
        id="b", content="B whole", importance=0.5, created_at=1, last_accessed_at=1, access_count=0
    )
    out = whole_items(hits, [full_a, None, full_b])
    assert [h.item.id for h in out] == ["a", "past", "b"]
    assert out[0].item is full_a and out[1] is hits[1] and out[2].item is full_b
    assert [h.score for h in out] == [0.9, 0.8, 0.6]


@pytest.mark.parametrize("explain", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_rank_with_first_equals_the_whole_ranking_window_first_then_cut(seed: int, explain: bool) -> None:
    # A recall passes ``inside_of`` to ``rank`` and builds only k hits; ranking every
    # candidate, then ``window_first``, then the cut, is the order (and scores) it replaces.
    import random

    from betterdb_memory.core.ranking import rank
    from betterdb_memory.core.time_recall import inside_of

    plan = time_plan("What did I do in May 2023?", as_of=AS_OF)
    assert plan.window is not None
    rng = random.Random(seed)
    now = MAY_2023[1] / 1000 + 86_400
    candidates = []
    for i in range(40):
        at = rng.choice(
            [MAY_2023[0] + rng.randrange(MAY_2023[1] - MAY_2023[0]), MAY_2023[0] - rng.randrange(1, 10**10)]
        )
        item = MemoryItem(
            id=f"m{i}", content=f"memory {i}", importance=rng.random(), created_at=at, last_accessed_at=at,
            access_count=0, valid_from=at,
        )  # fmt: skip
        candidates.append((item, rng.uniform(0.2, 1.2)))
    found = {f"m{i}" for i in rng.sample(range(40), 5)}  # returned by the window's query
    common = dict(threshold=2.0, weights=Weights(), half_life_seconds=86_400.0 * 30, now=now, explain=explain)
    for k in (1, 5, 40):
        whole = window_first(rank(candidates, k=len(candidates), **common), plan.window, found)[:k]  # type: ignore[arg-type]
        direct = rank(candidates, k=k, first=inside_of(plan.window, found), **common)  # type: ignore[arg-type]
        assert direct == whole
    none_inside = rank(candidates, k=5, first=lambda item: False, **common)  # type: ignore[arg-type]
    assert none_inside == rank(candidates, k=5, **common)  # type: ignore[arg-type]
