"""Writes made by Lua scripts are searchable at once on a 3-primary valkey-search cluster (issue 26).

valkey-search 1.2.1 queues a mutation made inside a script (or MULTI/EXEC) and indexes it
only when the next FT.SEARCH *command* reaches that node, or once the queue holds as many
mutations as the node has writer threads. A search sent to another node reaches the
shard as coordinator fan-out, which does not drain the queue: a retired version stays
out of the history index, a flushed access snapshot out of the main index, for as long
as no search is sent to that node itself. The backend follows such scripts with one
``LOCALONLY`` search per index on the node that ran them (``backend.index_nudge``).
Each check below runs right after its own write, one memory at a time (a queue of one
mutation: below the writer threads' count), on memories spread over every shard.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import MemoryStore
from betterdb_memory.backend.dialect import keyless_route

pytestmark = pytest.mark.integration

Y2019 = 1_546_300_800_000
Y2020 = 1_577_836_800_000
Y2022 = 1_640_995_200_000
ROUNDS = 9


@pytest.fixture
def make_store(cluster_store_factory: Callable[..., MemoryStore]) -> Callable[..., MemoryStore]:
    return cluster_store_factory  # tests/cluster/conftest.py: stores on the cluster client


def unit(i: int) -> list[float]:
    v = np.zeros(384, dtype=np.float32)
    v[i] = 1.0
    return [float(x) for x in v]


def spread_ids(client: ValkeyCluster, store: MemoryStore, prefix: str) -> list[str]:
    """``ROUNDS`` memory ids whose documents (and history documents: same slot) go to each primary in turn."""
    nodes = [node.name for node in client.get_primaries()]
    out: list[str] = []
    n = 0
    while len(out) < ROUNDS:
        mid, n = f"{prefix}-{n}", n + 1
        if client.get_node_from_key(store.keys.doc(mid)).name == nodes[len(out) % len(nodes)]:
            out.append(mid)
    return out


async def test_a_retired_version_is_in_as_of_at_once(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    """Each superseded version (``RETIRE``: RENAME into the history prefix, in Lua) is found by
    ``as_of`` and gone from the current memories as soon as the write that retired it returns."""
    store = make_store()
    missed: list[int] = []
    for n, old in enumerate(spread_ids(cluster_client, store, "old")):
        await store.remember(
            f"Ada {n} lives in Lisbon", id=old, thread_id=f"t{n}", subject="city", valid_from=Y2019
        )
        new = await store.remember(
            f"Ada {n} lives in Porto", thread_id=f"t{n}", subject="city", valid_from=Y2022
        )
        then = await store.list(thread_id=f"t{n}", as_of=Y2020)
        now = await store.count(thread_id=f"t{n}")
        if [i.id for i in then.items] != [old] or now != 1:
            missed.append(n)
        assert (await store.get(new)) is not None
    assert missed == []


async def test_a_flushed_access_snapshot_is_searchable_at_once(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    """The reinforcement flush (``FLUSH``, in Lua) writes ``access_count``; a search filtering on
    it counts the memory as soon as the flush returns."""
    store = make_store(reinforce_write_interval=3600)
    for n, mid in enumerate(spread_ids(cluster_client, store, "m")):
        await store.remember(f"memory {n}", id=mid, vector=unit(n), thread_id="t")
    flush = store._docs.reinforcement.flush
    seen: list[int] = []
    for n in range(ROUNDS):
        await store.recall_by_vector(unit(n), k=1, threshold=2.0, thread_id="t")
        assert await flush() == 1
        reply = await cluster_client.execute_command(
            "FT.SEARCH", store.spec.index, "@access_count:[1 +inf]", "NOCONTENT", "LIMIT", "0", "0",
            **keyless_route(cluster_client),
        )  # fmt: skip
        seen.append(int(reply[0]))
    assert seen == list(range(1, ROUNDS + 1))
