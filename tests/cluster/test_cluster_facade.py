"""``AgentMemory`` (memory tier + betterdb-agent-cache's tiers) on a valkey-search cluster client."""

from __future__ import annotations

from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import AgentMemory, AgentMemoryOptions, HashingEmbedder, ToolPolicy

pytestmark = pytest.mark.integration


async def test_the_facade_works_on_a_cluster_client(cluster_client: ValkeyCluster, unique_name: str) -> None:
    embedder = HashingEmbedder(64)

    async def embed(text: str) -> list[float]:
        return [float(x) for x in (await embedder.embed([text]))[0]]

    agent = AgentMemory(AgentMemoryOptions(client=cluster_client, name=unique_name, embed_fn=embed))
    try:
        await agent.initialize()
        ids = await agent.memory.remember_many(
            [{"content": f"fact {i} about tea", "thread_id": "t", "agent_id": "a"} for i in range(20)]
        )
        hits = await agent.memory.recall("fact 3 about tea", k=20, thread_id="t", threshold=2.0)
        assert {h.item.id for h in hits} == set(ids)
        request: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        await agent.llm.store(request, "hello")
        assert (await agent.llm.check(request)).hit
        await agent.tool.set_policy("weather", ToolPolicy(ttl=5))
        await agent.tool.store("weather", {"city": "Oslo"}, "-3")
        assert (await agent.tool.check("weather", {"city": "Oslo"})).hit
        await agent.session.set("t", "step", "1")
        assert await agent.session.get("t", "step") == "1"
        assert await agent.memory.forget_by_scope(thread_id="t") == 20
    finally:
        await agent.close()
