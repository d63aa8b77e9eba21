"""OpenTelemetry spans, one per public store operation.

The tracer (instrumentation scope) is ``@betterdb/agent-memory``, as in
betterdb-agent-memory: BetterDB Monitor keeps only spans whose scope starts with
``@betterdb/`` and reads a memory store's spans by that exact name. Each operation
opens a span named ``agent_memory.<op>``, the reference's names for its operations
(``agent_memory.remember``, ``agent_memory.recall``, ``agent_memory.consolidate``,
``agent_memory.consolidateFacts``; see ``OP_*``), carrying:

* ``cache.name`` = the store name, which Monitor groups a trace's spans by; on a
  recall, ``cache.hit`` (a memory was returned) and, when known, ``cache.matched_key``
  (the best hit's key, which Monitor checks against live Valkey state): see
  ``mark_recall``.
* the reference's attributes where a call site sets them (``recall.k``,
  ``recall.result_count``, ``memory.importance``, ``consolidate.created``, ...).
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

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final, TypeAlias

from opentelemetry import trace
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
from opentelemetry.util.types import AttributeValue

from .._version import __version__
from ..errors import BetterDBMemoryError, ConfigurationError, ValidationError

__all__ = [
    "ATTR_CACHE_HIT",
    "ATTR_CACHE_KEY",
    "ATTR_CACHE_MATCHED_KEY",
    "ATTR_CACHE_NAME",
    "ATTR_DB_SYSTEM",
    "ATTR_DB_SYSTEM_NAME",
    "ATTR_ERROR_TYPE",
    "ATTR_MEMORY_HITS",
    "ATTR_MEMORY_IMPORTANCE",
    "ATTR_MEMORY_INDEX",
    "ATTR_MEMORY_K",
    "ATTR_MEMORY_OPERATION",
    "ATTR_MEMORY_STORE",
    "ATTR_MEMORY_TTL",
    "ATTR_RECALL_CANDIDATES",
    "ATTR_RECALL_K",
    "ATTR_RECALL_NEAREST_DISTANCE",
    "ATTR_RECALL_NEAR_THRESHOLD",
    "ATTR_RECALL_RESULTS",
    "DEFAULT_TRACER_NAME",
    "INSTRUMENTATION_NAME",
    "OP_CONSOLIDATE",
    "OP_CONSOLIDATE_FACTS",
    "OP_RECALL",
    "OP_REMEMBER",
    "SPAN_PREFIX",
    "AttrValue",
    "Attributes",
    "Tracing",
    "add_attributes",
    "consolidation_operation",
    "mark_recall",
    "mark_remember",
    "operation_span",
]

AttrValue: TypeAlias = AttributeValue
# A mapping, or a zero-argument callable returning one, called only when recording.
Attributes: TypeAlias = Mapping[str, AttrValue] | Callable[[], Mapping[str, AttrValue]]

#: The instrumentation scope: betterdb-agent-memory's tracer name, which Monitor keeps.
INSTRUMENTATION_NAME: Final = "@betterdb/agent-memory"
#: The reference's name for it (``MemoryTelemetryOptions(tracer_name=...)`` overrides it).
DEFAULT_TRACER_NAME: Final = INSTRUMENTATION_NAME
#: Every span is ``agent_memory.<operation>``.
SPAN_PREFIX: Final = "agent_memory."

# The reference's operations (span ``agent_memory.<op>``); other operations use the
# same style (camelCase, as the reference's ``consolidateFacts``).
OP_REMEMBER: Final = "remember"
OP_RECALL: Final = "recall"
OP_CONSOLIDATE: Final = "consolidate"
OP_CONSOLIDATE_FACTS: Final = "consolidateFacts"

ATTR_CACHE_NAME: Final = "cache.name"
ATTR_CACHE_HIT: Final = "cache.hit"
ATTR_CACHE_KEY: Final = "cache.key"
ATTR_CACHE_MATCHED_KEY: Final = "cache.matched_key"
ATTR_DB_SYSTEM: Final = "db.system"
ATTR_DB_SYSTEM_NAME: Final = "db.system.name"
ATTR_ERROR_TYPE: Final = "error.type"
ATTR_MEMORY_OPERATION: Final = "gen_ai.memory.operation"
ATTR_MEMORY_STORE: Final = "gen_ai.memory.store"
ATTR_MEMORY_INDEX: Final = "gen_ai.memory.index"
ATTR_MEMORY_K: Final = "gen_ai.memory.k"
ATTR_MEMORY_HITS: Final = "gen_ai.memory.hits"
# The reference's recall attributes.
ATTR_RECALL_K: Final = "recall.k"
ATTR_RECALL_CANDIDATES: Final = "recall.candidate_count"
ATTR_RECALL_RESULTS: Final = "recall.result_count"
ATTR_RECALL_NEAR_THRESHOLD: Final = "recall.zero_hits_near_threshold"
ATTR_RECALL_NEAREST_DISTANCE: Final = "recall.nearest_distance"
# The reference's remember attributes.
ATTR_MEMORY_IMPORTANCE: Final = "memory.importance"
ATTR_MEMORY_TTL: Final = "memory.ttl"

# Span names must stay low-cardinality (backends group by them): an operation is a
# fixed identifier like "recall" or "consolidateFacts", never a user value.
_OPERATION_RE: Final = re.compile(r"^[a-z][A-Za-z0-9_]*(\.[a-z][A-Za-z0-9_]*)*$")


# The operations already checked: a store names a few, once per call each.
_CHECKED: set[str] = set()


def _check_operation(operation: str) -> str:
    if type(operation) is str and operation in _CHECKED:
        return operation
    if not isinstance(operation, str) or len(operation) > 64 or not _OPERATION_RE.match(operation):
        raise ValidationError(
            f"operation must be a short identifier like 'recall' or 'consolidateFacts', got {operation!r}",
            details={"argument": "operation"},
        )
    if type(operation) is str and len(_CHECKED) < 1024:
        _CHECKED.add(operation)
    return operation


def _check_tracer_name(tracer_name: str | None) -> str:
    if tracer_name is None:
        return INSTRUMENTATION_NAME
    if not isinstance(tracer_name, str) or not tracer_name.strip():
        raise ValidationError(
            f"tracer_name must be a non-empty string, got {tracer_name!r}",
            details={"argument": "tracer_name"},
        )
    return tracer_name


def consolidation_operation(mode: str) -> str:
    """The reference's operation name for a consolidation run of ``mode``.

    ``"facts"`` -> ``"consolidateFacts"``, anything else -> ``"consolidate"`` (the span
    of ``consolidate(mode="facts")`` is ``agent_memory.consolidateFacts`` there).
    """
    return OP_CONSOLIDATE_FACTS if mode == "facts" else OP_CONSOLIDATE


def mark_recall(
    span: Span,
    hits: int,
    *,
    k: int | None = None,
    candidates: int | None = None,
    matched_key: str | None = None,
    nearest_distance: float | None = None,
) -> None:
    """Set what a recall span reports once the hits are known (no-op when not recording).

    Sets ``cache.hit`` (``hits > 0``, a bool, what Monitor reads), ``recall.result_count``
    and ``gen_ai.memory.hits``; with ``k``, ``recall.k`` and ``gen_ai.memory.k``; with
    ``candidates``, ``recall.candidate_count``; with ``matched_key``, ``cache.matched_key``
    (the best hit's document key, which Monitor looks up to explain the hit).
    ``nearest_distance`` marks a near miss (the reference's
    ``recall.zero_hits_near_threshold`` / ``recall.nearest_distance``): pass it only when
    the recall was empty and its nearest candidate sat just past the threshold.
    """
    if not span.is_recording():
        return
    attrs: dict[str, AttrValue] = {
        ATTR_CACHE_HIT: hits > 0,
        ATTR_RECALL_RESULTS: hits,
        ATTR_MEMORY_HITS: hits,
    }
    if k is not None:
        attrs[ATTR_RECALL_K] = k
        attrs[ATTR_MEMORY_K] = k
    if candidates is not None:
        attrs[ATTR_RECALL_CANDIDATES] = candidates
    if matched_key is not None:
        attrs[ATTR_CACHE_MATCHED_KEY] = matched_key
    if nearest_distance is not None:
        attrs[ATTR_RECALL_NEAR_THRESHOLD] = True
        attrs[ATTR_RECALL_NEAREST_DISTANCE] = float(nearest_distance)
    span.set_attributes(attrs)


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


def mark_remember(
    span: Span, *, importance: float | None = None, ttl: float | None = None, key: str | None = None
) -> None:
    """Set what a remember span reports (no-op when not recording).

    ``memory.importance`` (the effective importance, the default included, as the
    reference reports it), ``memory.ttl`` when one was given, and ``cache.key`` (the
    document written, which Monitor can look up) for a single write.
    """
    if not span.is_recording():
        return
    attrs: dict[str, AttrValue] = {}
    if importance is not None:
        attrs[ATTR_MEMORY_IMPORTANCE] = float(importance)
    if ttl is not None:
        attrs[ATTR_MEMORY_TTL] = ttl
    if key is not None:
        attrs[ATTR_CACHE_KEY] = key
    span.set_attributes(attrs)


# With no OpenTelemetry SDK in the process every span is a non-recording one, yet opening
# one as the current span still costs about 13 µs (half of a single write's own Python
# time). Until an application sets a provider, a store's spans are this shared no-op.
_IDLE: Final[AbstractContextManager[Span]] = nullcontext(trace.INVALID_SPAN)
_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


# ``trace.get_tracer_provider()`` looks its environment variable up in ``os.environ`` on every
# call until a provider is set, which costs more than the rest of an idle span (``in
# os.environ`` encodes the key and raises a KeyError). The same test against the environment's
# own dict, with the key encoded once, is a dict lookup (``os.environ`` reads that dict too).
_ENV_DATA: Mapping[Any, Any] | None = getattr(os.environ, "_data", None)
_ENV_KEY: Any = os.environ.encodekey(OTEL_PYTHON_TRACER_PROVIDER) if _ENV_DATA is not None else None


_UNKNOWN: Final = object()  # an API version without that global: ask ``get_tracer_provider``


def _provider_in_env() -> bool:
    """Whether ``OTEL_PYTHON_TRACER_PROVIDER`` names a provider (``get_tracer_provider`` loads it)."""
    if _ENV_DATA is None:
        return OTEL_PYTHON_TRACER_PROVIDER in os.environ
    return _ENV_KEY in _ENV_DATA


def _tracing_off() -> bool:
    """Whether no tracer provider is set (checked per span: one may be set at any time).

    The API's global (``trace._TRACER_PROVIDER``, what ``set_tracer_provider`` sets) is read
    first: still None and no provider named in the environment, nothing can record.
    """
    if getattr(trace, "_TRACER_PROVIDER", _UNKNOWN) is None and not _provider_in_env():
        return True
    return isinstance(trace.get_tracer_provider(), _NO_SDK)


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
        f"{SPAN_PREFIX}{operation}",
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
    tracer_name: str | None = None,
) -> AbstractContextManager[Span]:
    """Open the span of one public operation, as the current span.

    A plain (sync) context manager on purpose: it is usable with ``with`` inside
    async code, and the span stays current across ``await`` because OpenTelemetry's
    context lives in a ``contextvars`` variable, which each task carries. A store
    should prefer ``Tracing.span``, which looks its tracer up once.

    Args:
        operation: the operation, e.g. ``"recall"``; the span is ``agent_memory.<operation>``.
        store_name: the store name (``cache.name``, ``gen_ai.memory.store``).
        index_name: the search index (``gen_ai.memory.index``).
        attributes: extra attributes, or a callable returning them (called only when
            the span records).
        tracer_provider: a provider to use instead of the global one (tests, or an
            application running several providers).
        tracer_name: the instrumentation scope (default ``@betterdb/agent-memory``;
            Monitor keeps only scopes starting with ``@betterdb/``).

    Returns:
        A context manager yielding the span (non-recording when no SDK is configured).

    Raises:
        ValidationError: ``operation`` is not a short identifier (on entering).
    """
    tracer = trace.get_tracer(_check_tracer_name(tracer_name), __version__, tracer_provider)
    return _open_span(tracer, operation, store_name, index_name, attributes)


class Tracing:
    """The tracing handle a store holds: its names and (optionally) its provider.

    Args:
        store_name: the store name, set as ``cache.name`` on every span.
        index_name: the store's search index name.
        tracer_provider: use this provider instead of the global one. The global
            provider can be set only once per process, so tests and applications
            with several pipelines pass their own here.
        tracer_name: the instrumentation scope (the reference's ``tracer_name``);
            ``@betterdb/agent-memory`` by default.
    """

    def __init__(
        self,
        store_name: str,
        index_name: str,
        *,
        tracer_provider: TracerProvider | None = None,
        tracer_name: str | None = None,
    ) -> None:
        if not isinstance(store_name, str) or not store_name:
            raise ConfigurationError(
                "store_name must be a non-empty string", details={"argument": "store_name"}
            )
        self.store_name = store_name
        self.index_name = index_name
        self.tracer_provider = tracer_provider
        self.tracer_name = _check_tracer_name(tracer_name)
        # Looked up once: with no provider configured this is a proxy that starts
        # delegating by itself if the application sets a global provider later.
        self._tracer = trace.get_tracer(self.tracer_name, __version__, tracer_provider)

    def __repr__(self) -> str:
        return f"Tracing(store_name={self.store_name!r}, index_name={self.index_name!r})"

    def span(self, operation: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
        """Open the span of ``operation``, as the current span (see ``operation_span``).

        Args:
            operation: the operation, e.g. ``"recall"``; the span is ``agent_memory.<operation>``.
            attributes: extra attributes, or a callable returning them (called only
                when the span records).
        """
        if self.tracer_provider is None and _tracing_off():
            _check_operation(operation)
            return _IDLE
        return _open_span(self._tracer, operation, self.store_name, self.index_name, attributes)

    def mark_recall(
        self,
        span: Span,
        hits: int,
        *,
        k: int | None = None,
        candidates: int | None = None,
        matched_key: str | None = None,
        nearest_distance: float | None = None,
    ) -> None:
        """``mark_recall`` for a span of this store (see the module function)."""
        mark_recall(
            span, hits, k=k, candidates=candidates, matched_key=matched_key, nearest_distance=nearest_distance
        )

    def mark_remember(
        self, span: Span, *, importance: float | None = None, ttl: float | None = None, key: str | None = None
    ) -> None:
        """``mark_remember`` for a span of this store (see the module function)."""
        mark_remember(span, importance=importance, ttl=ttl, key=key)
