"""How many round trips a store call waits for one after another, counted at the backend (never by the clock).

``RoundTrips(store)`` wraps the store's backend (``pipeline``, ``search``, ``command``):
each call gets a depth, one more than the deepest call that had ended when it started.
Calls in flight together share a depth, so ``depth`` is the number of sequential round
trips the calls since the last ``reset`` waited for, whatever ran beside them. Works on
every engine (it acts on backend calls, not sockets).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from betterdb_memory import MemoryStore

__all__ = ["RoundTrips", "counting"]


class RoundTrips:
    """The backend calls since ``reset``: how many, and how deep (see the module docstring)."""

    def __init__(self, journal: str) -> None:
        self._journal = journal
        self._ended = 0  # the deepest call that has ended since the reset
        self.depth = 0
        self.calls: list[tuple[Any, ...]] = []  # each call's commands, searches included

    def reset(self) -> None:
        self._ended, self.depth, self.calls = 0, 0, []

    @property
    def looked(self) -> bool:
        """Whether the journal of unsettled subject writes was read (``ZRANGE <name>:subj:pending``)."""
        return any(
            isinstance(c, tuple) and c[:2] == ("ZRANGE", self._journal) for call in self.calls for c in call
        )

    def wrap(self, fn: Callable[..., Awaitable[Any]], commands: Callable[..., tuple[Any, ...]]) -> Any:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            depth = self._ended + 1
            self.depth = max(self.depth, depth)
            self.calls.append(commands(*args, **kwargs))
            try:
                return await fn(*args, **kwargs)
            finally:
                self._ended = max(self._ended, depth)

        return counted


@contextmanager
def counting(store: MemoryStore) -> Iterator[RoundTrips]:
    """Within the block, every backend call of ``store`` is counted (``RoundTrips``)."""
    backend = store.backend
    trips = RoundTrips(f"{store.keys.name}:subj:pending")
    real = {name: getattr(backend, name) for name in ("pipeline", "search", "command")}
    shapes: dict[str, Callable[..., tuple[Any, ...]]] = {
        "pipeline": lambda op, commands, searches=(), **kw: (*map(_plain, commands), *map(tuple, searches)),
        "search": lambda op, args: (tuple(args),),
        "command": lambda op, *args, **kw: (tuple(args),),
    }
    for name, fn in real.items():
        setattr(backend, name, trips.wrap(fn, shapes[name]))
    try:
        yield trips
    finally:
        for name, fn in real.items():
            setattr(backend, name, fn)


def _plain(step: Any) -> Any:
    return step if isinstance(step, tuple) else ("script",)
