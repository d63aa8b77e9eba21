"""FT.SEARCH reply parsing on real replies of both engines, both protocols, bytes and str."""

from __future__ import annotations

import math
from typing import Any

import pytest

from betterdb_memory.core.codec import as_text
from betterdb_memory.core.replies import SearchHit, SearchResult, parse_search_reply
from tests.unit.test_core_fixtures import CAPTURES, KNN_REPLIES, REDISEARCH, VALKEY_SEARCH, error_text, reply

MODES = pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])

# Scores differ between engines around the 7th significant digit (difference 5).
REL = 1e-6


def _parsed(capture_name: str, name: str, *, text: bool, nocontent: bool = False) -> SearchResult:
    return parse_search_reply(reply(capture_name, name, text=text), nocontent=nocontent)


def _scores(result: SearchResult, field: str = "score") -> dict[str, float]:
    return {hit.key: float(as_text(hit.fields[field])) for hit in result.hits}


def _ok(name: str) -> list[str]:
    """Captures where the query ran (some forms are errors on one engine)."""
    return [c for c in CAPTURES if error_text(c, name) is None]


KNN_WITH_SCORE = [n for n in KNN_REPLIES if n != "knn_pure_nocontent"]


@MODES
@pytest.mark.parametrize("name", [n for n in KNN_WITH_SCORE if n != "knn_limit"])
def test_knn_reply_gives_same_keys_and_scores_on_every_engine(name: str, text: bool) -> None:
    """Same keys and, by name, the same score (within 1e-6) whatever the engine, protocol or field order."""
    results = {c: _parsed(c, name, text=text) for c in _ok(name)}
    assert len(results) >= 2
    first = next(iter(results.values()))
    for result in results.values():
        assert result.total == first.total == len(result.hits)
        assert all(isinstance(hit.key, str) for hit in result.hits)
        got, want = _scores(result), _scores(first)
        assert got.keys() == want.keys()
        for key, score in got.items():
            assert score == pytest.approx(want[key], rel=REL)


@MODES
def test_scores_of_one_document_agree_across_every_knn_reply(text: bool) -> None:
    """One query vector: a document's distance is the same in every reply of every capture."""
    seen: dict[str, float] = {}
    for name in KNN_WITH_SCORE:
        for capture_name in _ok(name):
            for key, score in _scores(_parsed(capture_name, name, text=text)).items():
                assert score == pytest.approx(seen.setdefault(key, score), rel=REL), (capture_name, name, key)
    assert len(seen) >= 8


@MODES
@pytest.mark.parametrize("capture_name", CAPTURES)
def test_returned_fields_are_read_by_name(capture_name: str, text: bool) -> None:
    """RETURN 2 score imp: both fields by name, values bytes or str as the client decodes them."""
    result = _parsed(capture_name, "knn_pure_return", text=text)
    assert {hit.key: set(hit.fields) for hit in result.hits} == {
        k: {"score", "imp"} for k in ("m:4", "m:8", "m:17")
    }
    imp = {hit.key: hit.fields["imp"] for hit in result.hits}
    enc = (lambda s: s) if text else str.encode
    assert imp == {"m:4": enc("0.2"), "m:8": enc("0.4"), "m:17": enc("0.85")}


def _without_score(hit: SearchHit) -> dict[str, Any]:
    return {k: v for k, v in hit.fields.items() if k != "score"}


@MODES
def test_full_documents_parse_identically_whatever_the_field_order(text: bool) -> None:
    """No RETURN: RediSearch sends score, vec, thread, ...; valkey another order per protocol. Same dicts."""
    parsed = {c: {h.key: h for h in _parsed(c, "knn_pure_full", text=text).hits} for c in CAPTURES}
    reference = parsed[CAPTURES[0]]
    assert set(reference) == {"m:4", "m:17"}
    for hits in parsed.values():
        assert hits.keys() == reference.keys()
        for key, hit in hits.items():
            assert _without_score(hit) == _without_score(reference[key])
    doc = reference["m:4"].fields
    assert set(doc) == {"score", "vec", "thread", "imp", "created", "content"}
    assert isinstance(doc["vec"], bytes) and len(doc["vec"]) == 32  # binary stays bytes in both modes
    assert as_text(doc["thread"]) == "t{2}|x"


def test_field_order_in_the_raw_replies_really_differs() -> None:
    """Guard for the test above: the captured field orders are not all the same."""
    orders = set()
    for c in ("redisearch-2.10.5/resp2", *VALKEY_SEARCH):
        first_doc = reply(c, "knn_pure_full", text=True)[2]
        orders.add(tuple(first_doc[::2]))
    assert len(orders) == 3


def test_score_is_found_by_name_even_when_last() -> None:
    """valkey-search follows RETURN order: the score may come after the other fields."""
    result = parse_search_reply([1, b"m:4", [b"imp", b"0.2", b"score", b"0.478"]])
    assert result == SearchResult(1, [SearchHit("m:4", {"imp": b"0.2", "score": b"0.478"})])


@MODES
@pytest.mark.parametrize("capture_name", CAPTURES)
def test_nocontent_reply_gives_keys_only(capture_name: str, text: bool) -> None:
    """NOCONTENT: RESP2 ``[total, id, id, ...]`` or the RESP3 map; ids only, str keys."""
    result = _parsed(capture_name, "knn_pure_nocontent", text=text, nocontent=True)
    assert result.total == 3
    assert {h.key for h in result.hits} == {"m:4", "m:8", "m:17"}
    assert all(h.fields == {} for h in result.hits)
    # Parsing without the flag still gives ids with no fields.
    assert parse_search_reply(reply(capture_name, "knn_pure_nocontent", text=text)) == result


@MODES
@pytest.mark.parametrize("capture_name", REDISEARCH[1:])
def test_redisearch_resp3_map_reply(capture_name: str, text: bool) -> None:
    """RediSearch under RESP3: ``total_results`` and ``results[].extra_attributes`` (bytes or str keys)."""
    raw = reply(capture_name, "knn_tag_filter", text=text)
    assert isinstance(raw, dict)
    result = parse_search_reply(raw)
    assert result.total == 3
    assert _scores(result) == pytest.approx(
        {"m:3": 0.765409171581, "m:15": 0.935824751854, "m:17": 0.571405112743}
    )


@MODES
@pytest.mark.parametrize("capture_name", VALKEY_SEARCH)
def test_valkey_search_returns_knn_hits_sorted_by_distance(capture_name: str, text: bool) -> None:
    """valkey-search sorts KNN hits by distance (RediSearch 2.10 does not without SORTBY)."""
    for name in KNN_WITH_SCORE:
        if error_text(capture_name, name) is None:
            scores = [float(as_text(h.fields["score"])) for h in _parsed(capture_name, name, text=text).hits]
            assert scores == sorted(scores), name


@MODES
@pytest.mark.parametrize("capture_name", CAPTURES)
def test_sortby_score_reply_is_sorted(capture_name: str, text: bool) -> None:
    """SORTBY score: ascending distance on both engines."""
    hits = _parsed(capture_name, "knn_sortby_score", text=text).hits
    assert [h.key for h in hits] == ["m:4", "m:17", "m:8"]


@MODES
@pytest.mark.parametrize("capture_name", CAPTURES)
def test_knn_limit_reports_k_as_total_and_one_page_of_hits(capture_name: str, text: bool) -> None:
    """KNN 10 + LIMIT 0 4: total is k, four hits (which four depends on the engine's order)."""
    result = _parsed(capture_name, "knn_limit", text=text)
    assert result.total == 10
    assert len(result.hits) == 4


@MODES
@pytest.mark.parametrize(
    ("name", "redisearch_total", "valkey_total", "hits"),
    [("pure_filter", 10, 11, 0), ("match_all", 20, 21, 3)],
)
@pytest.mark.parametrize("capture_name", CAPTURES)
def test_non_knn_counting_replies(
    capture_name: str, name: str, redisearch_total: int, valkey_total: int, hits: int, text: bool
) -> None:
    """LIMIT 0 0 counts; valkey-search counts m:bad, kept without its bad fields (difference 12)."""
    result = _parsed(capture_name, name, text=text, nocontent=True)
    assert result.total == (redisearch_total if capture_name in REDISEARCH else valkey_total)
    assert len(result.hits) == hits


@MODES
@pytest.mark.parametrize("capture_name", REDISEARCH)
def test_unknown_field_is_an_empty_result_on_redisearch(capture_name: str, text: bool) -> None:
    """RediSearch answers an unknown filter field with zero hits (valkey-search with an error)."""
    assert _parsed(capture_name, "unknown_field", text=text) == SearchResult(0, [])


@pytest.mark.parametrize("value", [None, [], (), b"", 0])
def test_empty_or_odd_reply_is_an_empty_result(value: Any) -> None:
    """No reply shape to read: zero hits rather than an exception."""
    assert parse_search_reply(value) == SearchResult(0, [])


def test_every_knn_score_is_a_finite_distance() -> None:
    """Sanity on the fixtures: cosine distances within 0..2."""
    for name in KNN_WITH_SCORE:
        for c in _ok(name):
            for score in _scores(_parsed(c, name, text=True)).values():
                assert math.isfinite(score) and 0.0 <= score <= 2.0


def test_field_maps_share_their_decoded_names_and_keep_odd_tails_out() -> None:
    reply = [2, b"k:1", [b"a", b"1", b"b", b"2"], b"k:2", [b"a", b"3", b"b", b"4", b"dangling"]]
    hits = parse_search_reply(reply).hits
    assert [h.fields for h in hits] == [{"a": b"1", "b": b"2"}, {"a": b"3", "b": b"4"}]
    assert parse_search_reply([1, b"k", [b"a", b"1", b"a", b"2"]]).hits[0].fields == {"a": b"2"}
