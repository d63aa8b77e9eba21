"""The one place a ``valkey`` exception becomes the library's error tree (``errors``).

Backend exceptions are caught in the transport (``retry.call``) and handed here; no
other module of the package inspects their types. The server's error wordings are
matched in ``errors.classify_server_error`` (pure text, both engines' wordings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import valkey.exceptions as vexc

from ..errors import (
    BetterDBMemoryError,
    StoreConnectionError,
    StoreTimeoutError,
    classify_server_error,
)

__all__ = ["is_connection_error", "translate"]


def translate(
    exc: BaseException, *, operation: str, details: Mapping[str, Any] | None = None
) -> BetterDBMemoryError:
    """Translate a backend exception into the library's tree.

    Args:
        exc: the exception raised by the ``valkey`` client.
        operation: the public operation that was running (put in ``details``).
        details: extra context to carry (for example a count done so far).

    Returns:
        The matching ``BetterDBMemoryError``; the caller raises it ``from exc``.
    """
    info: dict[str, Any] = {"operation": operation, **(details or {})}
    if isinstance(exc, BetterDBMemoryError):
        exc.details.update({k: v for k, v in info.items() if k not in exc.details})
        return exc
    if isinstance(exc, vexc.TimeoutError | TimeoutError):
        return StoreTimeoutError(f"{operation}: timed out talking to Valkey ({exc})", details=info)
    if isinstance(exc, vexc.ConnectionError | ConnectionError | OSError | _CLUSTER_UNAVAILABLE):
        return StoreConnectionError(f"{operation}: connection to Valkey failed ({exc})", details=info)
    if isinstance(exc, vexc.ResponseError) and str(exc).startswith(("CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN")):
        return StoreConnectionError(f"{operation}: the cluster cannot serve this now ({exc})", details=info)
    if isinstance(exc, vexc.ResponseError):
        text = str(exc)
        cls = classify_server_error(text)
        info["server_message"] = text
        return cls(f"{operation}: {text}", details=info)
    return BetterDBMemoryError(
        f"{operation}: unexpected {type(exc).__name__}: {exc}", code="internal", details=info
    )


def is_connection_error(exc: BaseException) -> bool:
    """True for the backend exceptions that mean "could not reach the server" (or the cluster
    cannot serve the slot for now: CLUSTERDOWN, TRYAGAIN, MASTERDOWN), worth a retry."""
    return isinstance(
        exc,
        vexc.ConnectionError
        | vexc.TimeoutError
        | ConnectionError
        | TimeoutError
        | OSError
        | _CLUSTER_UNAVAILABLE,
    ) or (
        isinstance(exc, vexc.ResponseError) and str(exc).startswith(("CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN"))
    )


# A cluster that cannot serve a slot for now (a primary failed and no replica took over
# yet, a slot in migration): the connection family, retried like a dropped connection.
_CLUSTER_UNAVAILABLE = vexc.ClusterDownError | vexc.MasterDownError | vexc.TryAgainError
