"""Failover to a replica under writes, with ``wait_replicas=1``: nothing acknowledged is lost.

Each scenario starts its own cluster of 3 primaries with a replica each (``replicas.py``),
then a store with ``wait_replicas=1`` writes (``remember``) and recalls without pause
while one primary fails over:

* ``manual``: ``CLUSTER FAILOVER`` on the replica (the primary hands over once the
  replica caught up; the old primary becomes its replica);
* ``killed``: the replica is frozen (SIGSTOP) until writes to its primary's slots are
  refused as unconfirmed, then the primary is SIGKILLed and the replica thawed; it is
  promoted after the node timeout
  and has no replica of its own until the killed node is started again (empty: nothing
  is persisted), rejoins as the new primary's replica and resyncs.

Then, through the same store (no restart): every write acknowledged before, during and
after the failover reads back and is recalled; the promoted replica answers a search of
its own shard (``LOCALONLY``) with every acknowledged memory of its slots, so it indexed
the writes it received by replication; every call that failed during the failover raised
a typed error (the connection family, or ``server.replication_timeout`` while the promoted
shard had no replica), none hung (each call is bounded by a generous timeout; durations
are never asserted); writes in the failed-over slots are acknowledged again afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np
import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore, RetryPolicy
from betterdb_memory.errors import BetterDBMemoryError, ServerError, StoreConnectionError
from tests.engines import engine_dir

from .replicas import ReplicaCluster, free_base

# valkey-py's cluster client leaves a node object of the promoted replica with an open connection
# behind after a failover (seen 1 run in 3, with and without wait_replicas): it is collected
# unclosed, inside this module (gc.collect below), and only that warning is let through.
_LEAKED = [
    f"ignore:Exception ignored in. <function {where}.__del__:pytest.PytestUnraisableExceptionWarning"
    for where in ("ClusterNode", "AbstractConnection", "StreamWriter")
]

pytestmark = [
    *(pytest.mark.filterwarnings(f) for f in _LEAKED),
    pytest.mark.integration,
    pytest.mark.reliability,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("BETTERDB_TEST_REPLICAS") != "1",
        reason="no replicas: run with scripts/with-valkey-search.sh cluster-replicas (a cluster with a "
        "replica per primary)",
    ),
]

DIM = 384
NAME = "replicas"
THREAD = "rt"
CALL_LIMIT_S = 60.0  # one call past this is a hang (generous: a failover takes seconds)
SCENARIO_LIMIT_S = 240.0
WAIT_S = 3.0  # wait_timeout: long enough for a replica on this machine under load
POLICY = RetryPolicy(attempts=6, base_delay=0.05, max_delay=0.5, budget=15.0)
AFTER = 5  # writes acknowledged in the failed-over slots after recovery
WRITERS = 3  # concurrent writers (each one remember, and a recall every fourth, at a time)
RECALL_K = 10  # see test_cluster_failover.py: KNN 1 on the fan-out misses a few vectors


def _unit(rng: np.random.Generator) -> list[float]:
    v = rng.standard_normal(DIM).astype(np.float32)
    return [float(x) for x in v / np.linalg.norm(v)]


@dataclass
class Outcome:
    """What a scenario saw; the tests assert on it once the cluster is gone."""

    mode: str
    victim: int = 0
    promoted: int = 0
    acknowledged: dict[str, tuple[str, list[float]]] = field(default_factory=dict)
    on_promoted: set[str] = field(default_factory=set)
    after_recovery: int = 0
    calls: int = 0
    errors: list[tuple[str, BaseException]] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    readable: dict[str, str | None] = field(default_factory=dict)
    recalled: set[str] = field(default_factory=set)
    local_hits: set[str] = field(default_factory=set)
    confirmed_while_frozen: list[str] = field(default_factory=list)

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for op, exc in self.errors:
            key = f"{op}:{getattr(exc, 'code', type(exc).__name__)}"
            kinds[key] = kinds.get(key, 0) + 1
        return (
            f"[replicas {self.mode}] calls={self.calls} acked={len(self.acknowledged)} (in the failed-over "
            f"slots {len(self.on_promoted)}, after recovery {self.after_recovery}); errors={kinds}; "
            f"hangs={len(self.hangs)}; readable {sum(v is not None for v in self.readable.values())}/"
            f"{len(self.acknowledged)}; recalled {len(self.recalled)}; found by LOCALONLY on the promoted "
            f"replica {len(self.local_hits & self.on_promoted)}/{len(self.on_promoted)}"
        )


class Workload:
    """remember (and a recall every fourth call) without pause until stopped."""

    def __init__(self, store: MemoryStore, out: Outcome, rng: np.random.Generator) -> None:
        self.store, self.out, self.rng = store, out, rng
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.counted: set[str] = set()  # ids counted toward after_recovery
        self.count_on: int | None = None  # when set: count acks in this node's slots
        self.frozen: int | None = None  # when set: this primary's replica is frozen
        self.unconfirmed = 0  # replication timeouts of writes sent while it was frozen

    async def _call(self, operation: str, fn: object) -> object:
        """Run one call bounded by ``CALL_LIMIT_S``; its result, or the exception it raised (recorded)."""
        self.out.calls += 1
        try:
            async with asyncio.timeout(CALL_LIMIT_S):
                return await fn()  # type: ignore[operator]
        except BetterDBMemoryError as exc:
            self.out.errors.append((operation, exc))
            return exc
        except TimeoutError as exc:
            self.out.hangs.append(operation)
            return exc
        except Exception as exc:  # untyped: the test fails on it
            self.out.errors.append((operation, exc))
            return exc

    async def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            content, vector = f"{self.out.mode} live {i}", _unit(self.rng)
            frozen = self.frozen
            mid = await self._call(
                "remember", lambda c=content, v=vector: self.store.remember(c, vector=v, thread_id=THREAD)
            )
            if frozen is not None and self.frozen == frozen:  # the whole call ran while it was frozen
                if isinstance(mid, str) and self.node_of(mid) == frozen:
                    self.out.confirmed_while_frozen.append(mid)
                self.unconfirmed += getattr(mid, "code", "") == "server.replication_timeout"
            if isinstance(mid, str):
                self.out.acknowledged[mid] = (content, vector)
                if self.count_on is not None and self.node_of(mid) == self.count_on:
                    self.counted.add(mid)
            if i % 4 == 0:
                await self._call(
                    "recall",
                    lambda v=vector: self.store.recall_by_vector(v, k=3, threshold=2.0, reinforce=False),
                )
            await asyncio.sleep(0.005)

    def node_of(self, mid: str) -> int:
        client = self.store.backend.client
        assert isinstance(client, ValkeyCluster)
        node = client.get_node_from_key(self.store.keys.doc(mid))
        assert node is not None
        return int(node.port)

    def start(self, writers: int = WRITERS) -> None:
        self.tasks = [asyncio.create_task(self.run()) for _ in range(writers)]

    async def until(self, check: object, what: str, limit_s: float = 60) -> None:
        deadline = time.monotonic() + limit_s
        while not check():  # type: ignore[operator]
            assert self.tasks and not any(t.done() for t in self.tasks), "the workload stopped"
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {limit_s:g} s")
            await asyncio.sleep(0.05)

    async def finish(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)


async def _role(cluster: ReplicaCluster, port: int) -> str:
    reply = await cluster.ask(port, "ROLE")
    return "" if isinstance(reply, Exception) else str(reply[0])


async def _scenario(cluster: ReplicaCluster, mode: str) -> Outcome:
    out = Outcome(mode)
    rng = np.random.default_rng(30 if mode == "manual" else 31)
    client = ValkeyCluster(host="127.0.0.1", port=cluster.base, decode_responses=False)
    store = MemoryStore(
        client=client, name=NAME, embedder=HashingEmbedder(), summarize_batch=0, discovery=False,
        retry=POLICY, wait_replicas=1, wait_timeout=WAIT_S,
    )  # fmt: skip
    work = Workload(store, out, rng)
    try:
        await client.initialize()
        await cluster.wait_until(cluster.healthy, "all replicas linked")
        await store.ensure_index()
        # 1. Acknowledged with WAIT 1 before anything fails: one at a time and a batch.
        for i in range(20):
            content, vector = f"{mode} before {i}", _unit(rng)
            out.acknowledged[await store.remember(content, vector=vector, thread_id=THREAD)] = (
                content,
                vector,
            )
        batch = [
            {"content": f"{mode} batch {i}", "vector": _unit(rng), "thread_id": THREAD} for i in range(30)
        ]
        for mid, it in zip(await store.remember_many(batch), batch, strict=True):
            out.acknowledged[mid] = (it["content"], it["vector"])

        # 2. Under writes, a primary that is not the default node (searches go there) fails over.
        default = client.get_default_node()
        replicas = await cluster.replica_of()
        out.victim = max(p for p in replicas if p != default.port)
        out.promoted = replicas[out.victim]
        work.start()
        await work.until(lambda: len(out.acknowledged) >= 70, "writes before the failover")
        if mode == "manual":
            reply = await cluster.ask(out.promoted, "CLUSTER", "FAILOVER")
            assert reply is True or reply == "OK", reply
        else:
            # The replica freezes (SIGSTOP): no write to its primary's slots can be confirmed now.
            cluster.freeze(out.promoted)
            work.frozen = out.victim
            await work.until(lambda: work.unconfirmed >= 2, "writes refused while the replica is frozen")
            work.frozen = None
            cluster.kill(out.victim)
            cluster.thaw(out.promoted)

        async def promoted() -> bool:
            return await _role(cluster, out.promoted) == "master"

        await cluster.wait_until(promoted, f"{out.promoted} promoted")
        if mode == "killed":
            await asyncio.sleep(1)  # writes meet the promoted shard without a replica
            cluster.restart(out.victim)  # empty; its nodes.conf makes it the new primary's replica
        await cluster.wait_until(cluster.healthy, "the cluster healthy again, every primary with its replica")

        # 3. The store recovers without a restart: writes in the failed-over slots are acknowledged.
        work.count_on = out.promoted
        await work.until(lambda: len(work.counted) >= AFTER, f"{AFTER} writes acked on the promoted node")
        await work.finish()
        out.after_recovery = len(work.counted)

        # 4. Everything acknowledged reads back and is recalled, through the same store.
        ids = list(out.acknowledged)
        async with asyncio.timeout(CALL_LIMIT_S):
            items = await store.get_many(ids)
        out.readable = {m: (it.content if it else None) for m, it in zip(ids, items, strict=True)}
        for mid, (_, vector) in out.acknowledged.items():
            async with asyncio.timeout(CALL_LIMIT_S):
                hits = await store.recall_by_vector(vector, k=RECALL_K, threshold=2.0, reinforce=False)
            if any(h.item.id == mid for h in hits):
                out.recalled.add(mid)
        out.on_promoted = {mid for mid in ids if work.node_of(mid) == out.promoted}
        # 5. The promoted replica's own index (its shard only) holds the writes it received.
        reply = await cluster.ask(
            out.promoted, "FT.SEARCH", f"{NAME}:mem:idx", f"@threadId:{{{THREAD}}}",
            "NOCONTENT", "LIMIT", 0, 10000, "LOCALONLY",
        )  # fmt: skip
        assert not isinstance(reply, Exception), reply
        prefix = store.keys.doc_prefix
        out.local_hits = {str(k)[len(prefix) :] for k in reply[1:]}
        return out
    finally:
        work.stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*work.tasks), CALL_LIMIT_S)
        with contextlib.suppress(Exception):
            await store.close()
        with contextlib.suppress(Exception):
            await client.aclose()


@contextlib.asynccontextmanager
async def _failover(mode: str) -> AsyncIterator[Outcome]:
    engine = engine_dir()
    if engine is None:
        pytest.skip("valkey-search test engine not found (../shared/engines/valkey-search)")
    rundir = tempfile.mkdtemp(prefix="betterdb-replicas-")
    cluster = ReplicaCluster(engine, free_base(), rundir)
    try:
        cluster.start()
        async with asyncio.timeout(SCENARIO_LIMIT_S):
            outcome = await _scenario(cluster, mode)
        print(f"\n{outcome.summary()}")
        yield outcome
    finally:
        cluster.stop()
        shutil.rmtree(rundir, ignore_errors=True)
        gc.collect()  # the leaked node objects above, while this module's filters apply


@pytest.fixture(scope="module")
async def manual() -> AsyncIterator[Outcome]:
    async with _failover("manual") as outcome:
        yield outcome


@pytest.fixture(scope="module")
async def killed() -> AsyncIterator[Outcome]:
    async with _failover("killed") as outcome:
        yield outcome


def _typed(outcome: Outcome) -> None:
    assert outcome.hangs == []
    for operation, exc in outcome.errors:
        connection = isinstance(exc, StoreConnectionError)
        unconfirmed = isinstance(exc, ServerError) and exc.code == "server.replication_timeout"
        assert connection or unconfirmed, (operation, repr(exc))
        assert exc.details.get("operation") == operation, (operation, exc.details)


def _nothing_lost(outcome: Outcome) -> None:
    assert len(outcome.acknowledged) >= 70 and outcome.on_promoted
    lost = [m for m, (content, _) in outcome.acknowledged.items() if outcome.readable.get(m) != content]
    assert lost == []
    assert set(outcome.acknowledged) - outcome.recalled == set()


async def test_manual_failover_loses_no_acknowledged_write(manual: Outcome) -> None:
    _nothing_lost(manual)


async def test_manual_failover_fails_calls_only_with_typed_errors(manual: Outcome) -> None:
    _typed(manual)


async def test_manual_failover_the_store_writes_to_the_promoted_replica(manual: Outcome) -> None:
    assert manual.after_recovery >= AFTER


async def test_manual_failover_the_promoted_replica_indexed_its_shard(manual: Outcome) -> None:
    assert manual.on_promoted <= manual.local_hits


async def test_killed_primary_loses_no_write_acknowledged_with_wait(killed: Outcome) -> None:
    _nothing_lost(killed)


async def test_killed_primary_fails_calls_only_with_typed_errors(killed: Outcome) -> None:
    """Connection errors while no node serves the slots; ``server.replication_timeout`` while the
    promoted replica has no replica of its own; nothing else, and no hang."""
    _typed(killed)
    assert killed.errors, "a killed primary under writes must fail some call"


async def test_no_write_is_confirmed_while_the_replica_is_frozen(killed: Outcome) -> None:
    """WAIT follows the write on its own connection: while the replica takes nothing, a write to its
    primary's slots is refused as unconfirmed, never acknowledged (a WAIT on another connection
    would count the frozen replica, as it acknowledged everything that connection wrote)."""
    assert killed.confirmed_while_frozen == []


async def test_killed_primary_the_store_recovers_without_a_restart(killed: Outcome) -> None:
    assert killed.after_recovery >= AFTER


async def test_killed_primary_the_promoted_replica_indexed_its_shard(killed: Outcome) -> None:
    assert killed.on_promoted <= killed.local_hits
