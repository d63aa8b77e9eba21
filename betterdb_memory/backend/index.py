"""The store's index: probe the engine, create or adopt it, recreate it if dropped.

Every part of the store asks this object before its first query (``ensure_ready``),
and runs queries through ``with_index`` so an index dropped under a running store
(``FT.DROPINDEX``, a flush) is recreated once instead of failing every call.

Adopting an index another library created (betterdb-agent-memory): its fields and TAG
flags are read from FT.INFO; queries then avoid the fields it lacks (``layout``) and
results are checked exactly in the client (``needs_check``).

Which index: the one the meta hash names (``core.index_gen``). One lacking fields this
process writes is *outdated*: ``require`` refuses the features that need them, ``migrate``
builds a new one beside it and switches (``backend.index_switch``). A switch is learnt from
the live-config refresh (``observe_meta``) or a missing index: the meta is re-read before
anything is created, so the new generation is adopted, never the old one resurrected.
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
from ..core.filter_fields import DECLARED_PREFIX, PRESENCE_FIELD, MetadataFields, schema_args
from ..core.ft_info import IndexInfo, IndexSchema, parse_ft_info, parse_index_schema
from ..core.index_gen import (
    AUTO_MIGRATE_MAX_DOCS,
    FIELD_GEN,
    FIELD_INDEX,
    FIELD_SCHEMA,
    Generation,
    missing_fields,
    schema_digest,
    schema_fields,
)
from ..core.keys import KeySpace
from ..core.query import IndexLayout, IndexSpec, MemoryFilter, create_index_args
from ..errors import (
    BetterDBMemoryError,
    ConfigurationError,
    ConsolidationBusyError,
    IndexExistsError,
    IndexNotFoundError,
    StoreClosedError,
)
from .history_index import HistoryIndex
from .index_switch import IndexSwitch, SwitchReport
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
        metadata_fields: the store's declared metadata fields (their index fields join
            the schema; an index switch backfills them from each memory's metadata).
        auto_migrate: migrate an outdated index of at most ``AUTO_MIGRATE_MAX_DOCS``
            documents at ``ensure_ready`` (False: only ``migrate`` does).
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
        metadata_fields: MetadataFields | None = None,
        auto_migrate: bool = True,
    ) -> None:
        self.backend = backend
        self.keys = keys
        self.embedder = embedder
        self.hnsw = hnsw
        self._resolve = resolve
        self._on_ready = on_ready
        # The declared metadata fields' SCHEMA arguments, and what a new index records of them.
        self.metadata_fields = metadata_fields or MetadataFields()
        # ``extra_schema`` as given, else the declared fields' (the same when both are given).
        self.extra_schema = tuple(extra_schema) or tuple(schema_args(self.metadata_fields))
        self.extra_meta = dict(extra_meta or {})
        self.capabilities: Capabilities | None = None
        self.layout = IndexLayout()
        self.ready = False
        self._lock = asyncio.Lock()
        self.history = HistoryIndex(backend, keys)  # superseded versions (as_of), beside the main index
        # The index this process queries: the reference's name until an index switch
        # (``backend.index_switch``) moves the store to a generation ``<name>:mem:idx:g<n>``.
        self._name = keys.index
        self.generation = Generation(keys.index)
        #: Fields this process's schema has that the index in use lacks (empty: current).
        self.outdated: tuple[str, ...] = ()
        self.auto_migrate = auto_migrate
        self.num_docs = 0
        self._stale = False  # a switch was seen: re-locate the index before the next query
        self._auto_pending = self._warned = False
        #: Seconds other processes need to see a switch (their live-config refresh interval).
        self.settle_seconds = 5.0

    @property
    def name(self) -> str:
        """The index every FT.SEARCH / FT.INFO / FT.AGGREGATE of this store goes to."""
        return self._name

    @property
    def spec(self) -> IndexSpec:
        m, efc, efr = self.hnsw
        return IndexSpec(
            index=self.name,
            prefix=self.keys.doc_prefix,
            dimensions=self.embedder.dimensions,
            m=m,
            ef_construction=efc,
            ef_runtime=efr,
            extra_schema=self.extra_schema,
        )

    def wanted_fields(self) -> tuple[tuple[str, str], ...]:
        """``(field, TYPE)`` of the schema this process creates (only after ``ensure_ready``)."""
        return schema_fields(create_index_args(self.spec, self.caps))

    def require(self, fields: tuple[str, ...] | list[str], *, feature: str) -> None:
        """Refuse ``feature`` when the index in use lacks any of ``fields``.

        Raises:
            ConfigurationError: ``configuration.index_outdated``, naming the command that
                switches the store to an index with them.
        """
        absent = [f for f in fields if not self.layout.has(f)]
        if absent:
            raise ConfigurationError(
                f"{feature} needs the index fields {absent}, which index {self.name} was created "
                "without; build the new index and switch to it (CLI: betterdb-memory reindex; "
                "API: await store.migrate_index()). Recall keeps working meanwhile.",
                code="configuration.index_outdated",
                details={"index": self.name, "fields": absent, "feature": feature},
            )

    def observe_meta(self, index: str | None, gen: str | None) -> None:
        """The live-config refresh read the meta hash's ``index`` / ``index_gen``: adopt a switch."""
        if not self.ready:
            return
        if (index or self.keys.index) != self.name or (gen or "0") != str(self.generation.gen):
            log.info("index switch seen: %s -> %s (generation %s)", self.name, index, gen)
            self._stale = True

    async def migrate(
        self,
        *,
        keep_reference: bool = False,
        wait: float = 3600.0,
        on_phase: Callable[[str], None] | None = None,
    ) -> SwitchReport:
        """Build an index with this process's full schema beside the one in use and switch to it.

        See ``backend.index_switch``; a no-op (``switched=False``) when the index in use
        is current. Recall keeps answering from the old index until the switch.

        Raises:
            ConsolidationBusyError: another migration holds the lock for ``wait`` seconds.
        """
        return await IndexSwitch(self, on_phase=on_phase).run(
            keep_reference=keep_reference, wait=wait, settle=self.settle_seconds
        )

    async def relocate(self) -> None:
        """Re-read the meta hash and FT.INFO now (after a switch, or to see one)."""
        async with self._lock:
            await self._ensure_locked()

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
        if self.ready and not self._stale:
            return
        async with self._lock:
            if not self.ready or self._stale:
                await self._ensure_locked()
        if self._auto_pending:
            self._auto_pending = False
            await self._auto_migrate()

    async def ensure_index(self) -> None:
        """Create the index if absent, or adopt the one there (again); idempotent, safe to race."""
        async with self._lock:
            await self._ensure_locked()

    async def with_index(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn``; if the index vanished under us, recreate it once and run again."""
        if self.backend.closed or not self.ready or self._stale:  # ``ensure_ready``'s test, no frame
            await self.ensure_ready()
        try:
            return await fn()
        except IndexNotFoundError:
            # Re-read the meta hash first (``_ensure_locked``): after a switch the index is
            # gone because the store moved on, and this process adopts the new one.
            log.warning("%s: index %s is missing; re-locating it", operation, self.name)
            async with self._lock:
                self.ready = False
                await self._ensure_locked()
            return await fn()

    async def info(self, name: str | None = None) -> IndexInfo | None:
        """FT.INFO of the index in use (or of ``name``), normalised across engines; None when absent.

        On a cluster ``num_docs`` is the whole cluster's (the primaries' sum).
        """
        name = name or self.name
        reply = await self.backend.index_info(name)
        if reply is None:
            return None
        info = parse_ft_info(reply)
        if self.backend.cluster:
            totals = await self.backend.index_info(name, cluster_counts=True)
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
        created: dict[str, str] = {}
        reply = None
        for _ in range(3):
            meta_raw = await backend.command("ensure_index", "HGETALL", self.keys.meta)
            meta = {as_text(k): as_text(v) for k, v in meta_raw.items()}
            self._check_meta(meta)
            self.generation = Generation.from_meta(meta, self.keys.index)
            self._rename(self.generation.name)
            reply = await backend.index_info(self.name)
            if reply is not None:
                break
            if self.name != self.keys.index:
                # A generation the meta names is gone: a switch may have just moved on
                # (its builder drops the old one); look again before creating anything.
                now = await backend.command("ensure_index", "HGET", self.keys.meta, FIELD_INDEX)
                if as_text(now) != self.name:
                    continue
            try:
                await backend.search("ensure_index", create_index_args(self.spec, caps))
                created = self.extra_meta
                # A new index over existing documents (a recreated one) backfills in the
                # background; wait, bounded, so the next query sees what was stored.
                await self._wait_ready(limit_seconds=30.0)
            except IndexExistsError:
                pass
            reply = await backend.index_info(self.name)
            break
        wanted = schema_fields(create_index_args(self.spec, caps))
        self.outdated = ()
        if reply is not None:
            info, schema = parse_ft_info(reply), parse_index_schema(reply)
            self._adopt(info, schema)
            self.num_docs = info.num_docs
            self.outdated = missing_fields(wanted, [(f.alias, f.type) for f in schema.fields])
        await self.history.ensure(self.spec, caps)
        fields = {
            "dimensions": str(self.embedder.dimensions),
            "model_id": self.embedder.model_id,
            "schema": SCHEMA_VERSION,
            FIELD_INDEX: self.keys.index,
            FIELD_GEN: "0",
            **created,
        }
        if not self.outdated:
            fields[FIELD_SCHEMA] = schema_digest(wanted)

        record = [*(("HSETNX", self.keys.meta, k, v) for k, v in fields.items()), ("HGETALL", self.keys.meta)]
        out = await backend.pipeline("ensure_index", record)
        self._check_meta({as_text(k): as_text(v) for k, v in out[-1].items()})
        self.ready = True
        self._stale = False
        self._auto_pending = False  # set again below only while the index is outdated
        if self.outdated:
            self._note_outdated()
        if self._on_ready is not None and not backend.closed:
            await self._on_ready(caps.as_list())

    def _rename(self, new: str) -> None:
        """Query ``new`` from now on; the backend sends queries built for earlier names there too."""
        old, self._name = self._name, new
        redirects: dict[str, str] | None = getattr(self.backend, "redirects", None)
        if redirects is None or old == new:
            return
        for k, v in list(redirects.items()):
            if v == old:
                redirects[k] = new
        redirects[old] = new
        redirects.pop(new, None)

    def _note_outdated(self) -> None:
        small = self.num_docs <= AUTO_MIGRATE_MAX_DOCS
        # Only an index an older betterdb-memory made (exact TAGs: betterdb-agent-memory's would
        # turn case-sensitive for it too), and only for built-in fields: a new declaration's
        # backfill rewrites every document, which its author starts (``migrate_index``).
        declared = any(f.startswith(DECLARED_PREFIX) or f == PRESENCE_FIELD for f in self.outdated)
        if self.auto_migrate and small and self.layout.case_sensitive and not declared:
            self._auto_pending = True
        elif not self._warned:
            self._warned = True
            log.warning(
                "index %s (%d documents) lacks the fields %s of this version; the features that "
                "need them are refused until the store switches to a new index: run "
                "`betterdb-memory reindex` (or await store.migrate_index()); recall keeps working",
                self.name,
                self.num_docs,
                list(self.outdated),
            )

    async def _auto_migrate(self) -> None:
        """A small store's outdated index, rebuilt now; a busy or failed attempt leaves it in use."""
        try:
            # A small store: no settle pause (the first call waits on this); a process that has
            # not seen the switch yet may read the rebuilt reference index partial for a moment.
            report = await IndexSwitch(self).run(keep_reference=False, wait=0.0, settle=0.0)
        except ConsolidationBusyError:
            log.info("index %s: another process is migrating it; using it meanwhile", self.name)
        except BetterDBMemoryError as exc:
            log.warning("index %s: automatic migration failed, using it as is: %s", self.name, exc)
        else:
            log.info("index migrated automatically: %s", report)

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
                f"index {self.name} holds {info.dimensions}-d vectors but the embedder "
                f"{self.embedder.model_id!r} makes {dims}-d vectors",
                code="configuration.dimension_mismatch",
                details={"index_dimensions": info.dimensions, "embedder_dimensions": dims},
            )
        vector = schema.field("vector")
        if schema.fields and (vector is None or vector.type != "VECTOR"):
            raise ConfigurationError(
                f"index {self.name} has no 'vector' field (fields: {[f.alias for f in schema.fields]}); "
                "it was not made by betterdb-memory or betterdb-agent-memory. Use another store name.",
                code="configuration.foreign_index",
                details={"fields": [f.alias for f in schema.fields]},
            )
        ef = ((vector.ef_runtime if vector else None) or self.hnsw[2]) if self.caps.knn_names_ef else None
        names, exact = [f.alias for f in schema.fields], schema.exact_scope_tags
        self.layout = IndexLayout.from_fields(
            names, case_sensitive=exact, ef_runtime=ef
        )  # ef: the index's, else ours

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
