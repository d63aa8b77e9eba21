"""The private event-loop thread behind the sync API (``betterdb_memory.sync``).

``LoopThread`` runs one event loop forever in a daemon thread. ``call`` runs a
function or coroutine function on it from any other thread and blocks on the
``concurrent.futures.Future`` that ``asyncio.run_coroutine_threadsafe`` returns, so
the caller gets the result or the very exception object the coroutine raised.
``shutdown`` ends it cleanly. Nothing here knows about stores.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from .errors import BetterDBMemoryError

__all__ = ["CLOSE_GRACE_SECONDS", "Closer", "LoopThread", "SyncReentrancyError", "invoke"]

log = logging.getLogger(__name__)

Closer = Callable[[], Awaitable[object]]

#: Seconds ``close()`` waits for calls still running in other threads before closing under them.
CLOSE_GRACE_SECONDS = 10.0


class SyncReentrancyError(BetterDBMemoryError, RuntimeError):
    """A sync method was called from its own private event-loop thread (it would wait for itself forever).

    Happens when code running on the store's loop (an embedder, summariser, fact
    extractor or callback given to the store) calls the sync API of the same store.
    Call the async object there instead.
    """

    default_code = "state.reentrant_sync_call"


class LoopThread:
    """One event loop running forever in a daemon thread; ``call`` runs work on it and waits.

    ``shutdown`` refuses new calls, lets the calls in progress finish (up to a grace
    period: a call cancelled half-way could leave a reconnected socket behind), runs
    the closer, then stops the loop (cancelling what is left) and joins the thread.
    """

    def __init__(self, name: str, closed_error: Callable[[], BaseException]) -> None:
        self._closed_error = closed_error
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()  # orders submissions against shutdown: nothing lands on a dead loop
        self._accepting = True
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def closing(self) -> bool:
        """True once ``shutdown`` began: calls are refused from then on."""
        return not self._accepting

    def on_loop_thread(self) -> bool:
        return threading.get_ident() == self._thread.ident

    def call(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` on the loop (awaited if it returns an awaitable); return its result.

        Raises:
            SyncReentrancyError: called from the loop thread itself.
            StoreClosedError: the loop is shutting down, or was stopped during the call.
        """
        self.refuse_reentry(fn)
        with self._lock:
            if not self._accepting:
                raise self._closed_error()
            future = asyncio.run_coroutine_threadsafe(invoke(fn, args, kwargs), self._loop)
            self._pending.add(future)
        future.add_done_callback(self._forget)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if not self._accepting:  # cancelled because shutdown stopped the loop under it
                raise self._closed_error() from None
            raise
        except BaseException:
            # KeyboardInterrupt / SystemExit in this thread: stop the work on the loop too
            # (a no-op when the future already holds the coroutine's own exception).
            future.cancel()
            raise

    def shutdown(self, closer: Closer | None, *, grace: float = CLOSE_GRACE_SECONDS) -> None:
        """Refuse new calls, wait up to ``grace`` s for running ones, await ``closer()``, stop, join; idempotent.

        From the loop thread itself (a finalizer that ran there) nothing can be waited
        for: the closer and the stop are scheduled instead.
        """
        with self._lock:
            if not self._accepting:
                return
            self._accepting = False
            pending = list(self._pending)
        if self.on_loop_thread():
            self._close_from_inside(closer)
            return
        try:
            concurrent.futures.wait(pending, timeout=grace)
            if closer is not None:
                asyncio.run_coroutine_threadsafe(invoke(closer, (), {}), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    def _close_from_inside(self, closer: Closer | None) -> None:
        def stop(task: asyncio.Task[Any] | None = None) -> None:
            if task is not None and not task.cancelled() and task.exception() is not None:
                log.debug("closing an abandoned sync object failed: %r", task.exception())
            self._loop.stop()

        if closer is None:
            stop()
        else:
            self._loop.create_task(invoke(closer, (), {})).add_done_callback(stop)

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def refuse_reentry(self, fn: object) -> None:
        """Raise ``SyncReentrancyError`` when called on the loop thread (where waiting deadlocks)."""
        if self.on_loop_thread():
            raise SyncReentrancyError(
                "a sync method was called from its own event-loop thread, where it would wait for"
                " itself forever; use the async object in code that runs on the store's loop",
                details={"thread": self._thread.name, "callable": getattr(fn, "__qualname__", repr(fn))},
            )

    def _run(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            try:
                _cancel_all_tasks(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            except Exception as exc:  # at interpreter exit no new thread may start: nothing to wait for
                log.debug("stopping a sync store's loop: %r", exc)
            finally:
                asyncio.set_event_loop(None)
                loop.close()


async def invoke(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = fn(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def _cancel_all_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does on the way out: cancel what is left and wait for it to unwind."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {"message": "unhandled exception while stopping a sync store's loop", "task": task}
            )
