"""``core.scope_scan``: the scan's query, the exact top k, the size classes learned from replies."""

from __future__ import annotations

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
    SizeClasses,
    count_args,
    filter_key,
    nearest,
    scan_args,
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
    assert not sizes.needs_count("b", 4.9) and sizes.needs_count("b", 5.0)
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
