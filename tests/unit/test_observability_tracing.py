"""Tracing: one agent_memory.<op> span per operation, scope @betterdb/agent-memory, cache.name / cache.hit.

The global tracer provider can be set only once per process, so these tests never
set it: each uses its own SDK provider passed to ``Tracing(tracer_provider=...)``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from betterdb_memory.errors import IndexNotFoundError, ValidationError
from betterdb_memory.observability.tracing import (
    OP_CONSOLIDATE,
    OP_CONSOLIDATE_FACTS,
    OP_RECALL,
    OP_REMEMBER,
    Tracing,
    add_attributes,
    consolidation_operation,
    mark_recall,
    mark_remember,
    operation_span,
)


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


def test_span_name_and_standard_attributes(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """The span is agent_memory.<op> with cache.name (for Monitor), db.system and gen_ai.memory.* set."""
    tracing = Tracing("shop", "shop:mem:idx", tracer_provider=provider)
    with tracing.span("recall", {"gen_ai.memory.k": 5}) as span:
        span.set_attribute("gen_ai.memory.hits", 2)

    (finished,) = exporter.get_finished_spans()
    assert finished.name == "agent_memory.recall"
    attrs = dict(finished.attributes or {})
    assert attrs["cache.name"] == "shop"
    assert attrs["db.system"] == "valkey"
    assert attrs["gen_ai.memory.operation"] == "recall"
    assert attrs["gen_ai.memory.store"] == "shop"
    assert attrs["gen_ai.memory.index"] == "shop:mem:idx"
    assert attrs["gen_ai.memory.k"] == 5
    assert attrs["gen_ai.memory.hits"] == 2
    assert finished.status.status_code == StatusCode.UNSET
    assert finished.instrumentation_scope is not None
    # Monitor keeps only spans whose scope starts with "@betterdb/"; this is the reference's name.
    assert finished.instrumentation_scope.name == "@betterdb/agent-memory"


def test_exception_is_recorded_and_propagates(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A raise inside the span sets ERROR status, an exception event and error.type, then propagates."""
    tracing = Tracing("shop", "idx", tracer_provider=provider)
    with pytest.raises(IndexNotFoundError), tracing.span("recall"):
        raise IndexNotFoundError("idx: no such index")

    (finished,) = exporter.get_finished_spans()
    assert finished.status.status_code == StatusCode.ERROR
    assert (finished.attributes or {})["error.type"] == "server.index_not_found"
    assert [e.name for e in finished.events] == ["exception"]


def test_plain_exception_error_type_is_class_name(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A non-library exception is typed by its class name."""
    with pytest.raises(KeyError), Tracing("s", "i", tracer_provider=provider).span("forget"):
        raise KeyError("x")
    (finished,) = exporter.get_finished_spans()
    assert (finished.attributes or {})["error.type"] == "KeyError"


async def test_span_stays_current_across_await(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A sync `with` in async code keeps the span current across awaits, so inner spans nest."""
    tracing = Tracing("s", "i", tracer_provider=provider)
    with tracing.span("consolidate"):
        await asyncio.sleep(0)
        with tracing.span("remember"):
            await asyncio.sleep(0)

    inner, outer = exporter.get_finished_spans()
    assert outer.name == "agent_memory.consolidate"
    assert inner.parent is not None
    assert outer.context is not None
    assert inner.parent.span_id == outer.context.span_id


async def test_cancellation_is_not_an_error(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """A cancelled operation ends its span without ERROR status."""
    tracing = Tracing("s", "i", tracer_provider=provider)

    async def op() -> None:
        with tracing.span("recall"):
            await asyncio.sleep(10)

    task = asyncio.create_task(op())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (finished,) = exporter.get_finished_spans()
    assert finished.status.status_code != StatusCode.ERROR


def test_lazy_attributes_only_computed_when_recording(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A callable for attributes is not called when nothing records, and is when a provider does."""
    calls: list[int] = []

    def expensive() -> dict[str, int]:
        calls.append(1)
        return {"gen_ai.memory.hits": 7}

    with Tracing("s", "i", tracer_provider=trace.NoOpTracerProvider()).span("recall", expensive) as span:
        assert not span.is_recording()
        add_attributes(span, expensive)
    assert calls == []

    with Tracing("s", "i", tracer_provider=provider).span("recall", expensive) as span:
        add_attributes(span, lambda: {"gen_ai.memory.k": 3})
    assert calls == [1]
    (finished,) = exporter.get_finished_spans()
    assert (finished.attributes or {})["gen_ai.memory.hits"] == 7
    assert (finished.attributes or {})["gen_ai.memory.k"] == 3


def test_unconfigured_global_provider_records_nothing() -> None:
    """With no SDK configured (the default), spans are non-recording no-ops."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("a global tracer provider was configured by another test")
    with Tracing("s", "i").span("recall", lambda: pytest.fail("attributes computed untraced")) as span:
        assert not span.is_recording()


def test_unconfigured_spans_are_one_shared_no_op_that_still_checks_the_name() -> None:
    """No SDK: nothing is opened (not even a non-recording current span), and a bad
    operation name is still refused."""
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("a global tracer provider was configured by another test")
    tracing = Tracing("s", "i")
    with tracing.span("recall") as span:
        assert span is trace.INVALID_SPAN
        assert trace.get_current_span() is trace.INVALID_SPAN
    with pytest.raises(ValidationError), tracing.span("Recall thread-1"):
        pass
    with pytest.raises(KeyError), tracing.span("remember"):
        raise KeyError("propagates")


def test_a_provider_set_after_the_store_is_used_from_then_on() -> None:
    """The global provider can be set after a store was built and used (own process: it
    can be set only once)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from betterdb_memory.observability.tracing import Tracing

        tracing = Tracing("s", "i")
        with tracing.span("recall") as before:
            assert not before.is_recording()
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        with tracing.span("recall") as after:
            assert after.is_recording()
        print([s.name for s in exporter.get_finished_spans()])
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['agent_memory.recall']"


def test_operation_span_function(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """operation_span works without a Tracing object."""
    with operation_span("forget", store_name="s", index_name="i", tracer_provider=provider):
        pass
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "agent_memory.forget"
    assert (finished.attributes or {})["cache.name"] == "s"


@pytest.mark.parametrize("op", ["", "Recall", "recall thread-123", "memory.", "a" * 65, "consolidate-facts"])
def test_operation_must_be_a_short_identifier(provider: TracerProvider, op: str) -> None:
    """Span names stay low-cardinality: user values cannot become operation names."""
    with pytest.raises(ValidationError), Tracing("s", "i", tracer_provider=provider).span(op):
        pass


def test_reference_operation_names(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """The reference's four span names, consolidateFacts (camelCase) included."""
    tracing = Tracing("s", "i", tracer_provider=provider)
    for op in (OP_REMEMBER, OP_RECALL, consolidation_operation("summary"), consolidation_operation("facts")):
        with tracing.span(op):
            pass
    assert [s.name for s in exporter.get_finished_spans()] == [
        "agent_memory.remember",
        "agent_memory.recall",
        "agent_memory.consolidate",
        "agent_memory.consolidateFacts",
    ]
    assert (OP_CONSOLIDATE, OP_CONSOLIDATE_FACTS) == ("consolidate", "consolidateFacts")


def test_tracer_name_option(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """``tracer_name`` (the reference's MemoryTelemetryOptions field) sets the scope."""
    with Tracing("s", "i", tracer_provider=provider, tracer_name="@betterdb/agent-memory-eu").span("recall"):
        pass
    with operation_span("recall", store_name="s", index_name="i", tracer_provider=provider, tracer_name="x"):
        pass
    scopes = [s.instrumentation_scope.name for s in exporter.get_finished_spans() if s.instrumentation_scope]
    assert scopes == ["@betterdb/agent-memory-eu", "x"]
    with pytest.raises(ValidationError):
        Tracing("s", "i", tracer_name="")


@pytest.mark.parametrize(("hits", "hit"), [(3, True), (0, False)])
def test_mark_recall_sets_cache_hit_and_counts(
    provider: TracerProvider, exporter: InMemorySpanExporter, hits: int, hit: bool
) -> None:
    """cache.hit is a bool (what Monitor reads): true when the recall returned a memory."""
    tracing = Tracing("shop", "i", tracer_provider=provider)
    with tracing.span("recall") as span:
        tracing.mark_recall(span, hits, k=8, candidates=20, matched_key="shop:mem:abc" if hits else None)
    attrs = dict(exporter.get_finished_spans()[0].attributes or {})
    assert attrs["cache.hit"] is hit
    assert attrs["cache.name"] == "shop"
    assert attrs["recall.result_count"] == attrs["gen_ai.memory.hits"] == hits
    assert attrs["recall.k"] == attrs["gen_ai.memory.k"] == 8
    assert attrs["recall.candidate_count"] == 20
    assert attrs.get("cache.matched_key") == ("shop:mem:abc" if hits else None)
    assert "recall.zero_hits_near_threshold" not in attrs


def test_mark_recall_near_miss_and_untraced(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    with Tracing("s", "i", tracer_provider=provider).span("recall") as span:
        mark_recall(span, 0, nearest_distance=0.41)
    attrs = dict(exporter.get_finished_spans()[0].attributes or {})
    assert attrs["cache.hit"] is False
    assert attrs["recall.zero_hits_near_threshold"] is True
    assert attrs["recall.nearest_distance"] == 0.41
    with Tracing("s", "i", tracer_provider=trace.NoOpTracerProvider()).span("recall") as span:
        mark_recall(span, 1)  # a non-recording span: nothing to do, no error


def test_mark_remember_sets_the_references_attributes(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracing = Tracing("shop", "i", tracer_provider=provider)
    with tracing.span("remember") as span:
        tracing.mark_remember(span, importance=0.5, ttl=60, key="shop:mem:abc")
    with tracing.span("remember") as span:
        mark_remember(span, importance=0.8)
    first, second = (dict(s.attributes or {}) for s in exporter.get_finished_spans())
    assert (first["memory.importance"], first["memory.ttl"], first["cache.key"]) == (0.5, 60, "shop:mem:abc")
    assert second["memory.importance"] == 0.8 and "memory.ttl" not in second and "cache.key" not in second


def test_a_provider_named_in_the_environment_later_is_used() -> None:
    """The idle-span shortcut reads the environment per span, as ``get_tracer_provider`` does."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import os
        from betterdb_memory.observability.tracing import Tracing, _tracing_off

        tracing = Tracing("s", "i")
        assert _tracing_off()
        os.environ["OTEL_PYTHON_TRACER_PROVIDER"] = "sdk_tracer_provider"
        assert not _tracing_off()
        with tracing.span("recall") as span:
            print(span.is_recording())
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "OTEL_PYTHON_TRACER_PROVIDER"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
