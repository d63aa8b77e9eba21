"""Consolidation's pure core: facts, their reconciliation plan, and the results' shapes.

Fact mode reconciles statements by subject: the newest dated statement is the current
fact, the one it replaces goes to the history, a tombstone retracts. ``plan_facts``
decides all of that from the extracted facts and the current ones, without I/O;
``tiers.consolidation`` reads and writes what the plan says. Unit-tested without a
server.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal

from ..errors import ValidationError
from .arguments import check_number
from .codec import as_text, normalise, to_float
from .models import SENSITIVITY_LEVELS, MemoryItem
from .times import to_ms

__all__ = [
    "ConsolidateFactsResult",
    "ConsolidateResult",
    "CurrentFact",
    "ExtractFactsFn",
    "Fact",
    "FactOp",
    "FactPlan",
    "FactRecord",
    "SummarizeFn",
    "check_optional",
    "date_text_of",
    "fact_content",
    "fact_record",
    "fact_statement",
    "iso_ts",
    "most_sensitive",
    "normalise",
    "parse_instant",
    "plan_facts",
    "subject_digest",
    "subject_key",
]


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

    def as_json(self) -> dict[str, Any]:
        """Its fields for JSON (the CLI's ``history``, the MCP ``fact_history`` tool): times in
        epoch milliseconds, the unit of every stored time here."""
        out: dict[str, Any] = {f: getattr(self, f) for f in self.__dataclass_fields__}
        for name in ("valid_from", "valid_until", "recorded_at"):
            out[name] = None if out[name] is None else to_ms(out[name], name=name)
        return out


@dataclass(frozen=True, slots=True)
class ConsolidateResult:
    """What a ``summary`` run did (the reference's fields first).

    ``consolidated``: source memories folded; ``created``: the id of the digest (empty
    when there was nothing to fold); ``deleted``: sources deleted.
    """

    consolidated: int
    created: list[str]
    deleted: int
    mode: Literal["summary"] = "summary"

    @property
    def candidates(self) -> int:
        return self.consolidated

    @property
    def summary_id(self) -> str | None:
        return self.created[0] if self.created else None


@dataclass(frozen=True, slots=True)
class ConsolidateFactsResult:
    """What a ``facts`` run did (the reference's fields first).

    ``candidates``: source memories examined; ``facts``: current facts of the target
    scope after the run; ``created``: ids of the fact memories written; ``deleted``:
    prior fact memories superseded or retracted (moved to history, out of the index)
    or duplicate; ``unmatched_tombstones``: subjects a tombstone named that had no
    current fact. Extras: ``superseded``, ``retracted``, ``unchanged`` (statements that
    changed nothing) and ``fact_ids`` (the current facts' ids).
    """

    candidates: int
    facts: int
    created: list[str]
    deleted: int
    unmatched_tombstones: list[str] = field(default_factory=list)
    superseded: int = 0
    retracted: int = 0
    unchanged: int = 0
    fact_ids: list[str] = field(default_factory=list)
    mode: Literal["facts"] = "facts"


# The model seams: plain callables, sync or async (a sync one runs in a worker thread).
SummarizeFn = Callable[[list[MemoryItem]], str | Awaitable[str]]
ExtractFactsFn = Callable[[list[MemoryItem]], Sequence[Fact] | Awaitable[Sequence[Fact]]]


# -- pure core -------------------------------------------------------------------------


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


def date_text_of(value: str | datetime | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat()
    return value.strip() or None


def fact_content(statement: str, date_text: str | None) -> str:
    """The text stored (and embedded) for a fact: ``[date] statement`` (the reference's form)."""
    body = statement.strip()
    return f"[{date_text}] {body}" if date_text else body


def fact_statement(content: str, date_text: str | None) -> str:
    """Inverse of ``fact_content``: the statement of a stored fact (its date from the ``date`` field)."""
    prefix = f"[{date_text}] " if date_text else ""
    return content[len(prefix) :] if prefix and content.startswith(prefix) else content


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
    a stored id, the index of an earlier op in the same plan, or None. ``correction``:
    a put that follows a tombstone of its subject in the same plan ("I no longer live
    in Paris; I have lived in Berlin since 2022"): the extractor says it is the
    subject's current fact from its date, whatever the versions before claimed.
    """

    action: Literal["put", "del"]
    key: str
    subject: str
    expected: str | int | None
    fact: Fact | None = None
    instant: datetime | None = None
    correction: bool = False

    @property
    def content(self) -> str:
        assert self.fact is not None
        return fact_content(self.fact.statement, date_text_of(self.fact.date))


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
    ``put`` so history keeps it. The first statement after a tombstone of its subject
    (matched or not) is a ``correction``: the page says the old fact is over and this
    one holds, so it is current from its date even when that is before what it
    replaces began (docs/concepts/time.md, "A retraction with its replacement").

    Raises:
        ValidationError: a malformed fact or date (nothing is applied).
    """
    plan = FactPlan()
    state: dict[str, CurrentFact | None] = dict(current)
    tombstoned: set[str] = set()
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
            tombstoned.add(key)
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
        correction = cur is None and key in tombstoned
        plan.ops.append(
            FactOp("put", key, fact.subject, None if cur is None else cur.ref, fact, instant, correction)
        )
        state[key] = CurrentFact(len(plan.ops) - 1, statement_key, instant)
    return plan


def most_sensitive(items: Sequence[MemoryItem]) -> str:
    """Output inherits its sources' highest sensitivity: fail closed for redaction filters."""
    rank: dict[str, int] = {level: i for i, level in enumerate(SENSITIVITY_LEVELS)}
    return max((i.sensitivity for i in items), key=lambda s: rank.get(s, len(rank)), default="none")


def iso_ts(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


def check_optional(value: object, name: str, *, lo: float, hi: float | None) -> float | None:
    return None if value is None else check_number(value, name, minimum=lo, maximum=hi)


def subject_key(subject: object) -> str:
    if not isinstance(subject, str) or not normalise(subject):
        raise ValidationError("subject must be a non-empty string", code="validation.argument")
    return normalise(subject)


def _instant_of(text: str) -> datetime | None:
    """A stored time: epoch ms (what this library writes) or ISO text (legacy fact history)."""
    if not text:
        return None
    if text.lstrip("-").isdigit():
        return datetime.fromtimestamp(int(text) / 1000.0, tz=UTC)
    try:
        return parse_instant(text)
    except ValidationError:
        return None


def fact_record(mid: str, fields: Mapping[str, Any], current: bool) -> FactRecord:
    """One ``fact_history`` entry from a version's stored fields (``current``: it is the live one).

    ``valid_from``: the fact's ``date`` when it has one, else the stored ``valid_from``
    (ms; a memory written with ``subject=``); ``valid_until``: ms or, in history a
    previous version wrote, ISO text.
    """
    date_text = as_text(fields.get("date")) or None
    content = as_text(fields.get("content"))
    until = as_text(fields.get("valid_until"))
    by = as_text(fields.get("superseded_by"))
    try:
        valid_from = parse_instant(date_text)
    except ValidationError:
        valid_from = None
    if valid_from is None:
        valid_from = _instant_of(as_text(fields.get("valid_from")))
    return FactRecord(
        id=mid,
        subject=as_text(fields.get("subject")),
        statement=fact_statement(content, date_text),
        date=date_text,
        valid_from=valid_from,
        valid_until=None if current else _instant_of(until),
        superseded_by=by or None,
        current=current,
        retracted=as_text(fields.get("retracted")) == "1",
        recorded_at=datetime.fromtimestamp(to_float(fields.get("created_at")) / 1000.0, tz=UTC),
        content=content,
    )
