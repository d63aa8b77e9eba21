"""The values the public API returns: frozen dataclasses, no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from .codec import as_text, split_tags, to_float, to_int
from .dialect import Capabilities
from .ft_info import IndexInfo
from .scoring import ScoreParts

__all__ = [
    "SENSITIVITY_LEVELS",
    "MemoryHit",
    "MemoryItem",
    "MemoryKind",
    "MemoryListResult",
    "MemoryPage",
    "MemoryVersion",
    "Sensitivity",
    "StoreStats",
    "item_from_fields",
    "ranking_item",
]

#: How sensitive a memory is (``recall(exclude_sensitivity=)``), least first.
Sensitivity = Literal["none", "low", "pii", "sensitive"]
SENSITIVITY_LEVELS: tuple[Sensitivity, ...] = get_args(Sensitivity)
#: What wrote a memory: a caller, a consolidation summary or fact, fact extraction.
MemoryKind = Literal["memory", "summary", "fact", "extracted"]


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """A version of a memory that an update replaced (``MemoryStore.history``)."""

    content: str
    importance: float
    tags: list[str]
    metadata: dict[str, Any]
    replaced_at: int  # epoch ms

    @property
    def replaced(self) -> datetime:
        return datetime.fromtimestamp(self.replaced_at / 1000.0, tz=UTC)


# ``MemoryItem(valid_from=)`` left out: the item's ``created_at`` (outside the years 1900-9999,
# so no real date is mistaken for it).
_FROM_CREATED = -(2**62)


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One long-term memory, with betterdb-agent-memory's fields and units.

    Times are epoch milliseconds (ints), as stored and as the reference returns them;
    ``created`` / ``last_accessed`` give them as aware datetimes.

    ``valid_from``: when what it says became true (``remember(valid_from=)``); a memory
    written without one (and every memory betterdb-agent-memory wrote) reads its
    ``created_at``. ``valid_until``: when it stopped being true; None while it is current
    (a superseded version, read by ``get`` or ``as_of``, carries it).
    """

    id: str
    content: str
    importance: float
    created_at: int
    last_accessed_at: int
    access_count: int
    tags: list[str] = field(default_factory=list)
    source: str | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    namespace: str | None = None
    sensitivity: str = "none"
    kind: str = "memory"
    subject: str | None = None
    expires_at: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    date: str | None = None
    valid_from: int = _FROM_CREATED
    valid_until: int | None = None

    def __post_init__(self) -> None:
        if self.valid_from == _FROM_CREATED:
            object.__setattr__(self, "valid_from", self.created_at)

    @property
    def created(self) -> datetime:
        return datetime.fromtimestamp(self.created_at / 1000.0, tz=UTC)

    @property
    def last_accessed(self) -> datetime:
        return datetime.fromtimestamp(self.last_accessed_at / 1000.0, tz=UTC)


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A recalled memory and its composite ``score`` (higher is better).

    ``similarity`` is ``1 - distance / 2`` (0..1, higher is closer), as the reference
    README's scoring section defines it; ``distance`` is the KNN cosine distance (0..2)
    the ``threshold`` is compared with.
    """

    item: MemoryItem
    score: float
    similarity: float
    distance: float
    explain: ScoreParts | None = None


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of ``list``: newest first; ``total`` matches in all; pass ``next_cursor`` on."""

    items: list[MemoryItem]
    next_cursor: str | None
    total: int = 0


#: The reference's name for what ``list`` returns (``items`` and ``total``; ``next_cursor`` is extra).
MemoryListResult = MemoryPage


@dataclass(frozen=True, slots=True)
class StoreStats:
    name: str
    index_name: str
    items: int
    evictions: int
    counters: dict[str, int]
    index: IndexInfo | None
    capabilities: Capabilities
    embedder_model: str
    dimensions: int
    config: dict[str, Any]


def _opt(value: Any) -> str | None:
    text = as_text(value)
    return text or None


def _valid_from(fields: Mapping[str, Any]) -> int:
    """The stored ``valid_from`` (ms), or the sentinel that makes it the item's ``created_at``."""
    text = as_text(fields.get("valid_from"))
    return to_int(text, _FROM_CREATED) if text else _FROM_CREATED


def _valid_until(fields: Mapping[str, Any]) -> int | None:
    """A history document's ``valid_until`` (ms); None on a current memory (or unreadable text)."""
    text = as_text(fields.get("valid_until"))
    return to_int(text) if text.isdigit() else None


def ranking_item(memory_id: str, fields: Mapping[str, Any]) -> MemoryItem:
    """A ``MemoryItem`` with only what ranking reads (content, importance, times, access count, scope).

    A recall ranks up to a hundred candidates and returns a few: the winners are read
    whole afterwards (``Documents.fetch``), so the candidates skip the other fields.
    The scope places a candidate in its thread (``LearnedRanker``'s neighbours).
    """
    return MemoryItem(
        id=memory_id,
        content=as_text(fields.get("content")),
        importance=to_float(fields.get("importance"), 0.5),
        created_at=to_int(fields.get("created_at")),
        last_accessed_at=to_int(fields.get("last_accessed_at")),
        expires_at=to_int(fields.get("expires_at")) or None,
        thread_id=_opt(fields.get("threadId")),
        agent_id=_opt(fields.get("agentId")),
        namespace=_opt(fields.get("namespace")),
        valid_from=_valid_from(fields),
        access_count=to_int(fields.get("access_count")),
    )


def item_from_fields(memory_id: str, fields: Mapping[str, Any], *, fact_source: str = "fact") -> MemoryItem:
    """Build a ``MemoryItem`` from HASH fields (bytes or str values, the reference's layout).

    ``kind`` is stored only by this library; for a document another library wrote it
    follows ``source`` (``summary`` and the facts source are the reference's kinds).
    """
    meta_text = as_text(fields.get("metadata"))
    try:
        # Absent or "{}" is by far the most common value: skip the parser (recall hot path).
        metadata = json.loads(meta_text) if meta_text and meta_text != "{}" else {}
    except json.JSONDecodeError:
        metadata = {}
    source = _opt(fields.get("source"))
    kind = as_text(fields.get("kind"))
    if not kind:
        kind = "summary" if source == "summary" else "fact" if source == fact_source else "memory"
    expires = to_int(fields.get("expires_at"))
    return MemoryItem(
        id=memory_id,
        content=as_text(fields.get("content")),
        importance=to_float(fields.get("importance"), 0.5),
        created_at=to_int(fields.get("created_at")),
        last_accessed_at=to_int(fields.get("last_accessed_at")),
        access_count=to_int(fields.get("access_count")),
        tags=split_tags(fields.get("tags")),
        source=source,
        thread_id=_opt(fields.get("threadId")),
        agent_id=_opt(fields.get("agentId")),
        namespace=_opt(fields.get("namespace")),
        sensitivity=as_text(fields.get("sensitivity")) or "none",
        kind=kind,
        subject=_opt(fields.get("subject")),
        expires_at=expires or None,
        metadata=metadata if isinstance(metadata, dict) else {},
        date=_opt(fields.get("date")),
        valid_from=_valid_from(fields),
        valid_until=_valid_until(fields),
    )
