"""Import a JSONL export into a store: the same documents, ids, times, counts, TTLs and state.

Each row is written as it was exported, under the importing store's name: a document
is replaced (``DEL`` then ``HSET`` of its exported fields and vector), its access
counter and update history set, its remaining TTL re-applied; a state key is replaced the same way. So an
import is idempotent (run it twice, get the same store) and restores into the store it
came from as well as into a new name. Writes are plain commands in non-transactional
pipelines (no script, no MULTI: see README, Production notes, valkey-search #1260).

Vectors: reused when the file carries them and its header names this store's model and
dimension; otherwise the content is embedded again with the store's embedder, in
batches. Capacity caps, dedup and reinforcement do not apply: this is a restore.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..backend.commands import Command, Step
from ..backend.scripts import mark_history
from ..core.codec import as_text, encode_vector, to_int, validate_vector
from ..core.filter_fields import DECLARED_PREFIX, PRESENCE_FIELD, index_fields
from ..core.keys import ConsolidationKeys, Scope
from ..core.query import VECTOR_FIELD
from ..embedders.base import Embedder
from ..embedders.lazy import LazyFunctionEmbedder
from ..errors import ValidationError
from ..progress import ProgressSink, check_progress
from ._format import (
    DocumentRow,
    EndRow,
    ExportHeader,
    KeyRow,
    legacy_fields,
    parse_row,
)
from ._scan import embed_encoded

if TYPE_CHECKING:
    from ..store import MemoryStore

__all__ = ["ImportResult", "import_store"]

_OPERATION = "import"


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import wrote; ``embedded`` documents got a new vector, ``expired`` rows were skipped."""

    memories: int
    history: int
    keys: int
    embedded: int
    expired: int
    version: int


def _bad(message: str, line: int | None = None, **details: Any) -> ValidationError:
    where = f"line {line}: " if line is not None else ""
    return ValidationError(where + message, code="validation.import", details={"line": line, **details})


class _Writer:
    """Buffers parsed rows and writes them in batches (one embedding call, one pipeline each)."""

    def __init__(
        self, store: MemoryStore, embedder: Embedder, header: ExportHeader, batch: int, sink: ProgressSink
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.reuse = (
            header.model_id == self.embedder.model_id and header.dimensions == self.embedder.dimensions
        )
        self.batch = batch
        self.sink = sink
        self.hist = ConsolidationKeys(store.keys, Scope())
        self.docs: list[DocumentRow] = []
        self.state: list[KeyRow] = []
        self.counts = {"memory": 0, "history": 0, "key": 0}
        self.seen = dict(self.counts)
        self.embedded = 0
        self.expired = 0

    async def add(self, row: DocumentRow | KeyRow) -> None:
        if isinstance(row, DocumentRow):
            self.docs.append(row)
            self.seen[row.kind] += 1
        else:
            self.state.append(row)
            self.seen["key"] += 1
        if len(self.docs) + len(self.state) >= self.batch:
            await self.flush()

    async def flush(self) -> None:
        now_ms = int(time.time() * 1000)
        docs, state = self._live(self.docs, now_ms), self._live(self.state, now_ms)
        skipped = len(self.docs) + len(self.state) - len(docs) - len(state)
        self.expired += skipped
        self.docs, self.state = [], []
        vectors = await self._vectors(docs)
        keys = self.store.keys

        # Past versions among them: the meta's mark first, as every move to history sends it.
        past = [r for r in docs if r.kind != "memory"]
        write: list[Step] = [mark_history(keys.meta, _latest_until(past))] if past else []
        for row, vector in zip(docs, vectors, strict=True):
            key = keys.doc(row.id) if row.kind == "memory" else self.hist.hist_doc(row.id)
            ttl = _remaining(row.expire_at, now_ms)
            fields = self._indexed(row) if row.kind == "memory" else row.fields
            write += [("DEL", key), ("HSET", key, *_pairs({**fields, VECTOR_FIELD: vector}))]
            if ttl:
                write.append(("PEXPIRE", key, ttl))
            if row.kind == "memory":
                counter, updates = keys.access(row.id), keys.updates(row.id)
                if row.access is None:
                    write.append(("DEL", counter))
                else:
                    write.append(("SET", counter, row.access, *(("PX", ttl) if ttl else ())))
                write.append(("DEL", updates))
                if row.updates:
                    write.append(("RPUSH", updates, *row.updates))  # exported newest first, kept so
                    if ttl:
                        write.append(("PEXPIRE", updates, ttl))
        for st in state:
            write += _write_key(f"{keys.name}:{st.key}", st, _remaining(st.expire_at, now_ms))

        if docs or state:
            await self.store.backend.pipeline(_OPERATION, write)
        # Subjects: pointers and version lists rebuilt from the versions (tiers.subjects).
        await self.store._long_term.subjects.adopt(
            [(row.id, row.fields, row.kind == "history") for row in docs], operation=_OPERATION
        )
        for row in docs:
            self.counts[row.kind] += 1
        self.counts["key"] += len(state)
        self.sink.advance(len(docs) + len(state) + skipped)

    def _indexed(self, row: DocumentRow) -> dict[str, str | bytes]:
        """A memory's fields with its declared metadata fields as the importing store declares them.

        The exported ``meta_*`` / ``present`` (the exporting store's declaration) are dropped
        and rebuilt from ``metadata``; a value that does not fit is left out (counts as
        missing to ``where=``), not refused: an old export may hold any metadata.
        """
        out = {
            k: v for k, v in row.fields.items() if not k.startswith(DECLARED_PREFIX) and k != PRESENCE_FIELD
        }
        try:
            metadata = json.loads(as_text(row.fields.get("metadata")) or "null")
        except ValueError:
            metadata = None
        if isinstance(metadata, dict):
            out.update(index_fields(metadata, self.store.metadata_fields, strict=False))
        return out

    @staticmethod
    def _live(rows: Sequence[Any], now_ms: int) -> list[Any]:
        """Rows whose TTL (and, for a memory, ``expires_at`` field) has not passed."""
        out = []
        for row in rows:
            if row.expire_at is not None and row.expire_at <= now_ms:
                continue
            if isinstance(row, DocumentRow) and row.kind == "memory":
                expires = to_int(row.fields.get("expires_at"), 0)
                if expires and expires <= now_ms:
                    continue
            out.append(row)
        return out

    async def _vectors(self, docs: Sequence[DocumentRow]) -> list[bytes]:
        """Each document's vector: the exported one when reusable, else embedded now (one call)."""
        dims = self.embedder.dimensions
        out: list[bytes | None] = []
        todo: list[int] = []
        for n, row in enumerate(docs):
            if self.reuse and row.vector is not None and len(row.vector) == dims:
                out.append(encode_vector(validate_vector(row.vector, dimensions=dims)))
            else:
                out.append(None)
                todo.append(n)
        if todo:
            texts = [_text(docs[n].fields["content"]) for n in todo]
            for n, vec in zip(todo, await embed_encoded(self.embedder, texts), strict=True):
                out[n] = vec
            self.embedded += len(todo)
        return [v for v in out if v is not None]


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", errors="replace")


def _remaining(expire_at: int | None, now_ms: int) -> int:
    return max(1, expire_at - now_ms) if expire_at is not None else 0


def _pairs(mapping: Mapping[Any, Any]) -> list[Any]:
    """``k1, v1, k2, v2, ...`` in the mapping's order (as ``HSET`` takes them)."""
    return [x for pair in mapping.items() for x in pair]


def _latest_until(rows: Sequence[DocumentRow]) -> int | None:
    """The latest ``valid_until`` of past versions' rows (``HISTORY_MARK``'s bound); None if one has none."""
    ends = [to_int(r.fields.get("valid_until"), _NO_END) for r in rows]
    return None if _NO_END in ends else max(ends)


_NO_END = -(2**63)  # a row whose valid_until is missing or unreadable: the bound is unknown


def _write_key(key: str, row: KeyRow, ttl_ms: int) -> list[Command]:
    """The commands that write one state key as exported (delete, write, expiry)."""
    out: list[Command] = [("DEL", key)]
    value = row.value
    if row.kind == "hash" and value:
        out.append(("HSET", key, *_pairs(value)))
    elif row.kind == "list" and value:
        out.append(("RPUSH", key, *value))
    elif row.kind == "set" and value:
        out.append(("SADD", key, *value))
    elif row.kind == "zset" and value:
        out.append(("ZADD", key, *(x for member, score in value.items() for x in (score, member))))
    elif row.kind == "string":
        out.append(("SET", key, value))
    else:
        return out
    if ttl_ms:
        out.append(("PEXPIRE", key, ttl_ms))
    return out


async def import_store(
    store: MemoryStore,
    lines: Iterable[str],
    *,
    batch: int = 256,
    total: int | None = None,
    progress: ProgressSink | None = None,
) -> ImportResult:
    """Import an export (``export_store``'s JSONL, any version up to this library's) into ``store``.

    Creates the store's index first (with the store's embedder, which must be the one
    the store was built with). Rows whose TTL passed since the export are skipped.

    Args:
        lines: the file's lines (an open text file works).
        batch: rows per pipeline (and per embedding call).
        total: rows expected, for the progress display (None: unknown).
        progress: a ``ProgressSink``.

    Raises:
        ValidationError: not an export, a newer format version, a malformed row (rows
            before it are written: fix the file and import again, it is idempotent), or
            a file without its ``end`` row (truncated; everything it held was written).
        ConfigurationError: the store's meta names another model (re-embed or use another name).
    """
    sink = check_progress(progress)
    await store.index.ensure_ready()
    embedder = store.embedder
    if isinstance(embedder, LazyFunctionEmbedder):  # an embed_fn: resolved by ensure_ready
        embedder = await embedder.resolve()
    writer: _Writer | None = None
    header: ExportHeader | None = None
    end: EndRow | None = None
    sink.begin("import", total)
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad("not JSON", line_no) from exc
        if end is not None:
            raise _bad("rows after the end row", line_no)
        if writer is None:
            if isinstance(row, dict) and "format" in row:
                header = ExportHeader.from_json(row, line_no)
                writer = _Writer(store, embedder, header, batch, sink)
                sink.advance()
                continue
            # Version 0 (no header): MemoryItem rows with their model_id and optional vector.
            vector = row.get("vector") if isinstance(row, dict) else None
            header = ExportHeader(
                store="",
                model_id=str(row.get("model_id") or "") if isinstance(row, dict) else "",
                dimensions=len(vector) if isinstance(vector, list) else 0,
                vectors=isinstance(vector, list),
                exported_at=0,
                version=0,
            )
            writer = _Writer(store, embedder, header, batch, sink)
        assert header is not None
        if header.version == 0:
            if not isinstance(row, dict):
                raise _bad("not a JSON object", line_no)
            await writer.add(legacy_fields(row, half_life_seconds=store.half_life_seconds, line=line_no))
            continue
        parsed = parse_row(row, line_no)
        if isinstance(parsed, EndRow):
            end = parsed
            await writer.flush()
            sink.advance()
            continue
        await writer.add(parsed)
    if writer is None:
        sink.end()
        raise _bad("empty file: not an export")
    await writer.flush()
    sink.end()
    assert header is not None
    if header.version >= 1 and end is None:
        raise _bad(
            "the export has no end row: it was cut short (everything it held was imported)",
            written=dict(writer.counts),
        )
    if end is not None and any(writer.seen[k] != end.counts.get(k, 0) for k in writer.seen):
        raise _bad(
            "the rows do not add up to the end row's counts: the file was edited or spliced",
            rows=dict(writer.seen),
            expected=end.counts,
        )
    return ImportResult(
        memories=writer.counts["memory"],
        history=writer.counts["history"],
        keys=writer.counts["key"],
        embedded=writer.embedded,
        expired=writer.expired,
        version=header.version,
    )
