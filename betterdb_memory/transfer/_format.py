"""The export format (JSONL, version 1): its rows, value encoding and the keys it carries. Pure; no I/O.

One JSON object per line::

    {"format": "betterdb-memory", "version": 1, "store": "app", "model_id": "...", "dimensions": 384,
     "vectors": false, "exported_at": 1760000000000, "library": "0.1.0"}
    {"type": "memory", "id": "<id>", "fields": {"content": "...", "created_at": "...", ...},
     "access": 3, "updates": ["{...}"], "expire_at": 1760000360000, "vector": [0.01, ...]}
    {"type": "history", "id": "<id>", "fields": {...}, "expire_at": null, "vector": [...]}
    {"type": "key", "key": "l1:{<tag>}:turns", "kind": "list", "value": [...], "expire_at": ...}
    {"type": "end", "counts": {"memory": 10, "history": 2, "key": 7}}

* ``memory``: a document's HASH fields exactly as stored (``vector`` aside), so an
  import writes the same document: id, ``created_at``, ``last_accessed_at``,
  ``access_count``, ``importance``, ``keep``, ``expires_at``, scope, tags, source,
  subject, kind, sensitivity, metadata, dedup hash. ``access`` is the exact access
  counter (``<name>:acc:{<doc key>}``), absent when the memory was never recalled;
  ``updates`` its update history (``<name>:upd:{<doc key>}``, the versions ``update`` /
  an upsert replaced, newest first), absent when it has none.
* ``history``: a superseded or retracted fact (``<name>:hist:{<name>:mem:<id>}``).
* ``key``: the state that is not a document, named relative to the store (``<name>:``
  dropped, so it imports under any name): L1 sessions (turn lists, session meta
  hashes, summary cursors, agents' session sets, OpenAI Agents sessions' raw items) and
  consolidation state (targets, subjects, consumed sources, per-subject fact
  histories). Locks are not exported.
* ``expire_at``: when the key's server-side TTL ends, epoch ms (null: none); an import
  re-applies what remains and skips what has expired since.
* ``vector`` (with ``--vectors``): the embedding as floats; an import reuses it only
  when the header's model and dimension are the importing store's, else re-embeds.
* Values are text; a value that is not UTF-8 is ``{"b64": "..."}``.
* ``end`` closes a complete file: an import without it reports a truncated export.

A file without a header (what the CLI wrote before this format) is read as version 0:
one ``MemoryItem`` as JSON per line; ``legacy_fields`` rebuilds its document.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from .._version import __version__
from ..core.codec import as_text, split_tags
from ..core.keys import Scope, validate_memory_id
from ..core.record import NewMemory, encode_record
from ..core.validation import check_importance, check_kind, check_sensitivity, check_tags, is_int, is_number
from ..errors import ValidationError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ExportHeader",
    "KeyKind",
    "decode_value",
    "document_row",
    "encode_value",
    "key_kind",
    "key_row",
    "legacy_fields",
    "matches_scope",
    "parse_row",
]

FORMAT = "betterdb-memory"
FORMAT_VERSION = 1

KeyKind = Literal["hash", "list", "set", "zset", "string"]

# The exported state keys, relative to ``<name>:`` (see ``core.keys``: ``KeySpace.session``,
# ``agent_sessions``, ``consolidation_base``, ``ConsolidationKeys``). Scope, session and
# subject tags are 20 hex digits. Locks (``summary_lock``, ``cons:{..}:lock``) are left out:
# they belong to a run, not to the data. ``tests/unit/test_transfer_format.py`` checks these
# against the names ``KeySpace`` builds, so the two cannot drift apart.
_TAG = r"\{[0-9a-f]{20}\}"
_KEY_KINDS: tuple[tuple[re.Pattern[str], KeyKind], ...] = (
    (re.compile(rf"^l1:{_TAG}:turns$"), "list"),
    (re.compile(rf"^l1:{_TAG}:meta$"), "hash"),
    (re.compile(rf"^l1:{_TAG}:summary_cursor$"), "string"),
    # The OpenAI Agents session's raw items and folded mark (adapters.openai_agents).
    (re.compile(rf"^l1:{_TAG}:agents:items$"), "list"),
    (re.compile(rf"^l1:{_TAG}:agents:folded$"), "string"),
    # The LangChain chat history's messages and folded mark (adapters.langchain.history).
    (re.compile(rf"^l1:{_TAG}:langchain:messages$"), "list"),
    (re.compile(rf"^l1:{_TAG}:langchain:folded$"), "string"),
    # LangChain key-value stores (adapters.langchain.kv): values and the key SET.
    (re.compile(rf"^kv:{_TAG}:v:.+$"), "string"),
    (re.compile(rf"^kv:{_TAG}:keys$"), "set"),
    (re.compile(r"^l1:agent:[0-9a-f]{20}$"), "set"),
    (re.compile(r"^cons:targets$"), "hash"),
    (re.compile(rf"^cons:{_TAG}:subjects$"), "hash"),
    (re.compile(rf"^cons:{_TAG}:consumed:(summary|facts)$"), "zset"),
    (re.compile(rf"^cons:{_TAG}:hist:[0-9a-f]{{20}}$"), "zset"),
)

#: SCAN patterns (relative to ``<name>:``) that find every exported state key.
STATE_PATTERNS: tuple[str, ...] = ("l1:*", "cons:*")


def key_kind(relative: str) -> KeyKind | None:
    """The type of an exported state key (relative name), or None when it is not one."""
    for pattern, kind in _KEY_KINDS:
        if pattern.match(relative):
            return kind
    return None


def _bad(message: str, line: int | None) -> ValidationError:
    where = f"line {line}: " if line is not None else ""
    return ValidationError(where + message, code="validation.import", details={"line": line})


# -- values ------------------------------------------------------------------------------


def encode_value(raw: bytes | str) -> str | dict[str, str]:
    """A stored value for JSON: text as it is, anything not UTF-8 as ``{"b64": ...}``."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(raw).decode("ascii")}


def decode_value(value: object, line: int | None = None) -> str | bytes:
    """Inverse of ``encode_value``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("b64"), str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except ValueError as exc:
            raise _bad("bad base64 value", line) from exc
    raise _bad(f"a value must be a string or {{'b64': ...}}, not {type(value).__name__}", line)


# -- header ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportHeader:
    """The first line of an export: what made it (store, model, dimension) and whether vectors are in it."""

    store: str
    model_id: str
    dimensions: int
    vectors: bool
    exported_at: int
    version: int = FORMAT_VERSION
    library: str = __version__

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": self.version,
            "store": self.store,
            "model_id": self.model_id,
            "dimensions": self.dimensions,
            "vectors": self.vectors,
            "exported_at": self.exported_at,
            "library": self.library,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any], line: int = 1) -> ExportHeader:
        """Parse a header row.

        Raises:
            ValidationError: another format, or a version newer than this library reads.
        """
        if row.get("format") != FORMAT:
            raise _bad(f"not a {FORMAT} export (format {row.get('format')!r})", line)
        version = row.get("version")
        if not is_int(version) or not 1 <= version <= FORMAT_VERSION:
            raise _bad(
                f"export format version {version!r}; this library reads versions 1..{FORMAT_VERSION} "
                "(upgrade betterdb-memory to import it)",
                line,
            )
        dims = row.get("dimensions")
        return cls(
            store=str(row.get("store") or ""),
            model_id=str(row.get("model_id") or ""),
            dimensions=dims if is_int(dims) else 0,
            vectors=bool(row.get("vectors")),
            exported_at=int(row.get("exported_at") or 0),
            version=version,
            library=str(row.get("library") or ""),
        )


# -- rows ----------------------------------------------------------------------------------


def document_row(
    kind: Literal["memory", "history"],
    memory_id: str,
    fields: Mapping[Any, Any],
    *,
    vector: Sequence[float] | None = None,
    access: int | None = None,
    updates: Sequence[bytes | str] = (),
    expire_at: int | None = None,
) -> dict[str, Any]:
    """A memory or history document as a row (``fields`` as HGETALL returned them; ``vector`` aside)."""
    row: dict[str, Any] = {
        "type": kind,
        "id": memory_id,
        "fields": {as_text(k): encode_value(v) for k, v in fields.items() if as_text(k) != "vector"},
    }
    if access is not None:
        row["access"] = access
    if updates:
        row["updates"] = [encode_value(u) for u in updates]
    row["expire_at"] = expire_at
    if vector is not None:
        row["vector"] = [float(x) for x in vector]
    return row


def key_row(relative: str, kind: KeyKind, value: Any, *, expire_at: int | None) -> dict[str, Any]:
    """A state key as a row. ``value``: hash: mapping; list / set: sequence; zset: (member, score) pairs."""
    encoded: Any
    if kind == "hash":
        encoded = {as_text(k): encode_value(v) for k, v in value.items()}
    elif kind == "list":
        encoded = [encode_value(v) for v in value]
    elif kind == "set":
        encoded = sorted((encode_value(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    elif kind == "zset":
        encoded = [[encode_value(m), float(s)] for m, s in value]
    else:
        encoded = encode_value(value)
    return {"type": "key", "key": relative, "kind": kind, "value": encoded, "expire_at": expire_at}


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """A parsed ``memory`` or ``history`` row."""

    kind: Literal["memory", "history"]
    id: str
    fields: dict[str, str | bytes]
    vector: list[float] | None
    access: int | None
    expire_at: int | None
    updates: tuple[str | bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class KeyRow:
    """A parsed ``key`` row (``value`` decoded to what the write commands take)."""

    key: str
    kind: KeyKind
    value: Any
    expire_at: int | None


@dataclass(frozen=True, slots=True)
class EndRow:
    counts: dict[str, int]


def _opt_int(row: Mapping[str, Any], name: str, line: int) -> int | None:
    value = row.get(name)
    if value is None:
        return None
    if not is_number(value) or not math.isfinite(value):
        raise _bad(f"{name} must be an integer (epoch ms / count) or null", line)
    return int(value)


def parse_row(row: object, line: int) -> DocumentRow | KeyRow | EndRow:
    """Validate one row after the header.

    Raises:
        ValidationError: an unknown type, a bad id, key name or value; nothing of the
            row is written.
    """
    if not isinstance(row, Mapping):
        raise _bad("not a JSON object", line)
    kind = row.get("type")
    if kind in ("memory", "history"):
        try:
            memory_id = validate_memory_id(row.get("id"))
        except ValidationError as exc:
            raise _bad(f"bad memory id {row.get('id')!r}", line) from exc
        raw = row.get("fields")
        if not isinstance(raw, Mapping) or not isinstance(raw.get("content"), str):
            raise _bad("fields must be an object with a 'content' string", line)
        fields = {str(k): decode_value(v, line) for k, v in raw.items() if k != "vector"}
        vector = row.get("vector")
        if vector is not None and (not isinstance(vector, list) or not all(is_number(x) for x in vector)):
            raise _bad("vector must be a list of numbers", line)
        updates = row.get("updates") or []
        if not isinstance(updates, list):
            raise _bad("updates must be a list", line)
        return DocumentRow(
            kind=kind,
            id=memory_id,
            fields=fields,
            vector=vector,
            access=_opt_int(row, "access", line),
            expire_at=_opt_int(row, "expire_at", line),
            updates=tuple(decode_value(u, line) for u in updates),
        )
    if kind == "key":
        relative = row.get("key")
        found = key_kind(relative) if isinstance(relative, str) else None
        if found is None or row.get("kind") != found:
            raise _bad(f"not an exported state key: {relative!r} ({row.get('kind')!r})", line)
        assert isinstance(relative, str)
        value = row.get("value")
        decoded: Any
        if found == "hash" and isinstance(value, Mapping):
            decoded = {str(k): decode_value(v, line) for k, v in value.items()}
        elif found in ("list", "set") and isinstance(value, list):
            decoded = [decode_value(v, line) for v in value]
        elif found == "zset" and isinstance(value, list):
            decoded = {}
            for pair in value:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], int | float)):
                    raise _bad("a sorted-set value is a list of [member, score]", line)
                decoded[decode_value(pair[0], line)] = float(pair[1])
        elif found == "string":
            decoded = decode_value(value, line)
        else:
            raise _bad(f"bad value for a {found} key", line)
        return KeyRow(relative, found, decoded, _opt_int(row, "expire_at", line))
    if kind == "end":
        counts = row.get("counts")
        return EndRow({str(k): int(v) for k, v in counts.items()} if isinstance(counts, Mapping) else {})
    raise _bad(f"unknown row type {kind!r}", line)


# -- filters and version 0 -------------------------------------------------------------------


def matches_scope(fields: Mapping[Any, Any], scope: Scope, tags: Sequence[str] = ()) -> bool:
    """Whether a document's stored fields fall in a filter scope (None: any) carrying ALL ``tags``."""
    text = {as_text(k): as_text(v) for k, v in fields.items() if as_text(k) != "vector"}
    exact = Scope(
        namespace=text.get("namespace") or None,
        agent_id=text.get("agentId") or None,
        thread_id=text.get("threadId") or None,
    )
    return scope.contains(exact) and set(tags) <= set(split_tags(text.get("tags")))


def legacy_fields(row: Mapping[str, Any], *, half_life_seconds: float, line: int) -> DocumentRow:
    """A version 0 row (a ``MemoryItem`` as JSON) as the document it came from.

    Ids, times, access count, TTL and every scope field are kept; the document is
    rebuilt with ``record.encode_record`` (so its layout is the current one).
    """
    try:
        memory_id = validate_memory_id(row.get("id"))
    except ValidationError as exc:
        raise _bad(f"bad memory id {row.get('id')!r}", line) from exc
    content = row.get("content")
    if not isinstance(content, str) or not content.strip():
        raise _bad("content must be a non-empty string", line)
    created = _opt_int(row, "created_at", line) or 0
    valid_from = _opt_int(row, "valid_from", line)  # a MemoryItem's: its created_at when never given
    try:
        scope = Scope.of(
            namespace=row.get("namespace"), agent_id=row.get("agent_id"), thread_id=row.get("thread_id")
        )
        importance = check_importance(row.get("importance", 0.5))
        tags = check_tags(row.get("tags") or None)
        sensitivity = check_sensitivity(row.get("sensitivity") or "none")
        kind = check_kind(row.get("kind") or "memory")
    except ValidationError as exc:
        raise _bad(exc.message, line) from exc
    memory = NewMemory(
        content=content,
        scope=scope,
        importance=importance,
        tags=tags,
        source=row.get("source"),
        sensitivity=sensitivity,
        metadata=dict(row.get("metadata") or {}),
        kind=kind,
        subject=row.get("subject"),
        date=row.get("date"),
        valid_from=valid_from if valid_from != created else None,
    )
    placeholder = np.ones(1, dtype=np.float32)  # the vector is written by the importer
    flat, _ = encode_record(memory, placeholder, now_ms=created, half_life_seconds=half_life_seconds)
    fields: dict[str, str | bytes] = {str(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    fields.pop("vector", None)
    fields["last_accessed_at"] = str(_opt_int(row, "last_accessed_at", line) or created)
    fields["access_count"] = str(_opt_int(row, "access_count", line) or 0)
    expires = _opt_int(row, "expires_at", line)
    if expires:
        fields["expires_at"] = str(expires)
    vector = row.get("vector")
    return DocumentRow(
        kind="memory",
        id=memory_id,
        fields=fields,
        vector=vector if isinstance(vector, list) else None,
        access=None,
        expire_at=expires,
    )
