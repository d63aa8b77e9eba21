"""Index generations: which index a store queries, and when an existing one must be rebuilt.

valkey-search 1.2 has neither FT.ALTER nor index aliases, so an index that lacks fields
this library now writes (issue 26's ``valid_from`` / ``state_from`` / ``subject_key``,
issue 27's declared ``meta_*`` / ``present``) is replaced by building a new one beside it
(``<name>:mem:idx:g<n>``) and switching the store to it atomically. The name every process
queries lives in the store's meta hash (``<name>:__mem_meta``):

- ``index``: the index this library queries (the reference's ``<name>:mem:idx`` until a switch);
- ``index_gen``: a counter the switch compares and sets (absent: 0);
- ``index_schema``: the digest of the schema that index was built with (``schema_digest``).

This module is pure: the I/O is ``backend.index_switch``; the decision whether an index is
outdated is ``missing_fields`` (by name *and* type, so a declared field whose type changed
counts), the digest names a schema without its tuning (HNSW parameters differ between
processes without making the index different), and ``backfill_page_args`` pages through the
index in use by ``created_at`` (keyset paging: no deep ``LIMIT`` offset, no keyspace scan).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .codec import as_text
from .filter_fields import DECLARED_PREFIX, PRESENCE_FIELD, MetadataFields, index_fields

__all__ = [
    "AUTO_MIGRATE_MAX_DOCS",
    "FIELD_GEN",
    "FIELD_INDEX",
    "FIELD_SCHEMA",
    "BackfillCursor",
    "Generation",
    "backfill_fields",
    "backfill_page_args",
    "backfill_writes",
    "generation_name",
    "missing_fields",
    "redirect",
    "schema_digest",
    "schema_fields",
    "switch_keys",
]

FIELD_INDEX = "index"
FIELD_GEN = "index_gen"
FIELD_SCHEMA = "index_schema"

#: An outdated index that an older betterdb-memory made (not one of betterdb-agent-memory:
#: rebuilding it would make its TAGs case-sensitive for that library too) over at most this
#: many documents is rebuilt at ``ensure_ready`` without being asked: the first call waits for two engine builds of a thousand vectors
#: (a few seconds at most, with declared fields to backfill), where a store that silently
#: lacks new features would surprise more. A larger one waits for
#: ``MemoryStore.migrate_index()`` / ``betterdb-memory reindex`` (minutes at 100k: never
#: silently on a first call), and the features that need its missing fields raise
#: ``configuration.index_outdated`` until then, naming that command.
AUTO_MIGRATE_MAX_DOCS = 1_000

# SCHEMA flags that take no argument, and options that take one (both engines).
_BARE = frozenset({"SORTABLE", "CASESENSITIVE", "UNF", "NOSTEM", "NOINDEX", "WITHSUFFIXTRIE", "INDEXEMPTY"})
_WITH_ARG = frozenset({"SEPARATOR", "WEIGHT", "PHONETIC", "AS"})


def schema_fields(create_args: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``(field, TYPE)`` of each field an ``FT.CREATE`` argument list declares, in order.

    Reads what follows ``SCHEMA``: a field name, its type, then its options (a VECTOR's
    count-prefixed parameter block, ``SEPARATOR x``, bare flags).
    """
    args = [str(a) for a in create_args]
    try:
        i = args.index("SCHEMA") + 1
    except ValueError:
        return ()
    out: list[tuple[str, str]] = []
    while i + 1 < len(args):
        name, ftype = args[i], args[i + 1].upper()
        i += 2
        if ftype == "VECTOR":
            i += 1  # the algorithm
            i += 1 + int(args[i])  # the count of parameters, then the parameters
        while i < len(args) and (args[i].upper() in _BARE or args[i].upper() in _WITH_ARG):
            i += 2 if args[i].upper() in _WITH_ARG else 1
        out.append((name, ftype))
    return tuple(out)


def schema_digest(fields: Sequence[tuple[str, str]]) -> str:
    """16 hex digits naming a schema by its fields and their types (order and tuning aside)."""
    text = "\x00".join(f"{n}\x01{t.upper()}" for n, t in sorted(set(fields)))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def missing_fields(wanted: Sequence[tuple[str, str]], have: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """The fields of ``wanted`` that the index (``have``) lacks or holds with another type, in order.

    ``content TEXT`` never counts: an engine without TEXT fields never had it, and an
    index adopted from another library without it only loses the full-text candidates.
    """
    held = {(n, t.upper()) for n, t in have}
    return tuple(n for n, t in wanted if (n, t.upper()) not in held and n != "content")


_QUERIES = ("FT.SEARCH", "FT.AGGREGATE")


def redirect(args: Sequence[Any], redirects: Mapping[str, str], *, probes: bool = False) -> Sequence[Any]:
    """An FT.SEARCH / FT.AGGREGATE built for an index name this process switched away from,
    sent to the one in use instead (a query in flight or retried across a switch never fails).

    ``probes``: an FT.INFO too, the index-size probe a recall sends in its pipeline
    (``tiers.scope_scan``); never an FT.INFO sent alone, which may ask of the old index itself.
    """
    if redirects and len(args) > 1 and (args[0] in _QUERIES or (probes and args[0] == "FT.INFO")):
        new = redirects.get(as_text(args[1]) or "")
        if new is not None:
            return [args[0], new, *args[2:]]
    return args


def generation_name(reference: str, gen: int) -> str:
    """The index of generation ``gen`` of a store whose reference index is ``reference``."""
    return f"{reference}:g{gen}"


@dataclass(frozen=True, slots=True)
class Generation:
    """The index a store queries, as its meta hash says (the reference name before any switch)."""

    name: str
    gen: int = 0
    schema: str | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, str], reference: str) -> Generation:
        raw_gen = meta.get(FIELD_GEN) or "0"
        gen = int(raw_gen) if raw_gen.isdigit() else 0
        return cls(name=meta.get(FIELD_INDEX) or reference, gen=gen, schema=meta.get(FIELD_SCHEMA) or None)


def switch_keys(name: str) -> tuple[str, str]:
    """(state hash, lock) of store ``name``'s index switch; outside the document prefix."""
    return f"{name}:__mem_idxswitch", f"{name}:__mem_idxswitch:lock"


@dataclass(frozen=True, slots=True)
class BackfillCursor:
    """Where a backfill pass stands: past every document with ``created_at`` below ``after``,
    and past the first ``ties`` of those with ``created_at == after`` (in the engine's order)."""

    after: int | None = None
    ties: int = 0

    def encode(self) -> str:
        return "" if self.after is None else f"{self.after}:{self.ties}"

    @classmethod
    def decode(cls, text: str | None) -> BackfillCursor:
        if not text or ":" not in text:
            return cls()
        after, ties = text.split(":", 1)
        try:
            return cls(int(after), int(ties))
        except ValueError:
            return cls()

    def advance(self, created: Sequence[int]) -> BackfillCursor:
        """The cursor after a page whose documents had these ``created_at`` (ascending)."""
        if not created:
            return self
        last = created[-1]
        same = sum(1 for c in created if c == last)
        return BackfillCursor(last, same + (self.ties if last == self.after else 0))


def backfill_page_args(index: str, cursor: BackfillCursor, fields: Sequence[str], *, page: int) -> list[str]:
    """FT.SEARCH of the next ``page`` documents by ``created_at`` ascending, with ``fields``."""
    lo = "-inf" if cursor.after is None else str(cursor.after)
    want = ["created_at", *fields]
    return [
        "FT.SEARCH", index, f"@created_at:[{lo} +inf]",
        "RETURN", str(len(want)), *want,
        "SORTBY", "created_at", "ASC",
        "LIMIT", str(cursor.ties), str(page),
        "DIALECT", "2",
    ]  # fmt: skip


def backfill_fields(declared: MetadataFields) -> list[str]:
    """What a backfill reads of each document: its metadata and the declared fields already written."""
    return ["metadata", PRESENCE_FIELD, *(DECLARED_PREFIX + n for n, _ in declared)]


def _metadata(text: str | None) -> Mapping[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None  # unreadable metadata: nothing to index for this memory
    return value if isinstance(value, Mapping) else None


def backfill_writes(fields: Mapping[str, Any], declared: MetadataFields) -> tuple[dict[str, str], list[str]]:
    """(fields to set, fields to delete) to bring one document's declared fields up to date.

    Values already right are not written again (on RediSearch every HSET re-indexes the whole
    document, vector included). Fields of names no longer declared are deleted.
    """
    want = index_fields(_metadata(as_text(fields.get("metadata"))), declared, strict=False)
    have = {k: as_text(v) for k, v in fields.items() if k == PRESENCE_FIELD or k.startswith(DECLARED_PREFIX)}
    have = {k: v for k, v in have.items() if v}
    previously = [n for n in (have.get(PRESENCE_FIELD) or "").split(",") if n]
    stale = [DECLARED_PREFIX + n for n in previously if DECLARED_PREFIX + n not in want]
    if PRESENCE_FIELD in have and PRESENCE_FIELD not in want:
        stale.append(PRESENCE_FIELD)
    sets = {k: v for k, v in want.items() if have.get(k) != v}
    return sets, list(dict.fromkeys(stale))
