"""Usage examples of the public API, checked by ``mypy --strict`` in ``make check`` (never run).

If a public signature changes in a way that breaks users' typed code, this file stops
type-checking (structlog's ``tests/typing/api.py`` does the same).
"""

from __future__ import annotations

import valkey.asyncio as valkey

from betterdb_memory import (
    AgentMemoryConfig,
    ConsolidateFactsResult,
    ConsolidateResult,
    ConsolidationConfig,
    Fact,
    HashingEmbedder,
    MemoryConfigRefreshConfig,
    MemoryHit,
    MemoryInput,
    MemoryItem,
    MemoryListOptions,
    MemoryPage,
    MemoryStore,
    RecallWeights,
    SyncAgentMemory,
    SyncMemoryStore,
)
from betterdb_memory.testing import ScriptedFactExtractor, ScriptedSummarizer, temporary_store


async def embed(text: str) -> list[float]:
    return [float(len(text)), 1.0, 0.5]


async def reference_style(client: valkey.Valkey) -> None:
    store = MemoryStore(client=client, name="myapp", embed_fn=embed)
    await store.ensure_index()
    mid: str = await store.remember("hello", importance=None, tags=["a"], ttl=0, thread_id="t1")
    hits: list[MemoryHit] = await store.recall("hi", k=None, threshold=0.33, reinforce=None, thread_id="t1")
    item: MemoryItem = hits[0].item
    created_ms: int = item.created_at
    similarity: float = hits[0].similarity
    assert mid and created_ms and similarity
    page: MemoryPage = await store.list(MemoryListOptions(thread_id="t1", limit=10))
    total: int = page.total
    forgotten: int = await store.forget_by_scope(thread_id="t1", tags=["a"])
    ok: bool = await store.forget(id=mid)
    weight: float = store.current_config().weights.similarity
    assert total >= 0 and forgotten >= 0 and ok in (True, False) and weight >= 0
    await store.close()


async def extras(client: valkey.Valkey) -> None:
    store = MemoryStore(
        client=client,
        name="app",
        embedder=HashingEmbedder(64),
        default_threshold=0.6,
        weights=RecallWeights(similarity=0.7, recency=0.2, importance=0.1),
        max_items_per_scope=100,
        config_refresh=MemoryConfigRefreshConfig(interval_ms=10_000),
        consolidation=ConsolidationConfig(fact_source="fact", fact_importance=0.8),
        dedup=True,
    )
    ids: list[str] = await store.remember_many(["a", {"content": "b", "thread_id": "t"}])
    count: int = await store.count(thread_id="t", tags=None)
    summary = await store.consolidate("summary", ScriptedSummarizer("digest"), thread_id="t")
    assert isinstance(summary, ConsolidateResult) and ids and count >= 0
    facts = await store.consolidate(
        "facts", extract_facts=ScriptedFactExtractor([Fact("city", "Lisbon")]), thread_id="t"
    )
    assert isinstance(facts, ConsolidateFactsResult)
    await store.close()


async def typed_writes(store: MemoryStore) -> None:
    """remember_many's mapping form is a TypedDict; sensitivity and kind are closed sets of values."""
    item: MemoryInput = {"content": "b", "thread_id": "t", "sensitivity": "pii", "tags": ["x"]}
    ids: list[str] = await store.remember_many(["a", item])
    await store.remember_many([{"content": "c", "thred_id": "t"}])  # type: ignore[list-item]
    await store.remember_many([{"thread_id": "t"}])  # type: ignore[list-item]
    await store.remember("x", sensitivity="secret")  # type: ignore[arg-type]
    hits: list[MemoryHit] = await store.recall("x", exclude_sensitivity=["pii", "sensitive"])
    assert ids and hits is not None


async def in_tests() -> None:
    async with temporary_store(max_items_per_scope=10) as store:
        await store.remember("x")


def config() -> AgentMemoryConfig:
    return AgentMemoryConfig(default_threshold=0.4, max_items_per_scope=50, discovery=False)


def sync_api(url: str) -> None:
    """The blocking classes carry the async signatures: a wrong argument type is an error here too."""
    with SyncMemoryStore.connect(url, name="app", embedder=HashingEmbedder(64)) as store:
        mid: str = store.remember("hello", importance=0.5, tags=["a"], thread_id="t1")
        hits: list[MemoryHit] = store.recall("hi", k=3, thread_id="t1")
        item: MemoryItem | None = store.get(mid)
        page: MemoryPage = store.list(thread_id="t1", limit=10)
        n: int = store.count(thread_id="t1")
        ok: bool = store.forget(mid)
        turn: str = store.store_turn("t1", "question", "answer")
        rendered: str = store.retrieve_context("t1", "question", token_budget=512).render()
        name: str = store.name
        store.consolidation_lock_ttl = 10.0
        assert hits and item and page and n and ok and turn and rendered and name
        store.remember(42)  # type: ignore[arg-type]
        store.count("t1")  # type: ignore[call-arg]
        store.capabilities = None  # type: ignore[misc]  # read-only property
    with SyncAgentMemory.connect(url, name="app", embedder=HashingEmbedder(64)) as agent:
        memory: SyncMemoryStore = agent.memory
        erased: int = agent.erase(agent_id="a", thread_id="t1")
        agent.session.set("t1", "mood", "curious")  # the cache tiers are untyped (Any), as upstream
        assert memory and erased >= 0
