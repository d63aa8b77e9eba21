"""Replicas on the embedded engine (Valkey + RediSearch 2.10): ``wait_replicas`` and a promotion.

The embedded server is one process; nothing stops an operator from giving it a replica
(``--replicaof``), and Valkey replicates RediSearch's FT.CREATE and the hashes it
indexes like any other write. This test starts its own two embedded servers, a primary
and its replica, whatever engine the session runs:

* a store with ``wait_replicas=1`` on the primary: every write is confirmed by the
  replica (no ``server.replication_timeout``), reads answer as usual;
* the replica answers a search of its own (read-only) with every memory: it indexed
  what it received by replication;
* the primary is killed (SIGKILL), the replica promoted (``REPLICAOF NO ONE``): a store
  on it has every acknowledged memory, its index answers recall (each memory's own
  vector finds it first), and it takes new writes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.server import EmbeddedServer

pytestmark = [
    pytest.mark.integration,
    # RediSearch only (these servers are the embedded engine whatever the session runs): the
    # valkey-search run would repeat it; its replicas are tests/cluster/test_cluster_replicas.py.
    pytest.mark.skipif(
        os.environ.get("BETTERDB_TEST_ENGINE") == "valkey-search", reason="RediSearch replicas: embedded run"
    ),
]

LIMIT_S = 60.0  # generous: a hang fails the test, a duration is never asserted
N = 12
DIM = 384


@pytest.fixture
def pair() -> Iterator[tuple[EmbeddedServer, EmbeddedServer]]:
    """An embedded primary and an embedded replica of it (both throw-away)."""
    primary = EmbeddedServer(data_dir=None, persistence=False).start()
    replica = None
    try:
        assert primary.port is not None
        replica = EmbeddedServer(
            data_dir=None, persistence=False, extra_args=("--replicaof", "127.0.0.1", str(primary.port))
        ).start()
        yield primary, replica
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()


def _unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(DIM)
    return [float(x) for x in v / np.linalg.norm(v)]


def _store(client: avalkey.Valkey, name: str, **options: Any) -> MemoryStore:
    return MemoryStore(client=client, name=name, embedder=HashingEmbedder(), discovery=False, **options)


async def _linked(client: avalkey.Valkey) -> bool:
    info = await client.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


async def test_a_redisearch_replica_confirms_writes_and_serves_after_promotion(
    pair: tuple[EmbeddedServer, EmbeddedServer], unique_name: str
) -> None:
    primary, replica = pair
    p = avalkey.Valkey.from_url(primary.url)
    r = avalkey.Valkey.from_url(replica.url, decode_responses=True)
    store = _store(p, unique_name, wait_replicas=1, wait_timeout=5.0)
    try:
        async with asyncio.timeout(LIMIT_S):
            while not await _linked(r):
                await asyncio.sleep(0.05)
            await store.ensure_index()
            ids = [
                await store.remember(f"memory {i}", vector=_unit(i), thread_id=f"t{i % 3}") for i in range(N)
            ]  # each confirmed by the replica, or it raises server.replication_timeout
            assert await store.count() == N
            waits = (await p.info("commandstats")).get("cmdstat_wait", {}).get("calls", 0)
            assert waits >= N, f"each remember sent its WAIT ({waits} sent)"
            # The replica indexed the replicated hashes: a search of its own finds them all.
            reply = await r.execute_command(
                "FT.SEARCH", f"{unique_name}:mem:idx", "*", "NOCONTENT", "LIMIT", 0, 100
            )
            assert reply[0] == N
            # Failover by hand: the primary dies, the replica is promoted.
            assert primary.pid is not None
            os.kill(primary.pid, signal.SIGKILL)
            await r.execute_command("REPLICAOF", "NO", "ONE")
            promoted = _store(avalkey.Valkey.from_url(replica.url), unique_name)
            try:
                assert await promoted.count() == N
                assert {i.id for i in (await promoted.list(limit=100)).items} == set(ids)
                for i, mid in enumerate(ids):
                    hits = await promoted.recall_by_vector(_unit(i), k=3, threshold=2.0, reinforce=False)
                    assert hits and hits[0].item.id == mid, f"the promoted replica's index finds {mid} first"
                new = await promoted.remember("after the failover", vector=_unit(999))
                assert (await promoted.get(new)) is not None
                assert await promoted.count() == N + 1
            finally:
                await promoted.close()
                await promoted.backend.client.aclose()
    finally:
        await store.close()
        await p.aclose()
        await r.aclose()
