"""Reading and deleting memories by scope: ``count``, ``list``, ``forget_by_scope``.

The index is the only record of which memories a scope holds, so nothing here can
drift from the documents: a memory another client deletes (``DEL``, as BetterDB
Monitor's forget does) or that expires is gone from every count and list at once.

Each read is one filter query (RediSearch; valkey-search >= 1.1), sorted by
``created_at`` where the engine has SORTBY (valkey-search >= 1.2) and in the client
otherwise. valkey-search 1.0 has no query without KNN, so there a scope is read with
a KNN query over the filter (``_scan``), at most ``SCAN_LIMIT`` memories a call.
Results are checked against the raw scope values (``query.item_matches``) so an index
another library created (case-insensitive TAGs) never widens a scope.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..core.codec import as_text, encode_vector
from ..core.keys import Scope
from ..core.models import MemoryPage
from ..core.options import MemoryListOptions
from ..core.query import (
    ITEM_FIELDS,
    MemoryFilter,
    filter_search_args,
    knn_search_args,
    with_times,
)
from ..core.replies import SearchHit, parse_search_reply
from ..core.requests import TimeInput
from ..core.validation import check_int, check_tags
from ..core.where import check_fields, result_matches
from ..errors import ValidationError
from .history import History
from .runtime import Runtime

__all__ = ["SCAN_LIMIT", "ScopeReader", "scope_filter"]

log = logging.getLogger(__name__)

#: The most memories one query returns (valkey-search's default maximum KNN k).
SCAN_LIMIT = 10_000


class ScopeReader:
    """``count``, ``list`` and the scope reads other parts share (``scan``, ``scan_all``, ``scan_ordered``)."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._history = History(rt)

    async def search(self, args: Sequence[Any], operation: str) -> Any:
        return await self._rt.index.with_index(operation, lambda: self._rt.backend.search(operation, args))

    async def scan(
        self,
        flt: MemoryFilter,
        fields: Sequence[str],
        *,
        operation: str,
        sortby: tuple[str, bool] | None = None,
        offset: int = 0,
        limit: int = SCAN_LIMIT,
    ) -> tuple[int | None, builtins.list[SearchHit]]:
        """(exact total or None when unknown, hits) of a filter read, exactly checked and sorted.

        Without SORTBY in the engine, or without filter queries at all (valkey-search
        1.0: a KNN query over the filter), up to ``SCAN_LIMIT`` hits are read and
        sorted, offset and limited in the client.
        """
        caps = self._rt.index.capabilities
        assert caps is not None
        check = self._rt.index.needs_check(flt)
        want = tuple(dict.fromkeys([*fields, *check_fields(flt, check), *(sortby[:1] if sortby else ())]))
        server_sort = sortby is not None and caps.sortby and caps.filter_queries
        # The server pages only when its matches are the exact ones: with a client-side
        # check (another library's case-insensitive index) a page of the engine's
        # matches may hold none of ours, so read up to SCAN_LIMIT and page here.
        paged_on_server = caps.filter_queries and (server_sort or sortby is None) and not check
        if caps.filter_queries:
            args: list[Any] = filter_search_args(
                self._rt.index.name,
                flt,
                layout=self._rt.index.layout,
                return_fields=want,
                sortby=sortby if server_sort else None,
                offset=offset if paged_on_server else 0,
                limit=limit if paged_on_server else SCAN_LIMIT,
            )
        else:
            probe = np.zeros(max(1, self._rt.embedder.dimensions), dtype=np.float32)
            probe[0] = 1.0
            args = knn_search_args(
                self._rt.index.name,
                encode_vector(probe),
                k=SCAN_LIMIT,
                flt=flt,
                layout=self._rt.index.layout,
                return_fields=want,
            )
        result = parse_search_reply(await self.search(args, operation))
        hits = [h for h in result.hits if result_matches(h.fields, flt, check)]
        all_fetched = result.total <= len(result.hits)
        total: int | None = None
        if not check and caps.filter_queries:
            total = result.total
        elif all_fetched and (not paged_on_server or offset == 0):
            total = len(hits)
        if sortby is not None and not server_sort:
            name, ascending = sortby
            hits.sort(key=lambda h: float(as_text(h.fields.get(name)) or 0), reverse=not ascending)
        if not paged_on_server:
            hits = hits[offset : offset + limit]
        return total, hits

    async def count_exact(self, flt: MemoryFilter, operation: str) -> int:
        _, hits = await self.scan_all(flt, (), operation=operation)
        return len(hits)

    async def scan_all(
        self, flt: MemoryFilter, fields: Sequence[str], *, operation: str
    ) -> tuple[int, builtins.list[SearchHit]]:
        """Every match (up to ``SCAN_LIMIT``), exactly checked, unsorted."""
        caps = self._rt.index.capabilities
        assert caps is not None
        check = self._rt.index.needs_check(flt)
        want = tuple(dict.fromkeys([*fields, *check_fields(flt, check)]))
        if caps.filter_queries:
            args: list[Any] = filter_search_args(
                self._rt.index.name,
                flt,
                layout=self._rt.index.layout,
                return_fields=want or None,
                limit=SCAN_LIMIT,
            )
        else:
            probe = np.zeros(max(1, self._rt.embedder.dimensions), dtype=np.float32)
            probe[0] = 1.0
            args = knn_search_args(
                self._rt.index.name, encode_vector(probe), k=SCAN_LIMIT, flt=flt, layout=self._rt.index.layout,
                return_fields=want or None,
            )  # fmt: skip
        result = parse_search_reply(await self.search(args, operation), nocontent=not want)
        hits = [h for h in result.hits if result_matches(h.fields, flt, check)]
        return len(hits), hits

    async def scan_ordered(
        self, flt: MemoryFilter, fields: Sequence[str], *, operation: str, page: int = 1000
    ) -> builtins.list[SearchHit]:
        """Every match, oldest first (ties by id), read ``page`` at a time: no 10,000 ceiling.

        Each page is ``SORTBY created_at`` from the last time seen; the memories at a
        page's last millisecond are then read exactly (``@created_at:[t t]``) and ordered
        by id, so ties are neither skipped nor repeated whatever order the engine gives
        them. Without SORTBY (valkey-search < 1.2) one read of up to ``SCAN_LIMIT``,
        sorted here.
        """
        caps = self._rt.index.capabilities
        assert caps is not None
        want = tuple(dict.fromkeys([*fields, "created_at"]))

        def ts(h: SearchHit) -> int:
            return int(float(as_text(h.fields.get("created_at")) or 0))

        def order(hits: builtins.list[SearchHit]) -> builtins.list[SearchHit]:
            return sorted(hits, key=lambda h: (ts(h), h.key))

        if not (caps.sortby and caps.filter_queries):
            total, hits = await self.scan_all(flt, want, operation=operation)
            if total >= SCAN_LIMIT:
                log.warning(
                    "%s: read the first %d matches only (no SORTBY on this engine)", operation, SCAN_LIMIT
                )
            return order(hits)
        out: builtins.list[SearchHit] = []
        lo = flt.min_created_at
        while True:
            _, hits = await self.scan(
                replace(flt, min_created_at=lo),
                want,
                operation=operation,
                sortby=("created_at", True),
                limit=page,
            )
            if not hits:
                return out
            last = max(ts(h) for h in hits)
            out.extend(order([h for h in hits if ts(h) < last]))
            _, tied = await self.scan_all(
                replace(flt, min_created_at=last, max_created_at=last), want, operation=operation
            )
            out.extend(order(tied))
            if flt.max_created_at is not None and last >= flt.max_created_at:
                return out
            lo = last + 1

    # -- public -------------------------------------------------------------------------------

    async def count(
        self,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> int:
        """Number of live memories matching a scope (None = any) and carrying all ``tags``.

        Current memories only, unless ``as_of``: then what was valid at that instant,
        superseded versions included. ``since`` / ``until``: ``valid_from`` in the window.
        ``where``: a metadata filter, as in ``list`` (one index query, counted by the engine).
        """
        flt = with_times(
            scope_filter(thread_id=thread_id, agent_id=agent_id, namespace=namespace, tags=tags),
            as_of=as_of, since=since, until=until,
        )  # fmt: skip
        node = self._rt.parse_where(where)
        await self._rt.index.ensure_ready()
        flt = self._rt.with_where(flt, node, operation="count", filter_only=True)
        # A subject a crash left half-written: looked for beside the count, repaired, counted again.
        return await self._rt.read("count", lambda: self._count(flt))

    async def _count(self, flt: MemoryFilter) -> int:
        if flt.as_of is not None:
            return await self._history.count_as_of(flt)
        caps = self._rt.index.capabilities
        assert caps is not None
        if caps.filter_queries and not self._rt.index.needs_check(flt):
            reply = await self.search(
                filter_search_args(self._rt.index.name, flt, layout=self._rt.index.layout, limit=0), "count"
            )
            return parse_search_reply(reply, nocontent=True).total
        return await self.count_exact(flt, "count")

    async def list(
        self,
        options: MemoryListOptions | None = None,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        cursor: str | None = None,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> MemoryPage:
        """Memories of a scope, newest first: ``items``, the ``total`` matching, ``next_cursor``.

        Takes the reference's ``MemoryListOptions`` or the same fields as keywords.
        ``limit`` defaults to 20 (1..1000); page on with ``offset`` or ``next_cursor``.
        ``as_of``: what was valid at that instant, superseded versions included (with
        ``valid_until``). ``since`` / ``until``: ``valid_from`` in ``[since, until)``.

        ``where``: a filter on the built-in fields (``thread_id``, ``agent_id``,
        ``namespace``, ``tags``, ``source``, ``importance``, ``created_at``,
        ``valid_from``) and the store's ``metadata_fields``, ANDed with the scope, e.g.
        ``{"priority": {"$gte": 2}, "project": {"$in": ["apollo", "gemini"]}}``.
        MongoDB's operators and meaning, answered by the index (never a scan):

        ===============================  ==============================================
        ``{"f": v}`` / ``$eq``           equal (a tag list field: any of its values)
        ``$ne``                          not equal; matches memories without ``f``
        ``$gt $gte $lt $lte``            numeric fields; false when ``f`` is missing
        ``$in`` / ``$nin``               any of / none of a non-empty list (``$nin``
                                         matches memories without ``f``)
        ``$exists``                      ``f`` present (numeric and declared fields)
        ``$and`` / ``$or``               a non-empty list of filters
        ``$not``                         one filter
        ===============================  ==============================================

        Times (``created_at``, ``valid_from``) take epoch ms or a ``datetime``. At most
        8 levels of ``$and``/``$or``/``$not`` and 128 terms. A mistake (an undeclared
        field, a wrong-typed value, an unknown operator, an empty list) is a
        ``ValidationError`` (``validation.filter_*``) before any I/O; an engine without
        filter-only queries (valkey-search 1.0) raises ``CommandNotSupportedError``.
        """
        if options is not None:
            if not isinstance(options, MemoryListOptions):
                raise ValidationError(
                    "list() takes a MemoryListOptions or keyword arguments",
                    code="validation.type",
                    details={"argument": "options"},
                )
            thread_id = options.thread_id if thread_id is None else thread_id
            agent_id = options.agent_id if agent_id is None else agent_id
            namespace = options.namespace if namespace is None else namespace
            tags = options.tags if tags is None else tags
            limit = options.limit if limit is None else limit
            offset = options.offset if offset is None else offset
        limit = 20 if limit is None else limit
        limit = check_int(limit, "limit", minimum=1, maximum=1000)
        if cursor is not None:
            if offset is not None:
                raise ValidationError(
                    "pass offset or cursor, not both",
                    code="validation.argument",
                    details={"argument": "cursor"},
                )
            offset = _parse_cursor(cursor)
        offset = 0 if offset is None else offset
        offset = check_int(offset, "offset", minimum=0, maximum=SCAN_LIMIT)
        flt = with_times(
            scope_filter(thread_id=thread_id, agent_id=agent_id, namespace=namespace, tags=tags),
            as_of=as_of, since=since, until=until,
        )  # fmt: skip
        node = self._rt.parse_where(where)
        await self._rt.index.ensure_ready()
        flt = self._rt.with_where(flt, node, operation="list", filter_only=True)
        # A subject a crash left half-written: looked for beside the page, repaired, read again.
        return await self._rt.read("list", lambda: self._list(flt, offset, limit))

    async def _list(self, flt: MemoryFilter, offset: int, limit: int) -> MemoryPage:
        if flt.as_of is not None:
            found, page = await self._history.list_as_of(
                flt, offset=offset, limit=limit, scan_limit=SCAN_LIMIT
            )
            nxt = offset + len(page)
            return MemoryPage(page, str(nxt) if nxt < found and page else None, found)
        total, hits = await self.scan(
            flt, ITEM_FIELDS, operation="list", sortby=("created_at", False), offset=offset, limit=limit
        )
        items = [self._rt.item(h) for h in hits]
        if total is None:
            total = await self.count_exact(flt, "list")
        nxt = offset + len(items)
        return MemoryPage(items, str(nxt) if nxt < total and items else None, total)


def scope_filter(
    *,
    thread_id: object,
    agent_id: object,
    namespace: object,
    tags: object,
    live_only: bool = True,
) -> MemoryFilter:
    """The filter of a scope read: validated selectors, live memories only unless told."""
    return MemoryFilter(
        scope=Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id),
        tags=check_tags(tags),
        exclude_expired_at=int(time.time() * 1000) if live_only else None,
    )


def _parse_cursor(cursor: object) -> int:
    if isinstance(cursor, str) and cursor.isdigit():
        return int(cursor)
    raise ValidationError("cursor is not one this store returned", code="validation.cursor")
