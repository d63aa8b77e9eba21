"""Connection faults: retries ride out a restart, non-idempotent work is never replayed, nothing hangs.

Idempotent operations (``get``, ``recall_by_vector``, ``count``) run while a
dedicated server is stopped and started again on the same port; with a generous
``RetryPolicy`` they succeed once it is back. Non-idempotent work (a recall's
reinforcement) meets a connection cut at an exact command (``FaultProxy``) and is
never replayed; ``forget_by_scope`` cut between pages reports what it deleted in
``details``; a write pipeline cut in the middle leaves nothing the scope operations
cannot reach. With the server down or frozen, every operation raises within
a few seconds under a small policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import (
    HashingEmbedder,
    MemoryStore,
    RetryPolicy,
    StoreConnectionError,
)
from betterdb_memory.server import EmbeddedServer

from .conftest import FaultProxy, scan_keys, unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

GENEROUS = RetryPolicy(attempts=40, base_delay=0.05, max_delay=0.3, budget=20.0)
SMALL = RetryPolicy(attempts=2, base_delay=0.05, max_delay=0.2, budget=1.0)
V = unit(11)


def _store(url: str, name: str, retry: RetryPolicy, **options: Any) -> tuple[avalkey.Valkey, MemoryStore]:
    client = avalkey.Valkey.from_url(url, socket_timeout=3, socket_connect_timeout=1)
    return client, MemoryStore(client=client, name=name, embedder=HashingEmbedder(), retry=retry, **options)


async def _close(client: avalkey.Valkey, store: MemoryStore) -> None:
    await asyncio.wait_for(store.close(), 15)
    await client.aclose()


def _restart_later(server: EmbeddedServer, delay: float) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        server.restart()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("operation", ["get", "recall_by_vector", "count"])
async def test_idempotent_operation_succeeds_across_a_server_restart(
    own_server: Callable[..., EmbeddedServer], unique_name: str, operation: str
) -> None:
    """Server stopped, started again ~0.5 s later on the same port: the retried call returns the right answer."""
    server = own_server(appendfsync="always")
    client, store = _store(server.url, unique_name, GENEROUS, discovery=False)
    try:
        mid = await store.remember("survives a restart", vector=V, thread_id="r")
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "get": lambda: store.get(mid),
            "recall_by_vector": lambda: store.recall_by_vector(V, k=3, threshold=2.0, reinforce=False),
            "count": lambda: store.count(thread_id="r"),
        }
        await asyncio.to_thread(server.stop)
        restarter = _restart_later(server, 0.5)
        started = time.monotonic()
        result = await asyncio.wait_for(calls[operation](), 30)
        print(f"\n[fault] {operation} returned {time.monotonic() - started:.2f}s after the stop")
        await asyncio.to_thread(restarter.join, 30)
        if operation == "get":
            assert result is not None and result.content == "survives a restart"
        elif operation == "recall_by_vector":
            assert [h.item.id for h in result] == [mid]
        else:
            assert result == 1
    finally:
        await _close(client, store)


async def _fill(store: MemoryStore, n: int) -> None:
    """``n`` memories in thread "r": enough that valkey-search's rebuild after a restart
    takes tens of milliseconds, a window a query lands in."""
    await store.remember_many(
        [{"content": f"fact {i}", "vector": unit(i % 32, (i + 7) % 32), "thread_id": "r"} for i in range(n)]
    )


async def test_queries_after_a_restart_wait_for_the_index_rebuild(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """A restart during a count: the retried query sees every memory, not a half-rebuilt index.

    valkey-search rebuilds its index in the background once a restarted server has
    loaded its data, and answers from the part indexed so far meanwhile; without the
    backend's post-fault readiness check this count returns a few hundred (checked by
    removing it). RediSearch indexes while loading, so there it passes either way.
    """
    server = own_server(appendfsync="always")
    client, store = _store(server.url, unique_name, GENEROUS, discovery=False)
    n = 4000
    try:
        await _fill(store, n)
        for _ in range(3):  # three restarts: the window after each is a few tens of ms
            await asyncio.to_thread(server.stop)
            restarter = _restart_later(server, 0.3)
            counted = await asyncio.wait_for(store.count(thread_id="r"), 30)
            await asyncio.to_thread(restarter.join, 30)
            assert counted == n
            hits = await store.recall_by_vector(
                unit(3, 10), k=3, threshold=2.0, reinforce=False, thread_id="r"
            )
            assert len(hits) == 3
    finally:
        await _close(client, store)


async def test_queries_after_a_restart_between_calls_wait_for_the_index_rebuild(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """The server restarts between two calls: no call sees a fault (valkey-py's pool reopens
    the closed connection by itself), yet counts, lists and recalls see every memory.

    Without the connection hook (``backend.reconnects``) the first count after each restart
    returns a part of the 4,000 on valkey-search (checked by removing it).
    """
    server = own_server(appendfsync="always")
    client, store = _store(server.url, unique_name, GENEROUS, discovery=False)
    n = 4000
    try:
        await _fill(store, n)
        needles = [await store.remember(f"needle {j}", vector=unit(40 + j), thread_id="n") for j in range(8)]
        assert await store.count(thread_id="r") == n
        for operation in ("count", "list", "recall"):
            await asyncio.to_thread(server.restart)
            if operation == "count":
                assert await store.count(thread_id="r") == n
            elif operation == "list":
                assert (await store.list(thread_id="r", limit=5)).total == n
            else:  # all eight needles at once (a half-rebuilt index misses some)
                hits = await store.recall_by_vector(
                    unit(*range(40, 48)), k=8, threshold=2.0, reinforce=False, thread_id="n"
                )
                assert sorted(h.item.id for h in hits) == sorted(needles)
    finally:
        await _close(client, store)


async def test_reinforce_is_not_replayed_after_a_cut(
    fault_proxy: FaultProxy, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection drops as the reinforcement is sent: the recall still returns its hits
    (a failed reinforcement never breaks the read path; it is logged and counted), and the
    increment is not replayed although the server is reachable again and the policy allows
    40 attempts."""
    client, store = _store(fault_proxy.url, unique_name, GENEROUS, discovery=False)
    try:
        mid = await store.remember("reinforced once at most", vector=V)
        await store.recall_by_vector(V, k=1, threshold=2.0)  # loads the reinforce script
        before = (await store.get(mid)).access_count  # type: ignore[union-attr]
        assert before == 1
        fault_proxy.arm(b"EVALSHA", 1)  # the next script call is the reinforcement
        with caplog.at_level("WARNING", logger="betterdb_memory.tiers.recall"):
            hits = await asyncio.wait_for(store.recall_by_vector(V, k=1, threshold=2.0), 10)
        assert [h.item.id for h in hits] == [mid]
        assert fault_proxy.cuts == 1
        assert any("reinforcement of 1 hits failed" in r.getMessage() for r in caplog.records)
        assert (await store.get(mid)).access_count == before  # type: ignore[union-attr]
        await store.recall_by_vector(V, k=1, threshold=2.0)  # the next one counts again
        assert (await store.get(mid)).access_count == before + 1  # type: ignore[union-attr]
    finally:
        await _close(client, store)


async def test_a_text_recall_whose_read_and_reinforce_is_cut_reads_again_without_counting(
    fault_proxy: FaultProxy, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A re-ranked recall reads and reinforces its hits in one FETCH. The connection drops as
    it is sent: the FETCH is not replayed (it could count twice); the hits are read again
    without reinforcement and come back whole, and the failure is logged."""
    client, store = _store(fault_proxy.url, unique_name, GENEROUS, discovery=False)
    try:
        mid = await store.remember("Priya keeps bees on the roof.", thread_id="cut", tags=["home"])
        await store.remember("Something else entirely.", thread_id="cut")
        await store.recall("Who keeps bees?", k=1, threshold=2.0, thread_id="cut")  # loads FETCH
        before = (await store.get(mid)).access_count  # type: ignore[union-attr]
        assert before == 1
        fault_proxy.arm(b"EVALSHA", 1)  # the next script call is the read-and-reinforce
        with caplog.at_level("WARNING", logger="betterdb_memory.tiers.documents"):
            hits = await asyncio.wait_for(
                store.recall("Who keeps bees?", k=1, threshold=2.0, thread_id="cut"), 10
            )
        assert fault_proxy.cuts == 1
        assert [h.item.id for h in hits] == [mid]
        assert hits[0].item.tags == ["home"] and hits[0].item.access_count == before
        assert any("reading again" in r.getMessage() for r in caplog.records)
        assert (await store.get(mid)).access_count == before  # type: ignore[union-attr]
        await store.recall("Who keeps bees?", k=1, threshold=2.0, thread_id="cut")  # counts again
        assert (await store.get(mid)).access_count == before + 1  # type: ignore[union-attr]
    finally:
        await _close(client, store)


async def test_forget_by_scope_reports_progress_when_the_server_goes_away(
    fault_proxy: FaultProxy, unique_name: str
) -> None:
    """Cut as the second 500-memory page is read, and stay down: StoreConnectionError carries
    deleted=500, and it is exact; calling again once the server is back finishes the job."""
    client, store = _store(fault_proxy.url, unique_name, SMALL, discovery=False)
    try:
        await store.remember_many(
            [{"content": f"bulk {i}", "vector": unit(i % 300), "thread_id": "big"} for i in range(620)]
        )
        await store.recall_by_vector(unit(0), k=5, threshold=2.0, thread_id="big")  # some access counters
        fault_proxy.arm(b"FT.SEARCH", 2, stay_down=True)  # page 1 is read and deleted, page 2 is cut
        started = time.monotonic()
        with pytest.raises(StoreConnectionError) as err:
            await asyncio.wait_for(store.forget_by_scope(thread_id="big"), 10)
        assert time.monotonic() - started < 5  # within the small retry budget
        assert err.value.details["operation"] == "forget_by_scope"
        assert err.value.details["deleted"] == 500
        fault_proxy.restore()
        assert await store.count(thread_id="big") == 120  # details told the truth
        assert await store.forget_by_scope(thread_id="big") == 120  # calling again finishes the job
        assert await store.count(thread_id="big") == 0
    finally:
        fault_proxy.restore()
        await _close(client, store)


async def test_forget_by_scope_with_server_down_reports_deleted_zero(
    fault_proxy: FaultProxy, unique_name: str
) -> None:
    """Server unreachable from the start: the error still says forget_by_scope deleted nothing."""
    client, store = _store(fault_proxy.url, unique_name, SMALL, discovery=False)
    try:
        await store.remember("kept", vector=V, thread_id="d")
        fault_proxy.cut(stay_down=True)
        with pytest.raises(StoreConnectionError) as err:
            await asyncio.wait_for(store.forget_by_scope(thread_id="d"), 10)
        assert err.value.details.get("operation") == "forget_by_scope"
        assert err.value.details.get("deleted") == 0
    finally:
        fault_proxy.restore()
        await _close(client, store)


def _all_operations(store: MemoryStore, mid: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    return {
        "get": lambda: store.get(mid),
        "get_many": lambda: store.get_many([mid, mid]),
        "recall_by_vector": lambda: store.recall_by_vector(V, k=3, threshold=2.0),
        "recall": lambda: store.recall("anything at all", k=3),
        "list": lambda: store.list(thread_id="h"),
        "count": lambda: store.count(thread_id="h"),
        "remember": lambda: store.remember("new", vector=V, thread_id="h"),
        "remember_many": lambda: store.remember_many(["a b", "c d"]),
        "forget": lambda: store.forget(mid),
        "forget_by_scope": lambda: store.forget_by_scope(thread_id="h"),
        "stats": lambda: store.stats(),
        "ensure_index": lambda: store.ensure_index(),
        "index_info": lambda: store.index_info(),
    }


async def test_nothing_hangs_with_the_server_down(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """Server killed: every operation raises StoreConnectionError within seconds under attempts=2, budget=1."""
    server = own_server()
    client, store = _store(server.url, unique_name, SMALL)
    mid = await store.remember("before the crash", vector=V, thread_id="h")
    await asyncio.to_thread(server.kill)
    slowest = 0.0
    for op in _all_operations(store, mid).values():
        started = time.monotonic()
        with pytest.raises(StoreConnectionError):
            await asyncio.wait_for(op(), 10)
        slowest = max(slowest, time.monotonic() - started)
    print(f"\n[fault] server down: slowest operation raised after {slowest:.2f}s")
    await _close(client, store)


@pytest.mark.slow
async def test_nothing_hangs_with_the_server_frozen(
    own_server: Callable[..., EmbeddedServer], unique_name: str
) -> None:
    """Server frozen (SIGSTOP; TCP still accepts): connect()'s socket timeout turns every call into an error."""
    server = own_server()
    store = await MemoryStore.connect(
        server.url, name=unique_name, embedder=HashingEmbedder(), socket_timeout=1.0, retry=SMALL
    )
    mid = await store.remember("before the freeze", vector=V, thread_id="h")
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    try:
        ops = _all_operations(store, mid)
        for name in ("get", "recall_by_vector", "count", "remember", "forget_by_scope"):
            started = time.monotonic()
            with pytest.raises(StoreConnectionError):
                await asyncio.wait_for(ops[name](), 10)
            print(f"\n[fault] frozen server: {name} raised after {time.monotonic() - started:.2f}s")
        await asyncio.wait_for(store.close(), 10)
    finally:
        os.kill(server.pid, signal.SIGCONT)
        with contextlib.suppress(Exception):
            await store.close()


async def test_cancel_stops_a_store_call_promptly(valkey_url: str, unique_name: str) -> None:
    """A task cancelled while it loops over store calls stops (10 tries, each within 1 s)."""
    store = await MemoryStore.connect(
        valkey_url, name=unique_name, embedder=HashingEmbedder(), discovery=False
    )
    stop = False

    async def loop() -> None:
        n = 0
        while not stop:
            n += 1
            await store.remember_many([{"content": f"c {n} {i}", "vector": unit(i)} for i in range(3)])
            await store.recall_by_vector(V, k=2, threshold=2.0, reinforce=False)

    swallowed = 0
    try:
        for trial in range(10):
            stop = False
            task = asyncio.create_task(loop())
            await asyncio.sleep(0.02 + 0.003 * trial)
            task.cancel()
            done, _ = await asyncio.wait({task}, timeout=1)
            if not done:
                swallowed += 1
                stop = True  # end it the cooperative way
                await asyncio.wait({task}, timeout=10)
                break
            with contextlib.suppress(asyncio.CancelledError):
                await task
    finally:
        stop = True
        await store.close()
    assert swallowed == 0, f"a cancelled task kept running (try {trial + 1})"


async def test_a_torn_remember_never_leaves_a_memory_forget_by_scope_cannot_erase(
    fault_proxy: FaultProxy, client: Any, unique_name: str
) -> None:
    """The write pipeline of a memory with a TTL is cut after its HSET, before its PEXPIRE.
    The call fails (nothing acknowledged), but the document is stored without a server TTL.
    Readers honour its ``expires_at`` field, so it is hidden from the moment it expires, and
    the first read that meets it past its time deletes it (forget_by_scope erases it too)."""
    proxy_client, store = _store(fault_proxy.url, unique_name, RetryPolicy(attempts=1), discovery=False)
    try:
        await store.remember("warm-up", vector=V, thread_id="warm")  # index ready
        fault_proxy.arm(b"PEXPIRE", 1, split=True)
        with pytest.raises(StoreConnectionError):
            await asyncio.wait_for(store.remember("torn write", vector=unit(3), thread_id="fresh", ttl=1), 10)
        stored = await scan_keys(client, f"{unique_name}:mem:*")
        torn = [k for k in stored if await client.hget(k, "content") == b"torn write"]
        assert len(torn) == 1
        assert await client.pttl(torn[0]) == -1 and await client.hexists(torn[0], "expires_at")
        hits = await store.recall_by_vector(unit(3), k=5, threshold=2.0, thread_id="fresh", reinforce=False)
        assert len(hits) == 1  # the engine sees what was stored, until it expires
        await asyncio.sleep(1.1)
        assert await store.count(thread_id="fresh") == 0
        assert await store.recall_by_vector(unit(3), k=5, threshold=2.0, thread_id="fresh") == []
        assert await store.get(store.keys.memory_id_of(torn[0])) is None
        for _ in range(100):  # the read that met it expired deletes it in the background
            if not await client.exists(torn[0]):
                break
            await asyncio.sleep(0.02)
        assert await client.exists(torn[0]) == 0
        assert await store.forget_by_scope(thread_id="fresh") == 0
    finally:
        await _close(proxy_client, store)


async def test_a_write_cut_before_its_cap_count_is_held_by_the_next_write(
    fault_proxy: FaultProxy, client: Any, unique_name: str
) -> None:
    """The capped write's pipeline is cut after its HSET, before the count that would have
    evicted: the scope is one over its cap until the next write into it, which evicts the
    lowest keep-scores down to the cap."""
    proxy_client, store = _store(
        fault_proxy.url, unique_name, RetryPolicy(attempts=1), discovery=False, max_items_per_scope=2
    )
    try:
        first = await store.remember("first", vector=unit(1), thread_id="c", importance=0.1)
        await store.remember("second", vector=unit(2), thread_id="c", importance=0.9)
        fault_proxy.arm(b"FT.SEARCH", 1, split=True)
        with pytest.raises(StoreConnectionError):
            await asyncio.wait_for(store.remember("third", vector=unit(3), thread_id="c"), 10)
        assert await store.count(thread_id="c") == 3
        last = await store.remember("fourth", vector=unit(4), thread_id="c", importance=0.9)
        assert await store.count(thread_id="c") == 2
        assert await store.get(first) is None and await store.get(last) is not None
    finally:
        await _close(proxy_client, store)
