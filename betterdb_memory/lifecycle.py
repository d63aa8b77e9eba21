"""A store's lifecycle: its state, and one owner for all of its background work.

Background work: reinforcement, expired-memory clean-up, rolling summaries, the
live-config refresher, the Monitor heartbeat and the stats flush.

Tasks are started through ``spawn`` and nowhere else, so ``close`` can drain them all:
it waits up to a grace period for running work to finish (a summary half written is
worse than a slower close), then cancels what is left and waits for the cancellations.
A failed task is logged and counted, never raised into an unrelated caller. After
``close``, ``spawn`` refuses: nothing can start behind a closed store's back.

``gated`` is the one closed check of the public API: a class decorator that makes every
public coroutine method (but ``close``) call ``self._check_open()`` first, so a method
added later cannot forget it, and a call made while ``close`` drains is refused at once
instead of being served by the backend that background work still uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

from .errors import StoreClosedError

__all__ = ["Spawn", "StoreState", "Supervisor", "gated"]

C = TypeVar("C", bound=type)

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
    heartbeat) runs. ``CLOSING``: ``close()`` started; every call raises
    ``StoreClosedError`` while background work drains (up to ``shutdown_grace``).
    ``CLOSED``: ``close()`` finished and the connections it owned are closed.
    """

    NEW = "new"
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"


# -- the closed gate ----------------------------------------------------------------------

#: Public coroutine methods the gate leaves alone: ``close`` must run on a closing store.
UNGATED = frozenset({"close"})


def gated(cls: C) -> C:
    """Make every public coroutine method of ``cls`` but ``close`` check ``self._check_open()`` first.

    Applied once to the class (``MemoryStore``, ``AgentMemory``) instead of a check pasted
    into each method. Each such method (defined in the class body or inherited, a plain
    function or a method descriptor such as ``store._Delegate``, a part's method) is
    replaced, on ``cls``, by a descriptor that, read on an instance, checks the state:
    open, it returns the method itself (nothing changes: same object, signature,
    ``TypeError`` for a bad argument at call time, a coroutine function to ``inspect``);
    closing or closed, a coroutine function of the same signature that raises
    ``StoreClosedError``. Read on the class it returns the
    method's own function (``inspect.signature``, the generated sync class).
    Classmethods (``connect``), properties and plain methods are left alone:
    configuration stays readable on a closed store.

    The check runs each time the method is read, which ``store.recall(...)`` does per call;
    a bound method kept from before ``close()`` and called later is refused by the backend
    once the store is ``CLOSED`` instead.
    """
    for name in dir(cls):  # inherited methods too: each gets its gate on ``cls`` itself
        value = inspect.getattr_static(cls, name)
        if (
            name.startswith("_")
            or name in UNGATED
            or isinstance(value, classmethod | staticmethod | property | _GatedMethod)
        ):
            continue
        if hasattr(value, "__get__") and inspect.iscoroutinefunction(value.__get__(None, cls)):
            setattr(cls, name, _GatedMethod(value, cls))
    return cls


class _GatedMethod:
    """A method that, read on a closing or closed instance, is replaced by one that raises.

    A non-data descriptor, like a function, so an instance attribute of the same name (a
    test double) still wins. ``fn`` is the method's function, ``part`` (for a
    ``store._Delegate``) the part that implements it.
    """

    def __init__(self, inner: Any, owner: type) -> None:
        self.inner = inner
        self.fn: Callable[..., Any] = inner.__get__(None, owner)
        self.__doc__ = inner.__doc__

    def __getattr__(self, name: str) -> Any:  # ``part``: what the wrapped descriptor says
        return getattr(self.inner, name)

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        method = self.inner.__get__(obj, owner)
        if obj is None:
            return method
        try:
            obj._check_open()
        except StoreClosedError:
            return _refusing(obj, method)
        return method


def _refusing(obj: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def refused(*args: Any, **kwargs: Any) -> Any:
        obj._check_open()  # raises: the owner's own error (StoreClosedError, AgentMemoryClosedError)
        raise StoreClosedError("the store was closed; build a new one")

    return refused
