"""Every error code the package raises: which class raises it and what it means.

A code is ``<family>.<reason>``; the family names the class (``errors`` draws the
tree), so a code alone tells what to catch:

============= ==============================================================
family        classes
============= ==============================================================
internal      ``BetterDBMemoryError`` itself: a bug, or an unknown client error
server        ``ServerError`` and its subclasses but ``EmbeddingError``
embedder      ``EmbeddingError``
validation    ``ValidationError``, ``MemoryNotFoundError``, ``TokenBudgetError``
configuration ``ConfigurationError``
connection    ``StoreConnectionError``, ``StoreTimeoutError``
consolidation ``ConsolidationBusyError``
state         ``StoreClosedError``, ``AgentMemoryClosedError``, ``SyncReentrancyError``
============= ==============================================================

``validation`` or ``configuration`` for a bad value: ``core.arguments`` says which.
Each class's ``default_code`` is its own (the code of an error raised without
``code=``). ``tests/unit/test_core_error_codes.py`` reads the package source: a code
raised but not listed here, listed but never raised, raised by a class of another
family, or a README error table out of step with ``readme_table()`` fails it.
``RENAMED`` maps the codes of earlier releases to today's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = ["CATALOG", "FAMILIES", "RENAMED", "ErrorCode", "family_of", "readme_table"]


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One code: the class that raises it (by name: some live above ``core``) and its meaning."""

    code: str
    error: str
    meaning: str


#: Each family (a code's prefix) and the classes that raise codes of it.
FAMILIES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType(
    {
        "internal": ("BetterDBMemoryError",),
        "server": (
            "ServerError",
            "IndexNotFoundError",
            "IndexExistsError",
            "QuerySyntaxError",
            "VectorSizeError",
            "CommandNotSupportedError",
            "PermissionDeniedError",
        ),
        "embedder": ("EmbeddingError",),
        "validation": ("ValidationError", "MemoryNotFoundError", "TokenBudgetError"),
        "configuration": ("ConfigurationError",),
        "connection": ("StoreConnectionError", "StoreTimeoutError"),
        "consolidation": ("ConsolidationBusyError",),
        "state": ("StoreClosedError", "AgentMemoryClosedError", "SyncReentrancyError"),
    }
)

_ROWS: tuple[tuple[str, str, str], ...] = (
    # -- internal ----------------------------------------------------------------------------
    ("internal", "BetterDBMemoryError", "an unexpected failure: a bug, or a client error of an unknown kind"),
    # -- server: the server said no -------------------------------------------------------------
    ("server.error", "ServerError", "the server answered with an error no other code names"),
    (
        "server.index_not_found",
        "IndexNotFoundError",
        "the index does not exist (dropped, or another store name)",
    ),
    ("server.index_exists", "IndexExistsError", "an index of that name already exists"),
    ("server.query_syntax", "QuerySyntaxError", "the engine refused a query's syntax"),
    ("server.vector_size", "VectorSizeError", "a vector's size does not match the index's dimension"),
    (
        "server.unsupported",
        "CommandNotSupportedError",
        "the server does not know a command (no search module?)",
    ),
    ("server.no_permission", "PermissionDeniedError", "the server's ACL refused a command or key"),
    (
        "server.replication_timeout",
        "ServerError",
        "a write is applied on the primary but fewer replicas than wait_replicas confirmed it",
    ),
    ("server.filter_unsupported", "CommandNotSupportedError", "the engine cannot run this where filter"),
    (
        "server.scope_denied",
        "PermissionDeniedError",
        "the MCP server is confined to another namespace / agent",
    ),
    ("server.llm_http_error", "ServerError", "an LLM endpoint answered with an HTTP error after its retries"),
    ("server.llm_unreachable", "ServerError", "an LLM endpoint could not be reached (or timed out)"),
    ("server.llm_empty_response", "ServerError", "an LLM answered with no content (or a refusal)"),
    ("server.empty_summary", "ServerError", "a summariser returned no text"),
    (
        "server.search_timeout",
        "ServerError",
        "a search ran out of time and the engine answered an error, never a partial answer",
    ),
    # -- embedder: the embedding model said no ----------------------------------------------------
    ("embedder.failed", "EmbeddingError", "the embedder failed"),
    ("embedder.bad_response", "EmbeddingError", "the embedding endpoint answered something unreadable"),
    ("embedder.bad_shape", "EmbeddingError", "the embedder returned vectors of the wrong number or length"),
    ("embedder.bad_type", "EmbeddingError", "the embedder returned something that is not a vector"),
    ("embedder.nonfinite", "EmbeddingError", "the embedder returned NaN or infinity"),
    ("embedder.connection_failed", "EmbeddingError", "the embedding endpoint could not be reached"),
    ("embedder.rate_limited", "EmbeddingError", "the embedding endpoint kept rate-limiting past the retries"),
    ("embedder.unavailable", "EmbeddingError", "the embedding endpoint kept failing (5xx) past the retries"),
    # -- validation: an operation's argument is wrong; nothing was sent --------------------------
    ("validation.invalid", "ValidationError", "an argument is invalid"),
    (
        "validation.type",
        "ValidationError",
        "an argument has the wrong type (a bool where a number is wanted)",
    ),
    ("validation.range", "ValidationError", "a number is out of its allowed range"),
    ("validation.nonfinite", "ValidationError", "a number is NaN or infinite"),
    ("validation.choice", "ValidationError", "a value is not one of the allowed choices"),
    ("validation.argument", "ValidationError", "arguments that do not go together, or an unknown one"),
    ("validation.empty", "ValidationError", "a text or value is empty"),
    ("validation.too_long", "ValidationError", "a text or value is too long"),
    ("validation.too_many", "ValidationError", "too many items (tags, turns, ...)"),
    ("validation.encoding", "ValidationError", "bytes are not UTF-8, or a string holds a lone surrogate"),
    ("validation.control", "ValidationError", "a scope or tag value holds a control character"),
    ("validation.whitespace", "ValidationError", "a scope or tag value starts or ends with whitespace"),
    ("validation.comma", "ValidationError", "a scope or tag value holds a comma (the TAG separator)"),
    ("validation.wildcard", "ValidationError", "a scope or tag value holds a wildcard"),
    ("validation.name", "ValidationError", "a store name Monitor would not accept"),
    ("validation.memory_id", "ValidationError", "a memory id that cannot be a key"),
    ("validation.duplicate_id", "ValidationError", "one batch names the same memory id twice"),
    (
        "validation.not_found",
        "MemoryNotFoundError",
        "no memory has the id given (deleted, expired, never written)",
    ),
    ("validation.budget", "TokenBudgetError", "token_budget is not a positive integer"),
    ("validation.metadata", "ValidationError", "metadata is not JSON-serialisable"),
    ("validation.sensitivity", "ValidationError", "an unknown sensitivity class"),
    ("validation.kind", "ValidationError", "an unknown memory kind"),
    ("validation.weights", "ValidationError", "recall weights that are unknown, negative, or all zero"),
    ("validation.cursor", "ValidationError", "a list cursor this store did not hand out"),
    ("validation.empty_scope", "ValidationError", "an operation over a scope was given no scope field"),
    ("validation.fact", "ValidationError", "a fact from the extractor is malformed"),
    ("validation.fact_date", "ValidationError", "a fact's date is not an ISO date"),
    ("validation.summary", "ValidationError", "a consolidation summary is malformed"),
    ("validation.tool_result", "ValidationError", "a turn's tool result is malformed"),
    ("validation.text_type", "ValidationError", "a text to embed is not a string"),
    ("validation.embedder_rejected", "ValidationError", "the embedding endpoint refused the input"),
    ("validation.vector_type", "ValidationError", "a query vector is not a sequence of numbers"),
    ("validation.vector_dimensions", "ValidationError", "a query vector has the wrong length"),
    ("validation.vector_nonfinite", "ValidationError", "a query vector holds NaN or infinity"),
    ("validation.vector_zero", "ValidationError", "a query vector is all zeros (no direction)"),
    ("validation.filter", "ValidationError", "a filter names fields that are not indexed"),
    ("validation.time_format", "ValidationError", "a time is not ISO 8601 text"),
    ("validation.timezone", "ValidationError", "tz is not an IANA time zone name or a tzinfo"),
    ("validation.time_window", "ValidationError", "a time window whose since is after its until"),
    ("validation.filter_type", "ValidationError", "a where filter's part has the wrong type"),
    ("validation.filter_value", "ValidationError", "a where filter's value is not finite / not usable"),
    ("validation.filter_field", "ValidationError", "a where filter names a field filters cannot use"),
    ("validation.filter_operator", "ValidationError", "a where filter uses an unknown operator"),
    ("validation.filter_depth", "ValidationError", "a where filter nests $and/$or/$not too deep"),
    ("validation.filter_empty", "ValidationError", "a where filter holds an empty list or condition"),
    ("validation.filter_size", "ValidationError", "a where filter's query is too long for the engine"),
    ("validation.metadata_field", "ValidationError", "metadata breaks a declared metadata field's type"),
    ("validation.length", "ValidationError", "parallel lists of different lengths"),
    ("validation.import", "ValidationError", "an export file's line is not valid"),
    ("validation.usage", "ValidationError", "a CLI command used wrongly"),
    # -- configuration: a setting, or the set-up, is wrong ----------------------------------------
    ("configuration.invalid", "ConfigurationError", "a setting is invalid"),
    (
        "configuration.index_outdated",
        "ConfigurationError",
        "the index lacks a field this call needs (subjects need subject_key): rebuild it",
    ),
    ("configuration.type", "ConfigurationError", "a setting has the wrong type"),
    ("configuration.range", "ConfigurationError", "a numeric setting is out of its allowed range"),
    ("configuration.nonfinite", "ConfigurationError", "a numeric setting is NaN or infinite"),
    ("configuration.choice", "ConfigurationError", "a setting is not one of the allowed choices"),
    (
        "configuration.unknown_field",
        "ConfigurationError",
        "the live config names a field that does not exist",
    ),
    ("configuration.too_many", "ConfigurationError", "too many metadata_fields declared"),
    ("configuration.field_name", "ConfigurationError", "a metadata_fields name that cannot be a field"),
    ("configuration.reserved_field", "ConfigurationError", "a metadata_fields name taken or declared twice"),
    ("configuration.weights", "ConfigurationError", "the store's weights are unknown, negative, or all zero"),
    ("configuration.budget", "ConfigurationError", "ContextBudget fractions that do not add up"),
    ("configuration.redact", "ConfigurationError", "redact names an unknown sensitivity class"),
    ("configuration.fact_source", "ConfigurationError", "ConsolidationConfig.fact_source is not a valid tag"),
    (
        "configuration.ambiguous",
        "ConfigurationError",
        "two ways of building the same thing were given at once",
    ),
    ("configuration.client", "ConfigurationError", "no Valkey client was given"),
    ("configuration.store", "ConfigurationError", "an adapter was given something that is not a store"),
    ("configuration.embed_fn", "ConfigurationError", "AgentMemoryOptions without an embed function"),
    (
        "configuration.embedder",
        "ConfigurationError",
        "the embedder or embed_fn is unusable, or both were given",
    ),
    (
        "configuration.dimensions",
        "ConfigurationError",
        "an embedder's dimension is not a usable vector length",
    ),
    (
        "configuration.dimensions_unknown",
        "ConfigurationError",
        "an embedding model whose dimension must be given",
    ),
    (
        "configuration.dimension_mismatch",
        "ConfigurationError",
        "the index was made for another vector dimension",
    ),
    (
        "configuration.model_mismatch",
        "ConfigurationError",
        "the index (or model files) belong to another model",
    ),
    ("configuration.model_missing", "ConfigurationError", "the embedding model's files are missing"),
    ("configuration.embedder_auth", "ConfigurationError", "the embedding endpoint refused the credentials"),
    ("configuration.embedder_model", "ConfigurationError", "the embedding endpoint does not know the model"),
    ("configuration.llm_auth", "ConfigurationError", "the LLM endpoint refused the credentials"),
    ("configuration.llm_model", "ConfigurationError", "the LLM endpoint does not know the model"),
    ("configuration.cache_client", "ConfigurationError", "the embedding cache's client decodes responses"),
    (
        "configuration.token_counter",
        "ConfigurationError",
        "a token counter answered something that is not a count",
    ),
    ("configuration.reranker", "ConfigurationError", "reranker is not True, False or a Reranker"),
    ("configuration.consolidation", "ConfigurationError", "consolidation is not a ConsolidationConfig"),
    ("configuration.no_fact_extractor", "ConfigurationError", "extract_memories needs a fact_extractor"),
    ("configuration.telemetry", "ConfigurationError", "telemetry is not a MemoryTelemetryOptions"),
    ("configuration.analytics", "ConfigurationError", "analytics is not a bool or a Telemetry"),
    ("configuration.discovery", "ConfigurationError", "discovery is not a bool or a MemoryDiscoveryConfig"),
    ("configuration.config_refresh", "ConfigurationError", "config_refresh is not a bool or a config"),
    ("configuration.metrics_prefix", "ConfigurationError", "a metrics prefix Prometheus would refuse"),
    (
        "configuration.metrics_conflict",
        "ConfigurationError",
        "a registry holds other metrics under the same names",
    ),
    (
        "configuration.index_outdated",
        "ConfigurationError",
        "the index in use lacks fields a feature needs (run betterdb-memory reindex)",
    ),
    (
        "configuration.foreign_index",
        "ConfigurationError",
        "the index of that name was made by another library",
    ),
    ("configuration.no_search_module", "ConfigurationError", "the server has no search module"),
    (
        "configuration.reembed_in_progress",
        "ConfigurationError",
        "a re-embedding to another model is switching",
    ),
    ("configuration.missing_extra", "ConfigurationError", "an optional extra is not installed"),
    ("configuration.missing_module", "ConfigurationError", "the embedded engine's module file is missing"),
    ("configuration.appendfsync", "ConfigurationError", "an appendfsync value Valkey does not know"),
    ("configuration.port_conflict", "ConfigurationError", "the embedded server's port is taken"),
    ("configuration.no_loop", "ConfigurationError", "started without a running event loop"),
    (
        "configuration.mcp_token_required",
        "ConfigurationError",
        "an MCP server on a non-loopback address needs a token",
    ),
    (
        "configuration.mcp_token_invalid",
        "ConfigurationError",
        "the MCP token is unreadable, too short or not header-safe",
    ),
    ("configuration.sync_without_loop", "ConfigurationError", "a sync adapter method over an async store"),
    ("configuration.closed", "ConfigurationError", "a helper started again after close()"),
    # -- connection: the server could not be reached ------------------------------------------------
    ("connection.failed", "StoreConnectionError", "the connection to Valkey failed"),
    ("connection.timeout", "StoreTimeoutError", "Valkey did not answer in time"),
    (
        "connection.index_rebuilding",
        "StoreConnectionError",
        "the index is still being rebuilt after a restart",
    ),
    ("connection.not_started", "StoreConnectionError", "the embedded server is not running"),
    ("connection.startup_failed", "StoreConnectionError", "the embedded server exited while starting"),
    ("connection.startup_timeout", "StoreConnectionError", "the embedded server did not answer PING in time"),
    # -- consolidation: another run holds the scope -----------------------------------------------------
    ("consolidation.busy", "ConsolidationBusyError", "another run holds the scope's lock"),
    (
        "consolidation.lock_lost",
        "ConsolidationBusyError",
        "this run's lock expired midway; nothing more was written",
    ),
    # -- state: used at the wrong time ----------------------------------------------------------------
    ("state.closed", "StoreClosedError", "the store was used after close() started"),
    ("state.facade_closed", "AgentMemoryClosedError", "the AgentMemory was used after close() started"),
    ("state.reentrant_sync_call", "SyncReentrancyError", "a sync method called from its own loop thread"),
)

#: Every code the package raises, by code.
CATALOG: Final[Mapping[str, ErrorCode]] = MappingProxyType({c: ErrorCode(c, e, m) for c, e, m in _ROWS})

#: Codes of earlier releases -> the code raised for the same mistake now (CHANGELOG lists them).
RENAMED: Final[Mapping[str, str]] = MappingProxyType(
    {
        "error": "internal",
        "memory.not_found": "validation.not_found",
        "config.invalid": "configuration.invalid",
        "config.unknown_field": "configuration.unknown_field",
        "llm.http_error": "server.llm_http_error",
        "llm.connection_failed": "server.llm_unreachable",
        "llm.empty_response": "server.llm_empty_response",
        "summary.empty": "server.empty_summary",
        "validation.nan": "validation.nonfinite",
    }
)


def family_of(code: str) -> str:
    """A code's family: the part before the first dot (``internal`` is its own)."""
    return code.split(".", 1)[0]


def readme_table() -> str:
    """The README's table of codes, one row per class (its default code first), in ``FAMILIES`` order."""
    lines = ["| error | family | codes (the first is the default) |", "|---|---|---|"]
    for family, classes in FAMILIES.items():
        for cls in classes:
            codes = [c.code for c in CATALOG.values() if c.error == cls]
            lines.append(f"| `{cls}` | `{family}` | {', '.join(f'`{c}`' for c in codes)} |")
    return "\n".join(lines)
