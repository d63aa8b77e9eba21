"""L1, the discovery marker and live config on a 3-primary valkey-search cluster.

Only the parts that do not depend on long-term memory (L2) are tested here: stores
are built with ``summarize_batch=0`` (no rolling summaries into L2) and
``retrieve_context`` with no memory budget (no recall).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import ContextBudget, HashingEmbedder, MemoryStore
from betterdb_memory.core.keys import KeySpace
from betterdb_memory.core.tunables import FIELD_HALF_LIFE, ConfigSnapshot, config_key
from betterdb_memory.observability.discovery import (
    REGISTRY_KEY,
    DiscoveryMarker,
    StatsHash,
    heartbeat_key,
    stats_key,
)
from betterdb_memory.observability.live_config import LiveConfig

pytestmark = pytest.mark.integration

HOSTILE_IDS = ["t", "T", "{x}", "a}b{c", "}{", "ünï cödé", "x" * 200, "a:b:c", "with space"]


@pytest.fixture
async def make_cluster_store(
    cluster_client: ValkeyCluster, unique_name: str
) -> AsyncIterator[Callable[..., MemoryStore]]:
    made: list[MemoryStore] = []

    def factory(**options: Any) -> MemoryStore:
        options.setdefault("client", cluster_client)
        options.setdefault("name", unique_name)
        options.setdefault("embedder", HashingEmbedder())
        options.setdefault("summarize_batch", 0)
        options.setdefault("discovery", False)
        store = MemoryStore(**options)
        made.append(store)
        return store

    try:
        yield factory
    finally:
        for store in made:
            await store.close()


def test_l1_keys_of_one_session_share_a_hash_slot(cluster_client: ValkeyCluster, unique_name: str) -> None:
    """Turns, meta, lock and cursor of one (agent, thread) hash to one slot, whatever the ids hold."""
    keys = KeySpace(unique_name)
    slots_of_sessions = set()
    for agent in (None, "agent", *HOSTILE_IDS):
        for thread in HOSTILE_IDS:
            sk = keys.session(agent, thread)
            slots = {
                cluster_client.keyslot(k) for k in (sk.turns, sk.meta, sk.summary_lock, sk.summary_cursor)
            }
            assert len(slots) == 1, (agent, thread)
            slots_of_sessions |= slots
    assert len(slots_of_sessions) > 50  # sessions themselves spread over the slots


async def test_server_agrees_on_the_session_slot(cluster_client: ValkeyCluster, unique_name: str) -> None:
    """CLUSTER KEYSLOT on the server gives every key of a session the same slot as the client computes."""
    sk = KeySpace(unique_name).session("a}b{c", "{x}")
    for key in (sk.turns, sk.meta, sk.summary_lock, sk.summary_cursor):
        slot = await cluster_client.execute_command("CLUSTER KEYSLOT", key, target_nodes=ValkeyCluster.RANDOM)
        assert int(slot) == cluster_client.keyslot(sk.turns)


async def test_turns_of_many_sessions_over_every_shard(
    make_cluster_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    """store_turn / get_recent_turns / get_session_metadata across sessions that land on all three shards."""
    store = make_cluster_store(max_session_turns=4)
    sessions = [(f"agent-{i % 3}", f"thread-{i}") for i in range(24)]
    for agent, thread in sessions:
        for n in range(6):
            await store.store_turn(thread, f"q{n} of {thread}", f"a{n}", agent_id=agent)
    nodes = {cluster_client.get_node_from_key(store.keys.session(a, t).turns).name for a, t in sessions}
    assert len(nodes) == 3
    for agent, thread in sessions:
        turns = await store.get_recent_turns(thread, agent_id=agent)
        assert [t.user_message for t in turns] == [f"q{n} of {thread}" for n in range(2, 6)]
        assert [t.seq for t in turns] == [3, 4, 5, 6]
        meta = await store.get_session_metadata(thread, agent_id=agent)
        assert meta is not None and (meta.turn_count, meta.retained_turns) == (6, 4)


async def test_concurrent_writers_number_every_turn_once(
    make_cluster_store: Callable[..., MemoryStore],
) -> None:
    """100 concurrent store_turn calls on one session: exact count, unique consecutive seqs."""
    store = make_cluster_store(max_session_turns=200)
    ids = await asyncio.gather(*(store.store_turn("busy", f"q{i}", f"a{i}") for i in range(100)))
    turns = await store.get_recent_turns("busy")
    assert sorted(t.seq for t in turns) == list(range(1, 101))
    assert {t.id for t in turns} == set(ids)
    meta = await store.get_session_metadata("busy")
    assert meta is not None and meta.turn_count == 100


async def test_retrieve_context_from_turns_alone(make_cluster_store: Callable[..., MemoryStore]) -> None:
    """With no memory budget, retrieve_context reads only L1: the newest turns that fit, in order."""
    store = make_cluster_store(budget=ContextBudget(system=0.1, memories=0.0, turns=0.8, current_turn=0.1))
    for n in range(8):
        await store.store_turn("ctx", f"question number {n}", f"answer number {n}", agent_id="a")
    ctx = await store.retrieve_context("ctx", "what next?", token_budget=4096, agent_id="a")
    assert [t.seq for t in ctx.turns] == list(range(1, 9)) and ctx.memories == ()
    small = await store.retrieve_context("ctx", "what next?", token_budget=60, agent_id="a")
    assert 0 < len(small.turns) < 8 and [t.seq for t in small.turns] == list(range(9 - len(small.turns), 9))


async def test_clear_session_and_script_reload_on_every_primary(
    make_cluster_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    """SCRIPT FLUSH on every primary (a restart, a failover): L1 reloads its scripts and writes each turn once."""
    store = make_cluster_store()
    await store.store_turn("s", "q0", "a0")
    await cluster_client.script_flush()
    await store.store_turn("s", "q1", "a1")
    meta = await store.get_session_metadata("s")
    assert meta is not None and (meta.turn_count, meta.retained_turns) == (2, 2)
    await cluster_client.script_flush()
    await store.clear_session("s")
    assert await store.get_session_metadata("s") is None
    assert await store.get_recent_turns("s") == []


async def test_discovery_marker_on_a_cluster(cluster_client: ValkeyCluster, unique_name: str) -> None:
    """Register, heartbeat and close with a cluster client: the registry, protocol and heartbeat keys."""
    marker = DiscoveryMarker(
        cluster_client, unique_name, index_name=f"{unique_name}:mem:idx", stats_key=stats_key(unique_name)
    )
    field = await marker.register()
    assert field is not None
    assert await cluster_client.hget(REGISTRY_KEY, field) is not None
    assert await cluster_client.exists(heartbeat_key(field)) == 1
    assert await marker.heartbeat_once() is True
    await marker.close()
    assert await cluster_client.exists(heartbeat_key(field)) == 0
    await cluster_client.hdel(REGISTRY_KEY, field)

    stats = StatsHash(cluster_client, stats_key(unique_name))
    await stats.incr("remembers", 2)
    await stats.incr_many({"recalls": 3, "recall_hits": 1})
    counters = await stats.read()
    assert (counters["remembers"], counters["recalls"], counters["recall_hits"]) == (2, 3, 1)


async def test_live_config_on_a_cluster(cluster_client: ValkeyCluster, unique_name: str) -> None:
    """Set, refresh and unset a tunable in the config hash through a cluster client; bad values are refused."""
    defaults = ConfigSnapshot()
    live = LiveConfig(cluster_client, config_key(unique_name), defaults)
    changed = await live.set(FIELD_HALF_LIFE, 3600)
    assert changed.half_life_seconds == 3600
    other = LiveConfig(cluster_client, config_key(unique_name), defaults)
    assert (await other.refresh()).half_life_seconds == 3600  # another process sees it
    await cluster_client.hset(config_key(unique_name), FIELD_HALF_LIFE, "-5")
    assert (await other.refresh()).half_life_seconds == 3600  # a bad value keeps the last good one
    assert other.rejections
    await live.unset(FIELD_HALF_LIFE)
    assert (await live.refresh()).half_life_seconds == defaults.half_life_seconds
    await live.close()
    await other.close()
