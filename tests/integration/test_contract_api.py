"""The seed contract, table by table: betterdb-agent-memory 0.7.0's README and issue 13.

Every documented name, parameter, default, return shape and meaning is checked here,
against the real engine, with a user ``embed_fn`` (as the README's users have one) whose
vectors sit at known cosine distances from the query, so thresholds are tested at
their boundary. Where the README is unclear, the expectation is the reference's
observable behaviour, measured against the same kind of server (noted per test).

Extensions are allowed (extra keyword-only parameters, extra fields with defaults,
extra methods); a missing or renamed documented name, another default, or another
meaning is a failure.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
import time
import warnings
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import betterdb_memory
from betterdb_memory import MemoryStore

pytestmark = pytest.mark.integration

DIMS = 8
QUERY = "q"  # embeds to e0; every memory below sits at a chosen cosine distance from it
DEFAULT_THRESHOLD = 0.33
DEFAULT_WEIGHTS = (0.6, 0.25, 0.15)
DEFAULT_HALF_LIFE = 604800
DEFAULT_K = 8


def at_distance(distance: float) -> list[float]:
    """A unit vector at cosine distance ``distance`` (0..2) from e0, in the (e0, e1) plane."""
    cos = 1.0 - distance
    vector = [0.0] * DIMS
    vector[0] = cos
    vector[1] = math.sqrt(max(0.0, 1.0 - cos * cos))
    return vector


class PlaneEmbed:
    """A user ``embed_fn``: ``QUERY`` is e0; registered texts sit at their distance from it;
    any other text gets a unit vector on one of the axes 2..7 (distance 1 from e0)."""

    def __init__(self) -> None:
        self.table: dict[str, list[float]] = {QUERY: at_distance(0.0)}
        self.calls = 0

    def put(self, text: str, distance: float) -> str:
        self.table[text] = at_distance(distance)
        return text

    async def __call__(self, text: str) -> list[float]:
        self.calls += 1
        if text in self.table:
            return list(self.table[text])
        vector = [0.0] * DIMS
        vector[2 + zlib.crc32(text.encode()) % (DIMS - 2)] = 1.0
        return vector


@pytest.fixture(autouse=True)
def no_product_analytics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BETTERDB_TELEMETRY", "false")
    monkeypatch.setenv("DO_NOT_TRACK", "1")


@pytest.fixture
def embed() -> PlaneEmbed:
    return PlaneEmbed()


@pytest.fixture
async def store_factory(
    client: Any, unique_name: str, embed: PlaneEmbed
) -> AsyncIterator[Callable[..., MemoryStore]]:
    """``MemoryStore(client=, name=, embed_fn=)`` exactly as the README builds it (no dimensions)."""
    made: list[MemoryStore] = []

    def factory(**options: Any) -> MemoryStore:
        options.setdefault("client", client)
        options.setdefault("name", f"{unique_name}_{len(made)}")
        options.setdefault("embed_fn", embed)
        store = MemoryStore(**options)
        made.append(store)
        return store

    try:
        yield factory
    finally:
        for store in made:
            await store.close()


@pytest.fixture
async def store(store_factory: Callable[..., MemoryStore]) -> MemoryStore:
    s = store_factory()
    await s.ensure_index()
    return s


def contents(hits: list[Any]) -> list[str]:
    return [hit.item.content for hit in hits]


# ======================================================================================
# Names
# ======================================================================================

DOCUMENTED_NAMES = [
    # README
    "AgentMemory",
    "AgentMemoryOptions",
    "MemoryStore",
    "MemoryHit",
    "ConsolidateResult",
    "ConsolidateFactsResult",
    "ConsolidationConfig",
    "Fact",
    "MemoryConfigSnapshot",
    # issue 13 (AgentMemoryOptions' sub-config, current_config()'s weights, telemetry)
    "AgentMemoryConfig",
    "AgentMemoryRecallConfig",
    "RecallWeights",
    "MemoryDiscoveryConfig",
    "MemoryConfigRefreshConfig",
    "MemoryItem",
    "MemoryTelemetryOptions",
    # seed 000's error names, in this library's one hierarchy
    "EmbeddingError",
    "MemoryNotFoundError",
    "TokenBudgetError",
]


@pytest.mark.parametrize("name", DOCUMENTED_NAMES)
def test_documented_name_is_importable(name: str) -> None:
    assert hasattr(betterdb_memory, name), f"`from betterdb_memory import {name}` must work"


@pytest.mark.parametrize("name", ["EmbeddingError", "MemoryNotFoundError", "TokenBudgetError"])
def test_seed_000_errors_are_in_the_one_hierarchy(name: str) -> None:
    cls = getattr(betterdb_memory, name)
    assert issubclass(cls, betterdb_memory.BetterDBMemoryError)


@pytest.mark.parametrize("field", ["recent_turns", "episodic_memories", "retrieval_duration_ms"])
def test_retrieved_context_answers_to_seed_000_field_names(field: str) -> None:
    cls = betterdb_memory.RetrievedContext
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    assert field in names or isinstance(getattr(cls, field, None), property), field


# ======================================================================================
# Signatures (inspect.signature): names, kinds and defaults
# ======================================================================================

REQUIRED = inspect.Parameter.empty  # documented without a default
ANY = object()  # documented, any default (or none) is fine

# method -> (positional parameters in order, keyword parameters with their defaults)
METHOD_SIGNATURES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "__init__": (
        [],
        {
            "client": REQUIRED,
            "name": ANY,  # required in the reference; a default is an addition
            "embed_fn": None,
            "default_threshold": None,
            "weights": None,
            "half_life_seconds": None,
            "max_items_per_scope": None,
            "discovery": ANY,
            "config_refresh": None,
            "consolidation": None,
            "telemetry": None,
            "analytics": ANY,
        },
    ),
    "ensure_index": ([], {}),
    "remember": (
        ["content"],
        {
            "importance": None,
            "tags": None,
            "source": None,
            "ttl": None,
            "thread_id": None,
            "agent_id": None,
            "namespace": None,
        },
    ),
    "recall": (
        ["query"],
        {
            "k": None,
            "threshold": None,
            "tags": None,
            "weights": None,
            "reinforce": None,
            "thread_id": None,
            "agent_id": None,
            "namespace": None,
        },
    ),
    "forget": (["id"], {}),
    "forget_by_scope": ([], {"thread_id": None, "agent_id": None, "namespace": None, "tags": None}),
    "consolidate": (
        [],
        {
            "mode": ANY,  # required in the reference
            "summarize": None,
            "extract_facts": None,
            "older_than_seconds": None,
            "max_importance": None,
            "delete_sources": None,
            "summary_importance": None,
            "fact_importance": None,
            "tags": None,
            "thread_id": None,
            "agent_id": None,
            "namespace": None,
        },
    ),
    "consolidate_facts": (
        [],
        {
            "extract_facts": REQUIRED,
            "older_than_seconds": None,
            "max_importance": None,
            "fact_importance": None,
            "tags": None,
            "thread_id": None,
            "agent_id": None,
            "namespace": None,
        },
    ),
    "current_config": ([], {}),
    "refresh_config": ([], {}),
    "ensure_discovery_ready": ([], {}),
    "close": ([], {}),
}
ASYNC_METHODS = {m for m in METHOD_SIGNATURES if m not in ("__init__", "current_config")}

P = inspect.Parameter


@pytest.mark.parametrize("method", list(METHOD_SIGNATURES))
def test_memory_store_signature(method: str) -> None:
    positional, keywords = METHOD_SIGNATURES[method]
    fn = getattr(MemoryStore, method)
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
    by_name = {p.name: p for p in params}

    leading = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    assert [p.name for p in leading[: len(positional)]] == positional, f"{method}: positional {positional}"
    for p in leading[: len(positional)]:
        assert p.kind is P.POSITIONAL_OR_KEYWORD, f"{method}({p.name}) must also be accepted by keyword"
        assert p.default is P.empty, f"{method}({p.name}) is documented as required"

    for name, default in keywords.items():
        assert name in by_name, f"{method}: documented parameter {name!r} is missing or renamed"
        p = by_name[name]
        assert p.kind in (P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD), f"{method}: {name} must be a keyword"
        if default is ANY:
            continue
        if default is REQUIRED:
            assert p.default is P.empty, f"{method}: {name} is documented as required"
        else:
            assert p.default == default, f"{method}: {name} defaults to {default!r}, not {p.default!r}"

    documented = set(positional) | set(keywords)
    for p in params:
        if p.name in documented:
            continue
        # Additions must not shift documented positions or become required.
        assert p.kind is P.VAR_KEYWORD or (p.kind is P.KEYWORD_ONLY and p.default is not P.empty), (
            f"{method}: extra parameter {p.name!r} must be keyword-only with a default"
        )

    if method in ASYNC_METHODS:
        assert inspect.iscoroutinefunction(fn), f"{method} is awaited in the README"
    elif method == "current_config":
        assert not inspect.iscoroutinefunction(fn), "current_config() is synchronous in the README"


# dataclass-like option and result types: required keywords, then documented defaults
TYPE_SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "AgentMemoryConfig": (
        {},
        {
            "default_threshold": None,
            "recall": None,
            "max_items_per_scope": None,
            "discovery": True,
            "config_refresh": None,
        },
    ),
    "AgentMemoryRecallConfig": ({}, {"weights": None, "half_life_seconds": None}),
    "ConsolidationConfig": ({}, {"fact_source": None, "fact_importance": None}),
    "MemoryDiscoveryConfig": ({}, {"version": None, "heartbeat_interval_ms": None}),
    "MemoryConfigRefreshConfig": ({}, {"enabled": None, "interval_ms": None}),
    "MemoryTelemetryOptions": ({}, {"tracer_name": None, "metrics_prefix": None, "registry": None}),
    "RecallWeights": ({"similarity": 0.5, "recency": 0.3, "importance": 0.2}, {}),
    "Fact": ({"subject": "employer", "statement": "works at Acme"}, {"date": None, "tombstone": False}),
    "ConsolidateResult": ({"consolidated": 2, "created": ["a"], "deleted": 2}, {}),
    "ConsolidateFactsResult": (
        {"candidates": 3, "facts": 1, "created": ["a"], "deleted": 0, "unmatched_tombstones": ["x"]},
        {},
    ),
}


@pytest.mark.parametrize("type_name", list(TYPE_SHAPES))
def test_type_shape(type_name: str) -> None:
    required, defaults = TYPE_SHAPES[type_name]
    cls = getattr(betterdb_memory, type_name)
    obj = cls(**required)
    for name, value in required.items():
        assert getattr(obj, name) == value, f"{type_name}.{name}"
    for name, value in defaults.items():
        assert getattr(obj, name) == value, f"{type_name}.{name} defaults to {value!r}"


def test_memory_config_snapshot_shape() -> None:
    weights = betterdb_memory.RecallWeights(similarity=0.6, recency=0.25, importance=0.15)
    snap = betterdb_memory.MemoryConfigSnapshot(threshold=0.33, weights=weights, half_life_seconds=60)
    assert snap.threshold == 0.33
    assert snap.weights.similarity == 0.6
    assert snap.half_life_seconds == 60
    assert snap.max_items_per_scope is None


def test_agent_memory_options_shape(client: Any, embed: PlaneEmbed) -> None:
    opts = betterdb_memory.AgentMemoryOptions(client=client, embed_fn=embed)
    assert opts.client is client
    assert opts.embed_fn is embed
    assert opts.name == "betterdb_ac"
    memory = opts.memory
    assert memory.default_threshold is None
    assert memory.recall is None
    assert memory.max_items_per_scope is None
    assert memory.discovery is True
    assert memory.config_refresh is None


# ======================================================================================
# Construction, config snapshot
# ======================================================================================


async def test_embed_fn_without_dimensions_learns_the_dimension(
    store_factory: Callable[..., MemoryStore], embed: PlaneEmbed
) -> None:
    store = store_factory()  # README: MemoryStore(client=client, name="myapp", embed_fn=embed)
    await store.ensure_index()
    mid = await store.remember(embed.put("m-close", 0.1), thread_id="t1")
    hits = await store.recall(QUERY, thread_id="t1")
    assert [h.item.id for h in hits] == [mid]


async def test_ensure_index_is_idempotent(store: MemoryStore) -> None:
    await store.ensure_index()
    await store.ensure_index()


async def test_current_config_defaults(store: MemoryStore) -> None:
    snap = store.current_config()
    assert snap.threshold == pytest.approx(DEFAULT_THRESHOLD)
    assert (snap.weights.similarity, snap.weights.recency, snap.weights.importance) == pytest.approx(
        DEFAULT_WEIGHTS
    )
    assert snap.half_life_seconds == pytest.approx(DEFAULT_HALF_LIFE)
    assert snap.max_items_per_scope is None


async def test_constructor_options_reach_current_config(store_factory: Callable[..., MemoryStore]) -> None:
    weights = betterdb_memory.RecallWeights(similarity=0.5, recency=0.3, importance=0.2)
    store = store_factory(
        default_threshold=1.2, weights=weights, half_life_seconds=3600, max_items_per_scope=7
    )
    snap = store.current_config()
    assert snap.threshold == pytest.approx(1.2)  # a distance: above 1 is valid
    assert (snap.weights.similarity, snap.weights.recency, snap.weights.importance) == pytest.approx(
        (0.5, 0.3, 0.2)
    )
    assert snap.half_life_seconds == pytest.approx(3600)
    assert snap.max_items_per_scope == 7


async def test_none_options_mean_the_defaults(store_factory: Callable[..., MemoryStore]) -> None:
    store = store_factory(
        default_threshold=None,
        weights=None,
        half_life_seconds=None,
        max_items_per_scope=None,
        config_refresh=None,
        consolidation=None,
        telemetry=None,
    )
    snap = store.current_config()
    assert snap.threshold == pytest.approx(DEFAULT_THRESHOLD)
    assert snap.half_life_seconds == pytest.approx(DEFAULT_HALF_LIFE)
    assert snap.max_items_per_scope is None


# ======================================================================================
# remember / get / forget
# ======================================================================================


async def test_remember_returns_a_str_id_and_get_returns_the_item(store: MemoryStore) -> None:
    mid = await store.remember(
        "User prefers dark mode.",
        importance=0.8,
        tags=["preference", "ui"],
        source="chat",
        thread_id="t1",
        agent_id="a1",
        namespace="ns1",
    )
    assert isinstance(mid, str) and mid
    item = await store.get(mid)
    assert item is not None
    assert item.id == mid
    assert item.content == "User prefers dark mode."
    assert item.importance == pytest.approx(0.8)
    assert list(item.tags) == ["preference", "ui"]
    assert item.source == "chat"
    assert (item.thread_id, item.agent_id, item.namespace) == ("t1", "a1", "ns1")
    assert item.access_count == 0
    assert await store.get("no-such-id") is None


async def test_memory_item_times_are_ms_and_tags_a_list(store: MemoryStore) -> None:
    """The reference's MemoryItem: ``created_at``/``last_accessed_at`` are int epoch ms,
    ``tags`` a list (code written for it compares with lists and divides by 1000)."""
    before = int(time.time() * 1000)
    mid = await store.remember("timed", tags=["a", "b"], thread_id="t1")
    after = int(time.time() * 1000)
    item = await store.get(mid)
    assert item is not None
    assert isinstance(item.created_at, int)
    assert before - 1000 <= item.created_at <= after + 1000
    assert item.last_accessed_at >= item.created_at
    assert item.tags == ["a", "b"]


async def test_remember_none_options_are_the_defaults(store: MemoryStore) -> None:
    mid = await store.remember(
        "defaults",
        importance=None,
        tags=None,
        source=None,
        ttl=None,
        thread_id=None,
        agent_id=None,
        namespace=None,
    )
    item = await store.get(mid)
    assert item is not None
    assert item.importance == pytest.approx(0.5)  # the reference's default importance
    assert list(item.tags) == []
    assert item.source is None
    assert (item.thread_id, item.agent_id, item.namespace) == (None, None, None)


async def test_ttl_zero_and_none_mean_no_expiry(store: MemoryStore, client: Any) -> None:
    never = await store.remember("never expires", ttl=0, thread_id="t1")
    unset = await store.remember("no ttl", thread_id="t1")
    timed = await store.remember("expires", ttl=120, thread_id="t1")
    assert await client.ttl(f"{store_name(store)}:mem:{never}") == -1
    assert await client.ttl(f"{store_name(store)}:mem:{unset}") == -1
    assert 0 < await client.ttl(f"{store_name(store)}:mem:{timed}") <= 120
    assert await store.get(never) is not None


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"importance": 1.5}, "importance outside [0, 1]"),
        ({"importance": -0.1}, "importance outside [0, 1]"),
        ({"tags": ["a,b"]}, "tags are stored comma-separated"),
    ],
)
async def test_remember_refuses_bad_input_with_value_error(
    store: MemoryStore, kwargs: dict[str, Any], why: str
) -> None:
    with pytest.raises(ValueError):
        await store.remember("bad", **kwargs)


async def test_forget_by_positional_and_keyword_id(store: MemoryStore) -> None:
    first = await store.remember("first", thread_id="t1")
    second = await store.remember("second", thread_id="t1")
    assert await store.forget(first) is True
    assert await store.forget(id=second) is True
    assert await store.forget(id=second) is False
    assert await store.get(first) is None
    assert await store.get(second) is None


# ======================================================================================
# recall: threshold as a cosine-distance ceiling, similarity, score, k, reinforcement
# ======================================================================================


async def test_default_threshold_is_a_distance_ceiling_of_0_33(store: MemoryStore, embed: PlaneEmbed) -> None:
    await store.remember(embed.put("inside", 0.32), thread_id="t1")
    await store.remember(embed.put("outside", 0.34), thread_id="t1")
    hits = await store.recall(QUERY, thread_id="t1")
    assert contents(hits) == ["inside"]


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (0.15, ["d010"]),
        (0.45, ["d010", "d040"]),
        (1.0, ["d010", "d040", "d090"]),
        (1.5, ["d010", "d040", "d090", "d120"]),  # valid: a distance, not a similarity
        (2.0, ["d010", "d040", "d090", "d120", "d190"]),
    ],
)
async def test_recall_threshold_is_a_distance_ceiling(
    store: MemoryStore, embed: PlaneEmbed, threshold: float, expected: list[str]
) -> None:
    for text, distance in (("d010", 0.1), ("d040", 0.4), ("d090", 0.9), ("d120", 1.2), ("d190", 1.9)):
        await store.remember(embed.put(text, distance), thread_id="t1")
    hits = await store.recall(QUERY, threshold=threshold, thread_id="t1", k=10)
    assert sorted(contents(hits)) == expected


async def test_default_threshold_option_is_a_distance(
    store_factory: Callable[..., MemoryStore], embed: PlaneEmbed
) -> None:
    store = store_factory(default_threshold=0.5)
    await store.ensure_index()
    await store.remember(embed.put("at045", 0.45), thread_id="t1")
    await store.remember(embed.put("at055", 0.55), thread_id="t1")
    assert contents(await store.recall(QUERY, thread_id="t1")) == ["at045"]


async def test_hit_similarity_is_one_minus_half_the_distance(store: MemoryStore, embed: PlaneEmbed) -> None:
    await store.remember(embed.put("at040", 0.4), thread_id="t1")
    # Words shared with the query must not change the documented similarity either.
    embed.put("dark mode please", 0.3)
    await store.remember(embed.put("dark mode", 0.2), thread_id="t1")
    hits = await store.recall(QUERY, threshold=1.0, thread_id="t1")
    by_content = {hit.item.content: hit for hit in hits}
    assert by_content["at040"].distance == pytest.approx(0.4, abs=1e-3)
    assert by_content["at040"].similarity == pytest.approx(0.8, abs=1e-3)
    hits = await store.recall("dark mode please", threshold=1.0, thread_id="t1")
    for hit in hits:
        assert hit.similarity == pytest.approx(1 - hit.distance / 2, abs=1e-6)


async def test_score_is_the_documented_composite(store: MemoryStore, embed: PlaneEmbed) -> None:
    await store.remember(embed.put("scored", 0.2), importance=0.9, thread_id="t1")
    (hit,) = await store.recall(QUERY, thread_id="t1", reinforce=False)
    # fresh memory: recency ~1 (age of a few ms against a 7-day half-life)
    expected = 0.6 * (1 - 0.2 / 2) + 0.25 * 1.0 + 0.15 * 0.9
    assert hit.score == pytest.approx(expected, abs=2e-3)
    weights = betterdb_memory.RecallWeights(similarity=1.0, recency=0.0, importance=0.0)
    (hit,) = await store.recall(QUERY, thread_id="t1", weights=weights, reinforce=False)
    assert hit.score == pytest.approx(hit.similarity, abs=1e-6)


async def test_recall_orders_by_score(store: MemoryStore, embed: PlaneEmbed) -> None:
    await store.remember(embed.put("far-important", 0.3), importance=1.0, thread_id="t1")
    await store.remember(embed.put("near-unimportant", 0.05), importance=0.0, thread_id="t1")
    hits = await store.recall(QUERY, thread_id="t1")
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_default_k_is_8(store: MemoryStore, embed: PlaneEmbed) -> None:
    for i in range(10):
        await store.remember(embed.put(f"close{i}", 0.01 * (i + 1)), thread_id="t1")
    assert len(await store.recall(QUERY, thread_id="t1")) == DEFAULT_K
    assert len(await store.recall(QUERY, thread_id="t1", k=None)) == DEFAULT_K
    assert len(await store.recall(QUERY, thread_id="t1", k=3)) == 3


async def test_recall_none_options_are_the_defaults(store: MemoryStore, embed: PlaneEmbed) -> None:
    mid = await store.remember(embed.put("n", 0.1), thread_id="t1")
    hits = await store.recall(
        QUERY,
        k=None,
        threshold=None,
        tags=None,
        weights=None,
        reinforce=None,
        thread_id="t1",
        agent_id=None,
        namespace=None,
    )
    assert [h.item.id for h in hits] == [mid]
    item = await store.get(mid)
    assert item is not None and item.access_count == 1  # reinforce=None means reinforce


async def test_recall_reinforces_unless_told_not_to(store: MemoryStore, embed: PlaneEmbed) -> None:
    mid = await store.remember(embed.put("r", 0.1), thread_id="t1")
    created = await store.get(mid)
    assert created is not None
    await asyncio.sleep(0.01)
    await store.recall(QUERY, thread_id="t1")
    item = await store.get(mid)
    assert item is not None
    assert item.access_count == 1
    assert item.last_accessed_at > created.last_accessed_at
    await store.recall(QUERY, thread_id="t1", reinforce=False)
    item = await store.get(mid)
    assert item is not None and item.access_count == 1


async def test_recall_filters_by_scope(store: MemoryStore, embed: PlaneEmbed) -> None:
    await store.remember(embed.put("thread-a", 0.1), thread_id="a", agent_id="x", namespace="n1")
    await store.remember(embed.put("thread-b", 0.1 + 1e-3), thread_id="b", agent_id="x", namespace="n1")
    await store.remember(embed.put("agent-y", 0.1 + 2e-3), thread_id="a", agent_id="y", namespace="n2")
    assert sorted(contents(await store.recall(QUERY, thread_id="a"))) == ["agent-y", "thread-a"]
    assert sorted(contents(await store.recall(QUERY, agent_id="x"))) == ["thread-a", "thread-b"]
    assert contents(await store.recall(QUERY, namespace="n2")) == ["agent-y"]
    assert contents(await store.recall(QUERY, thread_id="a", agent_id="x")) == ["thread-a"]


async def test_scope_values_are_exact(store: MemoryStore, embed: PlaneEmbed) -> None:
    """Scopes are exact: case and punctuation are part of the value."""
    await store.remember(embed.put("upper", 0.1), thread_id="Alice")
    await store.remember(embed.put("lower", 0.1 + 1e-3), thread_id="alice")
    await store.remember(embed.put("punct", 0.1 + 2e-3), thread_id="alice smith/1")
    assert contents(await store.recall(QUERY, thread_id="alice")) == ["lower"]
    assert contents(await store.recall(QUERY, thread_id="Alice")) == ["upper"]
    assert contents(await store.recall(QUERY, thread_id="alice smith/1")) == ["punct"]
    assert await store.forget_by_scope(thread_id="alice") == 1
    assert contents(await store.recall(QUERY, thread_id="Alice")) == ["upper"]


# ======================================================================================
# tags = ALL tags
# ======================================================================================


async def _tagged(store: MemoryStore, embed: PlaneEmbed) -> None:
    await store.remember(embed.put("ab", 0.1), tags=["a", "b"], thread_id="t1")
    await store.remember(embed.put("a-only", 0.1 + 1e-3), tags=["a"], thread_id="t1")
    await store.remember(embed.put("b-only", 0.1 + 2e-3), tags=["b"], thread_id="t1")
    await store.remember(embed.put("abc", 0.1 + 3e-3), tags=["a", "b", "c"], thread_id="t1")


async def test_recall_tags_means_all_tags(store: MemoryStore, embed: PlaneEmbed) -> None:
    await _tagged(store, embed)
    assert sorted(contents(await store.recall(QUERY, tags=["a", "b"]))) == ["ab", "abc"]
    assert sorted(contents(await store.recall(QUERY, tags=["a"]))) == ["a-only", "ab", "abc"]


async def test_forget_by_scope_tags_means_all_tags(store: MemoryStore, embed: PlaneEmbed) -> None:
    await _tagged(store, embed)
    assert await store.forget_by_scope(tags=["a", "b"]) == 2
    assert sorted(contents(await store.recall(QUERY, thread_id="t1"))) == ["a-only", "b-only"]


async def test_consolidate_tags_means_all_tags(store: MemoryStore, embed: PlaneEmbed) -> None:
    await _tagged(store, embed)
    seen: list[str] = []

    async def summarize(items: list[Any]) -> str:
        seen.extend(item.content for item in items)
        return "digest"

    result = await store.consolidate(mode="summary", summarize=summarize, tags=["a", "b"])
    assert sorted(seen) == ["ab", "abc"]
    assert result.consolidated == 2


async def test_forget_by_scope_returns_the_count_and_refuses_no_filter(
    store: MemoryStore, embed: PlaneEmbed
) -> None:
    for i in range(3):
        await store.remember(f"t1-{i}", thread_id="t1")
    await store.remember("t2", thread_id="t2")
    with pytest.raises(ValueError):
        await store.forget_by_scope()
    assert await store.forget_by_scope(thread_id="t1") == 3
    assert await store.forget_by_scope(thread_id="t1") == 0
    assert contents(await store.recall("t2", thread_id="t2", threshold=2.0)) == ["t2"]


# ======================================================================================
# Near-miss
# ======================================================================================


async def test_near_miss_warns_once(store_factory: Callable[..., MemoryStore], embed: PlaneEmbed) -> None:
    registry = CollectorRegistry()
    store = store_factory(telemetry=betterdb_memory.MemoryTelemetryOptions(registry=registry))
    await store.ensure_index()
    await store.remember(embed.put("just-past", 0.5), thread_id="t1")  # 0.33 < 0.5 <= 0.66
    with pytest.warns(UserWarning, match=r"(?i)threshold"):
        assert await store.recall(QUERY, thread_id="t1") == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert await store.recall(QUERY, thread_id="t1") == []
    assert [w for w in caught if issubclass(w.category, UserWarning)] == []
    labels = {"store_name": store_name(store)}
    assert registry.get_sample_value("agent_memory_recall_near_miss_total", labels) == 2


async def test_no_near_miss_when_the_nearest_is_far(store: MemoryStore, embed: PlaneEmbed) -> None:
    await store.remember(embed.put("far", 0.9), thread_id="t1")  # > 2 x 0.33
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert await store.recall(QUERY, thread_id="t1") == []
    assert [w for w in caught if issubclass(w.category, UserWarning)] == []


# ======================================================================================
# Capacity: max_items_per_scope (the reference's observable behaviour)
# ======================================================================================


async def test_capacity_counts_every_memory_matching_the_writes_scope_fields(
    store_factory: Callable[..., MemoryStore],
) -> None:
    """The reference counts, after a write, every memory matching the write's scope
    fields (and all its tags) as a filter, not only the identical scope: a write with
    just ``thread_id="t"`` counts the thread's memories of every agent."""
    store = store_factory(max_items_per_scope=2)
    await store.ensure_index()
    await store.remember("agent-a", importance=0.1, thread_id="t", agent_id="a")
    await store.remember("agent-b", importance=0.9, thread_id="t", agent_id="b")
    await store.remember("thread-only", importance=0.9, thread_id="t")
    items = await listed(store, thread_id="t")
    assert sorted(items) == ["agent-b", "thread-only"]


async def test_capacity_of_a_tagged_write_counts_memories_with_its_tags(
    store_factory: Callable[..., MemoryStore],
) -> None:
    store = store_factory(max_items_per_scope=2)
    await store.ensure_index()
    await store.remember("k1", importance=0.1, thread_id="t", tags=["k"])
    await asyncio.sleep(0.005)
    await store.remember("plain", importance=0.9, thread_id="t")
    await asyncio.sleep(0.005)
    await store.remember("k2", importance=0.9, thread_id="t", tags=["k"])
    await asyncio.sleep(0.005)
    # the tagged write counted only thread t's memories tagged k: 2, within the cap
    assert sorted(await listed(store, thread_id="t")) == ["k1", "k2", "plain"]
    await store.remember("plain2", importance=0.9, thread_id="t")
    # the untagged write counts the whole thread (4 > 2): the two lowest-scoring go
    remaining = await listed(store, thread_id="t")
    assert len(remaining) == 2
    assert "k1" not in remaining and "plain2" in remaining


async def test_unscoped_writes_are_not_capped(store_factory: Callable[..., MemoryStore]) -> None:
    store = store_factory(max_items_per_scope=1)
    await store.ensure_index()
    for i in range(3):
        await store.remember(f"unscoped {i}")
    assert len(await listed(store)) == 3


async def test_consolidation_summary_never_evicts_under_the_cap(
    store_factory: Callable[..., MemoryStore],
) -> None:
    store = store_factory(max_items_per_scope=3)
    await store.ensure_index()
    await store.remember("plain", thread_id="t")
    await store.remember("tag1", thread_id="t", tags=["g"])
    await asyncio.sleep(0.003)  # distinct creation times: the summarizer gets them oldest first
    await store.remember("tag2", thread_id="t", tags=["g"])

    async def summarize(items: list[Any]) -> str:
        return "summary of " + ", ".join(item.content for item in items)

    result = await store.consolidate(mode="summary", summarize=summarize, thread_id="t", tags=["g"])
    assert (result.consolidated, result.deleted) == (2, 2)
    assert sorted(await listed(store, thread_id="t")) == ["plain", "summary of tag1, tag2"]


async def test_consolidation_keeping_sources_never_evicts_under_the_cap(
    store_factory: Callable[..., MemoryStore],
) -> None:
    store = store_factory(max_items_per_scope=3)
    await store.ensure_index()
    await store.remember("plain", thread_id="t")
    await store.remember("tag1", thread_id="t", tags=["g"])
    await store.remember("tag2", thread_id="t", tags=["g"])

    async def summarize(items: list[Any]) -> str:
        return "digest"

    result = await store.consolidate(
        mode="summary", summarize=summarize, thread_id="t", tags=["g"], delete_sources=False
    )
    assert result.deleted == 0
    assert sorted(await listed(store, thread_id="t")) == ["digest", "plain", "tag1", "tag2"]


async def test_fact_consolidation_keeps_sources_under_the_cap(
    store_factory: Callable[..., MemoryStore],
) -> None:
    store = store_factory(max_items_per_scope=3)
    await store.ensure_index()
    for text in ("I work at Acme", "I live in Paris", "I have a cat"):
        await store.remember(text, thread_id="t")

    async def extract(items: list[Any]) -> list[Any]:
        return [
            betterdb_memory.Fact(subject="employer", statement="works at Acme"),
            betterdb_memory.Fact(subject="city", statement="lives in Paris"),
        ]

    result = await store.consolidate(mode="facts", extract_facts=extract, thread_id="t")
    assert len(result.created) == 2
    assert sorted(await listed(store, thread_id="t")) == [
        "I have a cat",
        "I live in Paris",
        "I work at Acme",
        "lives in Paris",
        "works at Acme",
    ]


# ======================================================================================
# consolidate(mode="summary")
# ======================================================================================


async def test_consolidate_without_a_selector_refuses(store: MemoryStore) -> None:
    await store.remember("keep me", thread_id="t1")

    async def summarize(items: list[Any]) -> str:
        return "all"

    async def extract(items: list[Any]) -> list[Any]:
        return []

    with pytest.raises(ValueError):
        await store.consolidate(mode="summary", summarize=summarize)
    with pytest.raises(ValueError):
        await store.consolidate(mode="facts", extract_facts=extract)
    assert await listed(store, thread_id="t1") == ["keep me"]


async def test_consolidate_refuses_a_missing_callback_or_unknown_mode(store: MemoryStore) -> None:
    async def summarize(items: list[Any]) -> str:
        return "x"

    with pytest.raises(ValueError):
        await store.consolidate(mode="summary", thread_id="t1")
    with pytest.raises(ValueError):
        await store.consolidate(mode="facts", thread_id="t1")
    with pytest.raises(ValueError):
        await store.consolidate(mode="bogus", summarize=summarize, thread_id="t1")  # type: ignore[arg-type]


async def test_summary_mode(store: MemoryStore) -> None:
    for text in ("first", "second", "third"):
        await store.remember(text, tags=["g"], thread_id="t1")
        await asyncio.sleep(0.005)
    received: list[Any] = []

    async def summarize(items: list[Any]) -> str:
        received.extend(items)
        return "digest of three"

    result = await store.consolidate(
        mode="summary",
        summarize=summarize,
        thread_id="t1",
        tags=["g"],
        delete_sources=None,
        summary_importance=None,
        older_than_seconds=None,
        max_importance=None,
    )
    assert isinstance(result, betterdb_memory.ConsolidateResult)
    # oldest -> newest, with their dates
    assert [item.content for item in received] == ["first", "second", "third"]
    assert [item.created_at for item in received] == sorted(item.created_at for item in received)
    assert result.consolidated == 3
    assert result.deleted == 3  # delete_sources=None means delete
    assert isinstance(result.created, list) and len(result.created) == 1
    assert isinstance(result.created[0], str)
    summary = await store.get(result.created[0])
    assert summary is not None
    assert summary.content == "digest of three"
    assert summary.source == "summary"
    assert summary.importance == pytest.approx(0.7)  # summary_importance=None: the default
    assert list(summary.tags) == ["g"]
    assert summary.thread_id == "t1"
    assert await listed(store, thread_id="t1") == ["digest of three"]


async def test_summary_mode_never_refolds_summaries(store: MemoryStore) -> None:
    await store.remember("one", thread_id="t1")

    async def summarize(items: list[Any]) -> str:
        return "S:" + ",".join(i.content for i in items)

    first = await store.consolidate(mode="summary", summarize=summarize, thread_id="t1")
    await store.remember("two", thread_id="t1")
    second = await store.consolidate(mode="summary", summarize=summarize, thread_id="t1")
    assert (first.consolidated, second.consolidated) == (1, 1)
    assert sorted(await listed(store, thread_id="t1")) == ["S:one", "S:two"]


async def test_summary_mode_selectors(store: MemoryStore) -> None:
    await store.remember("low", importance=0.2, thread_id="t1")
    await store.remember("high", importance=0.9, thread_id="t1")
    seen: list[str] = []

    async def summarize(items: list[Any]) -> str:
        seen.extend(i.content for i in items)
        return "low digest"

    result = await store.consolidate(
        mode="summary", summarize=summarize, max_importance=0.5, summary_importance=0.4
    )
    assert seen == ["low"]
    assert result.consolidated == 1
    summary = await store.get(result.created[0])
    assert summary is not None and summary.importance == pytest.approx(0.4)
    seen.clear()
    result = await store.consolidate(mode="summary", summarize=summarize, older_than_seconds=3600)
    assert (seen, result.consolidated, result.created, result.deleted) == ([], 0, [], 0)


# ======================================================================================
# consolidate(mode="facts") and consolidate_facts
# ======================================================================================


async def test_facts_mode(store: MemoryStore) -> None:
    await store.remember("I joined Acme in January 2024", thread_id="t1")
    await store.remember("I moved to Paris", thread_id="t1")
    seen_sources: list[list[str | None]] = []
    facts = [
        betterdb_memory.Fact(subject="employer", statement="works at Acme", date="2024-01-02"),
        betterdb_memory.Fact(subject="city", statement="lives in Paris"),
        betterdb_memory.Fact(subject="pet", statement="", tombstone=True),
    ]

    async def extract(items: list[Any]) -> list[Any]:
        seen_sources.append([item.source for item in items])
        return list(facts)

    result = await store.consolidate(
        mode="facts", extract_facts=extract, thread_id="t1", fact_importance=None
    )
    assert isinstance(result, betterdb_memory.ConsolidateFactsResult)
    assert result.candidates == 2
    assert result.facts == 2
    assert isinstance(result.created, list) and len(result.created) == 2
    assert all(isinstance(i, str) for i in result.created)
    assert result.deleted == 0
    assert list(result.unmatched_tombstones) == ["pet"]

    written = {item.content: item for item in [await store.get(i) for i in result.created] if item}
    assert set(written) == {"[2024-01-02] works at Acme", "lives in Paris"}
    for item in written.values():
        assert item.source == "fact"
        assert item.importance == pytest.approx(0.7)
        assert item.thread_id == "t1"
    assert written["[2024-01-02] works at Acme"].subject == "employer"
    assert written["[2024-01-02] works at Acme"].date == "2024-01-02"
    # sources kept
    assert sorted(await listed(store, thread_id="t1")) == [
        "I joined Acme in January 2024",
        "I moved to Paris",
        "[2024-01-02] works at Acme",
        "lives in Paris",
    ]

    # Re-run over unchanged sources: idempotent, and prior facts are not re-distilled.
    again = await store.consolidate(mode="facts", extract_facts=extract, thread_id="t1")
    assert (again.created, again.deleted, again.facts) == ([], 0, 2)
    # (calling the extractor again is not required; if it is called, no fact is among its input)
    for sources in seen_sources[1:]:
        assert "fact" not in sources

    # New sources bring a newer statement (it supersedes) and a retraction (it retracts).
    await store.remember("I left Acme for Globex in March 2025", thread_id="t1")
    await store.remember("I no longer live in Paris", thread_id="t1")
    facts[:] = [
        betterdb_memory.Fact(subject="employer", statement="works at Globex", date="2025-03-01"),
        betterdb_memory.Fact(subject="city", statement="", tombstone=True),
    ]
    third = await store.consolidate(mode="facts", extract_facts=extract, thread_id="t1")
    assert len(third.created) == 1
    assert third.deleted == 2
    assert third.facts == 1
    assert list(third.unmatched_tombstones) == []
    assert sorted(await listed(store, thread_id="t1")) == [
        "I joined Acme in January 2024",
        "I left Acme for Globex in March 2025",
        "I moved to Paris",
        "I no longer live in Paris",
        "[2025-03-01] works at Globex",
    ]


async def test_consolidation_config_sets_fact_source_and_importance(
    store_factory: Callable[..., MemoryStore],
) -> None:
    config = betterdb_memory.ConsolidationConfig(fact_source="distilled", fact_importance=0.9)
    store = store_factory(consolidation=config)
    await store.ensure_index()
    await store.remember("I work at Acme", thread_id="t1")

    async def extract(items: list[Any]) -> list[Any]:
        return [betterdb_memory.Fact(subject="employer", statement="works at Acme")]

    result = await store.consolidate(mode="facts", extract_facts=extract, thread_id="t1")
    fact = await store.get(result.created[0])
    assert fact is not None
    assert (fact.content, fact.source, fact.importance) == ("works at Acme", "distilled", pytest.approx(0.9))
    result = await store.consolidate(mode="facts", extract_facts=extract, thread_id="t1", fact_importance=0.3)
    assert result.created == []  # unchanged: idempotent whatever the importance


async def test_consolidate_facts_alias(store: MemoryStore) -> None:
    await store.remember("I work at Acme", thread_id="t1")

    async def extract(items: list[Any]) -> list[Any]:
        return [betterdb_memory.Fact(subject="employer", statement="works at Acme", date="2024-05-01")]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # it is documented as deprecated
        result = await store.consolidate_facts(extract_facts=extract, thread_id="t1")
    assert isinstance(result, betterdb_memory.ConsolidateFactsResult)
    assert (result.candidates, result.facts, len(result.created)) == (1, 1, 1)
    fact = await store.get(result.created[0])
    assert fact is not None and fact.content == "[2024-05-01] works at Acme"


# ======================================================================================
# Live config
# ======================================================================================


async def test_live_config_is_applied_in_the_references_ranges(
    store: MemoryStore, client: Any, embed: PlaneEmbed
) -> None:
    await store.remember(embed.put("at120", 1.2), thread_id="t1")
    assert await store.recall(QUERY, thread_id="t1", reinforce=False) == []
    key = f"{store_name(store)}:__mem_config"
    await client.hset(
        key,
        mapping={
            "recall.threshold": "1.5",
            "recall.weights.similarity": "0.9",
            "recall.halfLifeSeconds": "60",
            "maxItemsPerScope": "5",
        },
    )
    await store.refresh_config()
    snap = store.current_config()
    assert snap.threshold == pytest.approx(1.5)
    assert snap.weights.similarity == pytest.approx(0.9)
    assert snap.weights.recency == pytest.approx(0.25)  # a partial update keeps the others
    assert snap.half_life_seconds == pytest.approx(60)
    assert snap.max_items_per_scope == 5
    assert contents(await store.recall(QUERY, thread_id="t1", reinforce=False)) == ["at120"]


async def test_live_config_bad_value_keeps_the_last_good_one(store: MemoryStore, client: Any) -> None:
    key = f"{store_name(store)}:__mem_config"
    await client.hset(key, "recall.threshold", "0.6")
    await store.refresh_config()
    assert store.current_config().threshold == pytest.approx(0.6)
    for bad in ("2.5", "-0.1", "not-a-number"):
        await client.hset(key, "recall.threshold", bad)
        await store.refresh_config()
        assert store.current_config().threshold == pytest.approx(0.6), bad


async def test_config_refresh_option_polls_the_hash(
    store_factory: Callable[..., MemoryStore], client: Any
) -> None:
    store = store_factory(config_refresh=betterdb_memory.MemoryConfigRefreshConfig(interval_ms=1000))
    await store.ensure_index()
    await client.hset(f"{store_name(store)}:__mem_config", "recall.threshold", "0.9")
    deadline = time.monotonic() + 5
    while store.current_config().threshold != pytest.approx(0.9) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert store.current_config().threshold == pytest.approx(0.9)


# ======================================================================================
# Metrics: exact names and meanings (MemoryTelemetryOptions(registry=...))
# ======================================================================================


async def test_metrics_names_and_meanings(
    store_factory: Callable[..., MemoryStore], embed: PlaneEmbed
) -> None:
    registry = CollectorRegistry()
    store = store_factory(
        telemetry=betterdb_memory.MemoryTelemetryOptions(registry=registry), max_items_per_scope=3
    )
    await store.ensure_index()
    labels = {"store_name": store_name(store)}

    def value(sample: str) -> float:
        v = registry.get_sample_value(sample, labels)
        return 0.0 if v is None else v

    for i in range(3):
        await store.remember(embed.put(f"m{i}", 0.1 + i * 0.01), thread_id="t1")
    assert value("agent_memory_items") == 3
    assert value("agent_memory_embedding_calls_total") >= 3

    assert len(await store.recall(QUERY, thread_id="t1")) == 3
    await store.recall(QUERY, thread_id="empty-thread")
    assert value("agent_memory_recall_total") == 2
    assert value("agent_memory_recall_hits_total") == 1  # recalls with a hit, not memories
    assert value("agent_memory_recall_empty_total") == 1
    assert value("agent_memory_recall_latency_seconds_count") == 2

    await store.remember(embed.put("m3", 0.2), thread_id="t1")  # 4 > cap 3: one eviction
    assert value("agent_memory_evictions_total") == 1

    async def summarize(items: list[Any]) -> str:
        return "digest"

    await store.consolidate(mode="summary", summarize=summarize, thread_id="t1")
    assert value("agent_memory_consolidations_total") == 1

    async def extract(items: list[Any]) -> list[Any]:
        return [betterdb_memory.Fact(subject="nothing", statement="", tombstone=True)]

    await store.consolidate(mode="facts", extract_facts=extract, thread_id="t1")
    assert value("agent_memory_fact_tombstone_unmatched_total") == 1


async def test_metrics_prefix_option(store_factory: Callable[..., MemoryStore], embed: PlaneEmbed) -> None:
    registry = CollectorRegistry()
    store = store_factory(
        telemetry=betterdb_memory.MemoryTelemetryOptions(registry=registry, metrics_prefix="custom_mem")
    )
    await store.ensure_index()
    await store.recall(QUERY)
    assert registry.get_sample_value("custom_mem_recall_total", {"store_name": store_name(store)}) == 1


# ======================================================================================
# Discovery readiness
# ======================================================================================


async def test_ensure_discovery_ready_registers_the_marker(
    store_factory: Callable[..., MemoryStore], client: Any
) -> None:
    store = store_factory(discovery=True)
    await store.ensure_discovery_ready()
    name = store_name(store)
    marker = await client.hget("__betterdb:caches", f"{name}:mem")
    assert marker is not None
    await store.close()
    assert await client.exists(f"__betterdb:heartbeat:{name}:mem") == 0


async def test_ensure_discovery_ready_without_discovery_is_a_no_op(
    store_factory: Callable[..., MemoryStore], client: Any
) -> None:
    store = store_factory(discovery=False)
    await store.ensure_discovery_ready()
    assert await client.hget("__betterdb:caches", f"{store_name(store)}:mem") is None


# ======================================================================================
# AgentMemory facade
# ======================================================================================


async def test_agent_memory_facade(client: Any, unique_name: str, embed: PlaneEmbed) -> None:
    weights = betterdb_memory.RecallWeights(similarity=0.7, recency=0.2, importance=0.1)
    options = betterdb_memory.AgentMemoryOptions(
        client=client,
        name=unique_name,
        embed_fn=embed,
        memory=betterdb_memory.AgentMemoryConfig(
            default_threshold=0.5,
            recall=betterdb_memory.AgentMemoryRecallConfig(weights=weights, half_life_seconds=3600),
            max_items_per_scope=10,
            discovery=True,
            config_refresh=False,
        ),
    )
    agent = betterdb_memory.AgentMemory(options)
    try:
        await agent.initialize()  # index + discovery + config ready
        snap = agent.memory.current_config()
        assert snap.threshold == pytest.approx(0.5)
        assert snap.weights.similarity == pytest.approx(0.7)
        assert snap.half_life_seconds == pytest.approx(3600)
        assert snap.max_items_per_scope == 10
        assert await client.hget("__betterdb:caches", f"{unique_name}:mem") is not None

        mid = await agent.memory.remember(embed.put("facade memory", 0.45), thread_id="t1")
        assert [h.item.id for h in await agent.memory.recall(QUERY, thread_id="t1")] == [mid]

        # the short-term tiers keep betterdb-agent-cache's API
        for tier in (agent.llm, agent.tool):
            assert callable(tier.check) and callable(tier.store)
        assert callable(agent.session.get) and callable(agent.session.set)
        await agent.tool.store("weather", {"city": "Paris"}, "sunny")
        cached = await agent.tool.check("weather", {"city": "Paris"})
        assert cached.hit is True and cached.response == "sunny"
        await agent.session.set("t1", "step", "2")
        assert await agent.session.get("t1", "step") == "2"
    finally:
        await agent.close()
    assert await client.exists(f"__betterdb:heartbeat:{unique_name}:mem") == 0


async def test_agent_memory_default_threshold(client: Any, unique_name: str, embed: PlaneEmbed) -> None:
    options = betterdb_memory.AgentMemoryOptions(
        client=client,
        name=unique_name,
        embed_fn=embed,
        memory=betterdb_memory.AgentMemoryConfig(discovery=False),
    )
    agent = betterdb_memory.AgentMemory(options)
    try:
        await agent.initialize()
        assert agent.memory.current_config().threshold == pytest.approx(DEFAULT_THRESHOLD)
        await agent.memory.remember(embed.put("inside", 0.3), thread_id="t1")
        await agent.memory.remember(embed.put("outside", 0.36), thread_id="t1")
        assert contents(await agent.memory.recall(QUERY, thread_id="t1")) == ["inside"]
    finally:
        await agent.close()


# ======================================================================================
# Shipped embedders: the threshold on the documented scale; a bare string is one text
# ======================================================================================


async def test_shipped_embedder_default_threshold_is_on_the_distance_scale(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store()  # HashingEmbedder
    assert 0.0 <= store.current_config().threshold <= 2.0


async def test_hashing_embedder_takes_a_bare_string_as_one_text() -> None:
    embedder = betterdb_memory.HashingEmbedder()
    try:
        matrix = await embedder.embed("hello world")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return  # a clear refusal is fine
    assert len(matrix) == 1


# ======================================================================================
# helpers
# ======================================================================================


def store_name(store: MemoryStore) -> str:
    name = getattr(store, "name", None) or getattr(store, "_name", None)
    assert isinstance(name, str)
    return name


async def listed(store: MemoryStore, **scope: Any) -> list[str]:
    """Contents of every memory in the scope, through recall with the widest threshold."""
    hits = await store.recall(QUERY, threshold=2.0, k=100, reinforce=False, **scope)
    return sorted(contents(hits))
