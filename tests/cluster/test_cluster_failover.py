"""A killed primary of the 3-primary valkey-search cluster, with AOF and ``appendfsync always``.

Each scenario starts a cluster of its own (the session's cluster has no persistence,
and a kill must not disturb other tests), on free ports, with the options
``cluster.sh`` gives every node plus ``--appendonly yes --appendfsync always`` and
``--cluster-node-timeout 15000`` (Valkey's default: a crash shorter than that does not
put the cluster in the ``fail`` state, so the surviving shards keep serving). Then:

1. memories are written through a ``ValkeyCluster`` (one at a time and in batches);
   an id counts as acknowledged once its call returned;
2. one primary (not the client's default node, which searches go to) is SIGKILLed;
   ``get`` of a memory in its slots and ``remember`` calls until one lands in its
   slots must raise ``StoreConnectionError`` within the store's small ``RetryPolicy``
   (a ``remember`` that lands on a surviving shard is acknowledged and counts too);
3. the node is started again on its port, with the same options and data dir (the
   engine's scripts always start fresh, so the node is started here with the
   engine's own ``start_node``), and the cluster is ``ok`` again;
4. every acknowledged memory must be readable (``get_many``) and recallable
   (``recall_by_vector`` with its own vector, k=10), through the client that lived
   through the outage.

Two scenarios: ``incr`` (the index was created after the last AOF rewrite, so the
AOF's base file predates it: the state of any server that never rewrote its AOF,
which README's production notes advise on valkey-search 1.2.1) and ``rewritten``
(``BGREWRITEAOF`` on every node right after the index was created, so the base file
carries the index definition; every memory is still written after it, into the
incremental file only).

What the engine does in ``incr`` (valkey-search 1.2.1 with the coordinator): the
restarted primary loads its documents but not the index. The AOF holds the index
only as an ``FT.INTERNAL_UPDATE`` entry, which does not rebuild it on load, and the
coordinator's metadata reconciliation does not rebuild it either (observed: none
after minutes). Searches fanned out from a surviving node then leave that shard's
documents out without an error, as ``search.enable-partial-results`` is ``yes`` on
this engine, unless the query asks for ``ALLSHARDS``, which the library sends on a
cluster: then recall fails with a typed error instead of answering in part. That the
memories are not recallable until the index is rebuilt is a strict xfail, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore, RetryPolicy
from betterdb_memory.core.ft_info import parse_ft_info
from betterdb_memory.errors import BetterDBMemoryError, StoreConnectionError
from tests.engines import engine_dir

from .conftest import Cluster, free_cluster_base

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.slow]

DIM = 384
NAME = "failover"
# What cluster.sh passes every node (its module argument, then its server options), and
# what this test adds; a later option wins, so the node timeout here overrides 5000.
MODULE_ARGS = "--use-coordinator"
ENGINE_NODE_OPTIONS = (
    "--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
    "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
)  # fmt: skip
DURABLE_OPTIONS = ("--appendonly", "yes", "--appendfsync", "always", "--cluster-node-timeout", "15000")
# Small on purpose: the error must come fast. One library attempt on a ValkeyCluster
# includes valkey-py's own cluster retries (3 tries, 0.25 s apart, reconnects).
POLICY = RetryPolicy(attempts=3, base_delay=0.02, max_delay=0.1, budget=0.5)
ONE_ATTEMPT_S = 2.5  # the most one attempt above may take once the budget is spent
SCENARIO_LIMIT_S = 45.0
INDEX_WAIT_S = 5.0  # how long the restarted node gets to list and backfill the index
# A memory is recalled when a KNN 10 of its own vector returns it. Not KNN 1: on this cluster a
# KNN 1 whose query names no EF_RUNTIME misses a few stored vectors (1-7 of 600 seen; none on
# standalone, none with EF_RUNTIME in the query): ANN quality of the fan-out, not durability.
RECALL_K = 10

INDEX_NOT_REBUILT = (
    "valkey-search 1.2.1 (coordinator) does not rebuild the index on a primary restarted from an AOF "
    "whose base file predates FT.CREATE: the AOF has it only as FT.INTERNAL_UPDATE, and metadata "
    "reconciliation does not recreate it; the shard's documents are readable but not searchable"
)


class DurableCluster(Cluster):
    """A ``Cluster`` whose nodes run with AOF ``appendfsync always``, and can be killed and restarted."""

    def start(self) -> None:
        done = self._run("start", str(self.base), *DURABLE_OPTIONS)
        if done.returncode != 0:
            raise RuntimeError(f"cluster.sh start {self.base} failed: {done.stderr.strip()[-2000:]}")

    def node_dir(self, port: int) -> Path:
        """The data dir cluster.sh gave the node (``$VALKEY_SEARCH_RUNDIR/cluster-<base>/<port>``)."""
        return Path(self.rundir) / f"cluster-{self.base}" / str(port)

    def pid(self, port: int) -> int | None:
        try:
            return int((self.node_dir(port) / "valkey.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` and wait until it is gone."""
        pid = self.pid(port)
        assert pid is not None, f"no pid file for node {port}"
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _alive(pid):
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {port} (pid {pid}) still alive 10 s after SIGKILL")
            time.sleep(0.02)

    def restart(self, port: int) -> None:
        """Start the node again on its port, with its data dir and the options cluster.sh used.

        The engine's ``start_node`` (common.sh) does not wipe the dir; it returns once
        the node answers PING (after the AOF is loaded).
        """
        script = '. "$1/common.sh"; shift; start_node "$@"'
        args = [str(port), str(self.node_dir(port)), MODULE_ARGS, *ENGINE_NODE_OPTIONS, *DURABLE_OPTIONS]
        env = dict(os.environ, VALKEY_SEARCH_RUNDIR=self.rundir)
        done = subprocess.run(
            ["bash", "-c", script, "restart", str(self.engine), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"restart of node {port} failed: {done.stderr.strip()[-2000:]}")

    def kill_leftovers(self) -> None:
        """After ``stop``: SIGKILL any node of this cluster still alive.

        Its pid file names it; the process must still be that node (valkey-server's title
        names its address), so a reused pid is left alone.
        """
        for port in self.ports:
            pid = self.pid(port)
            if pid is None or not _alive(pid):
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    title = fh.read()
            except OSError:
                continue
            if b"valkey-server" in title and f"127.0.0.1:{port}".encode() in title:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    async def wait_ok(self, limit_s: float) -> None:
        """Until every node reports ``cluster_state:ok`` and knows all three."""
        deadline = time.monotonic() + limit_s
        while True:
            states = []
            for port in self.ports:
                node = self.node_client(port)
                try:
                    states.append((await node.execute_command("CLUSTER", "INFO")).decode())
                except Exception as exc:  # a node still loading answers with an error
                    states.append(repr(exc))
                finally:
                    await node.aclose()
            if all("cluster_state:ok" in s and "cluster_known_nodes:3" in s for s in states):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"cluster not ok {limit_s:g} s after the restart: {states}")
            await asyncio.sleep(0.1)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _unit(rng: np.random.Generator) -> list[float]:
    v = rng.standard_normal(DIM).astype(np.float32)
    return [float(x) for x in v / np.linalg.norm(v)]


@dataclass
class OutageError:
    """What one operation on the killed primary's slots raised, and how long it took."""

    operation: str
    error: BaseException
    seconds: float


@dataclass
class Outcome:
    """Everything a scenario observed; the tests assert on it (the cluster is gone by then)."""

    mode: str
    victim: int = 0
    acknowledged: dict[str, tuple[str, list[float]]] = field(default_factory=dict)
    on_victim: set[str] = field(default_factory=set)
    acked_during_outage: int = 0
    outage: list[OutageError] = field(default_factory=list)
    restart_s: float = 0.0
    index_on_victim: bool = False
    index_ready_on_victim: bool = False
    readable: dict[str, str | None] = field(default_factory=dict)
    recalled: set[str] = field(default_factory=set)
    recall_error: BaseException | None = None

    def summary(self) -> str:
        errors = ", ".join(
            f"{e.operation}: {type(e.error).__name__} "
            f"attempts={getattr(e.error, 'details', {}).get('attempts')} in {e.seconds:.2f} s"
            for e in self.outage
        )
        missing = set(self.acknowledged) - self.recalled
        return (
            f"[failover {self.mode}] acked={len(self.acknowledged)} (on the killed primary "
            f"{len(self.on_victim)}, during the outage {self.acked_during_outage}); {errors}; "
            f"restart {self.restart_s:.2f} s; index on the restarted node: {self.index_on_victim} "
            f"(ready {self.index_ready_on_victim}); readable "
            f"{sum(1 for v in self.readable.values() if v is not None)}/{len(self.acknowledged)}; "
            f"recalled {len(self.recalled)}/{len(self.acknowledged)} (missing {len(missing)}, of which on "
            f"the killed primary {len(missing & self.on_victim)}); recall error: {self.recall_error!r}"
        )


async def _rewrite_aof(cluster: DurableCluster) -> None:
    """BGREWRITEAOF on every node, and wait until each rewrite is done."""
    for port in cluster.ports:
        node = cluster.node_client(port)
        try:
            await node.execute_command("BGREWRITEAOF")
            deadline = time.monotonic() + 20
            while True:
                info = await node.info("persistence")
                if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
                    assert info.get("aof_last_bgrewrite_status") == "ok", info
                    break
                assert time.monotonic() < deadline, f"AOF rewrite of {port} still running after 20 s"
                await asyncio.sleep(0.05)
        finally:
            await node.aclose()


async def _check_durable(cluster: DurableCluster) -> None:
    for port in cluster.ports:
        node = cluster.node_client(port, decode_responses=True)
        try:
            got = await node.config_get("append*")
        finally:
            await node.aclose()
        assert (got.get("appendonly"), got.get("appendfsync")) == ("yes", "always"), (port, got)


async def _index_on(cluster: DurableCluster, port: int, limit_s: float) -> tuple[bool, bool]:
    """(listed, ready) of the store's index on one node, waiting up to ``limit_s`` for both."""
    node = cluster.node_client(port)
    listed = ready = False
    deadline = time.monotonic() + limit_s
    try:
        while True:
            names = await node.execute_command("FT._LIST")
            listed = f"{NAME}:mem:idx".encode() in names
            if listed:
                ready = parse_ft_info(await node.execute_command("FT.INFO", f"{NAME}:mem:idx")).ready
            if (listed and ready) or time.monotonic() > deadline:
                return listed, ready
            await asyncio.sleep(0.1)
    finally:
        await node.aclose()


async def _scenario(cluster: DurableCluster, mode: str) -> Outcome:
    out = Outcome(mode)
    rng = np.random.default_rng(14 if mode == "incr" else 15)
    client = ValkeyCluster(host="127.0.0.1", port=cluster.base, decode_responses=False)
    store = MemoryStore(
        client=client,
        name=NAME,
        embedder=HashingEmbedder(),
        summarize_batch=0,
        discovery=False,
        retry=POLICY,
    )
    try:
        await client.initialize()
        await _check_durable(cluster)
        await store.ensure_index()
        if mode == "rewritten":
            await _rewrite_aof(cluster)

        # 1. Acknowledged writes: one at a time, then batches.
        for i in range(30):
            content, vector = f"{mode} single {i}", _unit(rng)
            out.acknowledged[await store.remember(content, vector=vector, thread_id=f"t{i % 3}")] = (
                content,
                vector,
            )
        for b in range(3):
            batch = [
                {"content": f"{mode} batch {b} item {i}", "vector": _unit(rng), "thread_id": f"t{i % 3}"}
                for i in range(40)
            ]
            for mid, it in zip(await store.remember_many(batch), batch, strict=True):
                out.acknowledged[mid] = (it["content"], it["vector"])

        # 2. Kill a primary that is not the default node (searches go there).
        default = client.get_default_node()
        out.victim = max(n.port for n in client.get_primaries() if n.name != default.name)
        node_of = {mid: client.get_node_from_key(store.keys.doc(mid)).port for mid in out.acknowledged}
        out.on_victim = {mid for mid, port in node_of.items() if port == out.victim}
        assert out.on_victim, "no memory landed on the node to kill"
        cluster.kill(out.victim)

        t0 = time.monotonic()
        try:
            await store.get(next(iter(out.on_victim)))
        except BetterDBMemoryError as exc:
            out.outage.append(OutageError("get", exc, time.monotonic() - t0))
        else:
            raise AssertionError("get of a memory on the killed primary returned")
        for i in range(40):  # until one lands in the killed primary's slots (1/3 each)
            content, vector = f"{mode} outage {i}", _unit(rng)
            t0 = time.monotonic()
            try:
                mid = await store.remember(content, vector=vector, thread_id="outage")
            except BetterDBMemoryError as exc:
                out.outage.append(OutageError("remember", exc, time.monotonic() - t0))
                break
            out.acknowledged[mid] = (content, vector)  # a surviving shard took it
            out.acked_during_outage += 1
        else:
            raise AssertionError("40 remember calls, none in the killed primary's slots")

        # 3. The primary comes back on its port with its data.
        t0 = time.monotonic()
        cluster.restart(out.victim)
        await cluster.wait_ok(limit_s=20)
        out.restart_s = time.monotonic() - t0
        out.index_on_victim, out.index_ready_on_victim = await _index_on(cluster, out.victim, INDEX_WAIT_S)

        # 4. Read back through the client that lived through the outage.
        ids = list(out.acknowledged)
        items = await store.get_many(ids)
        out.readable = {
            mid: (it.content if it is not None else None) for mid, it in zip(ids, items, strict=True)
        }
        try:
            for mid, (_, vector) in out.acknowledged.items():
                hits = await store.recall_by_vector(vector, k=RECALL_K, threshold=2.0, reinforce=False)
                if any(h.item.id == mid for h in hits):
                    out.recalled.add(mid)
        except BetterDBMemoryError as exc:
            out.recall_error = exc
        return out
    finally:
        with contextlib.suppress(Exception):
            await store.close()
        with contextlib.suppress(Exception):
            await client.aclose()


@contextlib.asynccontextmanager
async def _failover(mode: str) -> AsyncIterator[Outcome]:
    """Start a durable cluster, run the scenario, hand over what it saw; always stop the cluster."""
    engine = engine_dir()
    if engine is None:  # tests/cluster/conftest.py skips the whole directory first
        pytest.skip("valkey-search test engine not found (../shared/engines/valkey-search)")
    rundir = tempfile.mkdtemp(prefix="betterdb-failover-")
    cluster = DurableCluster(engine, free_cluster_base(), rundir)
    try:
        cluster.start()
        async with asyncio.timeout(SCENARIO_LIMIT_S):
            outcome = await _scenario(cluster, mode)
        print(f"\n{outcome.summary()}")
        yield outcome
    finally:
        cluster.stop()
        cluster.kill_leftovers()
        shutil.rmtree(rundir, ignore_errors=True)


@pytest.fixture(scope="module")
async def incr() -> AsyncIterator[Outcome]:
    """The index was created after the last AOF rewrite (the base file predates it)."""
    async with _failover("incr") as outcome:
        yield outcome


@pytest.fixture(scope="module")
async def rewritten() -> AsyncIterator[Outcome]:
    """The AOF was rewritten after FT.CREATE; every memory is in the incremental file only."""
    async with _failover("rewritten") as outcome:
        yield outcome


def _assert_typed_and_bounded(outcome: Outcome) -> None:
    assert [e.operation for e in outcome.outage] == ["get", "remember"]
    for e in outcome.outage:
        assert isinstance(e.error, StoreConnectionError), repr(e.error)
        assert e.error.details.get("operation") == e.operation
        assert 1 <= e.error.details.get("attempts", 0) <= POLICY.attempts
        assert e.seconds < POLICY.budget + ONE_ATTEMPT_S, (e.operation, e.seconds)


def _assert_readable(outcome: Outcome) -> None:
    assert len(outcome.acknowledged) >= 150 and outcome.on_victim
    lost = [mid for mid, (content, _) in outcome.acknowledged.items() if outcome.readable.get(mid) != content]
    assert lost == []


# -- incr: the index is not in the AOF's base file --------------------------------------------


async def test_killed_primary_raises_a_connection_error_within_the_retry_budget(incr: Outcome) -> None:
    """get and remember on the killed primary's slots: StoreConnectionError, fast."""
    _assert_typed_and_bounded(incr)


async def test_acknowledged_memories_are_readable_after_the_primary_returns(incr: Outcome) -> None:
    """appendfsync always: every id a call returned before or during the outage reads back."""
    _assert_readable(incr)


@pytest.mark.xfail(strict=True, reason=INDEX_NOT_REBUILT)
async def test_acknowledged_memories_are_recallable_after_the_primary_returns(incr: Outcome) -> None:
    assert incr.recall_error is None
    assert set(incr.acknowledged) - incr.recalled == set()


async def test_recall_after_the_primary_returns_is_complete_or_raises(incr: Outcome) -> None:
    """Never a silent partial answer: all acknowledged memories, or a typed error."""
    assert incr.recall_error is not None or set(incr.acknowledged) <= incr.recalled


# -- rewritten: the index is in the base file, the memories in the incremental file -----------


async def test_with_the_index_in_the_aof_base_a_killed_primary_raises_a_connection_error(
    rewritten: Outcome,
) -> None:
    _assert_typed_and_bounded(rewritten)


async def test_with_the_index_in_the_aof_base_nothing_acknowledged_is_lost(rewritten: Outcome) -> None:
    """Readable and recallable: every acknowledged memory, on the restarted primary too."""
    _assert_readable(rewritten)
    assert rewritten.index_on_victim and rewritten.index_ready_on_victim
    assert rewritten.recall_error is None
    assert set(rewritten.acknowledged) - rewritten.recalled == set()
