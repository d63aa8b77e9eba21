"""Capacity: ``max_items_per_scope``, held exactly, with O(log n) victim selection.

What a cap counts is the reference's meaning: a write with scope fields or tags
counts every memory matching them as a filter (a field the write leaves None matches
any value; all of the write's tags must be present); an unscoped write is never
capped. Only live memories count (``victims.live``): one whose ``expires_at`` has
passed is gone for every read even while its key waits for the server's expiry. The count rides in the write's own round trip (``FT.SEARCH ... LIMIT 0 0``
after the ``HSET`` s; both engines index synchronously, so it sees the write).

Only a scope found over its cap pays more: its victims are the lowest keep-scores
(``victims``, which finds them without sorting the scope).

Exactness under concurrent writers (the reference over-evicts there): eviction of
one cap scope runs under a token lock, and the holder re-counts before deleting, so
two writers over by one evict one memory between them, not two. The memories just
written go only when the write alone exceeds the cap (a batch larger than it).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..backend.commands import ScriptCall, Step
from ..backend.locks import ScopedLock
from ..core.keys import digest
from ..core.query import MemoryFilter, filter_search_args
from ..core.record import NewMemory
from ..core.replies import parse_search_reply
from .documents import Documents
from .runtime import Runtime
from .scopes import ScopeReader
from .victims import HINTS, LOOKAHEAD, Read, Victims, live

__all__ = ["Capacity"]

log = logging.getLogger(__name__)

_LOCK_S = 10.0
_LOCK_WAIT_S = 15.0


@dataclasses.dataclass(slots=True)
class CapRound:
    """What one cap scope adds to a write's round trip, and reads from its replies.

    A scope last seen at its cap (this store evicted there, or counted it full) also
    tries its lock in that round trip, before the count: when the lock is taken the
    count is already the exact one the eviction needs (no second count under the
    lock), and the lowest keep-scores below the scope's ceiling ride along too.
    """

    flt: MemoryFilter
    lock: ScopedLock | None = None
    bound: float | None = None
    searches: list[list[Any]] = dataclasses.field(default_factory=list)


class Capacity:
    """Cap scopes of writes, their counts, and eviction (``max_items_per_scope``)."""

    def __init__(self, rt: Runtime, scopes: ScopeReader, docs: Documents) -> None:
        self._rt = rt
        self._scopes = scopes
        self._docs = docs
        self._victims = Victims(rt, scopes)
        # Scopes last counted at or over their cap (bounded like the ceilings).
        self._full: OrderedDict[MemoryFilter, None] = OrderedDict()

    def cap_filters(self, memories: Sequence[NewMemory]) -> list[MemoryFilter]:
        """The distinct cap scopes of a batch of writes (unscoped writes have none)."""
        out: dict[MemoryFilter, None] = {}
        for m in memories:
            flt = MemoryFilter(scope=m.scope, tags=tuple(sorted(m.tags)))
            if not flt.is_unscoped:
                out[flt] = None
        return list(out)

    def count_args(self, flt: MemoryFilter) -> list[Any]:
        caps = self._rt.index.capabilities
        assert caps is not None
        if caps.filter_queries:
            layout = self._rt.index.layout
            return filter_search_args(self._rt.index.name, live(flt, layout), layout=layout, limit=0)
        # valkey-search 1.0: no count without KNN; a no-op the caller reads as "unknown".
        return ["PING"]

    def plan(self, flt: MemoryFilter, written: int) -> CapRound:
        """What a write of ``written`` memories into cap scope ``flt`` sends in its round trip."""
        plan = CapRound(flt, searches=[self.count_args(flt)])
        if flt not in self._full or not self._victims.fast(flt):
            return plan
        plan.lock = self._lock(flt)
        plan.bound = self._victims.bound(flt)
        if plan.bound is not None:
            plan.searches.append(self._victims.below_args(flt, plan.bound, written + 1 + LOOKAHEAD))
        return plan

    @staticmethod
    def lock_calls(rounds: Sequence[CapRound]) -> list[ScriptCall]:
        """The rounds' lock attempts, for the write's pipeline (after its writes)."""
        return [r.lock.try_call() for r in rounds if r.lock is not None]

    @staticmethod
    def searches(rounds: Sequence[CapRound]) -> list[list[Any]]:
        """The rounds' searches, sent after the pipeline's keyed commands."""
        return [q for r in rounds for q in r.searches]

    @staticmethod
    async def release(rounds: Sequence[CapRound]) -> None:
        """Free any lock the rounds may hold (the write's round trip failed or was cancelled).

        Never raises; runs to its end even while the calling task is being cancelled.
        """
        for r in rounds:
            if r.lock is not None:
                await r.lock.release_shielded()

    async def hold_caps(
        self, rounds: Sequence[CapRound], results: Sequence[Any], cap: int, *, protect: set[str], now: float
    ) -> int:
        """Hold every written cap scope to ``cap``; the number evicted.

        ``results`` are the write pipeline's replies, ending with the lock attempts
        (``lock_calls``) and then the searches (``searches``). The scopes whose lock the
        round trip took go first, each released when done: waiting for one scope's lock
        while holding another's could deadlock two writers.
        """
        locks = sum(1 for r in rounds if r.lock is not None)
        tail = list(results[len(results) - len(self.searches(rounds)) - locks :])
        lock_replies, search_replies = iter(tail[:locks]), iter(tail[locks:])
        answered = []
        for r in rounds:
            replies = [next(lock_replies)] if r.lock is not None else []
            answered.append((r, replies + [next(search_replies) for _ in r.searches]))
        taken = [r for r, replies in answered if r.lock is not None and r.lock.took(replies[0])]
        held = {id(r) for r in taken}
        answered.sort(key=lambda a: id(a[0]) not in held)
        evicted = 0
        try:
            for r, replies in answered:
                evicted += await self.hold_cap(r, replies, cap, protect=protect, now=now)
        except BaseException:
            # Cancelled mid-way (or a bug): the locks this round trip took and no eviction
            # has freed yet are freed now, not left to their TTL (``release`` is once only).
            await self.release(taken)
            raise
        return evicted

    async def hold_cap(
        self, plan: CapRound, replies: Sequence[Any], cap: int, *, protect: set[str], now: float
    ) -> int:
        """Evict what exceeds ``cap`` in one cap scope; the number evicted. Never fails a write.

        ``replies`` answer ``plan`` (the lock attempt's, then its searches'). When the
        count cannot be exact (an index whose TAGs are case-insensitive, or no count on
        the engine) the scope is counted again here.
        """
        flt, lock = plan.flt, plan.lock
        held = lock is not None and lock.took(replies[0])
        answers = replies[1:] if lock is not None else replies
        try:
            caps = self._rt.index.capabilities
            assert caps is not None
            if not caps.filter_queries or self._rt.index.needs_check(flt):
                total, _ = await self._scopes.scan_all(
                    live(flt, self._rt.index.layout), (), operation="capacity"
                )
            else:
                total = parse_search_reply(answers[0], nocontent=True).total
            self._note_count(flt, total, cap)
            if held:
                assert lock is not None
                if total <= cap:  # counted under the lock: nothing to do
                    await lock.release()
                    return 0
                first = None
                if plan.bound is not None:
                    ranged = parse_search_reply(answers[1])
                    first = (plan.bound, total, ranged.total, ranged.hits)
                return await self._evict_held(
                    lock, flt, cap, protect=protect, now=now, expected=total, first=first
                )
            if total <= cap:
                return 0
            return await self._evict(flt, cap, protect=protect, now=now, expected=total)
        except Exception as exc:  # the memory is stored; a failed eviction must not reject it
            log.warning("capacity eviction on %s failed (the write stands): %s", self._rt.keys.name, exc)
            self._rt.metrics.observe_background_failure("capacity")
            if held and lock is not None:
                await lock.release()
            return 0

    def _note_count(self, flt: MemoryFilter, total: int, cap: int) -> None:
        if total >= cap:
            self._full[flt] = None
            self._full.move_to_end(flt)
            while len(self._full) > HINTS:
                self._full.popitem(last=False)
        else:
            self._full.pop(flt, None)

    def _lock(self, flt: MemoryFilter) -> ScopedLock:
        return self._rt.backend.lock(
            self._rt.keys.cap_lock(digest(*_filter_parts(flt), size=12)),
            ttl=_LOCK_S,
            wait=_LOCK_WAIT_S,
            heartbeat=False,
        )

    async def _evict(
        self, flt: MemoryFilter, cap: int, *, protect: set[str], now: float, expected: int
    ) -> int:
        lock = self._lock(flt)
        try:
            await lock.acquire()
        except BaseException:  # cancelled while an attempt may have taken it
            await lock.release_shielded()
            raise
        return await self._evict_held(lock, flt, cap, protect=protect, now=now, expected=expected)

    async def _evict_held(
        self,
        lock: ScopedLock,
        flt: MemoryFilter,
        cap: int,
        *,
        protect: set[str],
        now: float,
        expected: int,
        first: Read | None = None,
    ) -> int:
        """Pick and delete the victims with ``lock`` held; releases it (with the deletes on
        a single server). ``first``: a read under the lock already done (bound, count,
        matches under the bound, the lowest of them)."""
        stats = self._rt.keys.stats
        try:
            victims = await self._victims.choose(
                flt, cap, protect=protect, now=now, expected=expected, first=first
            )

            # On a cluster the pipeline's commands run per node in no set order: the unlock
            # could land before a delete on another shard, and the next holder would count a
            # memory already chosen. There the lock is released after the deletes returned.
            release_here = not self._rt.backend.cluster

            also: list[Step] = []
            if victims:  # Monitor reads the counter at once, as the reference writes it
                also.append(("HINCRBY", stats, "evictions", len(victims)))
            if release_here:
                also.append(lock.release_call())

            # The deletes, the eviction counter and (one server) the unlock in one round trip.
            try:
                removed = await self._docs.delete_ids(victims, also=also, operation="capacity")
            except BaseException:
                lock.unsent()
                raise
        finally:
            # Stops the heartbeat; a no-op when the unlock was queued (and went out).
            await lock.release_shielded()
        if removed != len(victims):  # another client deleted a victim first: count only ours
            await self._rt.backend.command(
                "capacity", "HINCRBY", stats, "evictions", removed - len(victims), idempotent=False
            )
        if removed:
            self._rt.metrics.observe_evictions(removed)
        return removed


def _filter_parts(flt: MemoryFilter) -> tuple[str | None, ...]:
    s = flt.scope
    return (s.namespace, s.agent_id, s.thread_id, *flt.tags)
