"""Whether a store may hold past versions, and until when: the ``history`` field of its meta hash.

A recall whose question holds a window (``core.time_recall``) asks the history index
for the versions valid in it. A store that never retired a version (no subjects, no
consolidation) would pay that empty query on every such recall, and so would a window
that begins after the last version retired ("last week", asked of a store whose last
supersession was in March). The store records both in ``<name>:__mem_meta``
(``KeySpace.meta``, under the ACL's ``<name>:__mem_*`` pattern), field ``history``:

- ``"u<ms>"``: versions may have been moved to history, every one of them with a
  ``valid_until`` at or before ``<ms>`` (epoch ms). Every path that moves one there
  (``RETIRE`` of a subject's version or of a consolidated fact, an import of history
  rows) runs ``HISTORY_MARK`` (``backend.scripts``) in the same pipeline, before the
  move, with the moved versions' ``valid_until``: it raises the bound, never lowers it (an atomic max on the meta's own
  slot), so a history document never exists with a ``valid_until`` past the bound (on a
  cluster the two may run on different nodes in either order, but both before the write is
  acknowledged). Later edits of a past version only lower its ``valid_until``
  (``SUBJECT_TRIM``, a repair), which keeps the bound true.
- ``"1"``: versions may have been moved there, until when unknown: what an older version
  of this library writes, and what opening a store finds when its history index holds
  documents and the field says nothing (``settle``). Never lowered to a bound again: only
  a store's own writes could tell a true one.
- ``"0"``: none. Written only by ``HSETNX`` when a process opens the store and finds the
  history index built and empty (``settle``), so it never overwrites a writer's mark.
- absent (a store an older version wrote, or a history index still building): unknown;
  the recall asks the history index.

A windowed recall reads the field in its own round trip (``READ``), and asks the history
index in that trip when the last value it read says the window may hold a past version
(``needed``); when the value it reads now says so and the query was not sent, it is sent
in one more round trip. So another process's retirement reaches this one's next windowed
recall; nothing is cached that could hide it. The limit: a process of a version that wrote
no mark at all, retiring into a store marked ``"0"`` or ``"u<ms>"``, is not seen (until a
process opens a store marked ``"0"`` again: its check counts the history index's documents).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from .codec import as_text

__all__ = ["FIELD_HISTORY", "HistoryState", "mark_args", "needed", "read", "settle", "state"]

#: The meta hash's field (``<name>:__mem_meta``) saying whether the store may hold past versions.
FIELD_HISTORY = "history"


class HistoryState(NamedTuple):
    """What a ``read`` reply says: ``held`` True / False / None (unknown: ask); ``until`` the bound, if known."""

    held: bool | None
    until: int | None = None


def mark_args(until: int | None) -> list[str]:
    """``HISTORY_MARK``'s arguments before moving versions whose latest ``valid_until`` is ``until`` (None: unknown)."""
    return [""] if until is None else [str(int(until))]


def read(meta_key: str) -> tuple[str, ...]:
    """The command a windowed recall sends in its round trip."""
    return ("HGET", meta_key, FIELD_HISTORY)


def state(value: Any) -> HistoryState:
    """A ``read`` reply: ``"1"`` held, ``"u<ms>"`` held until ``<ms>``, ``"0"`` none, anything else unknown."""
    if value is None:
        return HistoryState(None)
    text = as_text(value)
    if text == "1":
        return HistoryState(True)
    if text == "0":
        return HistoryState(False)
    if text.startswith("u"):
        try:
            return HistoryState(True, int(text[1:]))
        except ValueError:
            pass
    return HistoryState(None)


def needed(held: HistoryState, start_ms: int | None) -> bool:
    """Whether a window starting at ``start_ms`` (None: open) may hold a past version, by ``held``.

    A past version is valid during the window when its ``valid_until`` is after the
    window's start; every one ends by the bound, so a window starting at or after it
    holds none. Unknown (``held.held`` None): it may.
    """
    if held.held is False:
        return False
    return not (held.until is not None and start_ms is not None and held.until <= start_ms)


def settle(*, num_docs: int, ready: bool) -> Literal["mark", "none", ""]:
    """What opening a store writes, from its history index's FT.INFO (``num_docs``, backfill done).

    Documents there: ``"mark"`` (``HISTORY_MARK`` with ``"?"``: an older writer may have put them
    there unmarked). None and the index built: ``"none"`` (``HSETNX`` ``"0"``, unless a
    writer marked it meanwhile). Still building: ``""`` (nothing; recalls ask the index).
    """
    if num_docs > 0:
        return "mark"
    if ready:
        return "none"
    return ""
