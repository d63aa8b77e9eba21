"""A recall's main query on valkey-search: a scan of a small scope, else the KNN (``core.scope_scan``).

``Recall._search`` asks ``ScopeScan.plan`` for its main query and hands the replies to
``ScopeScan.hits``: the same hits (``__dist`` set, nearest first) whichever was sent. In
steady state neither path costs an extra round trip: a small scope's scan says its own
size; any other filtered query carries its filter's count (and the index's FT.INFO) at
most once per ``COUNT_TTL_S``, in the same pipeline. A filter never seen is sent its
bounded scan (``core.scope_scan.scan_bound``), which answers it whole when it is small.
The extra round trip is a scan whose total exceeds what it read (a never-seen filter
found large, or a scanned scope that has outgrown ``SCAN_LIMIT``): the KNN follows.

A filter with time bounds (``since`` / ``until``, ``as_of``, a window's own clause) is
decided by its scope (``core.scope_scan.scope_of``): a scope known worth scanning is
scanned under any window, its bounds never learned as a filter of their own (relative
bounds change every call). A time window's own queries (``tiers.time_recall``) are
planned here too, without counts of their own (``counts=False``): the recall's query
carries its scope's.

On RediSearch (its ADHOC_BF policy scans a small filter inside the engine) and for an
unfiltered recall nothing can be scanned: ``plan`` returns the KNN at once, the
unfiltered query's text built once per (index, k, fields) (``_knn_plan``).
"""

from __future__ import annotations

import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.codec import encode_vector
from ..core.ft_info import parse_ft_info
from ..core.query import IndexLayout, MemoryFilter, knn_search_args
from ..core.replies import SearchHit, SearchResult, parse_search_reply
from ..core.requests import _NO_FILTER as NO_FILTER  # an unfiltered recall's filter, built once
from ..core.scope_scan import (
    PREFILTERED,
    SizeClasses,
    count_args,
    filter_key,
    filter_shape,
    index_count_args,
    nearest,
    nearest_reply,
    scan_args,
    scope_of,
)
from .runtime import Runtime

__all__ = ["ScanPlan", "ScopeScan"]

_ALL = MemoryFilter()  # the index's count (an engine without FT.INFO's cluster totals)
_TEMPLATES = 64  # unfiltered KNN texts kept (one per index, k and field list in use)
_BIG_HISTORIES = 4_096  # scopes remembered whose history is too big to scan (a forgotten one: one scan)
_BLOB = 6
_PRIMARY_INFO = (
    1,
    2,
    0,
)  # ``FT.INFO <index> PRIMARY`` (the primaries' sum) checked on 1.2.1  # where ``knn_search_args`` puts the vector: FT.SEARCH idx query PARAMS 2 vec <blob>


@dataclass(slots=True)
class ScanPlan:
    """The main query to send (``args``), and the counts to send after everything else (``probe``).

    Not frozen: one is built per recall, and a frozen dataclass's ``__init__`` sets each
    field through ``object.__setattr__`` (a few µs for these 14).
    """

    args: list[Any]
    knn: Callable[[], list[Any]]  # the KNN's arguments (the scan's fallback)
    vector: np.ndarray[Any, np.dtype[np.float32]]
    k: int
    key: str = ""  # the filter's key a scan's total is learned for ("": nothing learned)
    scan: bool = False
    count_key: str = ""  # probe: the filter's count, learned for this key
    base_count: str = ""  # probe: the count of the scope a timed filter narrows, learned for this key
    count_index: bool = False  # probe (last): the index's size (FT.INFO, or a count)
    probe: tuple[list[str], ...] = ()
    limit: int = 0  # the most memories the scan reads whole (a never-seen filter: its probe)
    shape: str = ""  # a never-seen filter's ``filter_shape`` (its verdict is learned)
    rescan: Callable[[], list[str]] | None = None  # the whole scan (a probe found it small)
    info: bool = False  # the index's size comes as an FT.INFO reply (else a count)
    history: str = ""  # a history index scan: the scope's key, remembered when its history runs large


class ScopeScan:
    """Per store: the filters' and the index's sizes (``SizeClasses``), and the query each recall sends."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self.sizes = SizeClasses()
        self._templates: dict[tuple[str, int, tuple[str, ...]], tuple[IndexLayout, list[Any]]] = {}
        self._big_history: OrderedDict[str, None] = OrderedDict()  # scopes whose history outgrew a scan

    def scans(self) -> bool:
        """Whether this engine's queries are ever scanned (valkey-search with filter queries)."""
        caps = self._rt.index.caps
        return caps.engine == "valkey-search" and caps.filter_queries

    def plan(
        self,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        k: int,
        fields: Sequence[str],
        *,
        counts: bool = True,
    ) -> ScanPlan:
        """The query for ``k`` hits nearest ``vector`` in ``flt``, and the counts that ride with it.

        ``counts=False``: no count of its own (a window's query: the recall's carries its
        scope's and the index's).
        """
        index = self._rt.index
        scans = self.scans()
        if flt is NO_FILTER or not scans:
            plan = self._knn_plan(vector, flt, k, fields)
            if scans and counts and self.sizes.needs_index_count(time.monotonic()):
                # The index's size, which nothing else refreshes in a store recalled unscoped: what
                # a time window's bounded scan is sized by (``SizeClasses.bound``).
                plan.count_index, plan.probe, plan.info = True, self._index_probe(), self._info()
            return plan
        layout = index.layout
        key = filter_key(flt, layout)
        if not key:
            return self._knn_plan(vector, flt, k, fields)
        knn = _knn(index.name, layout, vector, flt, k, fields)
        sizes, now = self.sizes, time.monotonic()
        base = scope_of(flt)
        timed = base is not flt
        base_key = filter_key(base, layout) if timed else key
        base_total = sizes.total(base_key) if base_key else None
        limit, shape, learn, count_key, base_count = sizes.limit, "", key, "", ""
        if timed and base_key and counts and sizes.needs_count(base_key, now):
            base_count = base_key  # the scope's size, for this and the next windows over it
        if timed and base_total is not None and sizes.scan(base_key, k):
            scan, learn = True, ""  # its scope is worth scanning, so is the window: read whole
        elif timed and base_total is not None and base_total <= PREFILTERED * sizes.index_docs:
            scan = False  # a tiny scope: the engine scans it (and the window's part) itself
        else:
            if sizes.total(key) is not None:
                scan = sizes.scan(key, k)
            else:  # never seen (or forgotten): the bounded scan, unless this shape's misses run large
                sizes.seed_index(index.num_docs)
                bound, shape = sizes.bound(k), filter_shape(flt)
                limit = sizes.probe(shape, bound, counted=counts)
                scan, shape = limit > 0, shape if bound > 0 else ""
            # A timed filter's own count only while its text repeats (a relative window's never does).
            if (
                counts
                and not scan
                and sizes.needs_count(key, now)
                and (not timed or sizes.total(key) is not None)
            ):
                count_key = key
        info = self._info()
        count_index = counts and sizes.needs_index_count(now)
        probe: tuple[list[str], ...] = (count_args(index.name, flt, layout),) if count_key else ()
        if base_count:
            probe += (count_args(index.name, base, layout),)
        if count_index:
            probe += self._index_probe()
        rescan = (
            functools.partial(scan_args, index.name, flt, layout, fields, limit=sizes.limit)
            if learn
            else None
        )
        args = scan_args(index.name, flt, layout, fields, limit=limit) if scan else knn()
        return ScanPlan(
            args, knn, vector, k, learn, scan, count_key, base_count, count_index, probe, limit, shape, rescan,
            info,
        )  # fmt: skip

    def _info(self) -> bool:
        """Whether the index's size comes from FT.INFO (else a count: a cluster's older engine)."""
        return not self._rt.backend.cluster or self._rt.index.caps.version >= _PRIMARY_INFO

    def _index_probe(self) -> tuple[list[str]]:
        """The query that reads the index's size (``count_index``)."""
        index, cluster = self._rt.index, self._rt.backend.cluster
        if self._info():
            return (index_count_args(index.name, cluster=cluster),)
        return (count_args(index.name, _ALL, index.layout),)

    def history_plan(
        self, vector: np.ndarray[Any, np.dtype[np.float32]], flt: MemoryFilter, k: int, fields: Sequence[str]
    ) -> ScanPlan:
        """The history index's query for ``k`` versions nearest ``vector`` in ``flt`` (``history=True``).

        A scan of ``flt`` on that index when the scope it narrows (``scope_of``) is known to
        hold at most ``SCAN_LIMIT`` current memories: its past versions are read whole, not
        walked in the history index's graph (whose cost grows with every scope's history).
        A scope's history holds no more versions than its subjects were rewritten, so it is
        usually small too; a scan reads at most ``SizeClasses.bound(k)`` versions (the most
        a scan of the main index is worth at its size: a long window can hold more past
        versions than the scope has current memories); when a scan finds more than it
        read, its KNN follows (one more round trip) and that scope's history is walked from
        then on. Else the KNN.
        """
        index = self._rt.index
        hist = index.history
        knn = _knn(hist.name, hist.layout, vector, flt, k, fields)
        if self.scans():
            sizes, base_key = self.sizes, filter_key(scope_of(flt), index.layout)
            total = sizes.total(base_key) if base_key and base_key not in self._big_history else None
            if total is not None and total <= sizes.limit:
                # Read at most what a scan of the main index is worth at its size (``bound``):
                # a scope's versions valid in a long window can outnumber its current memories.
                limit = sizes.bound(k) or sizes.limit
                scan = scan_args(hist.name, flt, hist.layout, fields, limit=limit)
                return ScanPlan(scan, knn, vector, k, scan=True, limit=limit, history=base_key)
        args = knn()
        return ScanPlan(args, lambda: args, vector, k)

    def _knn_plan(
        self, vector: np.ndarray[Any, np.dtype[np.float32]], flt: MemoryFilter, k: int, fields: Sequence[str]
    ) -> ScanPlan:
        """The KNN alone; an unfiltered one's text built once per (index, k, fields), only its vector set."""
        index = self._rt.index
        if flt is NO_FILTER:
            layout = index.layout
            tkey = (index.name, k, tuple(fields))
            cached = self._templates.get(tkey)
            if cached is None or cached[0] is not layout:
                if len(self._templates) >= _TEMPLATES:
                    self._templates.clear()
                template = knn_search_args(index.name, b"", k=k, flt=flt, layout=layout, return_fields=fields)
                assert template[_BLOB] == b"", "knn_search_args moved the vector"
                cached = self._templates[tkey] = (layout, template)
            args = list(cached[1])
            args[_BLOB] = encode_vector(vector)
        else:
            args = knn_search_args(
                index.name, encode_vector(vector), k=k, flt=flt, layout=index.layout, return_fields=fields
            )
        return ScanPlan(args, lambda: args, vector, k)

    async def hits(
        self, plan: ScanPlan, replies: list[Any], *, keep: Callable[[Mapping[str, Any]], bool] | None = None
    ) -> list[SearchHit]:
        """The main query's hits; pops the probe's replies (the last ones) off ``replies``.

        ``keep``: the exact check a case-insensitive index needs, applied before the top k.
        """
        now, sizes = time.monotonic(), self.sizes
        if plan.count_index:
            reply = replies.pop()
            sizes.learn_index(parse_ft_info(reply).num_docs if plan.info else _total(reply), now)
        if plan.base_count:
            sizes.learn(plan.base_count, _total(replies.pop()), now)
        if plan.count_key:
            total = _total(replies.pop())
            sizes.learn(plan.count_key, total, now)
            if plan.shape:
                sizes.verdict(plan.shape, total <= sizes.bound(plan.k))
        if not plan.scan:
            return parse_search_reply(replies[0]).hits
        # The rows' vectors read by position, hits built for the nearest only (None: it held more).
        total, found = nearest_reply(replies[0], plan.vector, plan.k, limit=plan.limit, keep=keep)
        if plan.key:
            sizes.learn(plan.key, total, now)
        if plan.shape:
            sizes.verdict(plan.shape, total <= sizes.bound(plan.k))
        if found is not None:
            return found
        if plan.history:
            self._big_history[plan.history] = None
            while len(self._big_history) > _BIG_HISTORIES:
                self._big_history.popitem(last=False)
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


def _knn(
    name: str,
    layout: IndexLayout,
    vector: np.ndarray[Any, np.dtype[np.float32]],
    flt: MemoryFilter,
    k: int,
    fields: Sequence[str],
) -> Callable[[], list[Any]]:
    """The KNN query of ``flt`` on one index (the memories' or the history's), built when a plan needs it."""
    return functools.partial(
        knn_search_args, name, encode_vector(vector), k=k, flt=flt, layout=layout, return_fields=fields
    )
