"""One owner for a store's background work (reinforcement, eviction clean-up, rolling summaries).

Tasks are started through ``spawn`` and nowhere else, so ``close`` can drain them all:
it waits up to a grace period for running work to finish (a summary half written is
worse than a slower close), then cancels what is left and waits for the cancellations.
A failed task is logged and counted, never raised into an unrelated caller. After
``close``, ``spawn`` refuses: nothing can start behind a closed store's back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from .errors import StoreClosedError

__all__ = ["Supervisor"]

log = logging.getLogger(__name__)


class Supervisor:
    """The set of background tasks of one store.

    Args:
        on_failure: called with the task's name when one fails (e.g. a metric).
    """

    def __init__(self, *, on_failure: Callable[[str], None] | None = None) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._on_failure = on_failure
        self.closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str = "background") -> asyncio.Task[Any]:
        """Start ``coro`` as a supervised task (needs a running loop)."""
        if self.closed:
            coro.close()
            raise StoreClosedError("the store was closed; no background work can start", code="state.closed")
        task = asyncio.get_running_loop().create_task(coro, name=f"betterdb-memory:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.warning("background task %s failed: %s", task.get_name(), exc)
            if self._on_failure is not None:
                with contextlib.suppress(Exception):
                    self._on_failure(task.get_name().removeprefix("betterdb-memory:"))

    async def close(self, *, grace: float = 5.0) -> None:
        """Refuse new work, let running work finish for ``grace`` seconds, cancel the rest."""
        self.closed = True
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
