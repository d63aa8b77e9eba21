"""The values the public API returns: frozen dataclasses, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from .dialect import Capabilities, IndexInfo
from .scoring import ScoreParts

__all__ = [
    "SENSITIVITY_LEVELS",
    "MemoryHit",
    "MemoryItem",
    "MemoryKind",
    "MemoryPage",
    "Sensitivity",
    "StoreStats",
]

Sensitivity = Literal["none", "low", "pii", "sensitive"]
SENSITIVITY_LEVELS: tuple[str, ...] = ("none", "low", "pii", "sensitive")
MemoryKind = Literal["memory", "summary", "fact", "extracted"]


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One long-term memory as stored (times are UNIX seconds)."""

    id: str
    content: str
    importance: float
    created_at: float
    last_accessed_at: float
    access_count: int
    tags: tuple[str, ...] = ()
    source: str | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    namespace: str | None = None
    sensitivity: str = "none"
    kind: str = "memory"
    subject: str | None = None
    expires_at: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def created(self) -> datetime:
        return datetime.fromtimestamp(self.created_at, tz=UTC)


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A recalled memory with its score (``similarity`` in 0..1, higher is closer)."""

    item: MemoryItem
    score: float
    similarity: float
    distance: float
    explain: ScoreParts | None = None


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of ``list``: newest first; pass ``next_cursor`` for the next page."""

    items: list[MemoryItem]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class StoreStats:
    name: str
    index_name: str
    items: int
    scopes: int
    evictions: int
    counters: dict[str, int]
    index: IndexInfo | None
    capabilities: Capabilities
    embedder_model: str
    dimensions: int
    config: dict[str, Any]
