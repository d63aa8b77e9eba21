"""A ``WAIT`` cut by a connection fault never confirms the write it followed.

valkey-py's cluster pipeline retries by itself after a connection error or a socket
timeout: it re-sends only the commands whose reply it lacks (or whose reply is falsy).
The write's reply had arrived, so only the ``WAIT`` went again, on a new connection and,
its ``target_nodes`` spent by the first attempt, to the default node: a connection that
wrote nothing, whose ``WAIT`` answers at once with every replica. The write was then
reported as confirmed by a replica that never received it. Seen as a rare failure of
``test_cluster_replicas.py::test_no_write_is_confirmed_while_the_replica_is_frozen``
(two writes at once: a socket timeout resets every connection of the client, so every
``WAIT`` in flight fails together); here it is made certain: a socket timeout (1 s)
shorter than ``wait_timeout`` (3 s) and a frozen replica (SIGSTOP). The write must
end in a typed error (a connection fault, retried and then raised), never in an id.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator

import numpy as np
import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore, RetryPolicy
from betterdb_memory.errors import ServerError, StoreConnectionError
from tests.engines import engine_dir

from .replicas import ReplicaCluster, free_base

pytestmark = [
    pytest.mark.integration,
    pytest.mark.reliability,
    pytest.mark.skipif(
        os.environ.get("BETTERDB_TEST_REPLICAS") != "1",
        reason="no replicas: run with scripts/with-valkey-search.sh cluster-replicas",
    ),
]

LIMIT_S = 120.0  # generous: a hang fails the test, a duration is never asserted
SOCKET_TIMEOUT = 1.0
WAIT_TIMEOUT = 3.0  # longer than the socket timeout: the client gives up on the WAIT first


def _unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(384)
    return [float(x) for x in v / np.linalg.norm(v)]


@pytest.fixture
async def cluster() -> AsyncIterator[ReplicaCluster]:
    engine = engine_dir()
    if engine is None:
        pytest.skip("valkey-search test engine not found (../shared/engines/valkey-search)")
    rundir = tempfile.mkdtemp(prefix="betterdb-wait-retry-")
    nodes = ReplicaCluster(engine, free_base(), rundir)
    try:
        await asyncio.to_thread(nodes.start)
        yield nodes
    finally:
        await asyncio.to_thread(nodes.stop)
        shutil.rmtree(rundir, ignore_errors=True)


async def test_a_wait_cut_by_a_socket_timeout_never_confirms_the_write(cluster: ReplicaCluster) -> None:
    client = ValkeyCluster(host="127.0.0.1", port=cluster.base, socket_timeout=SOCKET_TIMEOUT)
    store = MemoryStore(
        client=client, name="waitretry", embedder=HashingEmbedder(), discovery=False, summarize_batch=0,
        wait_replicas=1, wait_timeout=WAIT_TIMEOUT,
        retry=RetryPolicy(attempts=2, base_delay=0.05, max_delay=0.1, budget=20.0),
    )  # fmt: skip
    frozen: int | None = None
    try:
        async with asyncio.timeout(LIMIT_S):
            await client.initialize()
            await cluster.wait_until(cluster.healthy, "all replicas linked")
            await store.ensure_index()
            # A primary that is not the default node: valkey-py's lone WAIT went to the default node.
            default = client.get_default_node().port
            replicas = await cluster.replica_of()
            victim = max(p for p in replicas if p != default)

            def on_victim(mid: str) -> bool:
                node = client.get_node_from_key(store.keys.doc(mid))
                return node is not None and node.port == victim

            ids = [m for m in (f"w{i}" for i in range(200)) if on_victim(m)][:2]
            assert await store.remember("confirmed before", id=ids[0], vector=_unit(1)) == ids[0]

            frozen = replicas[victim]
            cluster.freeze(frozen)  # it takes nothing from its primary now
            try:
                mid = await store.remember("never replicated", id=ids[1], vector=_unit(2))
            except (StoreConnectionError, ServerError) as exc:
                refused: Exception = exc
            else:
                raise AssertionError(f"{mid} was confirmed by {WAIT_TIMEOUT} s of WAIT on a frozen replica")
            if isinstance(refused, ServerError):
                assert refused.code == "server.replication_timeout", refused
            print(f"\n[wait retry] refused as {type(refused).__name__}: {str(refused)[:160]}")
    finally:
        if frozen is not None:
            cluster.thaw(frozen)
        with contextlib.suppress(Exception):
            await store.close()
        with contextlib.suppress(Exception):
            await client.aclose()
