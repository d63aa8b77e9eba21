"""``ScopedLock``: a token lock on one key, safe to replay, freed by its owner only.

A retried acquire whose first reply was lost finds its own token and succeeds (the
``LOCK`` script extends a lock that is already ours); the ``UNLOCK`` script deletes
the key only while it holds our token, so a holder whose lock expired never frees
the next holder's. Held locks are kept alive by a heartbeat (consolidation, long
runs) or bounded by their TTL alone (capacity eviction, short), and every path out
of a holder, cancellation included, frees the lock once (``release``,
``release_shielded``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import BetterDBMemoryError, ConsolidationBusyError

__all__ = ["LockBackend", "ScopedLock"]

log = logging.getLogger(__name__)


class LockBackend(Protocol):
    """What a lock sends its scripts through: ``client.Backend`` is one.

    A Protocol, not the ``Backend`` class, so that this module does not import the
    client module that builds locks (``Backend.lock``): the two would import each
    other. The script handles are the backend's own; the lock only passes them back.
    """

    @property
    def lock_script(self) -> Any: ...

    @property
    def unlock_script(self) -> Any: ...

    async def script(self, operation: str, script: Any, keys: Sequence[str], args: Sequence[Any]) -> Any: ...

    def queue_script(self, pipe: Any, script: Any, keys: Sequence[str], args: Sequence[Any]) -> None: ...


class ScopedLock:
    """A TTL-bounded token lock, kept alive by a heartbeat while held; safe to replay.

    ``async with backend.lock(key, ttl=30, wait=60)`` waits (bounded, with backoff) for
    the lock, raising ``ConsolidationBusyError`` after ``wait`` seconds; ``check()``
    raises once the lock was lost (its TTL passed while the holder was stalled), so a
    holder never writes after another took over.
    """

    def __init__(self, backend: LockBackend, key: str, *, ttl: float, wait: float, heartbeat: bool) -> None:
        self.backend, self.key = backend, key
        self.ttl_ms = str(max(100, int(ttl * 1000)))
        self.ttl, self.wait = ttl, wait
        self.token = uuid.uuid4().hex
        self.lost = False
        self._heartbeat = heartbeat
        self._beat: asyncio.Task[None] | None = None
        self._released = False

    async def try_acquire(self) -> bool:
        """One attempt (also extends the TTL when already ours)."""
        got = await self.backend.script(
            "lock", self.backend.lock_script, [self.key], [self.token, self.ttl_ms]
        )
        return int(got) == 1

    def queue_try(self, pipe: Any) -> None:
        """Queue one attempt in the caller's pipeline; pass its reply to ``took``."""
        self.backend.queue_script(pipe, self.backend.lock_script, [self.key], [self.token, self.ttl_ms])

    def took(self, reply: Any) -> bool:
        """Whether the queued attempt got the lock (then it is held: ``release`` frees it)."""
        return not isinstance(reply, BaseException) and int(reply) == 1

    async def __aenter__(self) -> ScopedLock:
        await self.acquire()
        return self

    async def acquire(self) -> None:
        """Wait (bounded, with backoff) for the lock; ``release`` frees it.

        Raises:
            ConsolidationBusyError: not taken within ``wait`` seconds.
        """
        deadline = time.monotonic() + self.wait
        delay = 0.002
        while not await self.try_acquire():
            if time.monotonic() > deadline:
                raise ConsolidationBusyError(
                    f"another run holds {self.key} (waited {self.wait:.0f}s)", details={"lock": self.key}
                )
            await asyncio.sleep(delay)
            delay = min(0.25, delay * 2)
        self._released = False
        if self._heartbeat:
            self._beat = asyncio.get_running_loop().create_task(self._beat_loop())

    async def _beat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                if not await self.try_acquire():
                    self.lost = True
                    return
            except BetterDBMemoryError as exc:  # try again next beat; the TTL covers a blip
                log.warning("could not extend lock %s: %s", self.key, exc)

    def check(self) -> None:
        """Refuse to go on once the lock is gone: another holder may be writing."""
        if self.lost:
            raise ConsolidationBusyError(
                f"lock {self.key} expired during the run; nothing more was written",
                code="consolidation.lock_lost",
                details={"lock": self.key},
            )

    async def __aexit__(self, *exc: object) -> None:
        await self.release_shielded()  # leaving on a cancellation frees the lock too

    def queue_release(self, pipe: Any) -> None:
        """Queue the unlock in the caller's last pipeline (one round trip fewer).

        The lock is then treated as released: leaving the ``async with`` block only
        stops the heartbeat. If that pipeline fails or is cancelled, call ``unsent``
        and the next ``release`` sends the unlock itself.
        """
        self.backend.queue_script(pipe, self.backend.unlock_script, [self.key], [self.token])
        self._released = True

    def unsent(self) -> None:
        """The pipeline carrying ``queue_release`` failed or was cancelled.

        The unlock may not have reached the server, so the next ``release`` sends it
        again (harmless if it had: the unlock only deletes the key while it holds our
        token).
        """
        self._released = False

    async def release(self) -> None:
        """Stop the heartbeat and free the lock if it is still ours (never raises).

        Once per acquisition: a second call sends nothing, so every path out of a
        holder (done, failed, cancelled) may call it without counting the others.
        """
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
        if self._released:
            return
        self._released = True
        try:
            await self.backend.script("unlock", self.backend.unlock_script, [self.key], [self.token])
        except BetterDBMemoryError as exc:  # the TTL frees it
            log.warning("could not release lock %s: %s", self.key, exc)

    async def release_shielded(self) -> None:
        """``release`` that runs to its end even when the calling task is being cancelled.

        A holder cancelled between taking the lock and freeing it (``asyncio.timeout``
        around a write) would otherwise leave every other writer of the key waiting
        for the TTL.
        """
        await asyncio.shield(self.release())
