"""Transcripts: a framework adapter's raw conversation, kept beside a session's L1 turns.

The OpenAI Agents session (``adapters.openai_agents``) and the LangChain chat history
(``adapters.langchain.history``) each keep what their framework hands them, exactly
as given (SDK items, LangChain messages), as JSON in a LIST, and fold each completed
exchange into an L1 turn (``store_turn``) so recall, summaries and Monitor see the
conversation. The mechanics are the same for both, so they live here once:

* ``append`` pushes the new entries and reads, in the same step, those not yet folded
  (the ``folded`` mark: how many entries are already turns), refreshing both keys'
  TTL (``scripts.TRANSCRIPT_APPEND``).
* The adapter says which of those entries complete turns (its own ``plan``); the mark
  is then moved by compare-and-set (``scripts.TRANSCRIPT_ADVANCE``): whoever moves it
  stores those turns, so two writers never store a turn twice.
* ``pop`` removes the newest entry and keeps the mark within the list
  (``scripts.TRANSCRIPT_POP``); ``clear`` deletes both keys.

Both keys are keys of the session (``KeySpace.session``: one hash slot), so
``clear_session`` and ``erase`` delete them with the turns. Every command goes through
the store's backend (closed check, retries of the reads, error translation, the
script registry); appends, advances and pops are not retried (a replay would append
twice, or find the mark moved by itself and drop the turns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..backend import Backend, scripts

__all__ = ["Transcript"]

T = TypeVar("T")

#: Which of the pending entries complete turns: (the turns, how many entries they consume).
Plan = Callable[[list[Any]], tuple[Sequence[T], int]]


class Transcript:
    """One session's transcript for one adapter: the entry LIST and its folded mark.

    Args:
        backend: the store's backend.
        entries_key / folded_key: the session's keys for this adapter
            (``SessionKeys.agent_items`` / ``agent_folded``, ``chat_messages`` / ``chat_folded``).
        operations: the prefix of the operation names its errors carry
            (``"agents_session"`` -> ``agents_session.add_items``).
    """

    def __init__(self, backend: Backend, entries_key: str, folded_key: str, *, operations: str) -> None:
        self.backend = backend
        self.entries_key, self.folded_key = entries_key, folded_key
        self._prefix = operations

    def _op(self, name: str) -> str:
        return f"{self._prefix}.{name}"

    async def read(self, operation: str, *, last: int | None = None) -> list[Any]:
        """The entries as stored, oldest first: all, or the ``last`` n (n > 0)."""
        start = 0 if last is None else -last
        raw = await self.backend.command(self._op(operation), "LRANGE", self.entries_key, start, -1)
        return list(raw)

    async def append(
        self, operation: str, entries: Sequence[str], *, ttl_ms: int, plan: Plan[T]
    ) -> Sequence[T]:
        """Append ``entries`` (one round trip); the turns this caller must now store.

        ``plan`` gets the entries not yet folded, oldest first, and says which turns they
        complete. Empty when they complete none, or when another writer folded them first.
        """
        call = scripts.TRANSCRIPT_APPEND.call([self.entries_key, self.folded_key], [ttl_ms, *entries])
        _, folded_raw, pending = await self.backend.script(self._op(operation), call, idempotent=False)
        turns, consumed = plan(list(pending))
        if not consumed:
            return ()
        folded = int(folded_raw)
        advance = scripts.TRANSCRIPT_ADVANCE.call([self.folded_key], [folded, folded + consumed, ttl_ms])
        moved = await self.backend.script(self._op(operation), advance, idempotent=False)
        return turns if int(moved) else ()

    async def pop(self, operation: str) -> Any:
        """Remove and return the newest entry as stored (None when there is none)."""
        call = scripts.TRANSCRIPT_POP.call([self.entries_key, self.folded_key])
        return await self.backend.script(self._op(operation), call, idempotent=False)

    async def clear(self, operation: str) -> None:
        """Delete the entries and the mark (the session's turns are the caller's to clear)."""
        await self.backend.command(self._op(operation), "DEL", self.entries_key, self.folded_key)
