"""Exact answers from queries that run past RediSearch's timeout (``Capabilities.partial_on_timeout``).

RediSearch's default policy answers a query that runs past its ``TIMEOUT`` (500 ms by
default) with what it found so far, under RESP2 and RESP3 alike with nothing to tell
it apart. At half a million memories on a busy 2-core server ``count()`` answered
72,499 (``bench/bench_1m.py``). Every query that must be whole now carries
``TIMEOUT 0``; here the module's timeout is set to 1 ms, so any query over the 21,000
documents below that did not would come back partial. valkey-search answers a timeout
with an error instead (dialect point 14): the case does not arise there.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.backend.dialect import keyless_route
from betterdb_memory.core.query import VECTOR_FIELD

pytestmark = pytest.mark.integration

N = 21_000
DIM = 4  # small vectors: the HNSW graph is not what is tested, and 384-d takes minutes to build


@pytest.fixture
async def big_store(make_store: Any, client: Any, expected_engine: str) -> AsyncIterator[MemoryStore]:
    if expected_engine != "redisearch":
        pytest.skip("valkey-search answers a timed-out query with an error, never a partial result")
    store: MemoryStore = make_store(embedder=HashingEmbedder(dimensions=DIM))
    await store.ensure_index()
    # Documents as the reference library writes them (its fields, one HSET each): fast to make.
    prefix = store.spec.prefix
    now = str(int(time.time() * 1000))
    rng = np.random.default_rng(7)  # distinct vectors: identical ones make HNSW deletions crawl
    for start in range(0, N, 1000):
        pipe = client.pipeline(transaction=False)
        vectors = rng.standard_normal((1000, DIM)).astype(np.float32)
        for i in range(start, start + 1000):
            pipe.execute_command(
                "HSET", f"{prefix}m{i}", "content", f"note {i}", VECTOR_FIELD, vectors[i - start].tobytes(),
                "threadId", f"t{i % 3}", "agentId", "a", "importance", "0.5", "created_at", now,
                "last_accessed_at", now, "access_count", "0", "metadata", "{}",
            )  # fmt: skip
        await pipe.execute()
    old = await client.execute_command("FT.CONFIG", "GET", "TIMEOUT", **keyless_route(client))
    await client.execute_command("FT.CONFIG", "SET", "TIMEOUT", "1", **keyless_route(client))
    try:
        yield store
    finally:
        value = old[0][1] if old and isinstance(old[0], list) else b"500"
        await client.execute_command("FT.CONFIG", "SET", "TIMEOUT", value, **keyless_route(client))
        for start in range(0, N, 100):  # each deletion also leaves the HNSW graph: small batches
            await client.delete(*(f"{prefix}m{i}" for i in range(start, start + 100)))


async def test_count_and_scans_are_whole_past_the_module_timeout(big_store: MemoryStore) -> None:
    assert await big_store.count() == N
    assert await big_store.count(thread_id="t1") == N // 3
    page = await big_store.list(thread_id="t2", limit=5)
    assert len(page.items) == 5 and page.total == N // 3
    assert await big_store.forget_by_scope(thread_id="t0") == N // 3
    assert await big_store.count() == N - N // 3
