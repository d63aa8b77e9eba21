"""Notice every connection the client (re)opens: a restarted server looks like one.

valkey-py's pool reconnects a connection the server closed without telling the
caller (it finds the socket at EOF when it hands the connection out, and opens it
again), so a server that restarted between two calls is invisible to the retry
loop. It matters on valkey-search, which rebuilds its indexes in the background
after a restart and answers queries from the part rebuilt so far meanwhile; the
backend checks an index's state before the next query once it knows a connection
was opened.

The hook is the client's own ``valkey_connect_func`` (a connection calls it in
place of ``on_connect`` after opening its socket), set on the pool's connection
arguments for new connections and on the connections already made. A function
the caller set is kept and called first. The hook holds the backend weakly: once
the store is gone it only connects.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["watch_connections"]

_FUNC = "valkey_connect_func"


def watch_connections(client: Any, on_open: Callable[[], None]) -> bool:
    """Call ``on_open`` after every connection ``client`` opens from now on.

    Works for ``valkey.asyncio.Valkey`` (its connection pool) and
    ``valkey.asyncio.cluster.ValkeyCluster`` (every node known now, and the
    arguments new nodes are made from). Returns False, changing nothing, for a client
    of another shape: the backend then relies on the connection faults it sees.
    """
    try:
        return _watch(client, on_open)
    except Exception:  # a proxy or stand-in client that refuses attribute reads: best effort
        return False


def _watch(client: Any, on_open: Callable[[], None]) -> bool:
    ref = weakref.WeakMethod(on_open) if inspect.ismethod(on_open) else (lambda: on_open)
    holders: list[dict[str, Any]] = []
    connections: list[Any] = []
    pool = getattr(client, "connection_pool", None)
    nodes_manager = getattr(client, "nodes_manager", None)
    if pool is not None and isinstance(getattr(pool, "connection_kwargs", None), dict):
        holders.append(pool.connection_kwargs)
        connections += _listed(getattr(pool, "_available_connections", ()))
        connections += _listed(getattr(pool, "_in_use_connections", ()))
    elif nodes_manager is not None and isinstance(getattr(client, "connection_kwargs", None), dict):
        holders.append(client.connection_kwargs)
        nodes = {**getattr(nodes_manager, "startup_nodes", {}), **getattr(nodes_manager, "nodes_cache", {})}
        for node in nodes.values():
            if isinstance(getattr(node, "connection_kwargs", None), dict):
                holders.append(node.connection_kwargs)
            connections += _listed(getattr(node, "_connections", ()))
    else:
        return False
    for kwargs in holders:
        kwargs[_FUNC] = _hook(kwargs.get(_FUNC), ref)
    for connection in connections:
        if hasattr(connection, _FUNC):
            setattr(connection, _FUNC, _hook(getattr(connection, _FUNC), ref))
    return True


def _listed(items: Iterable[Any]) -> list[Any]:
    try:
        return list(items)
    except TypeError:  # pragma: no cover - not a collection in some other version
        return []


def _hook(previous: Any, ref: Callable[[], Callable[[], None] | None]) -> Callable[[Any], Any]:
    async def connected(connection: Any) -> None:
        if previous is None:
            await connection.on_connect()
        else:
            done = previous(connection)
            if inspect.isawaitable(done):
                await done
        on_open = ref()
        if on_open is not None:
            on_open()

    return connected
