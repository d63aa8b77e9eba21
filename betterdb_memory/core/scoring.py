"""The composite recall score and the capacity keep-score, as plain functions.

``score = w_sim * similarity + w_rec * recency + w_imp * importance`` where
``similarity = 1 - cosine_distance / 2`` (0..1, higher is closer) and ``recency``
is a true half-life: ``0.5 ** (age / half_life)`` with age measured from
``max(created_at, last_accessed_at)`` (the seed's rule), or, for a memory written with
``valid_from``, from that date until it is recalled and from the later of it and the
last access after (``validity.last_seen_ms``).

The capacity keep-score must order a scope's memories the same way tomorrow as
today, or choosing a victim means re-scoring the whole scope on every write (what
the reference library does, at a cost that grows with the scope). Additive ``importance +
recency`` reorders as time passes; the multiplicative form ``importance *
recency`` does not, because its logarithm, ``log2(importance) + t / half_life``
minus a term common to all items, is fixed per item. So the keep-score stored in
the scope's sorted set is ``t / half_life + log2(importance)``: one memory of
importance 1.0 is worth the same as one of importance 0.5 that is one half-life
younger. The lowest is evicted, found with ``ZRANGE 0 0`` in O(log n).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError, ValidationError
from .arguments import is_number
from .validity import last_seen_ms

__all__ = [
    "DEFAULT_HALF_LIFE_SECONDS",
    "DEFAULT_WEIGHTS",
    "ScoreParts",
    "Weights",
    "composite",
    "keep_score",
    "recency",
    "similarity_from_distance",
    "weighted",
]

DEFAULT_HALF_LIFE_SECONDS = 7 * 24 * 3600.0
_MIN_IMPORTANCE = 1e-3  # log2 floor: importance 0 is "evict first", not -inf


@dataclass(frozen=True, slots=True)
class Weights:
    similarity: float = 0.6
    recency: float = 0.25
    importance: float = 0.15

    @classmethod
    def of(cls, value: object, *, setting: bool = False) -> Weights:
        """Validate weights given as ``Weights`` or a mapping with those three keys.

        ``setting``: the store's own weights (a constructor argument), whose mistakes are
        ``ConfigurationError``s; a recall's are ``ValidationError``s (``core.validation``).
        """
        if value is None:
            return DEFAULT_WEIGHTS
        if isinstance(value, Weights):
            w = value
        elif isinstance(value, dict):
            unknown = set(value) - {"similarity", "recency", "importance"}
            if unknown:
                raise _weights_error(
                    f"unknown weight names {sorted(unknown)}", setting, unknown=sorted(unknown)
                )
            if not all(is_number(v) for v in value.values()):
                raise _weights_error("weights must be numbers", setting)
            w = Weights(**{k: float(v) for k, v in value.items()})
        else:
            raise _weights_error("weights must be Weights or a dict", setting)
        vals = (w.similarity, w.recency, w.importance)
        if not all(is_number(v) and math.isfinite(v) and v >= 0 for v in vals) or sum(vals) <= 0:
            raise _weights_error(
                "weights must be finite, non-negative and not all zero", setting, weights=list(vals)
            )
        return w


def _weights_error(message: str, setting: bool, **details: Any) -> ValidationError:
    if setting:
        return ConfigurationError(message, code="configuration.weights", details=details)
    return ValidationError(message, code="validation.weights", details=details)


DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True, slots=True)
class ScoreParts:
    """A recall score with its components (returned with ``explain=True``)."""

    similarity: float
    recency: float
    importance: float
    weights: Weights
    score: float
    #: The time window understood in the query (``TimeWindow.describe()``), when one was.
    time_window: str | None = None
    #: The id of the newer statement of the same slot this hit was ranked below
    #: (same-slot supersession, ``core.supersession``), when it was.
    superseded_by: str | None = None
    #: Why the recall ranked its KNN candidates alone, when it did: its full-text side
    #: ``timeout`` (ran out of its budget), ``error`` (failed), ``partial`` (RediSearch
    #: answered what it found before its timeout) (``core.text_query``).
    degraded: str | None = None


def similarity_from_distance(distance: float) -> float:
    """Cosine distance (0..2) to similarity (1..0), clamped against float noise."""
    return min(1.0, max(0.0, 1.0 - distance / 2.0))


def recency(last_seen: float, now: float, half_life_seconds: float) -> float:
    age = max(0.0, now - last_seen)
    return float(0.5 ** (age / half_life_seconds))


def composite(
    *,
    distance: float,
    importance: float,
    created_at: float,
    last_accessed_at: float,
    now: float,
    weights: Weights,
    half_life_seconds: float,
    valid_from: float | None = None,
    access_count: int = 0,
) -> ScoreParts:
    """One memory's score; times in seconds. ``valid_from`` None: the seed's recency, exactly."""
    sim = similarity_from_distance(distance)
    seen = last_seen_ms(valid_from, created_at, last_accessed_at, access_count)
    score, rec = weighted(sim, seen, importance, now, weights, half_life_seconds)
    return ScoreParts(sim, rec, importance, weights, score)


def weighted(
    similarity: float,
    last_seen: float,
    importance: float,
    now: float,
    weights: Weights,
    half_life_seconds: float,
) -> tuple[float, float]:
    """``(score, recency)``: the composite's arithmetic, for callers that score many candidates
    and build ``ScoreParts`` only for the few they return (``core.ranking.rank``)."""
    rec = recency(last_seen, now, half_life_seconds)
    return weights.similarity * similarity + weights.recency * rec + weights.importance * importance, rec


def keep_score(last_seen: float, importance: float, half_life_seconds: float) -> float:
    """Time-invariant eviction order: ``t / half_life + log2(importance)`` (lowest goes first)."""
    return last_seen / half_life_seconds + math.log2(max(importance, _MIN_IMPORTANCE))
