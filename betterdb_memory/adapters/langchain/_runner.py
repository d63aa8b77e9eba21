"""How the LangChain adapters reach a store from LangChain's sync and async halves.

LangChain calls every component from both sides (``invoke`` / ``ainvoke``,
``add_documents`` / ``aadd_documents``, ...). A ``MemoryStore`` belongs to the event loop
its client runs on, so the adapters take either store and route each operation:

* a ``SyncMemoryStore``: both run on its private loop (sync callers block, async callers'
  loops wait in a worker thread), so one adapter serves ``invoke`` and ``ainvoke``;
* a ``MemoryStore``: async calls are awaited on the caller's loop (the store's); sync
  calls work from other threads while that loop runs (LangChain runs sync code in
  executor threads under ``ainvoke``), else they raise ``ConfigurationError``
  (``configuration.sync_without_loop``), as the LangGraph adapter does.

An operation is one coroutine function taking the ``MemoryStore``: the same code runs
on either path, so nothing is written twice.

Embedders hold no connection (CPU work runs in ``asyncio.to_thread``; the ONNX session
is guarded by a thread lock), so their sync path runs on one loop thread shared by the
adapters (``run_blocking``) instead of a new event loop per call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

from ..._loop_thread import LoopThread, SyncReentrancyError
from ...errors import ConfigurationError, StoreClosedError
from ...store import MemoryStore
from ...sync import SyncMemoryStore

__all__ = ["AnyStore", "StoreRunner", "run_blocking"]

P = ParamSpec("P")
R = TypeVar("R")

#: What every adapter accepts as its store.
AnyStore = MemoryStore | SyncMemoryStore


class StoreRunner:
    """Runs ``fn(store, ...)`` against a ``MemoryStore`` or a ``SyncMemoryStore``, from sync or async code."""

    def __init__(self, store: AnyStore) -> None:
        # The loop an async store was last used on (the one its client belongs to).
        self._store_loop: asyncio.AbstractEventLoop | None = _running_loop()
        if isinstance(store, SyncMemoryStore):
            self.store: MemoryStore = store.async_store
            self._loop: LoopThread | None = store._loop
        elif isinstance(store, MemoryStore):
            self.store = store
            self._loop = None
        else:
            raise ConfigurationError(
                f"store must be a MemoryStore or a SyncMemoryStore, not {type(store).__name__}",
                code="configuration.store",
            )

    def call(
        self, fn: Callable[Concatenate[MemoryStore, P], Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Run ``fn(store, *args, **kwargs)`` and block until it returns.

        Raises:
            ConfigurationError: the store is an async ``MemoryStore`` whose loop is not running
                in another thread (``configuration.sync_without_loop``).
            SyncReentrancyError: called on the loop the store runs on (it would wait for itself).
        """
        if self._loop is not None:
            result: R = self._loop.call(fn, self.store, *args, **kwargs)
            return result
        loop = self._store_loop
        if loop is None or not loop.is_running() or loop.is_closed():
            raise ConfigurationError(
                "a LangChain adapter over an async MemoryStore was called from synchronous code"
                " while the store's event loop is not running; use the async methods (ainvoke,"
                " aadd_documents, ...) or pass a SyncMemoryStore, which serves both",
                code="configuration.sync_without_loop",
            )
        if _running_loop() is loop:
            raise SyncReentrancyError(
                "a LangChain adapter's sync method was called on the event loop its MemoryStore runs"
                " on, where it would wait for itself; use the async method",
                code="state.reentrant_sync_call",
            )

        async def run() -> R:
            return await fn(self.store, *args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), loop).result()

    async def acall(
        self, fn: Callable[Concatenate[MemoryStore, P], Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Await ``fn(store, *args, **kwargs)``: here, or on a ``SyncMemoryStore``'s own loop."""
        if self._loop is None:
            self._store_loop = asyncio.get_running_loop()
            return await fn(self.store, *args, **kwargs)
        loop = self._loop
        return await asyncio.to_thread(lambda: loop.call(fn, self.store, *args, **kwargs))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_shared: LoopThread | None = None
_shared_lock = threading.Lock()


def _closed() -> BaseException:
    return StoreClosedError("the LangChain adapters' loop thread was stopped", code="state.closed")


def run_blocking(fn: Callable[P, Awaitable[R]], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """Await ``fn(*args, **kwargs)`` on the adapters' shared loop thread and return its result.

    For loop-agnostic work only (embedders): nothing bound to another loop may be touched.
    """
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LoopThread("betterdb-memory-langchain", _closed)
        loop = _shared
    result: R = loop.call(fn, *args, **kwargs)
    return result
