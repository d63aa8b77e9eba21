"""Long-term memory (L2) on a 3-primary valkey-search cluster (coordinator on).

Documents spread over every shard are recalled by one query; scoped recall, count,
list, forget_by_scope, capacity (exact under concurrent writers), consolidation and
the lifecycle work through ``ValkeyCluster``; a slot migration of a memory's slot
during writes loses and duplicates nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import Fact, MemoryStore

pytestmark = pytest.mark.integration

DIM = 384


def unit(*positions: int) -> list[float]:
    v = np.zeros(DIM, dtype=np.float32)
    for p in positions:
        v[p] = 1.0
    return list(v / np.linalg.norm(v))


@pytest.fixture
def make_store(cluster_store_factory: Callable[..., MemoryStore]) -> Callable[..., MemoryStore]:
    return cluster_store_factory  # tests/cluster/conftest.py: stores on the cluster client


async def test_memories_on_every_shard_are_recalled_by_one_query(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = make_store()
    ids = await store.remember_many(
        [{"content": f"memory {i}", "thread_id": "t", "vector": unit(0, 1 + i)} for i in range(30)]
    )
    nodes = {cluster_client.get_node_from_key(store.keys.doc(m)).name for m in ids}
    assert len(nodes) == 3  # spread over the three primaries
    hits = await store.recall_by_vector(unit(0), k=30, threshold=2.0, thread_id="t", reinforce=False)
    assert {h.item.id for h in hits} == set(ids)
    assert await store.count(thread_id="t") == 30
    page = await store.list(thread_id="t", limit=10)
    assert page.total == 30 and len(page.items) == 10
    assert (await store.stats()).items == 30  # FT.INFO ... PRIMARY: the cluster's count
    assert store.layout.case_sensitive  # the schema is read from a plain FT.INFO (it has the TAG flags)


async def test_scopes_stay_exact_and_forget_by_scope_reaches_every_shard(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store()
    await store.remember_many([{"content": f"a{i}", "thread_id": "T1", "vector": unit(i)} for i in range(20)])
    await store.remember_many([{"content": f"b{i}", "thread_id": "t1", "vector": unit(i)} for i in range(5)])
    hits = await store.recall_by_vector(unit(0), k=50, threshold=2.0, thread_id="t1")
    assert {h.item.content for h in hits} == {f"b{i}" for i in range(5)}
    assert await store.forget_by_scope(thread_id="T1") == 20
    assert await store.count(thread_id="T1") == 0 and await store.count(thread_id="t1") == 5


async def test_reinforcement_and_forget_touch_one_slot_each(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = make_store()
    mid = await store.remember("reinforced", vector=unit(3))
    await store.recall_by_vector(unit(3), k=1, threshold=2.0)
    await store.recall_by_vector(unit(3), k=1, threshold=2.0)
    item = await store.get(mid)
    assert item is not None and item.access_count == 2 and item.last_accessed_at > item.created_at
    # The document's snapshot follows at the flush (the pending hash lives on its own slot).
    assert int(await cluster_client.hget(store.keys.doc(mid), "access_count")) == 0  # lagging
    assert await store._docs.reinforcement.flush() == 1
    count, last = await cluster_client.hmget(store.keys.doc(mid), "access_count", "last_accessed_at")
    assert (int(count), int(last)) == (2, item.last_accessed_at)
    assert await store.get(mid) == item
    assert await store.forget(mid) is True and await store.get(mid) is None


async def test_capacity_is_exact_under_concurrent_writers(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(max_items_per_scope=8)
    await asyncio.gather(*(store.remember(f"m{i}", thread_id="cap", vector=unit(i % DIM)) for i in range(40)))
    assert await store.count(thread_id="cap") == 8
    assert (await store.stats()).evictions == 32


async def test_consolidation_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(max_items_per_scope=3)
    await store.remember_many([{"content": f"note {i}", "thread_id": "c", "tags": ["g"]} for i in range(3)])

    async def summarize(items: list[Any]) -> str:
        return f"{len(items)} notes"

    async def extract(items: list[Any]) -> list[Fact]:
        return [Fact("city", "lives in Lisbon", "2024-01-01")]

    facts = await store.consolidate("facts", extract_facts=extract, thread_id="c")
    summary = await store.consolidate("summary", summarize, thread_id="c", tags=["g"])
    assert facts.facts == 1 and summary.consolidated == 3 and summary.deleted == 3
    contents = {i.content for i in (await store.list(thread_id="c")).items}
    assert contents == {"3 notes", "[2024-01-01] lives in Lisbon"}


async def test_a_slot_migration_during_writes_loses_and_duplicates_nothing(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster, valkey_cluster: Any
) -> None:
    """Move the slot of the next memory keys while writing: MOVED / ASK are followed by the client."""
    store = make_store()
    await store.ensure_index()
    probe_key = store.keys.doc("00000000-0000-4000-8000-000000000000")
    slot = cluster_client.keyslot(probe_key)
    source = cluster_client.get_node_from_key(probe_key)
    target = next(n for n in cluster_client.get_primaries() if n.name != source.name)
    src = valkey_cluster.node_client(source.port)
    dst = valkey_cluster.node_client(target.port)
    try:
        src_id = (await src.execute_command("CLUSTER", "MYID")).decode()
        dst_id = (await dst.execute_command("CLUSTER", "MYID")).decode()
        writer = asyncio.create_task(
            store.remember_many([{"content": f"w{i}", "thread_id": "mig"} for i in range(200)])
        )
        await dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        await src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        while keys := await src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            await src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
        for node in (src, dst):
            await node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        ids = await writer
    finally:
        await src.aclose()
        await dst.aclose()
    assert len(ids) == len(set(ids)) == 200
    assert await store.count(thread_id="mig") == 200
    assert all(await store.get_many(ids))
