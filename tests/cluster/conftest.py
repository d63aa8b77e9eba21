"""A 3-primary valkey-search cluster for the whole session, and a ``ValkeyCluster`` factory.

``make test-cluster`` runs these tests (it exports ``BETTERDB_TEST_CLUSTER=1`` and
``VALKEY_SEARCH_ENGINE``). The cluster comes from the optional test engine
(``../shared/engines/valkey-search/cluster.sh``: Valkey 9.1 + valkey-search 1.2.1 with
``--use-coordinator``, so FT.CREATE reaches every shard and a search sent to any node
fans out). It is started once, on free ports, and always stopped. Without the engine, or
outside ``make test-cluster``, every test here is skipped with the reason.

Each test gets its own store name (``unique_name`` from ``tests/conftest.py``), so
nothing is flushed between tests.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import valkey.asyncio as avalkey
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore
from tests.engines import engine_dir

COORDINATOR_OFFSET = 20294  # valkey-search's coordinator listens on port + 20294 (engine README)
BUS_OFFSET = 10000


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_low(default: int = 32768) -> int:
    """The first port the kernel hands to outgoing connections (``ip_local_port_range``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_base(nodes: int = 3, start: int = 2000) -> int:
    """A base port whose ``nodes`` client, bus and coordinator ports are all free.

    Every port lies below the kernel's ephemeral range where it can: a test that kills a node
    restarts it on the same port, and a client's outgoing connection that was handed that port
    in between made the restart fail ("bind: Address already in use", CI of stop 39). Only when
    the ephemeral range starts too low for that does the search go above it.
    """
    top = _ephemeral_low() - 1 - (nodes - 1) - COORDINATOR_OFFSET
    if top < start + 1000:  # a kernel whose ephemeral range starts low: search above it
        start, top = 30000, 65535 - (nodes - 1) - COORDINATOR_OFFSET
    rng = range(start, top, 10)
    first = start + (os.getpid() * 7) % len(rng) * 10
    for base in [*range(first, rng.stop, 10), *rng]:
        ports = [base + i + off for i in range(nodes) for off in (0, BUS_OFFSET, COORDINATOR_OFFSET)]
        if all(_port_free(p) for p in ports):
            return base
    raise RuntimeError(f"no free port range for a {nodes}-node cluster")


def free_cluster_base() -> int:
    """A base port for a 3-node cluster (see ``free_base``)."""
    return free_base(3)


def _skip_reason() -> str | None:
    if os.environ.get("BETTERDB_TEST_CLUSTER") != "1":
        return "cluster tests run with `make test-cluster` (they start a 3-node valkey-search cluster)"
    if engine_dir() is None:
        return "valkey-search test engine not found (../shared/engines/valkey-search): no cluster to test"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _skip_reason()
    if reason is None:
        return
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.skip(reason=reason))


class Cluster:
    """The running cluster: its nodes' ports and the engine scripts that manage it."""

    def __init__(self, engine: Path, base: int, rundir: str) -> None:
        self.engine = engine
        self.base = base
        self.rundir = rundir
        self.ports = [base, base + 1, base + 2]

    @property
    def url(self) -> str:
        return f"valkey://127.0.0.1:{self.base}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, VALKEY_SEARCH_RUNDIR=self.rundir)
        return subprocess.run(
            [str(self.engine / "cluster.sh"), *args], env=env, capture_output=True, text=True, timeout=120
        )

    def start(self) -> None:
        done = self._run("start", str(self.base))
        if done.returncode != 0:
            raise RuntimeError(f"cluster.sh start {self.base} failed: {done.stderr.strip()[-2000:]}")

    def stop(self) -> None:
        self._run("stop", str(self.base))

    def node_client(self, port: int, **options: Any) -> avalkey.Valkey:
        """A plain (non-cluster) client to one node, for checks the cluster client hides."""
        return avalkey.Valkey(host="127.0.0.1", port=port, **options)


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[Cluster]:
    """The session's cluster, started once on free ports and always stopped."""
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    engine = engine_dir()
    assert engine is not None
    rundir = tempfile.mkdtemp(prefix="betterdb-cluster-")
    cluster = Cluster(engine, free_cluster_base(), rundir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        with contextlib.suppress(OSError):
            subprocess.run(["rm", "-rf", rundir], check=False)


@pytest.fixture
async def cluster_client_factory(valkey_cluster: Cluster) -> AsyncIterator[Callable[..., ValkeyCluster]]:
    """Build ``ValkeyCluster`` clients to the session's cluster; all closed after the test."""
    made: list[ValkeyCluster] = []

    def factory(**options: Any) -> ValkeyCluster:
        options.setdefault("decode_responses", False)
        client = ValkeyCluster(host="127.0.0.1", port=valkey_cluster.base, **options)
        made.append(client)
        return client

    try:
        yield factory
    finally:
        for client in made:
            await client.aclose()


@pytest.fixture
async def cluster_client(cluster_client_factory: Callable[..., ValkeyCluster]) -> ValkeyCluster:
    """One bytes-replies ``ValkeyCluster`` client, initialised (slots map loaded)."""
    client = cluster_client_factory()
    await client.initialize()
    return client


@pytest.fixture
async def cluster_store_factory(
    cluster_client: ValkeyCluster, unique_name: str
) -> AsyncIterator[Callable[..., MemoryStore]]:
    """Stores on the cluster client (HashingEmbedder, no summaries unless given); closed after the test."""
    made: list[MemoryStore] = []

    def factory(**options: Any) -> MemoryStore:
        options.setdefault("client", cluster_client)
        options.setdefault("name", unique_name)
        options.setdefault("embedder", HashingEmbedder())
        options.setdefault("summarize_batch", 0)
        store = MemoryStore(**options)
        made.append(store)
        return store

    try:
        yield factory
    finally:
        for store in made:
            await store.close()
