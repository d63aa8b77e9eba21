"""What an acknowledged write survives by default: not a failover to a replica that lacks it.

Replication is asynchronous: a call returns once the primary applied its write, before
any replica has it (docs/operations/production.md, "Durability"). On one machine the
window is microseconds and a frozen replica's kernel still buffers the stream, so a
failover under load loses nothing there (tests/cluster/test_cluster_replicas.py). This
test opens the window on purpose and deterministically: the replica follows its primary
through a ``FaultProxy``, and ``hold()`` partitions that link (the proxy keeps every
byte; it runs on the test's own event loop, so nothing the primary sends after ``hold()``
returns reaches the replica). Then:

* a write with the default options is acknowledged (``remember`` returns its id);
* the same write with ``wait_replicas=1`` is *not* acknowledged: it raises
  ``ServerError`` ``server.replication_timeout`` after ``wait_timeout``;
* the primary is killed (SIGKILL), the proxy closed (the held bytes dropped), the
  replica promoted (``REPLICAOF NO ONE``): a store on it has every write confirmed
  before the partition, and neither of the two: the acknowledged default write is
  lost, the ``wait_replicas`` one was never acknowledged. Zero acknowledged writes lost
  with ``WAIT``, one without.

Servers of the session's engine (embedded RediSearch, or valkey-search under
``make test-valkey-search``), started by the test; bounded by ``LIMIT_S``, no sleep
races anything (every wait polls a condition).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore, ServerError
from betterdb_memory.server import EmbeddedServer
from tests.engines import own_server_binaries

from .conftest import FaultProxy, random_unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

LIMIT_S = 60.0  # generous: a hang fails the test, a duration is never asserted
WAIT_TIMEOUT = 0.5  # seconds the waited write waits for a replica that cannot answer
BEFORE = 4  # writes confirmed by the replica before the partition


class _Pair:
    """A primary, a ``FaultProxy`` in front of it, and a replica that follows it through the proxy."""

    def __init__(self, primary: EmbeddedServer, proxy: FaultProxy, replica: EmbeddedServer) -> None:
        self.primary, self.proxy, self.replica = primary, proxy, replica


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[_Pair]:
    binaries = own_server_binaries(tmp_path)
    primary = EmbeddedServer(tmp_path / "primary", persistence=False, binaries=binaries)
    await asyncio.to_thread(primary.start)
    replica: EmbeddedServer | None = None
    proxy = await FaultProxy("127.0.0.1", primary.port or 0).start()
    try:
        replica = EmbeddedServer(
            tmp_path / "replica",
            persistence=False,
            binaries=binaries,
            extra_args=("--replicaof", "127.0.0.1", str(proxy.port)),
        )
        await asyncio.to_thread(replica.start)
        yield _Pair(primary, proxy, replica)
    finally:
        await proxy.close()
        for server in (replica, primary):
            if server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(server.kill)


def _vec(seed: int) -> list[float]:
    return random_unit(np.random.default_rng(seed))


def _store(client: avalkey.Valkey, name: str, **options: object) -> MemoryStore:
    return MemoryStore(client=client, name=name, embedder=HashingEmbedder(), discovery=False, **options)  # type: ignore[arg-type]


async def _offset(client: avalkey.Valkey, field: str) -> int:
    return int((await client.info("replication"))[field])


async def _caught_up(primary: avalkey.Valkey, replica: avalkey.Valkey) -> None:
    """Poll until the replica is linked and has processed everything the primary sent so far."""
    while True:
        info = await replica.info("replication")
        if info.get("master_link_status") == "up" and int(info["slave_repl_offset"]) >= await _offset(
            primary, "master_repl_offset"
        ):
            return
        await asyncio.sleep(0.02)


async def test_an_acknowledged_write_is_lost_in_a_failover_without_wait_and_refused_with_it(
    pair: _Pair, unique_name: str
) -> None:
    p = avalkey.Valkey.from_url(pair.primary.url)
    r = avalkey.Valkey.from_url(pair.replica.url)
    plain = _store(p, unique_name)  # the defaults: acknowledged once the primary applied it
    waited = _store(p, unique_name, wait_replicas=1, wait_timeout=WAIT_TIMEOUT)
    promoted: MemoryStore | None = None
    try:
        async with asyncio.timeout(LIMIT_S):
            await _caught_up(p, r)
            confirmed = [await waited.remember(f"confirmed {i}", vector=_vec(i)) for i in range(BEFORE)]
            confirmed.append(await plain.remember("replicated before the partition", vector=_vec(90)))
            await _caught_up(p, r)  # the plain write too (the waited ones raised if unconfirmed)

            pair.proxy.hold()  # the replication link is partitioned from here on
            lost = await plain.remember("acknowledged, never replicated", vector=_vec(91))
            with pytest.raises(ServerError) as refused:
                await waited.remember("waited for, never confirmed", id="unconfirmed", vector=_vec(92))
            assert refused.value.code == "server.replication_timeout"
            assert refused.value.details["acknowledged"] == 0
            # Both writes are applied on the primary: reads there see them.
            assert await plain.get(lost) is not None and await plain.get("unconfirmed") is not None
            assert await plain.count() == BEFORE + 3

            await asyncio.to_thread(pair.primary.kill)
            await pair.proxy.close()  # the held bytes go with it
            await r.execute_command("REPLICAOF", "NO", "ONE")
            promoted = _store(avalkey.Valkey.from_url(pair.replica.url), unique_name)
            assert await promoted.get(lost) is None, "the partitioned replica had the write after all"
            assert await promoted.get("unconfirmed") is None
            for mid in confirmed:
                assert await promoted.get(mid) is not None, (
                    f"a write confirmed before the partition is missing: {mid}"
                )
            assert await promoted.count() == len(confirmed)
    finally:
        for s in (plain, waited, promoted):
            if s is not None:
                with contextlib.suppress(Exception):
                    await s.close()
        if promoted is not None:
            await promoted.backend.client.aclose()
        await p.aclose()
        await r.aclose()
    print(
        f"\n[replication] default options: 1 acknowledged write lost in the failover; "
        f"wait_replicas=1: 0 acknowledged lost ({len(confirmed) - 1} confirmed and kept, 1 refused with "
        f"server.replication_timeout)"
    )
