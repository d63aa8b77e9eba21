"""StoreObservability without a server: options, product analytics, near miss, recall marking."""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from betterdb_memory.core.keys import KeySpace
from betterdb_memory.core.tunables import ConfigSnapshot
from betterdb_memory.errors import ConfigurationError
from betterdb_memory.observability.hub import (
    NEAR_MISS_FACTOR,
    StoreObservability,
    is_near_miss,
    warn_near_miss,
)
from betterdb_memory.observability.telemetry import Telemetry


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DO_NOT_TRACK", "BETTERDB_TELEMETRY", "BETTERDB_TELEMETRY_KEY", "BETTERDB_TELEMETRY_HOST"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


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


def make(name: str = "obs", **kwargs: object) -> StoreObservability:
    """A StoreObservability; building one does no I/O, so no client is needed."""
    kwargs.setdefault("registry", CollectorRegistry())
    return StoreObservability(None, KeySpace(name), ConfigSnapshot(), discovery=False, **kwargs)  # type: ignore[arg-type]


# -- near miss ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nearest", "threshold", "expected"),
    [
        (0.5, 0.33, True),  # past the threshold, within 2x
        (0.66, 0.33, True),  # exactly 2x
        (0.67, 0.33, False),  # beyond 2x: the corpus has nothing close
        (0.33, 0.33, False),  # at the threshold it was admitted: not the threshold's doing
        (0.1, 0.33, False),
        (float("inf"), 0.33, False),
        (float("nan"), 0.33, False),
        (1.6, 1.5, True),
    ],
)
def test_near_miss_rule_is_the_references(nearest: float, threshold: float, expected: bool) -> None:
    assert NEAR_MISS_FACTOR == 2.0
    assert is_near_miss(nearest, threshold) is expected


def test_near_miss_warns_once_per_store_with_distance_threshold_and_remedy() -> None:
    obs = make("shop")
    with pytest.warns(UserWarning, match="returned 0 hits") as caught:
        assert obs.near_miss(0.41, 0.33) is True
    (warning,) = caught
    text = str(warning.message)
    assert "'shop'" in text and "0.410" in text and "0.33" in text
    assert "recall(threshold=...)" in text and "default_threshold" in text and "shop:__mem_config" in text
    # The warning points at the caller's line, not inside the library.
    assert warning.filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert obs.near_miss(0.5, 0.33) is True  # counted, not warned again
        assert obs.near_miss(0.9, 0.33) is False
    assert obs.near_misses == 2
    with pytest.warns(UserWarning, match="'other'"):
        make("other").near_miss(0.41, 0.33)  # once per store, not once per process


def test_warn_near_miss_points_outside_the_package() -> None:
    with pytest.warns(UserWarning, match=r"cosine distance 0\.700.*threshold 0\.5") as caught:
        warn_near_miss("s", 0.7, 0.5)
    assert caught[0].filename == __file__


# -- the reference's telemetry=MemoryTelemetryOptions(...) ------------------------------------


def test_reference_telemetry_options_set_registry_prefix_and_scope(
    registry: CollectorRegistry, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The reference's fields (tracer_name, metrics_prefix, registry) and ours (tracer_provider)."""
    opts = types.SimpleNamespace(
        tracer_name="@betterdb/agent-memory-test",
        metrics_prefix="team_mem",
        registry=registry,
        tracer_provider=provider,
    )
    obs = make("s1", telemetry=opts, registry=None)
    assert obs.metrics.registry is registry and obs.metrics.prefix == "team_mem"
    obs.metrics.observe_embedding_calls()
    assert registry.get_sample_value("team_mem_embedding_calls_total", {"store_name": "s1"}) == 1
    with obs.span("recall"):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "@betterdb/agent-memory-test"
    assert not obs.telemetry.enabled  # metrics options never turn product analytics on


def test_options_prefix_field_and_plain_arguments(registry: CollectorRegistry) -> None:
    """options.MemoryTelemetryOptions' ``prefix`` works as metrics_prefix; so do plain keywords."""
    assert make(telemetry=types.SimpleNamespace(registry=registry, prefix="p1")).metrics.prefix == "p1"
    obs = make(registry=registry, metrics_prefix="p2", tracer_name="@betterdb/x")
    assert obs.metrics.prefix == "p2" and obs.tracing.tracer_name == "@betterdb/x"
    default = make()
    assert (
        default.metrics.prefix == "agent_memory" and default.tracing.tracer_name == "@betterdb/agent-memory"
    )


# -- product analytics: off unless turned on ------------------------------------------------------


def test_analytics_is_off_by_default() -> None:
    assert not make().telemetry.enabled
    assert not make(analytics=None).telemetry.enabled


def test_analytics_true_opts_in_and_false_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BETTERDB_TELEMETRY_KEY", "phc_test")
    on = make(analytics=True).telemetry
    assert on.enabled and on.active
    on.close()
    explicit = Telemetry(enabled=True, api_key="phc_test")
    assert not make(telemetry=explicit, analytics=False).telemetry.enabled
    assert make(telemetry=explicit).telemetry is explicit  # this library's earlier spelling
    assert make(analytics=explicit).telemetry is explicit
    assert make(telemetry=True).telemetry.enabled


def test_do_not_track_wins_over_analytics_true(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BETTERDB_TELEMETRY_KEY", "phc_test")
    monkeypatch.setenv("DO_NOT_TRACK", "1")
    assert not make(analytics=True).telemetry.active


def test_analytics_of_another_type_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        make(analytics="yes")


# -- recall marking ---------------------------------------------------------------------------------


def test_mark_recall_through_the_store_handle(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    obs = make("shop", tracer_provider=provider)
    with obs.span("recall") as span:
        obs.mark_recall(span, 2, k=5)
    attrs = dict(exporter.get_finished_spans()[0].attributes or {})
    assert attrs["cache.hit"] is True and attrs["cache.name"] == "shop" and attrs["recall.k"] == 5
