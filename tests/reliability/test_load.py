"""Load: 1,000 concurrent mixed operations through ``connect()``'s bounded pool, with no failure.

The default pool is a ``BlockingConnectionPool`` of 64: callers beyond 64 wait for
a connection instead of opening more, so the server never sees more than 64 of
this store's connections. A separate client samples ``INFO clients`` meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore

from .conftest import unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

THREADS = [f"load-{i}" for i in range(5)]


async def _connected(client: Any) -> int:
    return int((await client.info("clients"))["connected_clients"])


async def test_1000_concurrent_mixed_operations_with_a_bounded_pool(
    valkey_url: str, unique_name: str, text_client: Any
) -> None:
    """remember / recall_by_vector / get / list / count x 200 each, all at once: 0 failures,
    connected_clients never above the pool size (64) plus the clients open before."""
    store = await MemoryStore.connect(url=valkey_url, name=unique_name, embedder=HashingEmbedder())
    try:
        assert store.client.connection_pool.max_connections == 64
        seeded = await store.remember_many(
            [
                {"content": f"seed memory {i}", "vector": unit(i), "thread_id": THREADS[i % 5]}
                for i in range(50)
            ]
        )
        baseline = await _connected(text_client)
        peak = baseline
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                peak = max(peak, await _connected(text_client))
                await asyncio.sleep(0.005)

        sampler = asyncio.create_task(sample())

        def op(i: int) -> Awaitable[Any]:
            thread = THREADS[i % 5]
            kind = i % 5
            if kind == 0:
                return store.remember(f"load write {i} about topic {i % 17}", thread_id=thread)
            if kind == 1:
                return store.recall_by_vector(unit(i % 50), k=5, threshold=2.0, thread_id=thread)
            if kind == 2:
                return store.get(seeded[i % 50])
            if kind == 3:
                return store.list(thread_id=thread, limit=10)
            return store.count(thread_id=thread)

        started = time.monotonic()
        results = await asyncio.gather(*(op(i) for i in range(1000)), return_exceptions=True)
        elapsed = time.monotonic() - started
        sampling = False
        await sampler
        peak = max(peak, await _connected(text_client))
        failures = [r for r in results if isinstance(r, BaseException)]
        print(
            f"\n[load] 1000 ops in {elapsed:.2f}s, failures={len(failures)}, "
            f"connected_clients baseline={baseline} peak={peak}"
        )
        assert failures == [], failures[:3]
        written = [r for i, r in enumerate(results) if i % 5 == 0]
        assert all(item is not None for item in await store.get_many(written))  # type: ignore[arg-type]
        assert await store.count() == 50 + 200
        assert all(results[i] is not None for i in range(2, 1000, 5))  # every get found its memory
        assert peak <= baseline + 64 + 2, f"{peak - baseline} connections for a pool of 64"
    finally:
        await store.close()
