"""``backend.translate``: valkey-py's exceptions in the library's tree (the rest is in test_errors.py)."""

from __future__ import annotations

import pytest
import valkey.exceptions as vexc
from valkey.asyncio.connection import Connection

from betterdb_memory.backend.translate import is_connection_error, translate
from betterdb_memory.errors import (
    BetterDBMemoryError,
    QuerySyntaxError,
    ServerError,
    StoreConnectionError,
)


async def _torn_down_send() -> AttributeError:
    """What valkey-py raises when another task disconnected the connection mid-send."""
    conn = Connection()
    assert conn._writer is None  # as disconnect() leaves it
    with pytest.raises(AttributeError) as info:
        await conn._send_packed_command([b"PING\r\n"])
    return info.value


async def test_a_connection_torn_down_under_a_send_is_a_connection_fault() -> None:
    """Seen when a cluster primary is killed under load; it must be retried and typed, not internal."""
    exc = await _torn_down_send()
    assert is_connection_error(exc)
    err = translate(exc, operation="remember")
    assert isinstance(err, StoreConnectionError)
    assert err.code == "connection.failed" and err.details["operation"] == "remember"


def test_an_attribute_error_elsewhere_stays_internal() -> None:
    with pytest.raises(AttributeError) as info:
        None.missing  # type: ignore[attr-defined]  # noqa: B018
    assert not is_connection_error(info.value)
    err = translate(info.value, operation="remember")
    assert type(err) is BetterDBMemoryError and err.code == "internal"


def test_a_cluster_client_that_reaches_no_node_is_a_connection_fault() -> None:
    exc = vexc.ValkeyClusterException(
        "Valkey Cluster cannot be connected. Please provide at least one reachable node: None"
    )
    assert is_connection_error(exc)
    assert isinstance(translate(exc, operation="get"), StoreConnectionError)


@pytest.mark.parametrize(
    "text",
    [
        "recvmsg:Connection reset by peer",  # seen: a primary killed while a search fanned out to it
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:51000: Connection refused",
        "CLUSTERDOWN The cluster is down",
    ],
)
def test_a_search_whose_fan_out_could_not_reach_a_shard_is_a_connection_fault(text: str) -> None:
    exc = vexc.ResponseError(text)
    assert is_connection_error(exc)
    assert isinstance(translate(exc, operation="recall"), StoreConnectionError)


def test_other_server_errors_stay_server_errors() -> None:
    exc = vexc.ResponseError("Invalid filter expression: `@x:{y}`. `x` is not indexed as a tag field")
    assert not is_connection_error(exc)
    assert not isinstance(translate(exc, operation="recall"), StoreConnectionError)


def test_redirections_exhausted_during_a_slot_migration_are_a_connection_fault() -> None:
    """valkey-py's cluster client raises a bare ClusterError after 16 TRYAGAIN / MOVED / ASK answers
    (a read during a slot migration): retryable and typed, not ``internal``."""
    exc = vexc.ClusterError("TTL exhausted.")
    assert is_connection_error(exc)
    err = translate(exc, operation="get")
    assert isinstance(err, StoreConnectionError) and err.code == "connection.failed"
    assert "slot migration" in str(err) and err.details["operation"] == "get"


def test_a_plain_valkey_error_stays_internal() -> None:
    exc = vexc.ValkeyError("something else")
    assert not is_connection_error(exc)
    assert translate(exc, operation="get").code == "internal"


# The engines' own replies to a search that ran out of time, captured 2026-12-02 (valkey-py's
# ResponseError text, RESP2 and RESP3 alike) from `FT.SEARCH <idx> @created_at:[-inf +inf]
# SORTBY created_at DESC LIMIT 0 1000 TIMEOUT 1` over 21,000 documents; docs/operations/production.md.
_PIPELINE = (
    "Command # 2 (FT.SEARCH captt:mem:idx @created_at:[-inf +inf] {}SORTBY created_at DESC LIMIT 0 1000 "
    "TIMEOUT 1 DIALECT 2) of pipeline caused error: ('{}',)"
)
SEARCH_TIMEOUTS = [
    # valkey-search 1.2.1 standalone, the query with ALLSHARDS (also the cluster's wording:
    # bench/results/search-timeout.md)
    "Search operation cancelled due to timeout",
    _PIPELINE.format("ALLSHARDS ", "Search operation cancelled due to timeout"),  # sent in a pipeline
    # RediSearch 2.10.5 (the embedded engine) under ON_TIMEOUT FAIL
    "Timeout limit was reached",
    _PIPELINE.format("", "Timeout limit was reached"),
]


@pytest.mark.parametrize("text", SEARCH_TIMEOUTS)
def test_a_search_that_ran_out_of_time_is_a_server_error_with_its_own_code(text: str) -> None:
    """Not a connection fault (nothing to retry: the same query would run out of time again)."""
    exc = vexc.ResponseError(text)
    assert not is_connection_error(exc)
    err = translate(exc, operation="count", details={"deleted": 3})
    assert type(err) is ServerError and err.code == "server.search_timeout"
    assert err.details == {"operation": "count", "deleted": 3, "server_message": text}


def test_only_a_search_timeout_gets_the_code() -> None:
    """A finer class wins (a syntax error naming the word), and a client-side timeout stays a connection one."""
    syntax = translate(
        vexc.ResponseError("Syntax error at offset 3 near timeout limit was reached"), operation="x"
    )
    assert type(syntax) is QuerySyntaxError and syntax.code == "server.query_syntax"
    other = translate(vexc.ResponseError("ERR operation timed out"), operation="x")
    assert other.code == "server.error"
    client = translate(vexc.TimeoutError("Timeout reading from socket"), operation="x")
    assert isinstance(client, StoreConnectionError) and client.code == "connection.timeout"
