"""Concurrency: the per-scope cap holds exactly under many writers on several connections.

A cap counts what the reference counts: a write's scope fields and tags as a filter
(fields it leaves None match any value). Writes are plain ``HSET`` s with the scope's
count in the same round trip; a writer that finds its scope over the cap evicts the
lowest keep-scores under a token lock and re-counts first, so concurrent writers
over by one evict one memory between them, never one each (the reference over-evicts
there). After every round a capped scope therefore holds exactly ``cap`` memories,
and documents, index and counts agree.

Dedup is off by default (as in the reference) and is an index lookup before the
write, not a lock: writes one after another never twin; concurrent identical writes
may (measured and printed here).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable
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
async def make_stores(valkey_url: str, unique_name: str) -> AsyncIterator[Callable[..., list[MemoryStore]]]:
    """Four stores of one name, each on its own client: writes race on the server, not in one pool."""
    clients: list[avalkey.Valkey] = []
    made: list[MemoryStore] = []

    def make(**options: Any) -> list[MemoryStore]:
        for _ in range(4):
            c = avalkey.Valkey.from_url(valkey_url)
            clients.append(c)
            made.append(MemoryStore(client=c, name=unique_name, embedder=HashingEmbedder(), **options))
        return made[-4:]

    yield make
    for s in made:
        await s.close()
    for c in clients:
        await c.aclose()


async def _docs(client: Any, store: MemoryStore) -> set[str]:
    return {store.keys.memory_id_of(k) for k in await scan_keys(client, f"{store.name}:mem:*")}


async def test_cap_holds_exactly_under_32_concurrent_writers(
    make_stores: Callable[..., list[MemoryStore]], client: Any
) -> None:
    """Each round, 32 writers x 3 memories race into one scope capped at 10: it ends at exactly
    10 (no writer over-evicts), and documents, index, recall and counters agree."""
    stores = make_stores(max_items_per_scope=CAP)
    rng = random.Random(5)
    written = 0
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
        assert len(set(ids)) == WRITERS * 3  # no write was merged into another
        assert await stores[0].count(thread_id="capped") == CAP
        docs = await _docs(client, stores[0])
        assert len(docs) == CAP
        alive = [m for m, item in zip(ids, await stores[1].get_many(ids), strict=True) if item is not None]
        assert set(alive) <= docs
        info = await stores[2].index_info()
        assert info is not None and info.num_docs == CAP
        hits = await stores[3].recall_by_vector(unit(0, 100), k=50, threshold=2.0, thread_id="capped")
        assert {h.item.id for h in hits} == docs
        counters = {
            stores[0].keys.memory_id_of(k.split("{", 1)[1][:-1])
            for k in await scan_keys(client, f"{stores[0].name}:acc:*")
        }
        assert counters <= docs  # an evicted memory's counter went with it
        assert await scan_keys(client, f"{stores[0].name}:caplock:*") == []
    for s in stores:
        await s.close()  # flushes each store's pending counters
    evictions = int(await client.hget(stores[0].keys.stats, "evictions") or 0)
    print(f"\n[concurrency] {written} writes into a cap of {CAP}: {evictions} evictions")
    assert evictions == written - CAP


async def test_cap_counts_the_write_as_a_filter_under_concurrent_writers(
    make_stores: Callable[..., list[MemoryStore]], client: Any
) -> None:
    """The reference's filter meaning, concurrently: writes into (thread, agent) hold each pair
    at the cap; then writes into the thread alone count the whole thread (every agent) and
    hold it at the cap, evicting the lowest keep-scores of any agent, none too many.
    Unscoped writes are never capped."""
    stores = make_stores(max_items_per_scope=CAP)
    agents = [f"a{i}" for i in range(4)]

    async def scoped(w: int) -> list[str]:
        s = stores[w % 4]
        return [
            await s.remember(
                f"agent write {w} {j}", vector=unit(w, j + 100), thread_id="c", agent_id=agents[w % 4]
            )
            for j in range(3)
        ]

    await asyncio.gather(*(scoped(w) for w in range(WRITERS)))
    for agent in agents:  # 24 written per pair, each pair held at exactly the cap
        assert await stores[0].count(thread_id="c", agent_id=agent) == CAP
    assert await stores[0].count(thread_id="c") == 4 * CAP
    # Eight concurrent writes to the thread alone: each counts all 41..48 of the thread.
    thread_only = await asyncio.gather(
        *(stores[i % 4].remember(f"thread write {i}", vector=unit(i, 200), thread_id="c") for i in range(8))
    )
    assert await stores[0].count(thread_id="c") == CAP
    assert all(item is not None for item in await stores[1].get_many(thread_only))  # newest: highest keep
    assert sum([await stores[0].count(thread_id="c", agent_id=a) for a in agents]) == CAP - 8
    assert len(await _docs(client, stores[0])) == CAP
    # A write with no scope and no tags is never capped.
    free = await asyncio.gather(
        *(stores[i % 4].remember(f"unscoped {i}", vector=unit(i, 250)) for i in range(2 * CAP))
    )
    assert all(item is not None for item in await stores[2].get_many(free))
    assert await stores[0].count() == CAP + 2 * CAP


async def test_a_batch_larger_than_the_cap_is_held_to_the_cap(
    make_stores: Callable[..., list[MemoryStore]],
) -> None:
    store = make_stores(max_items_per_scope=3)[0]
    await store.remember_many(
        [
            {"content": f"batch {i}", "vector": unit(i), "thread_id": "b", "importance": i / 10}
            for i in range(5)
        ]
    )
    assert await store.count(thread_id="b") == 3


async def test_without_dedup_concurrent_identical_writes_are_all_stored(
    make_stores: Callable[..., list[MemoryStore]],
) -> None:
    """dedup is off by default, as in the reference: 32 identical concurrent writes are 32 memories."""
    stores = make_stores()
    ids = await asyncio.gather(
        *(stores[i % 4].remember("the user likes tea", thread_id="dup") for i in range(WRITERS))
    )
    assert len(set(ids)) == WRITERS
    assert await stores[0].count(thread_id="dup") == WRITERS


async def test_dedup_of_one_content(make_stores: Callable[..., list[MemoryStore]]) -> None:
    """dedup=True: writes one after another (case / spacing variants, four connections) are one
    memory, each twin counted as one access; concurrent ones may twin but lose nothing."""
    stores = make_stores(dedup=True)
    variants = ["The user likes TEA", "the user  likes tea", "THE USER LIKES TEA ", "the user likes tea"]
    ids = [await stores[i % 4].remember(variants[i % 4], thread_id="dup") for i in range(8)]
    assert len(set(ids)) == 1
    item = await stores[0].get(ids[0])
    assert item is not None and item.access_count == 7
    # The same content in another exact scope is another memory.
    other = await stores[1].remember("the user likes tea", thread_id="dup", agent_id="x")
    assert other != ids[0]
    # Concurrently: no write is lost, and every twin is the same content in the same scope.
    racing = await asyncio.gather(
        *(stores[i % 4].remember("shared fact", thread_id=f"s{i % 2}") for i in range(WRITERS))
    )
    assert all(item is not None for item in await stores[0].get_many(racing))
    per_scope = [await stores[0].count(thread_id=f"s{i}") for i in range(2)]
    distinct = len(set(racing))
    assert sum(per_scope) == distinct and all(n >= 1 for n in per_scope)
    print(f"\n[concurrency] 32 concurrent identical writes in 2 scopes with dedup: {distinct} memories")
    # Once the race is over, a further write finds a twin again.
    assert await stores[2].remember("Shared  fact", thread_id="s0") in set(racing)


async def test_dedup_within_one_batch(make_stores: Callable[..., list[MemoryStore]]) -> None:
    store = make_stores(dedup=True)[0]
    batch = await store.remember_many(["same fact", "Same  fact", {"content": "SAME FACT"}])
    assert len(set(batch)) == 1
