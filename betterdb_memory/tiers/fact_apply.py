"""Applying a page's fact plan: in the plan's order, and what is current as the subjects decide.

``core.facts.plan_facts`` decides, without I/O, what a page's facts do to the target's
current facts. The plan sees one current fact per subject; the subjects
(``tiers.subjects``) see the whole timeline, where a retracted fact still covers the
instants it was valid at. So the plan's ops are applied here in the plan's order (a
tombstone before a later statement of its subject), and the current facts the next
page plans against, and the run reports, are read back from the subjects' pointers:
what ``SUBJECT_PUT`` decided.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from ..backend import scripts
from ..backend.commands import Step
from ..core.codec import as_text
from ..core.consolidation import Selection, Tally, output_item
from ..core.facts import CurrentFact, FactOp, FactPlan, date_text_of, normalise
from ..core.keys import ConsolidationKeys
from ..core.models import MemoryItem
from ..core.subjects import normalise_subject, subject_key_of
from ..core.times import to_ms
from ..errors import ValidationError
from .long_term import LongTermMemory
from .runtime import Runtime

__all__ = ["Known", "PlanApply", "ms_of"]


class Known(NamedTuple):
    """What ``current_facts`` learned beside the plan's input: legacy ids, and each current fact's start (ms)."""

    legacy: set[str]
    starts: dict[str, int]


class Ledger(Protocol):
    """What a plan's application needs of ``FactLedger``: the legacy facts' retirement and history."""

    async def retire(
        self,
        ck: ConsolidationKeys,
        ids: Sequence[str],
        *,
        by: str | None,
        retracted: bool,
        subjects: Mapping[str, str],
        until: int | None = None,
    ) -> int: ...

    async def link_history(self, ck: ConsolidationKeys, subject_key: str, fact_id: str) -> None: ...


class PlanApply:
    """Applies fact plans to a store (``FactLedger.apply_plan``)."""

    def __init__(self, rt: Runtime, long_term: LongTermMemory, ledger: Ledger) -> None:
        self._rt = rt
        self._long_term = long_term
        self._ledger = ledger

    async def run(
        self,
        ck: ConsolidationKeys,
        sel: Selection,
        plan: FactPlan,
        page: Sequence[MemoryItem],
        importance: float,
        current: dict[str, CurrentFact],
        tally: Tally,
        known: Known,
    ) -> dict[str, CurrentFact]:
        """Apply the plan's ops in its order; returns the target's current facts after them.

        In order because the extractor's order means something: a tombstone listed
        before a statement of its subject retracts the fact current before that
        statement, so it is applied first (consecutive statements go in one write).
        New facts go through the subject write path (``tiers.subjects``), which retires
        the version each replaces; a legacy current fact (no pointer names it) is
        retired here. A fact's ``valid_from`` is its date (undated: the latest
        ``valid_from`` of the page it was extracted from), raised to the start of the
        version the plan says it supersedes (an undated statement supersedes a dated
        one). A tombstone takes the current fact off its subject and retires it with
        ``retracted`` set, ending at its date (undated: the page's), never before the
        fact began; ended at its start, the fact is valid at no instant (``void``).

        What is current afterwards is what the subjects decided (their pointers, read
        back), not what the plan assumed: after a retraction, a statement dated before
        the retracted fact began is a past version (docs/concepts/time.md). On an index
        without ``subject_key`` (made by betterdb-agent-memory, not rebuilt yet) every
        fact is a legacy one: written without a subject key, retired here, its history
        in the ledger's list, and the plan decides.
        """
        tally.unchanged += plan.unchanged
        tally.unmatched += plan.unmatched
        # An undated fact is as old as what it was read from: the latest of the page's memories.
        page_ms = max((m.valid_from or m.created_at for m in page), default=int(time.time() * 1000))
        starts: dict[str | int, int] = {k: v for k, v in known.starts.items()}
        run = _Run(plan.ops, starts, {}, set(known.legacy), dict(current))
        for i, op in enumerate(run.ops):
            if op.action == "put":
                prior = run.starts.get(op.expected) if op.expected is not None else None
                own = ms_of(op.instant) or page_ms
                run.starts[i] = own if prior is None else max(own, prior)
        batch: list[int] = []
        for i, op in enumerate(run.ops):
            if op.action == "put":
                batch.append(i)
                continue
            await self._put(ck, sel, run, batch, importance, page, tally)
            batch = []
            await self._retract(ck, run, op, page_ms, tally)
        await self._put(ck, sel, run, batch, importance, page, tally)
        if self._rt.index.layout.subject_key:
            await self._as_decided(ck, run, current)
        return run.state

    async def _put(
        self,
        ck: ConsolidationKeys,
        sel: Selection,
        run: _Run,
        batch: Sequence[int],
        importance: float,
        page: Sequence[MemoryItem],
        tally: Tally,
    ) -> None:
        """Write the ``batch`` of puts in one write; retire the legacy facts they replace."""
        if not batch:
            return
        ops, subjects_on = run.ops, self._rt.index.layout.subject_key
        written, _, _ = await self._long_term.write(
            [self._fact_item(sel, ops[i], importance, page, run.starts[i]) for i in batch],
            capped=False,
            dedup=False,
            subjects=subjects_on,
            corrections=[n for n, i in enumerate(batch) if ops[i].correction],
        )
        run.new_ids.update(zip(batch, written, strict=True))
        tally.created += written
        if not subjects_on:
            run.legacy.update(written)
            for i in batch:
                await self._ledger.link_history(ck, ops[i].key, run.new_ids[i])
        for i in batch:
            op = ops[i]
            old = run.id_of(op.expected)
            if old is not None:
                if old in run.legacy:
                    await self._ledger.retire(
                        ck, [old], by=run.new_ids[i], retracted=False, subjects={old: op.subject}, until=run.starts[i]
                    )  # fmt: skip
                tally.superseded += 1
            assert op.fact is not None
            run.state[op.key] = CurrentFact(run.new_ids[i], normalise(op.fact.statement), op.instant)

    async def _retract(
        self, ck: ConsolidationKeys, run: _Run, op: FactOp, page_ms: int, tally: Tally
    ) -> None:
        """A tombstone: the current fact off its subject and retired, ``retracted`` set."""
        old, begun = run.id_of(op.expected), run.starts.get(op.expected) if op.expected is not None else None
        until = max(ms_of(op.instant) or page_ms, begun or 0)
        run.state.pop(op.key, None)
        if old is None:
            return
        if old in run.legacy:
            await self._ledger.retire(
                ck, [old], by=None, retracted=True, subjects={old: op.subject}, until=until
            )
        else:
            await self._retract_version(ck, old, op.subject, until=until, void=until == begun)
        tally.retracted += 1

    async def _retract_version(
        self, ck: ConsolidationKeys, old: str, subject: str, *, until: int, void: bool
    ) -> None:
        """A subject's version retracted: to history first, then off its subject (still listed).

        In this order, a writer that dies between the two leaves the version in history
        and the pointer still naming it, which the journal's next reader finishes
        (``core.subject_repair``): the retraction is what readers see either way. Ended
        where it began, the version is valid at no instant: void in the pointer, as
        ``SUBJECT_PUT`` marks a tie's loser, so it keeps no older-dated write from being
        current (docs/concepts/time.md).
        """
        keys, repair = self._rt.keys, self._long_term.subjects.repair
        digest = subject_key_of(ck.tag, "fact", normalise_subject(subject))
        pointer, versions = keys.subject(digest), keys.subject_versions(digest)
        retire = scripts.RETIRE.call(
            [keys.doc(old), ck.hist_doc(old), keys.access(old)], [str(until), "", "1"]
        )
        moved = int(
            (
                await self._rt.backend.pipeline(
                    "consolidate",
                    [scripts.mark_history(keys.meta, until), *repair.entered(digest, old), retire],
                )
            )[-1]
        )
        if moved:
            self._rt.metrics.add_items(-1)
        off: list[Step] = [scripts.SUBJECT_DROP.call([pointer, versions], [old, "1"])]
        if moved and void:
            off.append(("HSETNX", pointer, f"void:{old}", "1"))
        await self._rt.backend.pipeline("consolidate", off)
        repair.settled_one(digest, old)

    async def _as_decided(self, ck: ConsolidationKeys, run: _Run, before: Mapping[str, CurrentFact]) -> None:
        """The current fact of each subject the run wrote: its pointer's, as ``SUBJECT_PUT`` decided (one round trip)."""
        subjects = {op.key: op.subject for op in run.ops if op.action == "put"}
        if not subjects:
            return
        digests = [subject_key_of(ck.tag, "fact", normalise_subject(s)) for s in subjects.values()]
        got = await self._rt.backend.pipeline(
            "consolidate", [("HGET", self._rt.keys.subject(d), "current") for d in digests]
        )
        for key, raw in zip(subjects, got, strict=True):
            pointer = as_text(raw) or None
            known = [c for c in (before.get(key), run.state.get(key)) if c is not None]
            known += [
                CurrentFact(run.new_ids[i], normalise(op.fact.statement), op.instant)
                for i, op in enumerate(run.ops)
                if op.key == key and op.fact is not None and i in run.new_ids
            ]
            match = [c for c in known if c.ref == pointer]
            if pointer is None:
                run.state.pop(key, None)
            else:  # a fact this run did not know of (another writer's): its statement unknown
                run.state[key] = match[0] if match else CurrentFact(pointer, "", None)

    def _fact_item(
        self, sel: Selection, op: FactOp, importance: float, page: Sequence[MemoryItem], valid_from: int
    ) -> dict[str, Any]:
        assert op.fact is not None
        date_text = date_text_of(op.fact.date)
        item = output_item(
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
        item["valid_from"] = valid_from
        return item


class _Run(NamedTuple):
    """One plan's application: its ops, starts (ms) by id or put index, written ids, legacy ids, state."""

    ops: list[FactOp]
    starts: dict[str | int, int]
    new_ids: dict[int, str]
    legacy: set[str]
    state: dict[str, CurrentFact]

    def id_of(self, ref: str | int | None) -> str | None:
        """The stored id an op's ``expected`` names (a put of this plan: its written id)."""
        return self.new_ids.get(ref) if isinstance(ref, int) else ref


def ms_of(instant: datetime | None) -> int | None:
    """A fact's date as epoch ms for its ``valid_from`` (None: undated, or outside the years 1900-9999)."""
    if instant is None:
        return None
    try:
        return to_ms(instant)
    except ValidationError:
        return None
