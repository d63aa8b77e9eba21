"""The filter language's query shapes against real replies (``flt_*`` in tests/fixtures/search_replies.json).

``scripts/capture_search_replies.py --filters`` wrote a handful of documents the way the
write path writes them (declared ``meta_priority`` / ``meta_project`` and ``present`` on
some, ``valid_from`` on some, neither on others), then sent filter-only queries built by
``filter_query.compile_where`` + ``standalone_query`` (a count and a NOCONTENT page each),
a hybrid KNN query with a ``where`` and the history index's ``as_of`` clause, on the
embedded engine and on valkey-search 1.2.1, over RESP2 and RESP3. Each reply is decoded
as the library does (``replies.parse_search_reply``) and must hold exactly the documents
``filter_eval.evaluate`` (the client-side check) picks from the captured documents: the
test fails when the parser, the compiler or the evaluator disagrees with a real engine.
The captured query text must also be what the compiler writes today (else: capture again).
"""

from __future__ import annotations

from typing import Any

import pytest

from betterdb_memory.core.codec import as_text
from betterdb_memory.core.dialect import capabilities_for
from betterdb_memory.core.filter_eval import evaluate
from betterdb_memory.core.filter_fields import FilterSchema, MetadataFields
from betterdb_memory.core.filter_query import compile_where, hybrid_query, standalone_query
from betterdb_memory.core.filters import parse_where
from betterdb_memory.core.replies import parse_search_reply
from betterdb_memory.core.validity import history_valid_at, in_time

from .test_core_fixtures import MEM_CAPTURES, capture, reply

FILTERS = ("gte", "in", "ne", "exists_false", "or_negation", "valid_from_range")
DOCS = tuple(f"flt_doc_{i}" for i in range(1, 9))
FLT_REPLIES = (
    "flt_hello",
    "flt_create",
    "flt_hist_create",
    *(f"flt_{f}_{kind}" for f in FILTERS for kind in ("count", "page")),
    "flt_knn_where",
    "flt_hist_as_of",
    *DOCS,
)
SCHEMA = FilterSchema(metadata=MetadataFields.of({"priority": "numeric", "project": "tag"}), valid_from=True)
CASES = [(c, text) for c in MEM_CAPTURES for text in (False, True)]


def _caps(capture_name: str) -> Any:
    if capture_name.startswith("valkey-search"):
        return capabilities_for("valkey-search", (1, 2, 1))
    return capabilities_for("redisearch", (2, 10, 5))


def _documents(capture_name: str, text: bool) -> dict[str, dict[str, Any]]:
    """The captured documents (HGETALL replies, decoded as the client would), by key."""
    out = {}
    for name in DOCS:
        got = reply(capture_name, name, text=text)
        fields = got if isinstance(got, dict) else dict(zip(got[::2], got[1::2], strict=True))
        out[f"cap:flt:{name.rsplit('_', 1)[1]}"] = {as_text(k): v for k, v in fields.items()}
    return out


def _expected(capture_name: str, text: bool, entry: dict[str, Any]) -> set[str]:
    node = parse_where(entry["where"], SCHEMA)
    docs = _documents(capture_name, text)
    return {k for k, f in docs.items() if as_text(f["namespace"]) == entry["scope"] and evaluate(node, f)}


def _entry(capture_name: str, name: str) -> dict[str, Any]:
    entry: dict[str, Any] = capture(capture_name)["replies"][name]
    return entry


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
def test_every_capture_holds_the_filter_replies(capture_name: str) -> None:
    """The same ``flt_*`` replies in each memory-schema capture; the index and documents were made."""
    assert {r for r in capture(capture_name)["replies"] if r.startswith("flt_")} == set(FLT_REPLIES)
    assert reply(capture_name, "flt_create", text=True) == "OK"
    assert reply(capture_name, "flt_hist_create", text=True) == "OK"
    docs = _documents(capture_name, True)
    assert [
        sorted({"meta_priority", "meta_project", "present", "valid_from"} & set(f)) for f in docs.values()
    ] == [
        ["meta_priority", "meta_project", "present", "valid_from"],
        ["meta_priority", "meta_project", "present"],
        ["meta_priority", "present"],
        ["meta_project", "present"],
        [],
        ["meta_priority", "meta_project", "present", "valid_from"],
        ["meta_priority", "meta_project", "present", "valid_from"],
        ["valid_from"],
    ]


@pytest.mark.parametrize("capture_name", MEM_CAPTURES)
@pytest.mark.parametrize("flt", FILTERS)
def test_captured_query_is_what_the_compiler_writes(capture_name: str, flt: str) -> None:
    """The query text sent is today's ``compile_where`` + ``standalone_query`` (a compiler change: capture again)."""
    caps = _caps(capture_name)
    for kind in ("count", "page"):
        entry = _entry(capture_name, f"flt_{flt}_{kind}")
        where = compile_where(parse_where(entry["where"], SCHEMA), caps)
        assert entry["command"][2] == standalone_query(caps, f"@namespace:{{{entry['scope']}}}", where)


@pytest.mark.parametrize(("capture_name", "text"), CASES)
@pytest.mark.parametrize("flt", FILTERS)
def test_filter_replies_hold_what_the_client_check_picks(capture_name: str, text: bool, flt: str) -> None:
    """Count (LIMIT 0 0) and page (NOCONTENT): total and ids equal ``evaluate`` over the captured documents."""
    expected = _expected(capture_name, text, _entry(capture_name, f"flt_{flt}_page"))
    assert expected, "each filter matches some documents"
    count = parse_search_reply(reply(capture_name, f"flt_{flt}_count", text=text), nocontent=True)
    assert (count.total, count.hits) == (len(expected), [])
    page = parse_search_reply(reply(capture_name, f"flt_{flt}_page", text=text), nocontent=True)
    assert page.total == len(expected)
    assert sorted(h.key for h in page.hits) == sorted(expected)


def test_the_filters_tell_missing_fields_apart() -> None:
    """Sanity of the fixture: ``$ne`` and ``$exists: false`` match documents without the field."""
    docs = _documents(MEM_CAPTURES[0], True)
    missing_project = {
        k for k, f in docs.items() if "meta_project" not in f and as_text(f["namespace"]) == "ns"
    }
    assert missing_project <= _expected(MEM_CAPTURES[0], True, _entry(MEM_CAPTURES[0], "flt_ne_page"))
    assert _expected(MEM_CAPTURES[0], True, _entry(MEM_CAPTURES[0], "flt_exists_false_page")) == {
        "cap:flt:4",
        "cap:flt:5",
    }


@pytest.mark.parametrize(("capture_name", "text"), CASES)
def test_hybrid_knn_with_where_returns_only_matching_documents(capture_name: str, text: bool) -> None:
    """``hybrid_query``: k hits, each one the filter matches, with its distance."""
    entry = _entry(capture_name, "flt_knn_where")
    caps = _caps(capture_name)
    where = compile_where(parse_where(entry["where"], SCHEMA), caps)
    knn = hybrid_query("KNN 3 @vector $vec AS __dist", f"@namespace:{{{entry['scope']}}}", where)
    assert entry["command"][2] == knn
    expected = _expected(capture_name, text, entry)
    result = parse_search_reply(reply(capture_name, "flt_knn_where", text=text))
    assert len(result.hits) == min(entry["k"], len(expected)) == 3
    assert {h.key for h in result.hits} <= expected
    assert all(float(h.fields["__dist"]) >= -1e-6 for h in result.hits)


@pytest.mark.parametrize(("capture_name", "text"), CASES)
def test_history_as_of_holds_the_versions_current_then(capture_name: str, text: bool) -> None:
    """``validity.history_valid_at``: exactly the versions ``in_time`` says were current at ``as_of``."""
    entry = _entry(capture_name, "flt_hist_as_of")
    as_of = entry["as_of"]
    assert entry["command"][2] == standalone_query(
        _caps(capture_name), "@namespace:{ns}", history_valid_at(as_of)
    )
    expected = {
        f"cap:flth:{i}"
        for i, (valid_from, created_at, valid_until) in enumerate(entry["documents"], start=1)
        if in_time(valid_from, created_at, valid_until, as_of=as_of)
    }
    result = parse_search_reply(reply(capture_name, "flt_hist_as_of", text=text), nocontent=True)
    assert result.total == len(expected) == 2
    assert {h.key for h in result.hits} == expected
