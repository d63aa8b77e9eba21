"""The values the public API returns: frozen dataclasses, no I/O."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from .codec import as_text, split_list, to_float, to_int
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
    "item_from_fields",
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


def _opt(value: Any) -> str | None:
    text = as_text(value)
    return text or None


def item_from_fields(memory_id: str, fields: Mapping[str, Any]) -> MemoryItem:
    """Build a ``MemoryItem`` from HASH fields (bytes or str values)."""
    meta_text = as_text(fields.get("metadata"))
    try:
        # "{}" is by far the most common value: skip the parser for it (recall hot path).
        metadata = json.loads(meta_text) if meta_text and meta_text != "{}" else {}
    except json.JSONDecodeError:
        metadata = {}
    expires = to_float(fields.get("expires_at"), 0.0)
    return MemoryItem(
        id=memory_id,
        content=as_text(fields.get("content")),
        importance=to_float(fields.get("importance"), 0.5),
        created_at=to_float(fields.get("created_at")),
        last_accessed_at=to_float(fields.get("last_accessed_at")),
        access_count=to_int(fields.get("access_count")),
        tags=tuple(split_list(fields.get("tags_raw"))),
        source=_opt(fields.get("source_raw")),
        thread_id=_opt(fields.get("thread_id_raw")),
        agent_id=_opt(fields.get("agent_id_raw")),
        namespace=_opt(fields.get("namespace_raw")),
        sensitivity=as_text(fields.get("sensitivity")) or "none",
        kind=as_text(fields.get("kind")) or "memory",
        subject=_opt(fields.get("subject")),
        expires_at=expires or None,
        metadata=metadata if isinstance(metadata, dict) else {},
    )
