"""Subjects left half-written by a writer that died between its round trips, repaired by the next reader.

The crash points and what each leaves are in ``core.subject_repair`` (and
docs/concepts/time.md, "A crash between the writes"). Here is the I/O:

* a write with subjects adds ``<digest>:<id>`` to the journal ``<name>:subj:pending``
  in its first round trip (``journal``) and, once settled, takes it off in the
  background (``settled``): no round trip added to the write;
* a write whose settling failed in this process (a lost connection, a cancellation)
  is remembered here (``failed``): this store's next read or subject write repairs it,
  before it reads anything;
* every read (recall, list, count, get, ``fact_history``; ``as_of`` and windows
  included) runs through ``read``: at most once a second (``PROBE_INTERVAL_S``) it
  reads the journal's entries older than ``JOURNAL_GRACE_MS`` (one ``ZRANGE``,
  bounded) *beside* the read, on another connection of the client's pool, and only
  when that look finds an entry does it repair the subjects and send the read again.
  A subject write's first round trip goes beside the look too (``write``), sent once:
  it never needs sending again, since a write and a repair may land in any order; the
  write returns, and settles, only after the repair.

Beside the read, not before it: a look that finds nothing (every look but those after a
crash) then costs the read no round trip of its own, only a command sent with it. The
journal and the read's keys may sit on different nodes of a cluster: two concurrent
requests, not one pipeline (a cluster pipeline sends its searches after its commands).
Repaired inline, not in the background, because the read is then answered as repaired:
a ``count`` cannot leave out a version it never saw, and a list or a recall would have
to read the same pointers to tell a stale version from a current one, which is most of
the repair's cost. Nothing scans: the journal names the subjects, and a subject's
repair reads its pointer, its version list and one TAG search.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from ..backend import scripts
from ..backend.commands import Step, score_pairs
from ..core import subject_repair as journal_rules
from ..core.codec import as_text, to_int
from ..core.subject_repair import (
    Pointer,
    RepairPlan,
    history_state,
    journal_member,
    parse_member,
    plan_repair,
)
from ..core.subjects import PutReply, Retire, SubjectPut
from ..errors import BetterDBMemoryError
from .runtime import Runtime

log = logging.getLogger(__name__)

__all__ = ["SubjectRepair"]

T = TypeVar("T")

_HIST_FIELDS = ("valid_from", "valid_until")
_DOC_FIELDS = ("valid_from", "created_at", "subject", "namespace", "agentId", "threadId", "kind", "source")
_PASSES = 3  # drop/put again; take off what never was; then settle (core.subject_repair)
#: One subject as a repair reads it: its pointer, versions, documents under the main prefix
#: (id, valid_from, created_at), where each crashed write's document is, and those documents.
_State = tuple[
    Pointer,
    list[tuple[str, int]],
    list[tuple[str, int | None, int | None]],
    dict[str, str],
    dict[str, dict[str, str]],
]


class Subjects(Protocol):
    """What a repair uses of ``tiers.subjects.Subjects`` (which owns it)."""

    def search_args(self, digest: str) -> list[Any]: ...

    def found(
        self, digests: Sequence[str], replies: Sequence[Any]
    ) -> dict[str, list[tuple[str, int | None, int | None]]]: ...

    def put_calls(self, puts: Sequence[SubjectPut]) -> list[Step]: ...

    async def retire(self, retires: Sequence[Retire], *, operation: str = ...) -> int: ...


class SubjectRepair:
    """The journal of unsettled subject writes, and the repair its readers run (module docstring)."""

    def __init__(self, rt: Runtime, subjects: Subjects) -> None:
        self._rt = rt
        self._subjects = subjects
        self._local: dict[str, set[str]] = {}  # digest -> ids whose settling failed here
        self._settled: list[str] = []  # journal members settled, not yet taken off
        #: Journal members of this store's writes between their round trips: never "crashed"
        #: to its own looks, whatever their age (``_run``).
        self._writing: set[str] = set()
        self._next_probe = 0.0
        self._lock = asyncio.Lock()
        #: The look at the journal in flight (and the repair it leads to): True when it
        #: repaired something, so the reads sent beside it are sent again.
        self._look: asyncio.Task[bool] | None = None

    # -- the writer's side ----------------------------------------------------------------

    def journal(self, puts: Sequence[SubjectPut], now_ms: int) -> list[Step]:
        """Round trip 1's journal commands: ``puts`` in (``ZADD``), the writes settled since out (``ZREM``)."""
        if not puts:
            return []
        pairs: list[Any] = []
        for p in puts:
            member = journal_member(p.digest, p.id)
            self._writing.add(member)
            pairs += [now_ms, member]
        return [*self._take_settled(), ("ZADD", self._rt.keys.subject_pending, *pairs)]

    def settled(self, puts: Sequence[SubjectPut]) -> None:
        """The writes are settled: off the journal with the next command this store sends it anyway.

        That is the next subject write's first round trip or the next journal probe: no
        round trip of its own. An entry a process never took off (it exited first) costs
        one repair that finds nothing to do.
        """
        members = [journal_member(p.digest, p.id) for p in puts]
        self._writing.difference_update(members)
        self._settled += members

    def entered(self, digest: str, memory_id: str) -> list[Step]:
        """The journal entry of one change of a subject other than a write (a retraction)."""
        return [
            (
                "ZADD",
                self._rt.keys.subject_pending,
                int(time.time() * 1000),
                journal_member(digest, memory_id),
            )
        ]

    def settled_one(self, digest: str, memory_id: str) -> None:
        self._settled.append(journal_member(digest, memory_id))

    def forget(self, digest: str, ids: Sequence[str]) -> list[Step]:
        """The journal commands of an erased subject: its entries off, and the settled writes' too."""
        gone = [journal_member(digest, mid) for mid in ids]
        members, self._settled = list(dict.fromkeys([*gone, *self._settled])), []
        return [("ZREM", self._rt.keys.subject_pending, *members)] if members else []

    def failed(self, puts: Sequence[SubjectPut]) -> None:
        """Settling ``puts`` failed here: this store's next read or subject write repairs them."""
        for p in puts:
            self._writing.discard(journal_member(p.digest, p.id))
            self._local.setdefault(p.digest, set()).add(p.id)

    def _take_settled(self) -> list[Step]:
        members, self._settled = self._settled, []
        return [("ZREM", self._rt.keys.subject_pending, *members)] if members else []

    # -- the reader's side ----------------------------------------------------------------

    async def read(self, operation: str, read: Callable[[], Awaitable[T]], /, *, beside: bool = True) -> T:
        """``read``'s answer, with the subjects a crash left half-written repaired first.

        This store's own failed settling is repaired before ``read`` runs (known: no look
        needed). Otherwise, when a look at the journal is due (once a second) or one is in
        flight, ``read`` runs beside it; if the look repaired something, ``read`` runs
        again, after the repair, and that answer is returned. ``read`` must be safe to run
        twice and beside a repair: it sends reads only. A read that decides writes of its
        own from what it reads (``fact_history`` drops versions it finds gone, which a
        crashed write's missing document looks like) passes ``beside=False``: it looks
        and repairs first, in a round trip before its own. A look that fails is logged
        (``_looked``) and the answer stands, as the read's would without a journal.
        """
        if self._local or not beside or self._rt.supervisor.closed:
            await self.before(operation)  # closing: the look runs inline, as nothing new may start
        look = self._looking(operation)
        if look is None:
            return await read()
        answer, repaired = await asyncio.gather(read(), asyncio.shield(look))
        return await read() if repaired else answer

    async def write(self, operation: str, write: Callable[[], Awaitable[T]], /) -> T:
        """A subject write's first round trip, sent once, with the look at the journal beside it.

        As ``read``, this store's own failed settling is repaired first (known: no look
        needed), and a closing store looks inline. Otherwise, when a look is due or in
        flight, ``write`` runs beside it and its answer is returned only once the look
        and its repair are done: the write's settling (round trip 2) and its return come
        after the repair, as they did when the look went first. ``write`` is never sent
        again: a write and a repair of the same subject may land in any order, as a
        writer in another process and this repair may (``core.subject_repair``: every step
        of either is one a concurrent writer could take, decided on the pointer's slot).
        """
        if self._local or self._rt.supervisor.closed:
            await self.before(operation)
        look = self._looking(operation)
        if look is None:
            return await write()
        answer, _ = await asyncio.gather(write(), asyncio.shield(look))
        return answer

    def _looking(self, operation: str) -> asyncio.Task[bool] | None:
        """The look in flight, or a new one when the last started ``PROBE_INTERVAL_S`` ago (None: neither)."""
        if self._look is not None:
            return self._look
        if time.monotonic() < self._next_probe:
            return None
        self._next_probe = time.monotonic() + journal_rules.PROBE_INTERVAL_S
        look = self._rt.supervisor.spawn(self._looked(operation), name="subjects-look")
        self._look = look
        look.add_done_callback(self._looked_done)
        return look

    def _looked_done(self, look: asyncio.Task[bool]) -> None:
        if self._look is look:
            self._look = None

    async def _looked(self, operation: str) -> bool:
        async with self._lock:
            try:
                return await self._run(operation, look=True)
            except BetterDBMemoryError as exc:  # never the read's own failure: its answer stands
                log.warning(
                    "subjects: repair beside %s failed (%s); the next look tries again", operation, exc
                )
                self._rt.metrics.observe_background_failure("subjects")
                return False

    async def before(self, operation: str) -> None:
        """Repair what this store failed to settle, and (once a second) what the journal says crashed.

        Sequential, before the caller's first round trip: when this store's own settling
        failed (a read or a subject write), for ``fact_history``, and in a closing store. A
        repair that fails is logged and left for the next read (this store's failures stay
        remembered): the caller itself then runs, and meets the same connection.
        """
        if not self._local and time.monotonic() < self._next_probe:
            return
        async with self._lock:
            if not self._local and time.monotonic() < self._next_probe:
                return  # another reader repaired while this one waited
            look = time.monotonic() >= self._next_probe
            if look:
                self._next_probe = time.monotonic() + journal_rules.PROBE_INTERVAL_S
            try:
                await self._run(operation, look=look)
            except BetterDBMemoryError as exc:  # never the read's own failure: it runs next
                log.warning(
                    "subjects: repair before %s failed (%s); the next read tries again", operation, exc
                )
                self._rt.metrics.observe_background_failure("subjects")

    async def _run(self, operation: str, *, look: bool) -> bool:
        """Repair this store's failed settling, and (``look``) what the journal says is past its grace.

        True when there was anything to repair (the subjects were read and put right).
        This store's own writes between their round trips are left to them, however old
        (they settle, or go to ``failed``): a look beside a write may meet its entry, and
        on a cluster its document, still on its way to another node, would read as never
        written and the write be undone.
        """
        crashed = {d: set(ids) for d, ids in self._local.items()}
        members = [journal_member(d, mid) for d, ids in crashed.items() for mid in ids]
        if look:
            cutoff = int(time.time() * 1000) - journal_rules.JOURNAL_GRACE_MS
            probe: Step = (
                "ZRANGE", self._rt.keys.subject_pending, "-inf", cutoff, "BYSCORE", "LIMIT", 0, journal_rules.PROBE_LIMIT,
            )  # fmt: skip
            done = self._take_settled()
            due = (await self._rt.backend.pipeline(operation, [*done, probe]))[-1]
            for raw in due:
                got = parse_member(raw)
                if got is not None and as_text(raw) not in self._writing:
                    crashed.setdefault(got[0], set()).add(got[1])
                    members.append(as_text(raw))
        if crashed:
            await self.repair(crashed, operation=operation)
        if members:
            await self._rt.backend.command(operation, "ZREM", self._rt.keys.subject_pending, *members)
        for d, ids in crashed.items():
            left = self._local.get(d, set()) - ids
            if left:
                self._local[d] = left
            else:
                self._local.pop(d, None)
        return bool(crashed)

    async def repair(self, crashed: Mapping[str, set[str]], *, operation: str) -> int:
        """Bring each subject back to its rule (``core.subject_repair.plan_repair``); how many versions moved.

        ``crashed``: digest -> the ids of the writes that did not settle.
        """
        todo = {d: sorted(ids) for d, ids in crashed.items()}
        moved = 0
        for _ in range(_PASSES):
            if not todo:
                break
            again: dict[str, list[str]] = {}
            steps: list[Step] = []
            retires: list[Retire] = []
            for digest, (pointer, versions, hits, there, docs) in (await self._read(todo, operation)).items():
                plan = plan_repair(pointer, versions, hits, there, now_ms=int(time.time() * 1000))
                retires += plan.retires
                if not plan.rewrites_pointer:
                    continue
                again[digest] = todo[digest]
                steps += self._rewrite(digest, pointer, plan, docs)
            if steps:
                log.info("subjects: %d pointer writes repair %d subjects", len(steps), len(again))
                await self._rt.backend.pipeline(operation, steps)
            moved += await self._subjects.retire(retires, operation=operation)
            todo = again
        return moved

    async def _read(self, todo: Mapping[str, Sequence[str]], operation: str) -> dict[str, _State]:
        """Each subject's pointer, versions, documents under the main prefix, and its crashed writes' documents."""
        keys = self._rt.keys
        reads: list[Step] = []
        for digest, ids in todo.items():
            reads += [
                ("HGETALL", keys.subject(digest)),
                ("ZRANGE", keys.subject_versions(digest), 0, -1, "WITHSCORES"),
            ]
            for mid in ids:
                reads += [
                    ("HMGET", keys.doc(mid), *_DOC_FIELDS),
                    ("HMGET", keys.hist_doc(mid), *_HIST_FIELDS),
                ]
        searches = [self._subjects.search_args(d) for d in todo]
        got = await self._rt.backend.pipeline(operation, reads, searches=searches)
        found = self._subjects.found(list(todo), got[len(reads) :])
        out: dict[str, _State] = {}
        n = 0
        for digest, ids in todo.items():
            pointer = Pointer.parse(got[n])
            versions = [(as_text(m), int(score)) for m, score in score_pairs(got[n + 1])]
            n += 2
            hits = list(found.get(digest, ()))
            seen = {h[0] for h in hits}
            there: dict[str, str] = {}
            docs: dict[str, dict[str, str]] = {}
            for mid in ids:
                row, hist = got[n], got[n + 1]
                n += 2
                live = row[1] is not None  # created_at: every document has it
                there[mid] = (
                    "main" if live else history_state(hist[0], hist[1]) if hist[0] is not None else ""
                )
                if live:
                    docs[mid] = {
                        f: as_text(v) for f, v in zip(_DOC_FIELDS, row, strict=True) if v is not None
                    }
                    if mid not in seen:  # the index may lag; the document is read by its key
                        vf, created = docs[mid].get("valid_from"), docs[mid].get("created_at")
                        hits.append((mid, to_int(vf) if vf else None, to_int(created) if created else None))
            out[digest] = (pointer, versions, hits, there, docs)
        return out

    def _rewrite(
        self, digest: str, pointer: Pointer, plan: RepairPlan, docs: Mapping[str, Mapping[str, str]]
    ) -> list[Step]:
        keys = self._rt.keys
        ptr, hist = keys.subject(digest), keys.subject_versions(digest)
        out: list[Step] = []
        if plan.drop is not None:
            out.append(scripts.SUBJECT_DROP.call([ptr, hist], [plan.drop, "1" if plan.keep else "0"]))
            if plan.void:
                out.append(("HSETNX", ptr, f"void:{plan.drop}", "1"))
        out += [scripts.SUBJECT_DROP.call([ptr, hist], [mid, "0"]) for mid in plan.gone]
        out += [("HSETNX", ptr, f"void:{mid}", "1") for mid in plan.voided]
        calls = [
            SubjectPut(mid, digest, vf, *self._meta(pointer, docs.get(mid, {}))) for mid, vf in plan.puts
        ]
        return [*out, *self._subjects.put_calls(calls)]

    def _meta(self, pointer: Pointer, doc: Mapping[str, str]) -> tuple[str, str, str]:
        """(subject, scope JSON, kind) of a put again: the pointer's, or the document's when it has none."""
        if pointer.scope_json:
            return pointer.subject, pointer.scope_json, pointer.kind
        source = doc.get("source")
        kind = doc.get("kind") or (
            "summary"
            if source == "summary"
            else "fact"
            if source == self._rt.settings.fact_source
            else "memory"
        )
        scope = SubjectPut.scope_of(
            doc.get("namespace") or None, doc.get("agentId") or None, doc.get("threadId") or None
        )
        return doc.get("subject", ""), scope, kind

    # -- the write's own check: versions that vanished -------------------------------------

    async def heal(
        self,
        puts: Sequence[SubjectPut],
        replies: list[PutReply],
        found: Mapping[str, Sequence[tuple[str, int | None, int | None]]],
        operation: str,
    ) -> list[PutReply]:
        """Drop versions whose documents vanished (evicted, expired, deleted by tags); the replies to plan with.

        Suspects, only: the pointer's current and the version a write replaced, when the
        subject's search did not return them. Neither the document nor its history
        document left: the version leaves the list (``SUBJECT_DROP``). A vanished current
        one is no current version at all, so the subject's writes of this round trip are
        put again and decided without it (an older-dated write may now be current).
        One more round trip when a search misses a suspect, two when one is gone; none
        otherwise.
        """
        written = {p.id for p in puts}
        suspects: dict[tuple[str, str], bool] = {}  # (digest, id) -> is the pointer's current
        for put, rep in zip(puts, replies, strict=True):
            seen = {h[0] for h in found.get(put.digest, ())}
            if rep.pointer and rep.pointer not in written and rep.pointer not in seen:
                suspects[(put.digest, rep.pointer)] = True
            if rep.replaced and rep.replaced not in written and rep.replaced not in seen:
                suspects.setdefault((put.digest, rep.replaced), False)
        if not suspects:
            return replies
        keys = self._rt.keys
        # Moved to its history document meanwhile (a concurrent writer superseded it) is not gone.
        checks: list[Step] = [("EXISTS", keys.doc(mid), keys.hist_doc(mid)) for _, mid in suspects]
        alive = await self._rt.backend.pipeline(operation, checks)
        gone = [key for key, n in zip(suspects, alive, strict=True) if not int(n)]
        if not gone:
            return replies
        log.info("subjects: %d versions vanished (evicted, expired or deleted by tags); dropped", len(gone))
        again = [(n, p) for n, p in enumerate(puts) if any(suspects[g] and g[0] == p.digest for g in gone)]
        drops: list[Step] = [
            scripts.SUBJECT_DROP.call([keys.subject(d), keys.subject_versions(d)], [mid, "0"])
            for d, mid in gone
        ]
        got = await self._rt.backend.pipeline(
            operation, [*drops, *self._subjects.put_calls([p for _, p in again])]
        )
        out = list(replies)
        for (n, _), reply in zip(again, got[len(drops) :], strict=True):
            out[n] = PutReply.parse(reply)
        return out
