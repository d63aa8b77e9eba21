"""apply_config_hash: valid values apply, invalid keep the last good, absent return to default."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from betterdb_memory.core import tunables as lc
from betterdb_memory.core.scoring import Weights
from betterdb_memory.core.tunables import (
    CONFIG_FIELDS,
    ConfigSnapshot,
    MemoryConfigSnapshot,
    Rejection,
    apply_config_hash,
    config_key,
    parse_field,
)
from betterdb_memory.errors import ConfigurationError, ValidationError

DEFAULTS = ConfigSnapshot(
    threshold=0.33,
    weight_similarity=0.6,
    weight_recency=0.25,
    weight_importance=0.15,
    half_life_seconds=604800.0,
    max_items_per_scope=None,
)


def test_every_field_maps_to_a_snapshot_attribute() -> None:
    """The hash field names (the reference's) cover every snapshot attribute exactly once."""
    assert set(lc._ATTRS.values()) == {f.name for f in dataclasses.fields(ConfigSnapshot)}
    assert CONFIG_FIELDS == (
        "recall.threshold",
        "recall.weights.similarity",
        "recall.weights.recency",
        "recall.weights.importance",
        "recall.halfLifeSeconds",
        "maxItemsPerScope",
    )


def test_config_key_convention() -> None:
    """Monitor reads <name>:__mem_config."""
    assert config_key("shop") == "shop:__mem_config"


def test_valid_fields_apply_from_str_or_bytes() -> None:
    """Every valid field is applied; bytes replies (decode_responses=False) work as str ones."""
    raw = {
        b"recall.threshold": b"0.9",
        b"recall.weights.similarity": b"1",
        b"recall.weights.recency": b"0",
        b"recall.weights.importance": b"0.5",
        b"recall.halfLifeSeconds": b"3600",
        b"maxItemsPerScope": b"100",
    }
    snap, rejections = apply_config_hash(raw, defaults=DEFAULTS, last_good=DEFAULTS)
    assert rejections == []
    assert snap == ConfigSnapshot(0.9, 1.0, 0.0, 0.5, 3600.0, 100)
    snap_text, _ = apply_config_hash(
        {k.decode(): v.decode() for k, v in raw.items()}, defaults=DEFAULTS, last_good=DEFAULTS
    )
    assert snap_text == snap


def test_invalid_threshold_keeps_last_good_not_default() -> None:
    """threshold=5 after 0.9 stays 0.9 (the reference fell back to the constructor's 0.33)."""
    last_good, _ = apply_config_hash({"recall.threshold": "0.9"}, defaults=DEFAULTS, last_good=DEFAULTS)
    snap, rejections = apply_config_hash({"recall.threshold": "5"}, defaults=DEFAULTS, last_good=last_good)
    assert snap.threshold == 0.9
    assert rejections == [
        Rejection("recall.threshold", "5", "threshold is a cosine distance and must be within [0, 2]")
    ]


@pytest.mark.parametrize(
    ("field", "value", "attr", "applied"),
    [
        ("recall.threshold", "1.5", "threshold", 1.5),  # a loose distance, valid in the reference
        ("recall.threshold", "2", "threshold", 2.0),
        ("recall.threshold", "0", "threshold", 0.0),
        ("recall.weights.similarity", "3", "weight_similarity", 3.0),
        ("recall.weights.importance", "0", "weight_importance", 0.0),
        ("recall.halfLifeSeconds", "0.5", "half_life_seconds", 0.5),
        ("maxItemsPerScope", "1", "max_items_per_scope", 1),
        ("maxItemsPerScope", "2.7", "max_items_per_scope", 2),  # floored, as the reference does
        ("maxItemsPerScope", "10.0", "max_items_per_scope", 10),
        ("maxItemsPerScope", "1e3", "max_items_per_scope", 1000),
    ],
)
def test_values_in_the_references_ranges_apply(field: str, value: str, attr: str, applied: float) -> None:
    """Every value betterdb-agent-memory applies is applied here, with the same result."""
    snap, rejections = apply_config_hash({field: value}, defaults=DEFAULTS, last_good=DEFAULTS)
    assert rejections == []
    assert getattr(snap, attr) == applied
    if attr == "max_items_per_scope":
        assert isinstance(snap.max_items_per_scope, int)


def test_absent_field_returns_to_default() -> None:
    """Deleting a field undoes the override, even if last good differed."""
    last_good = dataclasses.replace(DEFAULTS, threshold=0.9, max_items_per_scope=10)
    snap, rejections = apply_config_hash({}, defaults=DEFAULTS, last_good=last_good)
    assert snap == DEFAULTS
    assert rejections == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("recall.threshold", "abc"),
        ("recall.threshold", "nan"),
        ("recall.threshold", "inf"),
        ("recall.threshold", "-0.1"),
        ("recall.threshold", "2.0001"),
        ("recall.threshold", ""),
        ("recall.threshold", "0_5"),
        ("recall.weights.similarity", "-1"),
        ("recall.weights.recency", "1e999"),
        ("recall.halfLifeSeconds", "0"),
        ("recall.halfLifeSeconds", "-5"),
        ("maxItemsPerScope", "0"),
        ("maxItemsPerScope", "0.99"),
        ("maxItemsPerScope", "-3"),
        ("maxItemsPerScope", "many"),
    ],
)
def test_each_invalid_value_is_rejected(field: str, value: str) -> None:
    """Unparseable, non-finite and out-of-range values are rejected and the last good value kept."""
    last_good = ConfigSnapshot(0.5, 0.5, 0.3, 0.2, 100.0, 7)
    snap, rejections = apply_config_hash({field: value}, defaults=DEFAULTS, last_good=last_good)
    assert [r.field for r in rejections] == [field]
    attr = lc._ATTRS[field]
    assert getattr(snap, attr) == getattr(last_good, attr)


def test_all_weights_zero_keeps_last_good_weights() -> None:
    """Weights that would all be zero are rejected as a group; other fields still apply."""
    raw = {
        "recall.weights.similarity": "0",
        "recall.weights.recency": "0",
        "recall.weights.importance": "0",
        "recall.threshold": "0.4",
    }
    last_good = dataclasses.replace(
        DEFAULTS, weight_similarity=0.9, weight_recency=0.1, weight_importance=0.0
    )
    snap, rejections = apply_config_hash(raw, defaults=DEFAULTS, last_good=last_good)
    assert snap.weights == Weights(similarity=0.9, recency=0.1, importance=0.0)
    assert snap.threshold == 0.4
    assert [r.field for r in rejections] == ["recall.weights"]


def test_unknown_and_undecodable_fields_are_reported_and_ignored() -> None:
    """A typo'd field is reported (not silently ignored) and changes nothing; bad bytes are rejected."""
    raw = {b"recall.treshold": b"0.1", b"recall.threshold": b"\xff\xfe"}
    last_good = dataclasses.replace(DEFAULTS, threshold=0.7)
    snap, rejections = apply_config_hash(raw, defaults=DEFAULTS, last_good=last_good)
    assert snap.threshold == 0.7
    reasons = {r.field: r.reason for r in rejections}
    assert reasons["recall.treshold"].startswith("unknown field")
    assert reasons["recall.threshold"] == "not UTF-8 text"


def test_whitespace_around_values_is_tolerated() -> None:
    """Values typed by hand with surrounding spaces still apply."""
    snap, rejections = apply_config_hash({"maxItemsPerScope": " 12 "}, defaults=DEFAULTS, last_good=DEFAULTS)
    assert snap.max_items_per_scope == 12
    assert rejections == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 2.01},
        {"threshold": -0.1},
        {"threshold": math.nan},
        {"weight_similarity": -0.1},
        {"weight_similarity": 0.0, "weight_recency": 0.0, "weight_importance": 0.0},
        {"half_life_seconds": 0.0},
        {"half_life_seconds": math.inf},
        {"max_items_per_scope": 0},
        {"max_items_per_scope": 2.5},
        {"max_items_per_scope": True},
        {"weight_recency": "0.5"},
    ],
)
def test_snapshot_rejects_invalid_constructor_values(kwargs: dict[str, object]) -> None:
    """Defaults are checked by the same rules: a bad constructor value fails at construction."""
    with pytest.raises(ConfigurationError):
        ConfigSnapshot(**kwargs)  # type: ignore[arg-type]


def test_snapshot_defaults_are_the_references() -> None:
    """ConfigSnapshot() carries the reference library's defaults."""
    assert ConfigSnapshot() == DEFAULTS
    assert ConfigSnapshot(threshold=None).as_hash() == {
        "recall.weights.similarity": "0.6",
        "recall.weights.recency": "0.25",
        "recall.weights.importance": "0.15",
        "recall.halfLifeSeconds": "604800.0",
    }


def test_parse_field_errors_carry_field_and_reason() -> None:
    """parse_field (used by `config set`) raises a ValidationError with machine-readable details."""
    assert parse_field("recall.threshold", "0.25") == 0.25
    with pytest.raises(ValidationError) as info:
        parse_field("recall.threshold", "5")
    assert info.value.code == "configuration.invalid"
    assert info.value.details["field"] == "recall.threshold"
    with pytest.raises(ValidationError) as unknown:
        parse_field("recall.k", "5")
    assert unknown.value.code == "configuration.unknown_field"


# An explicit alphabet: number-ish text is where the parsing edge cases are, and it
# spares Hypothesis building its Unicode tables on a fresh checkout (slow in CI).
_field_values = st.one_of(
    st.text(alphabet="0123456789.eE+-_ naif\t", max_size=12),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-5, max_value=10**6).map(str),
    st.binary(max_size=6),
)


@given(st.dictionaries(st.sampled_from([*CONFIG_FIELDS, "other"]), _field_values, max_size=7))
def test_any_hash_yields_a_valid_snapshot(raw: dict[str, str | bytes]) -> None:
    """Whatever an operator writes, the result is a valid snapshot and each field is new, last good or default."""
    last_good = ConfigSnapshot(0.5, 0.5, 0.3, 0.2, 100.0, 7)
    snap, rejections = apply_config_hash(raw, defaults=DEFAULTS, last_good=last_good)  # type: ignore[arg-type]
    rejected = {r.field for r in rejections}
    for field, attr in lc._ATTRS.items():
        got = getattr(snap, attr)
        if field not in raw:
            if "recall.weights" not in rejected or field not in lc.WEIGHT_FIELDS:
                assert got == getattr(DEFAULTS, attr)
        elif field in rejected or ("recall.weights" in rejected and field in lc.WEIGHT_FIELDS):
            assert got == getattr(last_good, attr)
    assert snap.weights != Weights(0.0, 0.0, 0.0)
    assert snap.threshold is None or 0.0 <= snap.threshold <= 2.0


def test_weights_is_a_weights_object_and_the_attributes_stay() -> None:
    """``snapshot.weights.similarity`` works (the reference's RecallWeights); the flat attributes too."""
    snap = ConfigSnapshot(weight_similarity=0.7, weight_recency=0.2, weight_importance=0.1)
    assert isinstance(snap.weights, Weights)
    assert (snap.weights.similarity, snap.weights.recency, snap.weights.importance) == (0.7, 0.2, 0.1)
    assert (snap.weight_similarity, snap.weight_recency, snap.weight_importance) == (0.7, 0.2, 0.1)
    assert ConfigSnapshot(weight_similarity=1).weights.similarity == 1.0


def test_threshold_none_means_the_embedders_default_and_the_alias() -> None:
    """``threshold=None`` is allowed (the store resolves the embedder's default); the reference's name works."""
    assert ConfigSnapshot(threshold=None).threshold is None
    assert ConfigSnapshot(threshold=1.5).threshold == 1.5
    assert MemoryConfigSnapshot is ConfigSnapshot
    assert ConfigSnapshot().threshold == 0.33


def test_snapshot_is_built_like_the_references() -> None:
    """``MemoryConfigSnapshot(threshold=, weights=RecallWeights(...), half_life_seconds=)`` works."""
    w = Weights(similarity=0.5, recency=0.3, importance=0.2)
    snap = MemoryConfigSnapshot(threshold=0.4, weights=w, half_life_seconds=60)
    assert snap.weights == w and snap.half_life_seconds == 60 and snap.max_items_per_scope is None
    assert snap == ConfigSnapshot(0.4, 0.5, 0.3, 0.2, 60)
    assert ConfigSnapshot(weights={"recency": 0.5}).weights == Weights(0.6, 0.5, 0.15)

    class ReferenceWeights:  # betterdb-agent-memory's own RecallWeights dataclass, duck-typed
        similarity, recency, importance = 1.0, 0.0, 0.0

    assert ConfigSnapshot(weights=ReferenceWeights()).weight_similarity == 1.0  # type: ignore[arg-type]
    assert dataclasses.replace(snap, threshold=1.0).weights == w
    for bad in (
        {"weights": w, "weight_recency": 0.1},
        {"weights": "heavy"},
        {"weights": {"speed": 1.0}},
        {"weights": Weights(0.0, 0.0, 0.0)},
    ):
        with pytest.raises(ConfigurationError):
            ConfigSnapshot(**bad)
