"""core.text_query: the hybrid recall's full-text FT.SEARCH arguments, its budget, and how its replies failed."""

from __future__ import annotations

import pytest

from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.replies import parse_search_reply
from betterdb_memory.core.text_query import (
    DEGRADED_REASONS,
    TEXT_TIMEOUT_MS,
    ScopesReadWhole,
    client_bound_seconds,
    escape_text_term,
    is_timeout_message,
    reply_warning,
    text_search_args,
)


def test_text_search_args_repeat_the_filter_in_every_branch_on_redisearch() -> None:
    flt = MemoryFilter(scope=Scope(thread_id="t-1"))
    [args] = text_search_args(
        "n:mem:idx", ["lisbon", "priya"], flt, per_word=False, return_fields=["content"]
    )
    assert args == [
        "FT.SEARCH", "n:mem:idx",
        "(@content:lisbon @threadId:{t\\-1})|(@content:priya @threadId:{t\\-1})",
        "SCORER", "BM25STD", "RETURN", "1", "content", "LIMIT", "0", "50", "DIALECT", "2",
    ]  # fmt: skip
    assert text_search_args("i", [], flt, per_word=False, return_fields=["content"]) == []


def test_text_search_args_one_query_per_word_on_valkey_search() -> None:
    out = text_search_args(
        "i", ["a1", "b-2"], MemoryFilter(), per_word=True, return_fields=["content", "vector"], limit=20
    )
    assert [a[2] for a in out] == ["(@content:a1)", "(@content:b\\-2)"]
    assert all(a[3:] == ["RETURN", "2", "content", "vector", "LIMIT", "0", "20", "DIALECT", "2"] for a in out)
    assert all("SCORER" not in a for a in out)  # valkey-search has no scorer


@pytest.mark.parametrize("per_word", [True, False])
def test_text_search_args_carry_the_budget_as_timeout_before_the_dialect(per_word: bool) -> None:
    """TIMEOUT is an FT.SEARCH option on RediSearch 2.10 and on valkey-search >= 1.0: one per query."""
    out = text_search_args(
        "i", ["a", "b"], MemoryFilter(), per_word=per_word, return_fields=["content"], timeout_ms=250
    )
    for args in out:
        assert args[-4:] == ["TIMEOUT", "250", "DIALECT", "2"]
        assert args.count("TIMEOUT") == 1
    assert len(out) == (2 if per_word else 1)


def test_escape_text_term_escapes_everything_but_letters_and_digits() -> None:
    assert escape_text_term("o'neil") == "o\\'neil"
    assert escape_text_term("café2") == "café2"
    assert escape_text_term("a|b)@c") == "a\\|b\\)\\@c"


def test_the_client_waits_longer_than_the_server_budget() -> None:
    assert client_bound_seconds(TEXT_TIMEOUT_MS) > TEXT_TIMEOUT_MS / 1000
    assert client_bound_seconds(10) == pytest.approx(0.11)
    assert client_bound_seconds(1000) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("text", "timeout"),
    [
        ("Search operation cancelled due to timeout", True),  # valkey-search 1.2.1 (seen on the cluster)
        ("Timeout limit was reached", True),  # RediSearch, ON_TIMEOUT FAIL
        ("recall: Search operation cancelled due to timeout", True),  # as the library's ServerError words it
        ("Index with name 'x' not found in database 0", False),
        ("Syntax error at offset 3 near foo", False),
    ],
)
def test_timeout_messages_of_both_engines(text: str, timeout: bool) -> None:
    assert is_timeout_message(text) is timeout


def test_a_redisearch_resp3_partial_reply_carries_its_warning() -> None:
    """RediSearch under RESP3 with ON_TIMEOUT RETURN: the hits found so far and a ``warning`` list."""
    partial = {
        b"attributes": [],
        b"warning": [b"Timeout limit was reached"],
        b"total_results": 1,
        b"format": b"STRING",
        b"results": [{b"id": b"n:mem:1", b"extra_attributes": {b"content": b"x"}, b"values": []}],
    }
    assert reply_warning(partial) == "Timeout limit was reached"
    assert is_timeout_message(reply_warning(partial) or "")
    assert [h.key for h in parse_search_reply(partial).hits] == ["n:mem:1"]  # the partial hits stay usable
    assert reply_warning({"warning": [], "total_results": 0, "results": []}) is None
    assert reply_warning({"warning": "Timeout limit was reached"}) == "Timeout limit was reached"


def test_resp2_replies_carry_no_warning() -> None:
    """RESP2 (both engines) and valkey-search's replies: nothing marks a partial answer."""
    assert reply_warning([1, b"n:mem:1", [b"content", b"x"]]) is None
    assert reply_warning([0]) is None
    assert reply_warning(None) is None


def test_degraded_reasons_are_a_small_fixed_set() -> None:
    assert frozenset({"timeout", "error", "partial"}) == DEGRADED_REASONS


def test_scopes_read_whole_remember_a_short_knn_until_a_full_one() -> None:
    whole = ScopesReadWhole(capacity=2)
    whole.note("@threadId:{t1}", 7, 50)
    assert whole.read_whole("@threadId:{t1}", 50) and whole.read_whole("@threadId:{t1}", 7)
    assert not whole.read_whole("@threadId:{t1}", 6)  # a smaller KNN may leave one out
    assert not whole.read_whole("@threadId:{t2}", 50)  # never read
    whole.note("@threadId:{t1}", 50, 50)  # full: the scope may hold more
    assert not whole.read_whole("@threadId:{t1}", 50)
    whole.note("", 0, 50)  # no filter: never noted
    assert not whole.read_whole("", 50)
    for t in ("a", "b", "c"):
        whole.note(t, 1, 50)
    assert not whole.read_whole("a", 50) and whole.read_whole("b", 50) and whole.read_whole("c", 50)
