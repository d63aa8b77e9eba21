"""Current facts and their history: what fact-mode consolidation reads and rewrites.

A subject's current fact is a memory (source ``fact``, kind ``fact``) in the index,
written with its subject like any ``remember(subject=...)``, so one mechanism decides
which version is current (``tiers.subjects``: the pointer ``<name>:subj:{D}`` and its
version list; the superseded version is stamped and renamed out of the index prefix
into its history document, ``RETIRE``). A tombstone retracts the current fact the same
way, with ``retracted`` set. ``fact_history`` lists the versions of any subject, of any
kind, newest first, until ``purge_fact_history`` or erasure deletes them.

Stores written before subjects (the ledger's own ``<name>:cons:{S}:subjects`` and
``:hist:<digest>`` sorted sets) keep working without a conversion: their current facts
have no ``subject_key`` and are retired here explicitly when superseded, and
``fact_history`` reads both lists.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..backend import scripts
from ..backend.commands import Command, Step, score_pairs
from ..core.codec import as_text, to_int
from ..core.consolidation import Selection, Tally
from ..core.facts import (
    CurrentFact,
    FactPlan,
    FactRecord,
    fact_record,
    fact_statement,
    normalise,
    parse_instant,
    subject_digest,
    subject_key,
)
from ..core.keys import ConsolidationKeys, Scope
from ..core.models import MemoryItem, MemoryKind
from ..core.query import MemoryFilter
from ..core.record import KINDS
from ..core.subjects import Retire, next_version, normalise_subject, subject_key_of
from ..core.validation import check_kind
from ..errors import ValidationError
from .fact_apply import Known, PlanApply, ms_of
from .long_term import LongTermMemory
from .runtime import Runtime
from .scopes import ScopeReader

__all__ = ["FactLedger", "Known"]


_HIST_FIELDS = (
    "content", "subject", "date", "created_at", "superseded_by", "valid_until", "retracted", "valid_from",
    "expires_at",
)  # fmt: skip


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

    async def current_facts(
        self, sel: Selection
    ) -> tuple[dict[str, CurrentFact], dict[str, str], list[str], Known]:
        """(subject key -> current fact, fact id -> subject, ids of duplicate facts, ``Known``) of the target.

        Read from the index (facts another library wrote count); the oldest fact of a
        subject is its current one, later duplicates (a concurrent run of another
        library) are retired. Legacy ids: current facts without ``subject_key`` (written
        before subjects, or by another library), which no subject pointer names.
        """
        flt = MemoryFilter(scope=sel.target, tags=sel.tags, sources=(self._rt.settings.fact_source,))
        hits = await self._scopes.scan_ordered(
            flt,
            ("content", "subject", "date", "subject_key", "valid_from", "created_at"),
            operation="consolidate",
        )
        known = Known(set(), {})
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
            if not as_text(h.fields.get("subject_key")):
                known.legacy.add(mid)
            # Its start: valid_from, else (a fact from before subjects) its date, else its write.
            dated = ms_of(instant)
            stored = h.fields.get("valid_from")
            known.starts[mid] = to_int(stored) if stored else dated or to_int(h.fields.get("created_at"))
        return current, subjects, duplicates, known

    async def apply_plan(
        self,
        ck: ConsolidationKeys,
        sel: Selection,
        plan: FactPlan,
        page: Sequence[MemoryItem],
        importance: float,
        current: dict[str, CurrentFact],
        tally: Tally,
        known: Known | None = None,
    ) -> dict[str, CurrentFact]:
        """Apply a page's plan in its order; the target's current facts after it (``tiers.fact_apply``)."""
        return await PlanApply(self._rt, self._long_term, self).run(
            ck, sel, plan, page, importance, current, tally, known or Known(set(), {})
        )

    async def link_history(self, ck: ConsolidationKeys, subject_key: str, fact_id: str) -> None:
        """Record a legacy fact's retirement in the ledger's own history list (stores before subjects)."""
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
        until: int | None = None,
    ) -> int:
        """Move facts out of the index into history (RENAME, same slot); the number moved.

        ``until``: their ``valid_until``, epoch ms (default now). ``subjects``: the
        legacy facts among them, whose history the ledger's own list records.
        """
        moved = 0
        stamp = str(until if until is not None else int(time.time() * 1000))
        mark: list[Step] = [scripts.mark_history(self._rt.keys.meta, int(stamp))]  # before the first move
        for mid in ids:
            keys = [self._rt.keys.doc(mid), ck.hist_doc(mid), self._rt.keys.access(mid)]
            step = scripts.RETIRE.call(keys, [stamp, by or "", "1" if retracted else "0"])
            mark, replies = [], await self._rt.backend.pipeline("consolidate", [*mark, step])
            if replies[-1]:
                moved += 1
                subject = subjects.get(mid)
                if subject:
                    await self.link_history(ck, normalise(subject), mid)
        if moved:
            self._rt.metrics.add_items(-moved)
        return moved

    async def fact_history(
        self,
        subject: str,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        kind: MemoryKind | None = None,
    ) -> list[FactRecord]:
        """Every recorded version of ``subject`` in the exact scope named, newest first.

        The versions written with ``remember(subject=...)`` and the facts of
        ``consolidate(mode="facts")`` alike: the current one (``current=True``) and the
        ones it superseded, past-dated or retracted, each with ``valid_until`` and
        ``superseded_by``. ``kind``: only that kind's versions (``"fact"``,
        ``"memory"``...); None: every kind (a fact and a memory of one subject are two
        subjects, each with its own current version). Newest: by ``valid_from``.

        A version found still in the index though no longer current (a writer that
        crashed between its round trips) is retired on the way (``tiers.subjects``); a
        listed version whose document is gone (evicted, expired, deleted by tags) leaves
        the list, and the pointer when it named it (never listed as current).

        Raises:
            ValidationError: an empty or over-long subject, an unknown kind.
        """
        normalised = normalise_subject(subject)
        kinds: tuple[str, ...] = KINDS if kind is None else (check_kind(kind),)
        scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        # A subject a crash left half-written: repaired first, not beside this read, which drops
        # versions it finds gone (a crashed write's missing document looks like one).
        return await self._rt.read(
            "fact_history", lambda: self._versions(scope, normalised, kinds), beside=False
        )

    async def _versions(self, scope: Scope, normalised: str, kinds: tuple[str, ...]) -> list[FactRecord]:
        ck = self.keys_of(scope)
        keys = self._rt.keys
        digests = [subject_key_of(scope.tag, k, normalised) for k in kinds]
        reads: list[Command] = []
        for d in digests:
            reads += [
                ("HGET", keys.subject(d), "current"),
                ("ZRANGE", keys.subject_versions(d), 0, -1, "WITHSCORES"),
            ]
        legacy = "fact" in kinds
        if legacy:
            reads.append(("ZRANGE", ck.history(subject_digest(normalised)), 0, -1))
        got = await self._rt.backend.pipeline("fact_history", reads)
        pointers: dict[str, str | None] = {}
        versions: dict[str, list[tuple[str, int]]] = {}
        for n, d in enumerate(digests):
            pointers[d] = as_text(got[2 * n]) or None
            versions[d] = [(as_text(m), int(score)) for m, score in score_pairs(got[2 * n + 1])]
        owner = {mid: d for d in digests for mid, _ in versions[d]}
        ids = list(owner)
        ids += [
            mid for mid in dict.fromkeys(as_text(m) for m in (got[-1] if legacy else [])) if mid not in owner
        ]
        docs: list[Command] = []
        for mid in ids:
            docs += [("HMGET", keys.hist_doc(mid), *_HIST_FIELDS), ("HMGET", keys.doc(mid), *_HIST_FIELDS)]
        found = await self._rt.backend.pipeline("fact_history", docs) if ids else []
        records: list[FactRecord] = []
        stale: list[Retire] = []
        vanished: list[tuple[str, str]] = []
        for n, mid in enumerate(ids):
            hist_vals, mem_vals = found[2 * n], found[2 * n + 1]
            if mem_vals[-1] and float(as_text(mem_vals[-1])) <= time.time() * 1000:
                mem_vals = [None] * len(_HIST_FIELDS)  # past its TTL: gone, as get() reads it
            live = mem_vals[0] is not None
            owned = owner.get(mid)
            is_current = live and (owned is None or pointers[owned] == mid)
            if live and not is_current and owned is not None:
                nxt = next_version(versions[owned], mid, pointers[owned])
                if nxt is not None:
                    stale.append(Retire(mid, nxt[0], nxt[1]))
            values = mem_vals if live else hist_vals
            if values[0] is None:
                if owned is not None:
                    vanished.append((owned, mid))  # evicted, expired, deleted by tags: off the list
                continue
            fields = dict(zip(_HIST_FIELDS, values, strict=True))
            if live and not is_current and owned is not None and stale and stale[-1].id == mid:
                fields.update(valid_until=str(stale[-1].valid_until), superseded_by=stale[-1].superseded_by)
            records.append(fact_record(mid, fields, is_current))
        if stale:
            await self._long_term.subjects.retire(stale, operation="fact_history")
        if vanished:
            await self._long_term.subjects.drop_many(vanished, operation="fact_history")

        # Newest first by valid_from; versions of one instant in the order they superseded
        # each other (a version comes after the one that superseded it), then by write time.
        by_id = {r.id: r for r in records}

        def hops(r: FactRecord) -> int:
            n = 0
            while r.superseded_by in by_id and n < len(by_id):
                r, n = by_id[r.superseded_by], n + 1
            return n

        def newest(r: FactRecord) -> tuple[float, int, float]:
            at = r.valid_from or r.recorded_at
            return (-at.timestamp(), hops(r), -r.recorded_at.timestamp())

        records.sort(key=newest)
        return records

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
        deleted = await self._purge_history(ck, only)
        one = None if subject is None else normalise_subject(subject)
        return deleted + await self._long_term.subjects.purge_past(ck.scope, one, kind="fact")

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
        await self._long_term.subjects.forget_scopes(scope)
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
