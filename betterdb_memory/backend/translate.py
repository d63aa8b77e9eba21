"""The one place a ``valkey`` exception becomes the library's error tree (``errors``).

Backend exceptions are caught in the transport (``retry.call``) and handed here; no
other module of the package inspects their types. The server's error wordings are
matched in ``errors.classify_server_error`` (pure text, both engines' wordings).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import valkey.exceptions as vexc

from ..errors import (
    BetterDBMemoryError,
    ServerError,
    StoreConnectionError,
    StoreTimeoutError,
    classify_server_error,
    is_search_timeout,
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
    if _redirections_exhausted(exc):
        return StoreConnectionError(
            f"{operation}: the cluster kept redirecting the command or asking to try again "
            f"(a slot migration or a failover under way): {exc}",
            details=info,
        )
    if isinstance(exc, vexc.ConnectionError | ConnectionError | OSError | _CLUSTER_UNAVAILABLE) or _lost(exc):
        return StoreConnectionError(f"{operation}: connection to Valkey failed ({exc})", details=info)
    if isinstance(exc, vexc.ResponseError) and _unavailable(str(exc)):
        return StoreConnectionError(f"{operation}: the cluster cannot serve this now ({exc})", details=info)
    if isinstance(exc, vexc.ResponseError):
        text = str(exc)
        cls = classify_server_error(text)
        info["server_message"] = text
        if cls is ServerError and is_search_timeout(text):  # the query ran out of time, no answer
            return ServerError(f"{operation}: {text}", code="server.search_timeout", details=info)
        return cls(f"{operation}: {text}", details=info)
    return BetterDBMemoryError(
        f"{operation}: unexpected {type(exc).__name__}: {exc}", code="internal", details=info
    )


def is_connection_error(exc: BaseException) -> bool:
    """True for the backend exceptions that mean "could not reach the server" (or the cluster
    cannot serve the slot for now: CLUSTERDOWN, TRYAGAIN, MASTERDOWN), worth a retry."""
    connection = vexc.ConnectionError | vexc.TimeoutError | ConnectionError | TimeoutError | OSError
    if isinstance(exc, connection | _CLUSTER_UNAVAILABLE) or _redirections_exhausted(exc):
        return True
    if isinstance(exc, vexc.ResponseError):
        return _unavailable(str(exc))
    return _lost(exc)


# How valkey-search's coordinator answers a search whose fan-out could not reach a shard: the
# gRPC transport's own words (seen: "recvmsg:Connection reset by peer" from a primary killed
# mid-query). A shard that is down or failing over: the connection family, retried.
_SHARD_UNREACHABLE = ("connection reset by peer", "connection refused", "failed to connect", "socket closed")


def _unavailable(text: str) -> bool:
    """A server's answer that means the cluster cannot serve this now (worth a retry)."""
    lowered = text.lower()
    return text.startswith(("CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN")) or any(
        phrase in lowered for phrase in _SHARD_UNREACHABLE
    )


def _redirections_exhausted(exc: BaseException) -> bool:
    """valkey-py's cluster client gave up following ``MOVED`` / ``ASK`` / ``TRYAGAIN`` answers.

    It raises a bare ``ClusterError("TTL exhausted.")`` after 16 of them (``ValkeyClusterRequestTTL``):
    seen when a read names keys of a slot in migration that are on both sides (``TRYAGAIN``
    until the migration ends). None of those answers ran the command, and the slot will
    settle: a connection fault, retried like one (its subclasses, CLUSTERDOWN and
    MASTERDOWN, are matched as such already).
    """
    return type(exc) is vexc.ClusterError


def _lost(exc: BaseException) -> bool:
    """A connection torn down under its user, or a cluster client that reached no node."""
    if isinstance(exc, vexc.ValkeyClusterException):
        return "cannot be connected" in str(exc)
    return _torn_down(exc)


def _torn_down(exc: BaseException) -> bool:
    """An ``AttributeError`` raised inside valkey-py's asyncio connection: its reader or writer was
    set to None by another task that disconnected it mid-use (seen when a cluster primary is
    killed under load: the cluster client resets the dead node's connections while another
    task is still opening one). The connection is gone: a connection fault, retried as one."""
    if not isinstance(exc, AttributeError) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = PurePath(tb.tb_frame.f_code.co_filename)  # valkey/asyncio/connection.py
    return where.stem == "connection" and where.parent.parts[-2:] == ("valkey", "asyncio")


# A cluster that cannot serve a slot for now (a primary failed and no replica took over
# yet, a slot in migration): the connection family, retried like a dropped connection.
_CLUSTER_UNAVAILABLE = vexc.ClusterDownError | vexc.MasterDownError | vexc.TryAgainError
