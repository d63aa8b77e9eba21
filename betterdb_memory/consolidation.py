"""Consolidation: fold memories into one digest (``summary``) or into current facts (``facts``).

Two modes, because they answer different questions:

* ``summary`` accumulates: many memories become one lossy digest. It does not
  resolve updates ("moved to Berlin" after "lives in Paris" may both survive).
* ``facts`` resolves updates: an extractor turns memories into ``Fact``\\ s keyed by
  subject; the newest dated statement is the current fact, the one it replaces is
  kept as history (not recalled), a tombstone retracts. Sources are kept.

Design (why it looks like this):

* **Candidates** come from each exact scope's ``created`` sorted set, paged by a
  (score, member) cursor, 1,000 ids at a time, merged oldest first across scopes;
  never a non-KNN FT.SEARCH (valkey-search 1.0 has none) and never one unbounded read.
* **State is per target scope** (the exact scope named by the selectors, where the
  output is written): a sorted set of source ids already consolidated, so a re-run
  over unchanged sources reads them, skips them, calls no model and writes nothing;
  a HASH subject -> live fact id; a per-subject history sorted set.
* **Supersession is one Lua script per page** (``_consolidation_scripts.COMMIT_FACTS``):
  it renames the old fact from ``<name>:mem:{T}:…`` to ``<name>:hist:{T}:…`` (same slot;
  outside the index prefix, so the index drops it), removes it from the scope's
  bookkeeping (``count``/``list``/eviction never see it), links the new fact and marks
  the page's sources consumed, atomically. Each op carries the id it expects to
  replace, so a stale plan cannot clobber a newer fact.
* **One run per target scope at a time**: a lock (``SET NX PX`` with a token,
  extended by a heartbeat while a model call runs, released by compare-and-delete).
  A second caller waits, bounded, then re-reads the state and finds nothing new.
  The model is called under this lock only, never under anything ``remember`` holds.
* Plans are pure functions (``plan_facts``, ``parse_instant``, ``normalise``):
  unit-tested without a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import inspect
import json
import logging
import math
import re
import time
import unicodedata
import uuid
import warnings
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Literal, overload

from . import _consolidation_scripts as _lua
from ._io import call
from .codec import as_text, to_float
from .errors import BetterDBMemoryError, ValidationError
from .keys import KeySpace, Scope
from .models import SENSITIVITY_LEVELS, MemoryItem
from .validation import check_importance, check_tags

if TYPE_CHECKING:
    from ._io import RetryPolicy

__all__ = [
    "ConsolidateFactsResult",
    "ConsolidateResult",
    "ConsolidationBusyError",
    "ConsolidationMixin",
    "ExtractFactsFn",
    "Fact",
    "FactRecord",
    "SummarizeFn",
    "normalise",
    "parse_instant",
    "plan_facts",
]

log = logging.getLogger("betterdb_memory")

PAGE_SIZE = 1000  # candidates per read, per model call and per commit
_MAX_SOURCE_IDS = 200  # ids kept in a digest's metadata (recall returns metadata with every hit)
_DEFAULT_FACT_IMPORTANCE = 0.7
_HIST_FIELDS = ("content", "metadata", "created_at", "subject", "superseded_by", "valid_until", "retracted")


# -- public values ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fact:
    """One statement about a subject, as an extractor returns it.

    Args:
        subject: what the statement is about ("user's city"); matched normalised
            (NFKC, case-folded, whitespace collapsed).
        statement: the current value ("lives in Berlin"); ignored for a tombstone.
        date: when it became true: ISO 8601 text (date, or date-time with or without
            a zone; naive means UTC) or a ``datetime``. ``None``: undated, which
            supersedes whatever is current.
        tombstone: retract the subject's current fact instead of stating one.
    """

    subject: str
    statement: str
    date: str | datetime | None = None
    tombstone: bool = False


@dataclass(frozen=True, slots=True)
class FactRecord:
    """One entry of a subject's history (``fact_history``), current or past."""

    id: str
    subject: str
    statement: str
    date: str | None
    valid_from: datetime | None
    valid_until: datetime | None
    superseded_by: str | None
    current: bool
    retracted: bool
    recorded_at: datetime
    content: str


@dataclass(frozen=True, slots=True)
class ConsolidateResult:
    """What a ``summary`` run did; ``summary_id`` is None when there was nothing to fold."""

    mode: Literal["summary"]
    candidates: int
    created: int
    deleted: int
    summary_id: str | None


@dataclass(frozen=True, slots=True)
class ConsolidateFactsResult:
    """What a ``facts`` run did.

    ``created`` counts fact memories written (a statement superseded later in the same
    run included); ``facts`` holds the ids of those still current at the end.
    ``unchanged`` counts statements that changed nothing (already current, or dated
    before the current fact). ``unmatched_tombstones`` lists the subjects of
    tombstones that found no current fact.
    """

    mode: Literal["facts"]
    candidates: int
    created: int
    superseded: int
    retracted: int
    unchanged: int
    unmatched_tombstones: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)


class ConsolidationBusyError(BetterDBMemoryError):
    """Another consolidation of the same scope held the lock too long, or this run lost it."""

    default_code = "consolidation.busy"


# The model seams: plain callables, sync or async (a sync one runs in a worker thread).
SummarizeFn = Callable[[list[MemoryItem]], str | Awaitable[str]]
ExtractFactsFn = Callable[[list[MemoryItem]], Sequence[Fact] | Awaitable[Sequence[Fact]]]


# -- pure core -------------------------------------------------------------------------


def normalise(text: str) -> str:
    """The matching form of a subject or statement: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


_YEAR_MONTH = re.compile(r"^(\d{4})(?:-(\d{2}))?$")


def parse_instant(value: object) -> datetime | None:
    """A fact date as an aware UTC instant, so dates compare as times, not as strings.

    ``"2024-01-02T00:00:00+05:00"`` sorts after ``"2024-01-01T23:00:00Z"`` as text
    but is four hours earlier. Accepts ISO 8601 dates and date-times (``Z`` or an
    offset; naive is UTC), ``YYYY-MM`` and ``YYYY`` (their first instant), and
    ``datetime`` / ``date`` objects. ``None`` or blank text means undated.

    Raises:
        ValidationError: text that is not such a date (an extractor's mistake; a
            guess could let a stale statement win).
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, str):
        raise ValidationError(
            f"fact date must be ISO 8601 text or a datetime, not {type(value).__name__}",
            code="validation.fact_date",
        )
    text = value.strip()
    if not text:
        return None
    try:
        m = _YEAR_MONTH.fullmatch(text)
        if m:
            return datetime(int(m.group(1)), int(m.group(2) or 1), 1, tzinfo=UTC)
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"fact date {value!r} is not ISO 8601", code="validation.fact_date", details={"date": value}
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _date_text(value: str | datetime | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value.strip() or None


def fact_content(subject: str, statement: str, date_text: str | None) -> str:
    """The text stored (and embedded) for a fact: subject, statement and its date."""
    body = f"{subject.strip()}: {statement.strip()}"
    return f"{body} (as of {date_text})" if date_text else body


def subject_digest(subject_key: str) -> str:
    return hashlib.blake2b(subject_key.encode(), digest_size=10).hexdigest()


@dataclass(frozen=True, slots=True)
class CurrentFact:
    """The live fact of a subject as the planner sees it (``ref``: id, or index of a planned put)."""

    ref: str | int
    statement_key: str
    instant: datetime | None


@dataclass(frozen=True, slots=True)
class FactOp:
    """One planned change: ``put`` a new fact or ``del`` (retract) the current one.

    ``expected`` is what the subject's current fact must be when the op is applied:
    a stored id, the index of an earlier op in the same plan, or None.
    """

    action: Literal["put", "del"]
    key: str
    subject: str
    expected: str | int | None
    fact: Fact | None = None
    instant: datetime | None = None

    @property
    def content(self) -> str:
        assert self.fact is not None
        return fact_content(self.fact.subject, self.fact.statement, _date_text(self.fact.date))


@dataclass(slots=True)
class FactPlan:
    ops: list[FactOp] = field(default_factory=list)
    unchanged: int = 0
    unmatched: list[str] = field(default_factory=list)


def _as_fact(value: object, index: int) -> Fact:
    if isinstance(value, Fact):
        fact = value
    elif isinstance(value, Mapping):
        fact = Fact(
            subject=value.get("subject", ""),
            statement=value.get("statement", ""),
            date=value.get("date"),
            tombstone=bool(value.get("tombstone", False)),
        )
    else:
        raise ValidationError(
            f"extract_facts returned a {type(value).__name__} at {index}; expected Fact",
            code="validation.fact",
            details={"index": index},
        )
    if not isinstance(fact.subject, str) or not normalise(fact.subject):
        raise ValidationError(
            "a fact needs a non-empty subject", code="validation.fact", details={"index": index}
        )
    if not fact.tombstone and (not isinstance(fact.statement, str) or not normalise(fact.statement)):
        raise ValidationError(
            f"fact {fact.subject!r} needs a non-empty statement",
            code="validation.fact",
            details={"index": index},
        )
    return fact


def plan_facts(facts: Iterable[object], current: Mapping[str, CurrentFact]) -> FactPlan:
    """Reconcile extracted facts against the current ones. Pure.

    Order: dated facts are applied in date order (ties keep list order), undated ones
    at their place in the list; so history reads as a timeline whatever order the
    extractor listed dated facts in. Rules, per normalised subject: a statement equal
    to the current one changes
    nothing; a dated statement older than a dated current fact loses; otherwise
    (newer, equally dated, or either side undated) it supersedes. A tombstone
    retracts the current fact unless it is dated before it; with no current fact it
    is unmatched. A statement superseded later in the same plan still gets its own
    ``put`` so history keeps it.

    Raises:
        ValidationError: a malformed fact or date (nothing is applied).
    """
    plan = FactPlan()
    state: dict[str, CurrentFact | None] = dict(current)
    checked = [_as_fact(raw, i) for i, raw in enumerate(facts)]
    instants = [parse_instant(f.date) for f in checked]
    order = list(range(len(checked)))
    dated = {i: t for i, t in enumerate(instants) if t is not None}
    for slot, i in zip(dated, sorted(dated, key=dated.__getitem__), strict=True):
        order[slot] = i
    for i in order:
        fact, instant = checked[i], instants[i]
        key = normalise(fact.subject)
        cur = state.get(key)
        if fact.tombstone:
            if cur is None:
                plan.unmatched.append(fact.subject)
            elif instant is not None and cur.instant is not None and instant < cur.instant:
                plan.unchanged += 1
            else:
                plan.ops.append(FactOp("del", key, fact.subject, cur.ref, None, instant))
                state[key] = None
            continue
        statement_key = normalise(fact.statement)
        if cur is not None and (
            statement_key == cur.statement_key
            or (instant is not None and cur.instant is not None and instant < cur.instant)
        ):
            plan.unchanged += 1
            continue
        plan.ops.append(FactOp("put", key, fact.subject, None if cur is None else cur.ref, fact, instant))
        state[key] = CurrentFact(len(plan.ops) - 1, statement_key, instant)
    return plan


def _write_groups(ops: Sequence[FactOp]) -> list[list[int]]:
    """Split a plan so that no two ``put``\\ s of one group store the same content.

    ``remember`` deduplicates content, so A, B, A for one subject would hand the
    third op the first op's id, which B has just moved to history. Cutting before
    the repeat writes the third A after B is committed, as a new document.
    """
    groups: list[list[int]] = [[]]
    seen: set[str] = set()
    for i, op in enumerate(ops):
        if op.action == "put":
            ck = normalise(op.content)
            if ck in seen:
                groups.append([])
                seen = set()
            seen.add(ck)
        groups[-1].append(i)
    return groups


def _most_sensitive(items: Sequence[MemoryItem]) -> str:
    """Output inherits its sources' highest sensitivity: fail closed for redaction filters."""
    rank = {level: i for i, level in enumerate(SENSITIVITY_LEVELS)}
    return max((i.sensitivity for i in items), key=lambda s: rank.get(s, len(rank)), default="none")


def _iso_ts(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


def _check_optional(value: object, name: str, *, lo: float, hi: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValidationError(
            f"{name} must be a finite number", code="validation.type", details={"argument": name}
        )
    if value < lo or (hi is not None and value > hi):
        bound = f"within {lo}..{hi}" if hi is not None else f">= {lo}"
        raise ValidationError(f"{name} must be {bound}", code="validation.range", details={"argument": name})
    return float(value)


async def _invoke(fn: Callable[[list[MemoryItem]], Any], items: list[MemoryItem]) -> Any:
    """Call a sync or async model seam.

    A sync one runs in a worker thread: a blocking SDK call on the event loop would
    also stall the lock's heartbeat, and so lose the lock.
    """
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        return await fn(items)
    result = await asyncio.to_thread(fn, items)
    return await result if inspect.isawaitable(result) else result


# -- keys and lock -----------------------------------------------------------------------


class ConsolidationKeys:
    """Consolidation keys of one target scope; all in the slot of its hash tag."""

    def __init__(self, keys: KeySpace, tag: str) -> None:
        base = f"{keys.name}:scope:{{{tag}}}"
        self.tag = tag
        self.lock = f"{base}:consolidate:lock"
        self.facts = f"{base}:facts"
        self.subjects = f"{base}:facts:subjects"
        self.history_base = f"{base}:facts:hist:"
        self.hist_prefix = f"{keys.name}:hist:"
        self.consumed = {"summary": f"{base}:consolidated:summary", "facts": f"{base}:consolidated:facts"}

    def history(self, digest: str) -> str:
        return f"{self.history_base}{digest}"

    def hist_doc(self, memory_id: str) -> str:
        return f"{self.hist_prefix}{{{memory_id[:20]}}}:{memory_id[21:]}"


class _Scripts:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.acquire = client.register_script(_lua.LOCK_ACQUIRE)
        self.extend = client.register_script(_lua.LOCK_EXTEND)
        self.release = client.register_script(_lua.LOCK_RELEASE)
        self.page = client.register_script(_lua.CREATED_PAGE)
        self.commit = client.register_script(_lua.COMMIT_FACTS)
        self.purge = client.register_script(_lua.PURGE_HISTORY)
        self.read = client.register_script(_lua.READ_DOCS)


class _ScopeLock:
    """A TTL-bounded lock on one target scope, kept alive by a heartbeat while held."""

    def __init__(self, scripts: _Scripts, key: str, retry: RetryPolicy, *, ttl: float, wait: float) -> None:
        self.scripts, self.key, self.retry = scripts, key, retry
        self.ttl_ms = str(max(1000, int(ttl * 1000)))
        self.ttl, self.wait = ttl, wait
        self.token = uuid.uuid4().hex
        self.lost = False
        self._beat: asyncio.Task[None] | None = None

    async def _script(self, script: Any, *args: str) -> int:
        async def run() -> Any:
            return await script(keys=[self.key], args=list(args))

        return int(await call("consolidate", run, policy=self.retry))

    async def __aenter__(self) -> _ScopeLock:
        deadline = time.monotonic() + self.wait
        delay = 0.02
        while not await self._script(self.scripts.acquire, self.token, self.ttl_ms):
            if time.monotonic() > deadline:
                raise ConsolidationBusyError(
                    f"another consolidation holds {self.key} (waited {self.wait:.0f}s)",
                    details={"lock": self.key},
                )
            await asyncio.sleep(delay)
            delay = min(0.5, delay * 2)
        self._beat = asyncio.get_running_loop().create_task(self._heartbeat())
        return self

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            try:
                if not await self._script(self.scripts.extend, self.token, self.ttl_ms):
                    self.lost = True
                    return
            except BetterDBMemoryError as exc:  # try again next beat; the TTL covers a blip
                log.warning("could not extend consolidation lock %s: %s", self.key, exc)

    def check(self) -> None:
        """Refuse to write once the lock is gone: another run may be writing the same scope."""
        if self.lost:
            raise ConsolidationBusyError(
                f"consolidation lock {self.key} expired during the run; nothing more was written",
                code="consolidation.lock_lost",
                details={"lock": self.key},
            )

    async def __aexit__(self, *exc: object) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
        try:
            await self._script(self.scripts.release, self.token)
        except BetterDBMemoryError as exc:  # the TTL frees it
            log.warning("could not release consolidation lock %s: %s", self.key, exc)


@dataclass(slots=True)
class _Stream:
    """Read position in one scope's ``created`` set: the last (score, member) fetched."""

    key: str
    after_member: str = ""
    after_score: float | None = None
    ties: set[str] = field(default_factory=set)
    buf: deque[tuple[float, str]] = field(default_factory=deque)
    done: bool = False


# -- the mixin ---------------------------------------------------------------------------


class ConsolidationMixin:
    """``consolidate``, ``fact_history`` and ``purge_fact_history``; mixed into ``MemoryStore``.

    Class attributes tune the run lock: ``consolidation_lock_ttl`` (seconds the lock
    survives a crashed holder) and ``consolidation_lock_wait`` (how long a second
    caller waits before ``ConsolidationBusyError``).
    """

    consolidation_lock_ttl: float = 30.0
    consolidation_lock_wait: float = 60.0
    consolidation_source: str = "consolidation"
    _consolidation_scripts: _Scripts | None = None

    if TYPE_CHECKING:  # provided by MemoryStore
        keys: KeySpace
        retry: RetryPolicy
        _client: Any
        _forget_script: Any

        async def matching_scopes(self, scope: Scope) -> list[Scope]: ...
        async def get_many(self, memory_ids: Sequence[str]) -> list[MemoryItem | None]: ...
        async def remember_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[str]: ...

    def _cscripts(self) -> _Scripts:
        cached = self._consolidation_scripts
        if cached is None or cached.client is not self._client:
            cached = self._consolidation_scripts = _Scripts(self._client)
        return cached

    # -- public API ------------------------------------------------------------------------

    @overload
    async def consolidate(
        self, mode: Literal["summary"], summarize: SummarizeFn | None = ..., *,
        extract_facts: ExtractFactsFn | None = ..., older_than_seconds: float | None = ...,
        max_importance: float | None = ..., delete_sources: bool = ..., summary_importance: float = ...,
        fact_importance: float | None = ..., tags: Sequence[str] | None = ..., thread_id: str | None = ...,
        agent_id: str | None = ..., namespace: str | None = ..., include_summaries: bool = ...,
    ) -> ConsolidateResult: ...  # fmt: skip
    @overload
    async def consolidate(
        self, mode: Literal["facts"], summarize: SummarizeFn | None = ..., *,
        extract_facts: ExtractFactsFn | None = ..., older_than_seconds: float | None = ...,
        max_importance: float | None = ..., delete_sources: bool = ..., summary_importance: float = ...,
        fact_importance: float | None = ..., tags: Sequence[str] | None = ..., thread_id: str | None = ...,
        agent_id: str | None = ..., namespace: str | None = ..., include_summaries: bool = ...,
    ) -> ConsolidateFactsResult: ...  # fmt: skip
    @overload
    async def consolidate(
        self, mode: str, summarize: SummarizeFn | None = ..., *,
        extract_facts: ExtractFactsFn | None = ..., older_than_seconds: float | None = ...,
        max_importance: float | None = ..., delete_sources: bool = ..., summary_importance: float = ...,
        fact_importance: float | None = ..., tags: Sequence[str] | None = ..., thread_id: str | None = ...,
        agent_id: str | None = ..., namespace: str | None = ..., include_summaries: bool = ...,
    ) -> ConsolidateResult | ConsolidateFactsResult: ...  # fmt: skip

    async def consolidate(
        self,
        mode: str,
        summarize: SummarizeFn | None = None,
        *,
        extract_facts: ExtractFactsFn | None = None,
        older_than_seconds: float | None = None,
        max_importance: float | None = None,
        delete_sources: bool = True,
        summary_importance: float = 0.7,
        fact_importance: float | None = None,
        tags: Sequence[str] | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        include_summaries: bool = False,
    ) -> ConsolidateResult | ConsolidateFactsResult:
        """Fold the memories of a scope into one digest, or into current facts.

        Candidates: memories in the scope (``None`` selectors mean "any"), with any of
        ``tags``, created more than ``older_than_seconds`` ago, of importance at most
        ``max_importance``; never facts, nor digests unless ``include_summaries``, nor
        memories an earlier run of the same mode already consolidated into this
        target. Output goes to the exact scope the selectors name.

        Args:
            mode: ``"summary"`` (one digest; ``summarize(items) -> str``) or ``"facts"``
                (``extract_facts(items) -> list[Fact]``). Either seam may be sync or
                async; it receives items oldest first, at most 1,000 per facts call.
            delete_sources: summary mode: delete the folded memories (else keep them,
                marked consumed). Facts mode always keeps its sources.
            summary_importance / fact_importance: importance of what is written.

        Returns:
            ``ConsolidateResult`` (summary) or ``ConsolidateFactsResult`` (facts).

        Raises:
            ValidationError: a bad argument (before any I/O), or a malformed model output
                (that page is not applied; earlier pages stay committed).
            ConsolidationBusyError: another run of this target scope did not finish in time.
        """
        if mode not in ("summary", "facts"):
            raise ValidationError(
                f"mode must be 'summary' or 'facts', not {mode!r}",
                code="validation.choice",
                details={"argument": "mode"},
            )
        fn: Any = summarize if mode == "summary" else extract_facts
        other = extract_facts if mode == "summary" else summarize
        needed = "summarize" if mode == "summary" else "extract_facts"
        if fn is None or not callable(fn):
            raise ValidationError(
                f"mode={mode!r} needs a callable {needed}",
                code="validation.argument",
                details={"argument": needed},
            )
        if other is not None:
            raise ValidationError(
                f"mode={mode!r} takes {needed}, not {'extract_facts' if mode == 'summary' else 'summarize'}",
                code="validation.argument",
            )
        for name, flag in (("delete_sources", delete_sources), ("include_summaries", include_summaries)):
            if not isinstance(flag, bool):
                raise ValidationError(
                    f"{name} must be a bool", code="validation.type", details={"argument": name}
                )
        sel = _Selection(
            target=Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id),
            tags=check_tags(tags),
            older_than=_check_optional(older_than_seconds, "older_than_seconds", lo=0.0, hi=None),
            max_importance=_check_optional(max_importance, "max_importance", lo=0.0, hi=1.0),
            include_summaries=include_summaries,
        )
        importance = check_importance(
            summary_importance if mode == "summary" else _DEFAULT_FACT_IMPORTANCE
            if fact_importance is None else fact_importance
        )  # fmt: skip

        # Observability is optional: the store's ``_obs`` (or ``_tracing`` / ``_metrics``).
        obs = getattr(self, "_obs", None)
        tracing = getattr(self, "_tracing", None) or obs
        metrics = getattr(self, "_metrics", None) or getattr(obs, "metrics", None)
        span_cm: Any = (
            tracing.span("consolidate", {"gen_ai.memory.mode": mode})
            if tracing is not None
            else contextlib.nullcontext()
        )
        with span_cm as span:
            result: ConsolidateResult | ConsolidateFactsResult
            if mode == "summary":
                result = await self._consolidate_summary(sel, fn, importance, delete_sources)
                counts = {
                    "created": result.created,
                    "deleted": result.deleted,
                    "superseded": 0,
                    "unmatched": 0,
                }
            else:
                result = await self._consolidate_facts(sel, fn, importance)
                counts = {
                    "created": result.created,
                    "deleted": result.retracted,
                    "superseded": result.superseded,
                    "unmatched": len(result.unmatched_tombstones),
                }
            if span is not None and hasattr(span, "set_attribute"):
                span.set_attribute("gen_ai.memory.candidates", result.candidates)
                for name, value in counts.items():
                    span.set_attribute(f"gen_ai.memory.{name}", value)
        if metrics is not None:
            metrics.observe_consolidation(mode, **counts)
        return result

    async def consolidate_facts(
        self, extract_facts: ExtractFactsFn | None = None, **options: Any
    ) -> ConsolidateFactsResult:
        """Deprecated: use ``consolidate(mode="facts", extract_facts=...)`` (same options)."""
        warnings.warn(
            'consolidate_facts() is deprecated; use consolidate(mode="facts", extract_facts=...)',
            DeprecationWarning,
            stacklevel=2,
        )
        result: ConsolidateFactsResult = await self.consolidate(
            "facts", extract_facts=extract_facts, **options
        )
        return result

    async def fact_history(
        self,
        subject: str,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> list[FactRecord]:
        """Every recorded fact of ``subject`` in the matching scopes, newest first.

        The current fact (``current=True``) and the ones it replaced or that were
        retracted, each with ``valid_until`` and ``superseded_by``. ``None`` selectors
        mean "any" (as in ``list``).
        """
        key = _subject_key(subject)
        digest = subject_digest(key)
        scopes = await self.matching_scopes(
            Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        )
        cks = [ConsolidationKeys(self.keys, s.tag) for s in scopes]

        async def heads() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for ck in cks:
                pipe.hget(ck.facts, key)
                pipe.zrange(ck.history(digest), 0, -1, desc=True, withscores=True)
            return list(await pipe.execute())

        rows = await call("fact_history", heads, policy=self.retry) if cks else []
        wanted: list[tuple[str, str | None, float]] = []  # (id, live id of its scope, order)
        for i in range(len(cks)):
            live = as_text(rows[2 * i]) or None
            wanted += [(as_text(m), live, float(s)) for m, s in rows[2 * i + 1]]

        async def docs() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for mid, _, _ in wanted:
                pipe.hmget(ConsolidationKeys(self.keys, mid[:20]).hist_doc(mid), list(_HIST_FIELDS))
                pipe.hmget(self.keys.doc(mid), list(_HIST_FIELDS))
            return list(await pipe.execute())

        found = await call("fact_history", docs, policy=self.retry) if wanted else []
        records: list[tuple[float, FactRecord]] = []
        for i, (mid, live, order) in enumerate(wanted):
            hist_vals, mem_vals = found[2 * i], found[2 * i + 1]
            is_hist = hist_vals[0] is not None
            values = hist_vals if is_hist else mem_vals
            if values[0] is None:
                continue  # forgotten, or purged meanwhile
            records.append((order, _record(mid, dict(zip(_HIST_FIELDS, values, strict=True)), mid == live)))
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
        """Delete superseded and retracted facts (current facts stay); returns how many.

        ``subject=None`` purges every subject of the matching scopes (``None``
        selectors mean "any").
        """
        only = None if subject is None else subject_digest(_subject_key(subject))
        scopes = await self.matching_scopes(
            Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        )
        deleted = 0
        for scope in scopes:
            deleted += await self._purge_scope_history(scope.tag, only)
        return deleted

    async def _wipe_consolidation_state(self, tag: str) -> int:
        """Delete every history document and consolidation key of one exact scope.

        Called by ``forget_by_scope`` / ``erase`` when a whole scope is wiped, so no
        superseded fact text survives the right to erasure. Returns history docs deleted.
        """
        deleted = await self._purge_scope_history(tag, None)
        ck = ConsolidationKeys(self.keys, tag)
        doomed = [ck.facts, ck.subjects, ck.lock, *ck.consumed.values()]

        async def run() -> Any:
            return await self._client.unlink(*doomed)

        await call("forget_by_scope", run, policy=self.retry)
        return deleted

    async def _purge_scope_history(self, tag: str, only: str | None) -> int:
        scripts = self._cscripts()
        deleted = 0
        ck = ConsolidationKeys(self.keys, tag)
        if only is not None:
            digests = [only]
        else:

            async def subjects(key: str = ck.subjects) -> Any:
                return await self._client.hkeys(key)

            digests = sorted(
                as_text(d) for d in await call("purge_fact_history", subjects, policy=self.retry)
            )
        for digest in digests:
            start = 0
            while True:
                args = [self.keys.doc_prefix, ck.hist_prefix, digest, str(start), str(PAGE_SIZE)]

                async def run(
                    args: list[str] = args, hk: str = ck.history(digest), sk: str = ck.subjects
                ) -> Any:
                    return await scripts.purge(keys=[hk, sk], args=args)

                n_deleted, scanned, kept = (
                    int(x) for x in await call("purge_fact_history", run, policy=self.retry)
                )
                deleted += n_deleted
                start += kept
                if scanned < PAGE_SIZE:
                    break
        return deleted

    # -- summary -----------------------------------------------------------------------------

    async def _consolidate_summary(
        self, sel: _Selection, summarize: SummarizeFn, importance: float, delete_sources: bool
    ) -> ConsolidateResult:
        scripts = self._cscripts()
        ck = ConsolidationKeys(self.keys, sel.target.tag)
        lock = _ScopeLock(
            scripts, ck.lock, self.retry, ttl=self.consolidation_lock_ttl, wait=self.consolidation_lock_wait
        )
        async with lock:
            items: list[MemoryItem] = []
            async for page in self._candidate_pages(sel, ck.consumed["summary"]):
                items.extend(page)
            if not items:
                return ConsolidateResult("summary", 0, 0, 0, None)
            text = await _invoke(summarize, items)
            if not isinstance(text, str) or not text.strip():
                raise ValidationError("summarize must return non-empty text", code="validation.summary")
            lock.check()
            ids = [i.id for i in items]
            metadata = {
                "source_ids": ids[:_MAX_SOURCE_IDS],
                "source_count": len(ids),
                "source_ids_truncated": len(ids) > _MAX_SOURCE_IDS,
                "date_from": _iso_ts(items[0].created_at),
                "date_to": _iso_ts(items[-1].created_at),
            }
            digest = self._output(sel, text, importance, items, kind="summary", metadata=metadata)
            (summary_id,) = await self.remember_many([digest])
            deleted = 0
            for start in range(0, len(ids), PAGE_SIZE):
                chunk = ids[start : start + PAGE_SIZE]
                if delete_sources:
                    deleted += await self._forget_ids(chunk, done=deleted)
                else:
                    await self._mark_consumed(ck.consumed["summary"], chunk)
            return ConsolidateResult("summary", len(items), 1, deleted, summary_id)

    async def _forget_ids(self, ids: Sequence[str], *, done: int) -> int:
        """Delete memories (each with its bookkeeping, via the store's FORGET script)."""

        async def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for mid in ids:
                tag = self.keys.scope_tag_of(mid)
                keys = [self.keys.doc(mid), *self.keys.scope_keys(tag)]
                await self._forget_script(keys=keys, args=[self.keys.doc_prefix, mid], client=pipe)
            return list(await pipe.execute())

        # Not retried: a replay would count deletions twice; progress is in the error.
        rows = await call("consolidate", run, policy=self.retry, idempotent=False, details={"deleted": done})
        return sum(int(r) for r in rows)

    async def _mark_consumed(self, key: str, ids: Sequence[str]) -> None:
        now = time.time()
        await call("consolidate", lambda: self._client.zadd(key, dict.fromkeys(ids, now)), policy=self.retry)

    def _output(
        self,
        sel: _Selection,
        content: str,
        importance: float,
        sources: Sequence[MemoryItem],
        *,
        kind: str,
        metadata: dict[str, Any],
        subject: str | None = None,
    ) -> dict[str, Any]:
        return {
            "content": content,
            "importance": importance,
            "tags": list(sel.tags),
            "source": self.consolidation_source,
            "thread_id": sel.target.thread_id,
            "agent_id": sel.target.agent_id,
            "namespace": sel.target.namespace,
            "sensitivity": _most_sensitive(sources),
            "metadata": metadata,
            "kind": kind,
            "subject": subject,
        }

    # -- facts ---------------------------------------------------------------------------------

    async def _consolidate_facts(
        self, sel: _Selection, extract: ExtractFactsFn, importance: float
    ) -> ConsolidateFactsResult:
        scripts = self._cscripts()
        ck = ConsolidationKeys(self.keys, sel.target.tag)
        tally = _Tally()
        lock = _ScopeLock(
            scripts, ck.lock, self.retry, ttl=self.consolidation_lock_ttl, wait=self.consolidation_lock_wait
        )
        async with lock:
            async for page in self._candidate_pages(sel, ck.consumed["facts"]):
                tally.candidates += len(page)
                extracted = await _invoke(extract, page)
                if isinstance(extracted, str | bytes) or not isinstance(extracted, Iterable):
                    raise ValidationError("extract_facts must return a list of Fact", code="validation.fact")
                facts = [_as_fact(f, i) for i, f in enumerate(extracted)]
                current = await self._current_facts(ck, {normalise(f.subject) for f in facts})
                plan = plan_facts(facts, current)
                lock.check()
                await self._apply_plan(ck, sel, plan, page, importance, tally)
        return ConsolidateFactsResult(
            "facts",
            tally.candidates,
            tally.created,
            tally.superseded,
            tally.retracted,
            tally.unchanged,
            tally.unmatched,
            list(tally.live.values()),
        )

    async def _current_facts(self, ck: ConsolidationKeys, subject_keys: set[str]) -> dict[str, CurrentFact]:
        """The stored live fact of each subject (a dangling index entry counts as none)."""
        ordered = sorted(subject_keys)
        if not ordered:
            return {}
        raw = await call("consolidate", lambda: self._client.hmget(ck.facts, ordered), policy=self.retry)
        ids = {k: as_text(v) for k, v in zip(ordered, raw, strict=True) if v is not None}
        items = await self.get_many(list(ids.values()))
        out: dict[str, CurrentFact] = {}
        for (k, mid), item in zip(ids.items(), items, strict=True):
            if item is None:
                continue
            meta = item.metadata
            stmt = meta.get("statement")
            out[k] = CurrentFact(
                mid,
                normalise(stmt) if isinstance(stmt, str) else "",
                parse_instant(meta.get("valid_from")) if isinstance(meta.get("valid_from"), str) else None,
            )
        return out

    async def _apply_plan(
        self,
        ck: ConsolidationKeys,
        sel: _Selection,
        plan: FactPlan,
        page: Sequence[MemoryItem],
        importance: float,
        tally: _Tally,
    ) -> None:
        """Write the plan's new facts, then commit each group atomically (sources last)."""
        tally.unchanged += plan.unchanged
        tally.unmatched += plan.unmatched
        ops = plan.ops
        new_ids: dict[int, str] = {}
        groups = _write_groups(ops)
        for gi, group in enumerate(groups):
            puts = [i for i in group if ops[i].action == "put"]
            if puts:
                written = await self.remember_many(
                    [self._fact_item(sel, ops[i], importance, page) for i in puts]
                )
                new_ids.update(zip(puts, written, strict=True))
            consumed = [m.id for m in page] if gi == len(groups) - 1 else []
            statuses = await self._commit(ck, [(ops[i], i) for i in group], new_ids, consumed)
            for i, status in zip(group, statuses, strict=True):
                op = ops[i]
                if status in ("created", "superseded"):
                    tally.created += 1
                    tally.superseded += int(status == "superseded")
                    tally.live[op.key] = new_ids[i]
                elif status == "retracted":
                    tally.retracted += 1
                    tally.live.pop(op.key, None)
                elif status == "same":
                    tally.unchanged += 1
                elif status == "gone":
                    tally.unmatched.append(op.subject)
                else:
                    log.warning("consolidate: fact %r not applied (%s)", op.subject, status)

    def _fact_item(
        self, sel: _Selection, op: FactOp, importance: float, page: Sequence[MemoryItem]
    ) -> dict[str, Any]:
        assert op.fact is not None
        metadata = {
            "statement": op.fact.statement.strip(),
            "date": _date_text(op.fact.date),
            "valid_from": op.instant.isoformat() if op.instant is not None else None,
            "subject_key": op.key,
        }
        return self._output(
            sel, op.content, importance, page, kind="fact", metadata=metadata, subject=op.fact.subject.strip()
        )

    async def _commit(
        self,
        ck: ConsolidationKeys,
        ops: Sequence[tuple[FactOp, int]],
        new_ids: Mapping[int, str],
        consumed: Sequence[str],
    ) -> list[str]:
        created, keep, expiry, dedup, _access = self.keys.scope_keys(ck.tag)
        now = time.time()
        args: list[str] = [
            self.keys.doc_prefix, ck.hist_prefix, ck.history_base, repr(now),
            datetime.fromtimestamp(now, tz=UTC).isoformat(), str(len(ops)), str(len(consumed)),
        ]  # fmt: skip
        for op, i in ops:
            expected = op.expected
            exp = new_ids.get(expected, "") if isinstance(expected, int) else (expected or "")
            # The replaced fact stops being valid when its successor (or tombstone) says so;
            # undated, the script uses the commit time.
            until = op.instant.isoformat() if op.instant is not None else ""
            args += [op.action, op.key, subject_digest(op.key), exp, new_ids.get(i, ""), until]
        args += list(consumed)
        keys = [ck.facts, ck.subjects, created, keep, expiry, dedup, ck.consumed["facts"]]
        script = self._cscripts().commit

        async def run() -> Any:
            return await script(keys=keys, args=args)

        # Replay-safe script (see COMMIT_FACTS), so retried like an idempotent write.
        return [as_text(s) for s in await call("consolidate", run, policy=self.retry)]

    # -- candidates ------------------------------------------------------------------------------

    async def _candidate_pages(self, sel: _Selection, consumed_key: str) -> AsyncIterator[list[MemoryItem]]:
        """Candidates oldest first across the matching scopes, in lists of at most ``PAGE_SIZE``."""
        cutoff = None if sel.older_than is None else time.time() - sel.older_than
        buffer: list[MemoryItem] = []
        async for ids in self._created_ids(await self.matching_scopes(sel.filter), cutoff):
            fresh = await self._unconsumed(consumed_key, ids)
            for item in await self._load(fresh) if fresh else []:
                if item is not None and sel.accepts(item):
                    buffer.append(item)
            while len(buffer) >= PAGE_SIZE:
                yield buffer[:PAGE_SIZE]
                buffer = buffer[PAGE_SIZE:]
        if buffer:
            yield buffer

    async def _load(self, ids: Sequence[str]) -> list[MemoryItem | None]:
        """``get_many`` through ``READ_DOCS``: one script call per scope (slot), pipelined."""
        from .models import item_from_fields
        from .query import RETURN_FIELDS

        by_tag: dict[str, list[str]] = {}
        for mid in ids:
            by_tag.setdefault(mid[:20], []).append(mid)
        script = self._cscripts().read

        async def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for group in by_tag.values():
                await script(keys=[self.keys.doc(m) for m in group], args=list(RETURN_FIELDS), client=pipe)
            return list(await pipe.execute())

        found: dict[str, MemoryItem | None] = {}
        for group, rows in zip(
            by_tag.values(), await call("consolidate", run, policy=self.retry), strict=True
        ):
            for mid, raw in zip(group, rows, strict=True):
                found[mid] = item_from_fields(mid, json.loads(raw)) if raw else None
        return [found[mid] for mid in ids]

    async def _unconsumed(self, key: str, ids: Sequence[str]) -> list[str]:
        scores = await call("consolidate", lambda: self._client.zmscore(key, list(ids)), policy=self.retry)
        return [mid for mid, s in zip(ids, scores, strict=True) if s is None]

    async def _created_ids(self, scopes: Sequence[Scope], cutoff: float | None) -> AsyncIterator[list[str]]:
        """Ids from the scopes' ``created`` sets, merged oldest first, ``PAGE_SIZE`` at a time."""
        streams = [_Stream(self.keys.scope_created(s.tag)) for s in scopes]
        per = max(50, PAGE_SIZE // max(1, len(streams)))
        await self._fill(streams, cutoff, per)
        heap = [(st.buf[0][0], st.buf[0][1], n) for n, st in enumerate(streams) if st.buf]
        heapq.heapify(heap)
        out: list[str] = []
        while heap:
            _, mid, n = heapq.heappop(heap)
            st = streams[n]
            st.buf.popleft()
            out.append(mid)
            if not st.buf and not st.done:
                await self._fill([st], cutoff, per)
            if st.buf:
                heapq.heappush(heap, (st.buf[0][0], st.buf[0][1], n))
            if len(out) == PAGE_SIZE:
                yield out
                out = []
        if out:
            yield out

    async def _fill(self, streams: Sequence[_Stream], cutoff: float | None, count: int) -> None:
        hi = "+inf" if cutoff is None else f"({cutoff!r}"
        script = self._cscripts().page
        todo = [st for st in streams if not st.done]

        async def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for st in todo:
                lo = "-inf" if st.after_score is None else repr(st.after_score)
                extra = str(len(st.ties))  # the fallback path re-reads the ties it has seen
                await script(keys=[st.key], args=[hi, st.after_member, lo, str(count), extra], client=pipe)
            return list(await pipe.execute())

        replies = await call("consolidate", run, policy=self.retry) if todo else []
        for st, reply in zip(todo, replies, strict=True):
            exact = int(reply[0]) == 1
            rows = reply[1:]
            asked = count if exact else count + len(st.ties)
            fetched = 0
            for j in range(0, len(rows), 2):
                mid, score = as_text(rows[j]), to_float(rows[j + 1])
                fetched += 1
                if cutoff is not None and score >= cutoff:
                    st.done = True
                    break
                if not exact and score == st.after_score and mid in st.ties:
                    continue
                if score != st.after_score:
                    st.ties = set()
                st.ties.add(mid)
                st.after_score, st.after_member = score, mid
                st.buf.append((score, mid))
            if fetched < asked:
                st.done = True


@dataclass(frozen=True, slots=True)
class _Selection:
    """Validated candidate selectors and the exact scope output is written to."""

    target: Scope
    tags: tuple[str, ...]
    older_than: float | None
    max_importance: float | None
    include_summaries: bool

    @property
    def filter(self) -> Scope:
        return self.target  # a selector scope read as a filter: None means "any"

    def accepts(self, item: MemoryItem) -> bool:
        if item.kind == "fact" or (item.kind == "summary" and not self.include_summaries):
            return False
        if self.tags and not set(self.tags) & set(item.tags):
            return False
        return self.max_importance is None or item.importance <= self.max_importance


@dataclass(slots=True)
class _Tally:
    candidates: int = 0
    created: int = 0
    superseded: int = 0
    retracted: int = 0
    unchanged: int = 0
    unmatched: list[str] = field(default_factory=list)
    live: dict[str, str] = field(default_factory=dict)


def _subject_key(subject: object) -> str:
    if not isinstance(subject, str) or not normalise(subject):
        raise ValidationError("subject must be a non-empty string", code="validation.argument")
    return normalise(subject)


def _record(mid: str, fields: Mapping[str, Any], current: bool) -> FactRecord:
    try:
        meta = json.loads(as_text(fields.get("metadata")) or "{}")
    except json.JSONDecodeError:
        meta = {}
    if not isinstance(meta, dict):
        meta = {}
    until = as_text(fields.get("valid_until"))
    by = as_text(fields.get("superseded_by"))
    valid_from = meta.get("valid_from")
    return FactRecord(
        id=mid,
        subject=as_text(fields.get("subject")),
        statement=str(meta.get("statement", "")),
        date=meta.get("date") if isinstance(meta.get("date"), str) else None,
        valid_from=parse_instant(valid_from) if isinstance(valid_from, str) else None,
        valid_until=parse_instant(until) if until else None,
        superseded_by=by or None,
        current=current,
        retracted=as_text(fields.get("retracted")) == "1",
        recorded_at=datetime.fromtimestamp(to_float(fields.get("created_at")), tz=UTC),
        content=as_text(fields.get("content")),
    )
