"""Repairing a subject that a writer left half-written (issue 26): what to do, decided here. Pure.

A write with a subject touches the new version's document, the subject's pointer and
version list (``SUBJECT_PUT``, on the subject's own slot), and then, one round trip
later, the versions it ended: the one it replaced moves to its history document
(``RETIRE``) and older ones get their end dates (``SUBJECT_TRIM``). On a cluster these
sit in different slots, so a writer that dies (or loses its connection) between them
leaves a subject half-written. Every write records itself in the store's journal of
unfinished writes (``<name>:subj:pending``, a ZSET: member ``<digest>:<id>``, score the
write's time in ms) in its first round trip, and takes itself off once settled.

What the state tells a repairer, with no knowledge of the lost reply (``plan_repair``):

* the pointer names the current version; every other listed version must not be at the
  main prefix (a **leftover**: moved to history, ``RETIRE``);
* a version ends, at the latest, where the next version valid at some instant begins;
  a version marked void in the pointer (a tie's loser, a version a correction ended)
  ends where it began (``end_of``). Ends only ever shorten (``SUBJECT_TRIM``), so
  applying them again, or in any order, or beside a live writer, changes nothing more;
* a document the journal names but no version list knows never reached its pointer:
  it is put again (``SUBJECT_PUT``), as any write would be;
* a pointer naming a journal's version whose document never landed (the pointer's slot
  took the write, the document's did not) drops it; the latest version still under the
  main prefix is put again, so the version that was current before is current again;
* a pointer naming a journal's version already in history (a retraction moved it there
  and died before taking it off its subject) drops it from the pointer, listed still,
  void when it ended where it began;
* a journal's version the pointer no longer names (a later write replaced it before the
  repair came: a write of this store sends its first round trip beside the look) is
  put right as if the write had come after the repair: listed with no document
  anywhere, it leaves the list (``gone``: its predecessor then ends where the write
  begins, not where the version that never was would have); in history and valid at
  no instant, it is marked void in the pointer (``voided``), as the repair of the
  retraction would have marked it.

Whoever reads or writes next runs this (``tiers.subject_repair``): every step is one a
concurrent writer could take itself, decided on the pointer's slot, so two repairers,
or a repairer and a writer, still leave exactly one current version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .codec import as_text
from .subjects import ORPHAN_GRACE_MS, Retire

__all__ = [
    "JOURNAL_GRACE_MS",
    "PROBE_INTERVAL_S",
    "PROBE_LIMIT",
    "Pointer",
    "RepairPlan",
    "end_of",
    "history_state",
    "journal_member",
    "parse_member",
    "plan_repair",
]

#: A journal entry younger than this is most likely a write still between its round
#: trips: a reader leaves it to its writer (repairing it would be safe, only wasted work).
JOURNAL_GRACE_MS = 5_000
#: How often a store reads the journal on its reads and subject writes (a failure of its
#: own is repaired at its next read or write, whatever the interval).
PROBE_INTERVAL_S = 1.0
#: The most journal entries one read repairs (the rest: the next reads).
PROBE_LIMIT = 64


def journal_member(digest: str, memory_id: str) -> str:
    """The journal's member for one write: ``<digest>:<id>`` (a digest is hex: no colon in it)."""
    return f"{digest}:{memory_id}"


def parse_member(member: Any) -> tuple[str, str] | None:
    """(digest, id) of a journal member; None for anything else."""
    digest, sep, memory_id = as_text(member).partition(":")
    return (digest, memory_id) if sep and digest and memory_id else None


@dataclass(frozen=True, slots=True)
class Pointer:
    """A subject's pointer HASH: its current version, its void versions, what a put needs."""

    current: str | None
    #: Versions valid at no instant -> the version that ended them ("" when not recorded).
    voids: Mapping[str, str] = field(default_factory=dict)
    subject: str = ""
    scope_json: str = ""
    kind: str = ""

    @classmethod
    def parse(cls, raw: Mapping[Any, Any] | Sequence[Any] | None) -> Pointer:
        """From ``HGETALL`` (a mapping under RESP3, a flat list under RESP2)."""
        if not raw:
            return cls(None)
        items = (
            list(raw.items()) if isinstance(raw, Mapping) else list(zip(raw[0::2], raw[1::2], strict=True))
        )
        fields = {as_text(k): as_text(v) for k, v in items}
        voids = {k[5:]: ("" if v == "1" else v) for k, v in fields.items() if k.startswith("void:")}
        return cls(
            fields.get("current") or None,
            voids,
            fields.get("subject", ""),
            fields.get("scope", ""),
            fields.get("kind", ""),
        )


def end_of(versions: Sequence[tuple[str, int]], pointer: Pointer, memory_id: str) -> tuple[int, str] | None:
    """(valid_until, superseded_by) a listed version other than the current one ends at, at the latest.

    Void: where it began. Otherwise where the next later version valid at some instant
    begins. None: nothing later (a past version of a subject whose current one was
    forgotten or retracted keeps the end it has).
    """
    starts = dict(versions)
    begun = starts[memory_id]
    if memory_id in pointer.voids:
        return begun, pointer.voids[memory_id] or (pointer.current or "")
    for mid, vf in sorted(versions, key=lambda v: v[1]):
        if vf > begun and mid not in pointer.voids:
            return vf, mid
    return None


def history_state(valid_from: Any, valid_until: Any) -> str:
    """Where a journal's version is when its history document exists: ``"void"`` (ended where it began) or ``"history"``."""
    vf, vu = as_text(valid_from), as_text(valid_until) if valid_until is not None else None
    return "void" if vu is not None and vu == vf else "history"


@dataclass(frozen=True, slots=True)
class RepairPlan:
    """What one pass of a subject's repair sends (``tiers.subject_repair``).

    ``drop``: the pointer's current version, never written (the pointer leaves it);
    ``puts``: (id, valid_from) to put again; ``gone``: listed versions to take off the
    list; ``voided``: versions to mark void. When any is set the pass sends only those
    and the subject is read again. ``retires``: the moves first, then the trims.
    """

    drop: str | None = None
    puts: tuple[tuple[str, int], ...] = ()
    retires: tuple[Retire, ...] = ()
    #: The dropped version stays listed (a retraction finished: it is in history), void or not.
    keep: bool = False
    void: bool = False
    gone: tuple[str, ...] = ()
    voided: tuple[str, ...] = ()

    @property
    def rewrites_pointer(self) -> bool:
        return self.drop is not None or bool(self.puts or self.gone or self.voided)


def plan_repair(
    pointer: Pointer,
    versions: Sequence[tuple[str, int]],
    hits: Sequence[tuple[str, int | None, int | None]],
    crashed: Mapping[str, str],
    *,
    now_ms: int,
) -> RepairPlan:
    """One subject's repair from its state (see the module docstring).

    ``hits``: (id, valid_from, created_at) of its documents under the main prefix (the
    subject's search, plus the journal's documents read by key: an index may lag).
    ``crashed``: the ids the journal names for this subject -> where their document is
    (``history_state``: ``"main"``, ``"history"``, ``"void"``, or ``""``: nowhere).
    """
    known = dict(versions)
    state = crashed.get(pointer.current) if pointer.current is not None else None
    if state in ("history", "void"):
        # A retraction moved it to history and died before taking it off its subject.
        return RepairPlan(drop=pointer.current, keep=True, void=state == "void")
    if pointer.current is not None and state == "":
        # Its pointer took the write, its document never landed: the write did not happen.
        alive = [(vf, mid) for mid, vf, _ in hits if mid in known and mid not in pointer.voids]
        again = (max(alive)[1],) if alive else ()
        return RepairPlan(drop=pointer.current, puts=tuple((mid, known[mid]) for mid in again))
    others = [(mid, where) for mid, where in crashed.items() if mid in known and mid != pointer.current]
    gone = tuple(mid for mid, where in others if where == "")
    voided = tuple(mid for mid, where in others if where == "void" and mid not in pointer.voids)
    if gone or voided:
        return RepairPlan(gone=gone, voided=voided)
    puts: list[tuple[str, int]] = []
    moves: list[Retire] = []
    for mid, vf, created in hits:
        if mid == pointer.current:
            continue
        if mid in known:
            end = end_of(versions, pointer, mid)
            if end is not None:
                moves.append(Retire(mid, end[0], end[1]))
        elif crashed.get(mid) == "main" or (created is not None and now_ms - created >= ORPHAN_GRACE_MS):
            start = vf if vf is not None else created
            if start is not None:
                puts.append((mid, start))
    if puts:
        return RepairPlan(puts=tuple(puts))
    trims = [
        Retire(mid, end[0], end[1], trim=True)
        for mid, _ in versions
        if mid != pointer.current and (end := end_of(versions, pointer, mid)) is not None
    ]
    return RepairPlan(retires=(*moves, *trims))
