"""``backend.locks.ScopedLock``: freed once per acquisition, and freed even by a cancelled holder.

A scripted backend stands in for the server here: what is checked is which scripts
the lock sends and when, not storage (the capacity tests drive the same paths
against the real engine).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from betterdb_memory.backend import ScriptCall, scripts
from betterdb_memory.backend.locks import ScopedLock


class _Scripted:
    """Answers the lock script with 1 and records every script sent; ``slow`` delays the unlock."""

    def __init__(self, *, slow: float = 0.0) -> None:
        self.sent: list[str] = []
        self.slow = slow

    async def script(self, operation: str, call: ScriptCall, **_: Any) -> int:
        if call.script is scripts.UNLOCK:
            await asyncio.sleep(self.slow)
            self.sent.append("unlock")
            return 1
        self.sent.append("lock")
        return 1


def _lock(backend: _Scripted) -> ScopedLock:
    return ScopedLock(backend, "k", ttl=10, wait=1, heartbeat=False)  # type: ignore[arg-type]


async def test_release_sends_one_unlock_per_acquisition() -> None:
    backend = _Scripted()
    lock = _lock(backend)
    await lock.acquire()
    await lock.release()
    await lock.release()
    assert backend.sent == ["lock", "unlock"]
    await lock.acquire()  # taken again: the next release frees it again
    await lock.release()
    assert backend.sent == ["lock", "unlock", "lock", "unlock"]


async def test_a_queued_unlock_counts_unless_its_pipeline_never_went_out() -> None:
    backend = _Scripted()
    lock = _lock(backend)
    await lock.acquire()
    unlock = lock.release_call()
    await lock.release()
    assert unlock.script is scripts.UNLOCK and backend.sent == ["lock"]  # the pipeline carries it
    await lock.acquire()
    lock.release_call()
    lock.unsent()  # that pipeline failed or was cancelled before it was sent
    await lock.release()
    assert backend.sent == ["lock", "lock", "unlock"]


async def test_a_holder_cancelled_while_releasing_still_frees_the_lock() -> None:
    backend = _Scripted(slow=0.05)
    lock = _lock(backend)

    async def holder() -> None:
        async with lock:
            await asyncio.sleep(10)

    task = asyncio.ensure_future(holder())
    await asyncio.sleep(0.01)
    task.cancel()  # leaves the block: the unlock starts, shielded
    await asyncio.sleep(0.01)
    task.cancel()  # a second cancellation while the unlock is on its way
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.1)
    assert backend.sent.count("unlock") == 1
