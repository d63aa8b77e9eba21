"""core.history_mark: the meta field that says whether a store may hold past versions."""

from __future__ import annotations

import pytest

from betterdb_memory.core.history_mark import FIELD_HISTORY, mark, may_hold, read, settle_steps

META = "s:__mem_meta"


def test_commands_name_the_meta_hash_field() -> None:
    assert FIELD_HISTORY == "history"
    assert mark(META) == ("HSET", META, "history", "1")
    assert read(META) == ("HGET", META, "history")


@pytest.mark.parametrize(
    ("value", "held"),
    [(b"1", True), ("1", True), (b"0", False), ("0", False), (None, None), (b"", None), (b"yes", None)],
)
def test_a_read_reply_is_true_false_or_unknown(value: object, held: bool | None) -> None:
    assert may_hold(value) is held


def test_opening_a_store_marks_it_from_its_history_index() -> None:
    """Documents there: "1" (overwrites a "0"); none and built: "0" only if unset; building: nothing."""
    assert settle_steps(META, num_docs=3, ready=False) == [("HSET", META, "history", "1")]
    assert settle_steps(META, num_docs=3, ready=True) == [("HSET", META, "history", "1")]
    assert settle_steps(META, num_docs=0, ready=True) == [("HSETNX", META, "history", "0")]
    assert settle_steps(META, num_docs=0, ready=False) == []
