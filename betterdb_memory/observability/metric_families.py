"""The Prometheus metric families of ``MemoryMetrics``: created once per registry and prefix.

``prometheus_client`` refuses to register a metric name twice, while several stores
(or several ``MemoryMetrics`` for the same store) may share one ``CollectorRegistry``.
So each family is created once per registry and prefix (``families_for``), and each
store binds its own children with ``.labels(store_name)``. A family already registered
under our name with the same type and labels (betterdb-agent-memory's, in a process
running both libraries during a migration) is shared, not refused. The names, types,
labels and buckets are the contract ``observability.metrics`` documents.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Final, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..errors import ConfigurationError

__all__ = ["RECALL_LATENCY_BUCKETS", "Families", "families_for"]

#: ``agent_memory_recall_latency_seconds``: betterdb-agent-memory's buckets, so
#: histograms from both libraries aggregate and its quantile queries keep working.
RECALL_LATENCY_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, float("inf"))

# The embed / search split: embedding calls are milliseconds (local ONNX) to seconds
# (remote APIs); KNN search is sub-millisecond to tens of milliseconds.
_SPLIT_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    float("inf"),
)
# Context budgets run from a few dozen tokens to a full 128k window.
_TOKEN_BUCKETS: Final = (
    0.0,
    64.0,
    128.0,
    256.0,
    512.0,
    1024.0,
    2048.0,
    4096.0,
    8192.0,
    16384.0,
    32768.0,
    65536.0,
    131072.0,
    float("inf"),
)


@dataclass(frozen=True)
class Families:
    """Every metric family, registered once in one registry under one prefix."""

    # betterdb-agent-memory's families (names, types, label, meaning)
    items: Gauge
    recall: Counter
    recall_hits: Counter
    recall_empty: Counter
    recall_near_miss: Counter
    recall_latency: Histogram
    embedding_calls: Counter
    evictions: Counter
    consolidations: Counter
    tombstones_unmatched: Counter
    # this library's additions
    recall_memories: Counter
    recall_embed_seconds: Histogram
    recall_search_seconds: Histogram
    remember: Counter
    dedup_hits: Counter
    consolidation_runs: Counter
    consolidation_items: Counter
    background_failures: Counter
    turns_stored: Counter
    context_tokens: Histogram
    config_rejected: Counter
    # -- subjects (issue 26): versions superseded on write --
    supersessions: Counter
    # time-aware recall (issue 26): time in the question
    time_window_recalls: Counter
    # hybrid recall's text side failed or ran out of time: the KNN candidates alone
    recall_degraded: Counter


_C = TypeVar("_C", Counter, Gauge, Histogram)


def _get_or_adopt(
    registry: CollectorRegistry,
    kind: type[_C],
    name: str,
    doc: str,
    labels: tuple[str, ...],
    buckets: tuple[float, ...] | None = None,
) -> _C:
    """Register a family, or reuse one registered under that name with the same shape.

    Raises:
        ConfigurationError: the name is taken by a metric of another type or labels.
    """
    try:
        if buckets is not None:
            return kind(name, doc, labels, registry=registry, buckets=buckets)  # type: ignore[call-arg]
        return kind(name, doc, labels, registry=registry)
    except ValueError as exc:
        # prometheus_client has no public lookup by name; _names_to_collectors is the
        # same map it checked to refuse the duplicate.
        lookup = getattr(registry, "_names_to_collectors", {})
        existing = lookup.get(name) or lookup.get(f"{name}_total")
        if not (
            isinstance(existing, kind)
            and type(existing) is kind
            and tuple(getattr(existing, "_labelnames", ())) == labels
            and (buckets is None or tuple(getattr(existing, "_upper_bounds", ())) == buckets)
        ):
            raise ConfigurationError(
                f"the Prometheus registry already holds a metric named {name!r} of another type or "
                f"labels ({exc}); pass a separate registry, or another prefix, to MemoryMetrics",
                code="configuration.metrics_conflict",
                details={"metric": name},
            ) from exc
        return existing


def _create_families(registry: CollectorRegistry, prefix: str) -> Families:
    p = prefix
    s = ("store_name",)

    def counter(name: str, doc: str, labels: tuple[str, ...] = s) -> Counter:
        return _get_or_adopt(registry, Counter, f"{p}_{name}", doc, labels)

    def histogram(name: str, doc: str, buckets: tuple[float, ...], labels: tuple[str, ...] = s) -> Histogram:
        return _get_or_adopt(registry, Histogram, f"{p}_{name}", doc, labels, buckets)

    return Families(
        items=_get_or_adopt(
            registry, Gauge, f"{p}_items", "Long-term memories in the store (last count seen).", s
        ),
        recall=counter("recall_total", "Total recall queries."),
        recall_hits=counter("recall_hits_total", "Recall queries that returned at least one memory."),
        recall_empty=counter("recall_empty_total", "Recall queries that returned no memories."),
        recall_near_miss=counter(
            "recall_near_miss_total",
            "Recall queries that returned nothing while the nearest candidate sat just past the threshold.",
        ),
        recall_latency=histogram(
            "recall_latency_seconds", "Recall query latency in seconds.", RECALL_LATENCY_BUCKETS
        ),
        embedding_calls=counter(
            "embedding_calls_total", "Texts embedded (one embedding function invocation per text)."
        ),
        evictions=counter("evictions_total", "Total memories evicted for capacity."),
        consolidations=counter("consolidations_total", "Consolidation runs (summary and facts modes)."),
        tombstones_unmatched=counter(
            "fact_tombstone_unmatched_total",
            "Fact tombstones that matched no live fact (surfaced, not silently dropped).",
        ),
        recall_memories=counter(
            "recall_memories_total", "Memories returned by recall calls (sum of hit counts)."
        ),
        recall_embed_seconds=histogram(
            "recall_embed_seconds", "Time spent embedding the recall query.", _SPLIT_BUCKETS
        ),
        recall_search_seconds=histogram(
            "recall_search_seconds", "Time spent in the vector search (FT.SEARCH).", _SPLIT_BUCKETS
        ),
        remember=counter("remember_total", "Memories written by remember calls."),
        dedup_hits=counter(
            "dedup_hits_total", "Remember calls absorbed by an existing near-duplicate memory."
        ),
        consolidation_runs=counter(
            "consolidation_runs_total", "Consolidation runs, by mode.", ("store_name", "mode")
        ),
        consolidation_items=counter(
            "consolidation_items_total",
            "Memories created, deleted or superseded by consolidation.",
            ("store_name", "mode", "outcome"),
        ),
        background_failures=counter(
            "background_failures_total",
            "Failures of background tasks (which log and carry on).",
            ("store_name", "task"),
        ),
        turns_stored=counter("turns_stored_total", "Short-term (L1) conversation turns stored."),
        context_tokens=histogram(
            "context_tokens",
            "Tokens used per assembled context, by part.",
            _TOKEN_BUCKETS,
            ("store_name", "part"),
        ),
        config_rejected=counter(
            "config_rejected_total", "Live-config values rejected (the last good value was kept)."
        ),
        # -- subjects (issue 26) --
        supersessions=counter(
            "supersessions_total",
            "Versions of a subject moved to history because a newer one became current (or came older).",
        ),
        # time-aware recall (issue 26): time in the question
        time_window_recalls=counter(
            "time_window_recalls_total",
            "Recalls whose query held a time expression, by how its window was used (filter or boost).",
            ("store_name", "mode"),
        ),
        recall_degraded=counter(
            "recall_degraded_total",
            "Re-ranked recalls answered from the KNN candidates alone: the full-text side timed out, "
            "failed, or came back partial.",
            ("store_name", "reason"),
        ),
    )


_families_by_registry: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, Families]] = (
    weakref.WeakKeyDictionary()
)
_families_lock = threading.Lock()


def families_for(registry: CollectorRegistry, prefix: str) -> Families:
    """Return the families registered in ``registry`` under ``prefix``, creating them on first use.

    Keyed by the registry object itself (weakly), not ``id(registry)``: an id can be
    reused by a new registry after the old one is collected, which would hand the
    new registry metrics that live in a dead one.
    """
    with _families_lock:
        by_prefix = _families_by_registry.setdefault(registry, {})
        families = by_prefix.get(prefix)
        if families is None:
            families = _create_families(registry, prefix)
            by_prefix[prefix] = families
        return families
