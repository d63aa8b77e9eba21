"""Consolidation: fold memories into one digest (``summary``) or into current facts (``facts``).

Two modes, because they answer different questions (the reference's contract):

* ``summary`` accumulates: many memories become one lossy digest (source
  ``"summary"``). It does not resolve updates ("moved to Berlin" after "lives in
  Paris" may both survive).
* ``facts`` resolves updates: an extractor turns memories into ``Fact`` s keyed by
  subject; the newest dated statement is the current fact (source ``"fact"``,
  content ``"[date] statement"``), the one it replaces leaves the index into a
  history (``fact_history``), a tombstone retracts. Sources are kept.

Design (why it looks like this):

* **Candidates and current facts come from the index** (one filter read each, at
  most ``SCAN_LIMIT``; see ``scopes``), so facts and memories another library wrote
  (betterdb-agent-memory, BetterDB Monitor) take part, and nothing can drift.
* **State per target scope** (the exact scope named by the selectors, where the
  output is written): a sorted set of the source ids already consolidated, so a
  re-run over unchanged sources calls no model and writes nothing; per subject, a
  sorted set of the fact ids it has had (its history).
* **Supersession moves, it does not delete**: the old fact's document is renamed
  from ``<name>:mem:<id>`` to ``<name>:hist:{<name>:mem:<id>}`` (the same slot, out of
  the index prefix), so recall, count and Monitor stop seeing it at once while its
  text stays readable in ``fact_history`` until ``purge_fact_history`` or erasure.
* **Output is never capped**: consolidation is a net reduction, and an eviction pass
  over a scope the sources still fill could evict the digest or unrelated memories.
* **One run per target scope at a time**: a token lock kept alive by a heartbeat
  while a model call runs. The model is called under this lock only.
* Plans are pure functions (``plan_facts``, ``parse_instant``, ``normalise``):
  unit-tested without a server.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ..backend import ScopedLock, scripts
from ..core.codec import as_text
from ..core.facts import (
    ConsolidateFactsResult,
    ConsolidateResult,
    CurrentFact,
    ExtractFactsFn,
    FactOp,
    FactPlan,
    FactRecord,
    SummarizeFn,
    check_optional,
    date_text_of,
    fact_record,
    fact_statement,
    iso_ts,
    most_sensitive,
    normalise,
    parse_instant,
    plan_facts,
    subject_digest,
    subject_key,
)
from ..core.keys import ConsolidationKeys, Scope
from ..core.models import MemoryItem
from ..core.query import ITEM_FIELDS, MemoryFilter
from ..core.validation import check_importance, check_tags
from ..errors import ValidationError
from .documents import Documents
from .long_term import LongTermMemory
from .runtime import Runtime
from .scopes import ScopeReader

__all__ = ["PAGE_SIZE", "Consolidation"]

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # candidates per model call in facts mode
_MAX_SOURCE_IDS = 200  # ids kept in a digest's metadata (recall returns metadata with every hit)
_DEFAULT_SUMMARY_IMPORTANCE = 0.7
_HIST_FIELDS = ("content", "subject", "date", "created_at", "superseded_by", "valid_until", "retracted")


async def _invoke(fn: Callable[[list[MemoryItem]], Any], items: list[MemoryItem]) -> Any:
    """Call a sync or async model seam.

    A sync one runs in a worker thread: a blocking SDK call on the event loop would
    also stall the lock's heartbeat, and so lose the lock.
    """
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        return await fn(items)
    result = await asyncio.to_thread(fn, items)
    return await result if inspect.isawaitable(result) else result


@dataclass(frozen=True, slots=True)
class _Selection:
    """Validated candidate selectors and the exact scope output is written to."""

    target: Scope
    tags: tuple[str, ...]
    older_than: float | None
    max_importance: float | None
    include_summaries: bool

    def candidates(self, now_ms: int, exclude: tuple[str, ...]) -> MemoryFilter:
        cutoff = None if self.older_than is None else now_ms - int(self.older_than * 1000)
        return MemoryFilter(
            scope=self.target,
            tags=self.tags,
            exclude_sources=exclude,
            max_created_at=cutoff,
            max_importance=self.max_importance,
            exclude_expired_at=now_ms,
        )


@dataclass(slots=True)
class _Tally:
    candidates: int = 0
    created: list[str] = field(default_factory=list)
    superseded: int = 0
    retracted: int = 0
    duplicates: int = 0
    unchanged: int = 0
    unmatched: list[str] = field(default_factory=list)


# -- the mixin ---------------------------------------------------------------------------


# -- the part ---------------------------------------------------------------------------


class Consolidation:
    """``consolidate``, ``fact_history`` and ``purge_fact_history``, and the state they keep.

    Attributes tune the run lock: ``lock_ttl`` (seconds the lock survives a crashed
    holder) and ``lock_wait`` (how long a second caller waits before
    ``ConsolidationBusyError``).
    """

    def __init__(self, rt: Runtime, scopes: ScopeReader, long_term: LongTermMemory, docs: Documents) -> None:
        self._rt = rt
        self._scopes = scopes
        self._long_term = long_term
        self._docs = docs
        self._retire_script = rt.backend.register("retire", scripts.RETIRE)
        self.lock_ttl = 30.0
        self.lock_wait = 60.0

    # -- public API ------------------------------------------------------------------------

    async def consolidate(
        self,
        mode: Literal["summary", "facts"],
        summarize: SummarizeFn | None = None,
        *,
        extract_facts: ExtractFactsFn | None = None,
        older_than_seconds: float | None = None,
        max_importance: float | None = None,
        delete_sources: bool | None = None,
        summary_importance: float | None = None,
        fact_importance: float | None = None,
        tags: Sequence[str] | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        include_summaries: bool = False,
    ) -> Any:
        """Fold a selection of memories into one digest, or into current facts.

        Candidates: memories matching the scope selectors (``None`` means "any"),
        carrying ALL of ``tags``, created more than ``older_than_seconds`` ago, of
        importance at most ``max_importance``; never facts, never digests in summary
        mode unless ``include_summaries``, never sources an earlier run of the same
        mode already consolidated into this target. At least one selector is required.
        Output goes to the exact scope the selectors name, with the selection's tags.

        Args:
            mode: ``"summary"`` (one digest; ``summarize(items) -> str``) or ``"facts"``
                (``extract_facts(items) -> list[Fact]``). Either seam may be sync or
                async; it receives items oldest first (at most 1,000 per facts call).
            delete_sources: summary mode: delete the folded memories (default True;
                ``False`` keeps them, marked consumed). Facts mode always keeps them.
            summary_importance / fact_importance: importance of what is written
                (defaults 0.7 and the store's ``ConsolidationConfig``).

        Returns:
            ``ConsolidateResult`` (summary) or ``ConsolidateFactsResult`` (facts).

        Raises:
            ValidationError (a ValueError): no selector, a bad argument (before any I/O),
                or a malformed model output (nothing of that page is applied).
            ConsolidationBusyError: another run of this target scope did not finish in time.
        """
        if mode not in ("summary", "facts"):
            raise ValidationError(
                f"mode must be 'summary' or 'facts', not {mode!r}",
                code="validation.choice",
                details={"argument": "mode"},
            )
        fn: Any = summarize if mode == "summary" else extract_facts
        needed = "summarize" if mode == "summary" else "extract_facts"
        if fn is None or not callable(fn):
            raise ValidationError(
                f"mode={mode!r} needs a callable {needed}",
                code="validation.argument",
                details={"argument": needed},
            )
        if delete_sources is not None and not isinstance(delete_sources, bool):
            raise ValidationError(
                "delete_sources must be a bool",
                code="validation.type",
                details={"argument": "delete_sources"},
            )
        if not isinstance(include_summaries, bool):
            raise ValidationError(
                "include_summaries must be a bool",
                code="validation.type",
                details={"argument": "include_summaries"},
            )
        sel = _Selection(
            target=Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id),
            tags=check_tags(tags),
            older_than=check_optional(older_than_seconds, "older_than_seconds", lo=0.0, hi=None),
            max_importance=check_optional(max_importance, "max_importance", lo=0.0, hi=1.0),
            include_summaries=include_summaries,
        )
        if mode == "summary":
            importance = check_importance(
                _DEFAULT_SUMMARY_IMPORTANCE if summary_importance is None else summary_importance
            )
        else:
            importance = check_importance(
                self._rt.settings.fact_importance if fact_importance is None else fact_importance
            )
        if sel.target.is_empty and not sel.tags and sel.older_than is None and sel.max_importance is None:
            raise ValidationError(
                "consolidate needs a scope, tags, older_than_seconds or max_importance to select memories; "
                "refusing to fold everything",
                code="validation.empty_scope",
            )
        await self._rt.index.ensure_ready()
        with self._rt.obs.span("consolidate" if mode == "summary" else "consolidateFacts") as span:
            result: ConsolidateResult | ConsolidateFactsResult
            if mode == "summary":
                result = await self._consolidate_summary(sel, fn, importance, delete_sources is not False)
                counts = {
                    "created": len(result.created),
                    "deleted": result.deleted,
                    "superseded": 0,
                    "unmatched": 0,
                }
                candidates = result.consolidated
            else:
                result = await self._consolidate_facts(sel, fn, importance)
                counts = {
                    "created": len(result.created),
                    "deleted": result.retracted,
                    "superseded": result.superseded,
                    "unmatched": len(result.unmatched_tombstones),
                }
                candidates = result.candidates
            span.set_attribute("gen_ai.memory.mode", mode)
            span.set_attribute("gen_ai.memory.candidates", candidates)
            for name, value in counts.items():
                span.set_attribute(f"gen_ai.memory.{name}", value)
        self._rt.metrics.observe_consolidation(mode, **counts)
        return result

    async def consolidate_facts(
        self,
        *,
        extract_facts: ExtractFactsFn,
        older_than_seconds: float | None = None,
        max_importance: float | None = None,
        fact_importance: float | None = None,
        tags: Sequence[str] | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> ConsolidateFactsResult:
        """Deprecated: use ``consolidate(mode="facts", extract_facts=...)`` (same options)."""
        warnings.warn(
            'consolidate_facts() is deprecated; use consolidate(mode="facts", extract_facts=...)',
            DeprecationWarning,
            stacklevel=3,
        )
        result: ConsolidateFactsResult = await self.consolidate(
            "facts",
            extract_facts=extract_facts,
            older_than_seconds=older_than_seconds,
            max_importance=max_importance,
            fact_importance=fact_importance,
            tags=tags,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
        )
        return result

    async def _one(self, operation: str, queue: Callable[[Any], Any]) -> Any:
        """The reply of one command queued by ``queue`` (retried: every use here is idempotent)."""
        return (await self._rt.backend.pipeline(operation, queue))[0]

    def _keys_of(self, scope: Scope) -> ConsolidationKeys:
        return ConsolidationKeys(self._rt.keys, scope)

    def _scope_lock(self, ck: ConsolidationKeys) -> ScopedLock:
        return self._rt.backend.lock(ck.lock, ttl=self.lock_ttl, wait=self.lock_wait)

    async def _register_target(self, ck: ConsolidationKeys) -> None:
        s = ck.scope
        value = json.dumps([s.namespace, s.agent_id, s.thread_id], ensure_ascii=False)
        await self._one("consolidate", lambda pipe: pipe.hset(ck.targets, ck.tag, value))

    async def _candidates(self, sel: _Selection, ck: ConsolidationKeys, mode: str) -> list[MemoryItem]:
        """The selection's unconsumed candidates, oldest first."""
        now_ms = int(time.time() * 1000)
        exclude: tuple[str, ...] = (self._rt.settings.fact_source,)
        if mode == "summary" and not sel.include_summaries:
            exclude += ("summary",)
        hits = await self._scopes.scan_ordered(
            sel.candidates(now_ms, exclude), ITEM_FIELDS, operation="consolidate"
        )
        items = [self._rt.item(h) for h in hits]
        items = [
            i
            for i in items
            if i.kind != "fact" and (i.kind != "summary" or mode == "facts" or sel.include_summaries)
        ]
        if not items:
            return []
        ids = [i.id for i in items]
        scores = await self._one("consolidate", lambda pipe: pipe.zmscore(ck.consumed[mode], ids))
        return [i for i, score in zip(items, scores, strict=True) if score is None]

    async def _mark_consumed(self, key: str, ids: Sequence[str]) -> None:
        if ids:
            now = time.time()
            await self._one("consolidate", lambda pipe: pipe.zadd(key, dict.fromkeys(ids, now)))

    def _output(
        self,
        sel: _Selection,
        content: str,
        importance: float,
        sources: Sequence[MemoryItem],
        *,
        kind: str,
        source: str,
        metadata: dict[str, Any],
        subject: str | None = None,
        date_text: str | None = None,
    ) -> dict[str, Any]:
        return {
            "content": content,
            "importance": importance,
            "tags": list(sel.tags),
            "source": source,
            "thread_id": sel.target.thread_id,
            "agent_id": sel.target.agent_id,
            "namespace": sel.target.namespace,
            "sensitivity": most_sensitive(sources),
            "metadata": metadata,
            "kind": kind,
            "subject": subject,
            "date": date_text,
        }

    # -- summary -----------------------------------------------------------------------------

    async def _consolidate_summary(
        self, sel: _Selection, summarize: SummarizeFn, importance: float, delete_sources: bool
    ) -> ConsolidateResult:
        ck = self._keys_of(sel.target)
        await self._register_target(ck)
        async with self._scope_lock(ck) as lock:
            items = await self._candidates(sel, ck, "summary")
            if not items:
                return ConsolidateResult(0, [], 0)
            text = await _invoke(summarize, items)
            if not isinstance(text, str) or not text.strip():
                raise ValidationError("summarize must return non-empty text", code="validation.summary")
            lock.check()
            ids = [i.id for i in items]
            metadata = {
                "source_ids": ids[:_MAX_SOURCE_IDS],
                "source_count": len(ids),
                "source_ids_truncated": len(ids) > _MAX_SOURCE_IDS,
                "date_from": iso_ts(items[0].created_at / 1000.0),
                "date_to": iso_ts(items[-1].created_at / 1000.0),
            }
            digest = self._output(
                sel, text, importance, items, kind="summary", source="summary", metadata=metadata
            )
            # Written before the sources go, so a failure never loses both; uncapped.
            (summary_id,), _, _ = await self._long_term.write([digest], capped=False, dedup=False)
            if delete_sources:
                deleted = await self._docs.delete_ids(ids)
            else:
                deleted = 0
                await self._mark_consumed(ck.consumed["summary"], ids)
            return ConsolidateResult(len(items), [summary_id], deleted)

    # -- facts ---------------------------------------------------------------------------------

    async def _current_facts(
        self, sel: _Selection
    ) -> tuple[dict[str, CurrentFact], dict[str, str], list[str]]:
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

    async def _consolidate_facts(
        self, sel: _Selection, extract: ExtractFactsFn, importance: float
    ) -> ConsolidateFactsResult:
        ck = self._keys_of(sel.target)
        await self._register_target(ck)
        tally = _Tally()
        async with self._scope_lock(ck) as lock:
            items = await self._candidates(sel, ck, "facts")
            current, _, duplicates = await self._current_facts(sel)
            if duplicates:
                tally.duplicates += await self._retire(ck, duplicates, by=None, retracted=False, subjects={})
            for start in range(0, len(items), PAGE_SIZE):
                page = items[start : start + PAGE_SIZE]
                tally.candidates += len(page)
                extracted = await _invoke(extract, page)
                if isinstance(extracted, str | bytes) or not isinstance(extracted, Iterable):
                    raise ValidationError("extract_facts must return a list of Fact", code="validation.fact")
                plan = plan_facts(extracted, current)
                lock.check()
                current = await self._apply_plan(ck, sel, plan, page, importance, current, tally)
                await self._mark_consumed(ck.consumed["facts"], [i.id for i in page])
        live = [c.ref for c in current.values() if isinstance(c.ref, str)]
        return ConsolidateFactsResult(
            candidates=tally.candidates,
            facts=len(live),
            created=tally.created,
            deleted=tally.superseded + tally.retracted + tally.duplicates,
            unmatched_tombstones=tally.unmatched,
            superseded=tally.superseded,
            retracted=tally.retracted,
            unchanged=tally.unchanged,
            fact_ids=live,
        )

    async def _apply_plan(
        self,
        ck: ConsolidationKeys,
        sel: _Selection,
        plan: FactPlan,
        page: Sequence[MemoryItem],
        importance: float,
        current: dict[str, CurrentFact],
        tally: _Tally,
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
                    await self._retire(
                        ck, [old], by=new_ids[i], retracted=False, subjects={old: op.subject},
                        until=op.instant.isoformat() if op.instant else now_iso,
                    )  # fmt: skip
                    tally.superseded += 1
                assert op.fact is not None
                await self._link_history(ck, op.key, new_ids[i])
                state[op.key] = CurrentFact(new_ids[i], normalise(op.fact.statement), op.instant)
            else:
                if old is not None:
                    await self._retire(
                        ck, [old], by=None, retracted=True, subjects={old: op.subject},
                        until=op.instant.isoformat() if op.instant else now_iso,
                    )  # fmt: skip
                    tally.retracted += 1
                state.pop(op.key, None)
        return state

    async def _link_history(self, ck: ConsolidationKeys, subject_key: str, fact_id: str) -> None:
        digest = subject_digest(subject_key)

        def build(pipe: Any) -> None:
            pipe.zadd(ck.history(digest), {fact_id: time.time()})
            pipe.hset(ck.subjects, digest, subject_key)

        await self._rt.backend.pipeline("consolidate", build)

    async def _retire(
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
        stamp = until or datetime.now(UTC).isoformat()
        for mid in ids:
            keys = [self._rt.keys.doc(mid), ck.hist_doc(mid), self._rt.keys.access(mid)]

            args = [stamp, by or "", "1" if retracted else "0"]
            if await self._rt.backend.script("consolidate", self._retire_script, keys, args):
                moved += 1
                subject = subjects.get(mid)
                if subject:
                    await self._link_history(ck, normalise(subject), mid)
        if moved:
            self._rt.metrics.add_items(-moved)
        return moved

    def _fact_item(
        self, sel: _Selection, op: FactOp, importance: float, page: Sequence[MemoryItem]
    ) -> dict[str, Any]:
        assert op.fact is not None
        date_text = date_text_of(op.fact.date)
        return self._output(
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

    # -- history -------------------------------------------------------------------------------

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
        ck = self._keys_of(Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id))
        members = await self._one(
            "fact_history", lambda pipe: pipe.zrange(ck.history(subject_digest(key)), 0, -1, withscores=True)
        )
        ids = [(as_text(m), float(s)) for m, s in members]

        def docs(pipe: Any) -> None:
            for mid, _ in ids:
                pipe.hmget(ck.hist_doc(mid), list(_HIST_FIELDS))
                pipe.hmget(self._rt.keys.doc(mid), list(_HIST_FIELDS))

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
        ck = self._keys_of(Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id))
        only = None if subject is None else subject_digest(subject_key(subject))
        return await self._purge_history(ck, only)

    async def _purge_history(self, ck: ConsolidationKeys, only: str | None) -> int:
        if only is not None:
            digests = [only]
        else:
            raw = await self._one("purge_fact_history", lambda pipe: pipe.hkeys(ck.subjects))
            digests = sorted(as_text(d) for d in raw)
        deleted = 0
        for digest in digests:
            hk = ck.history(digest)
            ids = [
                as_text(m) for m in await self._rt.backend.command("purge_fact_history", "ZRANGE", hk, 0, -1)
            ]

            def build(pipe: Any, ids: list[str] = ids) -> None:
                for mid in ids:
                    pipe.delete(ck.hist_doc(mid))
                    pipe.exists(self._rt.keys.doc(mid))

            rows = await self._rt.backend.pipeline("purge_fact_history", build) if ids else []
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
        raw = await self._one("forget_by_scope", lambda pipe: pipe.hgetall(targets_key))
        for tag, value in raw.items():
            ns, agent, thread = json.loads(as_text(value))
            exact = Scope(namespace=ns, agent_id=agent, thread_id=thread)
            if not scope.contains(exact):
                continue
            ck = self._keys_of(exact)
            await self._purge_history(ck, None)
            raw_digests = await self._rt.backend.command("forget_by_scope", "HKEYS", ck.subjects)
            doomed = [*ck.all_state(), *(ck.history(as_text(d)) for d in raw_digests)]

            def build(pipe: Any, doomed: list[str] = doomed, tag: Any = tag) -> None:
                for key in doomed:
                    pipe.unlink(key)
                pipe.hdel(targets_key, tag)

            await self._rt.backend.pipeline("forget_by_scope", build)
