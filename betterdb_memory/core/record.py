"""The stored record of a memory: the HASH fields one ``HSET`` writes. Pure; no I/O.

The reference's fields come first, in its order (``content``, ``vector``,
``importance``, ``created_at``, ``last_accessed_at``, ``access_count``, then
``tags`` / ``threadId`` / ``agentId`` / ``namespace`` / ``source`` / ``subject`` /
``date`` when set), so betterdb-agent-memory and BetterDB Monitor read the document as
one of theirs. This library's own fields follow, each written only when it differs
from what a reader assumes when it is absent: ``keep`` (always: the capacity order),
``sensitivity`` (absent: ``none``), ``kind`` (absent: derived from ``source``),
``metadata`` (absent: ``{}``), ``expires_at`` (absent: never), ``dedup``.

The way in, validating a write's arguments, is ``prepare_memory`` / ``prepare_items``;
the way back, fields to ``MemoryItem``, is ``models.item_from_fields``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ValidationError
from .codec import encode_vector, join_tags, normalise, validate_vector
from .keys import Scope, validate_memory_id
from .scoring import keep_score
from .validation import (
    check_content,
    check_importance,
    check_metadata,
    check_sensitivity,
    check_tags,
    check_ttl,
)

__all__ = [
    "KINDS",
    "NewMemory",
    "Previous",
    "dedup_hash",
    "encode_record",
    "history_entry",
    "prepare_items",
    "prepare_memory",
]

#: The kinds of memory a write may carry.
KINDS = ("memory", "summary", "fact", "extracted")


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A validated memory about to be written (what ``MemoryStore._prepare`` produces)."""

    content: str
    scope: Scope = field(default_factory=Scope)
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    source: str | None = None
    ttl: float | None = None
    sensitivity: str = "none"
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = "memory"
    subject: str | None = None
    date: str | None = None
    dedup_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Previous:
    """What an upsert keeps of the memory it replaces: its life so far, not its content."""

    created_at: int
    last_accessed_at: int
    access_count: int


def encode_record(
    memory: NewMemory,
    vector: np.ndarray[Any, np.dtype[np.float32]],
    *,
    now_ms: int,
    half_life_seconds: float,
    fact_source: str = "fact",
    previous: Previous | None = None,
) -> tuple[list[Any], int]:
    """(``HSET`` field/value list, TTL in ms or 0) of one memory written at ``now_ms``.

    ``previous``: the memory this write replaces (an upsert by id): its creation time,
    last access and access count carry over, so an edit neither makes a memory look
    new to recency ranking nor resets its reinforcement.
    """
    scope = memory.scope
    created = previous.created_at if previous else now_ms
    accessed = previous.last_accessed_at if previous else now_ms
    fields: list[Any] = [
        "content", memory.content,
        "vector", encode_vector(vector),
        "importance", repr(memory.importance),
        "created_at", str(created),
        "last_accessed_at", str(accessed),
        "access_count", str(previous.access_count if previous else 0),
    ]  # fmt: skip
    if memory.tags:
        fields += ["tags", join_tags(memory.tags)]
    if scope.thread_id is not None:
        fields += ["threadId", scope.thread_id]
    if scope.agent_id is not None:
        fields += ["agentId", scope.agent_id]
    if scope.namespace is not None:
        fields += ["namespace", scope.namespace]
    if memory.source is not None:
        fields += ["source", memory.source]
    if memory.subject is not None:
        fields += ["subject", memory.subject]
    if memory.date:
        fields += ["date", memory.date]
    seen = max(created, accessed)
    fields += ["keep", repr(keep_score(seen / 1000.0, memory.importance, half_life_seconds))]
    if memory.sensitivity != "none":
        fields += ["sensitivity", memory.sensitivity]
    derived = (
        "summary" if memory.source == "summary" else "fact" if memory.source == fact_source else "memory"
    )
    if memory.kind != derived:
        fields += ["kind", memory.kind]
    if memory.metadata:
        fields += ["metadata", json.dumps(memory.metadata, ensure_ascii=False)]
    ttl_ms = math.ceil(memory.ttl * 1000) if memory.ttl else 0
    if ttl_ms:
        fields += ["expires_at", str(now_ms + ttl_ms)]
    if memory.dedup_hash:
        fields += ["dedup", memory.dedup_hash]
    return fields, ttl_ms


def history_entry(
    content: str, importance: float, tags: list[str], metadata: dict[str, Any], *, replaced_at_ms: int
) -> str:
    """One line of a memory's update history (JSON): the version an upsert replaced."""
    return json.dumps(
        {
            "content": content,
            "importance": importance,
            "tags": tags,
            "metadata": metadata,
            "replaced_at": replaced_at_ms,
        },
        ensure_ascii=False,
    )


def prepare_memory(
    content: object,
    *,
    dimensions: int,
    importance: object = None,
    tags: object = None,
    source: object = None,
    ttl: object = None,
    thread_id: object = None,
    agent_id: object = None,
    namespace: object = None,
    sensitivity: object = None,
    metadata: object = None,
    kind: object = None,
    subject: object = None,
    date: object = None,
    vector: object = None,
    id: object = None,
) -> dict[str, Any]:
    """Validate one memory's arguments (the API boundary): the prepared item, as a dict.

    ``dimensions``: the embedder's vector length, 0 while it is still to be learned
    (a given vector is then checked for finite values only).
    """
    text = check_content(content)
    scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
    if source is not None:
        check_tags([source], name="source")
    kind = "memory" if kind is None else kind
    if kind not in KINDS:
        raise ValidationError(f"unknown kind {kind!r}", code="validation.kind", details={"argument": "kind"})
    if subject is not None and not isinstance(subject, str):
        raise ValidationError(
            "subject must be a string", code="validation.type", details={"argument": "subject"}
        )
    if date is not None and not isinstance(date, str):
        raise ValidationError("date must be a string", code="validation.type", details={"argument": "date"})
    dims = dimensions
    return {
        "id": None if id is None else validate_memory_id(id),
        "content": text,
        "scope": scope,
        "importance": check_importance(0.5 if importance is None else importance),
        "tags": check_tags(tags),
        "source": source,
        "ttl": check_ttl(ttl),
        "sensitivity": check_sensitivity("none" if sensitivity is None else sensitivity),
        "metadata": check_metadata(metadata),
        "kind": kind,
        "subject": subject,
        "date": date or None,
        "vector": None
        if vector is None
        else validate_vector(vector, dimensions=dims)
        if dims
        else validate_vector(vector, dimensions=len(vector)),  # type: ignore[arg-type]
    }


def prepare_items(items: Iterable[str | Mapping[str, Any]], *, dimensions: int) -> list[dict[str, Any]]:
    """Validate every item of a ``remember_many`` call before anything is embedded or written."""
    if isinstance(items, str | bytes | Mapping):
        raise ValidationError(
            "remember_many takes a list of items (str or mapping), not a single one; use remember()",
            code="validation.type",
            details={"argument": "items", "type": type(items).__name__},
        )
    allowed = {
        "content", "importance", "tags", "source", "ttl", "thread_id", "agent_id", "namespace",
        "sensitivity", "metadata", "kind", "subject", "date", "vector", "id",
    }  # fmt: skip
    prepared: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, str):
                prepared.append(prepare_memory(item, dimensions=dimensions))
            elif isinstance(item, Mapping):
                unknown = set(item) - allowed
                if unknown:
                    raise ValidationError(
                        f"unknown arguments {sorted(unknown)}",
                        code="validation.argument",
                        details={"unknown": sorted(unknown)},
                    )
                opts = dict(item)
                content = opts.pop("content", None)
                prepared.append(prepare_memory(content, dimensions=dimensions, **opts))
            else:
                raise ValidationError(
                    f"item {i} must be a str or a mapping with 'content'", code="validation.type"
                )
        except ValidationError as exc:
            exc.details.setdefault("item", i)
            raise
    return prepared


def dedup_hash(content: str, kind: str) -> str:
    """What dedup matches twins by: the kind and the normalised text (``codec.normalise``)."""
    return hashlib.blake2b(f"{kind}\x00{normalise(content)}".encode(), digest_size=16).hexdigest()
