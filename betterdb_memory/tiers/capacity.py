"""Capacity: ``max_items_per_scope``, held exactly, with O(log n) victim selection.

What a cap counts is the reference's meaning: a write with scope fields or tags
counts every memory matching them as a filter (a field the write leaves None matches
any value; all of the write's tags must be present); an unscoped write is never
capped. The count rides in the write's own round trip (``FT.SEARCH ... LIMIT 0 0``
after the ``HSET`` s; both engines index synchronously, so it sees the write).

Only a scope found over its cap pays more. Victims are the memories with the lowest
keep-score (``scoring.keep_score``: time-invariant, so the order never has to be
recomputed), read with ``SORTBY keep ASC`` and a LIMIT of the excess. RediSearch
answers that from a top-N heap; valkey-search sorts every match (25 ms for a scope
of 10,000, against 1 ms for its count). So once a scope has had an eviction, the
next ones ask only below a keep-score ceiling (``@keep:[-inf X]``, a range read of
the numeric index, 0.2 ms): X is the highest keep-score evicted last time plus a
span learned per scope. The answer is exact whenever the range holds at least the
excess (every memory outside it scores higher); when it does not, the span widens
and the read is repeated, and after a few tries the scope is sorted as before. An
index that lacks ``keep`` (made by another library) or an engine without SORTBY
falls back to reading the scope and ranking it in the client.

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
from typing import Any, TypeAlias

from ..backend.locks import ScopedLock
from ..core.codec import to_float
from ..core.keys import digest
from ..core.query import MemoryFilter, filter_search_args
from ..core.replies import SearchHit, parse_search_reply
from ..core.scoring import keep_score
from .documents import Documents
from .runtime import Runtime
from .scopes import ScopeReader

__all__ = ["Capacity"]

log = logging.getLogger(__name__)

_LOCK_S = 10.0
_LOCK_WAIT_S = 15.0

# The keep-score ceiling of a scope's next victim search: tries before sorting the whole
# scope, growth of the span per try, the smallest span, how many scopes are remembered.
_WIDEN_TRIES = 6
# Victim reads ask for this many more than they need: the keep-scores just above the
# victims say how far the next ceiling must reach.
_LOOKAHEAD = 2
_WIDEN = 8.0
_MIN_SPAN = 1e-9
_HINTS = 1024


# A victim read done under the lock: (its keep bound, the scope's count, the matches
# under the bound, the lowest of them).
_Read: TypeAlias = tuple[float, int, int, list[SearchHit]]


@dataclasses.dataclass(slots=True)
class _Ceiling:
    """Where a scope's lowest keep-scores were last found: ``floor`` (the highest evicted)
    and the ``span`` above it that held enough of them."""

    floor: float
    span: float


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
        self._ceilings: OrderedDict[MemoryFilter, _Ceiling] = OrderedDict()
        # Scopes last counted at or over their cap (bounded like the ceilings).
        self._full: OrderedDict[MemoryFilter, None] = OrderedDict()

    def cap_filters(self, prepared: Sequence[dict[str, Any]]) -> list[MemoryFilter]:
        """The distinct cap scopes of a batch of writes (unscoped writes have none)."""
        out: dict[MemoryFilter, None] = {}
        for p in prepared:
            flt = MemoryFilter(scope=p["scope"], tags=tuple(sorted(p["tags"])))
            if not flt.is_unscoped:
                out[flt] = None
        return list(out)

    def count_args(self, flt: MemoryFilter) -> list[Any]:
        caps = self._rt.index.capabilities
        assert caps is not None
        if caps.filter_queries:
            return filter_search_args(self._rt.keys.index, flt, layout=self._rt.index.layout, limit=0)
        # valkey-search 1.0: no count without KNN; a no-op the caller reads as "unknown".
        return ["PING"]

    def plan(self, flt: MemoryFilter, written: int) -> CapRound:
        """What a write of ``written`` memories into cap scope ``flt`` sends in its round trip."""
        plan = CapRound(flt, searches=[self.count_args(flt)])
        if flt not in self._full or not self._fast(flt):
            return plan
        plan.lock = self._lock(flt)
        ceiling = self._ceilings.get(flt)
        if ceiling is not None:
            plan.bound = ceiling.floor + ceiling.span
            plan.searches.append(self._below_args(flt, plan.bound, written + 1 + _LOOKAHEAD))
        return plan

    @staticmethod
    def queue_locks(pipe: Any, rounds: Sequence[CapRound]) -> None:
        """Queue the rounds' lock attempts in the write's pipeline (after its writes)."""
        for r in rounds:
            if r.lock is not None:
                r.lock.queue_try(pipe)

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
        (``queue_locks``) and then the searches (``searches``). The scopes whose lock the
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
        answered.sort(key=lambda a: not (a[0].lock is not None and a[0].lock.took(a[1][0])))
        evicted = 0
        try:
            for r, replies in answered:
                evicted += await self.hold_cap(r, replies, cap, protect=protect, now=now)
        except BaseException:
            # Cancelled mid-way (or a bug): the locks this round trip took and no eviction
            # has freed yet are freed now, not left to their TTL (``release`` is once only).
            await self.release(
                [r for r, replies in answered if r.lock is not None and r.lock.took(replies[0])]
            )
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
                total, _ = await self._scopes.scan_all(flt, (), operation="capacity")
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

    def _fast(self, flt: MemoryFilter) -> bool:
        """Whether victims come from the engine's keep-score order (this library's index)."""
        caps = self._rt.index.capabilities
        assert caps is not None
        return bool(
            self._rt.index.layout.keep
            and caps.sortby
            and caps.filter_queries
            and not self._rt.index.needs_check(flt)
        )

    def _note_count(self, flt: MemoryFilter, total: int, cap: int) -> None:
        if total >= cap:
            self._full[flt] = None
            self._full.move_to_end(flt)
            while len(self._full) > _HINTS:
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
        first: _Read | None = None,
    ) -> int:
        """Pick and delete the victims with ``lock`` held; releases it (with the deletes on
        a single server). ``first``: a read under the lock already done (bound, count,
        matches under the bound, the lowest of them)."""
        stats = self._rt.keys.stats
        try:
            victims = await self._victims(flt, cap, protect=protect, now=now, expected=expected, first=first)

            # On a cluster the pipeline's commands run per node in no set order: the unlock
            # could land before a delete on another shard, and the next holder would count a
            # memory already chosen. There the lock is released after the deletes returned.
            release_here = not self._rt.backend.cluster

            def also(pipe: Any) -> None:
                if victims:  # Monitor reads the counter at once, as the reference writes it
                    pipe.hincrby(stats, "evictions", len(victims))
                if release_here:
                    lock.queue_release(pipe)

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

    async def _victims(
        self,
        flt: MemoryFilter,
        cap: int,
        *,
        protect: set[str],
        now: float,
        expected: int,
        first: _Read | None = None,
    ) -> list[str]:
        if self._fast(flt):
            want = max(1, expected - cap) + len(protect)
            return await self._lowest(flt, cap, protect=protect, want=want, first=first)
        if expected <= cap:
            return []
        # No keep-score index or no SORTBY: rank the scope in the client.
        half_life = self._rt.config().half_life_seconds
        total, hits = await self._scopes.scan_all(
            flt, ("importance", "last_accessed_at", "created_at", "keep"), operation="capacity"
        )
        excess = total - cap
        if excess <= 0:
            return []
        ranked: list[tuple[float, str]] = []
        for h in hits:
            f = h.fields
            seen = max(to_float(f.get("last_accessed_at")), to_float(f.get("created_at"))) / 1000.0
            score = keep_score(seen or now, to_float(f.get("importance"), 0.5), half_life)
            ranked.append((score, self._rt.keys.memory_id_of(h.key)))
        ranked.sort()
        return _pick([mid for _, mid in ranked], protect, excess)

    async def _lowest(
        self,
        flt: MemoryFilter,
        cap: int,
        *,
        protect: set[str],
        want: int,
        first: _Read | None = None,
    ) -> list[str]:
        """The victims of a scope over its cap, read under its lock (so the count is exact:
        two writers over by one evict one memory between them).

        ``want``: the lowest keep-scores to read, the excess the write's own count saw
        plus the write's own memories (which go only when the write alone is over).
        ``first``: a read already done under the lock (the write's round trip), used
        when its bound is still the scope's.
        """
        ceiling = self._ceilings.get(flt)
        tries = 0
        while True:
            bound = None if ceiling is None or tries >= _WIDEN_TRIES else ceiling.floor + ceiling.span
            if first is not None and (first[0] == bound):
                _, total, in_range, hits = first
            else:
                total, in_range, hits = await self._read_lowest(flt, want + _LOOKAHEAD, bound)
            first = None
            excess = total - cap
            if excess <= 0:
                return []
            # The hits are the lowest of the scope (every memory above the bound scores
            # higher), so they settle it once they hold the excess of older memories, or
            # are the whole scope (a write alone over the cap: its own go too).
            others = sum(1 for h in hits if self._rt.keys.memory_id_of(h.key) not in protect)
            if others >= excess or len(hits) >= total:
                break
            if len(hits) < in_range:
                want = excess + len(protect)  # others wrote meanwhile: read the lowest again
                continue
            assert ceiling is not None  # the range holds too few: widen it and read again
            ceiling.span *= _WIDEN
            tries += 1
        ids = [self._rt.keys.memory_id_of(h.key) for h in hits]
        victims = _pick(ids, protect, excess)
        self._learn(flt, hits, victims, ceiling, in_range, protect)
        return victims

    async def _read_lowest(
        self, flt: MemoryFilter, want: int, bound: float | None
    ) -> tuple[int, int, list[SearchHit]]:
        """(the scope's exact count, matches under ``bound``, the lowest ``want`` of them).

        Without a bound, one sorted read of the scope; with one, its count and the sorted
        read below the bound in one round trip.
        """
        if bound is None:
            total, hits = await self._scopes.scan(
                flt, ("keep",), operation="capacity", sortby=("keep", True), limit=want
            )
            assert total is not None  # exact: a server-side filter on this library's index
            return total, total, hits
        count = filter_search_args(self._rt.keys.index, flt, layout=self._rt.index.layout, limit=0)
        below = self._below_args(flt, bound, want)
        replies = await self._rt.backend.pipeline("capacity", lambda pipe: None, searches=[count, below])
        ranged = parse_search_reply(replies[1])
        return parse_search_reply(replies[0], nocontent=True).total, ranged.total, ranged.hits

    def _below_args(self, flt: MemoryFilter, bound: float, want: int) -> list[Any]:
        """The lowest ``want`` keep-scores of the scope at or under ``bound``, sorted."""
        return filter_search_args(
            self._rt.keys.index, dataclasses.replace(flt, max_keep=bound), layout=self._rt.index.layout,
            return_fields=("keep",), sortby=("keep", True), limit=want,
        )  # fmt: skip

    def _learn(
        self, flt: MemoryFilter, hits: Sequence[SearchHit], victims: Sequence[str], ceiling: _Ceiling | None,
        in_range: int, protect: set[str],
    ) -> None:  # fmt: skip
        """Remember where this scope's next victims are: above the highest keep-score evicted,
        within twice the distance to the next one this read saw (kept when it saw none)."""
        chosen = set(victims)
        gone: list[float] = []
        rest: list[float] = []
        for h in hits:
            mid = self._rt.keys.memory_id_of(h.key)
            if mid in chosen:
                gone.append(to_float(h.fields.get("keep")))
            elif mid not in protect:
                rest.append(to_float(h.fields.get("keep")))
        if not gone:
            return
        floor = max(gone)
        span = ceiling.span if ceiling is not None else _MIN_SPAN
        if rest:
            span = max(_MIN_SPAN, 2 * (min(rest) - floor))
        elif ceiling is not None and in_range > 16 * max(1, len(hits)):  # far wider than needed
            span = max(_MIN_SPAN, span / _WIDEN)
        self._ceilings[flt] = _Ceiling(floor, span)
        self._ceilings.move_to_end(flt)
        while len(self._ceilings) > _HINTS:
            self._ceilings.popitem(last=False)


def _pick(ranked: list[str], protect: set[str], excess: int) -> list[str]:
    """The ``excess`` lowest of ``ranked``, older memories before the write's own.

    A write's memories go only when the write alone exceeds the cap (a batch larger
    than it): then the lowest of the batch go too, so the scope ends at the cap.
    """
    older = [m for m in ranked if m not in protect]
    own = [m for m in ranked if m in protect]
    return (older + own)[:excess]


def _filter_parts(flt: MemoryFilter) -> tuple[str | None, ...]:
    s = flt.scope
    return (s.namespace, s.agent_id, s.thread_id, *flt.tags)
