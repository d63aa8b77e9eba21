"""Helpers for testing code that uses betterdb-memory, shipped so users need not write them.

Everything here is real: the embedder makes real vectors (deterministic, no model),
the summarizer and fact extractor return what you scripted and record what they were
given, and ``temporary_store`` runs the real embedded engine on a free port with a
throw-away data directory. Nothing here is a fake client.

    from betterdb_memory.testing import temporary_store

    async def test_my_agent() -> None:
        async with temporary_store() as store:
            await store.remember("Ada lives in Lisbon", thread_id="ada")
            assert (await store.recall("Lisbon", thread_id="ada", threshold=2.0))[0].item.content
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from .core.facts import Fact
from .core.models import MemoryItem
from .core.turns import Turn
from .embedders.hashing import HashingEmbedder

__all__ = [
    "HashingEmbedder",
    "ScriptedFactExtractor",
    "ScriptedSummarizer",
    "temporary_store",
]


class ScriptedSummarizer:
    """Returns the scripted summaries in order (the last one repeats) and records its inputs.

    Works both as an L1 ``Summarizer`` (``await summarize(turns)``) and as the
    ``summarize`` seam of ``consolidate(mode="summary")`` (called with memories).
    """

    def __init__(self, *summaries: str) -> None:
        if not summaries:
            raise ValueError("ScriptedSummarizer needs at least one summary")
        self._summaries = list(summaries)
        self.calls: list[list[Any]] = []

    def _next(self, items: Sequence[Any]) -> str:
        self.calls.append(list(items))
        index = min(len(self.calls) - 1, len(self._summaries) - 1)
        return self._summaries[index]

    async def summarize(self, turns: Sequence[Turn]) -> str:
        return self._next(turns)

    async def __call__(self, items: list[MemoryItem]) -> str:
        return self._next(items)


class ScriptedFactExtractor:
    """The ``extract_facts`` seam of ``consolidate(mode="facts")``: one scripted list per call."""

    def __init__(self, *batches: Iterable[Fact]) -> None:
        self._batches = [list(b) for b in batches]
        self.calls: list[list[MemoryItem]] = []

    async def __call__(self, items: list[MemoryItem]) -> list[Fact]:
        self.calls.append(list(items))
        if not self._batches:
            return []
        return self._batches[min(len(self.calls) - 1, len(self._batches) - 1)]


@contextlib.asynccontextmanager
async def temporary_store(
    *, name: str | None = None, dimensions: int = 384, **options: Any
) -> AsyncIterator[Any]:
    """A ``MemoryStore`` on a fresh embedded server (free port, temporary data dir), torn down after.

    Needs the ``embedded`` extra. ``options`` go to ``MemoryStore`` (default embedder:
    ``HashingEmbedder(dimensions)``, so no model is loaded).
    """
    import valkey.asyncio as avalkey

    from .server import EmbeddedServer
    from .store import MemoryStore

    server = EmbeddedServer(data_dir=None)
    await asyncio.to_thread(server.start)
    client = avalkey.Valkey.from_url(server.url)
    try:
        options.setdefault("embedder", HashingEmbedder(dimensions))
        store = MemoryStore(client=client, name=name or f"test_{uuid.uuid4().hex[:10]}", **options)
        try:
            yield store
        finally:
            await store.close()
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
