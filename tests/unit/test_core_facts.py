"""consolidation's pure core (dates, normalisation, reconciliation) and its argument checks."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore, ValidationError
from betterdb_memory.core.facts import (
    CurrentFact,
    Fact,
    FactRecord,
    fact_content,
    fact_statement,
    normalise,
    parse_instant,
    plan_facts,
)

_Store: Any = MemoryStore


# -- dates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02", datetime(2024, 1, 2, tzinfo=UTC)),
        ("2024-01-02T03:04:05", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T00:00:00+05:00", datetime(2024, 1, 1, 19, tzinfo=UTC)),
        ("2024-01-02 00:00:00-01:30", datetime(2024, 1, 2, 1, 30, tzinfo=UTC)),
        ("20240102T030405Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-03", datetime(2024, 3, 1, tzinfo=UTC)),
        ("2024", datetime(2024, 1, 1, tzinfo=UTC)),
        ("  ", None),
    ],
)
def test_parse_instant_reads_iso_8601_as_utc(text: str, expected: datetime | None) -> None:
    assert parse_instant(text) == expected


def test_parse_instant_objects_and_naive_means_utc() -> None:
    assert parse_instant(None) is None
    assert parse_instant(datetime(2024, 1, 1, 12)) == datetime(2024, 1, 1, 12, tzinfo=UTC)
    tz = timezone(timedelta(hours=-2))
    assert parse_instant(datetime(2024, 1, 1, 12, tzinfo=tz)) == datetime(2024, 1, 1, 14, tzinfo=UTC)
    assert parse_instant(date(2024, 2, 29)) == datetime(2024, 2, 29, tzinfo=UTC)


def test_instants_not_strings_decide_order() -> None:
    """Later as text, earlier as a time."""
    a, b = "2024-01-02T00:00:00+05:00", "2024-01-01T23:00:00Z"
    assert a > b
    pa, pb = parse_instant(a), parse_instant(b)
    assert pa is not None and pb is not None and pa < pb


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", "2024-13", "01/02/2024", 20240101])
def test_parse_instant_rejects_non_dates(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        parse_instant(bad)
    assert info.value.code == "validation.fact_date"


def test_normalise_nfkc_casefold_whitespace() -> None:
    assert normalise("  Ｕｓｅｒ\u00a0 CITY\n") == "user city"
    assert normalise("Straße") == normalise("STRASSE")


def test_fact_content_is_the_references_dated_form() -> None:
    """``[date] statement`` (betterdb-agent-memory's format), the statement alone when undated."""
    assert fact_content("lives in Paris ", "2024-03-01") == "[2024-03-01] lives in Paris"
    assert fact_content("lives in Paris", None) == "lives in Paris"
    assert fact_statement("[2024-03-01] lives in Paris", "2024-03-01") == "lives in Paris"
    assert fact_statement("[Q3] target is 5M", None) == "[Q3] target is 5M"


# -- reconciliation ------------------------------------------------------------------------


def _cur(ref: str, statement: str, when: str | None) -> CurrentFact:
    return CurrentFact(ref, normalise(statement), parse_instant(when))


def test_plan_new_subject_is_put_with_nothing_expected() -> None:
    plan = plan_facts([Fact("City", "Paris", "2024-01-01")], {})
    (op,) = plan.ops
    assert (op.action, op.key, op.expected) == ("put", "city", None)


def test_plan_newer_supersedes_older_loses_equal_is_unchanged() -> None:
    current = {"city": _cur("id1", "Paris", "2024-01-01")}
    newer = plan_facts([Fact("CITY", "Berlin", "2024-02-01")], current)
    assert [(o.action, o.expected) for o in newer.ops] == [("put", "id1")]
    older = plan_facts([Fact("city", "Rome", "2023-12-31T23:59:59Z")], current)
    assert older.ops == [] and older.unchanged == 1
    same = plan_facts([Fact("city", " paris ", "2025-01-01")], current)
    assert same.ops == [] and same.unchanged == 1


def test_plan_undated_supersedes_and_is_superseded() -> None:
    current = {"city": _cur("id1", "Paris", "2099-01-01")}
    plan = plan_facts([Fact("city", "Oslo"), Fact("city", "Lima", "2000-01-01")], current)
    assert [(o.fact.statement if o.fact else None, o.expected) for o in plan.ops] == [
        ("Oslo", "id1"),
        ("Lima", 0),
    ]


def test_plan_tombstones() -> None:
    current = {"car": _cur("c1", "Volvo", "2024-01-01")}
    stale = plan_facts([Fact("car", "", "2023-01-01", tombstone=True)], current)
    assert stale.ops == [] and stale.unchanged == 1
    plan = plan_facts([Fact("car", "", tombstone=True), Fact("car", "", tombstone=True)], current)
    assert [(o.action, o.expected) for o in plan.ops] == [("del", "c1")]
    assert plan.unmatched == ["car"]
    assert plan_facts([Fact("Boat", "", tombstone=True)], {}).unmatched == ["Boat"]


def test_plan_a_statement_after_a_tombstone_of_its_subject_is_a_correction() -> None:
    """ "No longer Paris; Berlin since 2022": Berlin is the first statement after the
    retraction, so it is current from 2022 (docs/concepts/time.md). Only that statement:
    the next one supersedes it as usual; another subject, or a statement before the
    tombstone (which the tombstone then retracts), or in a plan with no tombstone is not."""
    current = {"city": _cur("p1", "Paris", None), "car": _cur("c1", "Volvo", None)}
    plan = plan_facts(
        [
            Fact("car", "Saab"),
            Fact("city", "", tombstone=True),
            Fact("City", "Berlin", "2022-01-01"),
            Fact("city", "Munich", "2023-01-01"),
        ],
        current,
    )
    assert [(o.action, o.expected, o.correction) for o in plan.ops] == [
        ("put", "c1", False),
        ("del", "p1", False),
        ("put", None, True),
        ("put", 2, False),
    ]
    before = plan_facts([Fact("city", "Berlin", "2022-01-01"), Fact("city", "", tombstone=True)], current)
    assert [(o.action, o.correction) for o in before.ops] == [("put", False), ("del", False)]
    assert not any(o.correction for o in plan_facts([Fact("city", "Berlin", "2022-01-01")], {}).ops)
    # an unmatched tombstone (the fact was retracted by an earlier run) says the same
    (op,) = plan_facts([Fact("city", "", tombstone=True), Fact("city", "Berlin", "2022")], {}).ops
    assert op.correction


def test_plan_applies_dated_facts_in_date_order_whatever_the_list_order() -> None:
    facts = [
        Fact("x", "c", "2024-03-01"),
        Fact("x", "undated"),
        Fact("x", "a", "2024-01-01"),
        Fact("x", "b", "2024-02-01"),
    ]
    plan = plan_facts(facts, {})
    assert [o.fact.statement for o in plan.ops if o.fact] == ["a", "undated", "b", "c"]
    assert [o.expected for o in plan.ops] == [None, 0, 1, 2]


def test_plan_accepts_mappings_and_rejects_garbage() -> None:
    plan = plan_facts([{"subject": "s", "statement": "v", "date": "2024-01-01"}], {})
    assert plan.ops[0].fact == Fact("s", "v", "2024-01-01")
    for bad in (["not a fact"], [Fact(" ", "v")], [Fact("s", " ")], [Fact("s", "v", "soon")]):
        with pytest.raises(ValidationError):
            plan_facts(bad, {})


# -- argument checks: all before any I/O -------------------------------------------------------


class _NoIO:
    """A client that fails the test on any command."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"I/O attempted: {name}")


@pytest.fixture
def offline_store() -> Any:
    return _Store(client=_NoIO(), name="offline", embedder=HashingEmbedder(16))


def _noop(items: Any) -> str:
    return "x"


@pytest.mark.parametrize(
    ("args", "kwargs", "code"),
    [
        (("merge",), {"summarize": _noop}, "validation.choice"),
        (("summary",), {}, "validation.argument"),
        (("facts",), {"summarize": _noop}, "validation.argument"),
        (("summary", "not callable"), {}, "validation.argument"),
        (("summary", _noop), {}, "validation.empty_scope"),
        (("facts",), {"extract_facts": _noop}, "validation.empty_scope"),
        (("summary", _noop), {"older_than_seconds": -1}, "validation.range"),
        (("summary", _noop), {"older_than_seconds": float("nan")}, "validation.nonfinite"),
        (("summary", _noop), {"max_importance": 1.5}, "validation.range"),
        (("summary", _noop), {"summary_importance": 2}, "validation.range"),
        (("facts",), {"extract_facts": _noop, "fact_importance": -0.1}, "validation.range"),
        (("summary", _noop), {"tags": "one-string"}, "validation.type"),
        (("summary", _noop), {"thread_id": ""}, None),
        (("summary", _noop), {"delete_sources": "yes"}, "validation.type"),
        (("summary", _noop), {"include_summaries": 1}, "validation.type"),
    ],
)
async def test_bad_arguments_raise_before_io(
    offline_store: Any, args: tuple[Any, ...], kwargs: dict[str, Any], code: str | None
) -> None:
    with pytest.raises(ValidationError) as info:
        await offline_store.consolidate(*args, **kwargs)
    if code is not None:
        assert info.value.code == code


async def test_history_subject_checked_before_io(offline_store: Any) -> None:
    with pytest.raises(ValidationError):
        await offline_store.fact_history("   ")
    with pytest.raises(ValidationError):
        await offline_store.purge_fact_history(subject="")


def test_a_fact_record_as_json_has_its_times_in_epoch_ms() -> None:
    """What the CLI's ``history`` and the MCP ``fact_history`` tool print: every field, times in ms."""
    rec = FactRecord(
        id="m1", subject="home city", statement="Ada lives in Lisbon.", date="2020-03-01",
        valid_from=datetime(2020, 3, 1, tzinfo=UTC), valid_until=datetime(2024, 5, 1, tzinfo=UTC),
        superseded_by="m2", current=False, retracted=False,
        recorded_at=datetime(2024, 5, 2, 12, 0, 0, 500_000, tzinfo=UTC), content="Ada lives in Lisbon.",
    )  # fmt: skip
    out = rec.as_json()
    assert list(out) == [f for f in FactRecord.__dataclass_fields__]
    assert (out["valid_from"], out["valid_until"], out["recorded_at"]) == (
        1583020800000,
        1714521600000,
        1714651200500,
    )
    assert out["superseded_by"] == "m2" and out["current"] is False
    now = dataclasses.replace(rec, valid_until=None, current=True)
    assert now.as_json()["valid_until"] is None
