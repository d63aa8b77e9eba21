"""Erasure across tiers: ``forget_by_scope`` (L2) and ``erase`` (an agent's L1 and L2).

The right to erasure must leave nothing behind: forgetting a scope also wipes the
consolidation state and the fact history of every target scope inside it, and
erasing an agent first stops the rolling summaries running here for its sessions
(so none writes after the erase), then deletes the L1 keys, then the L2 memories.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.escaping import validate_tag_value
from ..core.query import with_times
from ..core.requests import TimeInput
from ..core.where import names_declared
from ..errors import BetterDBMemoryError, ValidationError
from ..progress import ProgressSink, check_progress
from .documents import Documents
from .fact_ledger import FactLedger
from .history import History
from .runtime import Runtime
from .scopes import ScopeReader, scope_filter
from .sessions import Sessions
from .summaries import RollingSummaries

__all__ = ["Erasure"]

_FORGET_PAGE = 500
_FORGET_MAX_PAGES = 10_000
#: Pauses (seconds) before reading again a page whose every document was already gone.
#: valkey-search drops a deleted document from its index on its writer threads, after the
#: DEL has answered, so under load a search can still list what a page (or an earlier,
#: timed-out call) deleted. Stopping at such a page left real matches behind it.
_STALE_PAGE_PAUSES = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0)


class Erasure:
    """Deletion of whole scopes and of everything an agent stored."""

    def __init__(
        self,
        rt: Runtime,
        *,
        scopes: ScopeReader,
        docs: Documents,
        ledger: FactLedger,
        sessions: Sessions,
        summaries: RollingSummaries,
    ) -> None:
        self._rt = rt
        self._scopes = scopes
        self._docs = docs
        self._ledger = ledger
        self._sessions = sessions
        self._summaries = summaries
        self._history = History(rt)

    async def forget_by_scope(
        self,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        progress: ProgressSink | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> int:
        """Delete every memory matching a scope (None = any) and carrying ALL of ``tags``.

        ``where``: only the memories matching this filter too (the language of ``list``);
        a non-empty one is a selector by itself (``{}`` is not). Each page the index
        returns is checked again in the client before it is deleted, so an index made by
        another library can never widen a deletion. Needs filter-only queries
        (``CommandNotSupportedError`` on valkey-search 1.0). A ``where`` naming a declared
        metadata field leaves the superseded versions alone (their index lacks those fields).

        Refuses an empty selector (no scope field, no tags, no ``where``): deleting
        everything is not a default. Pages of 500, each one query and one pipelined delete; returns
        the number deleted. On a connection fault the error's ``details`` carry
        ``deleted`` (the count so far): calling again finishes the job. ``progress``: an
        object with ``begin(label, total)`` / ``advance(n)`` / ``end()``
        (``betterdb_memory.progress.Progress`` draws a bar) told of every page deleted.
        The scope's superseded versions (history documents) go too; they are not counted.
        ``since`` / ``until``: only memories (and versions) whose ``valid_from`` falls in
        ``[since, until)``; the consolidation state is then kept.
        """
        flt = with_times(
            scope_filter(thread_id=thread_id, agent_id=agent_id, namespace=namespace, tags=tags, live_only=False),
            as_of=None, since=since, until=until,
        )  # fmt: skip
        node = self._rt.parse_where(where)
        if progress is not None:
            progress = check_progress(progress)
        if flt.is_unscoped and node is None:
            raise ValidationError(
                "forget_by_scope needs a thread_id, agent_id, namespace, tags or where; "
                "refusing to delete everything",
                code="validation.empty_scope",
            )
        await self._rt.index.ensure_ready()
        flt = self._rt.with_where(flt, node, operation="forget_by_scope", filter_only=True)
        deleted, stale = 0, 0
        with self._rt.obs.span("forget_by_scope"):
            try:
                for page in range(_FORGET_MAX_PAGES):
                    total, hits = await self._scopes.scan(
                        flt, (), operation="forget_by_scope", limit=_FORGET_PAGE
                    )
                    if progress is not None and page == 0:
                        progress.begin("forget_by_scope", total)
                    if not hits:
                        break
                    removed = await self._docs.delete_ids([self._rt.keys.memory_id_of(h.key) for h in hits])
                    deleted += removed
                    if progress is not None:
                        progress.advance(removed)
                    if removed == 0:
                        # Every listed document was already gone: the index has not caught
                        # up with deletes yet. Read again after a pause, a bounded number of
                        # times, rather than stop with matches possibly left behind this page.
                        if stale == len(_STALE_PAGE_PAUSES):
                            warnings.warn(
                                f"forget_by_scope on {self._rt.keys.name!r}: the index still lists "
                                f"{len(hits)} deleted memories after {sum(_STALE_PAGE_PAUSES):.1f} s; "
                                f"{deleted} deleted, some may remain: call it again",
                                UserWarning,
                                stacklevel=3,
                            )
                            break
                        await asyncio.sleep(_STALE_PAGE_PAUSES[stale])
                        stale += 1
                        continue
                    stale = 0
                    if total is not None and total <= len(hits):
                        # This page held every match there was: no last search to see none
                        # left (a memory written meanwhile could land after that one too).
                        break
                else:
                    warnings.warn(
                        f"forget_by_scope stopped after {_FORGET_MAX_PAGES} pages on {self._rt.keys.name!r}; "
                        f"{deleted} deleted, some may remain: call it again",
                        UserWarning,
                        stacklevel=3,
                    )
                if flt.where is None or not names_declared(flt.where):
                    await self._history.forget(flt)  # the history index has no declared fields
                if not flt.tags and not flt.has_time and flt.where is None:  # the whole scope went
                    await self._ledger.forget_scope_state(flt.scope)
            except BetterDBMemoryError as exc:
                exc.details["operation"] = "forget_by_scope"
                exc.details["deleted"] = deleted
                raise
            finally:
                if progress is not None:
                    progress.end()
        return deleted

    async def erase(self, *, agent_id: str, thread_id: str | None = None) -> int:
        """Right to erasure: delete an agent's L2 memories and L1 turns (one thread, or all).

        Order matters: summaries running in this process for those sessions are
        cancelled first (so none writes after the erase), then L1 keys go, then L2
        memories (``forget_by_scope``, which also wipes their consolidation state and
        fact history).
        A summariser running in *another* process at that moment may still write one
        summary afterwards; erase again after ``summary_lock_ttl`` to be certain.

        Returns:
            L2 memories plus L1 turns deleted.
        """
        agent = validate_tag_value(agent_id, name="agent_id")
        thread = None if thread_id is None else validate_tag_value(thread_id, name="thread_id")
        threads = [thread] if thread is not None else await self._sessions.threads_of(agent)
        await self._summaries.stop([self._rt.keys.session(agent, t).turns for t in threads])
        l1 = await self._sessions.delete_sessions(
            agent, threads, all_of_agent=thread is None, operation="erase"
        )
        l2 = await self.forget_by_scope(agent_id=agent, thread_id=thread)
        return l1 + l2
