"""Reinforcement's bounded lag on the real server (``tiers.reinforce``).

A recall counts its hits exactly (``get`` sees them at once) and writes nothing the
index watches; the document's ``access_count`` / ``last_accessed_at`` (what BetterDB
Monitor and the reference read) follow within ``reinforce_write_interval``, on close, or,
after a crash, at the next flush of any store over the same name.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from betterdb_memory import MemoryStore

pytestmark = pytest.mark.integration


def unit(i: int) -> list[float]:
    v = np.zeros(384, dtype=np.float32)
    v[i] = 1.0
    return list(v)


async def _doc(client: Any, store: MemoryStore, mid: str) -> tuple[int, int]:
    """The document's (access_count, last_accessed_at): what Monitor reads."""
    count, last = await client.hmget(store.keys.doc(mid), "access_count", "last_accessed_at")
    return int(count), int(last)


async def test_the_document_follows_within_the_interval(make_store: Any, client: Any) -> None:
    store: MemoryStore = make_store(reinforce_write_interval=0.2)
    mid = await store.remember("followed", vector=unit(1))
    for _ in range(3):
        await store.recall_by_vector(unit(1), k=1, threshold=2.0)
    item = await store.get(mid)
    assert item is not None and item.access_count == 3 and item.last_accessed_at > item.created_at
    for _ in range(200):  # a few flushes at most; the loop only bounds a broken flush
        if await _doc(client, store, mid) == (3, item.last_accessed_at):
            break
        await asyncio.sleep(0.05)
    assert await _doc(client, store, mid) == (3, item.last_accessed_at)
    assert await store.get(mid) == item  # the flush changes nothing get() reads


async def test_text_recall_reads_exact_counts_and_times(make_store: Any, client: Any) -> None:
    """A re-ranked recall reads its hits with their access (one FETCH): the returned items and
    a later get() carry the exact count and time, while the document still lags."""
    store: MemoryStore = make_store(reinforce_write_interval=3600)
    mid = await store.remember("the bicycle is in the shed", thread_id="t")
    (first,) = await store.recall("where is the bicycle", k=1, threshold=2.0, thread_id="t")
    (second,) = await store.recall("where is the bicycle", k=1, threshold=2.0, thread_id="t")
    assert first.item.access_count == 0 and second.item.access_count == 1  # as read, before the access
    assert second.item.last_accessed_at > first.item.last_accessed_at
    item = await store.get(mid)
    assert item is not None and item.access_count == 2
    assert await _doc(client, store, mid) == (0, first.item.last_accessed_at)


async def test_a_crashed_stores_accesses_are_written_by_the_next_store(make_store: Any, client: Any) -> None:
    crashed: MemoryStore = make_store(reinforce_write_interval=3600)
    mid = await crashed.remember("left pending", vector=unit(2))
    await crashed.recall_by_vector(unit(2), k=1, threshold=2.0)
    await crashed.recall_by_vector(unit(2), k=1, threshold=2.0)
    # The process dies here: no close, its flush never runs. The counts are on the server.
    exact = await crashed.get(mid)
    assert exact is not None and exact.access_count == 2
    assert (await _doc(client, crashed, mid))[0] == 0

    later: MemoryStore = make_store(name=crashed.name, reinforce_write_interval=3600)
    other = await later.remember("another", vector=unit(3))
    await later.recall_by_vector(unit(3), k=1, threshold=2.0)
    assert await later.get(mid) == exact
    await later.close()  # its flush writes every pending document of the store, the crashed one's too
    assert await _doc(client, later, mid) == (2, exact.last_accessed_at)
    assert (await _doc(client, later, other))[0] == 1


async def test_a_forgotten_memory_is_never_written_back(make_store: Any, client: Any) -> None:
    store: MemoryStore = make_store(reinforce_write_interval=3600)
    mid = await store.remember("forgotten", vector=unit(4))
    await store.recall_by_vector(unit(4), k=1, threshold=2.0)
    assert await store.forget(mid) is True
    await store.close()
    assert await client.exists(store.keys.doc(mid)) == 0
    assert not await client.hexists(store.keys.access_pending, store.keys.doc(mid))


async def test_write_through_keeps_the_document_exact_at_once(make_store: Any, client: Any) -> None:
    store: MemoryStore = make_store(reinforce_write_interval=0)
    mid = await store.remember("eager", vector=unit(5))
    await store.recall_by_vector(unit(5), k=1, threshold=2.0)
    await store.recall_by_vector(unit(5), k=1, threshold=2.0)
    item = await store.get(mid)
    assert item is not None and await _doc(client, store, mid) == (2, item.last_accessed_at)
    assert not await client.hexists(store.keys.access_pending, store.keys.doc(mid))


async def test_background_mode_is_flushed_by_close(make_store: Any, client: Any) -> None:
    store: MemoryStore = make_store(reinforce_mode="background", reinforce_write_interval=3600)
    mid = await store.remember("in the background", vector=unit(6))
    await store.recall_by_vector(unit(6), k=1, threshold=2.0)
    await store.close()  # drains the spawned reinforcement, then flushes
    assert (await _doc(client, store, mid))[0] == 1


def _mix(*weights: tuple[int, float]) -> list[float]:
    v = np.zeros(384, dtype=np.float32)
    for i, w in weights:
        v[i] = w
    return list(v / np.linalg.norm(v))


async def test_ranking_sees_the_stores_own_recalls_before_the_flush(make_store: Any) -> None:
    """Recency counts from a memory's last recall. The document lags, but the store that
    recalled it ranks with its access at once: an old memory just recalled outranks a
    slightly nearer one never recalled (it would not, ranked on the lagging documents)."""
    store: MemoryStore = make_store(reinforce_write_interval=3600)
    month_ago = "2020-01-01"
    recalled = await store.remember("recalled", vector=_mix((0, 1.0), (1, 0.12)), valid_from=month_ago)
    nearer = await store.remember("nearer", vector=_mix((0, 1.0), (2, 0.10)), valid_from=month_ago)
    (hit,) = await store.recall_by_vector(_mix((1, 1.0)), k=1, threshold=2.0)
    assert hit.item.id == recalled
    hits = await store.recall_by_vector(_mix((0, 1.0)), k=2, threshold=2.0, reinforce=False)
    assert [h.item.id for h in hits] == [recalled, nearer]
    assert hits[0].item.access_count == 1  # get()'s exact view


async def test_close_writes_back_every_document_of_a_pass_sent_in_several_round_trips(
    make_store: Any, client: Any
) -> None:
    """A pass sends at most 8 documents a round trip (the engine runs a pipeline back to back);
    25 first accesses take several, and every document still gets its exact snapshot."""
    store: MemoryStore = make_store(reinforce_write_interval=3600)
    ids = [await store.remember(f"note {i}", vector=unit(i)) for i in range(25)]
    for i in range(25):
        await store.recall_by_vector(unit(i), k=1, threshold=2.0)
    items = [await store.get(mid) for mid in ids]
    assert all(it is not None and it.access_count == 1 for it in items)
    assert {(await _doc(client, store, mid))[0] for mid in ids} == {0}  # lagging until the pass
    await store.close()
    assert [await _doc(client, store, mid) for mid in ids] == [
        (1, it.last_accessed_at) for it in items if it is not None
    ]
