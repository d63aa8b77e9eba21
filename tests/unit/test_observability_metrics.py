"""MemoryMetrics: names, labels, values as a Prometheus scrape sees them."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from betterdb_memory.errors import ConfigurationError, ValidationError
from betterdb_memory.observability.metric_families import _SPLIT_BUCKETS, RECALL_LATENCY_BUCKETS
from betterdb_memory.observability.metrics import MemoryMetrics


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    sample = registry.get_sample_value(name, labels)
    assert sample is not None, f"no sample {name} {labels}"
    return sample


def test_recall_counters_and_split_latency(registry: CollectorRegistry) -> None:
    """A recall increments calls/hits, and embed and search time land in separate histograms."""
    m = MemoryMetrics("s1", registry)
    m.observe_recall(hits=3, near_miss=False, embed_seconds=0.2, search_seconds=0.003)
    m.observe_recall(hits=0, near_miss=True, embed_seconds=0.1, search_seconds=0.002, total_seconds=0.5)

    assert value(registry, "agent_memory_recall_total", store_name="s1") == 2
    # The reference's meaning: recalls that returned at least one memory, not memories.
    assert value(registry, "agent_memory_recall_hits_total", store_name="s1") == 1
    assert value(registry, "agent_memory_recall_memories_total", store_name="s1") == 3
    assert value(registry, "agent_memory_recall_empty_total", store_name="s1") == 1
    assert value(registry, "agent_memory_recall_near_miss_total", store_name="s1") == 1
    assert value(registry, "agent_memory_recall_embed_seconds_sum", store_name="s1") == pytest.approx(0.3)
    assert value(registry, "agent_memory_recall_search_seconds_sum", store_name="s1") == pytest.approx(0.005)
    latency = "agent_memory_recall_latency_seconds"
    assert value(registry, f"{latency}_sum", store_name="s1") == pytest.approx(0.203 + 0.5)
    assert value(registry, f"{latency}_count", store_name="s1") == 2
    assert value(registry, "agent_memory_recall_search_seconds_bucket", store_name="s1", le="0.0025") == 1


def test_reference_families_have_its_names_types_and_buckets(registry: CollectorRegistry) -> None:
    """Every betterdb-agent-memory family exists with its type, its one label, and (latency) its buckets."""
    m = MemoryMetrics("s1", registry)
    m.observe_recall(hits=1, near_miss=False, embed_seconds=0.0, search_seconds=0.0, total_seconds=0.02)
    m.observe_embedding_calls(3)
    m.observe_evictions(1)
    m.observe_consolidation("summary", created=1)
    m.observe_tombstones_unmatched(1)
    m.set_items(2)
    types = {family.name: family.type for family in registry.collect()}
    expected = {
        "agent_memory_items": "gauge",
        "agent_memory_recall": "counter",
        "agent_memory_recall_hits": "counter",
        "agent_memory_recall_empty": "counter",
        "agent_memory_recall_near_miss": "counter",
        "agent_memory_recall_latency_seconds": "histogram",
        "agent_memory_embedding_calls": "counter",
        "agent_memory_evictions": "counter",
        "agent_memory_consolidations": "counter",
        "agent_memory_fact_tombstone_unmatched": "counter",
    }
    assert {name: types.get(name) for name in expected} == expected
    buckets = sorted(
        float(sample.labels["le"])
        for family in registry.collect()
        if family.name == "agent_memory_recall_latency_seconds"
        for sample in family.samples
        if sample.name.endswith("_bucket")
    )
    assert buckets == [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, float("inf")]
    assert value(registry, "agent_memory_recall_latency_seconds_bucket", store_name="s1", le="0.025") == 1
    assert value(registry, "agent_memory_embedding_calls_total", store_name="s1") == 3
    assert value(registry, "agent_memory_consolidations_total", store_name="s1") == 1
    assert value(registry, "agent_memory_fact_tombstone_unmatched_total", store_name="s1") == 1
    for family in registry.collect():
        if family.name in expected:
            assert {k for sample in family.samples for k in sample.labels} <= {"store_name", "le"}


def test_prefix_renames_every_family(registry: CollectorRegistry) -> None:
    """``prefix=`` is the reference's ``metrics_prefix``; two prefixes share a registry."""
    MemoryMetrics("s1", registry, prefix="team_mem").observe_embedding_calls()
    MemoryMetrics("s1", registry).observe_embedding_calls(2)
    assert value(registry, "team_mem_embedding_calls_total", store_name="s1") == 1
    assert value(registry, "agent_memory_embedding_calls_total", store_name="s1") == 2
    assert all(f.name.startswith(("team_mem_", "agent_memory_")) for f in registry.collect())
    with pytest.raises(ConfigurationError):
        MemoryMetrics("s1", registry, prefix="bad prefix")


def test_reference_library_families_in_the_same_registry_are_shared(registry: CollectorRegistry) -> None:
    """A process running betterdb-agent-memory too (a migration) registered these names first.

    The reference creates them exactly so (name, type, ``store_name`` label, latency
    buckets); this library reuses them instead of failing, and both count into one series.
    """
    ref_latency = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]
    ref_recall = Counter(
        "agent_memory_recall_total", "Total recall queries", ["store_name"], registry=registry
    )
    Histogram(
        "agent_memory_recall_latency_seconds",
        "latency",
        ["store_name"],
        buckets=ref_latency,
        registry=registry,
    )
    Gauge("agent_memory_items", "items", ["store_name"], registry=registry)
    ref_recall.labels(store_name="s1").inc()
    MemoryMetrics("s1", registry).observe_recall(
        hits=0, near_miss=False, embed_seconds=0.0, search_seconds=0.0
    )
    assert value(registry, "agent_memory_recall_total", store_name="s1") == 2


def test_items_gauge_moves_by_delta(registry: CollectorRegistry) -> None:
    m = MemoryMetrics("s1", registry)
    m.set_items(5)
    m.add_items(2)
    m.add_items(-3)
    assert value(registry, "agent_memory_items", store_name="s1") == 4


def test_write_side_counters(registry: CollectorRegistry) -> None:
    """remember, dedup, evictions, turns, items and config rejections are recorded."""
    m = MemoryMetrics("s1", registry)
    m.observe_remember()
    m.observe_remember(4, dedup_hits=2)
    m.observe_evictions(5)
    m.observe_evictions(0)
    m.observe_turns()
    m.observe_turns(2)
    m.set_items(42)
    m.observe_config_rejections(2)

    assert value(registry, "agent_memory_remember_total", store_name="s1") == 5
    assert value(registry, "agent_memory_dedup_hits_total", store_name="s1") == 2
    assert value(registry, "agent_memory_evictions_total", store_name="s1") == 5
    assert value(registry, "agent_memory_turns_stored_total", store_name="s1") == 3
    assert value(registry, "agent_memory_items", store_name="s1") == 42
    assert value(registry, "agent_memory_config_rejected_total", store_name="s1") == 2


def test_consolidation_by_mode_and_outcome(registry: CollectorRegistry) -> None:
    """Consolidations count per mode; created/deleted/superseded per outcome; unmatched tombstones apart."""
    m = MemoryMetrics("s1", registry)
    m.observe_consolidation("facts", created=2, deleted=1, superseded=1, unmatched=3)
    m.observe_consolidation("summary", created=1, deleted=4)

    assert value(registry, "agent_memory_consolidations_total", store_name="s1") == 2
    assert value(registry, "agent_memory_consolidation_runs_total", store_name="s1", mode="facts") == 1
    assert value(registry, "agent_memory_consolidation_runs_total", store_name="s1", mode="summary") == 1
    items = "agent_memory_consolidation_items_total"
    assert value(registry, items, store_name="s1", mode="facts", outcome="created") == 2
    assert value(registry, items, store_name="s1", mode="facts", outcome="superseded") == 1
    assert value(registry, items, store_name="s1", mode="summary", outcome="deleted") == 4
    assert value(registry, "agent_memory_fact_tombstone_unmatched_total", store_name="s1") == 3


def test_background_failures_and_context_tokens(registry: CollectorRegistry) -> None:
    """Background failures are labelled by task; context tokens by part."""
    m = MemoryMetrics("s1", registry)
    m.observe_background_failure("heartbeat")
    m.observe_background_failure("heartbeat")
    m.observe_background_failure("config_refresh")
    m.observe_context({"system": 100, "memories": 900, "turns": 2000, "current": 50})

    assert value(registry, "agent_memory_background_failures_total", store_name="s1", task="heartbeat") == 2
    assert (
        value(registry, "agent_memory_background_failures_total", store_name="s1", task="config_refresh") == 1
    )
    assert value(registry, "agent_memory_context_tokens_sum", store_name="s1", part="memories") == 900
    assert value(registry, "agent_memory_context_tokens_count", store_name="s1", part="turns") == 1


def test_stores_share_a_registry(registry: CollectorRegistry) -> None:
    """Several stores (and two handles on one store) register in one registry without clashing."""
    a = MemoryMetrics("a", registry)
    b = MemoryMetrics("b", registry)
    a_again = MemoryMetrics("a", registry)
    a.observe_remember()
    a_again.observe_remember()
    b.observe_remember(7)

    assert value(registry, "agent_memory_remember_total", store_name="a") == 2
    assert value(registry, "agent_memory_remember_total", store_name="b") == 7


def test_default_registry_can_be_used_by_several_stores() -> None:
    """With no registry given, metrics go to prometheus_client.REGISTRY, once per family."""
    first = MemoryMetrics("default-reg-1")
    second = MemoryMetrics("default-reg-2")
    first.set_items(1)
    second.set_items(2)
    assert REGISTRY.get_sample_value("agent_memory_items", {"store_name": "default-reg-2"}) == 2


def test_only_low_cardinality_labels_are_exposed(registry: CollectorRegistry) -> None:
    """Every series carries store_name and at most a small fixed label (mode/outcome/task/part/le)."""
    m = MemoryMetrics("s1", registry)
    m.observe_recall(hits=1, near_miss=False, embed_seconds=0.0, search_seconds=0.0)
    m.observe_consolidation("facts", created=1)
    m.observe_background_failure("heartbeat")
    m.observe_context({"system": 1})
    allowed = {"store_name", "mode", "outcome", "task", "part", "reason", "le"}
    for family in registry.collect():
        assert family.name.startswith("agent_memory_")
        for sample in family.samples:
            assert set(sample.labels) <= allowed
            assert sample.labels.get("store_name") == "s1"
    assert b"agent_memory_recall_total" in generate_latest(registry)


def test_foreign_metric_with_our_name_is_a_configuration_error(registry: CollectorRegistry) -> None:
    """A registry already holding an agent_memory_* name that is not ours fails clearly."""
    Counter("agent_memory_recall", "someone else's", registry=registry)
    with pytest.raises(ConfigurationError):
        MemoryMetrics("s1", registry)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.observe_remember(-1),
        lambda m: m.observe_embedding_calls(-1),
        lambda m: m.observe_tombstones_unmatched(0.5),
        lambda m: m.add_items(1.5),
        lambda m: m.observe_evictions(1.5),
        lambda m: m.set_items(True),
        lambda m: m.observe_recall(hits=1, near_miss=False, embed_seconds=-0.1, search_seconds=0.0),
        lambda m: m.observe_recall(hits=1, near_miss=False, embed_seconds=float("nan"), search_seconds=0.0),
        lambda m: m.observe_consolidation("merge"),
        lambda m: m.observe_background_failure("Thread 42 for user bob"),
        lambda m: m.observe_context({"tools": 3}),
        lambda m: m.observe_context({"system": -3}),
    ],
)
def test_bad_values_are_validation_errors(registry: CollectorRegistry, call: object) -> None:
    """Negative or non-integer counts, unknown modes/parts and free-form task labels are refused."""
    m = MemoryMetrics("s1", registry)
    with pytest.raises(ValidationError):
        call(m)  # type: ignore[operator]


def test_empty_store_name_is_refused(registry: CollectorRegistry) -> None:
    """The store_name label must be a non-empty string."""
    with pytest.raises(ValidationError):
        MemoryMetrics("", registry)


# Every bucket bound of the families a recall observes, just below, on and just above it, and beyond.
_EDGES = [0.0, *RECALL_LATENCY_BUCKETS[:-1], *_SPLIT_BUCKETS[:-1], 1e9]
_TIMES = sorted({t for edge in _EDGES for t in (edge, edge * (1 - 1e-12), edge * (1 + 1e-12), edge + 1e-9)})


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_the_hot_path_adds_what_inc_and_observe_add(registry: CollectorRegistry) -> None:
    """A recall's and a write's values, added straight to the children's values, equal those of
    prometheus_client's own ``inc`` / ``observe`` (each bucket bound on, below and above it)."""
    ours = MemoryMetrics("s1", registry)
    theirs_registry = CollectorRegistry()
    theirs = MemoryMetrics("s1", theirs_registry)
    for i, t in enumerate(_TIMES):
        hits = i % 4
        ours.observe_recall(
            hits=hits, near_miss=i % 5 == 0, embed_seconds=t, search_seconds=t / 3, total_seconds=t * 2
        )
        theirs._recall.inc()
        if hits:
            theirs._recall_hits.inc()
            theirs._recall_memories.inc(hits)
        else:
            theirs._recall_empty.inc()
        if i % 5 == 0:
            theirs._recall_near_miss.inc()
        theirs._recall_embed.observe(t)
        theirs._recall_search.observe(t / 3)
        theirs._recall_latency.observe(t * 2)
        ours.observe_remember(1 + i % 2)
        theirs._remember.inc(1 + i % 2)
        ours.add_items(1 - i % 3)
        theirs._items.inc(1 - i % 3)
    got, want = _samples(registry), _samples(theirs_registry)
    assert got == want
    assert want[("agent_memory_recall_latency_seconds_bucket", (("le", "0.001"), ("store_name", "s1")))] > 0


def test_a_child_laid_out_otherwise_gets_its_own_inc_and_observe() -> None:
    """``_adds`` / ``_observes`` fall back to the public methods when the client keeps values elsewhere."""
    from betterdb_memory.observability.metrics import _adds, _observes

    class Child:
        def __init__(self) -> None:
            self.seen: list[float] = []

        def inc(self, amount: float) -> None:
            self.seen.append(amount)

        def observe(self, amount: float) -> None:
            self.seen.append(-amount)

    child = Child()
    _adds(child)(2)
    _observes(child)(3)
    assert child.seen == [2, -3]
    gauge = Gauge("g", "g", registry=CollectorRegistry(), multiprocess_mode="mostrecent")
    assert _adds(gauge) == gauge.inc  # inc refuses a "mostrecent" gauge: it keeps refusing
