"""What operators see of a running store, through the public MemoryStore API on a real server.

Spans are read through the OpenTelemetry SDK's in-memory exporter, metrics through a
private Prometheus registry, and Monitor's reads are the commands Monitor runs. The
store is built as a betterdb-agent-memory user builds it (``embed_fn=``,
``telemetry=MemoryTelemetryOptions(...)``); only the tracer provider is passed
directly, because the global one can be set once per process.
"""

from __future__ import annotations

import json
import math
import os
import socket
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from betterdb_memory import Fact, MemoryStore, MemoryTelemetryOptions

pytestmark = pytest.mark.integration

DIMS = 8
MEMORY = "The user likes green tea."
SAME = "What tea does the user like?"  # distance 0 to MEMORY: a hit
NEAR = "Which hot drink is it?"  # distance 0.5 to MEMORY: past 0.33, within 2x (a near miss)
FAR = "When is the dentist appointment?"  # distance 1.0: an honest miss


def _unit(i: int) -> list[float]:
    v = [0.0] * DIMS
    v[i] = 1.0
    return v


async def embed(text: str) -> list[float]:
    """A user's ``embed_fn`` with known distances (the README's ``embed`` placeholder, filled)."""
    if text in (MEMORY, SAME):
        return _unit(0)
    if text == NEAR:
        return [0.5, math.sqrt(0.75), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # cosine 0.5 to e0: distance 0.5
    if text == FAR:
        return _unit(7)
    return _unit(2 + sum(text.encode()) % 4)  # anything else: far from every query above


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exp = InMemorySpanExporter()
    yield exp
    exp.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    yield p
    p.shutdown()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def store(
    client: Any, unique_name: str, registry: CollectorRegistry, provider: TracerProvider
) -> AsyncIterator[MemoryStore]:
    s = MemoryStore(
        client=client,
        name=unique_name,
        embed_fn=embed,
        telemetry=MemoryTelemetryOptions(registry=registry),
        tracer_provider=provider,
    )
    try:
        await s.ensure_index()
        yield s
    finally:
        await s.close()


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_spans_carry_monitors_scope_names_cache_name_and_hit(
    store: MemoryStore, exporter: InMemorySpanExporter, unique_name: str
) -> None:
    """Monitor keeps spans whose scope starts with @betterdb/: the reference's scope, names and attributes."""
    await store.remember(MEMORY, thread_id="t1", importance=0.8)
    assert len(await store.recall(SAME, thread_id="t1")) == 1
    assert await store.recall(FAR, thread_id="t1") == []

    async def summarize(items: list[Any]) -> str:
        return "Digest: the user likes green tea."

    async def extract_facts(items: list[Any]) -> list[Fact]:
        return [Fact(subject="drink", statement="The user likes green tea.", date="2024-05-01")]

    await store.consolidate(mode="facts", extract_facts=extract_facts, thread_id="t1")
    await store.consolidate(mode="summary", summarize=summarize, thread_id="t1")

    spans = exporter.get_finished_spans()
    ours = [s for s in spans if s.name.startswith("agent_memory.")]
    assert ours, [s.name for s in spans]
    for span in spans:
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "@betterdb/agent-memory", span.name
        assert _attrs(span).get("cache.name") == unique_name, span.name
    names = [s.name for s in ours]
    for expected in (
        "agent_memory.remember",
        "agent_memory.recall",
        "agent_memory.consolidate",
        "agent_memory.consolidateFacts",
    ):
        assert expected in names, names
    recalls = [_attrs(s) for s in ours if s.name == "agent_memory.recall"]
    assert [a.get("cache.hit") for a in recalls] == [True, False]  # bools, in call order
    assert [a.get("recall.result_count") for a in recalls] == [1, 0]
    remember = next(s for s in ours if s.name == "agent_memory.remember")
    assert _attrs(remember).get("memory.importance") == 0.8


async def test_metrics_have_the_references_names_and_meanings(
    store: MemoryStore, registry: CollectorRegistry, unique_name: str
) -> None:
    labels = {"store_name": unique_name}

    def value(name: str) -> float:
        got = registry.get_sample_value(name, labels)
        return 0.0 if got is None else got

    await store.remember(MEMORY, thread_id="t1")
    await store.remember("The user lives in Lisbon.", thread_id="t1")
    assert len(await store.recall(SAME, thread_id="t1", k=2)) >= 1
    assert await store.recall(FAR, thread_id="t1") == []
    assert value("agent_memory_recall_total") == 2
    assert value("agent_memory_recall_hits_total") == 1  # recalls with a hit, not memories returned
    assert value("agent_memory_recall_empty_total") == 1
    assert value("agent_memory_recall_latency_seconds_count") == 2
    assert value("agent_memory_embedding_calls_total") >= 4  # two memories, two queries

    async def summarize(items: list[Any]) -> str:
        return "digest"

    await store.consolidate(mode="summary", summarize=summarize, thread_id="t1")
    assert value("agent_memory_consolidations_total") == 1


async def test_near_miss_warns_once_and_counts(
    store: MemoryStore, registry: CollectorRegistry, exporter: InMemorySpanExporter, unique_name: str
) -> None:
    """Nothing within 0.33 but the nearest at 0.5: a UserWarning naming the distance, once per store."""
    await store.remember(MEMORY, thread_id="t1")
    with pytest.warns(UserWarning, match=r"0\.500") as caught:
        assert await store.recall(NEAR, thread_id="t1") == []
    assert caught[0].filename == __file__  # points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert await store.recall(NEAR, thread_id="t1") == []
    labels = {"store_name": unique_name}
    assert registry.get_sample_value("agent_memory_recall_near_miss_total", labels) == 2
    recall = [s for s in exporter.get_finished_spans() if s.name == "agent_memory.recall"][-1]
    assert _attrs(recall).get("cache.hit") is False


async def test_monitor_reads_marker_heartbeat_stats_config_and_index(
    client: Any, text_client: Any, unique_name: str
) -> None:
    """The commands BetterDB Monitor runs, with its field names, show this store as alive and counting."""
    store = MemoryStore(
        client=client,
        name=unique_name,
        embed_fn=embed,
        max_items_per_scope=2,
        discovery=True,
        telemetry=MemoryTelemetryOptions(registry=CollectorRegistry()),
    )
    try:
        await store.ensure_index()
        await store.ensure_discovery_ready()
        for text in ("m0", "m1", "m2"):
            await store.remember(text, thread_id="t")  # the third evicts one
        await text_client.hset(f"{unique_name}:__mem_config", "recall.threshold", "1.5")
        await store.refresh_config()
        assert store.current_config().threshold == 1.5  # a distance: valid up to 2
        await store.stats()  # flushes batched counters

        registry = await text_client.hgetall("__betterdb:caches")
        marker = json.loads(registry[f"{unique_name}:mem"])
        assert marker["type"] == "agent_memory" and marker["prefix"] == unique_name
        assert marker["protocol_version"] == 1 and marker["stats_key"] == f"{unique_name}:__mem_stats"
        assert marker["pid"] == os.getpid() and marker["hostname"] == socket.gethostname()
        assert marker["capabilities"][:3] == ["recall", "consolidate", "reinforce"]  # the reference's
        assert await text_client.get("__betterdb:protocol") == "1"
        heartbeat_key = f"__betterdb:heartbeat:{unique_name}:mem"
        assert await text_client.get(heartbeat_key)
        assert 0 < await text_client.ttl(heartbeat_key) <= 60
        stats = await text_client.hgetall(marker["stats_key"])
        assert stats["evictions"] == "1"
        assert (await text_client.hgetall(f"{unique_name}:__mem_config"))["recall.threshold"] == "1.5"
        info = await text_client.execute_command("FT.INFO", f"{unique_name}:mem:idx")
        fields = dict(zip(info[::2], info[1::2], strict=False))
        assert int(fields["num_docs"]) == 2
    finally:
        await store.close()
    assert await text_client.get(f"__betterdb:heartbeat:{unique_name}:mem") is None


async def test_live_config_applies_rejects_and_restores(
    client: Any, text_client: Any, unique_name: str
) -> None:
    """A valid distance applies without restart; an invalid one keeps the last good; removal restores."""
    store = MemoryStore(
        client=client,
        name=unique_name,
        embed_fn=embed,
        default_threshold=0.2,
        telemetry=MemoryTelemetryOptions(registry=CollectorRegistry()),
    )
    key = f"{unique_name}:__mem_config"
    try:
        await store.ensure_index()
        await store.remember(MEMORY, thread_id="t1")
        assert await store.recall(FAR, thread_id="t1") == []
        await text_client.hset(key, "recall.threshold", "0.6")
        await store.refresh_config()
        assert store.current_config().threshold == 0.6
        assert len(await store.recall(NEAR, thread_id="t1")) == 1  # 0.5 <= 0.6
        await text_client.hset(key, "recall.threshold", "5")
        await store.refresh_config()
        assert store.current_config().threshold == 0.6  # the last good value, not the default
        await text_client.hdel(key, "recall.threshold")
        await store.refresh_config()
        assert store.current_config().threshold == 0.2
        weights = store.current_config().weights
        assert (weights.similarity, weights.recency, weights.importance) == (0.6, 0.25, 0.15)
    finally:
        await store.close()


async def test_l1_metrics_turns_and_context_tokens(make_store: Any) -> None:
    registry = CollectorRegistry()
    store: MemoryStore = make_store(telemetry=MemoryTelemetryOptions(registry=registry))
    labels = {"store_name": store.name}
    await store.store_turn("t", "hello there", "hi, how can I help?")
    await store.store_turn("t", "tell me a joke", "why did the chicken cross the road")
    ctx = await store.retrieve_context("t", "another joke please", token_budget=500)
    assert registry.get_sample_value("agent_memory_turns_stored_total", labels) == 2
    turns_sum = registry.get_sample_value("agent_memory_context_tokens_sum", {**labels, "part": "turns"})
    assert turns_sum == ctx.tokens_used.turns > 0
