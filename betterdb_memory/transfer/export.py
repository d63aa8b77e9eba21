"""Export a store as JSONL (format version 1, ``_format``): every document, fact history and state key.

The documents are read as stored (``HGETALL``), not rebuilt from ``MemoryItem``: an
import then writes the same HASH, with the same id, times, counts and TTL. The file
is written as the keyspace is walked (``_scan``), so memory use stays flat; the
header comes first and an ``end`` row with the counts last, so a cut file is noticed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from ..backend.commands import Command, score_pairs
from ..core.codec import as_text, decode_vector, to_int
from ..core.filter_eval import evaluate
from ..core.keys import ConsolidationKeys, Scope
from ..core.query import VECTOR_FIELD
from ..core.validation import check_tags
from ..core.where import parse
from ..progress import ProgressSink, check_progress
from ._format import (
    STATE_PATTERNS,
    ExportHeader,
    KeyKind,
    document_row,
    key_kind,
    key_row,
    matches_scope,
)
from ._scan import ids_under

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["ExportResult", "export_store"]

_OPERATION = "export"


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What an export wrote: memories, history documents, state keys; ``expired`` skipped."""

    memories: int
    history: int
    keys: int
    expired: int
    vectors: bool


def _exact_access(fields: dict[Any, Any], access: Any, seen: Any) -> dict[Any, Any]:
    """The document's fields with its exact access snapshot (its own lags behind the
    counter and the pending time until the reinforcement's flush: ``tiers.reinforce``)."""
    raw = b"content" in fields
    exact = {"access_count": to_int(access, 0), "last_accessed_at": to_int(seen, 0)}
    out = dict(fields)
    for name, value in exact.items():
        key = name.encode() if raw else name
        if value > to_int(fields.get(key), 0):
            out[key] = str(value).encode() if raw else str(value)
    return out


def _json(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def _expire_at(pttl: Any, now_ms: int) -> int | None:
    ttl = to_int(pttl, -1)
    return now_ms + ttl if ttl > 0 else None


async def _meta(store: MemoryStore) -> tuple[str, int]:
    """The model and dimension that made the stored vectors (the meta hash; else the store's embedder)."""
    raw = await store.backend.command(_OPERATION, "HGETALL", store.keys.meta)
    meta = {as_text(k): as_text(v) for k, v in raw.items()}
    model = meta.get("model_id") or store.embedder.model_id
    dims = to_int(meta.get("dimensions"), 0) or store.embedder.dimensions
    return model, dims


async def export_store(
    store: MemoryStore,
    out: TextIO,
    *,
    vectors: bool = False,
    thread_id: str | None = None,
    agent_id: str | None = None,
    namespace: str | None = None,
    tags: Sequence[str] | None = None,
    progress: ProgressSink | None = None,
    where: Mapping[str, Any] | None = None,
) -> ExportResult:
    """Write ``store`` to ``out`` as JSONL (see ``betterdb_memory.transfer``).

    With no scope argument the whole store goes out: memories, fact history, L1
    sessions and consolidation state. With one (``None`` means any; ``tags``: all of
    them), only the memories and history documents in that scope: sessions and
    consolidation state span scopes and stay behind. Expired memories are skipped.
    The store's embedder is not used (the header names the model of the meta hash),
    so a store can be exported with any embedder configured.

    Args:
        vectors: include each document's vector (an import by the same model reuses it).
        where: only the memories (and history documents) matching this filter too
            (``MemoryStore.list``'s language), checked on each document as it is read:
            the export reads the whole key space in any case. Like a scope, it leaves the
            sessions and consolidation state behind.
        progress: a ``ProgressSink`` (``betterdb_memory.progress.Progress`` for a bar).

    Raises:
        ValidationError: a bad scope value.
        StoreConnectionError: the server failed (the file is then incomplete: no ``end`` row).
    """
    sink = check_progress(progress)
    scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
    want_tags = check_tags(tags)
    node = parse(where, store.metadata_fields)
    whole = scope.is_empty and not want_tags and node is None

    def selected(fields: Mapping[Any, Any]) -> bool:
        if whole:
            return True
        if not matches_scope(fields, scope, want_tags):
            return False
        return node is None or evaluate(node, {as_text(k): v for k, v in fields.items()})

    backend, keys = store.backend, store.keys
    model, dims = await _meta(store)
    header = ExportHeader(
        store=store.name,
        model_id=model,
        dimensions=dims,
        vectors=vectors,
        exported_at=int(time.time() * 1000),
    )
    out.write(_json(header.to_json()))
    info = await store.index_info()
    counts = {"memory": 0, "history": 0, "key": 0}
    expired = 0

    # -- memories -----------------------------------------------------------------------------
    sink.begin("export memories", info.num_docs if info else None)
    async for names in backend.scan(_OPERATION, keys.doc_prefix + "*"):
        ids = ids_under(names, keys.doc_prefix)

        read: list[Command] = []
        for mid in ids:
            doc = keys.doc(mid)
            read += [
                ("HGETALL", doc),
                ("PTTL", doc),
                ("GET", keys.access(mid)),
                ("LRANGE", keys.updates(mid), 0, -1),
            ]
        # The last accesses whose document snapshot still lags (tiers.reinforce): exact times.
        read.append(("HMGET", keys.access_pending, *(keys.doc(mid) for mid in ids)))
        replies = await backend.pipeline(_OPERATION, read) if ids else []
        now_ms = int(time.time() * 1000)
        for n, mid in enumerate(ids):
            fields, pttl, access, updates = replies[4 * n : 4 * n + 4]
            if not fields:
                continue  # deleted since the scan saw it
            fields = _exact_access(fields, access, replies[-1][n])
            expires = to_int(fields.get(b"expires_at", fields.get("expires_at")), 0)
            if expires and expires <= now_ms:
                expired += 1
                continue
            if not selected(fields):
                continue
            out.write(_json(document_row(
                "memory", mid, fields,
                vector=_vector(fields) if vectors else None,
                access=None if access is None else to_int(access),
                updates=updates,
                expire_at=_expire_at(pttl, now_ms),
            )))  # fmt: skip
            counts["memory"] += 1
        sink.advance(len(ids))
    sink.end()

    # -- fact history -------------------------------------------------------------------------
    hist = ConsolidationKeys(keys, Scope())
    hist_prefix = keys.history_prefix() + "{" + keys.doc_prefix  # <name>:hist:{<name>:mem:<id>}
    sink.begin("export fact history")
    async for names in backend.scan(_OPERATION, hist_prefix + "*"):
        ids = ids_under(names, hist_prefix, "}")

        read_hist: list[Command] = [
            c for mid in ids for c in (("HGETALL", hist.hist_doc(mid)), ("PTTL", hist.hist_doc(mid)))
        ]
        replies = await backend.pipeline(_OPERATION, read_hist) if ids else []
        now_ms = int(time.time() * 1000)
        for n, mid in enumerate(ids):
            fields, pttl = replies[2 * n : 2 * n + 2]
            if not fields or not selected(fields):
                continue
            out.write(_json(document_row(
                "history", mid, fields,
                vector=_vector(fields) if vectors else None,
                expire_at=_expire_at(pttl, now_ms),
            )))  # fmt: skip
            counts["history"] += 1
        sink.advance(len(ids))
    sink.end()

    # -- L1 sessions and consolidation state ------------------------------------------------------
    if whole:
        sink.begin("export sessions and state")
        base = keys.name + ":"
        for pattern in STATE_PATTERNS:
            async for names in backend.scan(_OPERATION, base + pattern):
                found = [(n, n[len(base) :]) for n in names]
                typed = [(n, rel, kind) for n, rel in found if (kind := key_kind(rel)) is not None]
                counts["key"] += await _export_state(store, out, typed)
                sink.advance(len(typed))
        sink.end()

    out.write(_json({"type": "end", "counts": counts}))
    out.flush()
    return ExportResult(counts["memory"], counts["history"], counts["key"], expired, vectors)


# How each kind of state key is read whole.
_READ: dict[KeyKind, Callable[[str], Command]] = {
    "hash": lambda name: ("HGETALL", name),
    "list": lambda name: ("LRANGE", name, 0, -1),
    "set": lambda name: ("SMEMBERS", name),
    "zset": lambda name: ("ZRANGE", name, 0, -1, "WITHSCORES"),
    "string": lambda name: ("GET", name),
}


def _vector(fields: Any) -> list[float] | None:
    raw = fields.get(VECTOR_FIELD.encode(), fields.get(VECTOR_FIELD))
    if not isinstance(raw, bytes) or not raw or len(raw) % 4:
        return None
    return [float(x) for x in decode_vector(raw)]


async def _export_state(store: MemoryStore, out: TextIO, typed: list[tuple[str, str, KeyKind]]) -> int:
    """Write the state keys of one SCAN batch; the number written (a key gone meanwhile is skipped)."""
    if not typed:
        return 0

    read: list[Command] = []
    for name, _, kind in typed:
        read += [_READ[kind](name), ("PTTL", name)]
    replies = await store.backend.pipeline(_OPERATION, read)
    now_ms = int(time.time() * 1000)
    written = 0
    for n, (_, rel, kind) in enumerate(typed):
        value, pttl = replies[2 * n], replies[2 * n + 1]
        if kind == "zset" and value:
            value = score_pairs(value)
        if value is None or (kind != "string" and not value):
            continue
        out.write(_json(key_row(rel, kind, value, expire_at=_expire_at(pttl, now_ms))))
        written += 1
    return written
