"""Reads of superseded versions: ``as_of`` beside the main index, ``get``'s fallback, erasure.

A superseded version lives in its history document ``<name>:hist:{<name>:mem:<id>}``,
indexed by ``<name>:hist:idx`` (``backend.history_index``). A read ``as_of`` a past
instant asks both indexes in one pipelined round trip, the main one with
``validity.valid_at(t)`` and the history one with ``validity.history_valid_at(t)``
(``MemoryFilter(history=True)`` selects that clause), and merges the answers here: a
recall by distance, a list by ``created_at``, a count by summing the two totals.
``count``, caps, ``stats().items`` and Monitor's count never come here: current
memories only.
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backend.commands import Step
from ..core.codec import as_text, to_float
from ..core.filter_query import require_filter_queries
from ..core.models import MemoryItem, item_from_fields
from ..core.query import (
    CHECK_FIELDS,
    ITEM_FIELDS,
    SCORE_ALIAS,
    MemoryFilter,
    filter_search_args,
    item_matches,
)
from ..core.replies import SearchHit, parse_search_reply
from ..core.slots import deletes
from .runtime import Runtime

if TYPE_CHECKING:
    from .scope_scan import ScanPlan, ScopeScan

__all__ = ["HISTORY_ITEM_FIELDS", "History"]

#: A superseded version is read with ``valid_until`` and ``superseded_by`` too.
HISTORY_ITEM_FIELDS: tuple[str, ...] = (*ITEM_FIELDS, "valid_until")

# The most a scope page of history deletes at once (``forget_by_scope``).
_PAGE = 500
# The most one filter query returns (valkey-search's default maximum; ``scopes.SCAN_LIMIT``).
SCAN_LIMIT = 10_000


class History:
    """The history index's reads and deletions, for recall, list, count, get and erasure."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt

    @property
    def index(self) -> str:
        return self._rt.index.history.name

    def memory_id_of(self, key: str) -> str:
        """The memory id of a history document key (``<name>:hist:{<name>:mem:<id>}``)."""
        head = self._rt.keys.history_prefix() + "{" + self._rt.keys.doc_prefix
        return key[len(head) : -1] if key.startswith(head) and key.endswith("}") else key

    def key(self, memory_id: str) -> str:
        """The history document of a memory (``ConsolidationKeys.hist_doc``'s key)."""
        return f"{self._rt.keys.history_prefix()}{{{self._rt.keys.doc(memory_id)}}}"

    def item(self, hit: SearchHit) -> MemoryItem:
        return item_from_fields(
            self.memory_id_of(hit.key), hit.fields, fact_source=self._rt.settings.fact_source
        )

    # -- as_of ------------------------------------------------------------------------------

    def knn_plan(
        self,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        k: int,
        fields: Sequence[str],
        scan: ScopeScan,
    ) -> ScanPlan:
        """The history half of an ``as_of`` recall (sent in the main query's round trip).

        Its KNN, or on valkey-search a scan of the same filter when the recall's scope is
        known small (``ScopeScan.history_plan``); ``pairs(await scan.hits(plan, [reply]))``
        reads either.
        """
        wanted = tuple(dict.fromkeys([*fields, "valid_until", "created_at", "valid_from"]))
        return scan.history_plan(vector, dataclasses.replace(flt, history=True), k, wanted)

    def knn_hits(self, reply: Any, flt: MemoryFilter) -> builtins.list[tuple[MemoryItem, float]]:
        """(item, distance) of the history half's reply, checked exactly (``valid_until`` read)."""
        return self.pairs(parse_search_reply(reply).hits, flt)

    def pairs(self, hits: Sequence[SearchHit], flt: MemoryFilter) -> builtins.list[tuple[MemoryItem, float]]:
        """(item, distance) of the history index's nearest ``hits``, checked exactly (``valid_until`` read)."""
        now_ms = time.time() * 1000
        out: builtins.list[tuple[MemoryItem, float]] = []
        for hit in hits:
            f = hit.fields
            if SCORE_ALIAS not in f or not item_matches(f, flt):
                continue
            expires = to_float(as_text(f.get("expires_at")) or 0)
            if expires and expires <= now_ms:
                continue
            out.append((self.item(hit), min(2.0, max(0.0, to_float(f[SCORE_ALIAS])))))
        return out

    def filter_args(self, flt: MemoryFilter, *, offset: int, limit: int) -> builtins.list[str]:
        """A filter read of the history index, newest ``created_at`` first (``limit=0`` counts)."""
        return filter_search_args(
            self.index,
            dataclasses.replace(flt, history=True),
            layout=self._rt.index.history.layout,
            return_fields=HISTORY_ITEM_FIELDS if limit else None,
            sortby=("created_at", False) if limit else None,
            offset=offset,
            limit=limit,
        )

    async def list_as_of(
        self, flt: MemoryFilter, *, offset: int, limit: int, scan_limit: int
    ) -> tuple[int, builtins.list[MemoryItem]]:
        """(total, page) of the memories valid at ``flt.as_of``, newest ``created_at`` first.

        Both indexes in one round trip, each read to ``offset + limit`` (sorted by the
        engine), merged here. On an index another library created (exact check in the
        client) the main index is read whole (up to ``scan_limit``) and checked.
        """
        rt = self._rt
        caps = rt.index.caps
        require_filter_queries(caps, "list(as_of=)")
        check = rt.index.needs_check(flt)
        depth = min(scan_limit, offset + limit)
        main = filter_search_args(
            rt.index.name,
            flt,
            layout=rt.index.layout,
            return_fields=ITEM_FIELDS,
            sortby=("created_at", False) if caps.sortby else None,
            limit=scan_limit if check or not caps.sortby else depth,
        )
        hist = self.filter_args(flt, offset=0, limit=depth)
        replies = await rt.index.with_index(
            "list", lambda: rt.backend.pipeline("list", [], searches=[main, hist])
        )
        current, past = parse_search_reply(replies[0]), parse_search_reply(replies[1])
        mains = [h for h in current.hits if not check or item_matches(h.fields, flt)]
        total = (len(mains) if check else current.total) + past.total
        items = [rt.item(h) for h in mains] + [self.item(h) for h in past.hits]
        items.sort(key=lambda i: (i.created_at, i.id), reverse=True)
        return total, items[offset : offset + limit]

    async def count_as_of(self, flt: MemoryFilter) -> int:
        """How many memories were valid at ``flt.as_of``: two ``LIMIT 0 0`` counts, one round trip."""
        rt = self._rt
        require_filter_queries(rt.index.caps, "count(as_of=)")
        check = rt.index.needs_check(flt)  # another library's index: read the matches, check each
        main = filter_search_args(
            rt.index.name,
            flt,
            layout=rt.index.layout,
            return_fields=CHECK_FIELDS if check else None,
            limit=SCAN_LIMIT if check else 0,
        )
        hist = self.filter_args(flt, offset=0, limit=0)
        replies = await rt.index.with_index(
            "count", lambda: rt.backend.pipeline("count", [], searches=[main, hist])
        )
        past = parse_search_reply(replies[1], nocontent=True).total
        if check:
            return past + sum(1 for h in parse_search_reply(replies[0]).hits if item_matches(h.fields, flt))
        return past + parse_search_reply(replies[0], nocontent=True).total

    # -- get ----------------------------------------------------------------------------------

    def reads(self, ids: Sequence[str]) -> builtins.list[Step]:
        """The history documents' reads ``get`` sends with its own (``past_items`` reads the replies)."""
        return [("HMGET", self.key(mid), *HISTORY_ITEM_FIELDS) for mid in ids]

    def past_items(
        self, ids: Sequence[str], found: Sequence[MemoryItem | None], rows: Sequence[Any]
    ) -> builtins.list[MemoryItem | None]:
        """``found`` with each memory no longer current replaced by its superseded version, if any."""
        out: builtins.list[MemoryItem | None] = []
        now_ms = time.time() * 1000
        for mid, item, row in zip(ids, found, rows, strict=True):
            if item is None and row and row[0] is not None:
                fields = dict(zip(HISTORY_ITEM_FIELDS, row, strict=True))
                expires = to_float(as_text(fields.get("expires_at")) or 0)
                if not expires or expires > now_ms:
                    item = item_from_fields(mid, fields, fact_source=self._rt.settings.fact_source)
            out.append(item)
        return out

    # -- erasure --------------------------------------------------------------------------------

    async def forget(self, flt: MemoryFilter) -> int:
        """Delete every history document matching ``flt`` (a scope, tags, a window); how many."""
        deleted = 0
        flt = dataclasses.replace(flt, history=True, as_of=None)
        args = filter_search_args(
            self.index, flt, layout=self._rt.index.history.layout, return_fields=None, limit=_PAGE
        )
        while True:
            reply = await self._rt.index.with_index(
                "forget_by_scope", lambda: self._rt.backend.search("forget_by_scope", args)
            )
            result = parse_search_reply(reply, nocontent=True)
            if not result.hits:
                return deleted
            dels, _ = deletes([h.key for h in result.hits], cluster=self._rt.backend.cluster)
            replies = await self._rt.backend.pipeline("forget_by_scope", dels)
            removed = sum(int(r) for r in replies)
            deleted += removed
            if removed == 0 or result.total <= len(result.hits):
                return deleted
