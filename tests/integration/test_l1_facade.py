"""AgentMemory's keyword forms on the real engine: wiring, the cache tiers' TTLs, erasure.

The reference form (``AgentMemory(AgentMemoryOptions(...))``) is in test_facade_contract.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from betterdb_agent_cache import TierDefaults, ToolPolicy

from betterdb_memory import ConfigRefreshOptions, ConfigurationError, HashingEmbedder, RetryPolicy
from betterdb_memory.facade import AgentMemory

from .test_l1_support import keys_of

pytestmark = pytest.mark.integration


def _memory(client: Any, name: str, **options: Any) -> AgentMemory:
    return AgentMemory(client=client, name=name, embedder=HashingEmbedder(), **options)


async def test_every_option_reaches_its_tier(client: Any, unique_name: str) -> None:
    """Store options reach the store; cache options reach the cache tiers; one client and name."""
    retry = RetryPolicy(attempts=2)
    am = AgentMemory(
        client=client, name=unique_name, embedder=HashingEmbedder(), max_items_per_scope=7, retry=retry,
        session_ttl=60, max_session_turns=9, default_ttl=300, tier_defaults={"llm": TierDefaults(ttl=11)},
    )  # fmt: skip
    store = am.memory
    try:
        assert am.memory.max_items_per_scope == 7 and am.memory.retry is retry
        assert am.memory.session_config.ttl_ms == 60_000 and am.memory.session_config.window == 9
        assert am.cache._client is client and am.name == unique_name
        params = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        llm_key = await am.llm.store(params, "hello")
        tool_key = await am.tool.store("search", {"q": 1}, "r")
        await am.session.set("t", "step", "1")
        assert 0 < await client.ttl(llm_key) <= 11
        assert 11 < await client.ttl(tool_key) <= 300
        assert 11 < await client.ttl(f"{unique_name}:session:t:step") <= 300
    finally:
        await am.close()
    with pytest.raises(ConfigurationError):
        AgentMemory(name=unique_name)
    with pytest.raises(ConfigurationError):
        AgentMemory(store=store, max_items_per_scope=3)


async def test_tiers_share_the_name_without_sharing_keys(client: Any, unique_name: str) -> None:
    """Every tier writes under ``<name>:``, each in its own part of the keyspace."""
    am = _memory(client, unique_name)
    try:
        await am.initialize()
        await am.memory.remember("the user lives in Lisbon", thread_id="t")
        await am.llm.store({"model": "m", "messages": []}, "x")
        await am.tool.store("weather", {"city": "Oslo"}, "-3")
        await am.session.set("t", "cart", '["x"]')
        keys = await keys_of(client, unique_name)
        parts = {k.split(":")[1] for k in keys}
        assert {"llm", "tool", "session", "mem", "__stats"} <= parts
        assert (await am.tool.check("weather", {"city": "Oslo"})).response == "-3"
        assert (await am.memory.recall("where does the user live", thread_id="t"))[0].item.content
        # clearing one cache tier leaves the memories alone
        assert await am.llm.clear() == 1
        assert await am.memory.count() == 1
    finally:
        await am.close()


async def test_tool_policy_and_invalidation(client: Any, unique_name: str) -> None:
    # betterdb-agent-cache loads the policy hash in the background when it starts; a load that
    # lands between set_policy's local update and its HSET replaces the new policy with the
    # old hash (an upstream race). Policy refresh off keeps this test about the policy itself.
    am = _memory(
        client, unique_name, default_ttl=600, cache_config_refresh=ConfigRefreshOptions(enabled=False)
    )
    try:
        await am.tool.set_policy("weather", ToolPolicy(ttl=5))
        key = await am.tool.store("weather", {"city": "Oslo", "unit": "C"}, "-3")
        assert 0 < await client.ttl(key) <= 5
        assert (await am.tool.check("weather", {"unit": "C", "city": "Oslo"})).hit
        await am.tool.store("search", {"q": "a"}, "r1")
        await am.tool.store("search", {"q": "b"}, "r2")
        assert await am.tool.invalidate_by_tool("search") == 2
        assert not (await am.tool.check("search", {"q": "a"})).hit
    finally:
        await am.close()


async def test_session_ttl_slides_on_read(client: Any, unique_name: str) -> None:
    am = _memory(client, unique_name, tier_defaults={"session": TierDefaults(ttl=2)})
    try:
        await am.session.set("t", "step", "1")
        await asyncio.sleep(1.1)
        assert await client.pttl(f"{unique_name}:session:t:step") < 1_000
        assert await am.session.get("t", "step") == "1"
        assert await client.pttl(f"{unique_name}:session:t:step") > 1_500  # the read pushed expiry back
        assert await am.session.get_all("t") == {"step": "1"}
    finally:
        await am.close()


async def test_facade_erase_covers_session_state(client: Any, unique_name: str) -> None:
    """With a thread id, that thread's session state goes too; the tier does not record agents."""
    am = _memory(client, unique_name)
    try:
        await am.memory.store_turn("t", "q", "a", agent_id="A")
        await am.session.set("t", "k", "v")
        await am.session.set("t", "k2", "v")
        await am.session.set("w", "k", "v")
        assert await am.erase(agent_id="A", thread_id="t") == 1 + 2  # one turn, two session keys
        assert await am.session.get_all("t") == {}
        await am.memory.remember("A likes tea", agent_id="A", thread_id="u")
        assert await am.erase(agent_id="A") == 1
        assert await am.session.get("w", "k") == "v"
    finally:
        await am.close()


async def test_context_manager_and_connect(valkey_url: str, unique_name: str) -> None:
    """connect() owns its client and closes it; ``async with`` creates the index on entry."""
    am = await AgentMemory.connect(valkey_url, name=unique_name, embedder=HashingEmbedder(), default_ttl=5)
    async with am:
        store = am.memory
        assert await store.index_info() is not None
        assert am.name == unique_name
        key = await am.llm.store({"model": "m", "messages": [{"role": "user", "content": "q"}]}, "r")
        assert 0 < await store.client.ttl(key) <= 5
        assert (await am.llm.check({"model": "m", "messages": [{"role": "user", "content": "q"}]})).hit
    assert store._owned_client and am.closed
