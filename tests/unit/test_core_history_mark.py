"""core.history_mark: the meta field that says whether a store may hold past versions, and until when."""

from __future__ import annotations

import pytest

from betterdb_memory.core.history_mark import (
    FIELD_HISTORY,
    HistoryState,
    mark_args,
    needed,
    read,
    settle,
    state,
)

META = "s:__mem_meta"


def test_the_read_names_the_meta_hash_field() -> None:
    assert FIELD_HISTORY == "history"
    assert read(META) == ("HGET", META, "history")


def test_the_mark_s_argument_is_the_bound_or_empty_when_unknown() -> None:
    assert mark_args(1_700_000_000_000) == ["1700000000000"]
    assert mark_args(-2_000_000_000_000) == ["-2000000000000"]  # a version that ended before 1970
    assert mark_args(None) == [""]


@pytest.mark.parametrize(
    ("value", "held"),
    [
        (b"1", HistoryState(True)),
        ("1", HistoryState(True)),
        (b"0", HistoryState(False)),
        ("0", HistoryState(False)),
        (b"u1700000000000", HistoryState(True, 1_700_000_000_000)),
        ("u-5", HistoryState(True, -5)),
        (None, HistoryState(None)),
        (b"", HistoryState(None)),
        (b"yes", HistoryState(None)),
        (b"u", HistoryState(None)),
        (b"uabc", HistoryState(None)),
    ],
)
def test_a_read_reply_is_held_none_or_unknown_with_its_bound(value: object, held: HistoryState) -> None:
    assert state(value) == held


def test_a_window_needs_the_history_index_unless_it_starts_after_every_past_version_ended() -> None:
    bound = HistoryState(True, 1_000)
    assert needed(bound, 999)  # a version may still have been valid at 999
    assert not needed(bound, 1_000)  # valid_until <= 1000 <= start: none overlaps [start, ...)
    assert not needed(bound, 5_000)
    assert needed(bound, None)  # "before 2024": open at the start
    assert needed(HistoryState(True), 5_000)  # "1": bound unknown
    assert needed(HistoryState(None), 5_000)  # absent: unknown
    assert not needed(HistoryState(False), None)  # "0": none at all


def test_opening_a_store_marks_it_from_its_history_index() -> None:
    """Documents there: mark (keeps a writer's bound); none and built: "0" only if unset; building: nothing."""
    assert settle(num_docs=3, ready=False) == "mark"
    assert settle(num_docs=3, ready=True) == "mark"
    assert settle(num_docs=0, ready=True) == "none"
    assert settle(num_docs=0, ready=False) == ""
