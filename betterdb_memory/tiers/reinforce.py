"""Reinforcement: exact access counts on every recall, document snapshots after a bounded lag.

A recall counts each hit's access in its own round trip, in keys the search index does
not watch (``backend.scripts_reinforce``: the counter beside each document, the store's
pending HASH with each lagging document's last access). ``get`` reads them: exact.

The document's ``last_accessed_at`` / ``access_count`` / ``keep`` (what BetterDB Monitor,
the reference library, ranking and capacity eviction read) are written by a flush, never
by the recall: on RediSearch each document write re-indexes its vector, about 1 ms a
document, which a recall of 10 first-accessed hits paid (12.6 ms against 2.2 ms without
reinforcement, ``bench/results/profile.md``).

The lag rule: a store that reinforced starts a flush every ``interval`` (``reinforce_write_interval``;
default half-life / 200, 1 s..1 min: 1 min at the default 7-day half-life). A pass writes
every pending document once (however many recalls hit it since: coalesced) and skips the
ones already current, so an access reaches its document within one interval plus the
pass's own time. The periodic passes of every store over one name share one claim per
interval (``SET NX PX`` on ``<name>:__mem_pending_access:flush``), so a document is
rewritten at most once per interval however many processes recall it. ``close()`` runs a
last pass (without the claim). After a crash the entries stay on the server and
the next pass of any store over the same name writes them; the exact counts are never
lost (they are written by the recall itself). ``interval`` 0: write-through, the recall's
script writes the document (no lag, the old cost).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from ..backend.commands import Step
from ..backend.scripts_reinforce import ACCESS, FLUSH, PEND, SETTLE
from ..core.codec import as_text, to_float, to_int
from ..core.models import MemoryItem, with_access
from ..errors import ValidationError
from .runtime import Runtime

__all__ = ["Reinforcement"]

log = logging.getLogger(__name__)

#: Pending entries one pass reads per HSCAN step, and documents per FLUSH call on one server
#: (a script blocks the server: about 1 ms a written document on RediSearch at 10k memories,
#: about 3 ms at 250k).
_SCAN_COUNT = 256
_CHUNK = 8
#: Documents per round trip of a pass. The engine runs a pipeline's commands back to back,
#: so a page's scripts sent as one pipeline (256 documents) held every other client for the
#: whole page: about 0.7 s at 250k memories (bench-1m's one capped write of about 1 s).
#: One chunk per round trip lets the others in between, for a round trip per 8 documents.
_TRIP_DOCS = _CHUNK
#: An entry is removed only once its time is this old: an access in flight with an equal or
#: older clock reading (same millisecond, another client's clock) finds it still pending.
_SETTLE_MS = 5_000
#: At most this many of this store's own lagging accesses are kept for ranking.
_SEEN_MAX = 100_000


class Reinforcement:
    """The access side keys of recalled memories and the flush of their document snapshots."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._loop: asyncio.Task[Any] | None = None
        # This store's accesses whose snapshot may lag: memory id -> (last access ms, count).
        # Ranking reads documents (the search's fields); this makes it see its own recalls at
        # once. Dropped once a flush pass that began after them ends.
        self._seen: dict[str, tuple[int, int]] = {}

    def interval(self, half_life: float) -> float:
        """The lag bound: seconds between flushes (0: write-through, no lag).

        ``reinforce_write_interval``, else 1/200 of the half-life between 1 s and 1 min (a
        recency off by at most 0.35% while a snapshot lags).
        """
        interval = self._rt.settings.reinforce_write_interval
        if interval is not None:
            return interval
        return min(60.0, max(1.0, half_life / 200.0))

    def flags(self, now: float, half_life: float) -> tuple[str, ...]:
        """``ACCESS``'s leading ARGV for an access at ``now`` (and start the flush)."""
        interval = self.interval(half_life)
        if interval > 0:
            self._start()
        return ("1", str(int(now * 1000)), repr(half_life), str(int(interval * 1000)))

    def steps(self, ids: Sequence[str], flags: Sequence[str], fields: Sequence[str]) -> list[Step]:
        """The round trip reading (and with ``flags[0]`` "1" reinforcing) ``ids``: ``rows`` reads its replies."""
        keys = self._rt.keys
        args = [*flags, *fields]
        if not self._rt.backend.cluster:
            pairs = [k for mid in ids for k in (keys.doc(mid), keys.access(mid))]
            return [ACCESS.call([*pairs, keys.access_pending], args)]
        docs = [keys.doc(mid) for mid in ids]
        # The pending times as they were before this access: read, or read and raised by PEND
        # (before the counts: a cut between them leaves a time, never a lost mark).
        marks: Step = ("HMGET", keys.access_pending, *docs)
        if _pends(flags):
            marks = PEND.call([keys.access_pending], [flags[1], *docs])
        return [
            marks,
            *(ACCESS.call([doc, keys.access(mid)], args) for doc, mid in zip(docs, ids, strict=True)),
        ]

    def rows(
        self, ids: Sequence[str], flags: Sequence[str], replies: Sequence[Any]
    ) -> tuple[list[Any], list[Any]]:
        """``steps``' replies (then any others of the round trip) -> (one row per id, the others).

        A row: None when gone, else the fields, the exact count and the exact last access.
        """
        if not self._rt.backend.cluster:
            return list(replies[0]), list(replies[1:])
        marks = replies[0] or [None] * len(ids)
        first = 1
        rows: list[Any] = []
        for n, reply in enumerate(replies[first : first + len(ids)]):
            row = reply[0] if reply else None
            if row and marks[n] is not None:
                row = [*row[:-1], max(to_float(row[-1]) or 0.0, to_float(marks[n]) or 0.0)]
            rows.append(row)
        return rows, list(replies[first + len(ids) :])

    def note(self, ids: Sequence[str], flags: Sequence[str], rows: Sequence[Any]) -> None:
        """Remember the accesses ``ACCESS`` just counted (``rows``: its replies), for ``overlay``."""
        if not _pends(flags):
            return
        if len(self._seen) > _SEEN_MAX:  # a bound, not a cache policy: the documents follow anyway
            self._seen.clear()
        now = int(flags[1])
        for mid, row in zip(ids, rows, strict=True):
            if row:
                self._seen[mid] = (now, to_int(row[-2]) + 1)

    @property
    def pending(self) -> dict[str, tuple[int, int]]:
        """This store's lagging accesses, memory id -> (last access ms, count): what ``overlay``
        applies (a search passes them to the items it builds: ``item_from_fields(seen=)``)."""
        return self._seen

    def overlay(self, candidates: list[tuple[MemoryItem, float]]) -> list[tuple[MemoryItem, float]]:
        """``candidates`` (as the search read their documents) with this store's lagging accesses."""
        seen = self._seen
        if not seen:
            return candidates
        mine = [n for n, (item, _) in enumerate(candidates) if item.id in seen]
        if not mine:
            return candidates
        out = list(candidates)
        for n in mine:
            item, distance = out[n]
            at, count = seen[item.id]
            if at > item.last_accessed_at or count > item.access_count:
                item = with_access(item, max(at, item.last_accessed_at), max(count, item.access_count))
                out[n] = (item, distance)
        return out

    # -- the flush ------------------------------------------------------------------------

    def _start(self) -> None:
        if self._loop is None and not self._rt.supervisor.closed:
            self._loop = self._rt.supervisor.spawn(self._run(), name="reinforce_flush", daemon=True)

    async def _run(self) -> None:
        rt = self._rt
        token = uuid.uuid4().hex
        while True:
            interval = max(0.05, self.interval(rt.config().half_life_seconds))
            await asyncio.sleep(interval)
            try:
                # One periodic pass per interval across every store over this name: the first
                # to claim the interval runs it (a document is rewritten at most once per
                # interval however many processes recall it); the others' claims fail until
                # it expires, so a pass still starts at least once per interval of any of them.
                gate = (rt.keys.access_pending + ":flush", token, "NX", "PX", max(1, int(interval * 1000)))
                if await rt.backend.command("reinforce", "SET", *gate):
                    await self.flush()
            except Exception as exc:  # the next pass tries again; the counts are safe meanwhile
                log.warning("reinforcement flush failed: %s", exc)
                self._rt.metrics.observe_background_failure("reinforce")

    async def close(self) -> None:
        """The last pass, when this store reinforced anything (called by ``MemoryStore.close``)."""
        if self._loop is None:
            return
        try:
            await self.flush()
        except Exception as exc:  # close must finish; the entries stay for the next store's pass
            log.warning("reinforcement flush at close failed: %s", exc)
            self._rt.metrics.observe_background_failure("reinforce")

    async def flush(self) -> int:
        """One pass over the pending HASH: write each lagging snapshot; the documents written."""
        rt = self._rt
        pending = rt.keys.access_pending
        half_life = rt.config().half_life_seconds
        began = int(time.time() * 1000)
        written, cursor = 0, 0
        while True:
            reply = await rt.backend.command("reinforce", "HSCAN", pending, cursor, "COUNT", _SCAN_COUNT)
            cursor, entries = int(reply[0]), _pairs(reply[1])
            if entries:
                written += await self._flush(entries, half_life)
            if cursor == 0:
                break
        self._seen = {mid: v for mid, v in self._seen.items() if v[0] >= began}
        return written

    async def _flush(self, entries: list[tuple[str, str]], half_life: float) -> int:
        rt = self._rt
        keys, backend = rt.keys, rt.backend
        docs: list[tuple[str, str, str]] = []  # (document key, counter key, pending time)
        for doc, at in entries:
            try:
                docs.append((doc, keys.access(keys.memory_id_of(doc)), at))
            except ValidationError:  # not a document of this store's: drop it
                docs.append((doc, "", at))
        live = [d for d in docs if d[1]]
        size = 1 if backend.cluster else _CHUNK
        calls: list[Step] = []
        for i in range(0, len(live), size):
            chunk = live[i : i + size]
            calls.append(
                FLUSH.call(
                    [k for doc, counter, _ in chunk for k in (doc, counter)],
                    [repr(half_life), *(at for _, _, at in chunk)],
                )
            )
        results: dict[str, int] = {}
        flat: list[int] = []
        per_trip = max(1, _TRIP_DOCS // size)
        for i in range(0, len(calls), per_trip):
            trip = calls[i : i + per_trip]
            docs_sent = min(len(live) - i * size, len(trip) * size)
            replies = await backend.pipeline("reinforce", trip, details={"documents": docs_sent})
            flat += [int(r) for reply in replies for r in reply]
        if calls:
            results = {doc: r for (doc, _, _), r in zip(live, flat, strict=True)}
        ripe = time.time() * 1000 - _SETTLE_MS
        settle = [
            v
            for doc, counter, at in docs
            if not counter or results.get(doc) == -1 or (to_float(at) or 0.0) <= ripe
            for v in (doc, at)
        ]
        if settle:
            await backend.script("reinforce", SETTLE.call([keys.access_pending], settle))
        return sum(1 for r in results.values() if r == 1)


def _pends(flags: Sequence[str]) -> bool:
    """Whether ``ACCESS`` flags count an access that a flush writes later (not write-through)."""
    return flags[0] == "1" and int(flags[3]) > 0


def _pairs(raw: Any) -> list[tuple[str, str]]:
    """HSCAN's field/value pairs (a dict through valkey-py's callback, else a flat list)."""
    if isinstance(raw, dict):
        return [(as_text(k), as_text(v)) for k, v in raw.items()]
    items = list(raw or [])
    return [(as_text(items[i]), as_text(items[i + 1])) for i in range(0, len(items) - 1, 2)]
