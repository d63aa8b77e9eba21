"""Concurrency: the per-scope cap and dedup hold exactly under many writers on several connections.

Capacity eviction and dedup run inside one Lua script per write, atomically on the
scope's keys, so the result must not depend on interleaving: after every round a
capped scope holds exactly ``cap`` memories (documents, bookkeeping and index
agree), and one content written concurrently in one scope is one memory.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore

from .conftest import scan_keys, unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

CAP = 10
WRITERS = 32
ROUNDS = 4


@pytest.fixture
async def stores(valkey_url: str, unique_name: str) -> AsyncIterator[list[MemoryStore]]:
    """Four stores of one name, each on its own client: writes race on the server, not in one pool."""
    clients = [avalkey.Valkey.from_url(valkey_url) for _ in range(4)]
    out = [
        MemoryStore(client=c, name=unique_name, embedder=HashingEmbedder(), max_items_per_scope=CAP)
        for c in clients
    ]
    yield out
    for s in out:
        await s.close()
    for c in clients:
        await c.aclose()


async def _scope_state(client: Any, store: MemoryStore, tag: str) -> dict[str, Any]:
    docs = {store.keys.memory_id_of(k) for k in await scan_keys(client, f"{store.name}:mem:{{{tag}}}:*")}
    created = {m.decode() for m in await client.zrange(store.keys.scope_created(tag), 0, -1)}
    keep = {m.decode() for m in await client.zrange(store.keys.scope_keep(tag), 0, -1)}
    dedup = {v.decode() for v in (await client.hgetall(store.keys.scope_dedup(tag))).values()}
    return {"docs": docs, "created": created, "keep": keep, "dedup": dedup}


async def test_cap_holds_exactly_under_32_concurrent_writers(stores: list[MemoryStore], client: Any) -> None:
    """Each round, 32 writers x 3 memories race into one scope capped at 10: it ends at exactly 10."""
    rng = random.Random(5)
    written = 0
    tag = ""
    for rnd in range(ROUNDS):

        async def writer(w: int, rnd: int = rnd) -> list[str]:
            s = stores[w % len(stores)]
            ids = []
            for j in range(3):
                ids.append(
                    await s.remember(
                        f"round {rnd} writer {w} memory {j}",
                        vector=unit(w, j + 100),
                        importance=rng.random(),
                        thread_id="capped",
                    )
                )
            return ids

        ids = [m for batch in await asyncio.gather(*(writer(w) for w in range(WRITERS))) for m in batch]
        written += len(ids)
        tag = stores[0].keys.scope_tag_of(ids[0])
        assert len(set(ids)) == WRITERS * 3  # no write was merged into another
        assert await stores[0].count(thread_id="capped") == CAP
        state = await _scope_state(client, stores[0], tag)
        assert len(state["docs"]) == CAP
        assert state["docs"] == state["created"] == state["keep"] == state["dedup"]
        alive = [m for m, item in zip(ids, await stores[1].get_many(ids), strict=True) if item is not None]
        assert set(alive) <= state["docs"]
        info = await stores[2].index_info()
        assert info is not None and info.num_docs == CAP
        hits = await stores[3].recall_by_vector(unit(0, 100), k=50, threshold=2.0, thread_id="capped")
        assert {h.item.id for h in hits} <= state["docs"] and len(hits) == CAP
    for s in stores:
        await s.close()  # flushes each store's pending counters
    evictions = int(await client.hget(stores[0].keys.stats, "evictions") or 0)
    print(f"\n[concurrency] {written} writes into a cap of {CAP}: {evictions} evictions")
    assert evictions == written - CAP


async def test_concurrent_dedup_of_one_content_yields_one_memory(
    stores: list[MemoryStore], client: Any
) -> None:
    """32 concurrent writes of one content (case / spacing variants, on 4 connections) are one memory."""
    variants = ["The user likes TEA", "the user  likes tea", "THE USER LIKES TEA ", "the user likes tea"]
    ids = await asyncio.gather(
        *(stores[i % 4].remember(variants[i % 4], thread_id="dup") for i in range(WRITERS))
    )
    assert len(set(ids)) == 1
    assert await stores[0].count(thread_id="dup") == 1
    item = await stores[0].get(ids[0])
    assert item is not None and item.access_count == WRITERS - 1  # every twin counted as one access
    # The same content in a batch, and concurrently in two other scopes: one memory per scope.
    batch = await stores[1].remember_many(["same fact", "Same  fact", {"content": "SAME FACT"}])
    assert len(set(batch)) == 1
    per_scope = await asyncio.gather(
        *(stores[i % 4].remember("shared fact", thread_id=f"s{i % 2}") for i in range(WRITERS))
    )
    assert len(set(per_scope)) == 2
    assert await stores[0].count(thread_id="s0") == await stores[0].count(thread_id="s1") == 1
