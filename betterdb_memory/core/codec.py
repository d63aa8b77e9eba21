"""Vector, field and reply codecs: how values become HASH fields and come back.

Vectors are FLOAT32 little-endian bytes (the only type valkey-search accepts).
Invalid vectors are refused *before* a write: RediSearch drops a whole document
whose vector has the wrong size, valkey-search keeps it without the vector
(shared/VALKEY_SEARCH_DIALECT.md, point 12); either way the memory would silently
never be recalled. Replies become plain Python (``normalize_reply``, ``reply_pairs``)
the same way whichever engine and protocol sent them.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError

__all__ = [
    "as_text",
    "decode_vector",
    "encode_vector",
    "join_tags",
    "normalize_reply",
    "reply_pairs",
    "split_tags",
    "to_float",
    "to_int",
    "validate_vector",
]

FloatArray = npt.NDArray[np.float32]

# ``isinstance`` with a tuple: ``str | bytes | bytearray`` builds a union at every call and
# takes its slower path (a vector is checked on every write and recall).
_TEXT = (str, bytes, bytearray)
_F64 = np.dtype(np.float64)


def validate_vector(vector: object, *, dimensions: int, name: str = "vector") -> FloatArray:
    """Return ``vector`` as a float32 array of ``dimensions`` finite, non-zero values.

    Raises:
        ValidationError: wrong type or length, NaN or inf, or all zeros (a zero vector
            has no direction; cosine distance to it is undefined).
    """
    if type(vector) is np.ndarray and vector.dtype == np.float32 and vector.shape == (dimensions,):
        # A recall's or a write's float32 vector: both checks below in one sum of squares, in float64,
        # where a float32's square neither overflows nor underflows (so no numpy warning either): it is
        # NaN or inf exactly when a value is, and 0 exactly when all are. Else the checks say which.
        arr = vector.copy()
        wide = arr.astype(_F64)
        if 0.0 < float(wide.dot(wide)) < math.inf:
            return arr
    if isinstance(vector, _TEXT):
        raise ValidationError(
            f"{name} must be a sequence of floats", code="validation.vector_type", details={"argument": name}
        )
    try:
        raw = np.asarray(vector)
        # Only real numbers: numpy would otherwise parse ["0.1", ...], turn None into NaN
        # and bools into 0/1. A float64 beyond the float32 range becomes inf (refused
        # below) instead of raising numpy's overflow RuntimeWarning.
        if raw.dtype.kind not in "iuf":
            raise TypeError(f"element type {raw.dtype}")
        if raw.dtype == np.float32:  # nothing to overflow: no error state to set (a few µs)
            arr = raw.copy()
        else:
            with np.errstate(over="ignore"):
                arr = raw.astype(np.float32)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            f"{name} must be a sequence of floats", code="validation.vector_type", details={"argument": name}
        ) from exc
    if arr.ndim != 1 or arr.shape[0] != dimensions:
        raise ValidationError(
            f"{name} has shape {arr.shape}; the index expects {dimensions} dimensions",
            code="validation.vector_dimensions",
            details={"argument": name, "expected": dimensions, "got": list(arr.shape)},
        )
    # ``count_nonzero``, not ``np.all`` / ``np.any`` (or the array methods, Python wrappers):
    # a write and a recall check a vector each, and their dispatch costs more than the check.
    if np.count_nonzero(np.isfinite(arr)) != arr.size:
        raise ValidationError(
            f"{name} contains NaN or infinity", code="validation.vector_nonfinite", details={"argument": name}
        )
    if not np.count_nonzero(arr):
        raise ValidationError(
            f"{name} is all zeros (no direction to compare by cosine)",
            code="validation.vector_zero",
            details={"argument": name},
        )
    return arr


_LE_F32 = np.dtype("<f4")  # parsed once: every write encodes a vector


def encode_vector(vector: FloatArray) -> bytes:
    return np.ascontiguousarray(vector, dtype=_LE_F32).tobytes()


def decode_vector(raw: bytes) -> FloatArray:
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def as_text(value: Any) -> str:
    """A reply value as ``str`` whether the client decodes responses or not."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def to_float(value: Any, default: float = 0.0) -> float:
    """A reply value (bytes, str or number) as a finite float; ``default`` when absent or not one.

    ``float`` reads bytes itself: no decode on the recall hot path.
    """
    if value is None:
        return default
    try:
        out = float(value)
    except (ValueError, TypeError):
        return default
    return out if math.isfinite(out) else default


def to_int(value: Any, default: int = 0) -> int:
    """A reply value as an int (``"1.7e12"`` and ``"3.0"`` too, truncated); ``default`` when not one."""
    if value is None:
        return default
    try:
        return int(value)
    except (ValueError, TypeError):
        pass
    try:
        return int(float(value))
    except (ValueError, TypeError, OverflowError):
        return default


def split_tags(value: Any) -> list[str]:
    """The stored ``tags`` field (comma-joined, the reference's form) back to a list."""
    text = as_text(value)
    return [t for t in text.split(",") if t] if text else []


def join_tags(values: Sequence[str]) -> str:
    """Tags as the reference stores them: joined with ``,`` (validated comma-free)."""
    return ",".join(values)


def normalise(text: str) -> str:
    """The matching form of a text: NFKC, case-folded, whitespace collapsed.

    What dedup compares and what fact subjects and statements are matched by.
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def normalize_reply(value: Any) -> Any:
    """Turn a reply into plain Python: bytes -> str, RESP3 maps -> dict, lists kept."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {as_text(k): normalize_reply(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize_reply(v) for v in value]
    return value


def reply_pairs(value: Any) -> dict[str, Any]:
    """A flat [k, v, k, v] array or a map, as a dict with str keys."""
    value = normalize_reply(value)
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        return {as_text(value[i]): value[i + 1] for i in range(0, len(value) - 1, 2)}
    return {}
