"""Long-term memory writes: ``remember`` and ``remember_many``, with dedup and capacity.

Write path: every item is validated first (nothing is written if one is bad), then one
embedding batch, then one pipelined round trip of plain ``HSET`` s (``PEXPIRE`` after
each memory with a TTL). The stored record is built by the pure ``core.record``. With
a capacity, the same round trip counts each written cap scope, and only a scope found
over its cap pays for eviction (``capacity``). Ids are fixed client-side before the
first attempt, so a retry after a dropped connection rewrites the same documents. A
write under a caller's id replaces the memory stored there (``upserts``). A single
``remember`` with nothing of that to do (no id, no subject, no dedup, no cap: one ``HSET``)
takes ``single_write``'s path instead, which writes the same record without the batch's
bookkeeping; dedup's lookup is ``dedup.find_twins``.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Awaitable, Collection, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import numpy as np

from ..backend import scripts
from ..backend.commands import Step
from ..core.codec import validate_vector
from ..core.filter_fields import index_fields
from ..core.keys import Scope, validate_memory_id
from ..core.models import MemoryItem, Sensitivity
from ..core.record import NewMemory, Previous, dedup_hash, encode_record
from ..core.requests import MemoryInput, new_memories, new_memory
from ..core.validation import check_metadata
from ..errors import MemoryNotFoundError, ValidationError
from ..observability.tracing import add_attributes
from .capacity import Capacity
from .dedup import find_twins
from .documents import Documents
from .recall import Recall
from .runtime import Runtime
from .single_write import remember_one
from .subjects import Subjects
from .upserts import HISTORY_MAX, Existing, read_existing

__all__ = ["HISTORY_MAX", "LongTermMemory"]


class LongTermMemory:
    """``remember`` / ``remember_many`` and the validated write other parts use (``write``)."""

    def __init__(self, rt: Runtime, capacity: Capacity, recall: Recall, docs: Documents) -> None:
        self._rt = rt
        self._capacity = capacity
        self._recall = recall
        self._docs = docs
        self.subjects = Subjects(rt)
        self._write_capped = functools.partial(self.write_memories, capped=True)  # ``remember``'s batch path

    def _record(
        self,
        memory: NewMemory,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        now_ms: int,
        half_life: float,
        *,
        previous: Previous | None = None,
    ) -> tuple[str, list[Any], int]:
        """(memory id, HSET field/value list, ttl in ms or 0) of one memory: the stored record.

        The reference's fields first, in its order, then this library's own (written
        only when they differ from the default a reader assumes).
        """
        memory_id = memory.id or self._rt.keys.new_memory_id()
        fields, ttl_ms = encode_record(
            memory,
            vector,
            now_ms=now_ms,
            half_life_seconds=half_life,
            fact_source=self._rt.settings.fact_source,
            previous=previous,
        )
        # The declared metadata fields as their own document fields (``meta_*``, ``present``):
        # checked in ``write_memories`` before any I/O, so this cannot raise.
        for name, value in index_fields(memory.metadata, self._rt.metadata_fields).items():
            fields += [name, value]
        return memory_id, fields, ttl_ms

    async def remember(
        self,
        content: str,
        *,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        ttl: float | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        sensitivity: Sensitivity | None = None,
        metadata: Mapping[str, Any] | None = None,
        vector: Sequence[float] | None = None,
        id: str | None = None,
        valid_from: datetime | date | int | str | None = None,
        subject: str | None = None,
    ) -> str:
        """Store one memory; returns its id (the existing id when deduplicated).

        Args:
            content: the text to remember.
            importance: 0..1 (default 0.5).
            tags: labels (no commas); recall/forget/consolidate ``tags=`` need all of theirs.
            source: where it came from (``summary`` and the fact source are reserved
                for consolidation output).
            ttl: seconds until it expires; ``None`` or ``0``: never.
            thread_id / agent_id / namespace: its scope.
            sensitivity: ``none|low|pii|sensitive`` (``recall(exclude_sensitivity=)``).
            metadata: a JSON-able mapping kept with it. Its keys declared in the store's
                ``metadata_fields`` are also indexed (``where=``); a declared value of the
                wrong type is a ``ValidationError`` (``validation.metadata_field``).
            vector: a precomputed embedding (skips the embedder).
            id: your own id for it (letters, digits, ``_.:-``; up to 200), kept as given.
                A memory with this id already there is replaced (upsert): its creation
                time, last access and access count carry over, its content is embedded
                again only if it changed, and the replaced version is kept in its update
                history (``history``). Dedup does not apply to a write with an id.
            valid_from: when what it says became true (an aware or naive ``datetime``,
                naive being UTC; a ``date``; epoch ms; ISO 8601 text; years 1900-9999).
                Default: now. Recency counts from it until the memory is recalled, so
                "Ada moved to Berlin in May 2024" written today with
                ``valid_from="2024-05"`` ranks as old news. Read back as
                ``MemoryItem.valid_from``. An upsert without it keeps the replaced
                memory's.
            subject: what it states ("home city"; matched case- and
                whitespace-insensitively, at most 256 characters). Within its exact
                scope and kind a subject has one current memory: a write not older
                (by ``valid_from``) than the current one supersedes it (the old one
                leaves recall, list and count, kept with ``valid_until`` in
                ``fact_history``); an older-dated one enters the history as a past
                version. Costs the write one more round trip.

        Raises:
            ValidationError: any bad argument (an empty or over-long subject too);
                nothing is written.
            ConfigurationError: ``subject`` on an index created without ``subject_key``
                (``configuration.index_outdated``).
            StoreConnectionError: the server could not be reached (after retries).
        """
        memory = new_memory(
            content, dimensions=self._rt.embedder.dimensions, importance=importance, tags=tags, source=source,
            ttl=ttl, thread_id=thread_id, agent_id=agent_id, namespace=namespace, sensitivity=sensitivity,
            metadata=metadata, vector=vector, id=id, valid_from=valid_from, subject=subject,
        )  # fmt: skip
        return await remember_one(self._rt, memory, self._write_capped, importance=importance, ttl=ttl)

    async def remember_many(self, items: Iterable[str | MemoryInput]) -> list[str]:
        """Store many memories: one embedding batch and one pipelined round trip.

        Every item is validated before anything is embedded or written, so a bad
        item fails the whole call with nothing stored. Returns ids in input order.
        An item is the text alone, or a ``MemoryInput`` mapping: ``content`` and any
        of ``remember``'s keyword arguments.
        """
        memories = new_memories(items, dimensions=self._rt.embedder.dimensions)
        mark = None
        if len(memories) == 1 and isinstance(items, list | tuple):
            first = items[0]
            mark = (first.get("importance"), first.get("ttl")) if isinstance(first, Mapping) else (None, None)
        return await self._remember(memories, mark=mark)

    async def _remember(
        self, memories: Sequence[NewMemory], *, mark: tuple[float | None, float | None] | None
    ) -> list[str]:
        """Write checked memories, capped; ``mark``: a single write's (importance, ttl) as given, for its span."""
        with self._rt.obs.span("remember") as span:
            ids, evicted, dedup_hits = await self.write_memories(memories, capped=True)
            add_attributes(span, lambda: {"gen_ai.memory.count": len(ids), "gen_ai.memory.evicted": evicted})
            if len(ids) == 1 and mark is not None:
                importance, ttl = mark
                self._rt.obs.mark_remember(
                    span,
                    importance=0.5 if importance is None else importance,
                    ttl=ttl,
                    key=self._rt.keys.doc(ids[0]),
                )
        self._rt.metrics.observe_remember(len(ids), dedup_hits=dedup_hits)
        self._rt.obs.count({"remembers": len(ids), "dedup_hits": dedup_hits})
        return ids

    async def write(
        self,
        items: Iterable[str | Mapping[str, Any]],
        *,
        capped: bool,
        dedup: bool | None = None,
        subjects: bool = True,
        corrections: Collection[int] = (),
    ) -> tuple[list[str], int, int]:
        """``write_memories`` of ``remember_many`` items (consolidation's output).

        ``subjects=False``: their subjects are stored as text only, with no current-version
        bookkeeping (facts on an index made by the reference, which has no ``subject_key``).
        ``corrections``: indexes of items that are current whatever began after them
        (``SubjectPut.correction``).
        """
        memories = new_memories(items, dimensions=self._rt.embedder.dimensions)
        if not subjects:
            memories = [dataclasses.replace(m, subject_key=None) for m in memories]
        memories = [
            dataclasses.replace(m, correction=True) if i in corrections else m for i, m in enumerate(memories)
        ]
        return await self.write_memories(memories, capped=capped, dedup=dedup)

    async def write_memories(
        self, memories: Sequence[NewMemory], *, capped: bool, dedup: bool | None = None
    ) -> tuple[list[str], int, int]:
        """Embed, dedup, write, then hold each written scope to its cap (if ``capped``).

        ``dedup=None`` follows the store's setting (consolidation output passes False).
        Returns (ids in input order, memories evicted, dedup hits).
        """
        if not memories:
            return [], 0, 0
        for i, m in enumerate(memories):
            try:
                index_fields(m.metadata, self._rt.metadata_fields, strict=True)
            except ValidationError as exc:
                if len(memories) > 1:
                    exc.details.setdefault("item", i)
                raise
        given = [m.id for m in memories if m.id is not None]
        if len(set(given)) != len(given):
            twice = sorted({g for g in given if given.count(g) > 1})
            raise ValidationError(
                f"the same id twice in one call: {twice}",
                code="validation.duplicate_id",
                details={"ids": twice},
            )
        await self._rt.index.ensure_ready()
        now = time.time()
        now_ms = int(now * 1000)
        existing, leftovers = await read_existing(self._rt, given, now_ms) if given else ({}, set())
        vectors: list[Any] = [m.vector for m in memories]
        for i, m in enumerate(memories):
            old = existing.get(m.id) if m.id is not None else None
            if old is not None and m.vector is None and old.content == m.content:
                vectors[i] = old.vector  # an unchanged text is not embedded again
        need = [i for i, v in enumerate(vectors) if v is None]
        if need:
            embedded = await self._rt.embed([memories[i].content for i in need])
            for j, i in enumerate(need):
                vectors[i] = embedded[j]
        for i, m in enumerate(memories):
            # Given vectors were fully checked on the way in; only their length can still be
            # wrong, when an embed_fn's dimension was learned after that check.
            if m.vector is not None and len(m.vector) != self._rt.embedder.dimensions:
                validate_vector(m.vector, dimensions=self._rt.embedder.dimensions, name=f"vector of item {i}")
        cfg = self._rt.config()
        ids: list[str | None] = [None] * len(memories)
        dedup_hits = 0
        twin_of: dict[int, int] = {}  # a later item of the batch -> the first one with its content
        if self._rt.settings.dedup if dedup is None else dedup:
            first: dict[tuple[Scope, str], int] = {}
            hashed = list(memories)
            for i, m in enumerate(memories):
                if m.id is not None or m.subject_key is not None:
                    continue  # a caller's id names the memory, a subject's version is its own: no dedup
                hashed[i] = m = dataclasses.replace(m, dedup_hash=dedup_hash(m.content, m.kind))
                twin_of[i] = first.setdefault((m.scope, m.dedup_hash or ""), i)
            memories = hashed
            twin_of = {i: j for i, j in twin_of.items() if i != j}
            leaders = [i for i in range(len(memories)) if i not in twin_of and memories[i].id is None]
            found = await find_twins(self._rt, [memories[i] for i in leaders], [vectors[i] for i in leaders])
            for n, twin in found.items():
                ids[leaders[n]] = twin
            dedup_hits = len(found) + len(twin_of)
            if found:
                await self._recall.reinforce(list(found.values()), now, cfg.half_life_seconds)
        records: list[tuple[int, str, list[Any], int]] = []
        replaced: dict[str, Existing] = {}
        for i, m in enumerate(memories):
            if ids[i] is None and i not in twin_of:
                old = existing.get(m.id) if m.id is not None else None
                mid, fields, ttl_ms = self._record(
                    m, vectors[i], now_ms, cfg.half_life_seconds, previous=old.previous if old else None
                )
                ids[i] = mid
                records.append((i, mid, fields, ttl_ms))
                if old is not None:
                    replaced[mid] = old
        for i, j in twin_of.items():
            ids[i] = ids[j]
        cap = cfg.max_items_per_scope if capped else None
        cap_filters = self._capacity.cap_filters([memories[i] for i, *_ in records]) if cap else []
        rounds = [self._capacity.plan(flt, len(records)) for flt in cap_filters]
        # Subjects (tiers.subjects): decided in this round trip, settled in one more.
        puts = self.subjects.puts([(memories[i], mid, fields) for i, mid, fields, _ in records])
        subject_steps: list[Step] = []
        subject_searches: list[list[Any]] = []
        if puts:
            self.subjects.check_index()
            scopes = [memories[i].scope for i, *_ in records if memories[i].subject_key is not None]
            subject_steps = self.subjects.steps(puts, scopes)
            subject_searches = self.subjects.searches(puts)

        # Ids are fixed client-side before the first attempt, so a retry after a
        # dropped connection rewrites the same documents: safe to retry.
        backend = self._rt.backend
        single = not replaced and not leftovers and not cap_filters and not puts
        if len(records) == 1 and single and not records[0][3]:
            # The everyday write, one HSET: a plain command costs less than a pipeline of one.
            _, mid, fields, _ = records[0]
            key = self._rt.keys.doc(mid)
            await self._rt.index.with_index(
                "remember", lambda: backend.command("remember", "HSET", key, *fields)
            )
            self._rt.metrics.add_items(1)
            return [str(m) for m in ids], 0, dedup_hits

        writes: list[Step] = []
        for _, mid, fields, ttl_ms in records:
            key = self._rt.keys.doc(mid)
            old = replaced.get(mid)
            if old is not None:
                writes.append(
                    scripts.REPLACE.call(
                        [key, self._rt.keys.updates(mid)], [ttl_ms, old.entry, HISTORY_MAX, *fields]
                    )
                )
                continue
            if mid in leftovers:  # a new memory under an id whose last one was deleted elsewhere
                writes.append(("DEL", self._rt.keys.access(mid), self._rt.keys.updates(mid)))
            writes.append(("HSET", key, *fields))
            if ttl_ms:
                writes.append(("PEXPIRE", key, ttl_ms))

        def send() -> Awaitable[list[Any]]:
            return self._rt.index.with_index(
                "remember",
                lambda: backend.pipeline(
                    "remember",
                    [
                        *writes,
                        *subject_steps,
                        *self._capacity.lock_calls(rounds),
                    ],  # the locks: after the writes, before the counts
                    details={"count": len(records)},
                    searches=[*subject_searches, *self._capacity.searches(rounds)],
                ),
            )

        try:  # with subjects: beside the journal's look, returning after its repair (sent once)
            results = await (self.subjects.repair.write("remember", send) if puts else send())
        except BaseException:
            # A lock the failed or cancelled round trip may have taken.
            self.subjects.repair.failed(puts)  # its subjects may be half-written: repaired next read
            await self._capacity.release(rounds)
            raise
        self._rt.metrics.add_items(len(records) - len(replaced))
        if puts:
            nw, ns = len(writes), len(subject_steps)
            nl = len(results) - nw - ns - len(subject_searches) - len(self._capacity.searches(rounds))
            after = nw + ns + nl
            await self.subjects.settle(
                puts,
                results[nw : nw + len(puts)],
                results[after : after + len(subject_searches)],
                now_ms=now_ms,
            )
            results = [*results[:nw], *results[nw + ns : after], *results[after + len(subject_searches) :]]
        evicted = 0
        if rounds and cap is not None:
            written = {mid for _, mid, _, _ in records}
            evicted = await self._capacity.hold_caps(rounds, results, cap, protect=written, now=now)
        return [str(m) for m in ids], evicted, dedup_hits

    async def update(
        self,
        id: str,
        *,
        content: str | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> MemoryItem:
        """Change a memory in place; returns it as stored now.

        Arguments left ``None`` keep their value (``ttl=None`` keeps the remaining
        TTL, ``ttl=0`` removes it). The content is embedded again only if it changed;
        the scope, source, sensitivity and kind stay; creation time, last access and
        access count carry over; the version replaced goes to ``history(id)``.

        Raises:
            MemoryNotFoundError: no memory has this id (or it expired).
            ValidationError: a bad argument; nothing is written.
        """
        mid = validate_memory_id(id)
        if metadata is not None:  # a declared field's value is checked before any I/O
            index_fields(check_metadata(metadata), self._rt.metadata_fields, strict=True)
        item = (await self._docs.get_many([mid]))[0]
        if item is None:
            raise MemoryNotFoundError(mid, f"no memory with id {mid!r}")
        if ttl is None and item.expires_at is not None:
            ttl = max(0.001, (item.expires_at - time.time() * 1000) / 1000.0)
        new = new_memory(
            item.content if content is None else content,
            dimensions=self._rt.embedder.dimensions,
            id=mid,
            importance=item.importance if importance is None else importance,
            tags=item.tags if tags is None else tags,
            metadata=item.metadata if metadata is None else metadata,
            ttl=ttl or None,
            source=item.source,
            thread_id=item.thread_id,
            agent_id=item.agent_id,
            namespace=item.namespace,
            sensitivity=item.sensitivity,
            kind=item.kind,
            subject=item.subject,
            date=item.date,
        )
        with self._rt.obs.span("update"):
            await self.write_memories([new], capped=False, dedup=False)
        stored = (await self._docs.get_many([mid]))[0]
        if stored is None:  # deleted or expired the moment it was written
            raise MemoryNotFoundError(mid, f"no memory with id {mid!r}")
        return stored
