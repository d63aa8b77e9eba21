"""``wait_replicas`` during a slot migration: a write the cluster redirects with ``ASK`` is waited for
where it was applied.

The slot of the written key is set MIGRATING on its node and IMPORTING on another; the
key is not on the migrating node, so that node answers ``ASK`` and the importing node
applies the write. The ``WAIT`` queued for the migrating node runs on a connection that
never carried the write and confirms nothing about it: the backend sends the ``ASK`` ed
write again as ``ASKING``, the write, ``WAIT`` on one connection of the importing node
(``backend.replication.run_waited``). This cluster has no replicas, so every ``WAIT 1``
answers 0 and the call raises ``server.replication_timeout``: its ``details["nodes"]``
name the nodes whose ``WAIT`` fell short, and the importing node must be one of them
(before the fix only the migrating node was). The replica cluster
(``test_cluster_replicas.py``) checks the confirmed path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import valkey.asyncio as avalkey
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import MemoryStore
from betterdb_memory.errors import ServerError, StoreConnectionError

pytestmark = [pytest.mark.integration]

LIMIT_S = 60.0  # generous: a hang fails the test, a duration is never asserted


@dataclass
class Migration:
    slot: int
    source: str  # host:port
    target: str
    src: avalkey.Valkey
    dst: avalkey.Valkey


@pytest.fixture
async def migrating(
    cluster_client: ValkeyCluster, valkey_cluster: Any
) -> AsyncIterator[Callable[[str], Any]]:
    """Put the slot of a key into migration (MIGRATING on its node, IMPORTING on another); undone after."""
    started: list[tuple[Migration, bytes, bytes]] = []

    async def start(key: str) -> Migration:
        slot = cluster_client.keyslot(key)
        source = cluster_client.get_node_from_key(key)
        target = next(n for n in cluster_client.get_primaries() if n.name != source.name)
        src, dst = valkey_cluster.node_client(source.port), valkey_cluster.node_client(target.port)
        src_id, dst_id = (
            await src.execute_command("CLUSTER", "MYID"),
            await dst.execute_command("CLUSTER", "MYID"),
        )
        await dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        await src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        m = Migration(slot, source.name, target.name, src, dst)
        started.append((m, src_id, dst_id))
        return m

    try:
        yield start
    finally:
        for m, _, _ in started:
            # What the importing node took during the test goes (ASKING applies to the next
            # command on the same connection: a pipeline is one connection), then the slot is stable.
            keys = await m.dst.execute_command("CLUSTER", "GETKEYSINSLOT", m.slot, 1000)
            if keys:
                pipe = m.dst.pipeline(transaction=False)
                for key in keys:
                    pipe.execute_command("ASKING")
                    pipe.execute_command("DEL", key)
                await pipe.execute()
            for node in (m.src, m.dst):
                await node.execute_command("CLUSTER", "SETSLOT", m.slot, "STABLE")
            await m.src.aclose()
            await m.dst.aclose()


async def test_an_asked_write_is_waited_for_on_the_node_that_applied_it(
    cluster_store_factory: Callable[..., MemoryStore], migrating: Callable[[str], Any]
) -> None:
    store = cluster_store_factory(wait_replicas=1, wait_timeout=0.05, discovery=False)
    async with asyncio.timeout(LIMIT_S):
        await store.ensure_index()
        key = store.keys.doc("ask-probe")
        m = await migrating(key)
        with pytest.raises(ServerError) as info:
            await store.backend.pipeline("remember", [("HSET", key, "content", "x")])
        assert info.value.code == "server.replication_timeout"
        assert m.target in info.value.details["nodes"], (
            f"the WAIT did not follow the ASKed write to {m.target}: {info.value.details}"
        )
        assert await _on_importing_node(m, key, "content") == b"x"
        # Not on the migrating node (which may hold other tests' keys of this slot: a count of
        # the slot's keys there was 1, not 0, once in CI).
        assert key.encode() not in await m.src.execute_command("CLUSTER", "GETKEYSINSLOT", m.slot, 1000)


async def test_remember_into_a_migrating_slot_raises_typed_and_is_readable(
    cluster_store_factory: Callable[..., MemoryStore], migrating: Callable[[str], Any]
) -> None:
    """The whole write path (remember's pipeline and scripts) through an ASK: typed error, applied."""
    store = cluster_store_factory(wait_replicas=1, wait_timeout=0.05, discovery=False)
    async with asyncio.timeout(LIMIT_S):
        await store.ensure_index()
        m = await migrating(store.keys.doc("ask-memory"))
        with pytest.raises(ServerError) as info:
            await store.remember("written during a migration", id="ask-memory", thread_id="ask")
        assert info.value.code == "server.replication_timeout"
        assert m.target in info.value.details["nodes"]
        # Applied where the ASK sent it. (Read through the store it is not, until the migration
        # ends: ``get``'s script names the memory's access key too, which does not exist yet, so
        # the importing node answers TRYAGAIN; valkey-py retries until "TTL exhausted".)
        content = await _on_importing_node(m, store.keys.doc("ask-memory"), "content")
        assert content == b"written during a migration"


async def test_a_read_through_tryagain_is_a_typed_connection_error(
    cluster_store_factory: Callable[..., MemoryStore], migrating: Callable[[str], Any]
) -> None:
    """``get`` of a memory whose document is on the importing node and whose access key is on
    neither side: ``TRYAGAIN`` until valkey-py gives up ("TTL exhausted"), retried by the store,
    then a ``StoreConnectionError`` that says why (it was an ``internal`` error)."""
    store = cluster_store_factory(discovery=False)
    async with asyncio.timeout(LIMIT_S):
        await store.ensure_index()
        await migrating(store.keys.doc("tryagain"))
        await store.remember("written during a migration", id="tryagain", thread_id="ask")
        with pytest.raises(StoreConnectionError) as info:
            await store.get("tryagain")
        assert info.value.code == "connection.failed" and "slot migration" in str(info.value)
        assert info.value.details["attempts"] == store.backend.retry.attempts


async def _on_importing_node(m: Migration, key: str, field: str) -> Any:
    """``HGET`` on the importing node (``ASKING`` then the read, one connection: a pipeline)."""
    pipe = m.dst.pipeline(transaction=False)
    pipe.execute_command("ASKING")
    pipe.execute_command("HGET", key, field)
    return (await pipe.execute())[1]
