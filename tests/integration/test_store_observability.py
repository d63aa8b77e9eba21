"""What operators see of a running store: Monitor's reads, live config, metrics, spans."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from betterdb_memory import MemoryStore
from betterdb_memory.dialect import parse_ft_info

pytestmark = pytest.mark.integration


def vec(i: int) -> list[float]:
    v = [0.0] * 384
    v[i] = 1.0
    return v


async def test_monitor_reads_marker_heartbeat_stats_config_and_index(
    make_store: Any, text_client: Any
) -> None:
    """The commands BetterDB Monitor runs, with its field names, show this store as alive and counting."""
    store: MemoryStore = make_store(max_items_per_scope=2)
    await store.remember_many([{"content": f"m{i}", "vector": vec(i), "thread_id": "t"} for i in range(3)])
    await text_client.hset(store.keys.config, "recall.threshold", "0.4")
    await store.refresh_config()
    await store.stats()  # flushes batched counters

    registry = await text_client.hgetall("__betterdb:caches")
    marker = json.loads(registry[f"{store.name}:mem"])
    assert marker["type"] == "agent_memory" and marker["prefix"] == store.name
    assert marker["protocol_version"] == 1 and marker["index_name"] == store.keys.index
    assert marker["stats_key"] == store.keys.stats and marker["pid"] == os.getpid()
    assert marker["hostname"] == socket.gethostname() and isinstance(marker["capabilities"], list)
    assert await text_client.get("__betterdb:protocol") == "1"
    heartbeat = await text_client.get(f"__betterdb:heartbeat:{store.name}:mem")
    assert heartbeat and 0 < await text_client.ttl(f"__betterdb:heartbeat:{store.name}:mem") <= 60
    stats = await text_client.hgetall(marker["stats_key"])
    assert stats["evictions"] == "1" and stats["remembers"] == "3"
    config = await text_client.hgetall(f"{store.name}:__mem_config")
    assert config["recall.threshold"] == "0.4"
    info = parse_ft_info(await text_client.execute_command("FT.INFO", marker["index_name"]))
    assert info.num_docs == 2
    await store.close()
    assert await text_client.get(f"__betterdb:heartbeat:{store.name}:mem") is None


async def test_live_config_applies_rejects_and_restores(make_store: Any, text_client: Any) -> None:
    """A valid field applies without restart; an invalid one keeps the last good; removal restores."""
    store: MemoryStore = make_store(threshold=0.2)
    await store.ensure_index()
    await text_client.hset(store.keys.config, "recall.threshold", "0.9")
    assert (await store.refresh_config()).threshold == 0.9
    await store.remember("near", vector=vec(0))
    assert await store.recall_by_vector(vec(0), k=1) != []
    mixed = [0.0] * 384
    mixed[0], mixed[1] = 1.0, 1.0  # similarity 0.85 to vec(0): below 0.9
    assert await store.recall_by_vector(mixed, k=1) == []
    await text_client.hset(store.keys.config, "recall.threshold", "5")
    assert (await store.refresh_config()).threshold == 0.9
    await text_client.hdel(store.keys.config, "recall.threshold")
    assert (await store.refresh_config()).threshold == 0.2
    assert len(await store.recall_by_vector(mixed, k=1)) == 1


async def test_live_cap_change_applies_to_writes(make_store: Any, text_client: Any) -> None:
    store: MemoryStore = make_store()
    await store.ensure_index()
    await text_client.hset(store.keys.config, "maxItemsPerScope", "2")
    await store.refresh_config()
    await store.remember_many([f"item {i}" for i in range(5)])
    assert await store.count() == 2


async def test_metrics_after_workload(make_store: Any) -> None:
    registry = CollectorRegistry()
    store: MemoryStore = make_store(registry=registry, max_items_per_scope=1)
    labels = {"store_name": store.name}
    await store.remember("a", vector=vec(0), thread_id="x")
    await store.remember("a", vector=vec(0), thread_id="x")  # dedup
    await store.remember("b", vector=vec(1), thread_id="x")  # evicts
    await store.recall_by_vector(vec(1), k=3, threshold=0)
    await store.recall_by_vector(vec(5), k=3, threshold=0.99)  # empty
    get = registry.get_sample_value
    assert get("agent_memory_remember_total", labels) == 3
    assert get("agent_memory_dedup_hits_total", labels) == 1
    assert get("agent_memory_evictions_total", labels) == 1
    assert get("agent_memory_recall_total", labels) == 2
    assert get("agent_memory_recall_empty_total", labels) == 1
    assert get("agent_memory_recall_search_seconds_count", labels) == 2


async def test_spans_per_operation(make_store: Any) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store: MemoryStore = make_store(tracer_provider=provider)
    mid = await store.remember("traced", vector=vec(2))
    await store.recall_by_vector(vec(2), k=1, threshold=0)
    await store.forget(mid)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert {"memory.remember", "memory.recall", "memory.forget"} <= set(spans)
    recall = spans["memory.recall"]
    assert recall.attributes is not None
    assert recall.attributes["cache.name"] == store.name
    assert recall.attributes["gen_ai.memory.hits"] == 1
    provider.shutdown()


async def test_l1_metrics_turns_and_context_tokens(make_store: Any) -> None:
    registry = CollectorRegistry()
    store: MemoryStore = make_store(registry=registry)
    labels = {"store_name": store.name}
    await store.store_turn("t", "hello there", "hi, how can I help?")
    await store.store_turn("t", "tell me a joke", "why did the chicken cross the road")
    ctx = await store.retrieve_context("t", "another joke please", token_budget=500)
    assert registry.get_sample_value("agent_memory_turns_stored_total", labels) == 2
    turns_sum = registry.get_sample_value("agent_memory_context_tokens_sum", {**labels, "part": "turns"})
    assert turns_sum == ctx.tokens_used.turns > 0
