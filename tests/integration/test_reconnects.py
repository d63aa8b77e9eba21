"""``backend.reconnects``: the hook that tells the backend a connection was opened, on a real client."""

from __future__ import annotations

from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory.backend.reconnects import watch_connections

pytestmark = pytest.mark.integration


async def test_the_hook_sees_every_connection_a_valkey_client_opens(valkey_url: str) -> None:
    """``watch_connections`` on a real client: the first connection and a reopened one are both seen,
    and a connect function the caller set still runs."""
    theirs: list[int] = []
    opened: list[int] = []

    async def connect(conn: Any) -> None:  # a caller's own (it must do the handshake itself)
        theirs.append(1)
        await conn.on_connect()

    client = avalkey.Valkey.from_url(valkey_url, valkey_connect_func=connect)
    try:
        assert watch_connections(client, lambda: opened.append(1)) is True
        assert await client.ping()
        assert opened == [1]
        await client.connection_pool.disconnect()  # as a server restart would
        assert await client.ping()
        assert opened == [1, 1]
        assert len(theirs) == 2
    finally:
        await client.aclose()


async def test_many_stores_on_one_client_share_one_hook(valkey_url: str) -> None:
    """A store built per request on a shared client must not stack one more layer each time;
    a listener that is gone is dropped."""
    import gc

    class Listener:
        def __init__(self) -> None:
            self.seen = 0

        def opened(self) -> None:
            self.seen += 1

    client = avalkey.Valkey.from_url(valkey_url)
    try:
        kept = Listener()
        assert watch_connections(client, kept.opened)
        first = client.connection_pool.connection_kwargs["valkey_connect_func"]
        for _ in range(50):
            assert watch_connections(client, Listener().opened)  # dropped at once
        gc.collect()
        assert client.connection_pool.connection_kwargs["valkey_connect_func"] is first
        assert await client.ping()
        assert kept.seen == 1
    finally:
        await client.aclose()
