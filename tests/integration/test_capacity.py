"""``max_items_per_scope``: the reference's filter meaning, exact, O(excess) victims, never its own write."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from betterdb_memory import MemoryStore

DIM = 384  # HashingEmbedder's default, the make_store fixture's embedder


def unit(*positions: int) -> list[float]:
    v = np.zeros(DIM, dtype=np.float32)
    for p in positions:
        v[p] = 1.0
    return list(v / np.linalg.norm(v))


async def test_a_thread_scoped_write_counts_every_agent_of_that_thread(make_store: Any) -> None:
    """The reference's meaning: a write with thread_id only counts that thread's memories of
    every agent (its None fields match any value), and evicts among them."""
    s: MemoryStore = make_store(max_items_per_scope=2)
    a = await s.remember("agent a", importance=0.1, thread_id="t", agent_id="a", vector=unit(0))
    await s.remember("agent b", importance=0.9, thread_id="t", agent_id="b", vector=unit(1))
    other = await s.remember("other thread", importance=0.0, thread_id="u", vector=unit(2))
    await s.remember("thread only", importance=0.5, thread_id="t", vector=unit(3))
    assert await s.get(a) is None  # the lowest keep-score among thread t's three
    assert await s.get(other) is not None  # another thread is not counted
    assert await s.count(thread_id="t") == 2


async def test_tags_narrow_the_cap_scope_to_memories_with_all_of_them(make_store: Any) -> None:
    s: MemoryStore = make_store(max_items_per_scope=1)
    untagged = await s.remember("untagged", importance=0.0, thread_id="t", vector=unit(0))
    only_x = await s.remember("x only", importance=0.0, thread_id="t", tags=["x"], vector=unit(1))
    both = await s.remember("x and y", importance=0.9, thread_id="t", tags=["x", "y"], vector=unit(2))
    # The (t, [x, y]) write counts only memories with x AND y: one, so nothing goes.
    assert all([await s.get(untagged), await s.get(only_x), await s.get(both)])
    newer = await s.remember("x and y again", importance=0.9, thread_id="t", tags=["y", "x"], vector=unit(3))
    assert await s.get(both) is None and await s.get(newer) is not None
    assert await s.get(untagged) is not None and await s.get(only_x) is not None


async def test_an_unscoped_write_is_never_capped(make_store: Any) -> None:
    s: MemoryStore = make_store(max_items_per_scope=1)
    ids = [await s.remember(f"global {i}", vector=unit(i)) for i in range(3)]
    assert all(await s.get_many(ids))


async def test_a_batch_never_evicts_its_own_writes(make_store: Any) -> None:
    """Writing more than the cap in one call keeps the batch and evicts the older ones."""
    s: MemoryStore = make_store(max_items_per_scope=2)
    old = await s.remember("old", importance=1.0, thread_id="t", vector=unit(0))
    batch = await s.remember_many(
        [{"content": f"b{i}", "importance": 0.0, "thread_id": "t", "vector": unit(i + 1)} for i in range(2)]
    )
    assert await s.get(old) is None
    assert all(await s.get_many(batch))
    assert (await s.stats()).evictions == 1


async def test_concurrent_writers_of_one_cap_scope_never_over_evict(make_store: Any) -> None:
    """40 writers into a scope at its cap: exactly the cap remains, every eviction counted once."""
    s: MemoryStore = make_store(max_items_per_scope=10)
    await asyncio.gather(*(s.remember(f"seed {i}", thread_id="c", vector=unit(i % DIM)) for i in range(10)))
    await asyncio.gather(*(s.remember(f"more {i}", thread_id="c", vector=unit(i % DIM)) for i in range(40)))
    assert await s.count(thread_id="c") == 10
    assert (await s.stats()).evictions == 40


async def test_victims_follow_the_keep_score(make_store: Any, client: Any) -> None:
    """The stored ``keep`` field orders victims: low importance and old access go first."""
    s: MemoryStore = make_store(max_items_per_scope=3, half_life_seconds=3600)
    ids = [
        await s.remember(f"m{i}", importance=imp, thread_id="k", vector=unit(i))
        for i, imp in enumerate([0.9, 0.2, 0.6])
    ]
    keeps = [float(await client.hget(s.keys.doc(m), "keep")) for m in ids]
    assert keeps[1] < keeps[2] < keeps[0]
    await s.remember("newest", importance=0.5, thread_id="k", vector=unit(9))
    assert [await s.get(m) is not None for m in ids] == [True, False, True]


def _keep_of(raw: Any) -> float:
    return float(raw.decode() if isinstance(raw, bytes) else raw)


async def test_later_evictions_read_below_a_learned_keep_ceiling(make_store: Any, client: Any) -> None:
    """After a scope's first eviction the victims are read under a keep-score ceiling (a range
    read, not a sort of the scope), and each write still evicts exactly the lowest keep-score."""
    s: MemoryStore = make_store(max_items_per_scope=20, half_life_seconds=3600)
    rng = np.random.default_rng(7)
    keeps: dict[str, float] = {}

    async def write(i: int) -> None:
        mid = await s.remember(
            f"m{i}", importance=float(rng.uniform(0.05, 1.0)), thread_id="r", vector=unit(i % DIM)
        )
        keeps[mid] = _keep_of(await client.hget(s.keys.doc(mid), "keep"))

    for i in range(20):
        await write(i)
    sent: list[list[Any]] = []
    backend = s._capacity._rt.backend
    original = backend.pipeline

    async def spy(operation: str, build: Any, **kw: Any) -> Any:
        sent.extend(list(q) for q in kw.get("searches", ()))
        return await original(operation, build, **kw)

    backend.pipeline = spy  # type: ignore[method-assign]
    model = set(keeps)
    for i in range(20, 45):
        before = set(keeps)
        await write(i)
        (new,) = set(keeps) - before
        # The model: the lowest keep-score other than the write's own goes.
        model.remove(min(model, key=keeps.__getitem__))
        model.add(new)
        alive = {m for m in keeps if await client.exists(s.keys.doc(m))}
        assert alive == model
    ranged = [q for q in sent if any("@keep:[-inf" in str(a) for a in q)]
    assert len(ranged) >= 20  # the first eviction sorts; the later ones read a range
    # A scope at its cap takes its lock in the write's round trip, so the count there is
    # the eviction's: one count per write (plus one per widened range), not two.
    counts = [q for q in sent if "NOCONTENT" in q]
    assert 25 <= len(counts) < 25 + 8
    assert (await s.stats()).evictions == 25


async def test_a_stale_keep_ceiling_still_picks_the_lowest(make_store: Any, client: Any) -> None:
    """A ceiling far below the scope (another process evicted) widens, then sorts; one far above
    reads the whole scope in range: either way the lowest keep-score goes."""
    from betterdb_memory.core.keys import Scope
    from betterdb_memory.core.record import NewMemory
    from betterdb_memory.tiers.victims import _Ceiling

    s: MemoryStore = make_store(max_items_per_scope=5, half_life_seconds=3600)
    ids = [
        await s.remember(f"m{i}", importance=0.1 + 0.15 * i, thread_id="z", vector=unit(i)) for i in range(5)
    ]
    flt = s._capacity.cap_filters([NewMemory("m", scope=Scope.of(thread_id="z"))])[0]
    for ceiling in (_Ceiling(-1e9, 1e-9), _Ceiling(1e12, 1.0)):
        s._capacity._victims._ceilings[flt] = ceiling
        keeps = {m: _keep_of(await client.hget(s.keys.doc(m), "keep")) for m in ids}
        lowest = min(keeps, key=keeps.__getitem__)
        ids.append(await s.remember("new", importance=1.0, thread_id="z", vector=unit(9)))
        assert not await client.exists(s.keys.doc(lowest))
        ids.remove(lowest)
        assert await s.count(thread_id="z") == 5


async def test_a_batch_into_two_full_scopes_evicts_in_both(make_store: Any) -> None:
    """One write, two cap scopes each last seen full: both locks ride in the round trip, and
    concurrent batches over the same two scopes in opposite orders all finish with both caps
    held exactly."""
    s: MemoryStore = make_store(max_items_per_scope=3)
    for t in ("a", "b"):
        await s.remember_many([{"content": f"{t}{i}", "thread_id": t, "vector": unit(i)} for i in range(3)])

    async def batch(first: str, second: str, i: int) -> None:
        await s.remember_many(
            [
                {"content": f"{first} new {i}", "thread_id": first, "vector": unit(10 + i)},
                {"content": f"{second} new {i}", "thread_id": second, "vector": unit(40 + i)},
            ]
        )

    await batch("a", "b", 0)
    assert await s.count(thread_id="a") == 3 and await s.count(thread_id="b") == 3
    await asyncio.wait_for(
        asyncio.gather(*(batch(*(("a", "b") if i % 2 else ("b", "a")), i) for i in range(1, 13))), 60
    )
    assert await s.count(thread_id="a") == 3 and await s.count(thread_id="b") == 3
    assert (await s.stats()).evictions == 26


async def _cap_locks(client: Any, s: MemoryStore) -> list[Any]:
    return list(await client.keys(f"{s.keys.name}:caplock:*"))


async def test_a_write_cancelled_after_its_round_trip_frees_the_scope_lock(
    make_store: Any, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write into a full scope takes the scope's lock in its own round trip; cancelled as
    the replies come back (``asyncio.timeout`` around ``remember``), it frees the lock at
    once instead of leaving every writer of the scope waiting for the lock's TTL."""
    s: MemoryStore = make_store(max_items_per_scope=3)
    for i in range(3):  # the third write counts the scope full: the next one takes the lock
        await s.remember(f"seed {i}", thread_id="t", vector=unit(i))
    backend = s._rt.backend
    real = backend.pipeline
    took: list[bool] = []

    async def cancelled_on_return(operation: str, build: Any, **options: Any) -> Any:
        replies = await real(operation, build, **options)
        if operation == "remember":
            took.append(bool(await _cap_locks(client, s)))  # the lock is held server-side now
            raise asyncio.CancelledError
        return replies

    monkeypatch.setattr(backend, "pipeline", cancelled_on_return)
    with pytest.raises(asyncio.CancelledError):
        await s.remember("cancelled", thread_id="t", vector=unit(9))
    monkeypatch.undo()
    assert took == [True]
    assert await _cap_locks(client, s) == []
    await s.remember("after", thread_id="t", vector=unit(10))
    assert await s.count(thread_id="t") == 3


async def test_an_eviction_cancelled_midway_frees_every_lock_its_write_took(
    make_store: Any, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch into two full scopes takes both locks in its round trip; cancelled while the
    first scope's victims are read, it frees both (the second had not been reached)."""
    s: MemoryStore = make_store(max_items_per_scope=3)
    for t in ("a", "b"):
        await s.remember_many([{"content": f"{t}{i}", "thread_id": t, "vector": unit(i)} for i in range(3)])
    victims = s._capacity._victims
    entered = asyncio.Event()

    async def stuck(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(victims, "choose", stuck)
    write = asyncio.ensure_future(
        s.remember_many(
            [
                {"content": "a new", "thread_id": "a", "vector": unit(20)},
                {"content": "b new", "thread_id": "b", "vector": unit(21)},
            ]
        )
    )
    await asyncio.wait_for(entered.wait(), 30)
    assert len(await _cap_locks(client, s)) == 2
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    monkeypatch.undo()
    assert await _cap_locks(client, s) == []
    await s.remember_many(
        [
            {"content": "a later", "thread_id": "a", "vector": unit(30)},
            {"content": "b later", "thread_id": "b", "vector": unit(31)},
        ]
    )
    assert await s.count(thread_id="a") == 3 and await s.count(thread_id="b") == 3


async def test_an_eviction_cancelled_before_its_deletes_went_out_frees_the_lock(
    make_store: Any, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unlock rides in the deletes' round trip; when that round trip is cancelled before
    it is sent, the lock is freed by a separate unlock."""
    s: MemoryStore = make_store(max_items_per_scope=2)
    for i in range(2):
        await s.remember(f"seed {i}", thread_id="t", vector=unit(i))
    docs = s._docs

    async def cancelled(*args: Any, **kwargs: Any) -> int:
        assert len(await _cap_locks(client, s)) == 1
        kwargs["also"](client.pipeline(transaction=False))  # the unlock is queued, never sent
        raise asyncio.CancelledError

    monkeypatch.setattr(docs, "delete_ids", cancelled)
    with pytest.raises(asyncio.CancelledError):
        await s.remember("over the cap", thread_id="t", vector=unit(5))
    monkeypatch.undo()
    assert await _cap_locks(client, s) == []
