"""Resource hygiene: no orphaned keys after any kind of deletion, no in-process growth.

After every memory of a scope is gone (forget, forget_by_scope, eviction, TTL
expiry) no key of that scope's hash tag may remain: not its documents, not its
``created`` / ``keep`` / ``expiry`` / ``access`` sorted sets and hashes, not its
``dedup`` hash. Only the scope registry (``<name>:scopes:*``) and the store-wide
hashes are allowed to outlive it. Many operations must not grow the process:
background tasks are reaped and traced memory stays flat.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore

from .conftest import scan_keys, unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]


@pytest.fixture
async def store(client: Any, unique_name: str) -> AsyncIterator[MemoryStore]:
    s = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(), discovery=False)
    yield s
    await s.close()


async def _scope_keys(client: Any, store: MemoryStore, memory_id: str) -> list[str]:
    """Every key that carries this memory's scope hash tag."""
    tag = store.keys.scope_tag_of(memory_id)
    return [k for k in await scan_keys(client, f"{store.name}:*") if f"{{{tag}}}" in k]


async def _fill(store: MemoryStore, thread: str, n: int, **extra: Any) -> list[str]:
    """``n`` memories in one scope, some reinforced, one dedup hit; returns every id written."""
    ids = await store.remember_many(
        [
            {
                "content": f"{thread} memory {i}",
                "vector": unit(i % 200, 300),
                "thread_id": thread,
                "tags": [f"g{i % 3}"],
                **extra,
            }
            for i in range(n)
        ]
    )
    # Reinforce some so the per-scope access hash has entries, and a dedup hit.
    await store.recall_by_vector(unit(0, 300), k=5, threshold=2.0, thread_id=thread)
    again = await store.remember(f"{thread} memory 0", thread_id=thread, vector=unit(0, 300), **extra)
    return ids if again in ids else [*ids, again]


async def test_forget_each_memory_leaves_no_scope_key(store: MemoryStore, client: Any) -> None:
    ids = await _fill(store, "f", 12, ttl=3600)
    other = await store.remember("a neighbour that stays", thread_id="g")
    for mid in ids:
        assert await store.forget(mid) is True
    assert await _scope_keys(client, store, ids[0]) == []
    assert await store.get(other) is not None
    assert len(await _scope_keys(client, store, other)) >= 2  # the neighbour is untouched


async def test_forget_by_scope_leaves_no_scope_key(store: MemoryStore, client: Any) -> None:
    """Several pages, a partial (tag-filtered) pass first, then the rest."""
    ids = await _fill(store, "fs", 1100, ttl=3600)
    removed = await store.forget_by_scope(thread_id="fs", tags=["g0"])
    assert removed == len([i for i in range(1100) if i % 3 == 0])
    assert await store.forget_by_scope(thread_id="fs") == 1100 - removed
    assert await _scope_keys(client, store, ids[0]) == []
    assert await store.count(thread_id="fs") == 0
    info = await store.index_info()
    assert info is not None and info.num_docs == 0
    leftovers = [k for k in await scan_keys(client, f"{store.name}:*") if "{" in k]
    assert leftovers == []


async def test_eviction_leaves_no_trace_of_the_evicted(client: Any, unique_name: str) -> None:
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(), max_items_per_scope=3, discovery=False
    )
    try:
        ids = await _fill(store, "ev", 20, ttl=3600)
        tag = store.keys.scope_tag_of(ids[0])
        alive = {m for m, item in zip(ids, await store.get_many(ids), strict=True) if item is not None}
        assert len(alive) == 3
        docs = {store.keys.memory_id_of(k) for k in await scan_keys(client, f"{unique_name}:mem:{{{tag}}}:*")}
        assert docs == alive
        created, keep, expiry, dedup, access = store.keys.scope_keys(tag)
        assert {m.decode() for m in await client.zrange(created, 0, -1)} == alive
        assert {m.decode() for m in await client.zrange(keep, 0, -1)} == alive
        assert {m.decode().split("|")[0] for m in await client.zrange(expiry, 0, -1)} == alive
        assert {v.decode() for v in (await client.hgetall(dedup)).values()} == alive
        assert {f.decode() for f in await client.hkeys(access)} <= alive
        assert await store.forget_by_scope(thread_id="ev") == 3
        assert await _scope_keys(client, store, ids[0]) == []
    finally:
        await store.close()


async def test_ttl_expired_memories_are_swept_by_the_next_write(store: MemoryStore, client: Any) -> None:
    ids = await _fill(store, "ttl", 8, ttl=1)
    await asyncio.sleep(1.5)
    assert all(item is None for item in await store.get_many(ids))
    fresh = await store.remember("after expiry", thread_id="ttl", vector=unit(5))
    assert await store.count(thread_id="ttl") == 1
    assert await store.forget(fresh) is True
    assert await _scope_keys(client, store, ids[0]) == []


async def test_ttl_expiry_alone_leaves_no_bookkeeping(store: MemoryStore, client: Any) -> None:
    """A scope whose memories all expired, and that nobody writes again, holds no key and counts 0."""
    ids = await _fill(store, "ttl-idle", 8, ttl=1)
    await asyncio.sleep(1.5)
    assert all(item is None for item in await store.get_many(ids))
    assert await store.count(thread_id="ttl-idle") == 0
    assert await _scope_keys(client, store, ids[0]) == []


@pytest.mark.slow
async def test_twenty_thousand_operations_do_not_grow_the_process(client: Any, unique_name: str) -> None:
    """20,000 operations (1 remember : 9 recalls, background reinforcement): every background
    task is reaped, the task count and pymalloc's block count stay flat, and a tracemalloc
    window over the last 5,000 operations retains almost nothing."""
    store = MemoryStore(
        client=client,
        name=unique_name,
        embedder=HashingEmbedder(),
        max_items_per_scope=20,
        reinforce_mode="background",
        discovery=False,
    )
    serial = 0

    async def batch() -> None:
        nonlocal serial
        ops = []
        for j in range(100):
            serial += 1
            vec = unit(serial % 300, 301)
            if j % 10 == 0:
                ops.append(store.remember(f"op {serial}", vector=vec, thread_id=f"s{serial % 10}"))
            else:
                ops.append(store.recall_by_vector(vec, k=3, threshold=2.0, thread_id=f"s{serial % 10}"))
        await asyncio.gather(*ops)

    async def settle() -> None:
        deadline = time.monotonic() + 10
        while store._background and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        gc.collect()

    try:
        started = time.monotonic()
        for _ in range(20):  # 2,000 warm-up operations: pools, caches, metric children, scripts
            await batch()
        await settle()
        tasks_before = len(asyncio.all_tasks())
        blocks_before = sys.getallocatedblocks()
        for _ in range(130):
            await batch()
        tracemalloc.start(1)
        try:
            await settle()
            first = tracemalloc.take_snapshot()
            for _ in range(50):
                await batch()
            await settle()
            second = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        blocks_growth = sys.getallocatedblocks() - blocks_before
        traced = sum(s.size_diff for s in second.compare_to(first, "filename"))
        top = [str(s) for s in second.compare_to(first, "lineno")[:3]]
        print(
            f"\n[hygiene] 20000 ops in {time.monotonic() - started:.1f}s; pymalloc blocks +{blocks_growth} "
            f"over 18000 ops; traced +{traced / 1024:.1f} KiB over the last 5000; top: {top}"
        )
        assert len(store._background) == 0
        assert len(asyncio.all_tasks()) <= tasks_before
        assert traced < 512 * 1024, f"{traced} bytes retained over 5,000 operations"
        assert blocks_growth < 9_000, f"{blocks_growth} more allocated blocks after 18,000 operations"
        assert await store.count() <= 10 * 20
    finally:
        await store.close()
