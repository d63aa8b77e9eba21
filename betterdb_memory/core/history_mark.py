"""Whether a store may hold past versions: the ``history`` field of its meta hash.

A recall whose question holds a window (``core.time_recall``) asks the history index
for the versions valid in it. A store that never retired a version (no subjects, no
consolidation) would pay that empty query on every such recall, so the store records
the first retirement in ``<name>:__mem_meta`` (``KeySpace.meta``, under the ACL's
``<name>:__mem_*`` pattern), field ``history``:

- ``"1"``: a version may have been moved to history. Every path that moves one there
  (``RETIRE`` of a subject's version or of a consolidated fact, an import of history rows)
  sends ``mark`` in the same pipeline, before the move, so a history document never exists
  without the mark (on a cluster the two may run on different nodes in either order, but
  both before the write is acknowledged). Never cleared: a store whose history was
  forgotten keeps paying the (empty) query, which is only a cost.
- ``"0"``: none. Written only by ``HSETNX`` when a process opens the store and finds the
  history index built and empty (``settle_steps``), so it never overwrites a ``"1"``
  that a writer set in between.
- absent (a store an older version wrote, or a history index still building): unknown;
  the recall asks the history index, as it always did.

A recall reads the field in its own round trip (``READ``), while it is not known to be
``"1"``; seeing ``"1"`` (or nothing) it asks the history index in one more round trip, then
in every later windowed recall's own. So another process's first retirement reaches this
one's next windowed recall; nothing is cached that could hide it. The limit: a process of an
older version retiring into a store marked ``"0"`` is not seen until a process opens the
store again (its check counts the history index's documents).
"""

from __future__ import annotations

from typing import Any

from .codec import as_text

__all__ = ["FIELD_HISTORY", "mark", "may_hold", "read", "settle_steps"]

#: The meta hash's field (``<name>:__mem_meta``) saying whether the store may hold past versions.
FIELD_HISTORY = "history"


def mark(meta_key: str) -> tuple[str, ...]:
    """The command that records "a version may be in history" (sent before the move)."""
    return ("HSET", meta_key, FIELD_HISTORY, "1")


def read(meta_key: str) -> tuple[str, ...]:
    """The command a windowed recall sends in its round trip while history is not known to exist."""
    return ("HGET", meta_key, FIELD_HISTORY)


def may_hold(value: Any) -> bool | None:
    """What a ``read`` reply says: True (``"1"``), False (``"0"``), None (absent or unknown: ask)."""
    if value is None:
        return None
    text = as_text(value)
    return True if text == "1" else False if text == "0" else None


def settle_steps(meta_key: str, *, num_docs: int, ready: bool) -> list[tuple[str, ...]]:
    """What opening a store writes, from its history index's FT.INFO (``num_docs``, backfill done).

    Documents there: ``"1"`` (an older writer may have put them there unmarked). None and
    the index built: ``"0"``, unless a writer marked it meanwhile (``HSETNX``). Still
    building: nothing (unknown; recalls ask the index).
    """
    if num_docs > 0:
        return [mark(meta_key)]
    if ready:
        return [("HSETNX", meta_key, FIELD_HISTORY, "0")]
    return []
