"""Validity clauses for the engine and recency's anchor (core/validity.py)."""

from __future__ import annotations

import pytest

from betterdb_memory.core.validity import (
    history_valid_at,
    in_time,
    keep_from_ms,
    last_seen_ms,
    time_clause,
    valid_at,
    valid_from_of,
    window,
)


def test_valid_at_falls_back_to_created_at_for_documents_without_valid_from() -> None:
    """De Morgan's form: no negation below a union (RediSearch 2.10.5 loses matches there once ANDed)."""
    assert valid_at(1700) == (
        "-(-@valid_from:[-inf 1700] -(@created_at:[-inf 1700] -@valid_from:[-inf +inf]))"
    )


def test_history_valid_at_is_half_open_with_the_created_at_fallback() -> None:
    """A fact retired before time support has no valid_from: it falls back to created_at there too."""
    assert history_valid_at(1700) == (
        "-(-@valid_from:[-inf 1700] -(@created_at:[-inf 1700] -@valid_from:[-inf +inf]))"
        " @valid_until:[(1700 +inf]"
    )


def test_time_clause_joins_window_and_instant() -> None:
    assert time_clause(None, None, None) == ""
    assert time_clause(10, 20, None) == window(10, 20)
    assert time_clause(None, None, 15) == valid_at(15)
    assert time_clause(10, None, 15, history=True) == f"{window(10, None)} {history_valid_at(15)}"
    assert time_clause(10, 20, None, history=True) == window(10, 20)


@pytest.mark.parametrize(
    ("valid_from", "created_at", "valid_until", "kw", "expected"),
    [
        (None, 5, None, {}, True),
        (None, 5, None, {"since": 5}, True),
        (None, 5, None, {"since": 6}, False),
        (3, 50, None, {"until": 4}, True),
        (3, 50, None, {"until": 3}, False),  # half-open
        (10, 1, None, {"as_of": 9}, False),  # future-dated at 9
        (10, 1, None, {"as_of": 10}, True),
        (10, 1, 20, {"as_of": 19}, True),
        (10, 1, 20, {"as_of": 20}, False),  # superseded at 20
    ],
)
def test_in_time(
    valid_from: int | None, created_at: int, valid_until: int | None, kw: dict[str, int], expected: bool
) -> None:
    assert in_time(valid_from, created_at, valid_until, **kw) is expected


@pytest.mark.parametrize(
    ("since", "until", "clause"),
    [
        (None, None, ""),
        (10, None, "-(-@valid_from:[10 +inf] -(@created_at:[10 +inf] -@valid_from:[-inf +inf]))"),
        (None, 20, "-(-@valid_from:[-inf (20] -(@created_at:[-inf (20] -@valid_from:[-inf +inf]))"),
        (10, 20, "-(-@valid_from:[10 (20] -(@created_at:[10 (20] -@valid_from:[-inf +inf]))"),
        (-5, 0, "-(-@valid_from:[-5 (0] -(@created_at:[-5 (0] -@valid_from:[-inf +inf]))"),
        (7, 7, "-@created_at:[-inf +inf]"),  # empty: valkey-search rejects the range [7 (7]
    ],
)
def test_window(since: int | None, until: int | None, clause: str) -> None:
    assert window(since, until) == clause
    assert "|" not in clause


def test_valid_from_of() -> None:
    assert valid_from_of(None, 5) == 5
    assert valid_from_of(3, 5) == 3


def test_last_seen_without_valid_from_is_the_seed_rule() -> None:
    assert last_seen_ms(None, created_at=100, last_accessed_at=100, access_count=0) == 100
    assert last_seen_ms(None, created_at=100, last_accessed_at=300, access_count=2) == 300
    assert last_seen_ms(None, created_at=100, last_accessed_at=300, access_count=0) == 300


def test_last_seen_counts_from_the_event_until_recalled() -> None:
    # written at 1000 about an event at 10: old from the start
    assert last_seen_ms(10, created_at=1000, last_accessed_at=1000, access_count=0) == 10
    # recalled at 2000: reinforcement keeps its meaning
    assert last_seen_ms(10, created_at=1000, last_accessed_at=2000, access_count=1) == 2000
    # a plan dated in the future counts from its date, later than any access so far
    assert last_seen_ms(5000, created_at=1000, last_accessed_at=2000, access_count=1) == 5000


def test_the_keep_score_of_an_event_counts_as_its_recency_does() -> None:
    for args in [(10, 1000, 1000, 0), (10, 1000, 2000, 1), (5000, 1000, 2000, 1), (None, 100, 300, 0)]:
        assert keep_from_ms(*args, state=False) == last_seen_ms(*args)


def test_the_keep_score_of_a_subject_version_counts_from_its_write_at_the_earliest() -> None:
    # "lives in Lisbon since 2019", written at 1000: as fresh as its write, not as its date
    assert keep_from_ms(10, created_at=1000, last_accessed_at=1000, access_count=0, state=True) == 1000
    # then reinforced like any other memory
    assert keep_from_ms(10, created_at=1000, last_accessed_at=2000, access_count=1, state=True) == 2000
    # dated ahead (a plan): from its date, as for an event
    assert keep_from_ms(5000, created_at=1000, last_accessed_at=1000, access_count=0, state=True) == 5000
    assert keep_from_ms(5000, created_at=1000, last_accessed_at=2000, access_count=1, state=True) == 5000
    # on second floats too
    assert keep_from_ms(0.01, created_at=1.0, last_accessed_at=1.0, access_count=0, state=True) == 1.0
