"""An exact KNN over a small scope: a plain filter query for its vectors, ranked here.

valkey-search 1.2 answers a filtered KNN by brute force over the filter's matches only
when it estimates them at most ``search.prefiltering-threshold-ratio`` (0.1% by default)
of the index; above that it filters inline while walking the HNSW graph, visiting about
``k / selectivity`` nodes. A thread of 0.1-1% of a 90k store then costs 300-390 ms per
recall, while a plain tag query returning the same ~92 documents with their vectors
costs 1-3 ms (/work/notes/vsscope-diagnosis.md; bench/bench_scope_scan.py). So a scope
known to be small (``worth_scanning``) is read whole (``LIMIT 0 SCAN_LIMIT+1``:
the reply's total says when it has outgrown the limit) and ranked by the engine's own
COSINE distance (``1 - cos``, the ``__dist`` scale), exact where the HNSW walk is not.

Whether a scan is worth it depends on the scope's size *and* the index's: the walk
visits about ``k / selectivity`` nodes, so a scope of 300 in a store of 3,000 walks 500
nodes in 2-3 ms, cheaper than reading 300 vectors (``worth_scanning``). Both sizes are
learned from replies, never asked for on their own (``SizeClasses``): a scan's total
refreshes its filter's entry; a filter known too big to scan sends its KNN with a
``LIMIT 0 0`` count beside it, in the same round trip, at most once per ``COUNT_TTL_S``,
and the index's count rides along the same way. RediSearch keeps the KNN: its ADHOC_BF
policy does this inside the engine.

A filter never seen (the first recall of a thread: the usual case in a fleet of many
threads) is answered by a *bounded* scan: ``LIMIT 0 B+1`` where ``B = scan_bound(...)``
is the largest scope worth scanning at the index's size. Its total says which case it
was: at most ``B``, the reply holds the whole scope and is ranked here (one round trip,
as warm); above, the filter is learned large and its KNN follows (a second round trip,
having read vectors for nothing). That waste is kept small and from repeating per *kind*
of filter (``filter_shape``: which fields it constrains, not their values):

* a miss of a shape this process has not seen, or whose last miss was found large, reads
  at most ``FIRST_PROBE`` (a scope between that and ``B`` is then scanned whole in a
  second round trip, and its shape is known small: its next misses read ``B`` at once);
* after ``LARGE_STREAK`` misses of one shape in a row found large (an agent scope holding
  the whole store, say), that shape's misses send the KNN with its count, as before the
  bounded scan, until a count of that shape finds one small again.

Measured in bench/results/scope-scan.md ("First recall of a scope").
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from .query import VECTOR_FIELD, IndexLayout, MemoryFilter, build_filter, filter_search_args
from .scan_rows import nearest, nearest_reply

__all__ = [
    "COUNT_TTL_S",
    "FIRST_PROBE",
    "LARGE_COUNT_TTL_S",
    "LARGE_STREAK",
    "PREFILTERED",
    "SCAN_LIMIT",
    "WALK_RATIO",
    "SizeClasses",
    "count_args",
    "filter_key",
    "filter_shape",
    "index_count_args",
    "nearest",
    "nearest_reply",
    "scan_args",
    "scan_bound",
    "scope_of",
    "worth_scanning",
]

# The most memories a scope may hold to be read whole rather than walked: the reply
# carries ~1.8 KB per memory (a 384-d vector and the ranking fields), ~3.5 MB at 2,000.
# Measured in bench/results/scope-scan.md.
SCAN_LIMIT = 2_000
# What one node of a filtered HNSW walk costs, as a fraction of one memory read by a scan
# and ranked here (bench/results/scope-scan.md: ~6 us a node, ~16 us a scanned memory).
WALK_RATIO = 0.4
# Below this fraction of the index a filter's matches are scanned by the engine itself
# (``search.prefiltering-threshold-ratio``, 0.001 by default, applies to its *estimate*,
# which strays around the threshold: at 90,735 memories threads of 91-92 were walked in
# 300-390 ms or scanned in 0.6 ms): half the default leaves no doubt.
PREFILTERED = 0.0005
# valkey-search's default ``EF_RUNTIME``: a KNN asking for fewer still explores this many.
EF_RUNTIME = 10
# How long a filter's count (and the index's) is trusted before a query carries a new one;
# a scanned filter's count is refreshed by every scan's reply.
COUNT_TTL_S = 60.0
# The same for a filter too big ever to be scanned (over ``SCAN_LIMIT``): its count costs as
# much as its matches (a tag matching 90k memories: 130 ms on a loaded 2-core host, 100x a
# thread's) and it rarely shrinks; a late refresh only delays a scan, never changes a hit.
LARGE_COUNT_TTL_S = 900.0
# Distinct filters remembered (oldest forgotten first): time windows make new ones. An
# entry is ~250 bytes; a filter forgotten costs one bounded scan when next recalled.
MAX_FILTERS = 16_384
# Misses of one filter shape in a row found too big to scan, after which that shape's misses
# send the KNN (with a count) instead of the bounded scan; a count saying small resets it.
LARGE_STREAK = 2
# A shape past its streak whose misses carry no count (a time window's query: its text never
# repeats) has no other way back: one miss in this many reads its probe again.
UNCOUNTED_RETRY = 8
MAX_SHAPES = 256
# The most a never-seen filter of a never-seen shape reads (~0.45 MB, 2-4 ms at 90k): about
# what a count's own round trip costs, so a first guess that is wrong costs little.
FIRST_PROBE = 256


def scan_args(
    index: str,
    flt: MemoryFilter,
    layout: IndexLayout,
    return_fields: Sequence[str],
    *,
    limit: int = SCAN_LIMIT,
) -> list[str]:
    """FT.SEARCH of ``flt``'s matches with their vectors, at most ``limit + 1`` of them.

    The same filter text as the KNN (``query.build_filter``: same escaping, negations,
    ranges); the reply's first element is the filter's total, so one more than ``limit``
    says the answer is incomplete.
    """
    fields = [*dict.fromkeys([*return_fields, VECTOR_FIELD])]
    return filter_search_args(index, flt, layout=layout, return_fields=fields, limit=limit + 1)


def count_args(index: str, flt: MemoryFilter, layout: IndexLayout) -> list[str]:
    """FT.SEARCH counting ``flt``'s matches (``LIMIT 0 0``: the reply is the total only).

    ``MemoryFilter()`` counts the whole index (``MATCH_ALL``; fans out on a cluster).
    """
    return filter_search_args(index, flt, layout=layout, return_fields=None, limit=0)


def index_count_args(index: str, *, cluster: bool) -> list[str]:
    """FT.INFO of ``index``: its ``num_docs`` is the index's size, read in constant time.

    It replaces ``count_args(index, MemoryFilter())`` (a ``@created_at:[-inf +inf]``
    range over every document, 12 ms at 90k memories on valkey-search, growing with the
    store). The rule needs the size only to compare a scope with it (``worth_scanning``),
    and valkey-search's own prefiltering threshold is a fraction of this same number. On a
    cluster a plain FT.INFO counts the node's shard; ``PRIMARY`` sums the primaries'.
    """
    return ["FT.INFO", index, "PRIMARY"] if cluster else ["FT.INFO", index]


def scope_of(flt: MemoryFilter) -> MemoryFilter:
    """The scope ``flt`` narrows: ``flt`` without its window, instant and engine clauses.

    Each of those is ANDed with the rest (``build_filter``), so it only removes matches: a
    scope known small stays small under any window (``since`` / ``until``), ``as_of`` or a
    window's own clause (``core.time_recall.inside_clause``). Keyed by this, a filter whose
    time bounds change every call ("last week", resolved against now) finds its scope's
    size instead of missing the cache. ``flt`` itself when it has none of them.
    """
    if not flt.has_time and not flt.clauses:
        return flt
    return dataclasses.replace(
        flt, valid_since=None, valid_before=None, as_of=None, clauses=(), history=False
    )


def filter_key(flt: MemoryFilter, layout: IndexLayout) -> str:
    """What identifies a filter's matches: its engine text (``""``: no filter, never scanned)."""
    return build_filter(flt, layout)


def filter_shape(flt: MemoryFilter) -> str:
    """Which fields ``flt`` constrains, not with what: filters of one shape tend to one size.

    Every thread of a store has the shape ``thread``; an agent's scope, ``agent``. Values
    never appear (the shape only chooses how a never-seen filter is first asked), so a
    ``where=`` counts by the fields it reads and engine clauses by their number.
    """
    s = flt.scope
    where = "" if flt.where is None else ",".join(sorted(flt.where.fields))
    return (
        f"{int(s.namespace is not None)}{int(s.agent_id is not None)}{int(s.thread_id is not None)}"
        f"|{len(flt.tags)}|{len(flt.sources)}|{len(flt.exclude_sources)}|{len(flt.exclude_sensitivity)}"
        f"|{int(flt.dedup is not None)}{int(flt.min_created_at is not None)}{int(flt.max_created_at is not None)}"
        f"{int(flt.max_importance is not None)}{int(flt.max_keep is not None)}"
        f"{int(flt.exclude_expired_at is not None)}{int(flt.valid_since is not None)}"
        f"{int(flt.valid_before is not None)}{int(flt.as_of is not None)}{int(flt.history)}"
        f"|{len(flt.clauses)}|{where}"
    )


def worth_scanning(
    scope: int,
    index_docs: int,
    k: int,
    *,
    limit: int = SCAN_LIMIT,
    ratio: float = WALK_RATIO,
    prefiltered: float = PREFILTERED,
) -> bool:
    """Whether reading ``scope`` memories whole beats the engine's own plan for ``k`` of them.

    The walk visits about ``max(k, EF_RUNTIME) / selectivity`` nodes, the scan reads
    ``scope`` memories: scan when ``scope**2 <= ratio * max(k, EF_RUNTIME) * index_docs``,
    never above ``limit`` (the reply's size), and never where the engine surely scans the
    scope itself (``prefiltered``: no vectors cross the wire then). A store of 3,000
    memories in threads of 300 walks 500 nodes in 2-3 ms where the scan costs 8: it keeps
    the KNN.
    """
    if scope > limit or scope <= prefiltered * index_docs:
        return False
    return scope * scope <= ratio * max(k, EF_RUNTIME) * index_docs


def scan_bound(index_docs: int, k: int, *, limit: int = SCAN_LIMIT, ratio: float = WALK_RATIO) -> int:
    """The largest scope ``worth_scanning`` for ``k`` hits at ``index_docs`` (its floor aside).

    What a never-seen filter's bounded scan asks for (``LIMIT 0 bound+1``): a total at
    most ``bound`` means the reply holds the whole scope. 0 while the index's size is
    unknown (nothing is scanned blind).
    """
    if index_docs <= 0:
        return 0
    return min(limit, math.isqrt(int(ratio * max(k, EF_RUNTIME) * index_docs)))


@dataclass(slots=True)
class _Entry:
    total: int
    at: float


class SizeClasses:
    """Per filter: its last known number of matches and when it was learned (bounded LRU).

    Also the index's size (``index_docs``), which decides with a scope's size whether it
    is worth scanning (``worth_scanning``). ``scan(key, k)``: known worth scanning (each
    scan's total refreshes the entry). ``needs_count(key, now)`` and
    ``needs_index_count(now)``: not learned within ``ttl`` (the next query carries a count).
    A stale entry still decides until its refresh arrives. For filters never seen:
    ``bound(k)`` (their bounded scan's size) and, per ``filter_shape``, how much of it their
    misses read first (``probe``: ``FIRST_PROBE``, all, or none; learned by ``verdict``).
    """

    def __init__(
        self,
        *,
        limit: int = SCAN_LIMIT,
        ratio: float = WALK_RATIO,
        ttl: float = COUNT_TTL_S,
        size: int = MAX_FILTERS,
    ) -> None:
        self.limit = limit
        self.first = FIRST_PROBE
        self.ratio = ratio
        self.index_docs = 0
        self._index_at: float | None = None
        self._ttl = ttl
        self._size = size
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._large: OrderedDict[str, int] = OrderedDict()  # shape -> misses in a row found large

    def __len__(self) -> int:
        return len(self._entries)

    def total(self, key: str) -> int | None:
        """The filter's last known number of matches (None: never learned or forgotten)."""
        entry = self._entries.get(key)
        return None if entry is None else entry.total

    def scan(self, key: str, k: int) -> bool:
        entry = self._entries.get(key)
        if entry is None:
            return False
        self._entries.move_to_end(key)
        return worth_scanning(entry.total, self.index_docs, k, limit=self.limit, ratio=self.ratio)

    def needs_count(self, key: str, now: float) -> bool:
        entry = self._entries.get(key)
        if entry is None:
            return True
        return now - entry.at >= (
            self._ttl if entry.total <= self.limit else self._ttl * LARGE_COUNT_TTL_S / COUNT_TTL_S
        )

    def needs_index_count(self, now: float) -> bool:
        return self._index_at is None or now - self._index_at >= self._ttl

    def learn(self, key: str, total: int, now: float) -> None:
        self._entries[key] = _Entry(total, now)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def learn_index(self, total: int, now: float) -> None:
        self.index_docs, self._index_at = total, now

    def seed_index(self, total: int) -> None:
        """A first guess of the index's size (FT.INFO at opening) until a count is learned."""
        if self._index_at is None and total > 0:
            self.index_docs = total

    def bound(self, k: int) -> int:
        """The bounded scan of a never-seen filter: ``scan_bound`` at the known index size."""
        return scan_bound(self.index_docs, k, limit=self.limit, ratio=self.ratio)

    def probe(self, shape: str, bound: int, *, counted: bool = True) -> int:
        """How many memories a never-seen filter of ``shape`` reads first (0: it is walked).

        ``bound`` when the shape's last miss was found small; ``FIRST_PROBE`` at most when
        the shape was never seen or its last miss was found large (a wrong guess then
        reads little); 0 after ``LARGE_STREAK`` misses in a row found large. A walked
        miss's count (``counted``) gives the shape its next verdict; without one (a time
        window's query), every ``UNCOUNTED_RETRY``-th walked miss reads its probe instead,
        or one run of large windows would walk every later window of the shape.
        """
        streak = self._large.get(shape)
        if streak == 0:
            return bound
        if streak is None or streak < LARGE_STREAK:
            return min(bound, self.first)
        if counted:
            return 0
        self._large[shape] = streak + 1  # walked misses since the last verdict, past the streak
        return min(bound, self.first) if (streak + 1 - LARGE_STREAK) % UNCOUNTED_RETRY == 0 else 0

    def verdict(self, shape: str, small: bool) -> None:
        """A never-seen filter of ``shape`` was found ``small`` (within its bound) or not."""
        self._large[shape] = 0 if small else self._large.get(shape, 0) + 1
        self._large.move_to_end(shape)
        while len(self._large) > MAX_SHAPES:
            self._large.popitem(last=False)

    def forget(self, key: str) -> None:
        self._entries.pop(key, None)
