"""The stored record of a memory: the HASH fields one ``HSET`` writes. Pure; no I/O.

The reference's fields come first, in its order (``content``, ``vector``,
``importance``, ``created_at``, ``last_accessed_at``, ``access_count``, then
``tags`` / ``threadId`` / ``agentId`` / ``namespace`` / ``source`` / ``subject`` /
``date`` when set), so betterdb-agent-memory and BetterDB Monitor read the document as
one of theirs. This library's own fields follow, each written only when it differs
from what a reader assumes when it is absent: ``valid_from`` (absent: ``created_at``,
so a memory written without one is stored and scored exactly as the reference's;
always written with a subject), ``state_from`` and ``subject_key`` (only with a
subject: a state's start, and the subject's digest the current-version pointer is
keyed by),
``keep`` (always: the capacity order),
``sensitivity`` (absent: ``none``), ``kind`` (absent: derived from ``source``),
``metadata`` (absent: ``{}``), ``expires_at`` (absent: never), ``dedup``.

The way in, checking a write's arguments into a ``NewMemory``, is ``requests.new_memory``;
the way back, fields to ``MemoryItem``, is ``models.item_from_fields``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any, get_args

import numpy as np

from .codec import FloatArray, encode_vector, join_tags, normalise
from .keys import Scope
from .models import MemoryKind, Sensitivity
from .scoring import keep_score
from .validity import keep_from_ms

__all__ = [
    "KINDS",
    "NewMemory",
    "Previous",
    "dedup_hash",
    "encode_record",
    "history_entry",
    "new_memory_of",
]

#: The kinds of memory a write may carry.
KINDS: tuple[MemoryKind, ...] = get_args(MemoryKind)


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A checked memory about to be written: the one shape every write takes on its way in.

    ``remember``'s keyword arguments and each ``remember_many`` item become one
    (``requests.new_memory``), and ``encode_record`` turns it into the stored fields.
    ``vector``: the caller's embedding, checked (None: the embedder makes it). ``id``:
    the caller's id (None: a new one). ``dedup_hash``: set by a write with dedup on.
    ``valid_from``: when what it says became true, epoch ms (None: when it is written).
    """

    content: str
    scope: Scope = field(default_factory=Scope)
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    source: str | None = None
    ttl: float | None = None
    sensitivity: Sensitivity = "none"
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: MemoryKind = "memory"
    subject: str | None = None
    date: str | None = None
    dedup_hash: str | None = None
    vector: FloatArray | None = field(default=None, compare=False)
    id: str | None = None
    valid_from: int | None = None
    # The subject's digest (``subjects.subject_key_of``) when the memory names a subject:
    # the write then also decides which version of the subject is current (tiers.subjects).
    subject_key: str | None = None
    # Consolidation's statement after a retraction of its subject (``SubjectPut.correction``).
    correction: bool = False


# A frozen dataclass's ``__init__`` sets each of its 17 fields through ``object.__setattr__``;
# every write builds one ``NewMemory``, so ``requests.new_memory`` builds it through the
# slots' own descriptors instead, at about half the cost (as ``models._item`` does for
# ``MemoryItem``). ``new_memory_of`` takes every field in declaration order and must stay
# in step with the class: ``tests/unit/test_core_record.py`` pins it against
# ``dataclasses.fields`` and ``NewMemory(...)``.
_NEW = object.__new__
(
    _set_content, _set_scope, _set_importance, _set_tags, _set_source, _set_ttl, _set_sensitivity,
    _set_metadata, _set_kind, _set_subject, _set_date, _set_dedup_hash, _set_vector, _set_id,
    _set_valid_from, _set_subject_key, _set_correction,
) = (NewMemory.__dict__[f.name].__set__ for f in dataclass_fields(NewMemory))  # fmt: skip


def new_memory_of(
    content: str,
    scope: Scope,
    importance: float,
    tags: tuple[str, ...],
    source: str | None,
    ttl: float | None,
    sensitivity: Sensitivity,
    metadata: dict[str, Any],
    kind: MemoryKind,
    subject: str | None,
    date: str | None,
    dedup_hash: str | None,
    vector: FloatArray | None,
    id: str | None,
    valid_from: int | None,
    subject_key: str | None,
    correction: bool,
) -> NewMemory:
    """``NewMemory(...)`` with every field given, checked by the caller (the same object, cheaper)."""
    memory: NewMemory = _NEW(NewMemory)
    _set_content(memory, content)
    _set_scope(memory, scope)
    _set_importance(memory, importance)
    _set_tags(memory, tags)
    _set_source(memory, source)
    _set_ttl(memory, ttl)
    _set_sensitivity(memory, sensitivity)
    _set_metadata(memory, metadata)
    _set_kind(memory, kind)
    _set_subject(memory, subject)
    _set_date(memory, date)
    _set_dedup_hash(memory, dedup_hash)
    _set_vector(memory, vector)
    _set_id(memory, id)
    _set_valid_from(memory, valid_from)
    _set_subject_key(memory, subject_key)
    _set_correction(memory, correction)
    return memory


@dataclass(frozen=True, slots=True)
class Previous:
    """What an upsert keeps of the memory it replaces: its life so far, not its content."""

    created_at: int
    last_accessed_at: int
    access_count: int
    valid_from: int | None = None


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
    new to recency ranking nor resets its reinforcement; so does its ``valid_from``
    unless this write gives one.
    """
    scope = memory.scope
    valid_from = memory.valid_from
    if previous is None:  # a new memory (every write but an upsert): written and "accessed" now
        created = accessed = now_ms
        count = 0
        stamp = str(now_ms)
        fields: list[Any] = [
            "content", memory.content,
            "vector", encode_vector(vector),
            "importance", repr(memory.importance),
            "created_at", stamp,
            "last_accessed_at", stamp,
            "access_count", "0",
        ]  # fmt: skip
    else:
        created, accessed, count = previous.created_at, previous.last_accessed_at, previous.access_count
        fields = [
            "content", memory.content,
            "vector", encode_vector(vector),
            "importance", repr(memory.importance),
            "created_at", str(created),
            "last_accessed_at", str(accessed),
            "access_count", str(count),
        ]  # fmt: skip
        if valid_from is None:
            valid_from = previous.valid_from
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
    if valid_from is None and memory.subject_key is not None:
        valid_from = created  # a subject's versions are ordered by it: always written
    if valid_from is None and previous is None:
        seen = now_ms  # ``keep_from_ms``'s answer for a new memory written without a date
    else:
        if valid_from is not None:
            fields += ["valid_from", str(valid_from)]
        if memory.subject_key is not None:
            fields += ["state_from", str(valid_from), "subject_key", memory.subject_key]
        # A subject's version counts from its write at the earliest (``validity.keep_from_ms``).
        seen = keep_from_ms(valid_from, created, accessed, count, state=memory.subject is not None)
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


def dedup_hash(content: str, kind: str) -> str:
    """What dedup matches twins by: the kind and the normalised text (``codec.normalise``)."""
    return hashlib.blake2b(f"{kind}\x00{normalise(content)}".encode(), digest_size=16).hexdigest()
