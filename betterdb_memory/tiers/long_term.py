"""Long-term memory writes: ``remember`` and ``remember_many``, with dedup and capacity.

Write path: every item is validated first (nothing is written if one is bad), then one
embedding batch, then one pipelined round trip of plain ``HSET`` s (``PEXPIRE`` after
each memory with a TTL). The stored record is built by the pure ``core.record``. With
a capacity, the same round trip counts each written cap scope, and only a scope found
over its cap pays for eviction (``capacity``). Ids are fixed client-side before the
first attempt, so a retry after a dropped connection rewrites the same documents.
"""

from __future__ import annotations

import hashlib
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core.codec import as_text, encode_vector, validate_vector
from ..core.keys import Scope
from ..core.query import MemoryFilter, knn_search_args
from ..core.record import NewMemory, encode_record
from ..core.replies import parse_search_reply
from ..core.validation import (
    check_content,
    check_importance,
    check_metadata,
    check_sensitivity,
    check_tags,
    check_ttl,
)
from ..errors import ValidationError
from ..observability.tracing import add_attributes
from .capacity import Capacity
from .recall import Recall
from .runtime import Runtime

__all__ = ["KINDS", "LongTermMemory"]

#: The kinds of memory a write may carry.
KINDS = ("memory", "summary", "fact", "extracted")


def _nothing(pipe: Any) -> None:
    """A pipeline with no keyed commands (only searches)."""


def _normalise_for_dedup(content: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", content).casefold().split())


def _dedup_hash(content: str, kind: str) -> str:
    return hashlib.blake2b(f"{kind}\x00{_normalise_for_dedup(content)}".encode(), digest_size=16).hexdigest()


class LongTermMemory:
    """``remember`` / ``remember_many`` and the validated write other parts use (``write``)."""

    def __init__(self, rt: Runtime, capacity: Capacity, recall: Recall) -> None:
        self._rt = rt
        self._capacity = capacity
        self._recall = recall

    def prepare(
        self,
        content: object,
        *,
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
    ) -> dict[str, Any]:
        """Validate one memory's arguments (the API boundary); no I/O."""
        text = check_content(content)
        scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        if source is not None:
            check_tags([source], name="source")
        kind = "memory" if kind is None else kind
        if kind not in KINDS:
            raise ValidationError(
                f"unknown kind {kind!r}", code="validation.kind", details={"argument": "kind"}
            )
        if subject is not None and not isinstance(subject, str):
            raise ValidationError(
                "subject must be a string", code="validation.type", details={"argument": "subject"}
            )
        if date is not None and not isinstance(date, str):
            raise ValidationError(
                "date must be a string", code="validation.type", details={"argument": "date"}
            )
        dims = self._rt.embedder.dimensions
        return {
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

    def _record(
        self,
        prepared: Mapping[str, Any],
        vector: np.ndarray[Any, np.dtype[np.float32]],
        now_ms: int,
        half_life: float,
    ) -> tuple[str, list[Any], int]:
        """(memory id, HSET field/value list, ttl in ms or 0) of one memory: the stored record.

        The reference's fields first, in its order, then this library's own (written
        only when they differ from the default a reader assumes).
        """
        memory = NewMemory(
            content=prepared["content"],
            scope=prepared["scope"],
            importance=prepared["importance"],
            tags=tuple(prepared["tags"]),
            source=prepared["source"],
            ttl=prepared["ttl"],
            sensitivity=prepared["sensitivity"],
            metadata=prepared["metadata"],
            kind=prepared["kind"],
            subject=prepared["subject"],
            date=prepared["date"],
            dedup_hash=prepared.get("dedup_hash") or None,
        )
        memory_id = prepared.get("id") or self._rt.keys.new_memory_id()
        fields, ttl_ms = encode_record(
            memory,
            vector,
            now_ms=now_ms,
            half_life_seconds=half_life,
            fact_source=self._rt.settings.fact_source,
        )
        return memory_id, fields, ttl_ms

    async def remember(
        self,
        content: str,
        *,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        ttl: float | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        sensitivity: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        vector: Sequence[float] | None = None,
    ) -> str:
        """Store one memory; returns its id (the existing id when deduplicated).

        Args:
            content: the text to remember.
            importance: 0..1 (default 0.5).
            tags: labels (no commas); recall/forget/consolidate ``tags=`` need all of theirs.
            source: where it came from (``summary`` and the fact source are reserved
                for consolidation output).
            ttl: seconds until it expires; ``None`` or ``0``: never.
            thread_id / agent_id / namespace: its scope.
            sensitivity: ``none|low|pii|sensitive`` (``recall(exclude_sensitivity=)``).
            metadata: a JSON-able mapping kept with it.
            vector: a precomputed embedding (skips the embedder).

        Raises:
            ValidationError: any bad argument; nothing is written.
            StoreConnectionError: the server could not be reached (after retries).
        """
        item: dict[str, Any] = {
            "content": content,
            "importance": importance,
            "tags": tags,
            "source": source,
            "ttl": ttl,
            "thread_id": thread_id,
            "agent_id": agent_id,
            "namespace": namespace,
            "sensitivity": sensitivity,
            "metadata": metadata,
            "vector": vector,
        }
        return (await self.remember_many([item]))[0]

    async def remember_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Store many memories: one embedding batch and one pipelined round trip.

        Every item is validated before anything is embedded or written, so a bad
        item fails the whole call with nothing stored. Returns ids in input order.
        """
        with self._rt.obs.span("remember") as span:
            ids, evicted, dedup_hits = await self.write(items, capped=True)
            add_attributes(span, lambda: {"gen_ai.memory.count": len(ids), "gen_ai.memory.evicted": evicted})
            if len(ids) == 1 and isinstance(items, list | tuple):
                opts = items[0] if isinstance(items[0], Mapping) else {}
                importance = opts.get("importance")
                self._rt.obs.mark_remember(
                    span,
                    importance=0.5 if importance is None else importance,
                    ttl=opts.get("ttl"),
                    key=self._rt.keys.doc(ids[0]),
                )
        self._rt.metrics.observe_remember(len(ids), dedup_hits=dedup_hits)
        self._rt.obs.count({"remembers": len(ids), "dedup_hits": dedup_hits})
        return ids

    def prepare_all(self, items: Iterable[str | Mapping[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(items, str | bytes | Mapping):
            raise ValidationError(
                "remember_many takes a list of items (str or mapping), not a single one; use remember()",
                code="validation.type",
                details={"argument": "items", "type": type(items).__name__},
            )
        allowed = {
            "content", "importance", "tags", "source", "ttl", "thread_id", "agent_id", "namespace",
            "sensitivity", "metadata", "kind", "subject", "date", "vector",
        }  # fmt: skip
        prepared: list[dict[str, Any]] = []
        for i, item in enumerate(items):
            try:
                if isinstance(item, str):
                    prepared.append(self.prepare(item))
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
                    prepared.append(self.prepare(content, **opts))
                else:
                    raise ValidationError(
                        f"item {i} must be a str or a mapping with 'content'", code="validation.type"
                    )
            except ValidationError as exc:
                exc.details.setdefault("item", i)
                raise
        return prepared

    async def write(
        self, items: Iterable[str | Mapping[str, Any]], *, capped: bool, dedup: bool | None = None
    ) -> tuple[list[str], int, int]:
        """Validate, embed, dedup, write, then hold each written scope to its cap (if ``capped``).

        ``dedup=None`` follows the store's setting (consolidation output passes False).
        """
        prepared = self.prepare_all(items)
        if not prepared:
            return [], 0, 0
        await self._rt.index.ensure_ready()
        need = [i for i, p in enumerate(prepared) if p["vector"] is None]
        vectors: list[Any] = [p["vector"] for p in prepared]
        if need:
            embedded = await self._rt.embed([prepared[i]["content"] for i in need])
            for j, i in enumerate(need):
                vectors[i] = embedded[j]
        for i, p in enumerate(prepared):
            # Given vectors were fully checked in _prepare; only their length can still be
            # wrong, when an embed_fn's dimension was learned after that check.
            if p["vector"] is not None and len(vectors[i]) != self._rt.embedder.dimensions:
                validate_vector(
                    vectors[i], dimensions=self._rt.embedder.dimensions, name=f"vector of item {i}"
                )
        now = time.time()
        now_ms = int(now * 1000)
        cfg = self._rt.config()
        ids: list[str | None] = [None] * len(prepared)
        dedup_hits = 0
        twin_of: dict[int, int] = {}  # a later item of the batch -> the first one with its content
        if self._rt.settings.dedup if dedup is None else dedup:
            first: dict[tuple[Scope, str], int] = {}
            for i, p in enumerate(prepared):
                p["dedup_hash"] = _dedup_hash(p["content"], p["kind"])
                twin_of[i] = first.setdefault((p["scope"], p["dedup_hash"]), i)
            twin_of = {i: j for i, j in twin_of.items() if i != j}
            leaders = [i for i in range(len(prepared)) if i not in twin_of]
            found = await self._find_twins([prepared[i] for i in leaders], [vectors[i] for i in leaders])
            for n, twin in found.items():
                ids[leaders[n]] = twin
            dedup_hits = len(found) + len(twin_of)
            if found:
                await self._recall.reinforce(list(found.values()), now, cfg.half_life_seconds)
        records: list[tuple[int, str, list[Any], int]] = []
        for i, p in enumerate(prepared):
            if ids[i] is None and i not in twin_of:
                mid, fields, ttl_ms = self._record(p, vectors[i], now_ms, cfg.half_life_seconds)
                ids[i] = mid
                records.append((i, mid, fields, ttl_ms))
        for i, j in twin_of.items():
            ids[i] = ids[j]
        cap = cfg.max_items_per_scope if capped else None
        cap_filters = self._capacity.cap_filters([prepared[i] for i, *_ in records]) if cap else []

        def build(pipe: Any) -> None:
            for _, mid, fields, ttl_ms in records:
                key = self._rt.keys.doc(mid)
                pipe.execute_command("HSET", key, *fields)
                if ttl_ms:
                    pipe.execute_command("PEXPIRE", key, ttl_ms)

        # Ids are fixed client-side before the first attempt, so a retry after a
        # dropped connection rewrites the same documents: safe to retry.
        results = await self._rt.index.with_index(
            "remember",
            lambda: self._rt.backend.pipeline(
                "remember",
                build,
                details={"count": len(records)},
                searches=[self._capacity.count_args(flt) for flt in cap_filters],
            ),
        )
        self._rt.metrics.add_items(len(records))
        evicted = 0
        if cap_filters and cap is not None:
            counts = results[len(results) - len(cap_filters) :]
            written = {mid for _, mid, _, _ in records}
            for flt, reply in zip(cap_filters, counts, strict=True):
                evicted += await self._capacity.hold_cap(flt, reply, cap, protect=written, now=now)
        return [str(m) for m in ids], evicted, dedup_hits

    async def _find_twins(self, prepared: list[dict[str, Any]], vectors: list[Any]) -> dict[int, str]:
        """Items whose normalised content already exists in their exact scope: index -> that id."""
        if not self._rt.index.layout.dedup:
            return {}
        check = ("threadId", "agentId", "namespace", "dedup")

        searches = [
            knn_search_args(
                self._rt.keys.index, encode_vector(vectors[i]), k=10, layout=self._rt.index.layout, return_fields=check,
                flt=MemoryFilter(scope=p["scope"], dedup=p["dedup_hash"]),
            )
            for i, p in enumerate(prepared)
        ]  # fmt: skip
        replies = await self._rt.backend.pipeline("remember", _nothing, searches=searches)
        out: dict[int, str] = {}
        for i, (p, reply) in enumerate(zip(prepared, replies, strict=True)):
            scope: Scope = p["scope"]
            for hit in parse_search_reply(reply).hits:
                f = hit.fields
                if (
                    (as_text(f.get("threadId")) or None) == scope.thread_id
                    and (as_text(f.get("agentId")) or None) == scope.agent_id
                    and (as_text(f.get("namespace")) or None) == scope.namespace
                    and as_text(f.get("dedup")) == p["dedup_hash"]
                ):
                    out[i] = self._rt.keys.memory_id_of(hit.key)
                    break
        return out
