"""A scan's rows to the nearest of them: the exact KNN ``core.scope_scan`` plans, done here.

A scan (a plain filter query ``LIMIT 0 B+1`` with the vectors, on valkey-search) returns
every memory of a small scope, or every state a time window holds; the recall wants the
``k`` nearest. ``nearest`` ranks parsed hits; ``nearest_reply`` reads the reply itself,
finding each row's vector by position, and builds hits for the ``k`` nearest rows only
(the rest are never turned into dicts). Both compute the engine's COSINE distance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .codec import as_text
from .query import SCORE_ALIAS, VECTOR_FIELD
from .replies import SearchHit, field_map, field_name, parse_search_reply

__all__ = ["nearest", "nearest_reply"]


def nearest(
    hits: Sequence[SearchHit],
    vector: np.ndarray[Any, np.dtype[np.float32]],
    k: int,
    *,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
) -> list[SearchHit]:
    """The ``k`` hits nearest ``vector`` by cosine distance, nearest first, ``__dist`` set.

    The engine's COSINE: ``1 - a.b / (|a| |b|)``, computed in float64 from the stored
    float32 blobs. A hit without a readable vector of the query's size is left out (the
    KNN never returns one either: valkey-search keeps such a document minus its vector),
    as is one ``keep`` rejects (the exact check of a case-insensitive index's superset).
    Ties keep the reply's order. The vector field is dropped from the returned hits.
    """
    size = 4 * int(vector.shape[0])
    rows: list[SearchHit] = []
    blobs: list[bytes] = []
    for hit in hits:
        blob = _blob(hit.fields.pop(VECTOR_FIELD, None), size)
        if blob is None or (keep is not None and not keep(hit.fields)):
            continue
        rows.append(hit)
        blobs.append(blob)
    out: list[SearchHit] = []
    for i, dist in _top(blobs, vector, k):
        hit = rows[i]
        hit.fields[SCORE_ALIAS] = dist
        out.append(hit)
    return out


def nearest_reply(
    reply: Any,
    vector: np.ndarray[Any, np.dtype[np.float32]],
    k: int,
    *,
    limit: int,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
) -> tuple[int, list[SearchHit] | None]:
    """A scan's reply read to (its total, its ``k`` nearest hits), as ``nearest(parse_search_reply(reply).hits)``.

    The total is the reply's, or its rows' count if larger; above ``limit`` the scan held
    more than it read and no hits are built (None). The rows' vectors are found by
    position (one lookup per tuple of field names, as ``knn_rows`` reads a KNN's rows) and
    only the ``k`` nearest rows become hits: a window's scan reads every state valid in
    it, most of which rank below the ``k`` it asks for. A reply of another shape (a RESP3
    RediSearch map, a name that is no string) or an exact check (``keep``, which reads a
    row's fields) goes the dict way.
    """
    if type(reply) is not list or not reply or keep is not None:
        return _parsed(reply, vector, k, limit, keep)
    size = 4 * int(vector.shape[0])
    keys: list[Any] = []
    rows: list[list[Any]] = []
    blobs: list[bytes] = []
    i, n, count = 1, len(reply), 0
    while i < n:
        count += 1
        if i + 1 >= n or not isinstance(value := reply[i + 1], _CONTAINERS):
            i += 1  # a key without fields: no vector, never a hit
            continue
        if type(value) is not list:  # a map row: the dict way reads it
            return _parsed(reply, vector, k, limit, keep)
        names = tuple(value[0 : len(value) - 1 : 2])
        try:
            at = _VECTOR_AT[names]
        except KeyError:
            at = _vector_at(names)
        except TypeError:  # a name that is no string: left to the dict way
            return _parsed(reply, vector, k, limit, keep)
        blob = None if at < 0 else _blob(value[at], size)
        if blob is not None:
            keys.append(reply[i])
            rows.append(value)
            blobs.append(blob)
        i += 2
    total = max(int(reply[0]), count)
    if total > limit:
        return total, None
    out: list[SearchHit] = []
    for j, dist in _top(blobs, vector, k):
        fields = field_map(rows[j])
        fields.pop(VECTOR_FIELD, None)
        fields[SCORE_ALIAS] = dist
        raw = keys[j]
        out.append(
            SearchHit(raw.decode("utf-8", errors="replace") if type(raw) is bytes else as_text(raw), fields)
        )
    return total, out


def _parsed(
    reply: Any,
    vector: np.ndarray[Any, np.dtype[np.float32]],
    k: int,
    limit: int,
    keep: Callable[[Mapping[str, Any]], bool] | None,
) -> tuple[int, list[SearchHit] | None]:
    """``nearest_reply`` the dict way: the reply parsed to hits, then ``nearest``."""
    result = parse_search_reply(reply)
    total = max(result.total, len(result.hits))
    return total, None if total > limit else nearest(result.hits, vector, k, keep=keep)


_CONTAINERS = (list, tuple, dict)
# A row's raw field-name tuple -> where its vector's value sits (-1: none), bounded like ``replies._ROWS``.
_VECTOR_AT: dict[tuple[Any, ...], int] = {}


def _vector_at(names: tuple[Any, ...]) -> int:
    """The value position of the last ``VECTOR_FIELD`` among ``names`` (the dict keeps the last), -1 if none."""
    decoded = [field_name(name) for name in names]
    at = next((2 * j + 1 for j in range(len(decoded) - 1, -1, -1) if decoded[j] == VECTOR_FIELD), -1)
    if len(_VECTOR_AT) < 4096:
        _VECTOR_AT[names] = at
    return at


def _blob(raw: Any, size: int) -> bytes | None:
    """A stored vector of ``size`` bytes, else None (a missing, short or non-binary value)."""
    if type(raw) is bytes:
        return raw if len(raw) == size else None
    if isinstance(raw, bytearray | memoryview) and len(raw) == size:
        return bytes(raw)
    return None


def _top(
    blobs: list[bytes], vector: np.ndarray[Any, np.dtype[np.float32]], k: int
) -> list[tuple[int, float]]:
    """(position, cosine distance) of the ``k`` blobs nearest ``vector``, nearest first, ties in order."""
    if not blobs or k <= 0:
        return []
    dim = int(vector.shape[0])
    mat = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim).astype(np.float64)
    q = vector.astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", mat, mat)) * float(np.sqrt(q @ q))
    dots = mat @ q
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = np.where(norms > 0.0, 1.0 - dots / np.where(norms > 0.0, norms, 1.0), 1.0)
    order = np.argsort(dist, kind="stable")[:k]
    return [(i, float(dist[i])) for i in order.tolist()]
