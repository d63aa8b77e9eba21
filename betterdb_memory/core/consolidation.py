"""The pure parts of a consolidation run: what it selects, what it writes, what it counts.

No I/O: ``tiers.consolidation`` and ``tiers.fact_ledger`` run the steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .facts import most_sensitive
from .keys import Scope
from .models import MemoryItem
from .query import MemoryFilter
from .where_clause import WhereClause

__all__ = ["Selection", "Tally", "output_item"]


@dataclass(frozen=True, slots=True)
class Selection:
    """Validated candidate selectors and the exact scope output is written to."""

    target: Scope
    tags: tuple[str, ...]
    older_than: float | None
    max_importance: float | None
    include_summaries: bool
    where: WhereClause | None = None  # a compiled ``where=`` (``core.where``), ANDed

    def candidates(self, now_ms: int, exclude: tuple[str, ...]) -> MemoryFilter:
        cutoff = None if self.older_than is None else now_ms - int(self.older_than * 1000)
        return MemoryFilter(
            scope=self.target,
            tags=self.tags,
            exclude_sources=exclude,
            max_created_at=cutoff,
            max_importance=self.max_importance,
            exclude_expired_at=now_ms,
            where=self.where,
        )


@dataclass(slots=True)
class Tally:
    """What one run did (becomes its result)."""

    candidates: int = 0
    created: list[str] = field(default_factory=list)
    superseded: int = 0
    retracted: int = 0
    duplicates: int = 0
    unchanged: int = 0
    unmatched: list[str] = field(default_factory=list)


def output_item(
    sel: Selection,
    content: str,
    importance: float,
    sources: Sequence[MemoryItem],
    *,
    kind: str,
    source: str,
    metadata: dict[str, Any],
    subject: str | None = None,
    date_text: str | None = None,
) -> dict[str, Any]:
    """The ``remember_many`` item of one consolidation output, written to the selection's target scope."""
    return {
        "content": content,
        "importance": importance,
        "tags": list(sel.tags),
        "source": source,
        "thread_id": sel.target.thread_id,
        "agent_id": sel.target.agent_id,
        "namespace": sel.target.namespace,
        "sensitivity": most_sensitive(sources),
        "metadata": metadata,
        "kind": kind,
        "subject": subject,
        "date": date_text,
    }
