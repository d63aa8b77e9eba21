"""A subject write's first round trip and the repair its look starts, landing in an order a test picks.

``holding(store, rules)`` wraps the store's backend (``pipeline``, ``command``): a call a
rule's first test accepts waits until a call its second accepts has returned. ``orders``
names the three places the write's first round trip can land against the repair of a
crash its look found: before the repair reads the subject, between that read and the
repair's first change, and after the repair (as when the look went first). On code that
looks first, the first two orders can never happen: the held call times out
(``HOLD_S``) and raises ``AssertionError``. Acts on backend calls, so it works on every
engine, the cluster included (tests/crash_points.py does the same for crash points).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from betterdb_memory import MemoryStore
from betterdb_memory.backend.scripts import RETIRE, SUBJECT_DROP, SUBJECT_PUT, SUBJECT_TRIM
from tests.crash_points import is_script

__all__ = ["HOLD_S", "ORDERS", "holding", "orders", "write_trip"]

Steps = Sequence[Any]
Rule = tuple[Callable[[Steps], bool], Callable[[Steps], bool]]
HOLD_S = 20.0


def write_trip(store: MemoryStore) -> Callable[[Steps], bool]:
    """A subject write's first round trip (its journal entry goes in it)."""
    key = f"{store.keys.name}:subj:pending"
    return lambda steps: any(isinstance(s, tuple) and s[:2] == ("ZADD", key) for s in steps)


def repair_read(store: MemoryStore) -> Callable[[Steps], bool]:
    """A repair's read of its subjects (their pointers)."""
    subj = f"{store.keys.name}:subj:"
    return lambda steps: any(
        isinstance(s, tuple) and s[0] == "HGETALL" and str(s[1]).startswith(subj) for s in steps
    )


def repair_write(store: MemoryStore) -> Callable[[Steps], bool]:
    """A round trip of the repair that changes a subject (a write's second one matches too)."""
    first = write_trip(store)
    scripts = (SUBJECT_DROP, SUBJECT_PUT, RETIRE, SUBJECT_TRIM)
    return lambda steps: not first(steps) and any(is_script(s, *scripts) for s in steps)


def look_done(store: MemoryStore) -> Callable[[Steps], bool]:
    """The repair's last command: the journal entries it repaired taken off."""
    key = f"{store.keys.name}:subj:pending"
    return lambda steps: any(isinstance(s, tuple) and s[:2] == ("ZREM", key) for s in steps)


@contextlib.contextmanager
def holding(store: MemoryStore, rules: Sequence[Rule]) -> Iterator[list[Steps]]:
    """Within the block, a backend call of ``store`` that a rule's first test accepts waits
    until a call its second accepts has returned (``HOLD_S`` at most: then AssertionError).

    Yields every call's steps (keyed commands, scripts, searches), in the order they left.
    """
    backend = store.backend
    calls: list[Steps] = []
    gates = [(held, until, asyncio.Event()) for held, until in rules]
    real = {name: getattr(backend, name) for name in ("pipeline", "command")}

    def wrap(name: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(operation: str, *args: Any, **kwargs: Any) -> Any:
            steps: Steps = (
                (*args[0], *map(tuple, kwargs.get("searches", ()))) if name == "pipeline" else (tuple(args),)
            )
            for held, _, done in gates:
                if held(steps):
                    try:
                        await asyncio.wait_for(done.wait(), HOLD_S)
                    except TimeoutError:
                        raise AssertionError(f"{operation}: the order asked for never came") from None
            calls.append(steps)
            reply = await fn(operation, *args, **kwargs)
            for _, until, done in gates:
                if until(steps):
                    done.set()
            return reply

        return call

    for name, fn in real.items():
        setattr(backend, name, wrap(name, fn))
    try:
        yield calls
    finally:
        for name, fn in real.items():
            setattr(backend, name, fn)


ORDERS = ("write first", "write between", "repair first")


def orders(store: MemoryStore, order: str) -> list[Rule]:
    """Where the write's first round trip lands against the repair of the crash its look found."""
    trip, read, fix, done = write_trip(store), repair_read(store), repair_write(store), look_done(store)
    return {
        "write first": [(read, trip)],  # before the repair reads the subject
        "write between": [(trip, read), (fix, trip)],  # after it read, before it changes anything
        "repair first": [(trip, done)],  # as when the look went first
    }[order]
