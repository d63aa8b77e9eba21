"""Every error the library raises, and the one place backend errors are translated.

The tree, in three families (asyncpg's split: the server said no / the caller got
it wrong / the connection failed)::

    BetterDBMemoryError                 code, message, details
    ├── ServerError                     a server answered with an error
    │   ├── IndexNotFoundError
    │   ├── IndexExistsError
    │   ├── QuerySyntaxError
    │   ├── VectorSizeError
    │   ├── CommandNotSupportedError
    │   ├── PermissionDeniedError
    │   └── EmbeddingError              the embedding model / endpoint failed or answered nonsense
    ├── ValidationError (ValueError)    a call's arguments are wrong; nothing was sent
    │   ├── ConfigurationError          the store's set-up is wrong (dimension, extras, ...)
    │   ├── MemoryNotFoundError         the memory id named does not exist
    │   └── TokenBudgetError            ``token_budget`` is not a positive integer
    ├── StoreConnectionError            the server could not be reached in time
    │   └── StoreTimeoutError
    ├── ConsolidationBusyError          another run holds a scope's lock (try again later)
    └── StoreClosedError                the store was used after ``close()``

``EmbeddingError``, ``MemoryNotFoundError`` and ``TokenBudgetError`` are the names
actrone-memory raises for the same conditions, placed in the family whose meaning
they share, so code written against either library catches them.

``backend.translate`` maps a ``valkey`` exception to this tree: it is the only code
in the package that inspects backend exception types (this module imports no client
library). The server error wordings of both engines (valkey-search and RediSearch)
live here, in ``_SERVER_ERRORS`` (``classify_server_error``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "BetterDBMemoryError",
    "CommandNotSupportedError",
    "ConfigurationError",
    "ConsolidationBusyError",
    "EmbeddingError",
    "IndexExistsError",
    "IndexNotFoundError",
    "MemoryNotFoundError",
    "PermissionDeniedError",
    "QuerySyntaxError",
    "ServerError",
    "StoreClosedError",
    "StoreConnectionError",
    "StoreTimeoutError",
    "TokenBudgetError",
    "ValidationError",
    "VectorSizeError",
    "classify_server_error",
    "is_search_timeout",
]


class BetterDBMemoryError(Exception):
    """Root of every error the library raises.

    Args:
        message: what went wrong, for a person.
        code: a stable machine-readable identifier (``"validation.empty"``, ...); every
            code the package raises is listed in ``core.error_codes.CATALOG``.
        details: structured context (argument names, counts done so far, ...).
    """

    default_code = "internal"

    def __init__(self, message: str, *, code: str | None = None, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, details={self.details!r})"
        )


# -- the server said no -----------------------------------------------------------


class ServerError(BetterDBMemoryError):
    """A server answered with an error: Valkey, an LLM endpoint, or (``EmbeddingError``) the embedding model."""

    default_code = "server.error"


class IndexNotFoundError(ServerError):
    default_code = "server.index_not_found"


class IndexExistsError(ServerError):
    default_code = "server.index_exists"


class QuerySyntaxError(ServerError):
    default_code = "server.query_syntax"


class VectorSizeError(ServerError):
    default_code = "server.vector_size"


class CommandNotSupportedError(ServerError):
    default_code = "server.unsupported"


class PermissionDeniedError(ServerError):
    """The server's ACL refused a command or key (see README, Operations, for the ACL line)."""

    default_code = "server.no_permission"


class EmbeddingError(ServerError):
    """The embedding model or endpoint failed, or returned something unusable.

    Raised for an endpoint that is unreachable, rate-limited or down after the
    retries, and for output that breaks the ``Embedder`` contract (wrong shape,
    NaN or infinity). It is the other side's answer, not the caller's arguments,
    hence a ``ServerError``; a request the endpoint refuses because of its input
    is a ``ValidationError``, a bad key or model a ``ConfigurationError``.

    Args:
        message: what went wrong.
        details: structured context (model, status, attempts, ...); also accepted
            positionally, as in actrone-memory's ``EmbeddingError(message, details)``.
        code: ``"embedder.<reason>"``; ``"embedder.failed"`` by default.
    """

    default_code = "embedder.failed"

    def __init__(
        self, message: str, details: Mapping[str, Any] | None = None, *, code: str | None = None
    ) -> None:
        super().__init__(message, code=code, details=details)


# -- the caller got it wrong ------------------------------------------------------


class ValidationError(BetterDBMemoryError, ValueError):
    """An argument failed validation at the API boundary; nothing was written."""

    default_code = "validation.invalid"


class ConfigurationError(ValidationError):
    """The store's configuration is inconsistent (dimension, model, missing extra, ...)."""

    default_code = "configuration.invalid"


class MemoryNotFoundError(ValidationError):
    """The memory id given does not exist (deleted, expired, or never written).

    Args:
        memory_id: the id that was not found (also in ``details["memory_id"]``).
        message: defaults to ``"memory <id> not found"``.
    """

    default_code = "validation.not_found"

    def __init__(
        self,
        memory_id: str,
        message: str | None = None,
        *,
        code: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            message or f"memory {memory_id!r} not found",
            code=code,
            details={"memory_id": memory_id, **(details or {})},
        )
        self.memory_id = memory_id


class TokenBudgetError(ValidationError):
    """``token_budget`` is not a positive integer (``retrieve_context``).

    Args:
        message: what was wrong.
        details: structured context; also accepted positionally, as in
            actrone-memory's ``TokenBudgetError(message, details)``.
        code: ``"validation.budget"`` by default.
    """

    default_code = "validation.budget"

    def __init__(
        self, message: str, details: Mapping[str, Any] | None = None, *, code: str | None = None
    ) -> None:
        super().__init__(message, code=code, details=details)


# -- the connection failed --------------------------------------------------------


class ConsolidationBusyError(BetterDBMemoryError):
    """Another run held a scope's lock past the wait, or this run lost the lock midway."""

    default_code = "consolidation.busy"


class StoreClosedError(BetterDBMemoryError):
    """The store (or facade) was used after ``close()``."""

    default_code = "state.closed"


class StoreConnectionError(BetterDBMemoryError):
    """The server could not be reached, or the connection broke mid-command."""

    default_code = "connection.failed"


class StoreTimeoutError(StoreConnectionError):
    default_code = "connection.timeout"


# Server error wordings, matched case-insensitively as substrings, first match wins.
# RediSearch 2.10 and valkey-search 1.x word the same condition differently
# (shared/VALKEY_SEARCH_DIALECT.md, difference 9); both are listed here and nowhere else.
_SERVER_ERRORS: tuple[tuple[str, type[ServerError]], ...] = (
    ("no such index", IndexNotFoundError),  # RediSearch: "idx: no such index"
    ("unknown index name", IndexNotFoundError),  # RediSearch FT.INFO / FT.DROPINDEX
    (
        "not found in database",
        IndexNotFoundError,
    ),  # valkey-search: "Index with name 'x' not found in database 0"
    ("index already exists", IndexExistsError),  # RediSearch
    ("already exists", IndexExistsError),  # valkey-search: "Index idx in database 0 already exists."
    ("blob size", VectorSizeError),  # both: "query vector blob size (12) does not match ..."
    ("syntax error", QuerySyntaxError),  # RediSearch
    ("invalid filter expression", QuerySyntaxError),  # valkey-search
    ("noperm", PermissionDeniedError),  # "NOPERM User x has no permissions to run ..."
    ("no permissions", PermissionDeniedError),
    # valkey-search, FT.* on an index whose key prefixes the user's ACL does not cover:
    # "The user does not have permission to access the key prefix" (a plain ERR, not NOPERM).
    ("does not have permission", PermissionDeniedError),
    ("unknown command", CommandNotSupportedError),
    ("unknown subcommand", CommandNotSupportedError),
)


def classify_server_error(text: str) -> type[ServerError]:
    """Return the error class a server error text maps to (``ServerError`` when none)."""
    lowered = text.lower()
    for needle, cls in _SERVER_ERRORS:
        if needle in lowered:
            return cls
    return ServerError


# How each engine answers a search that ran out of its time budget (lower case): valkey-search
# >= 1.1 with ALLSHARDS, which the library sends every query there, and 1.0 ("Search operation
# cancelled due to timeout", bench/results/search-timeout.md); RediSearch 2.10 under
# ``ON_TIMEOUT FAIL`` ("Timeout limit was reached"; its default policy answers partial results
# instead, and the library sends it ``TIMEOUT 0`` where a whole answer matters).
_SEARCH_TIMEOUT = ("cancelled due to timeout", "timeout limit was reached")


def is_search_timeout(text: str) -> bool:
    """Whether a server error text says a search ran out of time (``server.search_timeout``)."""
    lowered = text.lower()
    return any(words in lowered for words in _SEARCH_TIMEOUT)
