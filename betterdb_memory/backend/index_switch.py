"""Build a store's new index beside the one in use, then switch every process to it atomically.

valkey-search 1.2 has neither FT.ALTER nor index aliases. So, under the store's switch lock
(``<name>:__mem_idxswitch:lock``, a token lock with a heartbeat):

1. **Backfill** the documents' derived fields the new schema indexes (declared metadata
   ``meta_*`` and ``present``, from each memory's ``metadata``), paging through the index
   in use by ``created_at`` (keyset paging, cluster-correct: the engine fans the query out;
   never a keyspace scan), the cursor kept in ``<name>:__mem_idxswitch`` so a crash resumes.
   Each write is a script that touches a document only while it exists.
2. **Build** ``<name>:mem:idx:g<n+1>`` with the full schema: the engine backfills it in the
   background while every process keeps querying the old index; wait until FT.INFO says
   it is ready (dialect point 11).
3. **Catch up**: the backfill again over the documents written since the first pass began
   (a process still on the old declaration wrote them without the fields).
4. **Switch**: ``INDEX_SWITCH``, a compare-and-set on the meta hash's ``index_gen``: of two
   migrators exactly one switches; the other drops what it built. Processes learn the new
   name from their live-config refresh or when their index is gone (``IndexManager``).
5. **The reference's name** (unless ``keep_reference``): betterdb-agent-memory and BetterDB
   Monitor only know ``<name>:mem:idx``. It is dropped (documents stay) and rebuilt with the
   full schema, and the store switches back to it (generation n+2) and drops ``g<n+1>``; the
   reference and Monitor see a partial index during that second build (this library does
   not: it queries ``g<n+1>`` meanwhile). With ``keep_reference`` the old ``<name>:mem:idx``
   stays as it was, beside ``g<n+1>``: both are maintained on every write (two HNSW graphs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..core.codec import as_text
from ..core.dialect import Capabilities
from ..core.filter_fields import MetadataFields
from ..core.ft_info import IndexInfo, parse_ft_info, parse_index_schema
from ..core.index_gen import (
    BackfillCursor,
    Generation,
    backfill_fields,
    backfill_page_args,
    backfill_writes,
    generation_name,
    missing_fields,
    schema_digest,
    switch_keys,
)
from ..core.keys import KeySpace
from ..core.query import IndexSpec, create_index_args
from ..core.replies import parse_search_reply
from ..errors import BetterDBMemoryError, IndexExistsError, IndexNotFoundError
from . import scripts
from .commands import ScriptCall
from .locks import ScopedLock
from .protocol import Backend


class Manager(Protocol):
    """What a migration needs of the store's ``IndexManager`` (a Protocol: index.py imports this module)."""

    backend: Backend
    keys: KeySpace
    metadata_fields: MetadataFields
    extra_meta: dict[str, str]
    generation: Generation
    outdated: tuple[str, ...]
    num_docs: int

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> IndexSpec: ...

    @property
    def caps(self) -> Capabilities: ...

    def wanted_fields(self) -> tuple[tuple[str, str], ...]: ...

    async def ensure_ready(self) -> None: ...

    async def relocate(self) -> None: ...

    async def info(self, name: str | None = None) -> IndexInfo | None: ...


__all__ = ["IndexSwitch", "SwitchReport"]

log = logging.getLogger(__name__)

_OPERATION = "index_switch"
#: Documents per backfill page (one FT.SEARCH).
PAGE = 500
#: Document writes per pipeline: on RediSearch each one re-indexes its whole document
#: (HNSW included), and a server runs a client's pipelined commands back to back, so a
#: small batch keeps the recalls of other clients from queueing behind the backfill.
WRITE_BATCH = 16
#: The catch-up pass looks this far before the first pass began (clock skew between hosts).
CATCH_UP_MARGIN_MS = 60_000


@dataclass(frozen=True, slots=True)
class SwitchReport:
    """What a migration did (``MemoryStore.migrate_index``, ``betterdb-memory reindex``).

    Attributes:
        switched: whether this call switched the store (False: already current, or another
            migrator switched first).
        index: the index the store queries now; generation: its ``index_gen``.
        missing: the fields the old index lacked.
        documents: documents in the index at the start.
        backfilled: documents whose declared fields were written (both passes).
        backfill_seconds / build_seconds / reference_seconds: the document backfill, the
            engine's build of the new index, and the reference name's rebuild (the window in
            which the reference library and Monitor see a partial index).
        switch_seconds: the compare-and-set itself.
    """

    switched: bool
    index: str
    generation: int
    missing: tuple[str, ...] = ()
    documents: int = 0
    backfilled: int = 0
    backfill_seconds: float = 0.0
    build_seconds: float = 0.0
    reference_seconds: float = 0.0
    switch_seconds: float = 0.0


class IndexSwitch:
    """One migration of one store's index (see the module docstring)."""

    def __init__(self, manager: Manager, *, on_phase: Callable[[str], None] | None = None) -> None:
        self.m = manager
        # Told each step as it starts (backfill, build, catch_up, switch, reference, done):
        # progress for the CLI, phases for the benchmark.
        self.on_phase = on_phase or (lambda phase: None)
        self.backend = manager.backend
        self.keys = manager.keys
        self.state_key, self.lock_key = switch_keys(manager.keys.name)

    async def run(
        self, *, keep_reference: bool = False, wait: float = 3600.0, settle: float = 5.0
    ) -> SwitchReport:
        """Migrate if the index in use is outdated; see the module docstring.

        ``wait``: seconds to wait for another migration's lock; ``settle``: seconds between
        the switch to ``g<n+1>`` and dropping the reference's name, so the other processes
        (live-config refresh) have moved off it before it is rebuilt.

        Raises:
            ConsolidationBusyError: another migration held the lock for ``wait`` seconds.
        """
        m, backend = self.m, self.backend
        await m.ensure_ready()
        lock = backend.lock(self.lock_key, ttl=30.0, wait=wait, heartbeat=True)
        await lock.acquire()
        try:
            await m.relocate()  # another migrator may have switched while we waited
            if m.outdated:
                return await self._migrate(lock, keep_reference=keep_reference, settle=settle)
            if keep_reference or m.name == self.keys.index:
                return SwitchReport(False, m.name, m.generation.gen)
            # Current, but on a generation: an earlier ``keep_reference`` run, or one that
            # stopped before this step. Bring the reference's name up to date and move back.
            t = time.monotonic()
            await self._to_reference(m.generation.gen, m.name, schema_digest(m.wanted_fields()), lock, settle)
            return SwitchReport(True, m.name, m.generation.gen, reference_seconds=time.monotonic() - t)
        finally:
            await lock.release_shielded()

    async def _migrate(self, lock: ScopedLock, *, keep_reference: bool, settle: float) -> SwitchReport:
        m, backend, keys = self.m, self.backend, self.keys
        check = lock.check
        old, gen, missing = m.name, m.generation.gen, m.outdated
        digest = schema_digest(m.wanted_fields())
        documents = m.num_docs
        target = generation_name(keys.index, gen + 1)
        log.info("index switch: %s lacks %s; building %s", old, list(missing), target)
        started_ms = int(time.time() * 1000)
        t0 = time.monotonic()
        self.on_phase("backfill")
        backfilled = await self._backfill(old, digest, resume=True, check=check)
        backfill = time.monotonic() - t0
        t1 = time.monotonic()
        self.on_phase("build")
        await self._build(target)
        build = time.monotonic() - t1
        check()
        t2 = time.monotonic()
        self.on_phase("catch_up")
        backfilled += await self._backfill(
            old, digest, since=started_ms - CATCH_UP_MARGIN_MS, resume=False, check=check
        )
        backfill += time.monotonic() - t2
        t3 = time.monotonic()
        self.on_phase("switch")
        switched = await self._switch(gen, target, digest)
        switch = time.monotonic() - t3
        if not switched:
            await self._drop_unless_named(target)
            await m.relocate()
            return SwitchReport(False, m.name, m.generation.gen, missing, documents)
        await m.relocate()
        if old != keys.index:
            await asyncio.sleep(settle)  # the others move off it first (live-config refresh)
            await self._drop(old)  # an older generation: only this library knew it
        reference = 0.0
        if not keep_reference:
            t4 = time.monotonic()
            await self._to_reference(gen + 1, target, digest, lock, settle)
            reference = time.monotonic() - t4
        await backend.command(_OPERATION, "DEL", self.state_key)
        self.on_phase("done")
        return SwitchReport(
            True,
            m.name,
            m.generation.gen,
            missing,
            documents,
            backfilled,
            backfill_seconds=backfill,
            build_seconds=build,
            reference_seconds=reference,
            switch_seconds=switch,
        )

    # -- steps ------------------------------------------------------------------------------

    async def _to_reference(
        self, gen: int, current: str, digest: str, lock: ScopedLock, settle: float
    ) -> None:
        """Rebuild the reference's name with the full schema, switch back to it, drop ``current``.

        ``settle`` before the drop (processes still on the reference's name move to
        ``current`` first) and before dropping ``current`` (they move back first).
        """
        keys = self.keys
        await asyncio.sleep(settle)
        self.on_phase("reference")
        await self._drop(keys.index)
        await self._build(keys.index)
        lock.check()
        if await self._switch(gen, keys.index, digest):
            await self.m.relocate()
            await asyncio.sleep(settle)
            await self._drop(current)

    async def _backfill(
        self, index: str, digest: str, *, resume: bool, check: Callable[[], None], since: int | None = None
    ) -> int:
        """Write the declared fields of every document of ``index`` (from ``since``); how many were written."""
        declared = self.m.metadata_fields
        if not declared:
            return 0
        backend = self.backend
        cursor = BackfillCursor(since)
        if resume:
            saved = await backend.command(_OPERATION, "HMGET", self.state_key, "cursor", "schema")
            if as_text(saved[1]) == digest:
                cursor = BackfillCursor.decode(as_text(saved[0]))
        fields = backfill_fields(declared)
        written = 0
        while True:
            reply = await backend.search(_OPERATION, backfill_page_args(index, cursor, fields, page=PAGE))
            hits = parse_search_reply(reply).hits
            calls: list[ScriptCall] = []
            created: list[int] = []
            for hit in hits:
                created.append(int(float(as_text(hit.fields.get("created_at")) or 0)))
                sets, dels = backfill_writes(hit.fields, declared)
                if sets or dels:
                    pairs = [x for kv in sets.items() for x in kv]
                    calls.append(scripts.INDEX_BACKFILL.call([hit.key], [str(len(sets)), *pairs, *dels]))
            for start in range(0, len(calls), WRITE_BATCH):
                out = await backend.pipeline(_OPERATION, calls[start : start + WRITE_BATCH])
                written += sum(1 for r in out if int(r) == 1)
            cursor = cursor.advance(created)
            if resume:
                await backend.command(
                    _OPERATION, "HSET", self.state_key, "cursor", cursor.encode(), "schema", digest
                )
            check()
            if len(hits) < PAGE:
                return written

    async def _build(self, name: str) -> None:
        """``name`` with the full schema, ready (an existing one kept only if it has every field)."""
        m, backend = self.m, self.backend
        spec = dataclasses.replace(m.spec, index=name)
        wanted = m.wanted_fields()
        for _ in range(5):
            reply = await backend.index_info(name)
            if reply is not None:
                fields = [(f.alias, f.type) for f in parse_index_schema(reply).fields]
                if not missing_fields(wanted, fields):
                    break  # a previous run's build, or a racing process's: keep it
                # An older process re-created it with the old schema (its index vanished).
                await self._drop(name)
            try:
                await backend.search(_OPERATION, create_index_args(spec, m.caps))
                break
            except IndexExistsError:
                continue
        await self._wait_ready(name)

    async def _wait_ready(self, name: str) -> None:
        """Until FT.INFO says the build is done: on a cluster, every shard's (``CLUSTER`` form)."""
        delay = 0.02
        while not await self._ready(name):
            await asyncio.sleep(delay)
            delay = min(0.5, delay * 2)

    async def _ready(self, name: str) -> bool:
        if self.backend.cluster:
            try:
                return parse_ft_info(
                    await self.backend.search(_OPERATION, ["FT.INFO", name, "CLUSTER"])
                ).ready
            except IndexNotFoundError:
                return True
            except BetterDBMemoryError:
                pass  # an engine without the CLUSTER form: the node's own state
        info = await self.m.info(name)
        return info is None or info.ready

    async def _switch(self, expected_gen: int, index: str, digest: str) -> bool:
        extra = [x for kv in self.m.extra_meta.items() for x in kv]
        call = scripts.INDEX_SWITCH.call(
            [self.keys.meta], [str(expected_gen), index, str(expected_gen + 1), digest, *extra]
        )
        return int(await self.backend.script(_OPERATION, call)) == 1

    async def _drop(self, name: str) -> None:
        with contextlib.suppress(IndexNotFoundError):  # FT.DROPINDEX without DD: documents stay
            await self.backend.search(_OPERATION, ["FT.DROPINDEX", name])

    async def _drop_unless_named(self, name: str) -> None:
        """Drop what a losing migrator built, unless the meta hash names it (the winner's is the same)."""
        now = as_text(await self.backend.command(_OPERATION, "HGET", self.keys.meta, "index"))
        if now != name:
            await self._drop(name)
