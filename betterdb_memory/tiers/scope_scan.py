"""A recall's main query on valkey-search: a scan of a small scope, else the KNN (``core.scope_scan``).

``Recall._search`` asks ``ScopeScan.plan`` for its main query and hands the replies to
``ScopeScan.hits``: the same hits (``__dist`` set, nearest first) whichever was sent. In
steady state neither path costs an extra round trip: a small scope's scan says its own
size; any other filtered query carries its filter's count (and the index's) at most once
per ``COUNT_TTL_S``, in the same pipeline. A filter never seen is sent its bounded scan
(``core.scope_scan.scan_bound``), which answers it whole when it is small. The extra round
trip is a scan whose total exceeds what it read (a never-seen filter found large, or a
scanned scope that has outgrown ``SCAN_LIMIT``): the KNN follows.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.codec import encode_vector
from ..core.query import MemoryFilter, knn_search_args
from ..core.replies import SearchHit, SearchResult, parse_search_reply
from ..core.scope_scan import SizeClasses, count_args, filter_key, filter_shape, nearest, scan_args
from .runtime import Runtime

__all__ = ["ScanPlan", "ScopeScan"]

_ALL = MemoryFilter()  # the index's count


@dataclass(frozen=True, slots=True)
class ScanPlan:
    """The main query to send (``args``), and the counts to send after everything else (``probe``)."""

    args: list[Any]
    knn: Callable[[], list[Any]]  # the KNN's arguments (the scan's fallback)
    vector: np.ndarray[Any, np.dtype[np.float32]]
    k: int
    key: str = ""  # the filter's key when it is scanned or counted
    scan: bool = False
    count_filter: bool = False  # probe: the filter's count, then (count_index) the index's
    count_index: bool = False
    probe: tuple[list[str], ...] = ()
    limit: int = 0  # the most memories the scan reads whole (a never-seen filter: its probe)
    shape: str = ""  # a never-seen filter's ``filter_shape`` (its verdict is learned)
    rescan: Callable[[], list[str]] | None = None  # the whole scan (a probe found it small)


class ScopeScan:
    """Per store: the filters' and the index's sizes (``SizeClasses``), and the query each recall sends."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self.sizes = SizeClasses()

    def plan(
        self, vector: np.ndarray[Any, np.dtype[np.float32]], flt: MemoryFilter, k: int, fields: Sequence[str]
    ) -> ScanPlan:
        index, sizes = self._rt.index, self.sizes
        knn = functools.partial(
            knn_search_args, index.name, encode_vector(vector), k=k, flt=flt, layout=index.layout,
            return_fields=fields,
        )  # fmt: skip
        caps = index.caps
        key = filter_key(flt, index.layout) if caps.engine == "valkey-search" and caps.filter_queries else ""
        if not key:
            return ScanPlan(knn(), knn, vector, k)
        now, limit, shape = time.monotonic(), sizes.limit, ""
        if sizes.total(key) is not None:
            scan = sizes.scan(key, k)
        else:  # never seen (or forgotten): the bounded scan, unless this shape's misses run large
            sizes.seed_index(index.num_docs)
            bound, shape = sizes.bound(k), filter_shape(flt)
            limit = sizes.probe(shape, bound)
            scan, shape = limit > 0, shape if bound > 0 else ""
        count_filter = not scan and sizes.needs_count(key, now)
        count_index = sizes.needs_index_count(now)
        probe: tuple[list[str], ...] = (count_args(index.name, flt, index.layout),) if count_filter else ()
        if count_index:
            probe += (count_args(index.name, _ALL, index.layout),)
        rescan = functools.partial(scan_args, index.name, flt, index.layout, fields, limit=sizes.limit)
        args = scan_args(index.name, flt, index.layout, fields, limit=limit) if scan else knn()
        return ScanPlan(
            args, knn, vector, k, key, scan, count_filter, count_index, probe, limit, shape, rescan
        )

    async def hits(
        self, plan: ScanPlan, replies: list[Any], *, keep: Callable[[Mapping[str, Any]], bool] | None = None
    ) -> list[SearchHit]:
        """The main query's hits; pops the probe's replies (the last ones) off ``replies``.

        ``keep``: the exact check a case-insensitive index needs, applied before the top k.
        """
        now, sizes = time.monotonic(), self.sizes
        if plan.count_index:
            sizes.learn_index(_total(replies.pop()), now)
        if plan.count_filter:
            total = _total(replies.pop())
            sizes.learn(plan.key, total, now)
            if plan.shape:
                sizes.verdict(plan.shape, total <= sizes.bound(plan.k))
        result = parse_search_reply(replies[0])
        if not plan.scan:
            return result.hits
        total = max(result.total, len(result.hits))
        sizes.learn(plan.key, total, now)
        if plan.shape:
            sizes.verdict(plan.shape, total <= sizes.bound(plan.k))
        if total <= plan.limit:
            return nearest(result.hits, plan.vector, plan.k, keep=keep)
        # More than the scan read: a first probe of a scope worth scanning reads it whole;
        # one found large (or outgrown since last seen) is walked after all.
        rescan = plan.rescan if plan.rescan is not None and sizes.scan(plan.key, plan.k) else None
        result = await self._send(rescan() if rescan is not None else plan.knn())
        if rescan is None:
            return result.hits
        total = max(result.total, len(result.hits))
        sizes.learn(plan.key, total, now)
        if total <= sizes.limit:
            return nearest(result.hits, plan.vector, plan.k, keep=keep)
        return (await self._send(plan.knn())).hits  # it grew past the limit in between

    async def _send(self, args: list[Any]) -> SearchResult:
        search = functools.partial(self._rt.backend.search, "recall", args)
        return parse_search_reply(await self._rt.index.with_index("recall", search))


def _total(reply: Any) -> int:
    return parse_search_reply(reply, nocontent=True).total
