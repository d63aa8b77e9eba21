"""The values the public API returns: frozen dataclasses, no I/O."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from .codec import as_text, split_tags, to_int
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
    "new_hit",
    "ranking_item",
    "with_access",
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


# A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (a global
# lookup, an attribute lookup and a call per field, then ``__post_init__``); recall builds
# ten to a hundred items per call (and a hit per item). So the readers below build them as
# a plain twin class with the same slots (same names, same order: the same memory layout),
# whose ``__init__`` fills them with ordinary attribute stores, and which then becomes the
# frozen class (``__class__`` assignment, allowed between classes of one layout): about a
# quarter of the dataclass ``__init__``'s cost, and a third of setting each slot through
# its descriptor (measured: 3.5 -> 1.0 µs per item). ``_item`` takes the fields in
# declaration order and must stay in step with the class (``tests/unit/test_core_models.py``
# pins it against ``dataclasses.fields`` and ``MemoryItem(...)``).


class _Item:
    """A ``MemoryItem`` being built (``_item``): ``MemoryItem``'s slots, and its class once built."""

    __slots__ = MemoryItem.__slots__

    def __init__(
        self,
        id: str,
        content: str,
        importance: float,
        created_at: int,
        last_accessed_at: int,
        access_count: int,
        tags: list[str],
        source: str | None,
        thread_id: str | None,
        agent_id: str | None,
        namespace: str | None,
        sensitivity: str,
        kind: str,
        subject: str | None,
        expires_at: int | None,
        metadata: dict[str, Any],
        date: str | None,
        valid_from: int,
        valid_until: int | None,
    ) -> None:
        self.id = id
        self.content = content
        self.importance = importance
        self.created_at = created_at
        self.last_accessed_at = last_accessed_at
        self.access_count = access_count
        self.tags = tags
        self.source = source
        self.thread_id = thread_id
        self.agent_id = agent_id
        self.namespace = namespace
        self.sensitivity = sensitivity
        self.kind = kind
        self.subject = subject
        self.expires_at = expires_at
        self.metadata = metadata
        self.date = date
        self.valid_from = created_at if valid_from == _FROM_CREATED else valid_from  # as __post_init__
        self.valid_until = valid_until
        self.__class__ = MemoryItem  # type: ignore[assignment]


#: ``MemoryItem(...)`` with every field given, in order: the same object, built at a quarter of the cost.
_item: Callable[..., MemoryItem] = _Item  # type: ignore[assignment]


class _Hit:
    """A ``MemoryHit`` being built (``new_hit``), as ``_Item``."""

    __slots__ = MemoryHit.__slots__

    def __init__(
        self, item: MemoryItem, score: float, similarity: float, distance: float, explain: ScoreParts | None
    ) -> None:
        self.item = item
        self.score = score
        self.similarity = similarity
        self.distance = distance
        self.explain = explain
        self.__class__ = MemoryHit  # type: ignore[assignment]


#: ``MemoryHit(item, score, similarity, distance, explain)`` at a fraction of the cost (as ``_item``).
new_hit: Callable[[MemoryItem, float, float, float, ScoreParts | None], MemoryHit] = _Hit  # type: ignore[assignment]


def _opt(value: Any) -> str | None:
    """A reply value as text, None when absent or empty (``as_text(value) or None``, inlined)."""
    if value is None:
        return None
    text = value.decode("utf-8", errors="replace") if type(value) is bytes else as_text(value)
    return text or None


def _valid_from(value: Any) -> int:
    """A stored ``valid_from`` (ms), or the sentinel that makes it the item's ``created_at``."""
    text = as_text(value)
    return to_int(text, _FROM_CREATED) if text else _FROM_CREATED


def _valid_until(value: Any) -> int | None:
    """A history document's ``valid_until`` (ms); None on a current memory (or unreadable text)."""
    text = as_text(value)
    return to_int(text) if text.isdigit() else None


# Recall builds an item per hit (ten per call, a hundred candidates when re-ranking), so
# these two read each field once and call a helper only for a field that is present: most
# of a memory's optional fields are absent from its hash (``core.record`` writes a field
# only when it differs from what a reader assumes).
_BASICS = ("content", "importance", "created_at", "last_accessed_at", "access_count")  # ``_basics``' fields


def _basics(
    text: Any, importance: Any, created: Any, accessed: Any, count: Any, *, seen: tuple[int, int] | None
) -> tuple[str, float, int, int, int]:
    """(content, importance, created_at, last_accessed_at, access_count) from their raw values (None: absent).

    ``as_text`` / ``to_float`` / ``to_int`` with their common case inline: ``int`` and
    ``float`` read bytes themselves, and raise on None (absent) as on text that is no number.
    ``seen``: an access the document does not show yet, (last access ms, count): each
    value is the greater of the two (what ``with_access`` would make of the item).
    """
    content = text.decode("utf-8", errors="replace") if type(text) is bytes else as_text(text)
    try:
        importance = float(importance)
    except (TypeError, ValueError):
        importance = 0.5
    if not math.isfinite(importance):
        importance = 0.5
    try:
        created = int(created)
    except (TypeError, ValueError):
        created = to_int(created)
    try:
        accessed = int(accessed)
    except (TypeError, ValueError):
        accessed = to_int(accessed)
    try:
        count = int(count)
    except (TypeError, ValueError):
        count = to_int(count)
    if seen is not None:
        at, times = seen
        if at > accessed:
            accessed = at
        if times > count:
            count = times
    return content, importance, created, accessed, count


def ranking_item(
    memory_id: str, fields: Mapping[str, Any], *, seen: tuple[int, int] | None = None
) -> MemoryItem:
    """A ``MemoryItem`` with only what ranking reads (content, importance, times, access count, scope).

    A recall ranks up to a hundred candidates and returns a few: the winners are read
    whole afterwards (``Documents.fetch``), so the candidates skip the other fields.
    The scope places a candidate in its thread (``LearnedRanker``'s neighbours).
    ``seen``: as in ``item_from_fields``.
    """
    get = fields.get
    expires = get("expires_at")
    valid_from = get("valid_from")
    content, importance, created, accessed, count = _basics(*map(get, _BASICS), seen=seen)
    # ``_opt`` inlined for the scope (a hundred candidates a recall): present as bytes, or absent.
    thread = get("threadId")
    if thread is not None:
        thread = (
            thread.decode("utf-8", errors="replace") if type(thread) is bytes else as_text(thread)
        ) or None
    agent = get("agentId")
    if agent is not None:
        agent = (agent.decode("utf-8", errors="replace") if type(agent) is bytes else as_text(agent)) or None
    space = get("namespace")
    return _item(
        memory_id,
        content,
        importance,
        created,
        accessed,
        count,
        [],
        None,
        thread,
        agent,
        None if space is None else _opt(space),
        "none",
        "memory",
        None,
        None if expires is None else to_int(expires) or None,
        {},
        None,
        _FROM_CREATED if valid_from is None else _valid_from(valid_from),
        None,
    )


#: The fields of a memory that sets none of the optional ones (kind, tags, source, metadata, ...),
#: and the KNN's distance (``core.query.SCORE_ALIAS``): ``item_from_fields``' short way.
_PLAIN = frozenset(
    ("__dist", "content", "importance", "created_at", "last_accessed_at", "access_count", "threadId", "agentId",
     "namespace", "valid_from")
)  # fmt: skip


def item_from_fields(
    memory_id: str,
    fields: Mapping[str, Any],
    *,
    fact_source: str = "fact",
    seen: tuple[int, int] | None = None,
) -> MemoryItem:
    """Build a ``MemoryItem`` from HASH fields (bytes or str values, the reference's layout).

    ``kind`` is stored only by this library; for a document another library wrote it
    follows ``source`` (``summary`` and the facts source are the reference's kinds).
    ``seen``: this store's access of the memory that its document does not show yet
    (``tiers.reinforce``), (last access ms, count): the item carries the later / greater
    of each, built once instead of built and then replaced.
    """
    get = fields.get
    if fields.keys() <= _PLAIN:  # the usual hash: no optional field stored (core.record), one check for all
        content, importance, created, accessed, count = _basics(*map(get, _BASICS), seen=seen)
        thread, agent, space, valid_from = get("threadId"), get("agentId"), get("namespace"), get("valid_from")  # fmt: skip
        return _item(
            memory_id, content, importance, created, accessed, count, [], None,
            None if thread is None else _opt(thread), None if agent is None else _opt(agent),
            None if space is None else _opt(space), "none", "memory", None, None, {}, None,
            _FROM_CREATED if valid_from is None else _valid_from(valid_from), None,
        )  # fmt: skip
    metadata: Any = {}
    raw = get("metadata")
    if raw is not None:
        meta_text = as_text(raw)
        try:
            # Absent or "{}" is by far the most common value: skip the parser (recall hot path).
            metadata = json.loads(meta_text) if meta_text and meta_text != "{}" else {}
        except json.JSONDecodeError:
            metadata = {}
    raw = get("source")
    source = None if raw is None else _opt(raw)
    raw = get("kind")
    kind = "" if raw is None else as_text(raw)
    if not kind:
        kind = "summary" if source == "summary" else "fact" if source == fact_source else "memory"
    raw = get("tags")
    tags = [] if raw is None else split_tags(raw)
    raw = get("sensitivity")
    sensitivity = "none" if raw is None else as_text(raw) or "none"
    raw = get("expires_at")
    expires = None if raw is None else to_int(raw) or None
    raw = get("valid_from")
    valid_from = _FROM_CREATED if raw is None else _valid_from(raw)
    raw = get("valid_until")
    valid_until = None if raw is None else _valid_until(raw)
    return _item(
        memory_id,
        *_basics(*map(get, _BASICS), seen=seen),
        tags,
        source,
        _opt(get("threadId")),
        _opt(get("agentId")),
        None if (raw := get("namespace")) is None else _opt(raw),
        sensitivity,
        kind,
        None if (raw := get("subject")) is None else _opt(raw),
        expires,
        metadata if isinstance(metadata, dict) else {},
        None if (raw := get("date")) is None else _opt(raw),
        valid_from,
        valid_until,
    )


def with_access(item: MemoryItem, last_accessed_at: int, access_count: int) -> MemoryItem:
    """``item`` with another last access and access count (``dataclasses.replace``, at a third of its cost)."""
    return _item(
        item.id,
        item.content,
        item.importance,
        item.created_at,
        last_accessed_at,
        access_count,
        item.tags,
        item.source,
        item.thread_id,
        item.agent_id,
        item.namespace,
        item.sensitivity,
        item.kind,
        item.subject,
        item.expires_at,
        item.metadata,
        item.date,
        item.valid_from,
        item.valid_until,
    )
