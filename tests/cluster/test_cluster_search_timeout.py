"""On the cluster a query that runs out of time fails: never a silent partial answer.

Every FT.SEARCH carries ``ALLSHARDS`` (valkey-search >= 1.1), so with the primaries'
``search.default-timeout-ms`` at 1 ms over thousands of memories a count, a list, a scope
deletion or a KNN either answers whole or raises. Without it the coordinator answered a
short total with no error (``bench/probe_search_timeout.py``). The one gap the engine
leaves (a full-text query's part on the fanning-out node) is the text side's, which
tests/integration/test_search_timeout.py and docs/operations/production.md cover.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import numpy as np
import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore
from tests.timeouts import exact_or_timeout

pytestmark = pytest.mark.integration

N = 6000
DIM = 64


@asynccontextmanager
async def primaries_timeout(client: ValkeyCluster, ms: int) -> AsyncIterator[None]:
    nodes = client.get_primaries()
    old = [(await client.config_get("search.default-timeout-ms", target_nodes=n)) for n in nodes]
    for node in nodes:
        await client.config_set("search.default-timeout-ms", ms, target_nodes=node)
    try:
        yield
    finally:
        for node, value in zip(nodes, old, strict=True):
            await client.config_set(
                "search.default-timeout-ms", value["search.default-timeout-ms"], target_nodes=node
            )


async def test_count_list_forget_and_knn_past_the_timeout_raise_or_answer_whole(
    cluster_store_factory: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = cluster_store_factory(embedder=HashingEmbedder(DIM), discovery=False)
    rng = np.random.default_rng(4)
    for start in range(0, N, 1000):
        await store.remember_many(
            [
                {
                    "content": f"note {i}",
                    "thread_id": "big",
                    "vector": rng.standard_normal(DIM).astype(np.float32).tolist(),
                }
                for i in range(start, start + 1000)
            ]
        )
    assert await store.count(thread_id="big") == N
    probe = rng.standard_normal(DIM).astype(np.float32).tolist()
    whole = [h.item.id for h in await store.recall_by_vector(probe, k=500, threshold=2.0, reinforce=False)]

    async def knn() -> list[str]:
        return [h.item.id for h in await store.recall_by_vector(probe, k=500, threshold=2.0, reinforce=False)]

    async def list_total() -> int:
        return (await store.list(thread_id="big", limit=1000)).total

    async with primaries_timeout(cluster_client, 1):
        outcomes = [
            await exact_or_timeout(lambda: store.count(thread_id="big"), N),
            await exact_or_timeout(list_total, N),
            await exact_or_timeout(knn, whole),
            await exact_or_timeout(lambda: store.forget_by_scope(thread_id="big"), N),
        ]
    assert "timeout" in outcomes, outcomes
    await store.forget_by_scope(thread_id="big")
    assert await store.count(thread_id="big") == 0
