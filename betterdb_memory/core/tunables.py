"""The live tunables: their defaults, the rules a value must pass, and what a config hash asks for.

The hash is ``<name>:__mem_config`` (BetterDB Monitor reads ``recall.threshold``
from it and its threshold-adjust action writes it). Field names are the
reference library's, so existing hashes keep working::

    recall.threshold            float in [0, 2]   cosine-distance ceiling: recall keeps
                                                  hits with distance <= threshold
    recall.weights.similarity   float >= 0
    recall.weights.recency      float >= 0
    recall.weights.importance   float >= 0        (not all three zero)
    recall.halfLifeSeconds      float > 0
    maxItemsPerScope            number >= 1       (floored: 2.7 caps at 2)

The ranges are the reference library's, so any value it applies is applied here
(``recall.threshold`` 1.5 is a valid, loose, distance), and a value BetterDB
Monitor writes means the same to both libraries.

Rules, applied by the pure ``apply_config_hash``:

* a valid field is applied;
* an invalid field (unparseable, NaN/inf, out of range) is rejected and the
  **last good** value stays. The reference fell back to the constructor value, so a
  typo (threshold ``5`` after ``0.9``) silently moved recall to ``0.33``; an operator
  who fat-fingers a value should lose nothing they had;
* a field absent from the hash returns to the constructor default (deleting a
  field is how an operator undoes an override);
* unknown fields are reported (likely typos) and ignored.

No I/O and no logging here: ``observability.live_config.LiveConfig`` reads the hash,
applies it with these functions, and reports what was rejected.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigurationError
from .arguments import check_int, check_number
from .keys import config_key
from .scoring import DEFAULT_HALF_LIFE_SECONDS, Weights

__all__ = [
    "CONFIG_FIELDS",
    "FIELD_HALF_LIFE",
    "FIELD_MAX_ITEMS",
    "FIELD_THRESHOLD",
    "FIELD_WEIGHT_IMPORTANCE",
    "FIELD_WEIGHT_RECENCY",
    "FIELD_WEIGHT_SIMILARITY",
    "WEIGHT_FIELDS",
    "ConfigSnapshot",
    "MemoryConfigSnapshot",
    "Rejection",
    "apply_config_hash",
    "config_key",
    "parse_field",
]

FIELD_THRESHOLD: Final = "recall.threshold"
FIELD_WEIGHT_SIMILARITY: Final = "recall.weights.similarity"
FIELD_WEIGHT_RECENCY: Final = "recall.weights.recency"
FIELD_WEIGHT_IMPORTANCE: Final = "recall.weights.importance"
FIELD_HALF_LIFE: Final = "recall.halfLifeSeconds"
FIELD_MAX_ITEMS: Final = "maxItemsPerScope"

# Hash field -> ConfigSnapshot attribute.
_ATTRS: Final[dict[str, str]] = {
    FIELD_THRESHOLD: "threshold",
    FIELD_WEIGHT_SIMILARITY: "weight_similarity",
    FIELD_WEIGHT_RECENCY: "weight_recency",
    FIELD_WEIGHT_IMPORTANCE: "weight_importance",
    FIELD_HALF_LIFE: "half_life_seconds",
    FIELD_MAX_ITEMS: "max_items_per_scope",
}
CONFIG_FIELDS: Final[tuple[str, ...]] = tuple(_ATTRS)
WEIGHT_FIELDS: Final = (FIELD_WEIGHT_SIMILARITY, FIELD_WEIGHT_RECENCY, FIELD_WEIGHT_IMPORTANCE)
_WEIGHTS_GROUP: Final = "recall.weights"

# A plain decimal number. Python's float() also takes "nan", "inf", "1_000" and
# surrounding whitespace; a config value should be what it looks like.
_NUMBER_RE: Final = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

#: The largest cosine distance (opposite vectors); a threshold above it would admit everything.
MAX_DISTANCE: Final = 2.0


class _Invalid(ValueError):
    """A field's value failed validation; the message is the reason."""


def _number(text: str) -> float:
    if not _NUMBER_RE.match(text):
        raise _Invalid("not a decimal number")
    return _check_finite(float(text))


def _check_finite(value: float) -> float:
    if not math.isfinite(value):
        raise _Invalid("not a finite number")
    return value


def _check_threshold(value: float) -> float:
    if not 0.0 <= _check_finite(value) <= MAX_DISTANCE:
        raise _Invalid("threshold is a cosine distance and must be within [0, 2]")
    return value


def _check_weight(value: float) -> float:
    if _check_finite(value) < 0.0:
        raise _Invalid("weight must be >= 0")
    return value


def _check_half_life(value: float) -> float:
    if _check_finite(value) <= 0.0:
        raise _Invalid("half-life must be > 0 seconds")
    return value


def _check_cap(value: int) -> int:
    if value < 1:
        raise _Invalid("must be >= 1")
    return value


def _cap(text: str) -> int:
    value = _number(text)
    if value < 1:
        raise _Invalid("must be >= 1")
    return math.floor(value)  # the reference floors a fractional cap


_PARSERS: Final[dict[str, Callable[[str], float | int]]] = {
    FIELD_THRESHOLD: lambda text: _check_threshold(_number(text)),
    FIELD_WEIGHT_SIMILARITY: lambda text: _check_weight(_number(text)),
    FIELD_WEIGHT_RECENCY: lambda text: _check_weight(_number(text)),
    FIELD_WEIGHT_IMPORTANCE: lambda text: _check_weight(_number(text)),
    FIELD_HALF_LIFE: lambda text: _check_half_life(_number(text)),
    FIELD_MAX_ITEMS: _cap,
}


_DEFAULT_WEIGHTS: Final = Weights()
_DEFAULT_HALF_LIFE: Final = DEFAULT_HALF_LIFE_SECONDS


def _weights_of(weights: object) -> tuple[Any, Any, Any]:
    """``(similarity, recency, importance)`` of a ``Weights``-like object or a mapping."""
    if isinstance(weights, Mapping):
        unknown = set(weights) - {"similarity", "recency", "importance"}
        if unknown:
            raise ConfigurationError(
                f"unknown weight names {sorted(unknown)}", details={"argument": "weights"}
            )
        return (
            weights.get("similarity", _DEFAULT_WEIGHTS.similarity),
            weights.get("recency", _DEFAULT_WEIGHTS.recency),
            weights.get("importance", _DEFAULT_WEIGHTS.importance),
        )
    try:
        # Weights, RecallWeights, or the reference's own RecallWeights dataclass.
        return (weights.similarity, weights.recency, weights.importance)  # type: ignore[attr-defined]
    except AttributeError:
        raise ConfigurationError(
            f"weights must be Weights (RecallWeights) or a mapping, got {type(weights).__name__}",
            details={"argument": "weights"},
        ) from None


@dataclass(frozen=True, init=False)
class ConfigSnapshot:
    """The recall/eviction tunables in force at one moment (immutable).

    The reference's ``MemoryConfigSnapshot`` (also exported under that name), and
    built like it: ``ConfigSnapshot(threshold=0.33, weights=RecallWeights(...),
    half_life_seconds=..., max_items_per_scope=...)``; the flat ``weight_*``
    arguments (positional after ``threshold``) work too. The defaults are the
    reference library's.

    Attributes:
        threshold: cosine-distance ceiling in [0, 2]: recall keeps hits whose
            distance is <= threshold (0.33 ~ similarity 0.835). ``None``: the
            embedder's calibrated default, which the store resolves.
        weight_similarity / weight_recency / weight_importance: the composite-score
            weights; ``weights`` gives them as one ``Weights`` (``RecallWeights``).
        half_life_seconds: recency half-life.
        max_items_per_scope: the capacity cap; ``None`` means no cap.

    Raises:
        ConfigurationError: a value is out of range (the same rules as the hash), or
            ``weights=`` given together with a ``weight_*`` argument.
    """

    threshold: float | None = 0.33
    weight_similarity: float = _DEFAULT_WEIGHTS.similarity
    weight_recency: float = _DEFAULT_WEIGHTS.recency
    weight_importance: float = _DEFAULT_WEIGHTS.importance
    half_life_seconds: float = _DEFAULT_HALF_LIFE
    max_items_per_scope: int | None = None

    def __init__(
        self,
        threshold: float | None = 0.33,
        weight_similarity: float | None = None,
        weight_recency: float | None = None,
        weight_importance: float | None = None,
        half_life_seconds: float = _DEFAULT_HALF_LIFE,
        max_items_per_scope: int | None = None,
        *,
        weights: Weights | Mapping[str, float] | None = None,
    ) -> None:
        flat = (weight_similarity, weight_recency, weight_importance)
        if weights is not None:
            if any(w is not None for w in flat):
                raise ConfigurationError(
                    "pass weights= or weight_similarity / weight_recency / weight_importance, not both",
                    details={"argument": "weights"},
                )
            flat = _weights_of(weights)
        defaults = (_DEFAULT_WEIGHTS.similarity, _DEFAULT_WEIGHTS.recency, _DEFAULT_WEIGHTS.importance)
        sim, rec, imp = (d if w is None else w for w, d in zip(flat, defaults, strict=True))
        for attr, value in (
            ("threshold", threshold),
            ("weight_similarity", sim),
            ("weight_recency", rec),
            ("weight_importance", imp),
            ("half_life_seconds", half_life_seconds),
            ("max_items_per_scope", max_items_per_scope),
        ):
            object.__setattr__(self, attr, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        floats: list[tuple[str, Any, Callable[[float], float]]] = [
            ("weight_similarity", self.weight_similarity, _check_weight),
            ("weight_recency", self.weight_recency, _check_weight),
            ("weight_importance", self.weight_importance, _check_weight),
            ("half_life_seconds", self.half_life_seconds, _check_half_life),
        ]
        if self.threshold is not None:
            floats.append(("threshold", self.threshold, _check_threshold))
        for attr, value, check in floats:
            check_number(value, attr, setting=True)
            try:
                check(float(value))
            except (_Invalid, OverflowError) as exc:
                raise ConfigurationError(f"{attr}={value!r}: {exc}", details={"argument": attr}) from None
        cap = self.max_items_per_scope
        if cap is not None:
            check_int(cap, "max_items_per_scope", setting=True)
            try:
                _check_cap(cap)
            except _Invalid as exc:
                raise ConfigurationError(
                    f"max_items_per_scope={cap!r}: {exc}", details={"argument": "max_items_per_scope"}
                ) from None
        if self.weight_similarity == self.weight_recency == self.weight_importance == 0.0:
            raise ConfigurationError("recall weights must not all be zero", details={"argument": "weights"})

    @property
    def weights(self) -> Weights:
        """The composite-score weights: ``.similarity``, ``.recency``, ``.importance``."""
        return Weights(
            similarity=float(self.weight_similarity),
            recency=float(self.weight_recency),
            importance=float(self.weight_importance),
        )

    def as_hash(self) -> dict[str, str]:
        """The snapshot as hash fields (``None`` values left out), e.g. for ``config show``."""
        out: dict[str, str] = {}
        for field, attr in _ATTRS.items():
            value = getattr(self, attr)
            if value is not None:
                out[field] = str(value)
        return out


#: The reference's name for ``ConfigSnapshot``.
MemoryConfigSnapshot = ConfigSnapshot


@dataclass(frozen=True)
class Rejection:
    """A hash field that was not applied, and why.

    Attributes:
        field: the hash field (``"recall.weights"`` for the weights as a group).
        value: its raw text.
        reason: why it was rejected.
    """

    field: str
    value: str
    reason: str


def _text(value: bytes | str) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise _Invalid("not UTF-8 text") from None
    return value


def parse_field(field: str, value: str) -> float | int:
    """Validate one field's text and return its typed value.

    Raises:
        ConfigurationError: unknown field or invalid value (``details`` has
            ``field``, ``value``, ``reason``).
    """
    parser = _PARSERS.get(field)
    if parser is None:
        raise ConfigurationError(
            f"unknown config field {field!r}; known: {', '.join(CONFIG_FIELDS)}",
            code="configuration.unknown_field",
            details={"field": field, "value": value, "reason": "unknown field"},
        )
    try:
        return parser(value.strip())
    except _Invalid as exc:
        raise ConfigurationError(
            f"{field}={value!r}: {exc}",
            code="configuration.invalid",
            details={"field": field, "value": value, "reason": str(exc)},
        ) from None


def apply_config_hash(
    raw: Mapping[str, str] | Mapping[bytes, bytes] | Mapping[str | bytes, str | bytes],
    *,
    defaults: ConfigSnapshot,
    last_good: ConfigSnapshot,
) -> tuple[ConfigSnapshot, list[Rejection]]:
    """Compute the snapshot a config hash asks for (no I/O, no logging).

    Args:
        raw: the ``HGETALL`` reply (``bytes`` or ``str`` keys and values).
        defaults: the constructor values, used for fields absent from the hash.
        last_good: the snapshot in force, kept for fields whose value is invalid.

    Returns:
        The new snapshot and the rejected fields (in hash-field order, the
        weights-group rejection last).
    """
    decoded: dict[str, str] = {}
    rejections: list[Rejection] = []
    for raw_key, raw_value in raw.items():
        try:
            key = _text(raw_key)
        except _Invalid:
            rejections.append(Rejection(repr(raw_key), "", "field name is not UTF-8 text; ignored"))
            continue
        try:
            decoded[key] = _text(raw_value)
        except _Invalid as exc:
            if key in _ATTRS:
                rejections.append(Rejection(key, repr(raw_value), str(exc)))
                decoded[key] = ""  # present but invalid: keeps last good below
            else:
                rejections.append(Rejection(key, repr(raw_value), "unknown field; ignored"))
    for key in decoded:
        if key not in _ATTRS:
            rejections.append(Rejection(key, decoded[key], "unknown field; ignored"))

    already_rejected = {r.field for r in rejections}
    values: dict[str, Any] = {}
    applied: set[str] = set()
    for field, attr in _ATTRS.items():
        if field not in decoded:
            values[attr] = getattr(defaults, attr)
            continue
        if field in already_rejected:
            values[attr] = getattr(last_good, attr)
            continue
        try:
            values[attr] = _PARSERS[field](decoded[field].strip())
            applied.add(field)
        except _Invalid as exc:
            rejections.append(Rejection(field, decoded[field], str(exc)))
            values[attr] = getattr(last_good, attr)

    # Cross-field rule: with all weights zero every score is zero and ranking is
    # arbitrary. Keep the last good weights as a group (it was valid as a whole).
    if all(values[_ATTRS[f]] == 0.0 for f in WEIGHT_FIELDS):
        weights_text = ",".join(f"{f.rsplit('.', 1)[1]}={values[_ATTRS[f]]}" for f in WEIGHT_FIELDS)
        rejections.append(Rejection(_WEIGHTS_GROUP, weights_text, "recall weights must not all be zero"))
        for f in WEIGHT_FIELDS:
            values[_ATTRS[f]] = getattr(last_good, _ATTRS[f])

    return ConfigSnapshot(**values), rejections
