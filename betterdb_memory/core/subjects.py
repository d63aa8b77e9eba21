"""Subjects: what a memory states something about ("home city"), matched after normalisation.

A subject has at most one current memory per exact scope and kind, so two spellings
of one subject must meet: ``"Home  City"``, ``"home city"`` and ``"ＨＯＭＥ city"`` are
one subject. The matching form is NFKC (compatibility characters folded: full-width
letters, ligatures), case-folded (``casefold``, not ``lower``: ``"Straße"`` meets
``"STRASSE"``), with whitespace collapsed to single spaces and trimmed; it is the same
form ``core.codec.normalise`` gives fact subjects, so the facts mode and
``remember(subject=...)`` share one namespace of subjects.

Commas and any other printable characters are allowed: the subject is never a TAG
value. What the index holds is ``subject_digest`` of the matching form (hex), which
needs no escaping and has no separator to collide with; the text itself is stored
beside it for display and for ``fact_history``.

The bound (256 characters) applies to the matching form, which is what is stored and
compared (NFKC and case folding can lengthen a text: ``"ß"`` folds to ``"ss"``).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError
from .codec import as_text, to_int

__all__ = [
    "MAX_SUBJECT_CHARS",
    "ORPHAN_GRACE_MS",
    "PutReply",
    "Retire",
    "SubjectPut",
    "next_version",
    "normalise_subject",
    "plan_settle",
    "subject_digest",
    "subject_key_of",
    "subject_search_query",
]

MAX_SUBJECT_CHARS = 256


def normalise_subject(subject: object, *, name: str = "subject") -> str:
    """The matching form of a subject: NFKC, case-folded, whitespace collapsed.

    Args:
        subject: the caller's subject text.
        name: the argument's name, for the error.

    Returns:
        The normalised text (1-256 characters).

    Raises:
        ValidationError: ``validation.type`` for a non-string, ``validation.empty``
            for a subject that is empty once normalised, ``validation.too_long``
            past 256 characters, ``validation.encoding`` for text that is not valid
            Unicode (a lone surrogate).
    """
    if not isinstance(subject, str):
        raise ValidationError(
            f"{name} must be a string, not {type(subject).__name__}",
            code="validation.type",
            details={"argument": name, "type": type(subject).__name__},
        )
    try:
        subject.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"{name} is not valid Unicode (lone surrogate)",
            code="validation.encoding",
            details={"argument": name},
        ) from None
    out = " ".join(unicodedata.normalize("NFKC", subject).casefold().split())
    if not out:
        raise ValidationError(
            f"{name} must not be empty", code="validation.empty", details={"argument": name}
        )
    if len(out) > MAX_SUBJECT_CHARS:
        raise ValidationError(
            f"{name} is {len(out)} characters once normalised; at most {MAX_SUBJECT_CHARS}",
            code="validation.too_long",
            details={"argument": name, "length": len(out), "max": MAX_SUBJECT_CHARS},
        )
    return out


def subject_digest(normalised: str) -> str:
    """20 hex digits naming a normalised subject in keys and in the index's TAG field.

    The same digest as ``core.facts.subject_digest`` (blake2b, 10 bytes), so a subject
    written by ``remember(subject=...)`` and one reconciled by the facts mode are one.
    """
    return hashlib.blake2b(normalised.encode(), digest_size=10).hexdigest()


def subject_key_of(scope_tag: str, kind: str, normalised: str) -> str:
    """The digest ``D`` of one subject in one exact scope and kind (``subject_key``, ``<name>:subj:{D}``).

    Scope and kind are part of it, so a fact never supersedes a user's memory and a
    thread's subject never meets another thread's.
    """
    return subject_digest(f"{scope_tag}\x00{kind}\x00{normalised}")


def subject_search_query(digest: str) -> str:
    """The filter of every main-prefix document of one subject (a hex digest: nothing to escape)."""
    return f"@subject_key:{{{digest}}}"


#: A document of a subject found in the index but in no version list is left alone this
#: long after its ``created_at``: it is most likely a concurrent write between its
#: ``HSET`` and its ``SUBJECT_PUT``; older, it is a write that never reached its pointer.
ORPHAN_GRACE_MS = 60_000


@dataclass(frozen=True, slots=True)
class SubjectPut:
    """One write of a subject: what ``SUBJECT_PUT`` is told (the scope as JSON for the pointer).

    ``correction``: consolidation's statement after a retraction of its subject in the
    same plan; current from ``valid_from`` whatever began after it (those become void).
    """

    id: str
    digest: str
    valid_from: int
    subject: str
    scope_json: str
    kind: str
    correction: bool = False

    def args(self) -> list[Any]:
        out = [self.id, str(self.valid_from), self.subject, self.scope_json, self.kind]
        return [*out, "1"] if self.correction else out

    @staticmethod
    def scope_of(namespace: str | None, agent_id: str | None, thread_id: str | None) -> str:
        return json.dumps([namespace, agent_id, thread_id], ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class PutReply:
    """``SUBJECT_PUT``'s answer: the decision, the version it replaced, and the versions after it."""

    current: bool  # the write is the subject's current version now
    replaced: str | None  # the current version it replaced (to retire), if any
    pointer: str | None  # the pointer's current id after the call
    versions: tuple[tuple[str, int], ...]  # (id, valid_from) of every version, oldest first

    @classmethod
    def parse(cls, reply: Sequence[Any]) -> PutReply:
        decision, replaced, pointer, flat = reply[0], reply[1], reply[2], reply[3]
        pairs = [(as_text(flat[i]), to_int(flat[i + 1])) for i in range(0, len(flat), 2)]
        return cls(
            current=as_text(decision) == "current",
            replaced=as_text(replaced) or None,
            pointer=as_text(pointer) or None,
            versions=tuple(pairs),
        )

    def before(self, memory_id: str, valid_from: int) -> list[str]:
        """The versions a write at ``valid_from`` must end: those that may still be valid then.

        The versions of the same instant (the later write wins a tie) and those of the
        latest earlier instant; any older one already ends where a later one begins.
        """
        others = [(mid, vf) for mid, vf in self.versions if mid != memory_id and vf <= valid_from]
        earlier = [vf for _, vf in others if vf < valid_from]
        last = max(earlier) if earlier else None
        return [mid for mid, vf in others if vf in (valid_from, last)]

    def after(self, memory_id: str, valid_from: int) -> tuple[int, str] | None:
        """(valid_from, id) of the version that followed ``memory_id`` (None: none known).

        The first version with a later ``valid_from``; with none later, the current one
        (same instant: a zero-length validity, the later write won).
        """
        for mid, vf in self.versions:
            if vf > valid_from and mid != memory_id:
                return vf, mid
        if self.pointer and self.pointer != memory_id:
            for mid, vf in self.versions:
                if mid == self.pointer:
                    return max(vf, valid_from), mid
        return None


@dataclass(frozen=True, slots=True)
class Retire:
    """A version leaving the main prefix for its history document."""

    id: str
    valid_until: int
    superseded_by: str
    #: A version already in history whose validity a past-dated write shortens
    #: (``SUBJECT_TRIM``), rather than one to move.
    trim: bool = False


def plan_settle(
    puts: Sequence[SubjectPut],
    replies: Sequence[PutReply],
    hits: Mapping[str, Sequence[tuple[str, int | None, int | None]]],
    *,
    now_ms: int,
) -> tuple[list[Retire], list[tuple[str, str, int]]]:
    """What round trip 2 of a write with subjects does, from round trip 1's replies. Pure.

    ``hits``: per digest, the subject's documents still under the main prefix as
    (id, valid_from, created_at). Returns (the versions to retire, the orphans to put
    again as (digest, id, valid_from)):

    * a write that became current retires the version it replaced (valid until the
      new ``valid_from``); with none replaced (the current one was forgotten, retracted
      or vanished) it shortens the past versions before it to end where it begins;
    * a correction (``SubjectPut.correction``) also ends every version that began at or
      after it where that version began (valid at no instant, as ``SUBJECT_PUT``
      marked it), the one it replaced included, and ends those before it where it begins;
    * a past-dated write retires itself (valid until the next version's) and shortens
      the versions before it (``PutReply.before``: ties included, the later write wins),
      already in history, to end where it begins (``trim``);
    * a leftover (a version already superseded per the pointer's list but still in the
      main prefix: a writer that crashed or lost its reply between its round trips) is
      retired by whoever sees it next;
    * an orphan (in the index, in no version list, older than ``ORPHAN_GRACE_MS``: a
      writer that died between its ``HSET`` and its ``SUBJECT_PUT``) is put again.
    """
    out: dict[str, Retire] = {}
    trims: list[Retire] = []
    last: dict[str, PutReply] = {}
    written = {p.id for p in puts}
    for put, rep in zip(puts, replies, strict=True):
        last[put.digest] = rep
        if rep.current and put.correction:
            starts = dict(rep.versions)
            if rep.replaced and rep.replaced != put.id:
                until = max(starts.get(rep.replaced, put.valid_from), put.valid_from)
                out.setdefault(rep.replaced, Retire(rep.replaced, until, put.id))
            trims += [
                Retire(mid, vf, put.id, trim=True)
                for mid, vf in rep.versions
                if mid not in (put.id, rep.replaced) and vf >= put.valid_from
            ]
            trims += [
                Retire(mid, put.valid_from, put.id, trim=True)
                for mid in rep.before(put.id, put.valid_from)
                if mid != rep.replaced and starts[mid] < put.valid_from
            ]
        elif rep.current:
            if rep.replaced and rep.replaced != put.id:
                out.setdefault(rep.replaced, Retire(rep.replaced, put.valid_from, put.id))
                continue
            # No current version before it (forgotten, retracted or vanished): the latest
            # past versions may still run past this one's start.
            trims += [
                Retire(mid, put.valid_from, put.id, trim=True) for mid in rep.before(put.id, put.valid_from)
            ]
        else:
            nxt = rep.after(put.id, put.valid_from)
            if nxt is not None:
                out.setdefault(put.id, Retire(put.id, nxt[0], nxt[1]))
            trims += [
                Retire(mid, put.valid_from, put.id, trim=True)
                for mid in rep.before(put.id, put.valid_from)
                if mid != rep.pointer
            ]
    orphans: list[tuple[str, str, int]] = []
    for digest, found in hits.items():
        seen = last.get(digest)
        if seen is None:
            continue
        rep = seen
        known = dict(rep.versions)
        for mid, vf, created in found:
            if mid in out or mid == rep.pointer:
                continue
            if mid in known:
                nxt = rep.after(mid, known[mid])
                if nxt is not None:
                    out[mid] = Retire(mid, nxt[0], nxt[1])
            elif mid not in written and created is not None and now_ms - created >= ORPHAN_GRACE_MS:
                orphans.append((digest, mid, created if vf is None else vf))
    # Trims go after the moves (same slot, in order): a version moved here with the end its
    # own list gives (the next later start) is then shortened by a tie or a later put.
    return [*out.values(), *trims], orphans


def next_version(
    versions: Sequence[tuple[str, int]], memory_id: str, pointer: str | None
) -> tuple[int, str] | None:
    """(valid_from, id) of the version that followed ``memory_id`` in a subject's version list."""
    return PutReply(current=False, replaced=None, pointer=pointer, versions=tuple(versions)).after(
        memory_id, dict(versions)[memory_id]
    )
