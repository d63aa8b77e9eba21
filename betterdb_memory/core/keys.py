"""Key names, scopes and memory ids: the store's whole keyspace, built in one place.

The documents follow betterdb-agent-memory's layout, so that library, BetterDB
Monitor and this one read and write one store: a memory is the HASH
``<name>:mem:<id>`` under the index ``<name>:mem:idx``, ``<id>`` a UUID4 string.

Cluster layout (which keys must share a hash slot, and why):

* A memory's exact access counter ``<name>:acc:{<doc key>}`` carries the document
  key as its hash tag, so it lives on the document's slot: the reinforcement script
  and ``forget``'s ``DEL doc counter`` touch one slot. (A document key holds no
  braces: store names and ids are validated, so its slot is the CRC of the whole key.)
* Everything else is one key per command (documents spread over every slot, as the
  reference library spreads them); the index spans every slot and valkey-search's
  coordinator fans searches out.
* L1 turns of one (agent, thread) share the slot ``{<session tag>}``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from ..errors import ValidationError
from .escaping import validate_tag_value

__all__ = [
    "DEFAULT_NAME",
    "ConsolidationKeys",
    "KeySpace",
    "Scope",
    "SessionKeys",
    "config_key",
    "stats_key",
    "validate_memory_id",
    "validate_store_name",
]

#: The reference's default store name (``AgentMemoryOptions.name``), the store's and the CLI's.
DEFAULT_NAME = "betterdb_ac"

# BetterDB Monitor's own check of a store name (a letter or underscore first, then
# letters, digits, ``_ . - :``), bounded in length.
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:\-]{0,199}$")
# UUID4 strings (what this library and the reference generate) and caller-chosen ids of
# the same plain alphabet. No braces (a hash tag would move the document's slot away
# from its counter's), no whitespace, no ``*`` / ``?`` (glob characters in SCAN).
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,199}$")


def validate_store_name(name: object) -> str:
    """A store name becomes a key prefix and an index name: keep it plain.

    What BetterDB Monitor shows: a letter or ``_`` first, then letters, digits and
    ``_ . - :`` (1-200 characters). No braces (a hash tag in an index prefix is
    rejected by valkey-search). No ``:``-separated part ``mem`` after the first: the
    store ``a:mem`` would keep its documents under ``a:mem:mem:``, inside the index
    prefix ``a:mem:`` of the store ``a``, which would then see them.
    """
    if (
        not isinstance(name, str)
        or not _NAME_RE.fullmatch(name)
        or "mem" in name.split(":")[1:]
        or name.endswith(":")
    ):
        raise ValidationError(
            "store name must start with a letter or '_', hold only letters, digits, '_', '.', '-', ':' "
            f"(at most 200, no ':mem' part, not ending in ':'), got {name!r}",
            code="validation.name",
            details={"argument": "name"},
        )
    return name


# Ids already found valid: a recall builds two keys for each of its hits (the document and
# its access counter), each checking the id again; a set lookup costs a tenth of the match.
# Bounded (emptied when full): any id can be checked again.
_VALID_IDS: set[str] = set()
_VALID_IDS_MAX = 65_536


def validate_memory_id(memory_id: object) -> str:
    """Check a memory id before it becomes part of a key."""
    if type(memory_id) is str and memory_id in _VALID_IDS:
        return memory_id
    if not isinstance(memory_id, str) or not _ID_RE.fullmatch(memory_id):
        raise ValidationError(
            f"not a memory id: {memory_id!r}",
            code="validation.memory_id",
            details={"argument": "id"},
        )
    if type(memory_id) is str:
        if len(_VALID_IDS) >= _VALID_IDS_MAX:
            _VALID_IDS.clear()
        _VALID_IDS.add(memory_id)
    return memory_id


# Memory ids made ahead (``KeySpace.new_memory_id``): ``os.urandom``'s bytes as UUID4
# strings, the version nibble set to 4 and the variant's two bits to ``10`` (RFC 4122).
_IDS: list[str] = []
_ID_BATCH = 256
_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}
os.register_at_fork(after_in_child=_IDS.clear)  # a child must not repeat its parent's next ids


def _more_ids() -> list[str]:
    h = os.urandom(16 * _ID_BATCH).hex()
    return [
        f"{h[i : i + 8]}-{h[i + 8 : i + 12]}-4{h[i + 13 : i + 16]}-{_VARIANT[h[i + 16]]}{h[i + 17 : i + 20]}-{h[i + 20 : i + 32]}"
        for i in range(0, 32 * _ID_BATCH, 32)
    ]


# Scopes already built from plain ``str`` values (``Scope.of``), by their three values. Bounded
# (emptied when full), like ``_VALID_IDS``: any scope can be checked and built again.
_SCOPES: dict[tuple[object, object, object], Scope] = {}
_SCOPES_MAX = 4096


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


def digest(*parts: str | None, size: int = 10) -> str:
    """A short, collision-safe digest of some values (for key names built from user values)."""
    return _digest(parts, size)


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
        """Validate and build (the API boundary for scope arguments).

        Every write and most reads build one: a scope of plain ``str`` values (or None)
        already built is taken from ``_SCOPES`` (frozen, so shared), skipping the checks
        it passed and the frozen ``__init__``.
        """
        plain = (
            cls is Scope
            and (namespace is None or namespace.__class__ is str)
            and (agent_id is None or agent_id.__class__ is str)
            and (thread_id is None or thread_id.__class__ is str)
        )
        if plain:
            known = _SCOPES.get((namespace, agent_id, thread_id))
            if known is not None:
                return known
        scope = cls(
            namespace=None if namespace is None else validate_tag_value(namespace, name="namespace"),
            agent_id=None if agent_id is None else validate_tag_value(agent_id, name="agent_id"),
            thread_id=None if thread_id is None else validate_tag_value(thread_id, name="thread_id"),
        )
        if plain:
            if len(_SCOPES) >= _SCOPES_MAX:
                _SCOPES.clear()
            _SCOPES[(namespace, agent_id, thread_id)] = scope
        return scope

    @property
    def tag(self) -> str:
        """20 hex digits identifying this exact scope (used in lock and state key names)."""
        return _digest((self.namespace, self.agent_id, self.thread_id), 10)

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
    agent_items: str  # the OpenAI Agents adapter's raw items (adapters.openai_agents)
    agent_folded: str  # how many of them are folded into turns
    chat_messages: str  # the LangChain chat history's messages (adapters.langchain.history)
    chat_folded: str  # how many of them are folded into turns

    def all(self) -> list[str]:
        """Every key of the session (what clearing or erasing it deletes)."""
        return [
            self.turns,
            self.meta,
            self.summary_lock,
            self.summary_cursor,
            self.agent_items,
            self.agent_folded,
            self.chat_messages,
            self.chat_folded,
        ]


def config_key(name: str) -> str:
    """The live config hash of store ``name``: ``<name>:__mem_config`` (Monitor reads and writes it)."""
    return f"{name}:__mem_config"


def stats_key(name: str) -> str:
    """The stats hash Monitor polls: ``<name>:__mem_stats``."""
    return f"{name}:__mem_stats"


class KeySpace:
    """Every key name of one store (``name``), as plain functions of their inputs."""

    def __init__(self, name: str) -> None:
        self.name = validate_store_name(name)
        self.doc_prefix = f"{name}:mem:"
        self.index = f"{name}:mem:idx"
        self.meta = f"{name}:__mem_meta"
        self.config = config_key(name)
        self.stats = stats_key(name)
        # A re-embedding's state (target model, phase); ``:lock`` its lock, ``:{<doc>}``
        # and ``:hist:{...}`` the new vectors on each document's slot (transfer.reembed).
        self.reembed = f"{name}:__mem_reembed"

    # -- memories -------------------------------------------------------------------

    @staticmethod
    def new_memory_id() -> str:
        """A UUID4 string, as the reference library makes them (``uuid.uuid4()``'s format and bits).

        Taken from ids made ahead in batches (``_more_ids``): one ``os.urandom`` call
        and one pass of formatting per 256 ids instead of a system call and a ``UUID``
        per memory. ``list.pop`` hands each id out once, whatever the threads; a forked
        child starts with none of its parent's.
        """
        while True:
            try:
                return _IDS.pop()
            except IndexError:
                _IDS.extend(_more_ids())

    def doc(self, memory_id: str) -> str:
        """The HASH of a memory: ``<name>:mem:<id>``."""
        return self.doc_prefix + validate_memory_id(memory_id)

    def memory_id_of(self, key: str | bytes) -> str:
        """Inverse of ``doc``: the memory id of a document key."""
        text = key.decode() if isinstance(key, bytes) else key
        return text[len(self.doc_prefix) :] if text.startswith(self.doc_prefix) else text

    def access(self, memory_id: str) -> str:
        """The exact access counter of a memory, on its document's hash slot."""
        return f"{self.name}:acc:{{{self.doc(memory_id)}}}"

    @property
    def access_pending(self) -> str:
        """HASH of the documents whose access snapshot lags: ``<name>:__mem_pending_access``.

        Document key -> its last access (epoch ms). Written by recalls, emptied by the
        reinforcement's flush (``backend.scripts_reinforce``); store-wide, like the stats.
        """
        return f"{self.name}:__mem_pending_access"

    def updates(self, memory_id: str) -> str:
        """The update history of a memory (a LIST, newest first), on its document's hash slot."""
        return f"{self.name}:upd:{{{self.doc(memory_id)}}}"

    def cap_lock(self, filter_digest: str) -> str:
        """Serialises capacity eviction of one cap scope (so concurrent writers never over-evict)."""
        return f"{self.name}:caplock:{filter_digest}"

    # -- consolidation state (per exact scope) ------------------------------------------

    def consolidation_base(self, scope_tag: str) -> str:
        return f"{self.name}:cons:{{{scope_tag}}}"

    @property
    def consolidation_targets(self) -> str:
        """HASH of every consolidation target scope: scope tag -> JSON [namespace, agent, thread]."""
        return f"{self.name}:cons:targets"

    def history_prefix(self) -> str:
        return f"{self.name}:hist:"

    def hist_doc(self, memory_id: str) -> str:
        """A superseded version's document: ``<name>:hist:{<doc key>}`` (the document's slot, outside the index)."""
        return f"{self.history_prefix()}{{{self.doc(memory_id)}}}"

    # -- subjects (tiers.subjects): one slot per subject, tagged by its digest ------------

    def subject(self, digest: str) -> str:
        """HASH naming a subject's current version: ``<name>:subj:{<digest>}``."""
        return f"{self.name}:subj:{{{digest}}}"

    def subject_versions(self, digest: str) -> str:
        """ZSET of every version of a subject (member id, score valid_from), on the pointer's slot."""
        return f"{self.name}:subj:{{{digest}}}:hist"

    @property
    def subject_scopes(self) -> str:
        """HASH of every exact scope that has subjects: scope tag -> JSON [namespace, agent, thread]."""
        return f"{self.name}:subj:scopes"

    def subject_scope(self, scope_tag: str) -> str:
        """HASH of one exact scope's subjects: digest -> JSON [kind, normalised subject]."""
        return f"{self.name}:subj:scope:{{{scope_tag}}}"

    @property
    def subject_pending(self) -> str:
        """ZSET of subject writes not settled yet: ``<digest>:<id>`` -> ms (``core.subject_repair``)."""
        return f"{self.name}:subj:pending"

    # -- L1 -------------------------------------------------------------------------------

    def session(self, agent_id: str | None, thread_id: str) -> SessionKeys:
        tag = _digest((agent_id, thread_id), 10)
        base = f"{self.name}:l1:{{{tag}}}"
        return SessionKeys(
            turns=f"{base}:turns",
            meta=f"{base}:meta",
            summary_lock=f"{base}:summary_lock",
            summary_cursor=f"{base}:summary_cursor",
            agent_items=f"{base}:agents:items",
            agent_folded=f"{base}:agents:folded",
            chat_messages=f"{base}:langchain:messages",
            chat_folded=f"{base}:langchain:folded",
        )

    def kv(self, namespace: str) -> tuple[str, str]:
        """(prefix of the values, SET of the keys) of one key-value namespace, on one hash slot."""
        base = f"{self.name}:kv:{{{_digest((namespace,), 10)}}}"
        return f"{base}:v:", f"{base}:keys"

    def agent_sessions(self, agent_id: str | None) -> str:
        """Set of the session tags of one agent (so ``erase`` finds every thread's L1 keys)."""
        return f"{self.name}:l1:agent:{_digest((agent_id,), 10)}"


class ConsolidationKeys:
    """Consolidation state of one target scope (``<name>:cons:{<scope tag>}:...``)."""

    def __init__(self, keys: KeySpace, scope: Scope) -> None:
        base = keys.consolidation_base(scope.tag)
        self.scope = scope
        self.tag = scope.tag
        self.lock = f"{base}:lock"
        self.subjects = f"{base}:subjects"  # HASH subject digest -> subject key
        self.history_base = f"{base}:hist:"
        self.consumed = {"summary": f"{base}:consumed:summary", "facts": f"{base}:consumed:facts"}
        self.targets = keys.consolidation_targets
        self._keys = keys

    def history(self, digest: str) -> str:
        return f"{self.history_base}{digest}"

    def hist_doc(self, memory_id: str) -> str:
        """Where a superseded fact's document goes: same slot as the document, outside the index."""
        return f"{self._keys.history_prefix()}{{{self._keys.doc(memory_id)}}}"

    def all_state(self) -> list[str]:
        return [self.lock, self.subjects, *self.consumed.values()]
