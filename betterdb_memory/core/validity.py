"""Validity in the engine: the filter clauses of ``as_of`` / ``since`` / ``until``, and recency's anchor.

A memory is valid over ``[valid_from, valid_until)``. Current memories live under the
reference's index (``<name>:mem:idx``) with no ``valid_until``; superseded versions
live under the history prefix (``<name>:hist:``) with one, indexed by the history
index beside it, where betterdb-agent-memory and BetterDB Monitor do not look.

A memory written by the reference library (or by this library before time support)
has no ``valid_from``: it is valid from its ``created_at``. No query may need a field
the reference does not write, so every clause on ``valid_from`` in the main index
carries its fallback: *valid_from in range, or no valid_from and created_at in range*.
"No valid_from" is ``-@valid_from:[-inf +inf]``, which matches documents without the
field on both engines. The "or" is written without a negation below a union, by De
Morgan: ``-(-@valid_from:R -(@created_at:R -@valid_from:[-inf +inf]))``. The plain
union ``(@valid_from:R | (@created_at:R -@valid_from:[-inf +inf]))`` is right alone
but loses the reference's documents on RediSearch 2.10.5 once ANDed with anything (a
scope filter): its NOT iterator's SkipTo does not move (found by issue 27's
differential test, ``bench/probe_negation_in_union.py``). The De Morgan form answers
the same on RediSearch 2.10, valkey-search 1.2.1 standalone and its cluster, alone or
ANDed, with and without KNN (``bench/probe_missing_field.py``), so nothing is filtered
in the client.

Pure: strings and numbers in, strings and numbers out; unit tests assert the exact text.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = [
    "NOTHING",
    "SUBJECT_KEY",
    "VALID_FROM",
    "VALID_UNTIL",
    "history_valid_at",
    "in_time",
    "keep_from_ms",
    "last_seen_ms",
    "time_clause",
    "valid_at",
    "valid_from_of",
    "window",
]

VALID_FROM = "valid_from"  # NUMERIC, epoch ms: when the statement became true
VALID_UNTIL = "valid_until"  # NUMERIC, epoch ms: set when superseded (history documents only)
SUBJECT_KEY = "subject_key"  # TAG: digest of (scope, kind, normalised subject)

T = TypeVar("T", int, float)

_NO_VALID_FROM = f"-@{VALID_FROM}:[-inf +inf]"
#: Matches no memory on either engine (every memory has ``created_at``).
NOTHING = "-@created_at:[-inf +inf]"


def _range(lo: int | None, hi_exclusive: int | None) -> str:
    left = "-inf" if lo is None else str(int(lo))
    right = "+inf" if hi_exclusive is None else f"({int(hi_exclusive)}"
    return f"[{left} {right}]"


def _with_fallback(rng: str) -> str:
    """``valid_from`` in ``rng``, or none and ``created_at`` in it: NOT(AND(NOT a, NOT b)), no union."""
    return f"-(-@{VALID_FROM}:{rng} -(@created_at:{rng} {_NO_VALID_FROM}))"


def valid_at(t: int) -> str:
    """Main index: memories valid at ``t`` (``valid_from <= t``; current ones have no end).

    ``-(-@valid_from:[-inf t] -(@created_at:[-inf t] -@valid_from:[-inf +inf]))``
    """
    return _with_fallback(f"[-inf {int(t)}]")


def history_valid_at(t: int) -> str:
    """History index: superseded versions that were current at ``t`` (``valid_from <= t < valid_until``).

    Every history document carries ``valid_until`` (written, in ms, when it was retired:
    without a numeric one RediSearch leaves the document out of the index). Its
    ``valid_from`` has the main index's fallback: a memory betterdb-agent-memory wrote
    and this library retired (a fact written before time support) has none.
    """
    return f"{valid_at(t)} @{VALID_UNTIL}:[({int(t)} +inf]"


def window(since: int | None, until: int | None) -> str:
    """Main or history index: memories whose ``valid_from`` falls in ``[since, until)``.

    Returns ``""`` for an unbounded window (no clause to add). An empty window
    (``since == until``) is ``NOTHING``: valkey-search rejects an empty range
    (``[t (t]``: "Start and end values of a numeric field indicate an empty range").
    """
    if since is None and until is None:
        return ""
    if since is not None and until is not None and since >= until:
        return NOTHING
    return _with_fallback(_range(since, until))


def time_clause(since: int | None, until: int | None, as_of: int | None, *, history: bool = False) -> str:
    """The one clause a ``MemoryFilter``'s time fields add: the window, and validity at ``as_of``.

    ``history``: the clause for the history index (``history_valid_at``), else the main
    index's (``valid_at``). ``""`` when no time is asked about.
    """
    parts = [window(since, until)]
    if as_of is not None:
        parts.append(history_valid_at(as_of) if history else valid_at(as_of))
    return " ".join(p for p in parts if p)


def in_time(
    valid_from: int | None,
    created_at: int,
    valid_until: int | None,
    *,
    since: int | None = None,
    until: int | None = None,
    as_of: int | None = None,
) -> bool:
    """The client's check of what ``time_clause`` asks the engine: the window and ``as_of``."""
    start = valid_from_of(valid_from, created_at)
    if since is not None and start < since:
        return False
    if until is not None and start >= until:
        return False
    if as_of is None:
        return True
    return start <= as_of and (valid_until is None or as_of < valid_until)


def valid_from_of(valid_from: int | None, created_at: int) -> int:
    """A memory's ``valid_from``, read: its own, or its ``created_at`` when it has none."""
    return created_at if valid_from is None else valid_from


def last_seen_ms(valid_from: T | None, created_at: T, last_accessed_at: T, access_count: int) -> T:
    """Where recency counts from: ``valid_from``, or the last access once recalled, whichever is later.

    The composite score's recency (``scoring.composite``, ``ranking.rank``) and the
    capacity keep-score (``record.encode_record``, ``tiers.victims``) take this instead
    of ``max(created_at, last_accessed_at)``. "Recalled" is ``access_count > 0`` or a
    ``last_accessed_at`` later than ``created_at`` (a write sets the two equal, so
    anything later is an access; ranking's slim reads may not carry the count). Without
    ``valid_from`` (the reference's documents, and this library's written without one)
    it is the seed's own ``max(created_at, last_accessed_at)``, whatever the access
    count says; with ``valid_from == created_at`` it is the same number, so reading a
    missing ``valid_from`` as ``created_at`` (``MemoryItem.valid_from``) changes no
    score. A memory dated in the past starts old and is reinforced by use like any
    other; one dated in the future (a plan) counts from its date until that passes.
    Works on ms ints and on second floats alike (one rule for every caller).
    """
    if valid_from is None:
        return max(created_at, last_accessed_at)
    if access_count > 0 or last_accessed_at > created_at:
        return max(valid_from, last_accessed_at)
    return valid_from


def keep_from_ms(
    valid_from: T | None, created_at: T, last_accessed_at: T, access_count: int, *, state: bool
) -> T:
    """Where the capacity keep-score counts from: ``last_seen_ms``, and for a state, never before its write.

    ``state``: the memory names a subject (``remember(subject=...)``, a consolidated
    fact). In the main index such a memory is its subject's *current* version: a
    statement that holds now, not an event that happened at ``valid_from``. "Ada lives
    in Lisbon since 2019", written today, was last known true today; counted from 2019
    it would be the first victim of its scope, before every undated note of the last
    months however unimportant (at the default 7-day half-life, 2019 is hundreds of
    half-lives back, while importance spans about ten). So its write counts as its
    first access: the later of ``valid_from`` and ``created_at``, then of the last
    access too. Events keep ``last_seen_ms`` (issue 26: an old event goes before a
    fresh one of the same importance), and so does recall's recency for every memory.
    An access already counts from a time after the write, so the reinforcement's
    snapshot (``max(valid_from, access)``) follows this rule unchanged.
    """
    seen = last_seen_ms(valid_from, created_at, last_accessed_at, access_count)
    return max(seen, created_at) if state else seen
