"""Memories by id: ``get``, ``get_many``, ``forget`` and deletion of many ids.

The lowest part of the long-term tier: recall, scopes, capacity and consolidation
read and delete documents through it. A memory is its HASH document
(``<name>:mem:<id>``) plus its exact access counter (``<name>:acc:{<doc key>}``) and
its update history (``<name>:upd:{<doc key>}``), on the same slot, so they always go
together; a recalled memory's exact last access waits in the store's pending HASH
until its document's snapshot is flushed (``tiers.reinforce``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any

from ..backend import scripts
from ..backend.commands import Attempts, ScriptCall, Step
from ..core.codec import as_text, to_float, to_int
from ..core.keys import validate_memory_id
from ..core.models import MemoryItem, MemoryVersion, item_from_fields, with_access
from ..core.query import ITEM_FIELDS
from ..core.slots import deletes
from ..errors import StoreConnectionError, ValidationError
from .history import History
from .reinforce import Reinforcement
from .runtime import Runtime

__all__ = ["Documents"]

log = logging.getLogger(__name__)

# ACCESS's leading ARGV: reinforce (1/0), now_ms, half_life_s, interval_ms.
_READ_ONLY = ("0", "0", "1", "0")


class Documents:
    """Read and delete memories by id."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self._history = History(rt)
        self.reinforcement = Reinforcement(rt)

    async def get(self, id: str) -> MemoryItem | None:
        """The memory with this id, or None (never the raw vector).

        A superseded version (its history document) when the memory is no longer
        current: it carries ``valid_until``.
        """
        return (await self.get_many([id]))[0]

    async def get_many(self, ids: Sequence[str]) -> list[MemoryItem | None]:
        """``get`` for many ids in one round trip (exact access counts included; superseded versions too)."""
        if isinstance(ids, str):
            raise ValidationError(
                "get_many takes a list of ids", code="validation.type", details={"argument": "ids"}
            )
        # A subject a crash left half-written: looked for beside the read, repaired, read again.
        return await self._rt.read("get", lambda: self.fetch(ids, history=True))

    async def fetch(
        self,
        ids: Sequence[str],
        *,
        reinforce: tuple[float, float] | None = None,
        history: bool = False,
    ) -> list[MemoryItem | None]:
        """The memories ``ids`` (None where gone or expired) with exact access counts and times.

        ``reinforce``: ``(now, half_life_seconds)`` to count this as an access of each
        (``tiers.reinforce``) in the same step; the items returned are as they were
        before it. One ``ACCESS`` script on a single server; on a cluster one per memory
        (each touches one slot) and the pending HASH's, pipelined.

        Not retried with ``reinforce``: a replay would count an access twice. When that
        round trip fails on the connection, the memories are read again without it (the
        access may or may not have been counted: reinforcement is best-effort).

        ``history``: a memory no longer current is read from its history document, in
        the same round trip (``History.past_items``).
        """
        rt = self._rt
        if not ids:
            return []
        past: list[Any] = []
        if history:
            rows = await self._fetch_rows(ids, _READ_ONLY, idempotent=True, also=self._history.reads(ids))
            rows, past = rows[: len(ids)], rows[len(ids) :]
        elif reinforce is None:
            rows = await self._fetch_rows(ids, _READ_ONLY, idempotent=True)
        else:
            try:
                rows = await self._fetch_rows(ids, self.reinforcement.flags(*reinforce), idempotent=False)
            except StoreConnectionError as exc:
                log.warning("reading and reinforcing %d memories failed (%s); reading again", len(ids), exc)
                rt.metrics.observe_background_failure("reinforce")
                rows = await self._fetch_rows(ids, _READ_ONLY, idempotent=True)
        now_ms = time.time() * 1000
        out: list[MemoryItem | None] = []
        expired: list[str] = []
        for mid, row in zip(ids, rows, strict=True):
            if not row:
                out.append(None)
                continue
            fields = dict(zip(ITEM_FIELDS, row, strict=False))
            if fields.get("content") is None:
                out.append(None)
                continue
            expires = to_float(fields.get("expires_at"))
            if expires and expires <= now_ms:
                out.append(None)  # past its TTL
                expired.append(mid)
                continue
            item = item_from_fields(mid, fields, fact_source=rt.settings.fact_source)
            count = to_int(row[len(ITEM_FIELDS)])
            last = max(item.last_accessed_at, int(to_float(row[len(ITEM_FIELDS) + 1]) or 0))
            if count != item.access_count or last != item.last_accessed_at:  # the snapshot lags
                item = with_access(item, last, count)
            out.append(item)
        if expired:
            self.drop_expired(expired)
        return self._history.past_items(ids, out, past) if history else out

    async def reinforce(self, ids: Sequence[str], now: float, half_life: float) -> None:
        """Count an access of each of ``ids`` (``ACCESS`` with no fields): one command on a single server.

        Not retried: a replayed increment would count an access twice.
        """
        flags = self.reinforcement.flags(now, half_life)
        await self._fetch_rows(ids, flags, idempotent=False, fields=(), operation="reinforce")

    async def _fetch_rows(
        self,
        ids: Sequence[str],
        flags: Sequence[str],
        *,
        idempotent: bool,
        fields: Sequence[str] = ITEM_FIELDS,
        operation: str = "get",
        also: Sequence[Step] = (),
    ) -> list[Any]:
        """One row per id, then the replies of ``also`` (sent in the same round trip)."""
        rt = self._rt
        steps = self.reinforcement.steps(ids, flags, fields)
        if len(steps) == 1 and not also and isinstance(steps[0], ScriptCall):
            replies = [await rt.backend.script(operation, steps[0], idempotent=idempotent)]
        else:
            replies = await rt.backend.pipeline(
                operation, [*steps, *also], idempotent=idempotent, details={"ids": len(ids)}
            )
        rows, rest = self.reinforcement.rows(ids, flags, replies)
        self.reinforcement.note(ids, flags, rows)
        return [*rows, *rest]

    def drop_expired(self, ids: Sequence[str]) -> None:
        """Delete memories found past their ``expires_at`` (in the background).

        The server expires them itself; this only catches one whose ``PEXPIRE`` was lost
        (a connection cut between the ``HSET`` and it), which would otherwise stay
        stored, hidden from every read, until its scope is forgotten.
        """
        if not self._rt.supervisor.closed:
            self._rt.spawn(self.delete_ids(list(ids)))

    async def history(self, id: str) -> list[MemoryVersion]:
        """The versions of a memory that updates replaced, newest first.

        Kept: the last ``HISTORY_MAX`` (20) versions' content, importance, tags and
        metadata, with when each was replaced; they expire with the memory and are
        deleted with it. Not kept: vectors, and writes by other libraries.
        """
        rt = self._rt
        raw = await rt.backend.command("history", "LRANGE", rt.keys.updates(validate_memory_id(id)), 0, -1)
        out: list[MemoryVersion] = []
        for line in raw:
            entry = json.loads(as_text(line))
            out.append(
                MemoryVersion(
                    content=entry["content"],
                    importance=float(entry["importance"]),
                    tags=list(entry["tags"]),
                    metadata=dict(entry["metadata"]),
                    replaced_at=int(entry["replaced_at"]),
                )
            )
        return out

    async def forget(self, id: str) -> bool:
        """Delete one memory (with its access counter and update history); True if it existed.

        Forgetting the current version of a subject leaves the subject with no current
        memory: the previous version is not brought back (write it again to undo). A
        superseded version (its history document) is deleted the same way and leaves its
        subject's version list; the current version and the other versions' validity are
        untouched, so the instants it covered have no version any more.

        Retried on connection faults. A retry cannot know what the attempt it replaces
        did: when that attempt may have reached the server and the retry finds nothing
        left, the answer is True (the memory is gone, and this call may have deleted
        it), never a False that would say nothing happened. So True means "existed when
        the call began, or possibly so after a fault, and is gone now"; False means it
        did not exist (exact: the first attempt answered).
        """
        rt = self._rt
        key, counter, updates = rt.keys.doc(id), rt.keys.access(id), rt.keys.updates(id)
        past = rt.keys.hist_doc(id)
        attempts = Attempts()
        with rt.obs.span("forget"):
            replies = await rt.backend.pipeline(
                "forget",
                [
                    ("HGET", key, "subject_key"),
                    ("HGET", past, "subject_key"),
                    ("DEL", key),
                    ("DEL", counter, updates),
                    ("DEL", past),
                ],
                attempts=attempts,
            )
            deleted = bool(int(replies[2]))
            subject = replies[0] or replies[1]
            if subject:
                # A version of a subject: the subject keeps no current one (the previous is
                # not brought back) and its version list forgets it (tiers.subjects).
                await rt.backend.script(
                    "forget",
                    scripts.SUBJECT_DROP.call(
                        [rt.keys.subject(as_text(subject)), rt.keys.subject_versions(as_text(subject))],
                        [id, "0"],
                    ),
                )
        if deleted:
            rt.metrics.add_items(-1)
        # A history document is not an item (caps, count): only the reply says it existed.
        return deleted or bool(int(replies[4])) or attempts.retried

    async def delete_ids(
        self, ids: Sequence[str], *, also: Sequence[Step] | None = None, operation: str = "forget"
    ) -> int:
        """Delete memories by id in one pipelined round trip; the number that existed.

        The documents in one ``DEL`` per hash slot (one for all on a single server), their
        access counters and update histories in another (``core.slots.deletes``).

        ``also``: more commands sent after the deletes in the same round trip (the
        eviction counter, the capacity lock's release). After a retry (an attempt that may
        have deleted them was cut) the count is every id, all gone now: the retry's own
        replies would count only what the lost attempt left, and a caller paging on
        "nothing deleted" (``forget_by_scope``) would stop early. So the count is of ids
        gone when this returns that existed when their ids were read, as ``forget``'s answer.
        """
        if not ids and also is None:
            return 0
        rt = self._rt
        keys = rt.keys
        # Multi-key DELs, one per slot (all of a page in two on a single server): a DEL
        # per memory cost a command each, the page's main cost (issue #29). The documents
        # go first and alone, so their replies count the memories that existed.
        commands, lead = deletes(
            [keys.doc(mid) for mid in ids],
            [k for mid in ids for k in (keys.access(mid), keys.updates(mid))],
            cluster=rt.backend.cluster,
        )
        attempts = Attempts()
        replies = await rt.backend.pipeline(operation, [*commands, *(also or ())], attempts=attempts)
        removed = len(ids) if attempts.retried else sum(int(r) for r in replies[:lead])
        if removed:
            rt.metrics.add_items(-removed)
        return removed
