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

Consolidation (``mode="facts"``, docs/concepts/consolidation.md): the candidates are the
memories of the target's scope that are not facts and that no earlier run into that
target consumed (by id: an upsert under a consumed id stays consumed); the extractor
is called only when there are some, and all of them are consumed. Its facts are
applied dated ones in date order, undated ones where they stand; per exact target
scope and normalised subject (NFKC, case-folded, whitespace collapsed) a statement
equal to the current one, or dated before a dated current one, changes nothing; else
it is written (a memory of kind ``fact``, content ``[date] statement``, the target's
exact scope, no tags, uncapped); a tombstone retracts the current one (unless dated
before it). The plan's ops are applied in its order, and which version is current is
the subject rule's (docs/concepts/time.md, "One version at each instant"): a fact starts
at its date, undated at its page's time (the latest creation of its candidates; a later
creation is a later time, every date is earlier), raised to the start of the version the
plan says it replaces; it is current unless it is older than the current version, or,
with none current, older than a version left that is valid at some instant (a tie's
loser and a fact retracted at its start are valid at none; a forgotten or evicted
version has left). The first statement after a tombstone of its subject in the plan is a
correction: current whatever its start, every version starting at or after it void. A
past one, the version it replaces and a retracted one leave
``list`` for their history. Facts are memories: they count in caps, are evicted,
listed, counted, recalled, forgotten like any other.

Keep-score: ``t / half_life + log2(max(importance, 1e-3))`` with ``t`` the creation
time (docs/concepts/time.md: recency counts from ``valid_from``, which the model's
memories do not set; a fact is its subject's current version and keeps from its write at
the earliest, however long ago its ``date``; nothing here is reinforced). The test's half-life is so long (``HALF_LIFE``) that the time term only breaks
ties between equal importances, oldest first; memories created in the same
millisecond tie exactly, so ``Model.evict`` answers with the victims it is sure of
and the tie class the remaining ones must come from.
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
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
    kind: str = "memory"  # "fact" for consolidation's output

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


Target = tuple[str | None, str | None, str | None]  # an exact scope: (namespace, agent_id, thread_id)
# A fact's start: (0, date, 0) for a dated one, (1, "", born) at a page's time (after every date).
Start = tuple[int, str, int]


def start_of(date: str | None, page: int) -> Start:
    return (0, date, 0) if date is not None else (1, "", page)


def normalise(text: str) -> str:
    """How subjects and statements are compared: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclasses.dataclass(frozen=True, slots=True)
class ScriptedFact:
    """One fact the scripted extractor returns (``betterdb_memory.Fact``'s fields)."""

    subject: str
    statement: str
    date: str | None = None  # an ISO date: they order as text
    tombstone: bool = False

    @property
    def content(self) -> str:
        return f"[{self.date}] {self.statement}" if self.date else self.statement


@dataclasses.dataclass(slots=True)
class FactRun:
    """What a facts run must do: its candidates (oldest first), the facts it writes (in order), the rest."""

    target: Target
    candidates: list[str] = dataclasses.field(default_factory=list)
    puts: list[ScriptedFact] = dataclasses.field(default_factory=list)
    # Per put: the current fact it replaces (an id, or the index of an earlier put), or None.
    replaces: list[str | int | None] = dataclasses.field(default_factory=list)
    retracts: list[str | int] = dataclasses.field(default_factory=list)  # ids or put indexes
    # The puts that follow a tombstone of their subject in the plan: current from their start.
    corrections: set[int] = dataclasses.field(default_factory=set)
    # In the plan's order: ("put", index into puts, None) or ("del", id or put index, the tombstone's date).
    ops: list[tuple[str, str | int, str | None]] = dataclasses.field(default_factory=list)
    page: int = 0  # the page's time: the latest creation (``born``) of its candidates
    unchanged: int = 0
    unmatched: list[str] = dataclasses.field(default_factory=list)


class Model:
    """Memories and L1 turns as the README describes them."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.memories: dict[str, Memory] = {}
        self.deleted: set[str] = set()  # ids forgotten or evicted and not written since
        self.turns: dict[tuple[str | None, str], list[str]] = {}
        self._clock = 0
        # Facts: per target, the ids consumed; per (target, subject) the current fact's id
        # (current while it is still a memory); per fact, its normalised statement and date.
        self.consumed: dict[Target, set[str]] = {}
        self.current: dict[tuple[Target, str], str] = {}
        self.fact_of: dict[str, ScriptedFact] = {}
        self.history: set[str] = set()  # facts superseded or retracted: out of list, kept for history
        # The subject rule: per fact its start, per (target, subject) its versions (in the
        # list), the versions valid at no instant (void) and each fact's (target, subject).
        self.starts: dict[str, Start] = {}
        self.versions: dict[tuple[Target, str], dict[str, None]] = {}
        self.void: set[str] = set()
        self.version_key: dict[str, tuple[Target, str]] = {}

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

    # -- consolidation (facts) -----------------------------------------------------------

    def current_facts(self, target: Target) -> dict[str, str]:
        """Normalised subject -> id of the target's current facts (a forgotten or evicted one is none)."""
        return {
            subject: mid for (t, subject), mid in self.current.items() if t == target and mid in self.memories
        }

    def plan_facts(self, target: Target, script: Sequence[ScriptedFact]) -> FactRun:
        """What ``consolidate("facts")`` into ``target`` must do with the extractor's ``script``."""
        run = FactRun(target)
        consumed = self.consumed.setdefault(target, set())
        run.candidates = [
            m.id
            for m in sorted(self.matching(Filter(*target)), key=lambda m: m.born)
            if m.kind != "fact" and m.id not in consumed
        ]
        if not run.candidates:
            return run  # the extractor is not called
        consumed.update(run.candidates)
        run.page = max(self.memories[mid].born for mid in run.candidates)
        dated = [i for i, f in enumerate(script) if f.date is not None]
        order = list(range(len(script)))
        for slot, i in zip(dated, sorted(dated, key=lambda i: str(script[i].date)), strict=True):
            order[slot] = i
        # subject -> (ref, normalised statement, date): ref an id or an index into run.puts
        state: dict[str, tuple[str | int, str, str | None] | None] = {
            subject: (mid, normalise(self.fact_of[mid].statement), self.fact_of[mid].date)
            for subject, mid in self.current_facts(target).items()
        }
        tombstoned: set[str] = set()
        for i in order:
            fact = script[i]
            key = normalise(fact.subject)
            cur = state.get(key)
            older = cur is not None and fact.date is not None and cur[2] is not None and fact.date < cur[2]
            if fact.tombstone:
                tombstoned.add(key)
                if cur is None:
                    run.unmatched.append(fact.subject)
                elif older:
                    run.unchanged += 1
                else:
                    run.retracts.append(cur[0])
                    run.ops.append(("del", cur[0], fact.date))
                    state[key] = None
                continue
            if cur is not None and (normalise(fact.statement) == cur[1] or older):
                run.unchanged += 1
                continue
            run.puts.append(fact)
            if cur is None and key in tombstoned:
                run.corrections.add(len(run.puts) - 1)
            run.replaces.append(None if cur is None else cur[0])
            run.ops.append(("put", len(run.puts) - 1, None))
            state[key] = (len(run.puts) - 1, normalise(fact.statement), fact.date)
        return run

    def apply_facts(self, run: FactRun, ids: Sequence[str], importance: float) -> None:
        """The run's ops applied in order, its facts written under ``ids`` (the store's, in order)."""
        assert len(ids) == len(run.puts)
        ns, agent, thread = run.target
        for action, ref, date in run.ops:
            if action == "del":
                self._retract(run, ids[ref] if isinstance(ref, int) else ref, date)
                continue
            assert isinstance(ref, int)
            fact, mid, replaces = run.puts[ref], ids[ref], run.replaces[ref]
            key = (run.target, normalise(fact.subject))
            start = start_of(fact.date, run.page)
            if replaces is not None:
                start = max(start, self.starts[ids[replaces] if isinstance(replaces, int) else replaces])
            self._clock += 1
            self.memories[mid] = Memory(
                mid, fact.content, importance, (), ns, agent, thread,
                born=self._clock, vector_seed=None, kind="fact",
            )  # fmt: skip
            self.fact_of[mid], self.starts[mid], self.version_key[mid] = fact, start, key
            self._subject_put(key, mid, correction=ref in run.corrections)

    def _subject_put(self, key: tuple[Target, str], mid: str, *, correction: bool = False) -> None:
        """``SUBJECT_PUT``: is the new version ``mid`` current; the one it replaces or itself to history.

        A correction is current whatever its start: the versions starting at or after it are void.
        """
        versions = self.versions.setdefault(key, {})
        for v in [v for v in versions if v not in self.memories and v not in self.history]:
            del versions[v]  # forgotten or evicted: left the subject (the write's repair)
            if self.current.get(key) == v:
                del self.current[key]
        start = self.starts[mid]
        self.void.update(v for v in versions if self.starts[v] == start)  # a tie: the later write wins
        if correction:
            self.void.update(v for v in versions if self.starts[v] >= start)
        latest = max((self.starts[v] for v in versions if v not in self.void), default=None)
        versions[mid] = None
        cur = self.current.get(key)
        if (
            correction
            or (cur is not None and start >= self.starts[cur])
            or (cur is None and (latest is None or start >= latest))
        ):
            self.current[key] = mid
            if cur is not None:
                self._to_history(cur)
        else:
            self._to_history(mid)  # a past version

    def _retract(self, run: FactRun, mid: str, date: str | None) -> None:
        """A tombstone: off its subject, to history, void when it ends where it began."""
        key = self.version_key[mid]
        if self.current.get(key) == mid:
            del self.current[key]
        if mid in self.memories:  # (a fact the run wrote as a past version is left as it is)
            self._to_history(mid)
            if max(start_of(date, run.page), self.starts[mid]) == self.starts[mid]:
                self.void.add(mid)

    def _to_history(self, mid: str) -> None:
        if self.memories.pop(mid, None) is not None:
            self.history.add(mid)

    def forget_past(self, mid: str) -> None:
        """``forget`` of a fact's past version: its history document and its place on the subject go."""
        if mid in self.history:
            self.history.discard(mid)
            self.deleted.add(mid)

    def forget_targets(self, flt: Filter) -> None:
        """A whole-scope ``forget_by_scope``: the subjects, history and consumed sources of the targets in it."""
        inside = Filter(flt.namespace, flt.agent_id, flt.thread_id)
        for target in list(self.consumed):
            if Memory("", "", 0.0, (), *target, born=0, vector_seed=None).matches(inside):
                del self.consumed[target]
        for mid, (target, _) in list(self.version_key.items()):
            if Memory("", "", 0.0, (), *target, born=0, vector_seed=None).matches(inside):
                self.forget_past(mid)
        for key in [
            k
            for k in self.versions
            if Memory("", "", 0.0, (), *k[0], born=0, vector_seed=None).matches(inside)
        ]:
            del self.versions[key]
            self.current.pop(key, None)

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
