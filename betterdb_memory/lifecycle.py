"""A store's lifecycle: its state, and one owner for all of its background work.

Background work: reinforcement, expired-memory clean-up, rolling summaries, the
live-config refresher, the Monitor heartbeat and the stats flush.

Tasks are started through ``spawn`` and nowhere else, so ``close`` can drain them all:
it waits up to a grace period for running work to finish (a summary half written is
worse than a slower close), then cancels what is left and waits for the cancellations.
A failed task is logged and counted, never raised into an unrelated caller. After
``close``, ``spawn`` refuses: nothing can start behind a closed store's back.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from .errors import StoreClosedError

__all__ = ["Spawn", "StoreState", "Supervisor"]

log = logging.getLogger(__name__)


class Spawn(Protocol):
    """What starts background work: ``Supervisor.spawn`` (parts that run loops take one)."""

    def __call__(
        self, coro: Coroutine[Any, Any, Any], *, name: str = ..., daemon: bool = ...
    ) -> asyncio.Task[Any]: ...


class Supervisor:
    """The set of background tasks of one store.

    Args:
        on_failure: called with the task's name when one fails (e.g. a metric).
    """

    def __init__(self, *, on_failure: Callable[[str], None] | None = None) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._daemons: set[asyncio.Task[Any]] = set()
        self.on_failure = on_failure
        self.closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self, coro: Coroutine[Any, Any, Any], *, name: str = "background", daemon: bool = False
    ) -> asyncio.Task[Any]:
        """Start ``coro`` as a supervised task (needs a running loop).

        ``daemon``: a service loop that only ends when cancelled (live config refresh,
        Monitor heartbeat). ``close`` cancels those at once instead of waiting for them,
        and ``len()`` counts only the other work in flight.
        """
        if self.closed:
            coro.close()
            raise StoreClosedError("the store was closed; no background work can start", code="state.closed")
        task = asyncio.get_running_loop().create_task(coro, name=f"betterdb-memory:{name}")
        (self._daemons if daemon else self._tasks).add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        self._daemons.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.warning("background task %s failed: %s", task.get_name(), exc)
            if self.on_failure is not None:
                with contextlib.suppress(Exception):
                    self.on_failure(task.get_name().removeprefix("betterdb-memory:"))

    async def close(self, *, grace: float = 5.0) -> None:
        """Refuse new work, stop the service loops, let running work finish for ``grace`` seconds, cancel the rest."""
        self.closed = True
        daemons = set(self._daemons)
        for task in daemons:
            task.cancel()
        if daemons:
            await asyncio.wait(daemons)
        if not self._tasks:
            return
        _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)


class StoreState(enum.Enum):
    """Where a store is in its life (like httpx's ``ClientState``).

    ``NEW``: built, no round trip made yet (the index is checked or created on first
    use). ``READY``: the index is in place and background work (live config, Monitor
    heartbeat) runs. ``CLOSED``: ``close()`` ran; every call raises ``StoreClosedError``.
    """

    NEW = "new"
    READY = "ready"
    CLOSED = "closed"
