"""OpenTelemetry spans, one per public store operation.

Each operation opens a span named ``memory.<op>`` (``memory.recall``,
``memory.remember``, ...) carrying:

* ``cache.name`` = the store name. BetterDB Monitor correlates traces with the
  instances it discovered by this attribute; the reference library set none, so
  Monitor dropped its spans.
* ``db.system`` / ``db.system.name`` = ``"valkey"`` (the older and the current
  OpenTelemetry database conventions; exporters read one or the other).
* ``gen_ai.memory.*``: operation, store, index, and whatever the store adds
  (``gen_ai.memory.k``, ``gen_ai.memory.hits``, ...), in the style of the
  ``gen_ai.operation.name`` conventions.

The API is only the OpenTelemetry *API*: with no SDK / tracer provider configured
the tracer is a no-op whose spans do not record. Attributes that cost something to
compute are passed as a zero-argument callable and only called when the span
records (``span.is_recording()``), so an untraced process pays for a context
manager and nothing else.

Exceptions raised inside the span are recorded as span events, set the status to
ERROR and set ``error.type`` (the library error ``code``, else the class name),
then propagate unchanged. Cancellation (``asyncio.CancelledError``) is not an
error: the span just ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Final, TypeAlias

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from .._version import __version__
from ..errors import BetterDBMemoryError, ValidationError

__all__ = [
    "ATTR_CACHE_NAME",
    "ATTR_DB_SYSTEM",
    "ATTR_DB_SYSTEM_NAME",
    "ATTR_ERROR_TYPE",
    "ATTR_MEMORY_HITS",
    "ATTR_MEMORY_INDEX",
    "ATTR_MEMORY_K",
    "ATTR_MEMORY_OPERATION",
    "ATTR_MEMORY_STORE",
    "INSTRUMENTATION_NAME",
    "AttrValue",
    "Attributes",
    "Tracing",
    "add_attributes",
    "operation_span",
]

AttrValue: TypeAlias = AttributeValue
# A mapping, or a zero-argument callable returning one, called only when recording.
Attributes: TypeAlias = Mapping[str, AttrValue] | Callable[[], Mapping[str, AttrValue]]

INSTRUMENTATION_NAME: Final = "betterdb_memory"

ATTR_CACHE_NAME: Final = "cache.name"
ATTR_DB_SYSTEM: Final = "db.system"
ATTR_DB_SYSTEM_NAME: Final = "db.system.name"
ATTR_ERROR_TYPE: Final = "error.type"
ATTR_MEMORY_OPERATION: Final = "gen_ai.memory.operation"
ATTR_MEMORY_STORE: Final = "gen_ai.memory.store"
ATTR_MEMORY_INDEX: Final = "gen_ai.memory.index"
ATTR_MEMORY_K: Final = "gen_ai.memory.k"
ATTR_MEMORY_HITS: Final = "gen_ai.memory.hits"

# Span names must stay low-cardinality (backends group by them): an operation is a
# fixed identifier like "recall" or "consolidate.facts", never a user value.
_OPERATION_RE: Final = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


def _check_operation(operation: str) -> str:
    if not isinstance(operation, str) or len(operation) > 64 or not _OPERATION_RE.match(operation):
        raise ValidationError(
            f"operation must be a short lower-case identifier like 'recall', got {operation!r}",
            details={"argument": "operation"},
        )
    return operation


def add_attributes(span: Span, attributes: Attributes | None) -> None:
    """Set ``attributes`` on ``span`` if it records; a callable is called only then.

    Args:
        span: the span yielded by ``Tracing.span`` / ``operation_span``.
        attributes: a mapping, or a zero-argument callable returning one (for values
            that cost something to compute, such as counting hits by kind).
    """
    if attributes is None or not span.is_recording():
        return
    values = attributes() if callable(attributes) else attributes
    span.set_attributes(values)


def _error_type(exc: BaseException) -> str:
    if isinstance(exc, BetterDBMemoryError):
        return exc.code
    return type(exc).__qualname__


@contextmanager
def _open_span(
    tracer: trace.Tracer, operation: str, store_name: str, index_name: str, attributes: Attributes | None
) -> Iterator[Span]:
    _check_operation(operation)
    with tracer.start_as_current_span(
        f"memory.{operation}",
        kind=SpanKind.INTERNAL,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if span.is_recording():
            span.set_attributes(
                {
                    ATTR_CACHE_NAME: store_name,
                    ATTR_DB_SYSTEM: "valkey",
                    ATTR_DB_SYSTEM_NAME: "valkey",
                    ATTR_MEMORY_OPERATION: operation,
                    ATTR_MEMORY_STORE: store_name,
                    ATTR_MEMORY_INDEX: index_name,
                }
            )
            add_attributes(span, attributes)
        try:
            yield span
        except Exception as exc:
            if span.is_recording():
                span.record_exception(exc)
                span.set_attribute(ATTR_ERROR_TYPE, _error_type(exc))
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise


def operation_span(
    operation: str,
    *,
    store_name: str,
    index_name: str,
    attributes: Attributes | None = None,
    tracer_provider: TracerProvider | None = None,
) -> AbstractContextManager[Span]:
    """Open the span of one public operation, as the current span.

    A plain (sync) context manager on purpose: it is usable with ``with`` inside
    async code, and the span stays current across ``await`` because OpenTelemetry's
    context lives in a ``contextvars`` variable, which each task carries. A store
    should prefer ``Tracing.span``, which looks its tracer up once.

    Args:
        operation: the operation, e.g. ``"recall"``; the span is ``memory.<operation>``.
        store_name: the store name (``cache.name``, ``gen_ai.memory.store``).
        index_name: the search index (``gen_ai.memory.index``).
        attributes: extra attributes, or a callable returning them (called only when
            the span records).
        tracer_provider: a provider to use instead of the global one (tests, or an
            application running several providers).

    Returns:
        A context manager yielding the span (non-recording when no SDK is configured).

    Raises:
        ValidationError: ``operation`` is not a short identifier (on entering).
    """
    tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)
    return _open_span(tracer, operation, store_name, index_name, attributes)


class Tracing:
    """The tracing handle a store holds: its names and (optionally) its provider.

    Args:
        store_name: the store name, set as ``cache.name`` on every span.
        index_name: the store's search index name.
        tracer_provider: use this provider instead of the global one. The global
            provider can be set only once per process, so tests and applications
            with several pipelines pass their own here.
    """

    def __init__(
        self, store_name: str, index_name: str, *, tracer_provider: TracerProvider | None = None
    ) -> None:
        if not isinstance(store_name, str) or not store_name:
            raise ValidationError("store_name must be a non-empty string", details={"argument": "store_name"})
        self.store_name = store_name
        self.index_name = index_name
        self.tracer_provider = tracer_provider
        # Looked up once: with no provider configured this is a proxy that starts
        # delegating by itself if the application sets a global provider later.
        self._tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider)

    def __repr__(self) -> str:
        return f"Tracing(store_name={self.store_name!r}, index_name={self.index_name!r})"

    def span(self, operation: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
        """Open the span of ``operation``, as the current span (see ``operation_span``).

        Args:
            operation: the operation, e.g. ``"recall"``; the span is ``memory.<operation>``.
            attributes: extra attributes, or a callable returning them (called only
                when the span records).
        """
        return _open_span(self._tracer, operation, self.store_name, self.index_name, attributes)
