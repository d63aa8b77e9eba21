"""Opening a store on a URL, or on the embedded server when there is none (``MemoryStore.connect``).

Kept apart from ``store`` because it is the one place a store owns what it runs on: the
client it opened and, with no URL, the embedded server it started. If building the store
fails, both are closed before the error propagates, so a failed ``connect`` leaks nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from ._env import resolve_url
from .backend.client import connect

__all__ = ["open_owned"]

T = TypeVar("T")


async def open_owned(
    build: Callable[[Any], T],
    url: str | None,
    *,
    data_dir: str | None,
    max_connections: int,
    socket_timeout: float,
) -> tuple[T, Any]:
    """``build(client)`` on a client this call opened; returns it and the server started (or None)."""
    url = resolve_url(url)
    server = None
    if url is None:
        from .server import EmbeddedServer, default_data_dir

        server = EmbeddedServer(data_dir=data_dir or default_data_dir())
        await asyncio.to_thread(server.start)
        url = server.url
    client: Any = None
    try:
        client = connect(url, max_connections=max_connections, timeout=socket_timeout)
        built = build(client)
    except BaseException:
        if client is not None:
            await client.aclose()
        if server is not None and server._proc is not None:
            await asyncio.to_thread(server.stop)
        raise
    return built, (server if server is not None and server._proc is not None else None)
