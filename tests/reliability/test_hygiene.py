"""Resource hygiene: no orphaned keys after any kind of deletion, no in-process growth.

A memory is two keys at most: its document ``<name>:mem:<id>`` and, once recalled,
its exact access counter ``<name>:acc:{<name>:mem:<id>}``. After a memory is gone
(forget, forget_by_scope, eviction, erase, TTL expiry) neither may remain, nor any
capacity lock (``<name>:caplock:*``), nor the consolidation state and fact history
of a wiped scope (``<name>:cons:*``, ``<name>:hist:*``), nor the L1 keys of an erased
or expired session (``<name>:l1:*``). Only the store-wide hashes may outlive them.
The index is the only record of which memories a scope holds (no registry, no
per-scope sets), so there is no bookkeeping to drift. Many operations must not
grow the process: background tasks are reaped and traced memory stays flat.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from betterdb_memory import Fact, HashingEmbedder, MemoryStore

from .conftest import scan_keys, unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

# Store-wide hashes: the index metadata, the Monitor stats, the live config, and the
# reinforcement's pending accesses (emptied by its next flush, within the write interval).
STORE_WIDE = (
    "__mem_meta", "__mem_stats", "__mem_config", "__mem_pending_access", "__mem_pending_access:flush",
)  # fmt: skip


@pytest.fixture
async def store(client: Any, unique_name: str) -> AsyncIterator[MemoryStore]:
    s = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(), discovery=False, dedup=True)
    yield s
    await s.close()


async def _leftovers(client: Any, store: MemoryStore) -> list[str]:
    """Every key of the store but the store-wide hashes."""
    wide = {f"{store.name}:{suffix}" for suffix in STORE_WIDE}
    return [k for k in await scan_keys(client, f"{store.name}:*") if k not in wide]


async def _memory_keys(client: Any, store: MemoryStore, ids: Sequence[str]) -> list[str]:
    """Which of these memories' documents and access counters exist."""
    keys = [k for mid in ids for k in (store.keys.doc(mid), store.keys.access(mid))]
    found = [await client.exists(k) for k in keys]
    return [k for k, n in zip(keys, found, strict=True) if n]


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
    # Reinforce some so they get access counters, and a dedup hit (the store dedups).
    hits = await store.recall_by_vector(unit(0, 300), k=5, threshold=2.0, thread_id=thread)
    assert hits
    again = await store.remember(f"{thread} memory 0", thread_id=thread, vector=unit(0, 300), **extra)
    assert again == ids[0]
    return ids


async def test_forget_each_memory_leaves_no_key(store: MemoryStore, client: Any) -> None:
    ids = await _fill(store, "f", 12, ttl=3600)
    other = await store.remember("a neighbour that stays", thread_id="g", vector=unit(250, 300))
    await store.recall_by_vector(unit(250, 300), k=1, threshold=0.01, thread_id="g")
    counters = [k for k in await _memory_keys(client, store, ids) if ":acc:" in k]
    assert len(counters) >= 5  # the recall and the dedup hit made counters
    for mid in ids:
        assert await store.forget(mid) is True
    assert await _memory_keys(client, store, ids) == []
    assert await store.get(other) is not None
    assert sorted(await _leftovers(client, store)) == sorted(
        [store.keys.doc(other), store.keys.access(other)]
    )  # the neighbour is untouched


async def test_forget_by_scope_leaves_no_key(store: MemoryStore, client: Any) -> None:
    """Several pages, a partial (tag-filtered) pass first, then the rest."""
    ids = await _fill(store, "fs", 1100, ttl=3600)
    removed = await store.forget_by_scope(thread_id="fs", tags=["g0"])
    assert removed == len([i for i in range(1100) if i % 3 == 0])
    assert await store.forget_by_scope(thread_id="fs") == 1100 - removed
    assert await store.count(thread_id="fs") == 0
    info = await store.index_info()
    assert info is not None and info.num_docs == 0
    assert await _memory_keys(client, store, ids) == []
    assert await _leftovers(client, store) == []


async def test_eviction_leaves_no_trace_of_the_evicted(client: Any, unique_name: str) -> None:
    """20 writes one at a time into a scope capped at 3, with recalls between them: the 17
    evicted leave neither document nor counter, and no capacity lock stays behind."""
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(), max_items_per_scope=3, discovery=False
    )
    try:
        ids = []
        for i in range(20):
            ids.append(await store.remember(f"ev memory {i}", vector=unit(i, 300), thread_id="ev"))
            if i % 3 == 0:  # counters for memories that are evicted later
                await store.recall_by_vector(unit(i, 300), k=3, threshold=2.0, thread_id="ev")
        alive = {m for m, item in zip(ids, await store.get_many(ids), strict=True) if item is not None}
        assert len(alive) == 3
        docs = {store.keys.memory_id_of(k) for k in await scan_keys(client, f"{unique_name}:mem:*")}
        assert docs == alive
        assert set(await _leftovers(client, store)) <= {
            k for mid in alive for k in (store.keys.doc(mid), store.keys.access(mid))
        }
        assert await scan_keys(client, f"{unique_name}:caplock:*") == []
        assert (await store.stats()).evictions == 17
        assert await store.forget_by_scope(thread_id="ev") == 3
        assert await _leftovers(client, store) == []
    finally:
        await store.close()


async def test_ttl_expiry_alone_leaves_no_key(store: MemoryStore, client: Any) -> None:
    """Memories that expire (some recalled, one deduplicated) leave nothing: the server
    expires the document, and a recall gives the access counter the document's own
    remaining TTL, so it goes at the same moment. Reads hide them at once."""
    ids = await _fill(store, "ttl", 8, ttl=1)
    recalled = [mid for mid in ids if await client.exists(store.keys.access(mid))]
    assert recalled
    for mid in recalled:
        # Both TTLs read at one server moment (MULTI): two separate reads drift apart on a busy machine.
        async with client.pipeline(transaction=True) as pipe:
            pipe.pttl(store.keys.access(mid))
            pipe.pttl(store.keys.doc(mid))
            counter_ttl, doc_ttl = await pipe.execute()
        assert 0 < counter_ttl <= doc_ttl + 5
    await asyncio.sleep(1.2)
    assert all(item is None for item in await store.get_many(ids))
    assert await store.count(thread_id="ttl") == 0
    assert (await store.list(thread_id="ttl")).items == []
    assert await store.recall_by_vector(unit(0, 300), k=5, threshold=2.0, thread_id="ttl") == []
    deadline = time.monotonic() + 3  # active expiry may lag a little behind the TTL
    while await _leftovers(client, store) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert await _leftovers(client, store) == []
    fresh = await store.remember("after expiry", thread_id="ttl", vector=unit(5, 300))
    assert await store.count(thread_id="ttl") == 1
    assert await store.forget(fresh) is True
    assert await _leftovers(client, store) == []


async def test_ttl_zero_means_no_expiry(store: MemoryStore, client: Any) -> None:
    """``ttl=0`` (the reference's "no expiry") writes no TTL and no ``expires_at``."""
    mid = await store.remember("kept forever", ttl=0, vector=unit(3), thread_id="z")
    assert await client.pttl(store.keys.doc(mid)) == -1
    assert await client.hexists(store.keys.doc(mid), "expires_at") == 0
    assert (await store.get(mid)).expires_at is None  # type: ignore[union-attr]


async def test_a_document_deleted_by_another_client_leaves_its_access_counter(
    store: MemoryStore, client: Any
) -> None:
    """Another client deleting a document (BetterDB Monitor's forget, the reference library's
    forget or eviction: a plain DEL) is gone from every read at once, but the access counter
    of a recalled memory without TTL stays behind with no TTL (a leak, reported) until this
    library's ``forget`` of that id deletes it."""
    mid = await store.remember("recalled, then deleted elsewhere", vector=unit(9), thread_id="x")
    assert await store.recall_by_vector(unit(9), k=1, threshold=0.01, thread_id="x")
    assert await client.delete(store.keys.doc(mid)) == 1
    assert await store.count(thread_id="x") == 0 and await store.get(mid) is None
    assert await _leftovers(client, store) == [store.keys.access(mid)]  # the leak
    assert await client.pttl(store.keys.access(mid)) == -1
    assert await store.forget(mid) is False  # nothing to forget, but it cleans the counter
    assert await _leftovers(client, store) == []


async def test_erase_leaves_no_key_of_the_agent(client: Any, unique_name: str) -> None:
    """``erase(agent_id=)``: L1 turns and session keys, L1 summaries, memories, access
    counters, consolidation state and superseded fact history of the agent all go; another
    agent's keys all stay."""
    store = MemoryStore(
        client=client,
        name=unique_name,
        embedder=HashingEmbedder(),
        discovery=False,
        max_session_turns=2,
        summarize_batch=2,
    )
    try:

        async def populate(agent: str) -> None:
            for thread in ("t1", "t2"):
                for i in range(6):
                    await store.store_turn(thread, f"{agent} question {i}", f"answer {i}", agent_id=agent)
                await store.summarize_session(thread, agent_id=agent)
            await store.remember(f"{agent} lives in Paris", thread_id="t1", agent_id=agent, vector=unit(1))
            await store.recall_by_vector(unit(1), k=3, threshold=2.0, agent_id=agent)
            for city, date in (("Paris", "2020-01-01"), ("Berlin", "2021-01-01")):
                await store.remember(f"{agent} moved to {city}", agent_id=agent, vector=unit(2))
                await store.consolidate(
                    "facts", extract_facts=lambda items, c=city, d=date: [Fact("city", f"lives in {c}", d)],
                    agent_id=agent,
                )  # fmt: skip
            await store.consolidate("summary", lambda items: "digest", agent_id=agent, delete_sources=False)

        await populate("a")
        before_b = set(await _leftovers(client, store))
        await populate("b")
        keys_b = set(await _leftovers(client, store)) - before_b
        history = await store.fact_history("city", agent_id="a")
        assert [r.current for r in history] == [True, False]  # Berlin superseded Paris
        assert await scan_keys(client, f"{unique_name}:hist:*")
        assert await scan_keys(client, f"{unique_name}:cons:*")
        assert await scan_keys(client, f"{unique_name}:l1:*")
        assert await store.count(agent_id="a") > 0
        erased = await store.erase(agent_id="a")
        assert erased > 0
        assert await store.count(agent_id="a") == 0
        assert await store.fact_history("city", agent_id="a") == []
        left = set(await _leftovers(client, store))
        # Everything left belongs to agent "b" (or is the consolidation target or subject scope
        # registry, which still lists b's targets and scopes).
        registries = {f"{unique_name}:cons:targets", f"{unique_name}:subj:scopes"}
        assert left - keys_b <= registries, sorted(left - keys_b)
        assert await store.count(agent_id="b") > 0
        assert len(await store.fact_history("city", agent_id="b")) == 2
        assert await store.erase(agent_id="b") > 0
        assert await _leftovers(client, store) == []
    finally:
        await store.close()


async def test_l1_session_expiry_leaves_no_key(client: Any, unique_name: str) -> None:
    """A session nobody writes to again expires whole: turns, metadata, cursor, agent set."""
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(), discovery=False, session_ttl=1
    )
    try:
        for i in range(3):
            await store.store_turn("s", f"question {i}", f"answer {i}", agent_id="a")
        assert await scan_keys(client, f"{unique_name}:l1:*")
        await asyncio.sleep(1.3)
        assert await store.get_session_metadata("s", agent_id="a") is None
        assert await _leftovers(client, store) == []
    finally:
        await store.close()


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
        while len(store.supervisor) and time.monotonic() < deadline:
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
        assert len(store.supervisor) == 0
        assert len(asyncio.all_tasks()) <= tasks_before
        assert traced < 512 * 1024, f"{traced} bytes retained over 5,000 operations"
        assert blocks_growth < 9_000, f"{blocks_growth} more allocated blocks after 18,000 operations"
        assert await store.count() <= 10 * 20
        assert await scan_keys(client, f"{unique_name}:caplock:*") == []
    finally:
        await store.close()
