"""Recall score (similarity, half-life recency, importance) and the time-invariant keep-score."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.scoring import (
    DEFAULT_HALF_LIFE_SECONDS,
    DEFAULT_WEIGHTS,
    Weights,
    composite,
    keep_score,
    recency,
    similarity_from_distance,
)
from betterdb_memory.errors import ValidationError

H = 3600.0


# -- recency ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("half_lives", "expected"), [(0, 1.0), (1, 0.5), (2, 0.25), (0.5, math.sqrt(0.5))])
def test_recency_halves_every_half_life(half_lives: float, expected: float) -> None:
    """``0.5 ** (age / half_life)``: 1.0 now, 0.5 at one half-life, 0.25 at two."""
    assert recency(1000.0, 1000.0 + half_lives * H, H) == pytest.approx(expected)


def test_recency_of_a_future_timestamp_is_one() -> None:
    """Clock skew (last seen after ``now``) is age 0, never more than 1."""
    assert recency(2000.0, 1000.0, H) == 1.0


def test_default_half_life_is_a_week() -> None:
    """Seven days."""
    assert DEFAULT_HALF_LIFE_SECONDS == 7 * 24 * 3600


# -- similarity -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("distance", "expected"),
    [(0.0, 1.0), (1.0, 0.5), (2.0, 0.0), (-1e-7, 1.0), (2.0000001, 0.0), (5.0, 0.0), (-3.0, 1.0)],
)
def test_similarity_from_distance_is_clamped(distance: float, expected: float) -> None:
    """Cosine distance 0..2 -> similarity 1..0; float noise outside the range is clamped."""
    assert similarity_from_distance(distance) == pytest.approx(expected)
    assert 0.0 <= similarity_from_distance(distance) <= 1.0


# -- composite --------------------------------------------------------------------------------


def test_composite_is_the_weighted_sum_of_its_parts() -> None:
    """score = w_sim * sim + w_rec * rec + w_imp * importance, recency from the later of created/accessed."""
    parts = composite(
        distance=0.5,
        importance=0.8,
        created_at=0.0,
        last_accessed_at=H,
        now=2 * H,
        weights=Weights(similarity=0.5, recency=0.3, importance=0.2),
        half_life_seconds=H,
    )
    assert (parts.similarity, parts.recency, parts.importance) == pytest.approx((0.75, 0.5, 0.8))
    assert parts.score == pytest.approx(0.5 * 0.75 + 0.3 * 0.5 + 0.2 * 0.8)
    assert parts.weights == Weights(0.5, 0.3, 0.2)


def test_composite_with_one_weight_is_that_component() -> None:
    """All weight on similarity: score == similarity."""
    parts = composite(
        distance=0.4, importance=1.0, created_at=0, last_accessed_at=0, now=10 * H,
        weights=Weights(similarity=1, recency=0, importance=0), half_life_seconds=H,
    )  # fmt: skip
    assert parts.score == pytest.approx(0.8)


# -- Weights.of -------------------------------------------------------------------------------


def test_weights_of_defaults_instances_and_partial_dicts() -> None:
    """None -> defaults; a Weights passes through; a dict overrides only the keys it names."""
    assert Weights.of(None) is DEFAULT_WEIGHTS
    w = Weights(1, 2, 3)
    assert Weights.of(w) is w
    assert Weights.of({"similarity": 1}) == Weights(1.0, DEFAULT_WEIGHTS.recency, DEFAULT_WEIGHTS.importance)
    assert Weights.of({"similarity": 0, "recency": 0, "importance": 1}) == Weights(0, 0, 1)


@pytest.mark.parametrize(
    "value",
    [
        {"similarity": float("nan")},
        {"recency": float("inf")},
        {"importance": -0.1},
        {"similarity": 0, "recency": 0, "importance": 0},
        {"similarity": "high"},
        {"similarity": None},
        {"relevance": 1.0},
        Weights(similarity=float("nan")),
        Weights(similarity=-1.0),
        Weights(0, 0, 0),
        [0.6, 0.25, 0.15],
        "similarity=1",
    ],
)
def test_weights_of_rejects_bad_weights(value: object) -> None:
    """NaN, inf, negative, all zero, non-numbers, unknown names, wrong types: ``validation.weights``."""
    with pytest.raises(ValidationError) as info:
        Weights.of(value)
    assert info.value.code == "validation.weights"


def test_weights_of_names_unknown_keys() -> None:
    """The unknown key is reported in ``details``."""
    with pytest.raises(ValidationError) as info:
        Weights.of({"similarity": 1, "relevance": 1})
    assert info.value.details["unknown"] == ["relevance"]


# -- keep_score -------------------------------------------------------------------------------


def test_half_importance_one_half_life_younger_ties() -> None:
    """Importance 0.5 seen one half-life later keeps exactly as well as importance 1.0."""
    for t in (0.0, 1_700_000_000.0):
        assert keep_score(t + H, 0.5, H) == pytest.approx(keep_score(t, 1.0, H), abs=1e-9)


def test_keep_score_orders_by_recency_then_importance() -> None:
    """Newer beats older at equal importance; more important beats less at equal age."""
    assert keep_score(2 * H, 0.5, H) > keep_score(H, 0.5, H)
    assert keep_score(H, 0.9, H) > keep_score(H, 0.3, H)


def test_keep_score_of_zero_importance_is_finite() -> None:
    """Importance 0 is floored (evict early), never -inf."""
    assert math.isfinite(keep_score(0.0, 0.0, H))
    assert keep_score(0.0, 0.0, H) < keep_score(0.0, 0.01, H)


timestamps = st.floats(min_value=1.6e9, max_value=1.8e9)
importances = st.floats(min_value=1e-3, max_value=1.0)


@settings(max_examples=200, deadline=None)
@given(
    t1=timestamps,
    i1=importances,
    t2=timestamps,
    i2=importances,
    later=st.lists(st.floats(min_value=0, max_value=60 * H), min_size=1, max_size=4),
)
def test_keep_order_never_changes_as_time_passes(
    t1: float, i1: float, t2: float, i2: float, later: list[float]
) -> None:
    """The keep-score order equals the order by importance x recency at every later ``now``."""
    k1, k2 = keep_score(t1, i1, H), keep_score(t2, i2, H)
    if abs(k1 - k2) < 1e-6:  # a tie within float noise has no order to keep
        return
    start = max(t1, t2)
    for delta in sorted(later):
        now = start + delta
        # In log space (the products underflow after enough half-lives).
        v1 = math.log2(i1) + math.log2(recency(t1, now, H)) if recency(t1, now, H) > 0 else -math.inf
        v2 = math.log2(i2) + math.log2(recency(t2, now, H)) if recency(t2, now, H) > 0 else -math.inf
        if math.isinf(v1) or math.isinf(v2):
            continue
        assert (v1 > v2) == (k1 > k2), (now, v1, v2, k1, k2)


@pytest.mark.parametrize("bad", ["1", b"1", True, None, [1]])
def test_weights_refuse_non_numbers(bad: object) -> None:
    """A weight given as a string, bool or other non-number is refused, not coerced."""
    with pytest.raises(ValidationError) as err:
        Weights.of({"similarity": bad, "recency": 0.2, "importance": 0.1})
    assert err.value.code == "validation.weights"
