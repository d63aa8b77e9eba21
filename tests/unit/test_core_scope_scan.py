"""``core.scope_scan``: the scan's query, the exact top k, the size classes learned from replies."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import (
    SCORE_ALIAS,
    VECTOR_FIELD,
    IndexLayout,
    MemoryFilter,
    build_filter,
    knn_search_args,
)
from betterdb_memory.core.replies import SearchHit, parse_search_reply
from betterdb_memory.core.scope_scan import (
    FIRST_PROBE,
    LARGE_COUNT_TTL_S,
    LARGE_STREAK,
    UNCOUNTED_RETRY,
    SizeClasses,
    count_args,
    filter_key,
    filter_shape,
    index_count_args,
    nearest,
    scan_args,
    scan_bound,
    scope_of,
    worth_scanning,
)

FLT = MemoryFilter(scope=Scope(thread_id="t-1 {x}"), tags=("a,b",), exclude_sensitivity=("pii",))


def _blob(v: list[float]) -> bytes:
    return np.asarray(v, dtype="<f4").tobytes()


def _hits(vectors: list[list[float]]) -> list[SearchHit]:
    return [SearchHit(f"m:{i}", {"content": f"c{i}", VECTOR_FIELD: _blob(v)}) for i, v in enumerate(vectors)]


def test_scan_uses_the_knn_filter_text() -> None:
    args = scan_args("idx", FLT, IndexLayout(), ("content", "threadId"), limit=500)
    knn = knn_search_args("idx", b"v", k=5, flt=FLT)
    clauses = build_filter(FLT)
    assert clauses and f"({clauses})" == args[2]
    assert str(knn[2]).startswith(f"({clauses})=>")
    assert args[args.index("RETURN") : args.index("RETURN") + 5] == [
        "RETURN",
        "3",
        "content",
        "threadId",
        "vector",
    ]
    assert args[-4:] == ["0", "501", "DIALECT", "2"]
    assert "KNN" not in args[2] and "PARAMS" not in args


def test_scan_of_a_negation_first_filter_matches_all_first() -> None:
    flt = MemoryFilter(exclude_sources=("web",))
    args = scan_args("idx", flt, IndexLayout(), ("content",))
    assert args[2] == "(@created_at:[-inf +inf] -@source:{web})"


def test_scan_does_not_ask_for_the_vector_twice() -> None:
    args = scan_args("idx", FLT, IndexLayout(), ("vector", "content"))
    assert args.count("vector") == 1


def test_count_args_count_only() -> None:
    args = count_args("idx", FLT, IndexLayout())
    assert "NOCONTENT" in args and args[-4:] == ["0", "0", "DIALECT", "2"]


def test_filter_key_is_empty_without_a_filter() -> None:
    assert filter_key(MemoryFilter(), IndexLayout()) == ""
    assert filter_key(FLT, IndexLayout()) == build_filter(FLT)


def test_nearest_is_the_exact_cosine_top_k() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(50, 16)).astype(np.float32)
    q = rng.normal(size=16).astype(np.float32)
    hits = _hits([list(map(float, v)) for v in vectors])
    got = nearest(hits, q, 7)
    v64, q64 = vectors.astype(np.float64), q.astype(np.float64)
    dist = 1.0 - (v64 @ q64) / (np.linalg.norm(v64, axis=1) * np.linalg.norm(q64))
    want = np.argsort(dist)[:7]
    assert [h.key for h in got] == [f"m:{i}" for i in want]
    assert [h.fields[SCORE_ALIAS] for h in got] == pytest.approx(dist[want].tolist())
    assert all(VECTOR_FIELD not in h.fields for h in got)  # not carried into ranking


def test_nearest_scale_is_the_engines_cosine_distance() -> None:
    got = nearest(_hits([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0]]), np.asarray([2.0, 0.0], np.float32), 3)
    assert [(h.key, h.fields[SCORE_ALIAS]) for h in got] == [("m:0", 0.0), ("m:1", 1.0), ("m:2", 2.0)]


def test_nearest_skips_missing_or_wrong_size_vectors_and_zero_norms() -> None:
    hits = _hits([[1.0, 0.0], [0.0, 1.0]])
    hits.append(SearchHit("m:x", {"content": "no vector"}))
    hits.append(SearchHit("m:y", {VECTOR_FIELD: _blob([1.0, 0.0, 0.0])}))
    hits.append(SearchHit("m:z", {VECTOR_FIELD: _blob([0.0, 0.0])}))
    hits.append(SearchHit("m:b", {VECTOR_FIELD: bytearray(_blob([-1.0, 0.0]))}))
    hits.append(SearchHit("m:s", {VECTOR_FIELD: "not bytes"}))
    got = nearest(hits, np.asarray([1.0, 0.0], np.float32), 10)
    assert [h.key for h in got] == ["m:0", "m:1", "m:z", "m:b"]
    assert got[2].fields[SCORE_ALIAS] == 1.0 and got[3].fields[SCORE_ALIAS] == 2.0


def test_nearest_applies_keep_before_the_cut() -> None:
    hits = _hits([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    hits[0].fields["threadId"] = "T"  # a case variant a case-insensitive index matched
    got = nearest(hits, np.asarray([1.0, 0.0], np.float32), 2, keep=lambda f: f.get("threadId") != "T")
    assert [h.key for h in got] == ["m:1", "m:2"]


def test_nearest_ties_keep_reply_order_and_k_zero_is_empty() -> None:
    hits = _hits([[1.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    assert [h.key for h in nearest(hits, np.asarray([1.0, 0.0], np.float32), 3)] == ["m:0", "m:1", "m:2"]
    assert nearest(_hits([[1.0, 0.0]]), np.asarray([1.0, 0.0], np.float32), 0) == []
    assert nearest([], np.asarray([1.0, 0.0], np.float32), 3) == []


def test_scan_reply_parses_vectors_as_bytes() -> None:
    blob = _blob([0.5, -0.25])
    reply = [2, b"p:mem:a", [b"content", b"x", b"vector", blob], b"p:mem:b", [b"vector", _blob([1.0, 0.0])]]
    result = parse_search_reply(reply)
    assert result.total == 2
    got = nearest(result.hits, np.asarray([1.0, 0.0], np.float32), 2)
    assert [h.key for h in got] == ["p:mem:b", "p:mem:a"]
    assert parse_search_reply([1_234], nocontent=True).total == 1_234  # a count's reply


def test_worth_scanning_weighs_the_scope_against_the_walk() -> None:
    # The walk visits max(k, 10) / selectivity nodes; the scan reads the scope.
    assert worth_scanning(92, 90_000, 50)  # the diagnosis's thread: 50k nodes walked
    assert worth_scanning(180, 90_000, 10)  # 0.2%: 94 ms walked, 3.6 ms scanned (bench)
    assert not worth_scanning(45, 90_000, 50)  # the engine scans it itself (0.05%)
    assert worth_scanning(46, 90_000, 50, prefiltered=0.0) == worth_scanning(46, 90_000, 50)
    assert not worth_scanning(46, 90_000, 50, prefiltered=0.001)
    assert not worth_scanning(300, 3_000, 50)  # 500 nodes walked: cheaper than 300 vectors
    assert worth_scanning(1_000, 1_000_000, 10)
    assert not worth_scanning(2_001, 10**9, 50)  # never above the limit (the reply's size)
    assert not worth_scanning(1, 0, 50)  # the index's size not known yet
    assert worth_scanning(200, 10_000, 1) == worth_scanning(200, 10_000, 10)  # EF_RUNTIME floor
    assert worth_scanning(600, 1_000, 1, limit=600, ratio=1e9) and not worth_scanning(
        601, 1, 1, limit=600, ratio=1e9
    )


def test_size_classes_scan_only_scopes_known_worth_it() -> None:
    sizes = SizeClasses(limit=100, ratio=1.0, ttl=5.0, size=100)
    assert not sizes.scan("a", 10) and sizes.needs_count("a", 0.0) and sizes.needs_index_count(0.0)
    sizes.learn("a", 50, 0.0)
    assert not sizes.scan("a", 10)  # the index's size unknown: 50**2 > 1 * 10 * 0
    sizes.learn_index(250, 0.0)
    assert sizes.scan("a", 10) and sizes.scan("a", 9)  # 2500 <= 1 * max(k, 10) * 250
    assert not sizes.needs_index_count(4.9) and sizes.needs_index_count(5.0)
    sizes.learn_index(249, 0.0)
    assert not sizes.scan("a", 10)
    sizes.learn("b", 101, 0.0)
    sizes.learn_index(10**9, 0.0)
    assert not sizes.scan("b", 10) and sizes.total("b") == 101
    assert not sizes.needs_count("b", 74.9) and sizes.needs_count("b", 75.0)  # over the limit: 15x the ttl
    sizes.forget("b")
    assert sizes.total("b") is None and sizes.needs_count("b", 0.0)


def test_size_classes_are_bounded_least_recently_used_first() -> None:
    sizes = SizeClasses(limit=10, ratio=1e9, size=3)
    sizes.learn_index(1, 0.0)
    for i, key in enumerate("abc"):
        sizes.learn(key, 1, float(i))
    assert sizes.scan("a", 10)  # a used: b is now the oldest
    sizes.learn("d", 1, 3.0)
    assert len(sizes) == 3 and sizes.total("b") is None and sizes.scan("a", 10) and sizes.scan("d", 10)


def test_scan_bound_is_the_largest_scope_worth_scanning() -> None:
    for index_docs in (1, 999, 3_000, 90_000, 118_000, 1_000_000):
        for k in (1, 10, 50, 100):
            bound = scan_bound(index_docs, k)
            floor = int(0.0005 * index_docs)  # worth_scanning's own floor aside
            assert bound <= 2_000
            if bound > floor:
                assert worth_scanning(bound, index_docs, k)
            assert not worth_scanning(bound + 1, index_docs, k)
    assert scan_bound(90_000, 50) == 1_341  # the pool of a default recall at 90k
    assert scan_bound(1_000_000, 50) == 2_000
    assert scan_bound(0, 50) == 0  # the index's size unknown: nothing scanned blind
    assert scan_bound(100, 10, limit=5, ratio=1e9) == 5


@dataclass(frozen=True)
class _Where:
    """A compiled ``where=`` (``core.where_clause.WhereClause``): its text and the fields it reads."""

    text: str
    fields: tuple[str, ...]

    def matches(self, fields: Mapping[str, Any]) -> bool:
        return True


def test_filter_shape_names_fields_not_values() -> None:
    a = MemoryFilter(scope=Scope(thread_id="t-1"), tags=("x",))
    b = MemoryFilter(scope=Scope(thread_id="another {thread}"), tags=("y z",))
    assert filter_shape(a) == filter_shape(b)
    assert filter_shape(a) != filter_shape(MemoryFilter(scope=Scope(thread_id="t-1")))
    assert filter_shape(a) != filter_shape(MemoryFilter(scope=Scope(agent_id="t-1"), tags=("x",)))
    assert filter_shape(MemoryFilter(min_created_at=1)) != filter_shape(MemoryFilter(max_created_at=1))
    assert filter_shape(MemoryFilter(as_of=5)) == filter_shape(MemoryFilter(as_of=6))
    w1, w2 = _Where("@source:{web}", ("source",)), _Where("-@source:{chat}", ("source",))
    w3 = _Where("@importance:[0.5 +inf]", ("importance",))
    assert filter_shape(MemoryFilter(where=w1)) == filter_shape(MemoryFilter(where=w2))
    assert filter_shape(MemoryFilter(where=w1)) != filter_shape(MemoryFilter(where=w3))
    for value in ("t}|x", "a\\b", "thread-77"):  # no value reaches the shape
        assert value not in filter_shape(MemoryFilter(scope=Scope(thread_id=value)))


def test_size_classes_probe_new_filters_until_a_shape_runs_large() -> None:
    sizes = SizeClasses(limit=1_000, ratio=1.0)
    assert sizes.bound(10) == 0  # the index's size unknown
    sizes.seed_index(900)  # FT.INFO's guess at opening
    assert sizes.index_docs == 900 and sizes.needs_index_count(0.0) and sizes.bound(10) == 94
    sizes.learn_index(250_000, 0.0)
    sizes.seed_index(10)  # a learned count is not overwritten by a guess
    assert sizes.index_docs == 250_000 and sizes.bound(10) == 1_000
    assert sizes.probe("thread", 1_000) == FIRST_PROBE  # a shape never seen: a little first
    assert sizes.probe("thread", 100) == 100
    sizes.verdict("thread", small=True)
    assert sizes.probe("thread", 1_000) == 1_000  # known small: all of the bound at once
    for _ in range(LARGE_STREAK):
        assert sizes.probe("agent", 1_000) == FIRST_PROBE  # never seen, or last found large
        sizes.verdict("agent", small=False)
    assert sizes.probe("agent", 1_000) == 0 and sizes.probe("thread", 1_000) == 1_000  # walked
    sizes.verdict("agent", small=True)  # one found small: the shape's misses are probed again
    assert sizes.probe("agent", 1_000) == 1_000
    sizes.verdict("thread", small=False)
    sizes.verdict("thread", small=True)
    sizes.verdict("thread", small=False)
    assert sizes.probe("thread", 1_000) == FIRST_PROBE  # large in a row, not in all


def test_a_shape_walked_without_counts_is_probed_again_now_and_then() -> None:
    """A time window's query carries no count, so no verdict could bring a walked shape back:
    one walked miss in ``UNCOUNTED_RETRY`` reads its probe."""
    sizes = SizeClasses(limit=1_000, ratio=1.0)
    for _ in range(LARGE_STREAK):
        assert sizes.probe("window", 60, counted=False) == 60
        sizes.verdict("window", small=False)
    got = [sizes.probe("window", 60, counted=False) for _ in range(2 * UNCOUNTED_RETRY)]
    assert got == ([0] * (UNCOUNTED_RETRY - 1) + [60]) * 2
    assert sizes.probe("window", 60) == 0  # counted: its count decides, as before
    sizes.verdict("window", small=True)  # the probe found a small one
    assert sizes.probe("window", 60, counted=False) == 60


def test_size_classes_remember_a_bounded_number_of_shapes() -> None:
    sizes = SizeClasses()
    for i in range(400):
        for _ in range(LARGE_STREAK):
            sizes.verdict(f"s{i}", small=False)
    assert sizes.probe("s399", 500) == 0 and sizes.probe("s0", 500) == FIRST_PROBE  # the oldest forgotten


def test_a_filter_too_big_to_scan_is_recounted_less_often() -> None:
    """Its count costs as much as its matches; a late one only delays a scan."""
    sizes = SizeClasses(limit=100, ttl=60.0)
    sizes.learn("small", 100, 0.0)
    sizes.learn("large", 101, 0.0)
    assert sizes.needs_count("small", 60.0) and not sizes.needs_count("large", 60.0)
    assert not sizes.needs_count("large", 899.0) and sizes.needs_count("large", 900.0)
    assert LARGE_COUNT_TTL_S == 900.0


def test_scope_of_drops_only_what_narrows_in_time() -> None:
    """A window, ``as_of`` and engine clauses are ANDed: the scope without them holds every match."""
    assert scope_of(FLT) is FLT  # nothing to drop: the same object (no key built twice)
    timed = dataclasses.replace(
        FLT, valid_since=5, valid_before=9, as_of=7, clauses=("@state_from:[-inf (9]",), history=True
    )
    base = scope_of(timed)
    assert base == FLT
    text, base_text = build_filter(timed), build_filter(base)
    assert base_text and text.startswith(base_text) and len(text) > len(base_text)
    # Two windows over one scope share its key, whatever their bounds.
    other = dataclasses.replace(FLT, valid_since=6)
    assert filter_key(scope_of(other), IndexLayout()) == filter_key(base, IndexLayout())
    assert filter_key(other, IndexLayout()) != filter_key(timed, IndexLayout())


def test_the_index_size_is_one_ft_info() -> None:
    assert index_count_args("idx", cluster=False) == ["FT.INFO", "idx"]
    assert index_count_args("idx", cluster=True) == ["FT.INFO", "idx", "PRIMARY"]  # the primaries' sum


def _row(names_values: list[tuple[Any, Any]]) -> list[Any]:
    return [x for pair in names_values for x in pair]


@pytest.mark.parametrize("k", [0, 1, 3, 10])
def test_nearest_reply_is_nearest_of_the_parsed_reply(k: int) -> None:
    # The positional reader and the dict way agree hit for hit: keys, fields, distances,
    # order, and the total; rows with a missing, short or repeated vector, a key without
    # fields, and bytes or str names mixed.
    from betterdb_memory.core.scope_scan import nearest_reply

    rng = np.random.default_rng(3)
    q = rng.normal(size=4).astype(np.float32)
    reply: list[Any] = [9]
    for i in range(7):
        v = _blob(list(map(float, rng.normal(size=4))))
        reply += [
            f"m:{i}".encode(),
            _row([(b"content", f"c{i}".encode()), (VECTOR_FIELD.encode(), v), (b"importance", b"0.5")]),
        ]
    reply += [b"m:nofields"]
    reply += [b"m:short", _row([(b"content", b"s"), (VECTOR_FIELD.encode(), _blob([1.0, 0.0]))])]
    reply += [b"m:none", _row([(b"content", b"n")])]
    reply += ["m:str", _row([("content", "t"), (VECTOR_FIELD, bytearray(_blob([1.0, 0.0, 0.0, 0.0])))])]
    twice = _row(
        [
            (VECTOR_FIELD.encode(), _blob([9.0, 9.0, 9.0, 9.0])),
            (b"content", b"d"),
            (VECTOR_FIELD.encode(), _blob([0.0, 1.0, 0.0, 0.0])),
        ]
    )
    reply += [b"m:twice", twice]
    total, got = nearest_reply([*reply], q, k, limit=100)
    parsed = parse_search_reply([*reply])
    want = nearest(parsed.hits, q, k)
    assert total == max(parsed.total, len(parsed.hits)) == 12
    assert got is not None
    assert [(h.key, h.fields) for h in got] == [(h.key, h.fields) for h in want]
    assert len(got) == min(k, 9)


def test_nearest_reply_above_its_limit_builds_nothing_and_other_shapes_go_the_dict_way() -> None:
    from betterdb_memory.core.scope_scan import nearest_reply

    q = np.asarray([1.0, 0.0], np.float32)
    rows = [
        b"m:0",
        [b"content", b"a", VECTOR_FIELD.encode(), _blob([1.0, 0.0])],
        b"m:1",
        [b"content", b"b", VECTOR_FIELD.encode(), _blob([0.0, 1.0])],
    ]
    assert nearest_reply([5, *rows], q, 2, limit=4) == (5, None)  # the engine's total says more
    assert nearest_reply([1, *rows], q, 2, limit=1) == (2, None)  # more rows than the total said
    total, got = nearest_reply([2, *rows], q, 1, limit=2)
    assert (
        total == 2
        and got is not None
        and [(h.key, h.fields) for h in got] == [("m:0", {"content": b"a", SCORE_ALIAS: 0.0})]
    )
    resp3 = {
        b"total_results": 2,
        b"results": [
            {
                b"id": b"m:0",
                b"extra_attributes": {b"content": b"a", VECTOR_FIELD.encode(): _blob([0.0, 1.0])},
            },
            {
                b"id": b"m:1",
                b"extra_attributes": {b"content": b"b", VECTOR_FIELD.encode(): _blob([1.0, 0.0])},
            },
        ],
    }
    total, got = nearest_reply(resp3, q, 1, limit=10)
    assert total == 2 and got is not None and [h.key for h in got] == ["m:1"]
    assert nearest_reply([0], q, 3, limit=10) == (0, [])


def test_nearest_reply_with_an_exact_check_applies_it_before_the_cut() -> None:
    from betterdb_memory.core.scope_scan import nearest_reply

    q = np.asarray([1.0, 0.0], np.float32)
    reply = [3]
    for i, (v, thread) in enumerate([([1.0, 0.0], b"T"), ([0.9, 0.1], b"t"), ([0.0, 1.0], b"t")]):
        reply += [f"m:{i}".encode(), [b"threadId", thread, VECTOR_FIELD.encode(), _blob(v)]]
    total, got = nearest_reply(reply, q, 2, limit=10, keep=lambda f: f.get("threadId") != b"T")
    assert total == 3 and got is not None and [h.key for h in got] == ["m:1", "m:2"]
