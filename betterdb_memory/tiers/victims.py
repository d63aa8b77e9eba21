"""Which memories a full cap scope loses: the lowest keep-scores, found without sorting the scope.

Victims are the memories with the lowest keep-score (``scoring.keep_score``:
time-invariant, so the order never has to be recomputed), read with ``SORTBY keep
ASC`` and a LIMIT of the excess. RediSearch answers that from a top-N heap;
valkey-search sorts every match (a cost that grows with the scope, many times its
count's). So once a scope has had an eviction, the next ones ask only below a
keep-score ceiling (``@keep:[-inf X]``, a range read of the numeric index):
X is the highest keep-score evicted last time plus a span learned per scope. The
answer is exact whenever the range holds at least the excess (every memory outside
it scores higher); when it does not, the span widens and the read is repeated, and
after a few tries the scope is sorted as before. An index that lacks ``keep`` (made
by another library) or an engine without SORTBY falls back to reading the scope and
ranking it in the client.

The ceilings are hints kept per store object (``HINTS`` scopes): another process's
evictions can make one stale, which costs a wider read, never a wrong victim.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, TypeAlias

from ..core.codec import as_text, to_float, to_int
from ..core.query import IndexLayout, MemoryFilter, filter_search_args
from ..core.replies import SearchHit, parse_search_reply
from ..core.scoring import keep_score
from ..core.validity import keep_from_ms
from .runtime import Runtime
from .scopes import ScopeReader

__all__ = ["HINTS", "LOOKAHEAD", "Read", "Victims", "live", "pick"]

# The keep-score ceiling of a scope's next victim search: tries before sorting the whole
# scope, growth of the span per try, the smallest span, how many scopes are remembered.
_WIDEN_TRIES = 6
#: Victim reads ask for this many more than they need: the keep-scores just above the
#: victims say how far the next ceiling must reach.
LOOKAHEAD = 2
_WIDEN = 8.0
_MIN_SPAN = 1e-9
#: Scopes whose hints (ceilings here, "last counted full" in ``capacity``) a store keeps.
HINTS = 1024

#: A victim read done under the lock: (its keep bound, the scope's count, the matches
#: under the bound, the lowest of them).
Read: TypeAlias = tuple[float, int, int, list[SearchHit]]


@dataclasses.dataclass(slots=True)
class _Ceiling:
    """Where a scope's lowest keep-scores were last found: ``floor`` (the highest evicted)
    and the ``span`` above it that held enough of them."""

    floor: float
    span: float


class Victims:
    """Chooses a full scope's victims, learning per scope where its lowest keep-scores lie."""

    def __init__(self, rt: Runtime, scopes: ScopeReader) -> None:
        self._rt = rt
        self._scopes = scopes
        self._ceilings: OrderedDict[MemoryFilter, _Ceiling] = OrderedDict()

    def fast(self, flt: MemoryFilter) -> bool:
        """Whether victims come from the engine's keep-score order (this library's index)."""
        caps = self._rt.index.capabilities
        assert caps is not None
        return bool(
            self._rt.index.layout.keep
            and caps.sortby
            and caps.filter_queries
            and not self._rt.index.needs_check(flt)
        )

    def bound(self, flt: MemoryFilter) -> float | None:
        """The keep-score ceiling below which ``flt``'s next victims were last found, if known."""
        ceiling = self._ceilings.get(flt)
        return None if ceiling is None else ceiling.floor + ceiling.span

    async def choose(
        self,
        flt: MemoryFilter,
        cap: int,
        *,
        protect: set[str],
        now: float,
        expected: int,
        first: Read | None = None,
    ) -> list[str]:
        """The memories to evict from ``flt`` (its lock held), ``expected`` being its count.

        ``first``: a read under the lock already done (the write's round trip).
        """
        if self.fast(flt):
            want = max(1, expected - cap) + len(protect)
            return await self._lowest(flt, cap, protect=protect, want=want, first=first)
        if expected <= cap:
            return []
        # No keep-score index or no SORTBY: rank the scope in the client.
        half_life = self._rt.config().half_life_seconds
        total, hits = await self._scopes.scan_all(
            live(flt, self._rt.index.layout),
            ("importance", "last_accessed_at", "created_at", "valid_from", "access_count", "subject"),
            operation="capacity",
        )
        excess = total - cap
        if excess <= 0:
            return []
        ranked: list[tuple[float, str]] = []
        for h in hits:
            f = h.fields
            vf = as_text(f.get("valid_from"))
            seen = (
                keep_from_ms(
                    to_float(vf) if vf else None,
                    to_float(f.get("created_at")),
                    to_float(f.get("last_accessed_at")),
                    to_int(f.get("access_count")),
                    state=bool(as_text(f.get("subject"))),
                )
                / 1000.0
            )
            score = keep_score(seen or now, to_float(f.get("importance"), 0.5), half_life)
            ranked.append((score, self._rt.keys.memory_id_of(h.key)))
        ranked.sort()
        return pick([mid for _, mid in ranked], protect, excess)

    async def _lowest(
        self,
        flt: MemoryFilter,
        cap: int,
        *,
        protect: set[str],
        want: int,
        first: Read | None = None,
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
                total, in_range, hits = await self._read_lowest(flt, want + LOOKAHEAD, bound)
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
        victims = pick(ids, protect, excess)
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
                live(flt, self._rt.index.layout), ("keep",), operation="capacity", sortby=("keep", True),
                limit=want,
            )  # fmt: skip
            assert total is not None  # exact: a server-side filter on this library's index
            return total, total, hits
        layout = self._rt.index.layout
        count = filter_search_args(self._rt.index.name, live(flt, layout), layout=layout, limit=0)
        below = self.below_args(flt, bound, want)
        replies = await self._rt.backend.pipeline("capacity", [], searches=[count, below])
        ranged = parse_search_reply(replies[1])
        return parse_search_reply(replies[0], nocontent=True).total, ranged.total, ranged.hits

    def below_args(self, flt: MemoryFilter, bound: float, want: int) -> list[Any]:
        """The lowest ``want`` keep-scores of the scope's live memories at or under ``bound``, sorted."""
        layout = self._rt.index.layout
        return filter_search_args(
            self._rt.index.name, dataclasses.replace(live(flt, layout), max_keep=bound), layout=layout,
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
        while len(self._ceilings) > HINTS:
            self._ceilings.popitem(last=False)


def live(flt: MemoryFilter, layout: IndexLayout) -> MemoryFilter:
    """``flt`` without the memories already expired: what a cap counts and evicts from.

    An expired memory (``expires_at`` passed) is gone for every read, but its key stays
    until the server's expiry removes it (lazily, or by its periodic sampling, a while
    later under many TTLs). Counted, it would push a scope over its cap and cost a live
    memory, leaving the scope under its cap once the server catches up. An index without
    ``expires_at`` (made by another library) cannot tell, and counts every key as before.
    """
    if not layout.expires_at:
        return flt
    return dataclasses.replace(flt, exclude_expired_at=int(time.time() * 1000))


def pick(ranked: list[str], protect: set[str], excess: int) -> list[str]:
    """The ``excess`` lowest of ``ranked``, older memories before the write's own.

    A write's memories go only when the write alone exceeds the cap (a batch larger
    than it): then the lowest of the batch go too, so the scope ends at the cap.
    """
    older = [m for m in ranked if m not in protect]
    own = [m for m in ranked if m in protect]
    return (older + own)[:excess]
