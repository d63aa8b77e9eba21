"""Current facts and their history: what fact-mode consolidation reads and rewrites.

A subject's current fact is a memory (source ``fact``) in the index. When a newer
statement supersedes it or a tombstone retracts it, the document is stamped and
renamed out of the index prefix into its history key (``RETIRE``, same slot), and its
id is added to the subject's history (a sorted set per target scope), so recall,
count and Monitor stop seeing it at once while ``fact_history`` can still show it,
until ``purge_fact_history`` or erasure (``forget_scope_state``) deletes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..backend import scripts
from ..backend.commands import Command, score_pairs
from ..core.codec import as_text
from ..core.consolidation import Selection, Tally, output_item
from ..core.facts import (
    CurrentFact,
    FactOp,
    FactPlan,
    FactRecord,
    date_text_of,
    fact_record,
    fact_statement,
    normalise,
    parse_instant,
    subject_digest,
    subject_key,
)
from ..core.keys import ConsolidationKeys, Scope
from ..core.models import MemoryItem
from ..core.query import MemoryFilter
from ..core.times import now_ms
from ..errors import ValidationError
from .long_term import LongTermMemory
from .runtime import Runtime
from .scopes import ScopeReader

__all__ = ["FactLedger"]

_HIST_FIELDS = ("content", "subject", "date", "created_at", "superseded_by", "valid_until", "retracted")


class FactLedger:
    """The current facts of a target scope, their supersession and their history."""

    def __init__(self, rt: Runtime, scopes: ScopeReader, long_term: LongTermMemory) -> None:
        self._rt = rt
        self._scopes = scopes
        self._long_term = long_term

    def keys_of(self, scope: Scope) -> ConsolidationKeys:
        return ConsolidationKeys(self._rt.keys, scope)

    async def _one(self, operation: str, command: Command) -> Any:
        """The reply of one ``command`` (retried: every use here is idempotent)."""
        return (await self._rt.backend.pipeline(operation, [command]))[0]

    async def current_facts(self, sel: Selection) -> tuple[dict[str, CurrentFact], dict[str, str], list[str]]:
        """(subject key -> current fact, fact id -> subject, ids of duplicate facts) of the target.

        Read from the index (facts another library wrote count); the oldest fact of a
        subject is its current one, later duplicates (a concurrent run of another
        library) are retired.
        """
        flt = MemoryFilter(scope=sel.target, tags=sel.tags, sources=(self._rt.settings.fact_source,))
        hits = await self._scopes.scan_ordered(flt, ("content", "subject", "date"), operation="consolidate")
        current: dict[str, CurrentFact] = {}
        subjects: dict[str, str] = {}
        duplicates: list[str] = []
        for h in hits:
            mid = self._rt.keys.memory_id_of(h.key)
            subject = as_text(h.fields.get("subject"))
            if not normalise(subject):
                continue  # a fact without a subject cannot be reconciled
            key = normalise(subject)
            if key in current:
                duplicates.append(mid)
                continue
            date_text = as_text(h.fields.get("date")) or None
            statement = fact_statement(as_text(h.fields.get("content")), date_text)
            try:
                instant = parse_instant(date_text)
            except ValidationError:
                instant = None
            current[key] = CurrentFact(mid, normalise(statement), instant)
            subjects[mid] = subject
        return current, subjects, duplicates

    async def apply_plan(
        self,
        ck: ConsolidationKeys,
        sel: Selection,
        plan: FactPlan,
        page: Sequence[MemoryItem],
        importance: float,
        current: dict[str, CurrentFact],
        tally: Tally,
    ) -> dict[str, CurrentFact]:
        """Write the plan's new facts first, then retire what they replace (write-then-delete)."""
        tally.unchanged += plan.unchanged
        tally.unmatched += plan.unmatched
        ops = plan.ops
        puts = [i for i, op in enumerate(ops) if op.action == "put"]
        new_ids: dict[int, str] = {}
        if puts:
            written, _, _ = await self._long_term.write(
                [self._fact_item(sel, ops[i], importance, page) for i in puts], capped=False, dedup=False
            )
            new_ids = dict(zip(puts, written, strict=True))
            tally.created += written
        now_iso = datetime.now(UTC).isoformat()
        state = dict(current)
        for i, op in enumerate(ops):
            expected = op.expected
            old = new_ids.get(expected) if isinstance(expected, int) else expected
            if op.action == "put":
                if old is not None:
                    await self.retire(
                        ck, [old], by=new_ids[i], retracted=False, subjects={old: op.subject},
                        until=op.instant.isoformat() if op.instant else now_iso,
                    )  # fmt: skip
                    tally.superseded += 1
                assert op.fact is not None
                await self._link_history(ck, op.key, new_ids[i])
                state[op.key] = CurrentFact(new_ids[i], normalise(op.fact.statement), op.instant)
            else:
                if old is not None:
                    await self.retire(
                        ck, [old], by=None, retracted=True, subjects={old: op.subject},
                        until=op.instant.isoformat() if op.instant else now_iso,
                    )  # fmt: skip
                    tally.retracted += 1
                state.pop(op.key, None)
        return state

    async def _link_history(self, ck: ConsolidationKeys, subject_key: str, fact_id: str) -> None:
        digest = subject_digest(subject_key)

        link: list[Command] = [
            ("ZADD", ck.history(digest), time.time(), fact_id),
            ("HSET", ck.subjects, digest, subject_key),
        ]
        await self._rt.backend.pipeline("consolidate", link)

    async def retire(
        self,
        ck: ConsolidationKeys,
        ids: Sequence[str],
        *,
        by: str | None,
        retracted: bool,
        subjects: Mapping[str, str],
        until: str | None = None,
    ) -> int:
        """Move facts out of the index into history (RENAME, same slot); the number moved."""
        moved = 0
        # In ms, as every history document's ``valid_until`` (the history index's NUMERIC field).
        instant = parse_instant(until) if until else None
        stamp = str(round(instant.timestamp() * 1000) if instant is not None else now_ms())
        for mid in ids:
            keys = [self._rt.keys.doc(mid), ck.hist_doc(mid), self._rt.keys.access(mid)]

            args = [stamp, by or "", "1" if retracted else "0"]
            if await self._rt.backend.script("consolidate", scripts.RETIRE.call(keys, args)):
                moved += 1
                subject = subjects.get(mid)
                if subject:
                    await self._link_history(ck, normalise(subject), mid)
        if moved:
            self._rt.metrics.add_items(-moved)
        return moved

    def _fact_item(
        self, sel: Selection, op: FactOp, importance: float, page: Sequence[MemoryItem]
    ) -> dict[str, Any]:
        assert op.fact is not None
        date_text = date_text_of(op.fact.date)
        return output_item(
            sel,
            op.content,
            importance,
            page,
            kind="fact",
            source=self._rt.settings.fact_source,
            metadata={},
            subject=op.fact.subject.strip(),
            date_text=date_text,
        )

    async def fact_history(
        self,
        subject: str,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> list[FactRecord]:
        """Every recorded fact of ``subject`` in the exact target scope named, newest first.

        The current fact (``current=True``) and the ones it replaced or that were
        retracted, each with ``valid_until`` and ``superseded_by``.
        """
        key = subject_key(subject)
        ck = self.keys_of(Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id))
        members = await self._one(
            "fact_history", ("ZRANGE", ck.history(subject_digest(key)), 0, -1, "WITHSCORES")
        )
        ids = [(as_text(m), s) for m, s in score_pairs(members)]
        docs: list[Command] = []
        for mid, _ in ids:
            docs += [
                ("HMGET", ck.hist_doc(mid), *_HIST_FIELDS),
                ("HMGET", self._rt.keys.doc(mid), *_HIST_FIELDS),
            ]
        found = await self._rt.backend.pipeline("fact_history", docs) if ids else []
        records: list[tuple[float, FactRecord]] = []
        for n, (mid, order) in enumerate(ids):
            hist_vals, mem_vals = found[2 * n], found[2 * n + 1]
            is_current = mem_vals[0] is not None
            values = mem_vals if is_current else hist_vals
            if values[0] is None:
                continue  # forgotten, or purged meanwhile
            records.append(
                (order, fact_record(mid, dict(zip(_HIST_FIELDS, values, strict=True)), is_current))
            )
        records.sort(key=lambda r: (r[1].recorded_at, r[0], r[1].current), reverse=True)
        return [r for _, r in records]

    async def purge_fact_history(
        self,
        *,
        subject: str | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> int:
        """Delete superseded and retracted facts of the exact target scope (current facts stay).

        ``subject=None`` purges every subject. Returns how many were deleted.
        """
        ck = self.keys_of(Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id))
        only = None if subject is None else subject_digest(subject_key(subject))
        return await self._purge_history(ck, only)

    async def _purge_history(self, ck: ConsolidationKeys, only: str | None) -> int:
        if only is not None:
            digests = [only]
        else:
            raw = await self._one("purge_fact_history", ("HKEYS", ck.subjects))
            digests = sorted(as_text(d) for d in raw)
        deleted = 0
        for digest in digests:
            hk = ck.history(digest)
            ids = [
                as_text(m) for m in await self._rt.backend.command("purge_fact_history", "ZRANGE", hk, 0, -1)
            ]

            purge: list[Command] = []
            for mid in ids:
                purge += [("DEL", ck.hist_doc(mid)), ("EXISTS", self._rt.keys.doc(mid))]
            rows = await self._rt.backend.pipeline("purge_fact_history", purge) if ids else []
            gone = [mid for n, mid in enumerate(ids) if not int(rows[2 * n + 1])]
            deleted += sum(int(r) for r in rows[0::2])
            if gone:
                await self._rt.backend.command("purge_fact_history", "ZREM", hk, *gone)
        return deleted

    async def forget_scope_state(self, scope: Scope) -> None:
        """Erase the consolidation state (history included) of every target inside ``scope``.

        Called when ``forget_by_scope`` wipes a scope, so no superseded fact text
        survives the right to erasure.
        """
        targets_key = self._rt.keys.consolidation_targets
        raw = await self._one("forget_by_scope", ("HGETALL", targets_key))
        for tag, value in raw.items():
            ns, agent, thread = json.loads(as_text(value))
            exact = Scope(namespace=ns, agent_id=agent, thread_id=thread)
            if not scope.contains(exact):
                continue
            ck = self.keys_of(exact)
            await self._purge_history(ck, None)
            raw_digests = await self._rt.backend.command("forget_by_scope", "HKEYS", ck.subjects)
            doomed = [*ck.all_state(), *(ck.history(as_text(d)) for d in raw_digests)]

            unlinks: list[Command] = [("UNLINK", key) for key in doomed]
            await self._rt.backend.pipeline("forget_by_scope", [*unlinks, ("HDEL", targets_key, tag)])
