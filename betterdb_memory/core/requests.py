"""What a call asks the long-term tier for, checked once at the API boundary. Pure; no I/O.

A write and a recall each become one frozen value before anything is embedded or sent,
whatever form the caller used::

    remember(content, importance=..., ...)    ─┐
    remember_many(["text", {MemoryInput}])    ─┴─ new_memory() ─▶ NewMemory ─▶ record.encode_record() ─▶ HSET
    recall(query, k=..., tags=..., ...)       ─┐
    recall_by_vector(vector, k=..., ...)      ─┴─ recall_request() ─▶ RecallRequest ─▶ one KNN query

Every argument is checked here (``ValidationError`` naming the argument; for
``remember_many`` also the item's index), so a bad call writes or reads nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from typing import Any, Required, TypedDict

from ..errors import ValidationError
from .codec import validate_vector
from .escaping import validate_tag_value
from .filters import Node
from .keys import Scope, validate_memory_id
from .models import MemoryKind, Sensitivity
from .query import MemoryFilter, with_times
from .record import NewMemory, new_memory_of
from .scoring import Weights
from .subjects import normalise_subject, subject_key_of
from .time_recall import TimePlan, time_plan
from .times import optional_ms
from .timewindow import resolve_tz
from .validation import (
    check_content,
    check_distance_threshold,
    check_importance,
    check_k,
    check_kind,
    check_metadata,
    check_sensitivities,
    check_sensitivity,
    check_tags,
    check_ttl,
)

__all__ = [
    "DEFAULT_K",
    "MemoryInput",
    "RecallRequest",
    "TimeInput",
    "new_memories",
    "new_memory",
    "recall_request",
]

#: A point in time as an argument (``valid_from``): an aware or naive ``datetime`` (naive is
#: UTC), a ``date``, epoch milliseconds, or ISO 8601 text (``core.times.to_ms``).
TimeInput = datetime | date | int | str

#: The reference's default number of hits.
DEFAULT_K = 8


class MemoryInput(TypedDict, total=False):
    """One ``remember_many`` item in its mapping form: ``remember``'s keyword arguments and ``content``.

    For type checkers (``store.remember_many([{"content": "...", "thread_id": "t"}])`` is
    checked key by key); at run time any mapping is accepted and checked the same way,
    an unknown key being a ``ValidationError``. ``kind`` and ``date`` are what
    consolidation writes (a fact's kind and date); leave them out otherwise.
    ``valid_from``: when what it says became true (``remember(valid_from=)``);
    ``subject``: what it states (``remember(subject=)``: the newest version is current).
    """

    content: Required[str]
    importance: float | None
    tags: Sequence[str] | None
    source: str | None
    ttl: float | None
    thread_id: str | None
    agent_id: str | None
    namespace: str | None
    sensitivity: Sensitivity | None
    metadata: Mapping[str, Any] | None
    kind: MemoryKind | None
    subject: str | None
    date: str | None
    vector: Sequence[float] | None
    id: str | None
    valid_from: TimeInput | None


_INPUT_KEYS = frozenset(MemoryInput.__annotations__)


def new_memory(
    content: object,
    *,
    dimensions: int,
    importance: object = None,
    tags: object = None,
    source: object = None,
    ttl: object = None,
    thread_id: object = None,
    agent_id: object = None,
    namespace: object = None,
    sensitivity: object = None,
    metadata: object = None,
    kind: object = None,
    subject: object = None,
    date: object = None,
    vector: object = None,
    id: object = None,
    valid_from: object = None,
) -> NewMemory:
    """Check one memory's arguments into the record a write stores.

    ``dimensions``: the embedder's vector length, 0 while it is still to be learned
    (a given vector is then checked for finite values only). The arguments are typed
    ``object``: the mapping form reaches here unchecked, so each is checked here.
    """
    text = check_content(content)
    scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
    checked_source = None if source is None else validate_tag_value(source, name="source")
    checked_kind = "memory" if kind is None else check_kind(kind)
    key = display = None
    if subject is not None:
        # Normalised (and bounded) before any I/O; the display text is stored as given.
        key = subject_key_of(scope.tag, checked_kind, normalise_subject(subject))
        display = " ".join(str(subject).split())
    if date is not None and not isinstance(date, str):
        raise ValidationError("date must be a string", code="validation.type", details={"argument": "date"})
    checked_vector = None
    if vector is not None:
        size = dimensions or (len(vector) if isinstance(vector, Sized) else -1)
        checked_vector = validate_vector(vector, dimensions=size)
    # An argument left at None takes its default directly: the value its check would return.
    return new_memory_of(
        text,
        scope,
        0.5 if importance is None else check_importance(importance),
        () if tags is None else check_tags(tags),
        checked_source,
        None if ttl is None else check_ttl(ttl),
        "none" if sensitivity is None else check_sensitivity(sensitivity),
        {} if metadata is None else check_metadata(metadata),
        checked_kind,
        display,
        date or None,
        None,
        checked_vector,
        None if id is None else validate_memory_id(id),
        None if valid_from is None else optional_ms(valid_from, name="valid_from"),
        key,
        False,
    )


def new_memories(items: Iterable[str | Mapping[str, Any]], *, dimensions: int) -> list[NewMemory]:
    """Check every item of a ``remember_many`` call before anything is embedded or written."""
    if isinstance(items, str | bytes | Mapping):
        raise ValidationError(
            "remember_many takes a list of items (str or mapping), not a single one; use remember()",
            code="validation.type",
            details={"argument": "items", "type": type(items).__name__},
        )
    out: list[NewMemory] = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, str):
                out.append(new_memory(item, dimensions=dimensions))
            elif isinstance(item, Mapping):
                unknown = set(item) - _INPUT_KEYS
                if unknown:
                    raise ValidationError(
                        f"unknown arguments {sorted(unknown)}",
                        code="validation.argument",
                        details={"unknown": sorted(unknown)},
                    )
                opts = dict(item)
                content = opts.pop("content", None)
                out.append(new_memory(content, dimensions=dimensions, **opts))
            else:
                raise ValidationError(
                    f"item {i} must be a str or a mapping with 'content'", code="validation.type"
                )
        except ValidationError as exc:
            exc.details.setdefault("item", i)
            raise
    return out


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What one ``recall`` / ``recall_by_vector`` asks for, checked.

    ``threshold`` / ``weights`` None: the store's, read from the live config when the
    recall runs. ``query``: the text (``recall``, or ``recall_by_vector(query=)``: it
    lets the re-ranker see the words); None: a vector alone.
    """

    flt: MemoryFilter
    k: int = DEFAULT_K
    threshold: float | None = None
    weights: Weights | None = None
    reinforce: bool = True
    explain: bool = False
    query: str | None = None
    where: Node | None = None  # parsed (``core.where.parse``); compiled once the index is known
    # The calendar of the query's time expression (``recall(tz=)``), checked.
    tz: tzinfo = UTC
    # What the recall does about time: the query's window, or a question about the present.
    plan: TimePlan = field(default_factory=TimePlan)


def recall_request(
    *,
    query: str | None,
    k: int | None,
    threshold: float | None,
    tags: Sequence[str] | None,
    weights: Weights | Mapping[str, float] | None,
    reinforce: bool | None,
    thread_id: str | None,
    agent_id: str | None,
    namespace: str | None,
    exclude_sensitivity: Sequence[Sensitivity] | None,
    explain: bool,
    as_of: object = None,
    since: object = None,
    until: object = None,
    where: Node | None = None,
    tz: object = None,
) -> RecallRequest:
    """The request of a recall's keyword arguments (``query``: already checked, or None).

    ``where``: the ``where=`` filter, already parsed against the store's declared
    fields (``core.where.parse``, which needs the store's declaration).

    Checked in the order the arguments are documented (``k``, ``threshold``,
    ``weights``, then the filter), so the first bad one is the one reported.
    """
    kk = DEFAULT_K if k is None else check_k(k)
    thr = check_distance_threshold(threshold)
    w = None
    if weights is not None:
        w = Weights.of(dict(weights) if isinstance(weights, Mapping) else weights)
    unfiltered = (
        tags is None
        and namespace is None
        and agent_id is None
        and thread_id is None
        and exclude_sensitivity is None
        and as_of is None
        and since is None
        and until is None
    )
    if unfiltered:  # the common call: the values below, built once
        flt = _NO_FILTER
    else:
        flt = MemoryFilter(
            scope=Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id),
            tags=check_tags(tags),
            exclude_sensitivity=check_sensitivities(exclude_sensitivity),
        )
        flt = with_times(flt, as_of=as_of, since=since, until=until)
    zone = resolve_tz(tz)
    if query is None and not flt.has_time:
        plan = _PRESENT  # ``time_plan(None)``: no window to look for, a question about the present
    else:
        plan = time_plan(query, as_of=flt.as_of, tz=zone, timed=flt.has_time)
    return RecallRequest(
        flt=flt,
        k=kk,
        threshold=thr,
        weights=w,
        reinforce=reinforce is not False,
        explain=explain,
        query=query,
        where=where,
        tz=zone,
        plan=plan,
    )


# What a recall with no filter and no time asks (both frozen): ``MemoryFilter(scope=Scope.of(),
# tags=check_tags(None), ...)`` and ``time_plan(None)``, equal to a fresh one (a unit test says so).
_NO_FILTER = MemoryFilter()
_PRESENT = TimePlan(window=None, present=True)
