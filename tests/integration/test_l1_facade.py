"""AgentMemory and its caches on the real engine: wiring, TTLs, sliding state, erasure."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from betterdb_memory import ConfigurationError, HashingEmbedder, RetryPolicy
from betterdb_memory.facade import AgentMemory

from .test_l1_support import keys_of

pytestmark = pytest.mark.integration


def _memory(client: Any, name: str, **options: Any) -> AgentMemory:
    return AgentMemory(client=client, name=name, embedder=HashingEmbedder(), **options)


async def test_every_option_reaches_its_tier(client: Any, unique_name: str) -> None:
    """Store options reach the store; the store's name, client and retry policy reach every cache."""
    retry = RetryPolicy(attempts=2)
    am = AgentMemory(
        client=client, name=unique_name, embedder=HashingEmbedder(), max_items_per_scope=7, retry=retry,
        session_ttl=60, max_session_turns=9, llm_ttl=11, tool_ttl=12, session_state_ttl=13,
    )  # fmt: skip
    try:
        assert am.memory.max_items_per_scope == 7 and am.memory.retry is retry
        assert am.memory._st.ttl_ms == 60_000 and am.memory._st.window == 9
        assert (am.llm.ttl_ms, am.tool.default_ttl_ms, am.session.ttl_ms) == (11_000, 12_000, 13_000)
        for cache in (am.llm, am.tool, am.session):
            assert cache.retry is retry and cache.prefix.startswith(f"{unique_name}:cache:")
    finally:
        await am.close()
    with pytest.raises(ConfigurationError):
        AgentMemory(name=unique_name)
    with pytest.raises(ConfigurationError):
        AgentMemory(store=am.memory, max_items_per_scope=3)


async def test_llm_cache_hits_misses_and_expires(client: Any, unique_name: str) -> None:
    am = _memory(client, unique_name, llm_ttl=0.3)
    try:
        request = {"messages": [{"role": "user", "content": "2+2?"}], "temperature": 0}
        assert await am.llm.get("m", request) is None
        await am.llm.set("m", request, {"content": "4"})
        assert await am.llm.get(
            "m", {"temperature": 0, "messages": [{"content": "2+2?", "role": "user"}]}
        ) == {"content": "4"}
        assert await am.llm.get("other-model", request) is None
        keys = await keys_of(client, unique_name)
        assert any(k.startswith(f"{unique_name}:cache:llm:") for k in keys)
        await asyncio.sleep(0.45)
        assert await am.llm.get("m", request) is None

        calls = 0

        async def llm() -> str:
            nonlocal calls
            calls += 1
            return "answer"

        assert [await am.llm.get_or_call("m", {"q": 1}, llm) for _ in range(3)] == ["answer"] * 3
        assert calls == 1 and am.llm.hits >= 3
        assert await am.llm.clear() >= 1
    finally:
        await am.close()


async def test_tool_cache_per_tool_ttl_policy(text_client: Any, unique_name: str) -> None:
    """Per-tool TTLs (0 = never cache), canonical args, invalidate(tool); on a decoding client."""
    am = _memory(text_client, unique_name, tool_ttl=60, tool_ttl_policy={"clock": 0, "weather": 0.3})
    try:
        assert not await am.tool.set("clock", {}, "12:00")
        assert await am.tool.get("clock", {}) is None
        await am.tool.set("weather", {"city": "Oslo", "unit": "C"}, {"t": -3})
        assert await am.tool.get("weather", {"unit": "C", "city": "Oslo"}) == {"t": -3}
        await am.tool.set("search", {"q": "a"}, ["r1"])
        await am.tool.set("search", {"q": "b"}, ["r2"])
        await asyncio.sleep(0.45)
        assert await am.tool.get("weather", {"city": "Oslo", "unit": "C"}) is None
        assert await am.tool.get("search", {"q": "a"}) == ["r1"]
        assert await am.tool.invalidate("search") == 2
        assert await am.tool.get("search", {"q": "b"}) is None

        calls = 0

        async def clock() -> str:
            nonlocal calls
            calls += 1
            return f"tick {calls}"

        assert [await am.tool.get_or_call("clock", {}, clock) for _ in range(2)] == ["tick 1", "tick 2"]
    finally:
        await am.close()


async def test_session_state_ttl_slides_with_use(client: Any, unique_name: str) -> None:
    """Each access pushes expiry back; idle state expires; ids with ':' stay separate."""
    am = _memory(client, unique_name, session_state_ttl=0.5)
    try:
        await am.session.set("t", "step", 1, agent_id="a")
        await am.session.update("t", {"cart": ["x"], "step": 2}, agent_id="a")
        await am.session.set("b::t", "step", 99, agent_id="a")
        await am.session.set("t", "step", 77, agent_id="a::b")
        for _ in range(3):
            await asyncio.sleep(0.3)
            assert await am.session.get("t", "step", agent_id="a") == 2  # read refreshes the TTL
        assert await am.session.get_all("t", agent_id="a") == {"cart": ["x"], "step": 2}
        assert await am.session.get("t", "missing", agent_id="a", default="d") == "d"
        assert await am.session.delete("t", "cart", agent_id="a")
        await asyncio.sleep(0.7)
        assert await am.session.get_all("t", agent_id="a") == {}
    finally:
        await am.close()


async def test_facade_erase_covers_session_state(client: Any, unique_name: str) -> None:
    am = _memory(client, unique_name)
    try:
        await am.memory.store_turn("t", "q", "a", agent_id="A")
        await am.session.set("t", "k", "v", agent_id="A")
        await am.session.set("u", "k", "v", agent_id="A")
        await am.session.set("t", "k", "v", agent_id="B")
        assert await am.erase(agent_id="A") == 1 + 2
        assert await am.session.get_all("t", agent_id="A") == {}
        assert await am.session.get("t", "k", agent_id="B") == "v"
    finally:
        await am.close()


async def test_context_manager_and_connect(valkey_url: str, unique_name: str) -> None:
    """connect() owns its client and closes it; ``async with`` creates the index on entry."""
    am = await AgentMemory.connect(valkey_url, name=unique_name, embedder=HashingEmbedder(), llm_ttl=5)
    async with am:
        assert await am.memory.index_info() is not None
        assert am.name == unique_name and am.llm.ttl_ms == 5000
        await am.llm.set("m", {"q": 1}, "r")
        assert await am.llm.get("m", {"q": 1}) == "r"
    assert am.memory._owned_client
