"""Crash safety: SIGKILL the engine mid-stream, restart it, and read back every acknowledged write.

A writer task streams ``remember_many`` batches and single ``remember`` calls into a
dedicated server and records each id only once its call returned. Another task
SIGKILLs the server after a number of acknowledged ids. After ``restart`` a new
client and store (same name) must find every acknowledged id by ``get`` and by
``recall_by_vector`` with its own vector, with no manual index step, and the
index (the only record of what a scope holds) must list exactly the documents
that survived.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import valkey.asyncio as avalkey

from betterdb_memory import (
    HashingEmbedder,
    MemoryStore,
    RetryPolicy,
    StoreConnectionError,
)
from betterdb_memory.server import EmbeddedServer

from .conftest import random_unit, scan_keys

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.slow]

KILL_AFTER = 200  # acknowledged ids before the SIGKILL


class _Stream:
    """The writer's record: acknowledged ids with their content and vector."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.acked: dict[str, tuple[str, list[float]]] = {}
        self.calls = 0
        self.error: BaseException | None = None
        # A flag, not Task.cancel(): on Python 3.11 a cancel can be swallowed inside
        # valkey-py (see test_faults.test_cancel_stops_a_store_call_promptly).
        self.stop = False

    def item(self, n: int, i: int) -> dict[str, Any]:
        return {
            "content": f"crash stream write {n} item {i}",
            "vector": random_unit(self.rng),
            "thread_id": f"t{(n + i) % 3}",
            "importance": float(self.rng.uniform(0.1, 0.9)),
        }

    async def write(self, store: MemoryStore) -> None:
        """Write until the server goes away; only returned ids count as acknowledged."""
        n = 0
        try:
            while not self.stop:
                n += 1
                if n % 4 == 0:
                    one = self.item(n, 0)
                    content, vector = one.pop("content"), one["vector"]
                    mid = await store.remember(content, **one)
                    self.acked[mid] = (content, vector)
                else:
                    batch = [self.item(n, i) for i in range(10)]
                    ids = await store.remember_many(batch)
                    for mid, it in zip(ids, batch, strict=True):
                        self.acked[mid] = (it["content"], it["vector"])
                self.calls += 1
        except StoreConnectionError as exc:
            self.error = exc


async def _kill_when(server: EmbeddedServer, stream: _Stream, after: int) -> float:
    while len(stream.acked) < after:
        await asyncio.sleep(0.002)
    started = time.monotonic()
    await asyncio.to_thread(server.kill)
    return time.monotonic() - started


def _open(url: str, name: str, **options: Any) -> tuple[avalkey.Valkey, MemoryStore]:
    client = avalkey.Valkey.from_url(url, socket_timeout=5, socket_connect_timeout=2)
    store = MemoryStore(client=client, name=name, embedder=HashingEmbedder(), discovery=False, **options)
    return client, store


async def _close(client: avalkey.Valkey, store: MemoryStore) -> None:
    with contextlib.suppress(StoreConnectionError):
        await asyncio.wait_for(store.close(), 30)
    await client.aclose()


async def _crash_and_restart(
    own_server: Callable[..., EmbeddedServer], appendfsync: str, name: str, seed: int
) -> tuple[EmbeddedServer, _Stream]:
    server = own_server(appendfsync=appendfsync)
    client, store = _open(server.url, name, retry=RetryPolicy(attempts=1))
    await store.ensure_index()
    stream = _Stream(seed)
    writer = asyncio.create_task(stream.write(store))
    await asyncio.wait_for(_kill_when(server, stream, KILL_AFTER), 60)
    await asyncio.wait_for(writer, 30)
    assert isinstance(stream.error, StoreConnectionError), (
        "the writer must see the crash as a connection error"
    )
    await _close(client, store)
    await asyncio.to_thread(server.restart)
    return server, stream


async def _index_matches_documents(client: avalkey.Valkey, store: MemoryStore) -> int:
    """The index lists exactly the documents, no counter outlives its document, no write is twice."""
    docs = {store.keys.memory_id_of(k) for k in await scan_keys(client, f"{store.name}:mem:*")}
    reply = await client.execute_command(
        "FT.SEARCH", store.keys.index, "@created_at:[-inf +inf]", "NOCONTENT", "LIMIT", "0", "10000",
        "DIALECT", "2",
    )  # fmt: skip
    indexed = {store.keys.memory_id_of(k) for k in reply[1:]}
    assert indexed == docs, f"indexed without documents: {indexed - docs}; unindexed: {docs - indexed}"
    assert await store.count() == len(docs)
    counters = {k.split("{", 1)[1][:-1] for k in await scan_keys(client, f"{store.name}:acc:*")}
    assert {store.keys.memory_id_of(k) for k in counters} <= docs
    contents = [item.content for item in await store.get_many(sorted(docs)) if item is not None]
    twins = {c for c in contents if contents.count(c) > 1}
    assert not twins, f"one write stored twice: {sorted(twins)[:5]}"
    return len(docs)


async def _read_back(url: str, name: str, stream: _Stream) -> tuple[list[str], int]:
    """After the restart: (acknowledged ids that are lost, documents present)."""
    client, store = _open(url, name)
    try:
        ids = list(stream.acked)
        items = await store.get_many(ids)
        lost = [mid for mid, item in zip(ids, items, strict=True) if item is None]
        for mid, item in zip(ids, items, strict=True):
            if item is not None:
                assert item.content == stream.acked[mid][0]
        # Recall needs no manual step: the index definition came back with the data.
        for mid in ids:
            if mid in lost:
                continue
            hits = await store.recall_by_vector(stream.acked[mid][1], k=10, threshold=2.0, reinforce=False)
            assert hits and hits[0].item.id == mid, f"{mid} not recalled by its own vector after restart"
        present = await _index_matches_documents(client, store)
        info = await store.index_info()
        assert info is not None and info.num_docs == present
        # The store keeps working: a new write is recallable at once.
        fresh = random_unit(np.random.default_rng(99))
        mid = await store.remember("written after the restart", vector=fresh, thread_id="t0")
        assert (await store.recall_by_vector(fresh, k=1, threshold=2.0))[0].item.id == mid
        assert await store.count(thread_id="t0") >= 1
        return lost, present
    finally:
        await _close(client, store)


async def test_sigkill_with_appendfsync_always_loses_no_acknowledged_write(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """appendfsync=always: every id a call returned before the SIGKILL is readable and recallable."""
    server, stream = await _crash_and_restart(own_server, "always", unique_name, seed=1)
    lost, present = await _read_back(server.url, unique_name, stream)
    print(
        f"\n[crash always] calls={stream.calls} acked={len(stream.acked)} lost={len(lost)} "
        f"documents_after_restart={present}"
    )
    assert lost == []
    assert present >= len(stream.acked)


async def test_sigkill_with_appendfsync_everysec_measures_loss_window(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """appendfsync=everysec: record how many acknowledged ids a SIGKILL loses; the store works after."""
    server, stream = await _crash_and_restart(own_server, "everysec", unique_name, seed=2)
    lost, present = await _read_back(server.url, unique_name, stream)
    print(
        f"\n[crash everysec] calls={stream.calls} acked={len(stream.acked)} lost={len(lost)} "
        f"documents_after_restart={present}"
    )


async def test_index_comes_back_after_restart_without_manual_steps(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """The index definition survives a crash (AOF) and recall works on a fresh store at once."""
    server = own_server(appendfsync="always")
    client, store = _open(server.url, unique_name)
    rng = np.random.default_rng(3)
    vecs = [random_unit(rng) for _ in range(20)]
    ids = await store.remember_many([{"content": f"doc {i}", "vector": v} for i, v in enumerate(vecs)])
    await _close(client, store)
    await asyncio.to_thread(server.kill)
    await asyncio.to_thread(server.restart)
    raw = avalkey.Valkey.from_url(server.url)
    try:
        assert unique_name + ":mem:idx" in {x.decode() for x in await raw.execute_command("FT._LIST")}
    finally:
        await raw.aclose()
    client, store = _open(server.url, unique_name)
    try:
        for mid, v in zip(ids, vecs, strict=True):
            assert (await store.recall_by_vector(v, k=1, threshold=2.0))[0].item.id == mid
    finally:
        await _close(client, store)


async def test_retrying_writer_rides_through_a_crash_without_loss_or_twins(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """With a generous RetryPolicy the writer never fails across a SIGKILL + restart, and a
    replayed batch (ids fixed client-side) rewrites its own documents instead of adding twins."""
    server = own_server(appendfsync="always")
    policy = RetryPolicy(attempts=60, base_delay=0.05, max_delay=0.2, budget=30)
    client, store = _open(server.url, unique_name, retry=policy)
    await store.ensure_index()
    stream = _Stream(seed=4)
    writer = asyncio.create_task(stream.write(store))

    async def crash_and_restart() -> None:
        await _kill_when(server, stream, KILL_AFTER)
        await asyncio.sleep(0.3)
        await asyncio.to_thread(server.restart)
        target = len(stream.acked) + 100  # keep writing a while on the new server
        while len(stream.acked) < target and not writer.done():
            await asyncio.sleep(0.01)
        stream.stop = True

    await asyncio.wait_for(crash_and_restart(), 60)
    await asyncio.wait_for(writer, 30)
    assert stream.error is None, f"the writer failed despite retries: {stream.error!r}"
    await _close(client, store)
    lost, present = await _read_back(server.url, unique_name, stream)
    print(f"\n[crash ride-through] acked={len(stream.acked)} lost={len(lost)} documents={present}")
    assert lost == []
    # Every document is an acknowledged one: the writer finished its last call.
    assert present == len(stream.acked)
