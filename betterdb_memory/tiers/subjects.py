"""Subjects on write: at most one current version per subject, the others in history.

``remember(content, subject="home city", valid_from=...)`` names what a memory states.
Within its exact scope and kind a subject has at most one current version, named by a
pointer on the subject's own slot (``<name>:subj:{D}``, with every version in
``<name>:subj:{D}:hist``, score ``valid_from``); the versions it superseded leave the
main prefix for their history documents (``<name>:hist:{<doc key>}``, ``RETIRE``), so
the reference's index, Monitor, ``count``, caps and default recall see the current one
only. ``D`` is ``core.subjects.subject_key_of(scope, kind, normalised subject)``.

Round trips of a write with subjects (``LongTermMemory.write_memories``):

1. the documents' ``HSET`` s (as every write), then ``SUBJECT_PUT`` per subject (the
   decision: current, or past-dated), then one TAG search per subject of its documents
   still under the main prefix, all in the write's own round trip;
2. ``RETIRE`` of whatever round trip 1 says left the current state: the version a new
   one replaced, a past-dated write itself, leftovers (``core.subjects.plan_settle``).

A write without a subject sends none of this. Nothing scans a scope: the search is one
TAG lookup of one digest.

A crash (or a lost reply) between the round trips leaves the pointer naming the new
version and the replaced one still under the main prefix (and past versions' end dates
not shortened): one version too many for a while, nothing false (it was current a
moment before). Each write is in the journal of unsettled writes until it is settled;
the next read or subject write repairs what the journal (or this store's own failed
settling) names: ``tiers.subject_repair``, rules and crash points in
``core.subject_repair``. The next write of the subject also finds a leftover in its
search and retires it; so does ``fact_history``. A writer that died between its
``HSET`` and its ``SUBJECT_PUT`` (a cluster: different slots) leaves a document no
version list knows: the repair puts it again (the journal names it); without a journal
entry, the next write puts it again once it is older than ``ORPHAN_GRACE_MS`` (younger,
it is most likely a concurrent write in flight).

A version can also vanish without the subject knowing: the current one evicted by a
cap, expired by its TTL, deleted by a ``forget_by_scope`` that names only tags. The
pointer then names a document that is gone. The next write of the subject notices
(its search misses the pointer's current; ``EXISTS`` confirms), drops it from the
pointer and the version list, and puts its own version again, so an older-dated write
becomes current when nothing later is left (``SubjectRepair.heal``). ``fact_history``
drops the versions it finds gone the same way.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..backend import scripts
from ..backend.commands import Step, score_pairs
from ..core.codec import as_text, encode_vector, to_int
from ..core.keys import Scope
from ..core.query import SCORE_ALIAS, VECTOR_FIELD
from ..core.record import NewMemory
from ..core.replies import parse_search_reply
from ..core.subjects import PutReply, Retire, SubjectPut, plan_settle, subject_key_of, subject_search_query
from ..errors import ConfigurationError, StoreConnectionError
from .runtime import Runtime
from .subject_repair import SubjectRepair

log = logging.getLogger(__name__)

__all__ = ["SUBJECT_SEARCH_LIMIT", "Subjects"]

#: Documents of one subject read by a write's search (normally the new one and the old current).
SUBJECT_SEARCH_LIMIT = 50
_SEARCH_FIELDS = ("valid_from", "created_at")


class Subjects:
    """The subject write path: the steps of round trip 1, and round trip 2 (``settle``)."""

    def __init__(self, rt: Runtime) -> None:
        self._rt = rt
        self.repair = SubjectRepair(rt, self)
        rt.read = self.repair.read  # every read: half-written subjects repaired (looked for beside it)

    def check_index(self) -> None:
        """Refuse subjects on an index without ``subject_key`` (its search could never find them).

        Raises:
            ConfigurationError: ``configuration.index_outdated``.
        """
        if not self._rt.index.layout.subject_key:
            raise ConfigurationError(
                f"the index {self._rt.index.name!r} was created without the subject_key field, so "
                "subjects cannot be written yet; switch to an index with this version's schema "
                "(CLI: betterdb-memory reindex; API: await store.migrate_index())",
                code="configuration.index_outdated",
                details={"index": self._rt.index.name, "field": "subject_key"},
            )

    def puts(self, records: Sequence[tuple[NewMemory, str, list[Any]]]) -> list[SubjectPut]:
        """The ``SUBJECT_PUT`` of each (memory, id, stored fields) that names a subject."""
        out: list[SubjectPut] = []
        for memory, mid, fields in records:
            if memory.subject_key is None:
                continue
            stored = dict(zip(fields[0::2], fields[1::2], strict=True))
            s = memory.scope
            out.append(
                SubjectPut(
                    id=mid,
                    digest=memory.subject_key,
                    valid_from=to_int(stored["valid_from"]),
                    subject=str(memory.subject),
                    scope_json=SubjectPut.scope_of(s.namespace, s.agent_id, s.thread_id),
                    kind=memory.kind,
                    correction=memory.correction,
                )
            )
        return out

    def put_calls(self, puts: Sequence[SubjectPut]) -> list[Step]:
        keys = self._rt.keys
        return [
            scripts.SUBJECT_PUT.call([keys.subject(p.digest), keys.subject_versions(p.digest)], p.args())
            for p in puts
        ]

    def steps(self, puts: Sequence[SubjectPut], scopes: Sequence[Scope]) -> list[Step]:
        """Round trip 1's subject commands, sent after the documents' ``HSET`` s.

        The ``SUBJECT_PUT`` s first (their replies are ``len(puts)`` after the writes'),
        then each subject recorded in its exact scope's list (``forget_by_scope`` and
        ``erase`` find a scope's subjects there, without a scan).
        """
        keys = self._rt.keys
        out = self.put_calls(puts)
        registered: dict[str, list[Any]] = {}
        for p, scope in zip(puts, scopes, strict=True):
            registered.setdefault(scope.tag, [p.scope_json])
            registered[scope.tag] += [p.digest, json.dumps([p.kind, p.subject], ensure_ascii=False)]
        for tag, (scope_json, *pairs) in registered.items():
            out.append(("HSET", keys.subject_scopes, tag, scope_json))
            out.append(("HSET", keys.subject_scope(tag), *pairs))
        return [*out, *self.repair.journal(puts, int(time.time() * 1000))]

    def searches(self, puts: Sequence[SubjectPut]) -> list[list[Any]]:
        """One search per subject of its documents under the main prefix (a TAG lookup)."""
        return [self.search_args(d) for d in dict.fromkeys(p.digest for p in puts)]

    def search_args(self, digest: str) -> list[Any]:
        caps = self._rt.index.capabilities
        query = subject_search_query(digest)
        n = str(SUBJECT_SEARCH_LIMIT)
        if caps is None or caps.filter_queries:
            return [
                "FT.SEARCH", self._rt.index.name, query, "RETURN", str(len(_SEARCH_FIELDS)), *_SEARCH_FIELDS,
                "LIMIT", "0", n, "DIALECT", "2",
            ]  # fmt: skip
        # valkey-search 1.0 answers only KNN queries: any vector, the filter does the work.
        probe = np.zeros(max(1, self._rt.embedder.dimensions), dtype=np.float32)
        probe[0] = 1.0
        return [
            "FT.SEARCH", self._rt.index.name, f"({query})=>[KNN {n} @{VECTOR_FIELD} $vec AS {SCORE_ALIAS}]",
            "PARAMS", "2", "vec", encode_vector(probe), "RETURN", str(len(_SEARCH_FIELDS) + 1), SCORE_ALIAS,
            *_SEARCH_FIELDS, "LIMIT", "0", n, "DIALECT", "2",
        ]  # fmt: skip

    def found(
        self, digests: Sequence[str], replies: Sequence[Any]
    ) -> dict[str, list[tuple[str, int | None, int | None]]]:
        """Per digest, the (id, valid_from, created_at) of each document its search returned."""
        out: dict[str, list[tuple[str, int | None, int | None]]] = {}
        for digest, reply in zip(digests, replies, strict=True):
            rows = out.setdefault(digest, [])
            for hit in parse_search_reply(reply).hits:
                vf, created = hit.fields.get("valid_from"), hit.fields.get("created_at")
                rows.append(
                    (
                        self._rt.keys.memory_id_of(hit.key),
                        None if vf is None else to_int(vf),
                        None if created is None else to_int(created),
                    )
                )
        return out

    async def settle(
        self,
        puts: Sequence[SubjectPut],
        put_replies: Sequence[Any],
        search_replies: Sequence[Any],
        *,
        now_ms: int,
        operation: str = "remember",
    ) -> int:
        """Round trip 2: retire what round trip 1 says is no longer current; the number retired.

        Orphans (see the module docstring) are put again in the same round trip; what
        that decides is retired in one more, which only a repair ever needs.
        """
        try:
            moved = await self._settle(puts, put_replies, search_replies, now_ms=now_ms, operation=operation)
        except StoreConnectionError as exc:
            # The write itself is stored; what is left is one version too many (and end dates
            # not shortened), which this store's next read or write repairs (tiers.subject_repair).
            log.warning("settling %d subject writes failed (%s); the next read repairs it", len(puts), exc)
            self._rt.metrics.observe_background_failure("subjects")
            self.repair.failed(puts)
            return 0
        except BaseException:
            self.repair.failed(puts)  # cancelled between its round trips: the same repair
            raise
        self.repair.settled(puts)
        return moved

    async def _settle(
        self,
        puts: Sequence[SubjectPut],
        put_replies: Sequence[Any],
        search_replies: Sequence[Any],
        *,
        now_ms: int,
        operation: str,
    ) -> int:
        found = self.found(list(dict.fromkeys(p.digest for p in puts)), search_replies)
        replies = await self.repair.heal(puts, [PutReply.parse(r) for r in put_replies], found, operation)
        retires, orphans = plan_settle(puts, replies, found, now_ms=now_ms)
        first = {p.digest: p for p in puts}
        again = [
            SubjectPut(mid, digest, vf, first[digest].subject, first[digest].scope_json, first[digest].kind)
            for digest, mid, vf in orphans
        ]
        moved, extra = await self._retire_round(retires, self.put_calls(again), operation)
        if again:
            retires2, _ = plan_settle(again, [PutReply.parse(r) for r in extra], {}, now_ms=now_ms)
            moved += (await self._retire_round(retires2, [], operation))[0]
        return moved

    async def retire(self, retires: Sequence[Retire], *, operation: str = "remember") -> int:
        """Move superseded versions to their history documents (``RETIRE``, one slot each), pipelined.

        Retiring a version already gone (another writer retired it, or it was
        forgotten) does nothing. Returns how many moved.
        """
        return (await self._retire_round(retires, [], operation))[0]

    async def _retire_round(
        self, retires: Sequence[Retire], also: Sequence[Step], operation: str
    ) -> tuple[int, list[Any]]:
        if not retires and not also:
            return 0, []
        keys = self._rt.keys
        calls: list[Step] = [
            scripts.SUBJECT_TRIM.call(
                [keys.hist_doc(r.id), keys.doc(r.id)], [str(r.valid_until), r.superseded_by]
            )
            if r.trim
            else scripts.RETIRE.call(
                [keys.doc(r.id), keys.hist_doc(r.id), keys.access(r.id)],
                [str(r.valid_until), r.superseded_by, "0"],
            )
            for r in retires
        ]
        moves = [r.valid_until for r in retires if not r.trim]
        mark: list[Step] = [scripts.mark_history(keys.meta, max(moves))] if moves else []
        replies = (await self._rt.backend.pipeline(operation, [*mark, *calls, *also]))[len(mark) :]
        moved = sum(int(x) for r, x in zip(retires, replies, strict=False) if not r.trim)
        if moved:
            self._rt.metrics.add_items(-moved)
            self._rt.metrics.observe_supersessions(moved)
        return moved, list(replies[len(calls) :])

    async def drop(
        self, digest: str, memory_id: str, *, keep: bool = False, operation: str = "forget"
    ) -> bool:
        """Take a forgotten (``keep``: retracted, still listed) version off its subject; True if it was current."""
        keys = self._rt.keys
        call = scripts.SUBJECT_DROP.call(
            [keys.subject(digest), keys.subject_versions(digest)], [memory_id, "1" if keep else "0"]
        )
        return bool(int(await self._rt.backend.script(operation, call)))

    async def drop_many(self, gone: Sequence[tuple[str, str]], *, operation: str) -> None:
        """Take vanished versions, (digest, id), off their subjects in one round trip (``SUBJECT_DROP``)."""
        keys = self._rt.keys
        await self._rt.backend.pipeline(
            operation,
            [
                scripts.SUBJECT_DROP.call([keys.subject(d), keys.subject_versions(d)], [mid, "0"])
                for d, mid in gone
            ],
        )

    async def versions(
        self, digest: str, *, operation: str = "fact_history"
    ) -> tuple[str | None, list[tuple[str, int]]]:
        """(current id or None, [(id, valid_from)] oldest first) of one subject: one round trip."""
        keys = self._rt.keys
        cur, flat = await self._rt.backend.pipeline(
            operation,
            [
                ("HGET", keys.subject(digest), "current"),
                ("ZRANGE", keys.subject_versions(digest), 0, -1, "WITHSCORES"),
            ],
        )
        return (as_text(cur) or None), [(as_text(m), int(score)) for m, score in score_pairs(flat)]

    async def forget_scopes(self, scope: Scope) -> int:
        """Delete the subjects of every exact scope inside ``scope``: pointers, version lists, history documents.

        Found through the registry the subject writes keep (``<name>:subj:scopes`` ->
        ``<name>:subj:scope:{S}``), never a scan. Returns how many history documents
        were deleted (the current versions are the caller's: ``forget_by_scope``).
        """
        keys = self._rt.keys
        raw = await self._rt.backend.command("forget_by_scope", "HGETALL", keys.subject_scopes)
        deleted = 0
        for tag, value in raw.items():
            ns, agent, thread = json.loads(as_text(value))
            if not scope.contains(Scope(namespace=ns, agent_id=agent, thread_id=thread)):
                continue
            reg = keys.subject_scope(as_text(tag))
            digests = [as_text(d) for d in await self._rt.backend.command("forget_by_scope", "HKEYS", reg)]
            for d in digests:
                _, versions = await self.versions(d, operation="forget_by_scope")
                doomed: list[Step] = [("UNLINK", keys.hist_doc(mid)) for mid, _ in versions]
                rows = await self._rt.backend.pipeline(
                    "forget_by_scope",
                    [
                        *doomed,
                        ("UNLINK", keys.subject(d), keys.subject_versions(d)),
                        *self.repair.forget(d, [mid for mid, _ in versions]),
                    ],
                )
                deleted += sum(int(r) for r in rows[: len(doomed)])
            await self._rt.backend.pipeline(
                "forget_by_scope", [("UNLINK", reg), ("HDEL", keys.subject_scopes, as_text(tag))]
            )
        return deleted

    async def adopt(self, rows: Sequence[tuple[str, Mapping[Any, Any], bool]], *, operation: str) -> int:
        """Rebuild the subject keys of imported documents: (id, stored fields, is a history document).

        A current document is put as any write is (``SUBJECT_PUT``, then round trip 2),
        so an import into a store that already holds the subject settles like a write;
        a history document joins its subject's version list. Returns how many retired.
        """
        keys = self._rt.keys
        puts: list[SubjectPut] = []
        scopes: list[Scope] = []
        past: list[Step] = []
        for mid, raw, history in rows:
            fields = {as_text(k): as_text(v) for k, v in raw.items() if k not in (b"vector", "vector")}
            digest = fields.get("subject_key")
            if not digest:
                continue
            vf = to_int(fields.get("valid_from") or fields.get("created_at"))
            if history:
                past.append(("ZADD", keys.subject_versions(digest), vf, mid))
                continue
            scope = Scope(
                namespace=fields.get("namespace") or None,
                agent_id=fields.get("agentId") or None,
                thread_id=fields.get("threadId") or None,
            )
            source = fields.get("source")
            kind = fields.get("kind") or (
                "summary"
                if source == "summary"
                else "fact"
                if source == self._rt.settings.fact_source
                else "memory"
            )
            s = scope
            puts.append(
                SubjectPut(
                    mid,
                    digest,
                    vf,
                    fields.get("subject", ""),
                    SubjectPut.scope_of(s.namespace, s.agent_id, s.thread_id),
                    kind,
                )
            )
            scopes.append(scope)
        if not puts and not past:
            return 0
        searches = self.searches(puts)
        try:
            replies = await self._rt.backend.pipeline(
                operation, [*self.steps(puts, scopes), *past], searches=searches
            )
        except BaseException:
            self.repair.failed(puts)  # as a write's: repaired by this store's next read
            raise
        now_ms = int(time.time() * 1000)
        return await self.settle(
            puts, replies[: len(puts)], replies[len(replies) - len(searches) :], now_ms=now_ms
        )

    async def purge_past(self, scope: Scope, normalised: str | None, *, kind: str) -> int:
        """Delete the past versions (history documents) of the scope's subjects of ``kind`` (all, or one)."""
        keys = self._rt.keys
        if normalised is not None:
            digests = [subject_key_of(scope.tag, kind, normalised)]
        else:
            raw = await self._rt.backend.command(
                "purge_fact_history", "HGETALL", keys.subject_scope(scope.tag)
            )
            digests = [as_text(d) for d, v in raw.items() if json.loads(as_text(v))[0] == kind]
        deleted = 0
        for d in digests:
            current, versions = await self.versions(d, operation="purge_fact_history")
            past = [mid for mid, _ in versions if mid != current]
            if not past:
                continue
            purge: list[Step] = [("DEL", keys.hist_doc(mid)) for mid in past]
            purge.append(("ZREM", keys.subject_versions(d), *past))
            rows = await self._rt.backend.pipeline("purge_fact_history", purge)
            deleted += sum(int(r) for r in rows[: len(past)])
        return deleted
