"""Tracing: one memory.<op> span per operation, Monitor's cache.name, errors, zero cost untraced.

The global tracer provider can be set only once per process, so these tests never
set it: each uses its own SDK provider passed to ``Tracing(tracer_provider=...)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from betterdb_memory.errors import IndexNotFoundError, ValidationError
from betterdb_memory.observability.tracing import Tracing, add_attributes, operation_span


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
    """The span is memory.<op> with cache.name (for Monitor), db.system and gen_ai.memory.* set."""
    tracing = Tracing("shop", "shop:mem:idx", tracer_provider=provider)
    with tracing.span("recall", {"gen_ai.memory.k": 5}) as span:
        span.set_attribute("gen_ai.memory.hits", 2)

    (finished,) = exporter.get_finished_spans()
    assert finished.name == "memory.recall"
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
    assert finished.instrumentation_scope.name == "betterdb_memory"


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
    assert outer.name == "memory.consolidate"
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


def test_operation_span_function(provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
    """operation_span works without a Tracing object."""
    with operation_span("forget", store_name="s", index_name="i", tracer_provider=provider):
        pass
    (finished,) = exporter.get_finished_spans()
    assert finished.name == "memory.forget"
    assert (finished.attributes or {})["cache.name"] == "s"


@pytest.mark.parametrize("op", ["", "Recall", "recall thread-123", "memory.", "a" * 65])
def test_operation_must_be_a_short_identifier(provider: TracerProvider, op: str) -> None:
    """Span names stay low-cardinality: user values cannot become operation names."""
    with pytest.raises(ValidationError), Tracing("s", "i", tracer_provider=provider).span(op):
        pass
