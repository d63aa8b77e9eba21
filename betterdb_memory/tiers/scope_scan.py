"""A recall's main query on valkey-search: a scan of a small scope, else the KNN (``core.scope_scan``).

``Recall._search`` asks ``ScopeScan.plan`` for its main query and hands the replies to
``ScopeScan.hits``: the same hits (``__dist`` set, nearest first) whichever was sent. In
steady state neither path costs an extra round trip: a small scope's scan says its own
size, a large one's KNN carries a count once per ``LARGE_TTL_S``. The one extra round
trip is a scope outgrowing ``SCAN_LIMIT``: its scan then falls back to the KNN.
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
from ..core.replies import SearchHit, parse_search_reply
from ..core.scope_scan import SizeClasses, count_args, filter_key, nearest, scan_args
from .runtime import Runtime

__all__ = ["ScanPlan", "ScopeScan"]


@dataclass(frozen=True, slots=True)
class ScanPlan:
    """The main query to send (``args``), and any count to send after everything else (``probe``)."""

    args: list[Any]
    knn: Callable[[], list[Any]]  # the KNN's arguments (the scan's fallback)
    vector: np.ndarray[Any, np.dtype[np.float32]]
    k: int
    key: str = ""  # the filter's key when it is scanned or counted
    scan: bool = False
    probe: tuple[list[str], ...] = ()


class ScopeScan:
    """Per store: which filters are small (``SizeClasses``), and the query each recall sends."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self.sizes = SizeClasses()

    def plan(
        self, vector: np.ndarray[Any, np.dtype[np.float32]], flt: MemoryFilter, k: int, fields: Sequence[str]
    ) -> ScanPlan:
        index = self._rt.index
        knn = functools.partial(
            knn_search_args, index.name, encode_vector(vector), k=k, flt=flt, layout=index.layout,
            return_fields=fields,
        )  # fmt: skip
        caps = index.caps
        key = filter_key(flt, index.layout) if caps.engine == "valkey-search" and caps.filter_queries else ""
        if not key:
            return ScanPlan(knn(), knn, vector, k)
        if self.sizes.small(key):
            return ScanPlan(scan_args(index.name, flt, index.layout, fields, limit=self.sizes.limit), knn, vector,
                            k, key, scan=True)  # fmt: skip
        if self.sizes.needs_count(key, time.monotonic()):
            return ScanPlan(knn(), knn, vector, k, key, probe=(count_args(index.name, flt, index.layout),))
        return ScanPlan(knn(), knn, vector, k)

    async def hits(
        self, plan: ScanPlan, replies: list[Any], *, keep: Callable[[Mapping[str, Any]], bool] | None = None
    ) -> list[SearchHit]:
        """The main query's hits; pops the probe's reply (the last) off ``replies``.

        ``keep``: the exact check a case-insensitive index needs, applied before the top k.
        """
        now = time.monotonic()
        if plan.probe:
            self.sizes.learn(plan.key, parse_search_reply(replies.pop(), nocontent=True).total, now)
        result = parse_search_reply(replies[0])
        if not plan.scan:
            return result.hits
        total = max(result.total, len(result.hits))
        self.sizes.learn(plan.key, total, now)
        if total <= self.sizes.limit:
            return nearest(result.hits, plan.vector, plan.k, keep=keep)
        # Outgrown since last seen: the KNN after all (the one extra round trip).
        args = plan.knn()
        search = functools.partial(self._rt.backend.search, "recall", args)
        return parse_search_reply(await self._rt.index.with_index("recall", search)).hits
