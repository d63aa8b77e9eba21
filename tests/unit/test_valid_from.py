"""``valid_from`` on the write path (pure): checked arguments, the stored field, the read item, recency.

Recency counts from ``valid_from`` until a memory is recalled (``validity.last_seen_ms``);
a memory written without one must score exactly as the seed contract says:
``0.6 * similarity + 0.25 * 0.5 ** (age / half_life) + 0.15 * importance`` with age from
``max(created_at, last_accessed_at)``.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.models import MemoryItem, item_from_fields, ranking_item
from betterdb_memory.core.ranking import rank
from betterdb_memory.core.record import NewMemory, Previous, encode_record
from betterdb_memory.core.requests import new_memories, new_memory
from betterdb_memory.core.scoring import DEFAULT_HALF_LIFE_SECONDS, DEFAULT_WEIGHTS, composite, keep_score
from betterdb_memory.core.validity import last_seen_ms
from betterdb_memory.errors import ValidationError

VEC = np.array([0.6, 0.8, 0.0], dtype=np.float32)
NOW = 1_700_000_000_123
HL = DEFAULT_HALF_LIFE_SECONDS
MAY_2024 = 1_714_521_600_000  # 2024-05-01T00:00:00Z
LATER = MAY_2024 + 200 * 86_400_000  # a write in November 2024


def _pairs(fields: list[object]) -> dict[str, object]:
    return dict(zip(fields[0::2], fields[1::2], strict=True))  # type: ignore[arg-type]


# -- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        MAY_2024,
        "2024-05-01",
        "2024-05",
        "2024-05-01T00:00:00Z",
        "2024-05-01T02:00:00+02:00",
        datetime(2024, 5, 1),  # naive: UTC
        datetime(2024, 5, 1, 2, tzinfo=timezone(timedelta(hours=2))),
        date(2024, 5, 1),
    ],
)
def test_every_accepted_form_is_epoch_ms(given: object) -> None:
    assert new_memory("x", dimensions=0, valid_from=given).valid_from == MAY_2024
    (m,) = new_memories([{"content": "x", "valid_from": given}], dimensions=0)
    assert m.valid_from == MAY_2024


def test_left_out_it_is_none() -> None:
    assert new_memory("x", dimensions=0).valid_from is None
    assert new_memories(["x"], dimensions=0)[0].valid_from is None


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (True, "validation.type"),
        (1.7e12, "validation.type"),
        ("last May", "validation.time_format"),
        ("1899-12-31", "validation.range"),
        (datetime(1899, 12, 31, tzinfo=UTC), "validation.range"),
        (-2_208_988_800_001, "validation.range"),  # one ms before 1900
    ],
)
def test_bad_values_are_typed_errors_naming_the_argument(bad: object, code: str) -> None:
    with pytest.raises(ValidationError) as err:
        new_memory("x", dimensions=0, valid_from=bad)
    assert err.value.code == code and err.value.details["argument"] == "valid_from"
    with pytest.raises(ValidationError) as err:
        new_memories(["fine", {"content": "x", "valid_from": bad}], dimensions=0)
    assert err.value.code == code and err.value.details["item"] == 1


# -- the stored record -----------------------------------------------------------------------


def test_without_it_nothing_is_stored_and_keep_is_unchanged() -> None:
    fields, _ = encode_record(NewMemory("hello"), VEC, now_ms=NOW, half_life_seconds=HL)
    f = _pairs(fields)
    assert "valid_from" not in f
    assert float(f["keep"]) == keep_score(NOW / 1000, 0.5, HL)  # type: ignore[arg-type]


def test_with_it_the_field_is_stored_and_keep_counts_from_it() -> None:
    fields, _ = encode_record(NewMemory("hello", valid_from=MAY_2024), VEC, now_ms=NOW, half_life_seconds=HL)
    f = _pairs(fields)
    assert f["valid_from"] == str(MAY_2024) and f["created_at"] == str(NOW)
    assert fields.index("valid_from") > fields.index("access_count")  # after the reference's fields
    assert float(f["keep"]) == keep_score(MAY_2024 / 1000, 0.5, HL)  # type: ignore[arg-type]
    # a plan dated ahead keeps its date too
    ahead = NOW + 86_400_000
    fields, _ = encode_record(NewMemory("plan", valid_from=ahead), VEC, now_ms=NOW, half_life_seconds=HL)
    assert float(_pairs(fields)["keep"]) == keep_score(ahead / 1000, 0.5, HL)  # type: ignore[arg-type]


def test_an_upsert_keeps_the_replaced_valid_from_unless_given() -> None:
    prev = Previous(created_at=NOW - 10, last_accessed_at=NOW - 10, access_count=0, valid_from=MAY_2024)
    fields, _ = encode_record(NewMemory("edited"), VEC, now_ms=NOW, half_life_seconds=HL, previous=prev)
    assert _pairs(fields)["valid_from"] == str(MAY_2024)
    fields, _ = encode_record(
        NewMemory("edited", valid_from=MAY_2024 + 1), VEC, now_ms=NOW, half_life_seconds=HL, previous=prev
    )
    assert _pairs(fields)["valid_from"] == str(MAY_2024 + 1)


# -- the read item ---------------------------------------------------------------------------


def test_item_reads_valid_from_or_its_created_at() -> None:
    base = {"content": "c", "created_at": str(NOW), "last_accessed_at": str(NOW), "access_count": "0"}
    plain = item_from_fields("a", base)
    assert (plain.valid_from, plain.valid_until) == (NOW, None)
    dated = item_from_fields("b", {**base, "valid_from": str(MAY_2024).encode()})
    assert dated.valid_from == MAY_2024
    assert ranking_item("b", {**base, "valid_from": str(MAY_2024)}).valid_from == MAY_2024
    assert ranking_item("a", {**base, "access_count": "3"}).access_count == 3
    assert MemoryItem("c", "x", 0.5, created_at=7, last_accessed_at=7, access_count=0).valid_from == 7
    assert MemoryItem("c", "x", 0.5, 7, 7, 0, valid_from=-5).valid_from == -5


# -- recency ---------------------------------------------------------------------------------


def test_recall_after_write_counts_as_access_even_without_the_count() -> None:
    # ranking's slim read carries last_accessed_at; a value later than created_at is an access
    assert last_seen_ms(10, created_at=1000, last_accessed_at=2000, access_count=0) == 2000


def _seed_score(distance: float, importance: float, created: int, accessed: int, now: float) -> float:
    """The seed contract's formula, written out independently of the library."""
    similarity = 1 - distance / 2
    age = max(0.0, now - max(created, accessed) / 1000.0)
    recency = 0.5 ** (age / HL)
    return 0.6 * similarity + 0.25 * recency + 0.15 * importance


_ms = st.integers(min_value=0, max_value=4_000_000_000_000)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.floats(0.0, 2.0),
            st.floats(0.0, 1.0),
            _ms,
            _ms,
            st.integers(0, 5),
            st.sampled_from([True, False]),
        ),
        min_size=1,
        max_size=8,
    ),
    now=st.floats(0.0, 4_100_000_000.0),
)
def test_without_valid_from_scores_are_the_seed_formula_bit_for_bit(
    rows: list[tuple[float, float, int, int, int, bool]], now: float
) -> None:
    """Any created / accessed / count (even accessed later with count 0): exactly the seed's float."""
    cands = []
    for i, (d, imp, created, accessed, count, from_fields) in enumerate(rows):
        fields = {"content": "x", "importance": repr(imp), "created_at": str(created),
                  "last_accessed_at": str(accessed), "access_count": str(count)}  # fmt: skip
        it = (
            ranking_item(f"m{i}", fields)
            if from_fields
            else MemoryItem(f"m{i}", "x", imp, created, accessed, count)
        )
        cands.append((it, d))
    hits = rank(cands, k=len(cands), threshold=2.0, weights=DEFAULT_WEIGHTS, half_life_seconds=HL, now=now)
    rows_by_id = {f"m{i}": r for i, r in enumerate(rows)}
    for h in hits:
        d, imp, created, accessed, _, _ = rows_by_id[h.item.id]
        seed = _seed_score(d, imp, created, accessed, now)
        assert h.score == pytest.approx(seed, rel=0, abs=1e-15)
        parts = composite(distance=d, importance=imp, created_at=created / 1000.0,
                          last_accessed_at=accessed / 1000.0, now=now, weights=DEFAULT_WEIGHTS,
                          half_life_seconds=HL)  # fmt: skip
        assert h.score == parts.score  # bit-identical with the library's own composite


def test_seed_formula_fixtures_are_exact() -> None:
    """Fixtures in the seed's order of operations: equal floats, not approximately equal."""
    now = NOW / 1000 + 3 * 86400
    for created, accessed, count in [
        (NOW, NOW, 0),
        (NOW, NOW + 5000, 1),
        (NOW, NOW + 5000, 0),
        (NOW, NOW - 9, 0),
    ]:
        it = MemoryItem("m", "x", 0.7, created, accessed, count)
        (h,) = rank([(it, 0.3)], k=1, threshold=2.0, weights=DEFAULT_WEIGHTS, half_life_seconds=HL, now=now)
        last = max(created / 1000.0, accessed / 1000.0)  # the seed's rule, as this library had it inlined
        expected = 0.6 * (1.0 - 0.3 / 2.0) + 0.25 * float(0.5 ** (max(0.0, now - last) / HL)) + 0.15 * 0.7
        assert h.score == expected


def test_an_old_dated_memory_ranks_below_a_new_dated_one_of_equal_similarity() -> None:
    now = LATER / 1000
    old = MemoryItem(
        "lisbon", "Ada lives in Lisbon", 0.5, LATER, LATER, 0, valid_from=MAY_2024 - 400 * 86_400_000
    )
    new = MemoryItem("berlin", "Ada moved to Berlin", 0.5, LATER, LATER, 0, valid_from=MAY_2024)
    for order in ([(old, 0.4), (new, 0.4)], [(new, 0.4), (old, 0.4)]):
        hits = rank(order, k=2, threshold=2.0, weights=DEFAULT_WEIGHTS, half_life_seconds=HL, now=now)
        assert [h.item.id for h in hits] == ["berlin", "lisbon"]
        assert hits[0].score > hits[1].score
    # the same two written without dates tie on recency (the input order decides)
    plain = [
        (MemoryItem("lisbon", "", 0.5, LATER, LATER, 0), 0.4),
        (MemoryItem("berlin", "", 0.5, LATER, LATER, 0), 0.4),
    ]
    hits = rank(plain, k=2, threshold=2.0, weights=DEFAULT_WEIGHTS, half_life_seconds=HL, now=now)
    assert hits[0].score == hits[1].score


def test_a_recalled_old_memory_counts_from_its_last_access() -> None:
    now = LATER / 1000 + 60
    dated = MemoryItem("m", "x", 0.5, LATER, LATER + 1000, 1, valid_from=MAY_2024)
    (h,) = rank([(dated, 0.0)], k=1, threshold=2.0, weights=DEFAULT_WEIGHTS, half_life_seconds=HL, now=now)
    assert h.score == pytest.approx(0.6 + 0.25 * 0.5 ** ((now - (LATER + 1000) / 1000) / HL) + 0.15 * 0.5)
    assert not math.isclose(h.score, 0.6 + 0.15 * 0.5 + 0.25 * 0.5 ** ((now - MAY_2024 / 1000) / HL))
