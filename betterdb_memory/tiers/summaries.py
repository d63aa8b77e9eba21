"""Rolling summaries: the turns leaving a session's window are folded into L2, nothing lost.

The list holds the window (``max_session_turns``) plus the turns older than it that
no summary covers yet. When ``summarize_batch`` such turns have piled up, a
background task (under the store's supervisor) takes the session's summary lock (the
backend's replay-safe token lock), folds each full batch into one L2 memory
(``kind="summary"``, ``source="l1-summary"``, metadata ``turn_range`` and
``turn_ids``), and advances the cursor, which is what lets the append script trim
them. A failing summariser delays trimming instead of losing turns: failures are
counted (``summary_failures``) and logged, retried with backoff on later turns, and
only past the hard cap (window + ``max_unsummarized``) are the oldest turns dropped,
counted in ``dropped``. So at any time every turn ever stored is in L1
(``get_recent_turns()``), in a summary's ``turn_ids``, or counted as dropped.

Backpressure, not loss: a healthy summariser that is only *behind* (a burst of turns
while the first summary creates the index, a slow LLM call, an engine that indexes
each write before answering) must not lose turns to the hard cap. When a
``store_turn`` finds the backlog one batch short of the cap while a summary of that
session runs in this process and has not failed, it waits (``hold_back``, after its
own turn is stored) until the summary frees room. The cap then only trims turns
whose summariser is failing, stuck past ``summary_lock_ttl``, or running in another
process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..backend import ScopedLock
from ..core.codec import to_int
from ..core.keys import SessionKeys
from ..core.turns import PENDING_TURNS, SUMMARY_ADVANCE, SUMMARY_FAILED, Turn, decode_turn
from ..errors import BetterDBMemoryError, ServerError
from .long_term import LongTermMemory
from .runtime import Runtime
from .session_config import SessionConfig

__all__ = ["RollingSummaries"]

log = logging.getLogger(__name__)

_MAX_BACKOFF = 30.0


class RollingSummaries:
    """Summary jobs of the sessions of one store, and their in-process bookkeeping."""

    def __init__(self, rt: Runtime, config: SessionConfig, long_term: LongTermMemory) -> None:
        self._rt = rt
        self.config = config
        self._long_term = long_term
        register = rt.backend.register
        self._advance_script = register("summary_advance", SUMMARY_ADVANCE)
        self._failed_script = register("summary_failed", SUMMARY_FAILED)
        self._pending_script = register("pending_turns", PENDING_TURNS)
        # Keyed by the session's turns key: jobs started here, running tasks, re-run
        # requests that arrived while a job ran, and consecutive-failure backoff.
        self.active: set[str] = set()
        self.tasks: dict[str, asyncio.Task[Any]] = {}
        self.rerun: set[str] = set()
        self.failures: dict[str, int] = {}
        self.not_before: dict[str, float] = {}
        self.cursors: dict[str, int] = {}  # summary cursor reached by the job running here
        self.stuck: set[str] = set()  # jobs that made no progress for a lock TTL: writers stop waiting
        self.closing = False
        self.idle = asyncio.Event()  # set whenever no job is active (close waits on it)
        self.idle.set()
        self.changed = asyncio.Condition()  # notified when a job ends or moves

    # -- bookkeeping ----------------------------------------------------------------------

    def _begin(self, key: str) -> None:
        self.active.add(key)
        self.idle.clear()

    async def _end(self, key: str) -> None:
        self.active.discard(key)
        self.tasks.pop(key, None)
        self.cursors.pop(key, None)
        self.stuck.discard(key)
        if not self.active:
            self.idle.set()
        async with self.changed:
            self.changed.notify_all()

    async def _advanced(self, key: str, cursor: int) -> None:
        """A running job moved the cursor: wake writers held back by ``store_turn``."""
        self.cursors[key] = max(cursor, self.cursors.get(key, 0))
        self.stuck.discard(key)
        async with self.changed:
            self.changed.notify_all()

    # -- scheduling -----------------------------------------------------------------------

    def maybe_summarize(self, agent: str | None, thread: str, sk: SessionKeys) -> None:
        """Start a summary job of the session unless one runs, one just failed, or the store closes."""
        key = sk.turns
        if self.closing:
            return
        if key in self.active:
            self.rerun.add(key)  # the running job re-checks before it lets go
            return
        if self.not_before.get(key, 0.0) > time.monotonic():
            return
        self._begin(key)
        self._rt.spawn(self._job(agent, thread, sk, min_batch=self.config.batch))

    async def hold_back(self, key: str, thread: str, seq: int, *, cursor: int) -> None:
        """Wait while this session's summary (running here, not failing) catches up.

        ``seq`` is the caller's turn (already stored) and ``cursor`` the summary cursor
        its append saw. Returns once the backlog behind ``seq`` is under the high-water
        mark, or the job ends (done, failed, cancelled), or the store closes, or the job
        makes no progress for ``summary_lock_ttl`` (then it is treated as stuck and the
        hard cap applies, as for a failing summariser).
        """
        cfg = self.config

        def behind() -> bool:
            if self.closing or key not in self.active or key in self.failures or key in self.stuck:
                return False
            return seq - cfg.window - max(cursor, self.cursors.get(key, 0)) >= cfg.high_water

        def moved(reached: int) -> Callable[[], bool]:
            return lambda: not behind() or self.cursors.get(key, 0) > reached

        while behind():
            try:
                async with self.changed:
                    await asyncio.wait_for(
                        self.changed.wait_for(moved(self.cursors.get(key, 0))),
                        timeout=cfg.lock_ttl_ms / 1000.0,
                    )
            except TimeoutError:
                self.stuck.add(key)  # later writers do not wait either, until it moves again
                log.warning(
                    "store_turn: the rolling summary of thread %r made no progress in %.0fs; "
                    "not waiting for it (turns past the cap will be dropped and counted)",
                    thread, cfg.lock_ttl_ms / 1000.0,
                )  # fmt: skip
                return

    async def summarize_session(self, agent: str | None, thread: str) -> int:
        """Fold every turn older than the window into summaries now, even a partial batch.

        Waits for a summary of this session already running here. Returns the number
        of turns summarised.

        Raises:
            BetterDBMemoryError: the summariser or the write failed (also counted).
        """
        sk = self._rt.keys.session(agent, thread)
        async with self.changed:
            await self.changed.wait_for(lambda: sk.turns not in self.active)
        self._begin(sk.turns)
        return await self._job(agent, thread, sk, min_batch=1, wait=True)

    async def stop(self, keys: Sequence[str]) -> None:
        """Cancel the jobs of these sessions running here and wait for them (erasure)."""
        wanted = set(keys)
        tasks = [t for k, t in list(self.tasks.items()) if k in wanted and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self) -> None:
        """Let running summaries finish within ``shutdown_grace``, then cancel the rest."""
        self.closing = True
        grace = self.config.grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.idle.wait(), timeout=grace)
        left = [t for t in self.tasks.values() if not t.done()]
        if left:
            log.warning("close: cancelling %d rolling summaries still running after %.1fs", len(left), grace)
            for t in left:
                t.cancel()
            await asyncio.gather(*left, return_exceptions=True)

    # -- the job --------------------------------------------------------------------------

    async def _job(
        self, agent: str | None, thread: str, sk: SessionKeys, *, min_batch: int, wait: bool = False
    ) -> int:
        """Summarise full batches while there are ``min_batch`` pending turns (holds the lock)."""
        cfg = self.config
        key = sk.turns
        task = None if wait else asyncio.current_task()  # inline runs (wait=True) are the caller's task
        if task is not None:
            self.tasks[key] = task
        done = 0
        lock = self._rt.backend.lock(
            sk.summary_lock, ttl=cfg.lock_ttl_ms / 1000.0, wait=cfg.lock_ttl_ms / 1000.0, heartbeat=False
        )
        try:
            if not await self._acquire(lock, wait=wait):
                return 0
            try:
                while True:
                    pending = await self._pending(sk, thread)
                    if not pending or len(pending) < min_batch:
                        if key in self.rerun:
                            self.rerun.discard(key)
                            continue
                        break
                    batch = pending[: cfg.batch or len(pending)]
                    await self._write_summary(agent, thread, batch)
                    advanced = await self._advance(sk, batch[-1].seq)
                    done += len(batch)
                    if advanced < 0:  # the session was cleared meanwhile
                        break
                    await self._advanced(key, advanced)
                    # Extend the lock for the next batch; lost means another summariser took over.
                    if not await lock.try_acquire():
                        break
            finally:
                await lock.release()
            self.failures.pop(key, None)
            self.not_before.pop(key, None)
        except asyncio.CancelledError:
            self.rerun.discard(key)  # cancelled by erase or close: nothing may start again for it
            raise
        except Exception as exc:
            await self._note_failure(sk, thread, exc)
            if wait:
                raise
        finally:
            await self._end(key)
            if key in self.rerun and not self.closing:
                self.rerun.discard(key)
                self.maybe_summarize(agent, thread, sk)
        return done

    async def _acquire(self, lock: ScopedLock, *, wait: bool) -> bool:
        """One attempt, or (``wait``) retry for up to the lock TTL; False when another holds it."""
        deadline = time.monotonic() + lock.wait
        while True:
            if await lock.try_acquire():
                return True
            if not wait or time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)

    async def _pending(self, sk: SessionKeys, thread: str) -> list[Turn]:
        """Turns older than the window that no summary covers yet, oldest first."""
        cursor_raw, raw = await self._rt.backend.script(
            "summarize", self._pending_script, [sk.turns, sk.summary_cursor], [self.config.window]
        )
        cursor = to_int(cursor_raw)
        return [t for t in (decode_turn(r, thread) for r in raw) if t is not None and t.seq > cursor]

    async def _advance(self, sk: SessionKeys, through: int) -> int:
        """Move the cursor to ``through`` and trim what that frees; -1 if the session is gone."""
        keys = [sk.turns, sk.meta, sk.summary_cursor]
        return int(
            await self._rt.backend.script(
                "summarize", self._advance_script, keys, [through, self.config.window]
            )
        )

    async def _write_summary(self, agent: str | None, thread: str, batch: Sequence[Turn]) -> None:
        summarizer = self.config.summarizer
        text = await summarizer.summarize(batch)
        if not isinstance(text, str) or not text.strip():
            raise ServerError(  # the summariser's answer, as an embedder's nonsense is EmbeddingError
                f"summarizer {summarizer!r} returned no text",
                code="server.empty_summary",
                details={"turns": len(batch)},
            )
        first, last = batch[0].seq, batch[-1].seq
        # The range in the content makes each batch's summary distinct, so the store's
        # dedup never merges two batches (and their turn ids) into one memory.
        await self._long_term.remember_many(
            [
                {
                    "content": f"Conversation summary, turns {first}-{last}:\n{text.strip()}",
                    "kind": "summary",
                    "source": "l1-summary",
                    "thread_id": thread,
                    "agent_id": agent,
                    "importance": 0.6,
                    "metadata": {
                        "turn_range": [first, last],
                        "turn_ids": [t.id for t in batch],
                        "started_at": batch[0].timestamp,
                        "ended_at": batch[-1].timestamp,
                        "summarizer": type(summarizer).__name__,
                    },
                }
            ]
        )

    async def _note_failure(self, sk: SessionKeys, thread: str, exc: BaseException) -> None:
        n = self.failures.get(sk.turns, 0) + 1
        self.failures[sk.turns] = n
        delay = min(_MAX_BACKOFF, 0.5 * 2 ** (n - 1))
        self.not_before[sk.turns] = time.monotonic() + delay
        log.warning(
            "rolling summary of thread %r failed (%s: %s); turns stay in L1, retry in >= %.1fs",
            thread, type(exc).__name__, exc, delay,
        )  # fmt: skip
        try:
            await self._rt.backend.script("summarize", self._failed_script, [sk.meta], [])
        except BetterDBMemoryError as again:
            log.warning("could not count the summary failure of thread %r: %s", thread, again)
