"""A LangGraph ``BaseStore`` over a ``MemoryStore``'s long-term (L2) memories.

``graph.compile(store=LangGraphStore(store))`` gives every node a ``store`` whose items
are memories: searchable by meaning (``search(ns, query=...)`` is ``recall``), scoped,
expiring, visible to BetterDB Monitor and to ``store.recall`` like any other memory.

How an item is kept (one memory per ``(namespace, key)``):

* **id**: ``lg-`` + SHA-256 of ``[scope, namespace, key]`` (``item_id``), so a put is
  ``remember(id=...)`` (an upsert: ``created_at`` survives, the text is re-embedded only
  when it changed), a get is ``get_many``, a delete is ``forget``.
* **scope**: the memory's ``namespace`` field is the adapter's ``scope`` (default
  ``"langgraph"``; ``<scope>:unindexed`` for items with nothing to embed, so
  ``recall`` never ranks them), and its ``tags`` are one hash per namespace prefix
  (``prefix_tag``: ``()``, ``(a,)``, ``(a, b)``, ...), so a search of any prefix is
  one exact TAG query. Labels may hold anything LangGraph allows (``,``, spaces,
  newlines): only hashes reach the index.
* **the item as written** (namespace tuple, key, value, update time, TTL) is the
  memory's ``metadata["langgraph"]``; everything read back, ``list_namespaces``
  included, comes from there, never from process memory, so namespaces are listed
  as written however opaque their hashes are.
* **text**: the value's ``index`` fields (LangGraph's ``IndexConfig["fields"]``, per
  put ``index=[...]``; default ``["$"]``, the whole value as JSON), joined by newlines,
  embedded by the store's embedder as one vector.

Operations of one ``batch`` behave as in LangGraph's ``InMemoryStore``: the reads see
the store as it was before the batch, then the writes apply, the last put of a key
winning. ``search`` without ``query`` returns items newest-created first (the store's
``list`` order, after the filter); with ``query`` it ranks by the store's recall
similarity (weights 1/0/0, no threshold, no reinforcement; ``score`` is that
similarity), then appends unindexed items with ``score=None``. Filters (``$eq $ne $gt
$gte $lt $lte``, nested dicts): keys declared in ``filter_fields`` are answered by the
index (``where=``: cost of the matches), the rest is checked in the client on the pages
it returns; undeclared, a filtered search reads the whole prefix (``_langgraph_filters``).

Sync calls: built on a ``SyncMemoryStore``, ``batch`` runs on that store's private loop
(and ``abatch`` waits for it from a worker thread); built on a ``MemoryStore``,
``abatch`` runs on the caller's loop and ``batch`` works from other threads while that
loop runs (LangGraph's sync nodes under ``ainvoke``), else it raises a
``ConfigurationError`` (use ``SyncMemoryStore`` for ``invoke``/``stream``).

Install with ``pip install 'betterdb-memory[langgraph]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ..core.escaping import validate_tag_value
from ..core.models import MemoryItem
from ..core.requests import MemoryInput
from ..core.validation import MAX_K, MAX_TAGS
from ..errors import ConfigurationError, MemoryNotFoundError, ValidationError
from ..store import MemoryStore
from ..sync import SyncMemoryStore, SyncReentrancyError
from ._extras import missing_extra

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra(
        "The LangGraph store (betterdb_memory.adapters.langgraph)", "langgraph", _exc
    ) from _exc

from ._langgraph_filters import declared_filter_fields, indexed_values, split_filter, store_fields
from ._langgraph_items import (
    META,
    check_labels,
    index_text,
    item_id,
    item_record,
    literal_prefix,
    matches_filter,
    matches_namespace,
    namespace_tags,
    op_labels,
    prefix_tag,
    to_item,
)

__all__ = ["LangGraphStore", "item_id", "matches_filter", "matches_namespace", "prefix_tag"]

#: Memories read per page when a search or listing walks a prefix (the store's ``list`` maximum).
PAGE = 1000
#: Ranking by meaning only: LangGraph's ``score`` is a similarity, not recency or importance.
SIMILARITY_ONLY = {"similarity": 1.0, "recency": 0.0, "importance": 0.0}
#: A TTL is refreshed on read once this share of it has passed (each refresh rewrites the memory).
REFRESH_AFTER = 0.1


# -- the store --------------------------------------------------------------------------------------


class LangGraphStore(BaseStore):
    """LangGraph's ``BaseStore`` over ``store``'s L2 memories (``graph.compile(store=...)``).

    Args:
        store: a ``MemoryStore`` (used on the loop that calls ``abatch``) or a
            ``SyncMemoryStore`` (its private loop serves ``batch`` and ``abatch``). The
            caller closes it.
        scope: the ``namespace`` scope value of this adapter's memories: two adapters
            with different scopes on one store never see each other's items.
        index: LangGraph's ``IndexConfig``; only ``fields`` is used (default ``["$"]``, the
            whole value). The store's own embedder embeds, so ``embed`` is refused and
            ``dims`` ignored.
        ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes) for puts that give none,
            ``refresh_on_read`` (default True).
        filter_fields: value keys the index filters, ``{"status": "tag", "priority":
            "numeric"}``; the store declares them (``MemoryStore(metadata_fields=
            LangGraphStore.store_fields(filter_fields))``). A put of a declared key with
            another type (tag: one string; numeric: int or float) is refused; ``$gt`` on
            an item without the key matches nothing (``InMemoryStore`` raises).

    Raises:
        ValidationError: ``scope`` is not a valid scope value.
        ConfigurationError: ``index`` carries an ``embed``; ``filter_fields`` is malformed
            or not declared by the store.

    Limits: a namespace holds at most 63 labels (one tag per prefix; the store allows 64 tags);
    values must be JSON (no NaN); a listing read, or a filter on undeclared keys, walks the
    matching memories page by page, at most 10,000 + 1,000 of them (``list``'s offset cap); a
    query search ranks the store's recall candidates (its KNN, at most 1,000), one vector per
    item (several ``fields`` are embedded together; LangGraph's stores keep one per field). A
    TTL refresh on read rewrites the memory (at most once per tenth of its TTL), adding a
    version to its ``history``. A store with ``max_items_per_scope`` caps these memories like
    any others (each namespace's tags make its own cap scope): use a store without a cap.
    """

    supports_ttl: bool = True

    #: ``LangGraphStore.store_fields(filter_fields)``: the ``MemoryStore(metadata_fields=...)`` they need.
    store_fields = staticmethod(store_fields)

    def __init__(
        self,
        store: MemoryStore | SyncMemoryStore,
        *,
        scope: str = "langgraph",
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        filter_fields: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(store, SyncMemoryStore):
            self._sync: SyncMemoryStore | None = store
            self.store: MemoryStore = store._target
        elif isinstance(store, MemoryStore):
            self._sync = None
            self.store = store
        else:
            raise ConfigurationError(
                "store must be a MemoryStore or SyncMemoryStore",
                code="configuration.type",
                details={"argument": "store", "type": type(store).__name__},
            )
        self.scope = validate_tag_value(scope, name="scope")
        self.unindexed_scope = f"{self.scope}:unindexed"
        if index and "embed" in index:
            raise ConfigurationError(
                "LangGraphStore embeds with the MemoryStore's embedder; pass index={'fields': [...]} only",
                code="configuration.invalid",
                details={"argument": "index"},
            )
        self.index_config = index
        self.fields: list[str] = list((index or {}).get("fields") or ["$"])
        self.ttl_config = ttl
        self.filter_fields = declared_filter_fields(filter_fields, dict(self.store.metadata_fields.fields))
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()

    # -- sync / async entry points ---------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` and block for their results (see the module docstring for which loop).

        Raises:
            ConfigurationError: built on a ``MemoryStore`` whose loop is not running in
                another thread (use a ``SyncMemoryStore`` for sync graphs).
            SyncReentrancyError: called from the loop the store runs on.
        """
        ops = list(ops)
        if self._sync is not None:
            return list(self._sync._loop.call(self._run, ops))
        loop = self._loop
        if loop is None or not loop.is_running() or loop.is_closed():
            raise ConfigurationError(
                "LangGraphStore.batch (sync) over an async MemoryStore needs the store's event loop"
                " running in another thread; build it on a SyncMemoryStore for sync graphs",
                code="configuration.sync_without_loop",
                details={"adapter": "langgraph"},
            )
        if _running_loop() is loop:
            raise SyncReentrancyError(
                "LangGraphStore.batch (sync) was called on the store's own event loop, where it would"
                " wait for itself forever; use abatch there",
                details={"thread": threading.current_thread().name},
            )
        return asyncio.run_coroutine_threadsafe(self._run(ops), loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``: reads against the store before the batch, then the writes (last put of a key wins)."""
        ops = list(ops)
        if self._sync is not None:
            return list(await asyncio.to_thread(self._sync._loop.call, self._run, ops))
        self._loop = asyncio.get_running_loop()
        return await self._run(ops)

    # -- the operations (on the store's loop) ------------------------------------------------------

    async def _run(self, ops: list[Op]) -> list[Result]:
        for op in ops:
            for labels in op_labels(op):
                check_labels(labels)
            if isinstance(op, GetOp | PutOp) and len(op.namespace) >= MAX_TAGS:
                raise ValidationError(
                    f"a namespace holds at most {MAX_TAGS - 1} labels",
                    code="validation.too_many",
                    details={"argument": "namespace", "max": MAX_TAGS - 1},
                )
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        gets: list[tuple[int, GetOp]] = []
        reads: list[tuple[int, SearchOp | ListNamespacesOp]] = []
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                gets.append((i, op))
            elif isinstance(op, SearchOp | ListNamespacesOp):
                reads.append((i, op))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), str(op.key))] = op
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        # Every read sees the store as it was before this batch's writes (InMemoryStore's order).
        results: list[Result] = [None] * len(ops)
        refresh: dict[str, MemoryItem] = {}
        got, *done = await asyncio.gather(self._get(gets), *(self._read(op) for _, op in reads))
        for (i, _), (found, touched) in zip([*gets, *reads], [*got, *done], strict=True):
            results[i] = found
            refresh.update(touched)
        await self._refresh(refresh.values())
        await self._write(list(puts.values()))
        return results

    async def _get(self, gets: list[tuple[int, GetOp]]) -> list[tuple[Item | None, dict[str, MemoryItem]]]:
        """All the batch's gets in one ``get_many``: each item (or None) and the memory to refresh."""
        if not gets:
            return []
        memories = await self.store.get_many(
            [item_id(self.scope, op.namespace, str(op.key)) for _, op in gets]
        )
        out: list[tuple[Item | None, dict[str, MemoryItem]]] = []
        for (_, op), memory in zip(gets, memories, strict=True):
            item = None if memory is None else to_item(memory)
            if (
                memory is None
                or item is None
                or (item.namespace, item.key) != (tuple(op.namespace), str(op.key))
            ):
                out.append((None, {}))
            else:
                out.append((item, {memory.id: memory} if op.refresh_ttl else {}))
        return out

    async def _read(self, op: SearchOp | ListNamespacesOp) -> tuple[Any, dict[str, MemoryItem]]:
        if isinstance(op, SearchOp):
            return await self._search(op)
        return await self._list_namespaces(op)

    async def _write(self, puts: list[PutOp]) -> None:
        """Puts in one ``remember_many`` (validated whole before anything is written), then deletes."""
        writes = [self._memory(p) for p in puts if p.value is not None]
        if writes:
            await self.store.remember_many(writes)
        deletes = [item_id(self.scope, p.namespace, str(p.key)) for p in puts if p.value is None]
        if deletes:
            await asyncio.gather(*(self.store.forget(mid) for mid in deletes))

    def _memory(self, op: PutOp) -> MemoryInput:
        """The ``remember_many`` item a put writes."""
        namespace, key = list(op.namespace), str(op.key)
        value = dict(op.value or {})
        fields = self.fields if op.index is None else ([] if op.index is False else list(op.index))
        text = index_text(value, fields) if fields else ""
        ttl_minutes = op.ttl
        meta = {
            "namespace": namespace,
            "key": key,
            "value": value,
            "updated_at": int(time.time() * 1000),
            "ttl": ttl_minutes,
        }
        return {
            "id": item_id(self.scope, namespace, key),
            "content": text or json.dumps(value, ensure_ascii=False, sort_keys=True),
            "namespace": self.scope if text else self.unindexed_scope,
            "tags": namespace_tags(self.scope, namespace),
            "metadata": {META: meta, **indexed_values(value, self.filter_fields)},
            "ttl": None if ttl_minutes is None else float(ttl_minutes) * 60.0,
            "source": "langgraph",
        }

    async def _refresh(self, memories: Iterable[MemoryItem]) -> None:
        """Restart the TTL of items read with ``refresh_ttl`` (once a tenth of it has passed)."""
        now = time.time() * 1000
        due: list[tuple[str, float]] = []
        for memory in memories:
            meta = item_record(memory)
            minutes = None if meta is None else meta.get("ttl")
            if not minutes or memory.expires_at is None:
                continue
            ttl_ms = float(minutes) * 60_000
            if memory.expires_at - now < ttl_ms * (1 - REFRESH_AFTER):
                due.append((memory.id, ttl_ms / 1000))
        if due:
            await asyncio.gather(*(self._touch(mid, seconds) for mid, seconds in due))

    async def _touch(self, mid: str, seconds: float) -> None:
        with contextlib.suppress(MemoryNotFoundError):  # expired or deleted since it was read
            await self.store.update(mid, ttl=seconds)

    async def _scan(
        self, prefix: Sequence[str], *, scope: str | None = None, where: Mapping[str, Any] | None = None
    ) -> AsyncIterator[MemoryItem]:
        """This adapter's memories under ``prefix`` (``scope`` None: indexed and unindexed), newest first."""
        tags = [prefix_tag(self.scope, prefix)]
        offset = 0
        while True:
            page = await self.store.list(namespace=scope, tags=tags, limit=PAGE, offset=offset, where=where)
            for memory in page.items:
                if memory.namespace in (self.scope, self.unindexed_scope):
                    yield memory
            if page.next_cursor is None:
                return
            offset += len(page.items)

    async def _search(self, op: SearchOp) -> tuple[list[SearchItem], dict[str, MemoryItem]]:
        prefix = tuple(op.namespace_prefix)
        query = op.query if op.query and op.query.strip() else None
        # The declared keys' part of the filter goes to the index; the rest is checked here.
        where, rest = split_filter(op.filter, self.filter_fields)
        found: list[tuple[SearchItem, MemoryItem]] = []
        if query is not None:
            found = await self._ranked(op, prefix, query, where, rest)
            wanted = op.offset + op.limit
            if len(found) < wanted:
                async for memory in self._scan(prefix, scope=self.unindexed_scope, where=where):
                    item = self._matching(memory, prefix, rest)
                    if item is not None:
                        found.append((item, memory))
                        if len(found) >= wanted:
                            break
        elif rest or op.offset + op.limit > PAGE:
            async for memory in self._scan(prefix, where=where):
                item = self._matching(memory, prefix, rest)
                if item is not None:
                    found.append((item, memory))
                    if len(found) >= op.offset + op.limit:
                        break
        else:
            # One page of the store's list, its offset and limit passed through.
            page = await self.store.list(
                tags=[prefix_tag(self.scope, prefix)], limit=max(op.limit, 1), offset=op.offset, where=where
            )
            hits = [(self._matching(m, prefix, None), m) for m in page.items[: op.limit]]
            found = [(item, m) for item, m in hits if item is not None]
            return [item for item, _ in found], self._touched(op, found)
        kept = found[op.offset : op.offset + op.limit]
        return [item for item, _ in kept], self._touched(op, kept)

    @staticmethod
    def _touched(op: SearchOp, kept: list[tuple[SearchItem, MemoryItem]]) -> dict[str, MemoryItem]:
        return {m.id: m for _, m in kept} if op.refresh_ttl else {}

    def _matching(
        self,
        memory: MemoryItem,
        prefix: tuple[str, ...],
        flt: Mapping[str, Any] | None,
        score: float | None = None,
    ) -> SearchItem | None:
        if memory.namespace not in (self.scope, self.unindexed_scope):
            return None
        item = to_item(memory, score=score, search=True)
        if item is None or item.namespace[: len(prefix)] != prefix or not matches_filter(item.value, flt):
            return None
        assert isinstance(item, SearchItem)
        return item

    async def _ranked(
        self,
        op: SearchOp,
        prefix: tuple[str, ...],
        query: str,
        where: Mapping[str, Any],
        rest: Mapping[str, Any],
    ) -> list[tuple[SearchItem, MemoryItem]]:
        """Indexed items under ``prefix`` by recall similarity, the filter applied, enough for the page."""
        wanted = op.offset + op.limit
        k = max(1, min(MAX_K, wanted))
        while True:
            hits = await self.store.recall(
                query, k=k, threshold=2.0, weights=SIMILARITY_ONLY, reinforce=False,
                namespace=self.scope, tags=[prefix_tag(self.scope, prefix)], where=where,
            )  # fmt: skip
            found = []
            for hit in hits:
                item = self._matching(hit.item, prefix, rest, score=hit.score)
                if item is not None:
                    found.append((item, hit.item))
            if len(found) >= wanted or len(hits) < k or k >= MAX_K:
                return found
            k = min(MAX_K, k * 4)

    async def _list_namespaces(
        self, op: ListNamespacesOp
    ) -> tuple[list[tuple[str, ...]], dict[str, MemoryItem]]:
        conditions = list(op.match_conditions or ())
        prefixes = [literal_prefix(c.path) for c in conditions if c.match_type == "prefix"]
        start = max(prefixes, key=len) if prefixes else ()
        seen: set[tuple[str, ...]] = set()
        async for memory in self._scan(start):
            meta = item_record(memory)
            if meta is not None:
                seen.add(tuple(meta["namespace"]))
        namespaces = [ns for ns in seen if all(matches_namespace(c, ns) for c in conditions)]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit], {}


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
