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


def _spy_deletes(store: MemoryStore) -> list[list[tuple[str, ...]]]:
    """Each ``forget`` round trip's DEL / UNLINK commands, as the store's backend sends them.

    Counted at the backend, not in the servers' commandstats: a page's deletes are one per
    slot *of that page*, so two pages sharing a slot send two DELs for it (a bound on the whole
    scope's slots, with slack, was exceeded once in CI by such collisions).
    """
    backend, sent = store.backend, []
    pipeline = backend.pipeline

    async def spy(operation: str, commands: Any, **kwargs: Any) -> Any:
        if operation == "forget":
            sent.append([c for c in commands if isinstance(c, tuple) and c[0] in ("DEL", "UNLINK")])
        return await pipeline(operation, commands, **kwargs)

    backend.pipeline = spy  # type: ignore[method-assign]
    return sent


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

    pages = _spy_deletes(store)
    assert await store.forget_by_scope(thread_id="gone") == 600
    docs = {store.keys.doc(m) for m in ids}
    assert {k for page in pages for c in page for k in c[1:] if k in docs} == docs
    for page in pages:  # per page: one DEL per slot for its documents, one for their side keys
        slots = {key_slot(k) for c in page for k in c[1:] if k in docs}
        assert len(page) == 2 * len(slots), (len(page), len(slots))
        assert all(len({key_slot(k) for k in c[1:]}) == 1 for c in page)

    left = await _keys(cluster_client, store.name)
    assert not [k for k in left if ":acc:" in k or ":upd:" in k], left
    assert [k for k in left if ":mem:" in k and not k.endswith(":idx")] == [store.keys.doc(keep)]
    assert await store.count(thread_id="gone") == 0
