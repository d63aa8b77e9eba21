"""Event-time coercion (core/times.py) and subject normalisation (core/subjects.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from betterdb_memory.core.facts import subject_digest as facts_subject_digest
from betterdb_memory.core.subjects import MAX_SUBJECT_CHARS, normalise_subject, subject_digest
from betterdb_memory.core.times import (
    MAX_MS,
    MIN_MS,
    check_window,
    from_ms,
    iso_of,
    now_ms,
    optional_ms,
    to_ms,
)
from betterdb_memory.errors import ValidationError

MAY_2024 = 1714521600000  # 2024-05-01T00:00:00Z


def _code(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return exc.value.code


@pytest.mark.parametrize(
    "value",
    [
        datetime(2024, 5, 1, tzinfo=UTC),
        datetime(2024, 5, 1),  # naive is UTC
        datetime(2024, 5, 1, 2, tzinfo=timezone(timedelta(hours=2))),
        date(2024, 5, 1),
        MAY_2024,
        "2024-05-01",
        "2024-05-01T00:00:00Z",
        "2024-05-01T00:00:00+00:00",
        "2024-05-01T02:00:00+02:00",
        "2024-04-30T20:00:00-04:00",
        " 2024-05-01 ",
        "2024-05",
        "20240501",
    ],
)
def test_to_ms_accepts_every_form_of_one_instant(value: object) -> None:
    assert to_ms(value) == MAY_2024


def test_to_ms_year_alone_is_its_first_instant() -> None:
    assert to_ms("2024") == to_ms("2024-01-01T00:00:00Z")


def test_to_ms_keeps_milliseconds_and_floors_microseconds() -> None:
    assert to_ms(datetime(2024, 5, 1, 0, 0, 0, 1999, tzinfo=UTC)) == MAY_2024 + 1
    assert to_ms("2024-05-01T00:00:00.123Z") == MAY_2024 + 123


def test_to_ms_before_1970_is_negative() -> None:
    assert to_ms("1969-12-31T23:59:59.999Z") == -1
    assert to_ms("1900-01-01") == MIN_MS


def test_to_ms_bounds_are_inclusive() -> None:
    assert to_ms(MIN_MS) == MIN_MS
    assert to_ms(MAX_MS) == MAX_MS
    assert to_ms("9999-12-31T23:59:59.999Z") == MAX_MS


@pytest.mark.parametrize(
    "value",
    [
        MIN_MS - 1,
        MAX_MS + 1,
        "1899-12-31T23:59:59Z",
        "0999-01-01",
        datetime(1899, 12, 31, tzinfo=UTC),
        "1900-01-01T00:30:00+01:00",  # 1899 in UTC
        "9999-12-31T23:00:00-05:00",  # year 10000 in UTC, no overflow
        10**20,
    ],
)
def test_to_ms_out_of_range_is_a_range_error(value: object) -> None:
    with pytest.raises(ValidationError) as exc:
        to_ms(value, name="as_of")
    assert _code(exc) == "validation.range"
    assert exc.value.details["argument"] == "as_of"


@pytest.mark.parametrize(
    "value", ["", "yesterday", "2024-13-01", "2024-02-30", "01/05/2024", "2024-05-01T25:00", "12345678901"]
)
def test_to_ms_unparseable_text_is_a_format_error(value: str) -> None:
    with pytest.raises(ValidationError) as exc:
        to_ms(value, name="since")
    assert _code(exc) == "validation.time_format"
    assert exc.value.details == {"argument": "since", "value": repr(value)}


@pytest.mark.parametrize("value", [True, False, 1.7e12, None, b"2024-05-01", [2024], object()])
def test_to_ms_other_types_are_type_errors(value: object) -> None:
    with pytest.raises(ValidationError) as exc:
        to_ms(value)
    assert _code(exc) == "validation.type"


def test_to_ms_error_is_a_value_error_with_a_short_value() -> None:
    with pytest.raises(ValueError, match="valid_from") as exc:
        to_ms("x" * 500)
    assert isinstance(exc.value, ValidationError)
    assert len(exc.value.details["value"]) == 80


@given(st.integers(min_value=MIN_MS, max_value=MAX_MS))
def test_from_ms_and_iso_round_trip(ms: int) -> None:
    assert to_ms(from_ms(ms)) == ms
    assert to_ms(iso_of(ms)) == ms


@given(st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(9999, 12, 30)))
def test_naive_datetime_equals_the_same_wall_time_in_utc(value: datetime) -> None:
    assert to_ms(value) == to_ms(value.replace(tzinfo=UTC))


def test_now_ms_is_in_range() -> None:
    assert MIN_MS < now_ms() < MAX_MS


def test_optional_ms() -> None:
    assert optional_ms(None, name="as_of") is None
    assert optional_ms("2024-05-01", name="as_of") == MAY_2024


def test_check_window() -> None:
    assert check_window(None, None) == (None, None)
    assert check_window("2024-05-01", None) == (MAY_2024, None)
    assert check_window(None, MAY_2024) == (None, MAY_2024)
    assert check_window(MAY_2024, MAY_2024) == (MAY_2024, MAY_2024)  # empty, allowed


def test_check_window_since_after_until_is_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        check_window("2024-05-02", "2024-05-01")
    assert _code(exc) == "validation.time_window"
    assert exc.value.details["since"] > exc.value.details["until"]


def test_check_window_names_the_bad_bound() -> None:
    with pytest.raises(ValidationError) as exc:
        check_window("2024-05-01", "soon")
    assert exc.value.details["argument"] == "until"


def test_iso_of() -> None:
    assert iso_of(MAY_2024) == "2024-05-01T00:00:00.000Z"
    assert iso_of(-1) == "1969-12-31T23:59:59.999Z"


# -- subjects -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "home city",
        "Home City",
        "  HOME\t\ncity ",
        "ＨＯＭＥ city",
        "home   city",
        "HOME CİTY".replace("İ", "I"),
    ],
)
def test_normalise_subject_spellings_meet(raw: str) -> None:
    assert normalise_subject(raw) == "home city"


def test_normalise_subject_casefolds_not_lowers() -> None:
    assert normalise_subject("Straße") == normalise_subject("STRASSE") == "strasse"


def test_normalise_subject_keeps_commas_and_punctuation() -> None:
    assert normalise_subject("Ada, home city (current)") == "ada, home city (current)"


@pytest.mark.parametrize("raw", ["", "   ", "\t\n", "\u3000"])
def test_normalise_subject_empty_is_refused(raw: str) -> None:
    with pytest.raises(ValidationError) as exc:
        normalise_subject(raw)
    assert _code(exc) == "validation.empty"


def test_normalise_subject_length_bound_is_on_the_matching_form() -> None:
    assert len(normalise_subject("a" * MAX_SUBJECT_CHARS)) == MAX_SUBJECT_CHARS
    assert normalise_subject(" a " + "b" * (MAX_SUBJECT_CHARS - 2) + " ") == "a " + "b" * 254
    for raw in ("a" * (MAX_SUBJECT_CHARS + 1), "ß" * 129):  # 129 'ß' fold to 258 characters
        with pytest.raises(ValidationError) as exc:
            normalise_subject(raw)
        assert _code(exc) == "validation.too_long"
        assert exc.value.details["max"] == MAX_SUBJECT_CHARS


@pytest.mark.parametrize("raw", [None, 3, b"home", ["home"]])
def test_normalise_subject_non_string_is_a_type_error(raw: object) -> None:
    with pytest.raises(ValidationError) as exc:
        normalise_subject(raw)
    assert _code(exc) == "validation.type"


def test_normalise_subject_lone_surrogate_is_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        normalise_subject("home \ud800")
    assert _code(exc) == "validation.encoding"


def test_subject_digest_is_the_facts_modes_digest() -> None:
    key = normalise_subject("Home City")
    assert subject_digest(key) == facts_subject_digest(key)
    assert len(subject_digest(key)) == 20
    assert subject_digest("a") != subject_digest("b")


@given(st.text(min_size=1, max_size=60))
def test_normalise_subject_is_idempotent(raw: str) -> None:
    try:
        once = normalise_subject(raw)
    except ValidationError:
        return
    assert normalise_subject(once) == once
