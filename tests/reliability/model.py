"""A plain-Python model of the store's documented semantics, for ``test_model``.

What it holds is what README's "Concepts" and "API" promise, nothing read from the
store: memories by id with their exact scope ``(namespace, agent_id, thread_id)``
and tags; filters where ``None`` means any and ``tags`` means ALL of them (values
compared exactly: TAG fields are case-sensitive); ``max_items_per_scope`` counted
over the write's scope fields *as a filter* plus all its tags (an unscoped, untagged
write is never capped), the excess going lowest keep-score first and never the
memory just written; ``update`` is never capped; upserts keep the memory's creation
time; a TTL (hours long here, so nothing expires) is the write's own, kept by
``update(ttl=None)`` and removed by ``update(ttl=0)``. L1 sessions keep the last ``window`` turns (``summarize_batch=0``).

Keep-score: ``t / half_life + log2(max(importance, 1e-3))`` with ``t`` the creation
time. The test's half-life is so long (``HALF_LIFE``) that the time term only breaks
ties between equal importances, oldest first; memories created in the same
millisecond tie exactly, so ``Model.evict`` answers with the victims it is sure of
and the tie class the remaining ones must come from.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

HALF_LIFE = 1e9  # seconds: recency ~1 for every memory, keep order = importance, then age
WINDOW = 5  # max_session_turns of the modelled store (summaries off)
_MIN_IMPORTANCE = 1e-3


@dataclasses.dataclass(frozen=True, slots=True)
class Filter:
    """A read or delete selector: ``None`` is any value, ``tags`` must all be present."""

    namespace: str | None = None
    agent_id: str | None = None
    thread_id: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def unscoped(self) -> bool:
        return self.namespace is None and self.agent_id is None and self.thread_id is None and not self.tags

    def kwargs(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "agent_id": self.agent_id,
            "thread_id": self.thread_id,
            "tags": list(self.tags) or None,
        }


@dataclasses.dataclass(slots=True)
class Memory:
    id: str
    content: str
    importance: float
    tags: tuple[str, ...]
    namespace: str | None
    agent_id: str | None
    thread_id: str | None
    born: int  # creation order (kept by upserts and updates): the keep-score's time term
    vector_seed: int | None  # None once new content was embedded again (the vector is the embedder's)
    expiring: bool = False  # written with a TTL (hours: none expires during a test)

    def matches(self, flt: Filter) -> bool:
        return (
            (flt.namespace is None or flt.namespace == self.namespace)
            and (flt.agent_id is None or flt.agent_id == self.agent_id)
            and (flt.thread_id is None or flt.thread_id == self.thread_id)
            and set(flt.tags) <= set(self.tags)
        )

    @property
    def keep_class(self) -> float:
        """The keep-score's importance term (equal ones order by age, or tie within a millisecond)."""
        return math.log2(max(self.importance, _MIN_IMPORTANCE))


@dataclasses.dataclass(frozen=True, slots=True)
class Eviction:
    """What a capped write must evict: ``sure`` ids, then ``more`` of ``ties`` (any of them)."""

    sure: tuple[str, ...] = ()
    ties: tuple[str, ...] = ()
    more: int = 0


class Model:
    """Memories and L1 turns as the README describes them."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.memories: dict[str, Memory] = {}
        self.deleted: set[str] = set()  # ids forgotten or evicted and not written since
        self.turns: dict[tuple[str | None, str], list[str]] = {}
        self._clock = 0

    # -- memories ----------------------------------------------------------------------

    def write(
        self,
        mid: str,
        content: str,
        importance: float,
        tags: Sequence[str],
        namespace: str | None,
        agent_id: str | None,
        thread_id: str | None,
        vector_seed: int,
        expiring: bool = False,
    ) -> Eviction:
        """``remember`` (an upsert when ``mid`` exists); what its cap must evict."""
        old = self.memories.get(mid)
        self._clock += 1
        self.memories[mid] = Memory(
            mid,
            content,
            importance,
            tuple(sorted(set(tags))),
            namespace,
            agent_id,
            thread_id,
            born=old.born if old is not None else self._clock,
            vector_seed=vector_seed,
            expiring=expiring,
        )
        self.deleted.discard(mid)
        flt = Filter(namespace, agent_id, thread_id, tuple(sorted(set(tags))))
        return Eviction() if flt.unscoped else self.evict(flt, protect=mid)

    def evict(self, flt: Filter, *, protect: str) -> Eviction:
        """The lowest keep-scores of ``flt`` beyond the cap, ``protect`` (the write) spared."""
        others = [m for m in self.matching(flt) if m.id != protect]
        excess = len(others) + 1 - self.cap
        if excess <= 0:
            return Eviction()
        ranked = sorted(others, key=lambda m: (m.keep_class, m.born))
        boundary = ranked[excess - 1].keep_class
        sure = tuple(m.id for m in ranked[:excess] if m.keep_class < boundary)
        ties = tuple(m.id for m in ranked if m.keep_class == boundary)
        return Eviction(sure, ties, excess - len(sure))

    def update(
        self,
        mid: str,
        importance: float | None,
        tags: Sequence[str] | None,
        content: str | None,
        ttl: float | None = None,
    ) -> None:
        """``update``: None keeps a value (``ttl=None`` the remaining TTL), ``ttl=0`` removes the TTL."""
        m = self.memories[mid]
        if ttl is not None:
            m.expiring = ttl > 0
        if importance is not None:
            m.importance = importance
        if tags is not None:
            m.tags = tuple(sorted(set(tags)))
        if content is not None:
            m.content = content
            m.vector_seed = None  # update() embeds changed content again: the seed's vector is gone

    def forget(self, ids: Iterable[str]) -> int:
        n = 0
        for mid in list(ids):
            if self.memories.pop(mid, None) is not None:
                self.deleted.add(mid)
                n += 1
        return n

    def matching(self, flt: Filter) -> list[Memory]:
        return [m for m in self.memories.values() if m.matches(flt)]

    # -- L1 ----------------------------------------------------------------------------

    def store_turn(self, agent_id: str | None, thread_id: str, user: str) -> None:
        turns = self.turns.setdefault((agent_id, thread_id), [])
        turns.append(user)
        del turns[:-WINDOW]

    def recent(self, agent_id: str | None, thread_id: str, n: int | None) -> list[str]:
        turns = self.turns.get((agent_id, thread_id), [])
        return list(turns if n is None else turns[-n:])

    def clear_session(self, agent_id: str | None, thread_id: str) -> None:
        self.turns.pop((agent_id, thread_id), None)
