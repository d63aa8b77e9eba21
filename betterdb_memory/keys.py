"""Key names, scopes and memory ids: the store's whole keyspace, built in one place.

Cluster layout (which keys must share a hash slot, and why):

* A memory's document and its scope's bookkeeping share the slot of the scope's
  hash tag ``{<scope tag>}``: ``<name>:mem:{S}:<rand>`` (the HASH the index reads),
  ``<name>:scope:{S}:created`` / ``:keep`` / ``:expiry`` (sorted sets) and
  ``<name>:scope:{S}:dedup`` (HASH). The write script (dedup + insert + capacity
  eviction) touches only these keys, so it is atomic and legal in a cluster.
* The scope registry sets ``<name>:scopes:*`` are written idempotently next to the
  script, never inside it; they may live on any slot.
* L1 turns of one (agent, thread) share the slot ``{<session tag>}``.
* The index spans every slot; valkey-search's coordinator fans searches out.

A memory id is ``<scope tag>-<32 hex>``: the scope tag in the id means ``get`` and
``forget`` find the key from the id alone, with no lookup.
"""

from __future__ import annotations

import functools
import hashlib
import re
import uuid
from dataclasses import dataclass

from .errors import ValidationError
from .escaping import validate_tag_value

__all__ = ["KeySpace", "Scope", "SessionKeys", "validate_memory_id", "validate_store_name"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_ID_RE = re.compile(r"^([0-9a-f]{20})-([0-9a-f]{32})$")


def validate_store_name(name: object) -> str:
    """A store name becomes a key prefix and an index name: keep it plain.

    Letters, digits, ``_ . -``, 1-64 characters, starting with a letter or digit. No
    ``:`` (it separates key parts) and no braces (a hash tag in an index prefix is
    rejected by valkey-search).
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValidationError(
            f"store name must match {_NAME_RE.pattern}, got {name!r}",
            code="validation.name",
            details={"argument": "name"},
        )
    return name


def validate_memory_id(memory_id: object) -> str:
    """Check a memory id has the shape this library produces (before building a key)."""
    if not isinstance(memory_id, str) or not _ID_RE.fullmatch(memory_id):
        raise ValidationError(
            f"not a memory id: {memory_id!r}",
            code="validation.memory_id",
            details={"argument": "memory_id"},
        )
    return memory_id


def _digest(parts: tuple[str | None, ...], size: int) -> str:
    h = hashlib.blake2b(digest_size=size)
    for part in parts:
        # Length-prefixed, with None distinct from every string: ("a:", "b") and
        # ("a", ":b") or (None, "x") and ("", "x") can never produce the same input.
        if part is None:
            h.update(b"\x00N")
        else:
            raw = part.encode("utf-8")
            h.update(b"\x01" + len(raw).to_bytes(4, "big") + raw)
    return h.hexdigest()


@functools.lru_cache(maxsize=4096)
def _scope_tag(namespace: str | None, agent_id: str | None, thread_id: str | None) -> str:
    # Cached: a write computes its scope's tag several times (keys, id, registry).
    return _digest((namespace, agent_id, thread_id), 10)


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a memory lives: namespace / agent / thread, each optional.

    A write's scope is exact (three values, some None). A filter's scope treats None
    as "any". ``Scope()`` (all None) is the global scope for writes and "everything"
    for filters, which destructive operations refuse.
    """

    namespace: str | None = None
    agent_id: str | None = None
    thread_id: str | None = None

    @classmethod
    def of(cls, *, namespace: object = None, agent_id: object = None, thread_id: object = None) -> Scope:
        """Validate and build (the API boundary for scope arguments)."""
        return cls(
            namespace=None if namespace is None else validate_tag_value(namespace, name="namespace"),
            agent_id=None if agent_id is None else validate_tag_value(agent_id, name="agent_id"),
            thread_id=None if thread_id is None else validate_tag_value(thread_id, name="thread_id"),
        )

    @property
    def tag(self) -> str:
        """20 hex digits identifying this exact scope (the hash tag of its keys)."""
        return _scope_tag(self.namespace, self.agent_id, self.thread_id)

    @property
    def is_empty(self) -> bool:
        return self.namespace is None and self.agent_id is None and self.thread_id is None

    def contains(self, other: Scope) -> bool:
        """True when the exact scope ``other`` falls inside this filter scope."""
        return (
            (self.namespace is None or self.namespace == other.namespace)
            and (self.agent_id is None or self.agent_id == other.agent_id)
            and (self.thread_id is None or self.thread_id == other.thread_id)
        )


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """L1 keys of one (agent, thread) session; all share one hash slot."""

    turns: str
    meta: str
    summary_lock: str
    summary_cursor: str


class KeySpace:
    """Every key name of one store (``name``), as plain functions of their inputs."""

    def __init__(self, name: str) -> None:
        self.name = validate_store_name(name)
        self.doc_prefix = f"{name}:mem:"
        self.index = f"{name}:mem:idx"
        self.meta = f"{name}:__mem_meta"
        self.config = f"{name}:__mem_config"
        self.stats = f"{name}:__mem_stats"
        self.scopes_all = f"{name}:scopes:all"
        self.scope_info = f"{name}:scopes:info"

    # -- memories -------------------------------------------------------------------

    @staticmethod
    def new_memory_id(scope: Scope) -> str:
        return f"{scope.tag}-{uuid.uuid4().hex}"

    @staticmethod
    def scope_tag_of(memory_id: str) -> str:
        return validate_memory_id(memory_id)[:20]

    def doc(self, memory_id: str) -> str:
        """The HASH of a memory: ``<name>:mem:{<scope tag>}:<rand>``."""
        m = _ID_RE.fullmatch(memory_id) if isinstance(memory_id, str) else None
        if m is None:
            validate_memory_id(memory_id)
            raise AssertionError("unreachable")  # pragma: no cover
        return f"{self.doc_prefix}{{{m.group(1)}}}:{m.group(2)}"

    def memory_id_of(self, key: str | bytes) -> str:
        """Inverse of ``doc``: the memory id of a document key."""
        text = key.decode() if isinstance(key, bytes) else key
        rest = text[len(self.doc_prefix) :]
        # rest = "{<tag>}:<rand>"
        return f"{rest[1:21]}-{rest[23:]}"

    # -- per-scope bookkeeping (same slot as the scope's documents) -----------------------

    def scope_created(self, tag: str) -> str:
        return f"{self.name}:scope:{{{tag}}}:created"

    def scope_keep(self, tag: str) -> str:
        return f"{self.name}:scope:{{{tag}}}:keep"

    def scope_expiry(self, tag: str) -> str:
        return f"{self.name}:scope:{{{tag}}}:expiry"

    def scope_dedup(self, tag: str) -> str:
        return f"{self.name}:scope:{{{tag}}}:dedup"

    def scope_access(self, tag: str) -> str:
        """Exact access counts of a scope's memories (a HASH outside the index, see _scripts)."""
        return f"{self.name}:scope:{{{tag}}}:access"

    def scope_keys(self, tag: str) -> tuple[str, str, str, str, str]:
        """(created, keep, expiry, dedup, access) of one scope."""
        return (
            self.scope_created(tag),
            self.scope_keep(tag),
            self.scope_expiry(tag),
            self.scope_dedup(tag),
            self.scope_access(tag),
        )

    # -- scope registry (any slot; written idempotently) ----------------------------------

    def registry_sets(self, scope: Scope) -> list[str]:
        """The registry sets an exact scope's tag belongs to (one per set dimension, plus all)."""
        out = [self.scopes_all]
        if scope.namespace is not None:
            out.append(f"{self.name}:scopes:ns:{_digest((scope.namespace,), 10)}")
        if scope.agent_id is not None:
            out.append(f"{self.name}:scopes:agent:{_digest((scope.agent_id,), 10)}")
        if scope.thread_id is not None:
            out.append(f"{self.name}:scopes:thread:{_digest((scope.thread_id,), 10)}")
        return out

    def registry_filter_sets(self, scope: Scope) -> list[str]:
        """The sets whose intersection holds every exact scope inside filter ``scope``."""
        sets = self.registry_sets(scope)
        return sets[1:] if len(sets) > 1 else sets

    # -- L1 -------------------------------------------------------------------------------

    def session(self, agent_id: str | None, thread_id: str) -> SessionKeys:
        tag = _digest((agent_id, thread_id), 10)
        base = f"{self.name}:l1:{{{tag}}}"
        return SessionKeys(
            turns=f"{base}:turns",
            meta=f"{base}:meta",
            summary_lock=f"{base}:summary_lock",
            summary_cursor=f"{base}:summary_cursor",
        )

    def agent_sessions(self, agent_id: str | None) -> str:
        """Set of the session tags of one agent (so ``erase`` finds every thread's L1 keys)."""
        return f"{self.name}:l1:agent:{_digest((agent_id,), 10)}"
