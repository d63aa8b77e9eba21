"""Export / import and re-embedding on a 3-primary valkey-search cluster: SCAN on every primary, one-slot scripts."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.transfer import export_store, import_store, reembed
from tests.integration.test_transfer import dump, populate, ranking, same_ranking, same_store

pytestmark = pytest.mark.integration


@pytest.fixture
async def make_store(
    cluster_client: ValkeyCluster, unique_name: str
) -> AsyncIterator[Callable[..., MemoryStore]]:
    made: list[MemoryStore] = []

    def factory(**options: Any) -> MemoryStore:
        options.setdefault("client", cluster_client)
        options.setdefault("name", unique_name)
        options.setdefault("embedder", HashingEmbedder(64))
        store = MemoryStore(**options)
        made.append(store)
        return store

    try:
        yield factory
    finally:
        for store in made:
            await store.close()


async def test_round_trip_and_reembed_on_a_cluster(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster, unique_name: str
) -> None:
    """Keys on every shard are exported and imported exactly; a re-embedding moves them all.

    (Write-through reinforcement: the key-by-key comparison needs the source's documents to
    hold their exact access snapshot, see tests/integration/test_transfer.py.)"""
    source = make_store(reinforce_write_interval=0)
    ids = await populate(source)
    buf = io.StringIO()
    exported = await export_store(source, buf, vectors=True)
    assert (exported.memories, exported.history) == (5, 1)
    target = make_store(name=unique_name + "_b")
    await import_store(target, buf.getvalue().splitlines())
    same_store(await dump(cluster_client, unique_name), await dump(cluster_client, unique_name + "_b"))  # type: ignore[arg-type]
    same_ranking(await ranking(target), await ranking(source))

    res = await reembed(target, HashingEmbedder(32), batch=2)
    assert res.embedded == 6 and res.fixed == 0 and res.history == 1
    moved = make_store(name=unique_name + "_b", embedder=HashingEmbedder(32))
    # Each shard re-indexes its documents in the background after the switch (README: recall
    # is partial until the backfill ends); wait for it, bounded.
    deadline = time.monotonic() + 60
    while await moved.count() < 5 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert await moved.count() == 5
    hits = await moved.recall("green tea in the morning", namespace="acme", reinforce=False)
    assert hits[0].item.id == ids["rich"]
    assert [k async for k in cluster_client.scan_iter(match=f"{unique_name}_b:__mem_reembed*")] == []
