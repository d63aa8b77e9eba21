"""One ``remember``: the everyday write, without the batch path's bookkeeping for a single memory.

An agent calls ``remember`` once per turn, and at the store's defaults (no dedup, no
cap) with no ``id`` and no ``subject`` that call is one plain ``HSET`` (an ``HSET``
and a ``PEXPIRE`` with a TTL). ``LongTermMemory.write_memories`` handles a batch: it
looks for duplicate ids, reads replaced memories, lines up twins, cap scopes and
subject puts, then branches to the one ``HSET``; for one memory that bookkeeping cost
more Python than the rest of the write (issue 29: a single write's library Python, no
I/O, was 62 µs against a budget of 35).

This path does only what one plain write needs, in the same order as the batch path,
with the same checks, the same errors, the same record (``core.record.encode_record``
and the declared metadata fields, built as ``LongTermMemory._record`` builds them),
the same commands, span attributes and metrics. A write that needs more than that
goes to ``write_memories`` unchanged: a caller's ``id`` (an upsert), a ``subject``
(supersession), dedup, or a cap in force. The cap is read from the live config after
the index is ready and the text is embedded, as the batch path reads it, so a cap set
from Monitor applies to the very next write; the embedded vector then travels with the
memory, so it is not embedded twice. Unit tests compare the HASH fields this path and
``remember_many`` write for the same input.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from ..backend.commands import Step
from ..core.codec import validate_vector
from ..core.filter_fields import index_fields
from ..core.record import NewMemory, encode_record
from ..observability.tracing import add_attributes
from .runtime import Runtime

__all__ = ["BatchWrite", "remember_one"]

#: ``LongTermMemory.write_memories`` with ``capped=True``: (ids, evicted, dedup hits).
BatchWrite = Callable[[Sequence[NewMemory]], Awaitable[tuple[list[str], int, int]]]


async def remember_one(
    rt: Runtime, memory: NewMemory, batch: BatchWrite, *, importance: float | None, ttl: float | None
) -> str:
    """Write one checked memory as ``remember`` does; returns its id (``batch``: the batch path).

    ``importance`` / ``ttl``: the arguments as the caller gave them (the span reports
    the effective importance and the TTL given, as ``LongTermMemory._remember`` does).
    One coroutine from here to the backend: each layer more costs a write about 0.3 µs.
    """
    with rt.obs.span("remember") as span:
        if memory.id is not None or memory.subject_key is not None or rt.settings.dedup:
            mid, evicted, dedup_hits = await _batch(batch, memory)
        else:
            mid, evicted, dedup_hits = "", 0, 0
            # The declared metadata fields (``meta_*``, ``present``), checked before any I/O.
            extra = index_fields(memory.metadata, rt.metadata_fields) if memory.metadata else None
            index = rt.index
            await index.ensure_ready()
            now_ms = int(time.time() * 1000)
            vector: Any = memory.vector
            embedded = vector is None
            if embedded:
                vector = (await rt.embed([memory.content]))[0]
            elif len(vector) != rt.embedder.dimensions:
                # Checked on the way in; only the length can still be wrong, when an embed_fn's
                # dimension was learned after that check (the batch path's message: item 0).
                validate_vector(vector, dimensions=rt.embedder.dimensions, name="vector of item 0")
            cfg = rt.config()
            if cfg.max_items_per_scope:
                # A cap in force: counting and eviction are the batch path's; the vector goes along.
                mid, evicted, dedup_hits = await _batch(
                    batch, replace(memory, vector=vector) if embedded else memory
                )
            else:
                mid = rt.keys.new_memory_id()
                key = rt.keys.doc_prefix + mid  # a new UUID: nothing to validate
                fields, ttl_ms = encode_record(
                    memory, vector, now_ms=now_ms, half_life_seconds=cfg.half_life_seconds,
                    fact_source=rt.settings.fact_source,
                )  # fmt: skip
                if extra:
                    for name, value in extra.items():
                        fields += [name, value]
                backend = rt.backend
                if ttl_ms:
                    writes: list[Step] = [("HSET", key, *fields), ("PEXPIRE", key, ttl_ms)]
                    await index.with_index(
                        "remember",
                        lambda: backend.pipeline("remember", writes, details={"count": 1}, searches=[]),
                    )
                elif embedded:
                    # The embedder awaited: the store may have been closed or its index moved since.
                    await index.with_index(
                        "remember", lambda: backend.command("remember", "HSET", key, *fields)
                    )
                else:
                    # Nothing awaited since ``ensure_ready``, and an HSET never raises
                    # IndexNotFoundError, the one error ``with_index`` handles.
                    await backend.command("remember", "HSET", key, *fields)
                rt.metrics.add_items(1)
        if span.is_recording():
            add_attributes(span, {"gen_ai.memory.count": 1, "gen_ai.memory.evicted": evicted})
            rt.obs.mark_remember(
                span, importance=0.5 if importance is None else importance, ttl=ttl, key=rt.keys.doc(mid)
            )
    rt.metrics.observe_remember(1, dedup_hits=dedup_hits)
    rt.obs.count({"remembers": 1, "dedup_hits": dedup_hits})
    return mid


async def _batch(batch: BatchWrite, memory: NewMemory) -> tuple[str, int, int]:
    """(id, evicted, dedup hits) of ``memory`` written by the batch path."""
    ids, evicted, dedup_hits = await batch([memory])
    return ids[0], evicted, dedup_hits
