"""``forget_by_scope`` on the cluster: multi-key deletes grouped by hash slot (issue #29).

A multi-key ``DEL`` across slots is ``CROSSSLOT`` on a cluster, so the page's deletes
go one per slot: every memory, access counter and update history still goes, on every shard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import MemoryStore
from betterdb_memory.core.slots import key_slot

pytestmark = pytest.mark.integration


@pytest.fixture
def make_store(cluster_store_factory: Callable[..., MemoryStore]) -> Callable[..., MemoryStore]:
    return cluster_store_factory  # tests/cluster/conftest.py: stores on the cluster client


async def _deletes(client: ValkeyCluster) -> int:
    per_node: dict[str, Any] = await client.info("commandstats", target_nodes=ValkeyCluster.PRIMARIES)
    return sum(
        int(stats.get(f"cmdstat_{c}", {}).get("calls", 0))
        for stats in per_node.values()
        for c in ("del", "unlink")
    )


async def _keys(client: ValkeyCluster, name: str) -> list[str]:
    out = []
    async for k in client.scan_iter(match=f"{name}:*", count=1000):
        out.append(k.decode() if isinstance(k, bytes) else k)
    return out


async def test_forget_by_scope_deletes_by_slot_on_every_shard_side_keys_included(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = make_store()
    keep = await store.remember("keep me", thread_id="other")
    ids = await store.remember_many([{"content": f"bulk note {i}", "thread_id": "gone"} for i in range(600)])
    await store.recall("bulk note 7", k=20, thread_id="gone")  # access counters
    for mid in ids[:5]:
        await store.update(mid, content="an updated note")  # update histories
    before = await _keys(cluster_client, store.name)
    assert any(":acc:" in k for k in before) and any(":upd:" in k for k in before)

    deletes = await _deletes(cluster_client)
    assert await store.forget_by_scope(thread_id="gone") == 600
    sent = await _deletes(cluster_client) - deletes
    slots = len({key_slot(store.keys.doc(m)) for m in ids})
    assert sent <= 2 * slots + 10, (sent, slots)  # a DEL per slot for documents, one for side keys

    left = await _keys(cluster_client, store.name)
    assert not [k for k in left if ":acc:" in k or ":upd:" in k], left
    assert [k for k in left if ":mem:" in k and not k.endswith(":idx")] == [store.keys.doc(keep)]
    assert await store.count(thread_id="gone") == 0
