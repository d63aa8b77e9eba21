"""The store's index: probe the engine, create or adopt ``<name>:mem:idx``, recreate it if dropped.

Every part of the store asks this object before its first query (``ensure_ready``),
and runs queries through ``with_index`` so an index dropped under a running store
(``FT.DROPINDEX``, a flush) is recreated once instead of failing every call.

Adopting an index another library created (betterdb-agent-memory): its fields and TAG
flags are read from FT.INFO; queries then avoid the fields it lacks (``layout``) and
results are checked exactly in the client (``needs_check``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from ..core.codec import as_text
from ..core.dialect import Capabilities
from ..core.ft_info import IndexInfo, IndexSchema, parse_ft_info, parse_index_schema
from ..core.keys import KeySpace
from ..core.query import IndexLayout, IndexSpec, MemoryFilter, create_index_args
from ..errors import ConfigurationError, IndexExistsError, IndexNotFoundError, StoreClosedError
from .history_index import HistoryIndex
from .protocol import Backend

__all__ = ["SCHEMA_VERSION", "IndexManager"]

log = logging.getLogger(__name__)

#: The version of this library's metadata hash (``<name>:__mem_meta``).
SCHEMA_VERSION = "2"

T = TypeVar("T")


class _Embedder(Protocol):
    """What the index needs of the embedder: its vector length and model id."""

    @property
    def dimensions(self) -> int: ...

    @property
    def model_id(self) -> str: ...


class IndexManager:
    """Probe, create, adopt and describe one store's index.

    Args:
        backend: the store's backend.
        keys: the store's key space.
        embedder: gives the vector length and the model id recorded with the index.
        hnsw: (M, EF_CONSTRUCTION, EF_RUNTIME) of a newly created index.
        resolve: awaited before the first index check (learns an ``embed_fn``'s
            dimension from its first answer), or None.
        on_ready: awaited once the index is in place, with the engine's capabilities
            (starts the live config and the Monitor heartbeat).
    """

    def __init__(
        self,
        backend: Backend,
        keys: KeySpace,
        embedder: _Embedder,
        *,
        hnsw: tuple[int, int, int] = (16, 200, 10),
        resolve: Callable[[], Awaitable[object]] | None = None,
        on_ready: Callable[[list[str]], Awaitable[None]] | None = None,
        extra_schema: Sequence[str] = (),
        extra_meta: Mapping[str, str] | None = None,
    ) -> None:
        self.backend = backend
        self.keys = keys
        self.embedder = embedder
        self.hnsw = hnsw
        self._resolve = resolve
        self._on_ready = on_ready
        # The declared metadata fields' SCHEMA arguments, and what a new index records of them.
        self.extra_schema = tuple(extra_schema)
        self.extra_meta = dict(extra_meta or {})
        self.capabilities: Capabilities | None = None
        self.layout = IndexLayout()
        self.ready = False
        self._lock = asyncio.Lock()
        self.history = HistoryIndex(backend, keys)  # superseded versions (as_of), beside the main index

    @property
    def spec(self) -> IndexSpec:
        m, efc, efr = self.hnsw
        return IndexSpec(
            index=self.keys.index,
            prefix=self.keys.doc_prefix,
            dimensions=self.embedder.dimensions,
            m=m,
            ef_construction=efc,
            ef_runtime=efr,
            extra_schema=self.extra_schema,
        )

    @property
    def caps(self) -> Capabilities:
        """The engine's capabilities (only after ``ensure_ready``)."""
        assert self.capabilities is not None, "ensure_ready() first"
        return self.capabilities

    def needs_check(self, flt: MemoryFilter) -> bool:
        """Whether the engine's match may be wider than ``flt`` (then results are checked).

        On this library's index (CASESENSITIVE TAGs, values validated comma-free and
        trimmed) the engine's match is exact; on another library's index it is not.
        """
        layout = self.layout
        return (
            not layout.case_sensitive
            or (bool(flt.exclude_sensitivity) and not layout.sensitivity)
            or (flt.exclude_expired_at is not None and not layout.expires_at)
            or (flt.has_time and not layout.valid_from)
        )

    async def ensure_ready(self) -> None:
        """Probe and create/adopt the index on first use; a no-op afterwards.

        Raises:
            StoreClosedError: the store was closed.
        """
        if self.backend.closed:
            raise StoreClosedError("the store was closed; build a new one", code="state.closed")
        if self.ready:
            return
        async with self._lock:
            if not self.ready:
                await self._ensure_locked()

    async def ensure_index(self) -> None:
        """Create the index if absent, or adopt the one there (again); idempotent, safe to race."""
        async with self._lock:
            await self._ensure_locked()

    async def with_index(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn``; if the index vanished under us, recreate it once and run again."""
        await self.ensure_ready()
        try:
            return await fn()
        except IndexNotFoundError:
            log.warning("%s: index %s is missing; recreating it", operation, self.keys.index)
            async with self._lock:
                self.ready = False
                await self._ensure_locked()
            return await fn()

    async def info(self) -> IndexInfo | None:
        """FT.INFO of the index, normalised across engines; None when absent.

        On a cluster ``num_docs`` is the whole cluster's (the primaries' sum).
        """
        reply = await self.backend.index_info(self.keys.index)
        if reply is None:
            return None
        info = parse_ft_info(reply)
        if self.backend.cluster:
            totals = await self.backend.index_info(self.keys.index, cluster_counts=True)
            if totals is not None:
                info = dataclasses.replace(info, num_docs=parse_ft_info(totals).num_docs)
        return info

    # -- internals ------------------------------------------------------------------------

    async def _ensure_locked(self) -> None:
        backend = self.backend
        if self.capabilities is None:
            self.capabilities = await backend.probe()
            backend.rebuilds_after_restart = self.capabilities.rebuilds_after_restart
        caps = self.capabilities
        if self._resolve is not None:
            await self._resolve()
        meta_raw = await backend.command("ensure_index", "HGETALL", self.keys.meta)
        self._check_meta({as_text(k): as_text(v) for k, v in meta_raw.items()})
        reply = await backend.index_info(self.keys.index)
        created: dict[str, str] = {}
        if reply is None:
            try:
                await backend.search("ensure_index", create_index_args(self.spec, caps))
                created = self.extra_meta
                # A new index over existing documents (a recreated one) backfills in the
                # background; wait, bounded, so the next query sees what was stored.
                await self._wait_ready(limit_seconds=30.0)
            except IndexExistsError:
                pass
            reply = await backend.index_info(self.keys.index)
        if reply is not None:
            self._adopt(parse_ft_info(reply), parse_index_schema(reply))
        await self.history.ensure(self.spec, caps)
        fields = {
            "dimensions": str(self.embedder.dimensions),
            "model_id": self.embedder.model_id,
            "schema": SCHEMA_VERSION,
            "index": self.keys.index,
            **created,
        }

        record = [*(("HSETNX", self.keys.meta, k, v) for k, v in fields.items()), ("HGETALL", self.keys.meta)]
        out = await backend.pipeline("ensure_index", record)
        self._check_meta({as_text(k): as_text(v) for k, v in out[-1].items()})
        self.ready = True
        if self._on_ready is not None and not backend.closed:
            await self._on_ready(caps.as_list())

    def _adopt(self, info: IndexInfo, schema: IndexSchema) -> None:
        """Check the index in place fits this store, and note which optional fields it has."""
        if schema.prefixes and set(schema.prefixes) != {self.keys.doc_prefix}:
            # An index under this store's name over other keys (another tenant's, taken before this
            # store made its own: valkey-search checks FT.CREATE's prefixes, not its index name).
            raise ConfigurationError(
                f"index {self.keys.index} covers the keys {list(schema.prefixes)}, not this store's "
                f"{self.keys.doc_prefix!r}. Use another store name, or drop that index.",
                code="configuration.foreign_index",
                details={"prefixes": list(schema.prefixes)},
            )
        dims = self.embedder.dimensions
        if info.dimensions is not None and info.dimensions != dims:
            raise ConfigurationError(
                f"index {self.keys.index} holds {info.dimensions}-d vectors but the embedder "
                f"{self.embedder.model_id!r} makes {dims}-d vectors",
                code="configuration.dimension_mismatch",
                details={"index_dimensions": info.dimensions, "embedder_dimensions": dims},
            )
        vector = schema.field("vector")
        if schema.fields and (vector is None or vector.type != "VECTOR"):
            raise ConfigurationError(
                f"index {self.keys.index} has no 'vector' field (fields: {[f.alias for f in schema.fields]}); "
                "it was not made by betterdb-memory or betterdb-agent-memory. Use another store name.",
                code="configuration.foreign_index",
                details={"fields": [f.alias for f in schema.fields]},
            )
        # Counts are exact without a client-side check only when every scope TAG is
        # case-sensitive and split on "," alone (the index this library creates).
        scope_tags = [schema.field(n) for n in ("threadId", "agentId", "namespace", "tags", "source")]
        exact = all(
            f is not None and f.type == "TAG" and f.case_sensitive is True and f.separator in (None, ",")
            for f in scope_tags
        )
        self.layout = IndexLayout.from_fields([f.alias for f in schema.fields], case_sensitive=exact)

    def _check_meta(self, meta: Mapping[str, str]) -> None:
        dims, model = meta.get("dimensions"), meta.get("model_id")
        embedder = self.embedder
        if (dims and dims != str(embedder.dimensions)) or (model and model != embedder.model_id):
            raise ConfigurationError(
                f"store {self.keys.name!r} was created with model {model!r} ({dims}-d); this store's "
                f"embedder is {embedder.model_id!r} ({embedder.dimensions}-d). Use another store name, "
                "or move the store to this model (CLI: betterdb-memory reembed; API: transfer.reembed)",
                code="configuration.model_mismatch",
                details={
                    "stored_model": model,
                    "stored_dimensions": dims,
                    "embedder_model": embedder.model_id,
                    "embedder_dimensions": embedder.dimensions,
                },
            )

    async def _wait_ready(self, *, limit_seconds: float) -> None:
        deadline = time.monotonic() + limit_seconds
        while True:
            info = await self.info()
            if info is None or info.ready or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.05)
