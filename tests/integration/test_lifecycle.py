"""The store's lifecycle: calls after ``close()`` raise ``StoreClosedError``; close is idempotent."""

from __future__ import annotations

from typing import Any

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore, StoreClosedError


async def test_every_operation_after_close_raises(client: Any, unique_name: str) -> None:
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder())
    mid = await store.remember("before close", thread_id="t")
    await store.close()
    await store.close()  # idempotent
    calls = [
        store.remember("after", thread_id="t"),
        store.recall("after", thread_id="t"),
        store.get(mid),
        store.get_many([mid]),
        store.forget(mid),
        store.forget_by_scope(thread_id="t"),
        store.count(thread_id="t"),
        store.list(thread_id="t"),
        store.stats(),
        store.ensure_index(),
    ]
    for coro in calls:
        with pytest.raises(StoreClosedError) as err:
            await coro
        assert err.value.code == "state.closed"
    # nothing was written or deleted after close
    assert await client.exists(f"{unique_name}:mem:{mid}") == 1


async def test_a_closed_store_leaves_the_callers_client_open(client: Any, unique_name: str) -> None:
    async with MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder()) as store:
        await store.remember("x")
    assert await client.ping()
