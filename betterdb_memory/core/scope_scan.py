"""An exact KNN over a small scope: a plain filter query for its vectors, ranked here.

valkey-search 1.2 answers a filtered KNN by brute force over the filter's matches only
when it estimates them at most ``search.prefiltering-threshold-ratio`` (0.1% by default)
of the index; above that it filters inline while walking the HNSW graph, visiting about
``k / selectivity`` nodes. A thread of 0.1-1% of a 90k store then costs 300-390 ms per
recall, while a plain tag query returning the same ~92 documents with their vectors
costs 1-3 ms (/work/notes/vsscope-diagnosis.md; bench/bench_scope_scan.py). So a scope
known to hold at most ``SCAN_LIMIT`` memories is read whole (``LIMIT 0 SCAN_LIMIT+1``:
the reply's total says when it has outgrown the limit) and ranked by the engine's own
COSINE distance (``1 - cos``, the ``__dist`` scale), exact where the HNSW walk is not.

Whether a filter is small is learned from replies, never asked for on its own
(``SizeClasses``): a scan's total refreshes its filter's entry; a filter not known small
sends its KNN with a ``LIMIT 0 0`` count beside it, in the same round trip, at most once
per ``LARGE_TTL_S``. RediSearch keeps the KNN: its ADHOC_BF policy does this in the engine.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .query import SCORE_ALIAS, VECTOR_FIELD, IndexLayout, MemoryFilter, build_filter, filter_search_args
from .replies import SearchHit

__all__ = [
    "LARGE_TTL_S",
    "SCAN_LIMIT",
    "SizeClasses",
    "count_args",
    "nearest",
    "scan_args",
]

# The most memories a scope may hold to be read whole rather than walked: ~1.5 KB of
# reply per 384-d vector plus its fields. Measured in bench/results/scope-scan.md.
SCAN_LIMIT = 1_000
# How long a filter counted above ``SCAN_LIMIT`` is believed to stay there before its
# KNN carries a count again (a scope shrinks only by deletions).
LARGE_TTL_S = 60.0
# Distinct filters remembered (oldest forgotten first): time windows make new ones.
MAX_FILTERS = 4_096


def scan_args(
    index: str,
    flt: MemoryFilter,
    layout: IndexLayout,
    return_fields: Sequence[str],
    *,
    limit: int = SCAN_LIMIT,
) -> list[str]:
    """FT.SEARCH of ``flt``'s matches with their vectors, at most ``limit + 1`` of them.

    The same filter text as the KNN (``query.build_filter``: same escaping, negations,
    ranges); the reply's first element is the filter's total, so one more than ``limit``
    says the answer is incomplete.
    """
    fields = [*dict.fromkeys([*return_fields, VECTOR_FIELD])]
    return filter_search_args(index, flt, layout=layout, return_fields=fields, limit=limit + 1)


def count_args(index: str, flt: MemoryFilter, layout: IndexLayout) -> list[str]:
    """FT.SEARCH counting ``flt``'s matches (``LIMIT 0 0``: the reply is the total only)."""
    return filter_search_args(index, flt, layout=layout, return_fields=None, limit=0)


def filter_key(flt: MemoryFilter, layout: IndexLayout) -> str:
    """What identifies a filter's matches: its engine text (``""``: no filter, never scanned)."""
    return build_filter(flt, layout)


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
    dim = int(vector.shape[0])
    rows: list[SearchHit] = []
    blobs: list[bytes] = []
    for hit in hits:
        blob = hit.fields.pop(VECTOR_FIELD, None)
        if not isinstance(blob, bytes | bytearray) or len(blob) != 4 * dim:
            continue
        if keep is not None and not keep(hit.fields):
            continue
        rows.append(hit)
        blobs.append(bytes(blob))
    if not rows or k <= 0:
        return []
    mat = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(rows), dim).astype(np.float64)
    q = vector.astype(np.float64)
    qn = float(np.linalg.norm(q))
    norms = np.linalg.norm(mat, axis=1) * qn
    dots = mat @ q
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = np.where(norms > 0.0, 1.0 - dots / np.where(norms > 0.0, norms, 1.0), 1.0)
    order = np.argsort(dist, kind="stable")[:k]
    out: list[SearchHit] = []
    for i in order.tolist():
        hit = rows[i]
        hit.fields[SCORE_ALIAS] = float(dist[i])
        out.append(hit)
    return out


@dataclass(slots=True)
class _Entry:
    total: int
    at: float


class SizeClasses:
    """Per filter: its last known number of matches and when it was learned (bounded LRU).

    ``small(key, now)``: known to hold at most ``limit`` (a scan answers it; each scan's
    total refreshes the entry, so a small entry never goes stale). ``needs_count(key, now)``:
    not known small and not counted within ``ttl`` (its KNN carries a count).
    """

    def __init__(self, *, limit: int = SCAN_LIMIT, ttl: float = LARGE_TTL_S, size: int = MAX_FILTERS) -> None:
        self.limit = limit
        self._ttl = ttl
        self._size = size
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def small(self, key: str) -> bool:
        entry = self._entries.get(key)
        if entry is None:
            return False
        self._entries.move_to_end(key)
        return entry.total <= self.limit

    def needs_count(self, key: str, now: float) -> bool:
        entry = self._entries.get(key)
        return entry is None or (entry.total > self.limit and now - entry.at >= self._ttl)

    def learn(self, key: str, total: int, now: float) -> None:
        self._entries[key] = _Entry(total, now)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def forget(self, key: str) -> None:
        self._entries.pop(key, None)
