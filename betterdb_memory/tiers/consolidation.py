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
import dataclasses
import inspect
import json
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from ..backend import ScopedLock
from ..backend.commands import Command
from ..core.consolidation import Selection, Tally, output_item
from ..core.facts import (
    ConsolidateFactsResult,
    ConsolidateResult,
    ExtractFactsFn,
    SummarizeFn,
    check_optional,
    iso_ts,
    plan_facts,
)
from ..core.keys import ConsolidationKeys, Scope
from ..core.models import MemoryItem
from ..core.query import ITEM_FIELDS, MemoryFilter
from ..core.validation import check_importance, check_tags
from ..errors import ValidationError
from .documents import Documents
from .fact_ledger import FactLedger
from .long_term import LongTermMemory
from .runtime import Runtime
from .scopes import ScopeReader

__all__ = ["PAGE_SIZE", "Consolidation"]

log = logging.getLogger(__name__)

PAGE_SIZE = 1000  # candidates per model call in facts mode
_MAX_SOURCE_IDS = 200  # ids kept in a digest's metadata (recall returns metadata with every hit)
_DEFAULT_SUMMARY_IMPORTANCE = 0.7


async def _invoke(fn: Callable[[list[MemoryItem]], Any], items: list[MemoryItem]) -> Any:
    """Call a sync or async model seam.

    A sync one runs in a worker thread: a blocking SDK call on the event loop would
    also stall the lock's heartbeat, and so lose the lock.
    """
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        return await fn(items)
    result = await asyncio.to_thread(fn, items)
    return await result if inspect.isawaitable(result) else result


# -- the part ---------------------------------------------------------------------------


class Consolidation:
    """``consolidate`` (both modes), and the per-target state that makes re-runs free.

    Attributes tune the run lock: ``lock_ttl`` (seconds the lock survives a crashed
    holder) and ``lock_wait`` (how long a second caller waits before
    ``ConsolidationBusyError``).
    """

    def __init__(
        self, rt: Runtime, scopes: ScopeReader, long_term: LongTermMemory, docs: Documents, ledger: FactLedger
    ) -> None:
        self._rt = rt
        self._scopes = scopes
        self._long_term = long_term
        self._docs = docs
        self._ledger = ledger
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
        where: Mapping[str, Any] | None = None,
    ) -> Any:
        """Fold a selection of memories into one digest, or into current facts.

        Candidates: memories matching the scope selectors (``None`` means "any"),
        carrying ALL of ``tags``, created more than ``older_than_seconds`` ago, of
        importance at most ``max_importance``; never facts, never digests in summary
        mode unless ``include_summaries``, never sources an earlier run of the same
        mode already consolidated into this target; matching ``where`` (``list``'s filter
        language; a non-empty one is a selector). At least one selector is required.
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
        sel = Selection(
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
        node = self._rt.parse_where(where)
        if (
            sel.target.is_empty
            and not sel.tags
            and sel.older_than is None
            and sel.max_importance is None
            and node is None
        ):
            raise ValidationError(
                "consolidate needs a scope, tags, older_than_seconds, max_importance or where to select "
                "memories; refusing to fold everything",
                code="validation.empty_scope",
            )
        await self._rt.index.ensure_ready()
        if node is not None:
            compiled = self._rt.with_where(MemoryFilter(), node, operation="consolidate", filter_only=True)
            sel = dataclasses.replace(sel, where=compiled.where)
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

    async def _one(self, operation: str, command: Command) -> Any:
        """The reply of one ``command`` (retried: every use here is idempotent)."""
        return (await self._rt.backend.pipeline(operation, [command]))[0]

    def _keys_of(self, scope: Scope) -> ConsolidationKeys:
        return ConsolidationKeys(self._rt.keys, scope)

    def _scope_lock(self, ck: ConsolidationKeys) -> ScopedLock:
        return self._rt.backend.lock(ck.lock, ttl=self.lock_ttl, wait=self.lock_wait)

    async def _register_target(self, ck: ConsolidationKeys) -> None:
        s = ck.scope
        value = json.dumps([s.namespace, s.agent_id, s.thread_id], ensure_ascii=False)
        await self._one("consolidate", ("HSET", ck.targets, ck.tag, value))

    async def _candidates(self, sel: Selection, ck: ConsolidationKeys, mode: str) -> list[MemoryItem]:
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
        scores = await self._one("consolidate", ("ZMSCORE", ck.consumed[mode], *ids))
        return [i for i, score in zip(items, scores, strict=True) if score is None]

    async def _mark_consumed(self, key: str, ids: Sequence[str]) -> None:
        if ids:
            now = time.time()
            await self._one(
                "consolidate", ("ZADD", key, *(x for mid in dict.fromkeys(ids) for x in (now, mid)))
            )

    # -- summary -----------------------------------------------------------------------------

    async def _consolidate_summary(
        self, sel: Selection, summarize: SummarizeFn, importance: float, delete_sources: bool
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
            digest = output_item(
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

    async def _consolidate_facts(
        self, sel: Selection, extract: ExtractFactsFn, importance: float
    ) -> ConsolidateFactsResult:
        ck = self._keys_of(sel.target)
        await self._register_target(ck)
        tally = Tally()
        async with self._scope_lock(ck) as lock:
            items = await self._candidates(sel, ck, "facts")
            current, _, duplicates, known = await self._ledger.current_facts(sel)
            if duplicates:
                tally.duplicates += await self._ledger.retire(
                    ck, duplicates, by=None, retracted=False, subjects={}
                )
            for start in range(0, len(items), PAGE_SIZE):
                page = items[start : start + PAGE_SIZE]
                tally.candidates += len(page)
                extracted = await _invoke(extract, page)
                if isinstance(extracted, str | bytes) or not isinstance(extracted, Iterable):
                    raise ValidationError("extract_facts must return a list of Fact", code="validation.fact")
                plan = plan_facts(extracted, current)
                lock.check()
                current = await self._ledger.apply_plan(
                    ck, sel, plan, page, importance, current, tally, known
                )
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
