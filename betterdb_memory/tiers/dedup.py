"""Dedup's lookup: which memories about to be written already exist, by content, in their exact scope.

With ``dedup=True`` a write whose normalised content (``record.dedup_hash``: its kind
and ``codec.normalise``'d text) is already stored in the same exact scope reinforces
that memory instead of writing a twin (``LongTermMemory.write_memories``). The lookup
is one KNN per memory, filtered on the hash and the scope, all in one round trip;
the hits are checked field by field, since a filter's empty scope value means "any".
"""

from __future__ import annotations

from typing import Any

from ..core.codec import as_text, encode_vector
from ..core.query import MemoryFilter, knn_search_args
from ..core.record import NewMemory
from ..core.replies import parse_search_reply
from .runtime import Runtime

__all__ = ["find_twins"]

_CHECK = ("threadId", "agentId", "namespace", "dedup")


async def find_twins(rt: Runtime, memories: list[NewMemory], vectors: list[Any]) -> dict[int, str]:
    """Items whose normalised content already exists in their exact scope: index -> that id."""
    if not rt.index.layout.dedup:
        return {}
    searches = [
        knn_search_args(
            rt.index.name, encode_vector(vectors[i]), k=10, layout=rt.index.layout, return_fields=_CHECK,
            flt=MemoryFilter(scope=m.scope, dedup=m.dedup_hash),
        )
        for i, m in enumerate(memories)
    ]  # fmt: skip
    replies = await rt.backend.pipeline("remember", [], searches=searches)
    out: dict[int, str] = {}
    for i, (m, reply) in enumerate(zip(memories, replies, strict=True)):
        scope = m.scope
        for hit in parse_search_reply(reply).hits:
            f = hit.fields
            if (
                (as_text(f.get("threadId")) or None) == scope.thread_id
                and (as_text(f.get("agentId")) or None) == scope.agent_id
                and (as_text(f.get("namespace")) or None) == scope.namespace
                and as_text(f.get("dedup")) == m.dedup_hash
            ):
                out[i] = rt.keys.memory_id_of(hit.key)
                break
    return out
