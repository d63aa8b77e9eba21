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
    Many stores on one client share one hook (a bound method is held weakly, so a
    store that is gone stops being called), so the connect path does not grow with
    every store built on it.
    """
    try:
        return _watch(client, on_open)
    except Exception:  # a proxy or stand-in client that refuses attribute reads: best effort
        return False


class _Hook:
    """One client's connect function: the caller's (or the default handshake), then the listeners."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.listeners: list[Callable[[], Callable[[], None] | None]] = []

        async def connected(connection: Any) -> None:
            if self.previous is None:
                await connection.on_connect()
            else:
                done = self.previous(connection)
                if inspect.isawaitable(done):
                    await done
            for ref in list(self.listeners):
                listener = ref()
                if listener is not None:
                    listener()

        self.function = connected

    def add(self, on_open: Callable[[], None]) -> None:
        self.listeners = [ref for ref in self.listeners if ref() is not None]
        ref: Callable[[], Callable[[], None] | None]
        ref = weakref.WeakMethod(on_open) if inspect.ismethod(on_open) else (lambda: on_open)
        self.listeners.append(ref)


# Our connect functions, to find the hook behind one already set on a client.
_HOOKS: weakref.WeakKeyDictionary[Callable[..., Any], _Hook] = weakref.WeakKeyDictionary()


def _hooked(previous: Any, on_open: Callable[[], None]) -> Callable[..., Any]:
    hook = _HOOKS.get(previous) if callable(previous) else None
    if hook is None:
        hook = _Hook(previous)
        _HOOKS[hook.function] = hook
    hook.add(on_open)
    return hook.function


def _watch(client: Any, on_open: Callable[[], None]) -> bool:
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
        kwargs[_FUNC] = _hooked(kwargs.get(_FUNC), on_open)
    for connection in connections:
        if hasattr(connection, _FUNC):
            setattr(connection, _FUNC, _hooked(getattr(connection, _FUNC), on_open))
    return True


def _listed(items: Iterable[Any]) -> list[Any]:
    try:
        return list(items)
    except TypeError:  # pragma: no cover - not a collection in some other version
        return []
