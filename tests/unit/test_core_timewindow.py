"""Time expressions in recall queries (core/timewindow.py): windows, spans, words that are not times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from betterdb_memory.core.times import to_ms
from betterdb_memory.core.timewindow import TimeWindow, find_time_windows, parse_time_window, resolve_tz
from betterdb_memory.errors import ValidationError

WED = "2024-05-15T12:00:00Z"  # a Wednesday in a leap year


def _w(query: str, as_of: object = WED, tz: object = None) -> tuple[str | None, str | None]:
    """The window as (start, end) ISO dates in UTC, None for an open side."""
    w = parse_time_window(query, as_of=as_of, tz=tz)
    assert w is not None, query

    def iso(ms: int | None) -> str | None:
        if ms is None:
            return None
        d = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
        return d.strftime("%Y-%m-%d") if d.hour == d.minute == 0 else d.isoformat()

    return iso(w.start_ms), iso(w.end_ms)


@pytest.mark.parametrize(
    ("query", "window"),
    [
        ("what did I do today?", ("2024-05-15", "2024-05-16")),
        ("anything tonight", ("2024-05-15", "2024-05-16")),
        ("this morning", ("2024-05-15", "2024-05-16")),
        ("what happened yesterday?", ("2024-05-14", "2024-05-15")),
        ("last night", ("2024-05-14", "2024-05-15")),
        ("the day before yesterday", ("2024-05-13", "2024-05-14")),
        ("tomorrow", ("2024-05-16", "2024-05-17")),
        ("the day after tomorrow", ("2024-05-17", "2024-05-18")),
        # calendar weeks start on Monday (ISO 8601)
        ("this week", ("2024-05-13", "2024-05-20")),
        ("earlier this week", ("2024-05-13", "2024-05-20")),
        ("last week", ("2024-05-06", "2024-05-13")),
        ("the previous week", ("2024-05-06", "2024-05-13")),
        ("next week", ("2024-05-20", "2024-05-27")),
        ("last weekend", ("2024-05-11", "2024-05-13")),
        ("this weekend", ("2024-05-18", "2024-05-20")),
        ("next weekend", ("2024-05-25", "2024-05-27")),
        ("the past week", ("2024-05-08", "2024-05-16")),
        ("this month", ("2024-05-01", "2024-06-01")),
        ("last month", ("2024-04-01", "2024-05-01")),
        ("next month", ("2024-06-01", "2024-07-01")),
        ("this year", ("2024-01-01", "2025-01-01")),
        ("last year", ("2023-01-01", "2024-01-01")),
        ("3 days ago", ("2024-05-12", "2024-05-13")),
        ("a week ago", ("2024-05-06", "2024-05-13")),
        ("two months ago", ("2024-03-01", "2024-04-01")),
        ("a year ago", ("2023-01-01", "2024-01-01")),
        ("twelve years ago", ("2012-01-01", "2013-01-01")),
        ("in the last 3 days", ("2024-05-12", "2024-05-16")),
        ("over the past two weeks", ("2024-05-01", "2024-05-16")),
        ("in the last 2 months", ("2024-03-15", "2024-05-16")),
        ("past 1 year", ("2023-05-15", "2024-05-16")),
        ("in May 2023", ("2023-05-01", "2023-06-01")),
        ("May 2023", ("2023-05-01", "2023-06-01")),
        ("Dec 2023", ("2023-12-01", "2024-01-01")),
        ("in May", ("2024-05-01", "2024-06-01")),
        ("in June", ("2023-06-01", "2023-07-01")),  # most recent June that has begun
        ("last May", ("2023-05-01", "2023-06-01")),  # the one before this one
        ("last April", ("2024-04-01", "2024-05-01")),
        ("this December", ("2024-12-01", "2025-01-01")),
        ("next March", ("2025-03-01", "2025-04-01")),
        ("early May 2023", ("2023-05-01", "2023-05-11")),
        ("mid-April", ("2024-04-11", "2024-04-21")),
        ("late February 2024", ("2024-02-21", "2024-03-01")),  # leap year: 21-29
        ("late February 2023", ("2023-02-21", "2023-03-01")),
        ("on 8 May", ("2024-05-08", "2024-05-09")),
        ("on 20 May", ("2023-05-20", "2023-05-21")),  # not yet come this year
        ("May 8, 2023", ("2023-05-08", "2023-05-09")),
        ("May 8th 2023", ("2023-05-08", "2023-05-09")),
        ("the 8th of May", ("2024-05-08", "2024-05-09")),
        ("8 May 2023", ("2023-05-08", "2023-05-09")),
        ("Sept. 3", ("2023-09-03", "2023-09-04")),
        ("2023-05-08", ("2023-05-08", "2023-05-09")),
        ("2023-05", ("2023-05-01", "2023-06-01")),
        ("in 2021", ("2021-01-01", "2022-01-01")),
        ("during the year 1999", ("1999-01-01", "2000-01-01")),
        ("since March", ("2024-03-01", None)),
        ("ever since last summer", ("2023-06-01", None)),
        ("before 2024", (None, "2024-01-01")),
        ("after June 2022", ("2022-07-01", None)),
        ("until May 2023", (None, "2023-06-01")),
        ("by 2020", (None, "2021-01-01")),
        ("from last week", ("2024-05-06", None)),
        ("between March and May 2023", ("2023-03-01", "2023-06-01")),
        ("from 2020 to 2022", ("2020-01-01", "2023-01-01")),
        ("between 8 May and 12 May", ("2024-05-08", "2024-05-13")),
        ("from last week until yesterday", ("2024-05-06", "2024-05-15")),
        ("on Monday", ("2024-05-13", "2024-05-14")),
        ("on Wednesday", ("2024-05-15", "2024-05-16")),  # today
        ("last Wednesday", ("2024-05-08", "2024-05-09")),
        ("last Friday", ("2024-05-10", "2024-05-11")),
        ("this Friday", ("2024-05-17", "2024-05-18")),
        ("next Tuesday", ("2024-05-21", "2024-05-22")),
        ("the summer of 2023", ("2023-06-01", "2023-09-01")),
        ("winter 2023", ("2023-12-01", "2024-03-01")),
        ("last summer", ("2023-06-01", "2023-09-01")),
        ("this spring", ("2024-03-01", "2024-06-01")),
        ("last spring", ("2023-03-01", "2023-06-01")),
        ("in the winter", ("2023-12-01", "2024-03-01")),
    ],
)
def test_windows(query: str, window: tuple[str | None, str | None]) -> None:
    assert _w(query) == window


@pytest.mark.parametrize(
    ("query", "window"),
    [
        ("recently", ("2024-04-15", "2024-05-16")),
        ("lately", ("2024-04-15", "2024-05-16")),
        ("the other day", ("2024-05-08", "2024-05-15")),
        ("a few weeks ago", ("2024-04-15", "2024-05-06")),
        ("a couple of days ago", ("2024-05-13", "2024-05-14")),
        ("about two weeks ago", ("2024-04-22", "2024-05-13")),
        ("several months ago", ("2023-10-01", "2024-03-01")),
    ],
)
def test_vague_expressions_are_fuzzy(query: str, window: tuple[str, str]) -> None:
    w = parse_time_window(query, as_of=WED)
    assert w is not None
    assert _w(query) == window
    assert w.fuzzy == (query != "a couple of days ago")


@pytest.mark.parametrize(
    "query",
    [
        "Where does Ada live?",
        "may I ask what you like?",
        "May I ask something",
        "it may be raining",
        "this may be wrong",
        "you may not know",
        "march forward with the plan",
        "the march was long",
        "April said she would come",
        "ask June about it",
        "the second one",
        "the second of the two",
        "I walked 2023 steps",
        "in 2000 steps",
        "room 1984",
        "my 2019 Honda",
        "call 555-1234",
        "version 2.0.2024",
        "I have 12 cats",
        "we may 3 people invite",
        "fall asleep quickly",
        "spring cleaning tips",
        "on Mondays we swim",
        "what is the past tense",
        "the next one",
        "last of all",
        "Tom and 2020",
        "",
    ],
)
def test_words_that_are_not_times(query: str) -> None:
    assert parse_time_window(query, as_of=WED) is None


def test_span_text_and_rest_of_the_query() -> None:
    q = "Where did Ada live in May 2023?"
    w = parse_time_window(q, as_of=WED)
    assert w is not None
    assert w.text == "in May 2023"
    assert q[w.span[0] : w.span[1]] == w.text
    assert w.query == "Where did Ada live?"


def test_rest_of_the_query_when_the_expression_leads() -> None:
    w = parse_time_window("Last weekend, what did I cook?", as_of=WED)
    assert w is not None
    assert w.text == "Last weekend"
    assert w.query == "what did I cook?"


def test_case_is_ignored() -> None:
    assert _w("LAST WEEK") == _w("last week")
    assert _w("In MAY 2023") == _w("in may 2023")


def test_first_expression_wins_and_all_are_found() -> None:
    found = find_time_windows("what did I do yesterday and in 2021", as_of=WED)
    assert [w.text for w in found] == ["yesterday", "in 2021"]
    w = parse_time_window("what did I do yesterday and in 2021", as_of=WED)
    assert w is not None and w.text == "yesterday"


# -- month boundaries, leap years, week start ---------------------------------------------


def test_month_arithmetic_clamps_to_the_last_day() -> None:
    # 31 March minus one month in a leap year: 29 February
    assert _w("in the last 1 month", as_of="2024-03-31T10:00:00Z") == ("2024-02-29", "2024-04-01")
    assert _w("in the last 1 month", as_of="2023-03-31T10:00:00Z") == ("2023-02-28", "2023-04-01")


def test_last_month_across_a_year() -> None:
    assert _w("last month", as_of="2024-01-10T00:00:00Z") == ("2023-12-01", "2024-01-01")
    assert _w("next month", as_of="2024-12-10T00:00:00Z") == ("2025-01-01", "2025-02-01")


def test_last_week_across_a_year_and_on_a_monday_and_sunday() -> None:
    assert _w("last week", as_of="2024-01-03T00:00:00Z") == ("2023-12-25", "2024-01-01")
    assert _w("this week", as_of="2024-05-13T00:00:00Z") == ("2024-05-13", "2024-05-20")  # Monday
    assert _w("this week", as_of="2024-05-19T23:59:59Z") == ("2024-05-13", "2024-05-20")  # Sunday
    assert _w("last weekend", as_of="2024-05-13T08:00:00Z") == ("2024-05-11", "2024-05-13")  # Monday


def test_29_february() -> None:
    assert _w("on 29 February", as_of=WED) == ("2024-02-29", "2024-03-01")
    # in 2025 the most recent 29 February is 2024's
    assert _w("on 29 February", as_of="2025-06-01T00:00:00Z") == ("2024-02-29", "2024-03-01")
    assert parse_time_window("February 29, 2023", as_of=WED) is None  # no such day
    assert parse_time_window("on 31 April", as_of=WED) is None


def test_one_year_ago_from_29_february() -> None:
    assert _w("in the last 1 year", as_of="2024-02-29T12:00:00Z") == ("2023-02-28", "2024-03-01")


def test_yesterday_on_the_first_of_march() -> None:
    assert _w("yesterday", as_of="2024-03-01T05:00:00Z") == ("2024-02-29", "2024-03-01")
    assert _w("yesterday", as_of="2023-03-01T05:00:00Z") == ("2023-02-28", "2023-03-01")


# -- time zones --------------------------------------------------------------------------


def test_tz_moves_the_day_and_its_midnight() -> None:
    # 23:30 UTC on 14 May is already 15 May in Tokyo (UTC+9): "today" starts at 15:00 UTC on the 14th
    w = parse_time_window("today", as_of="2024-05-14T23:30:00Z", tz="Asia/Tokyo")
    assert w is not None
    assert w.start_ms == to_ms("2024-05-14T15:00:00Z")
    assert w.end_ms == to_ms("2024-05-15T15:00:00Z")
    u = parse_time_window("today", as_of="2024-05-14T23:30:00Z")
    assert u is not None and u.start_ms == to_ms("2024-05-14T00:00:00Z")


def test_tz_daylight_saving_day_is_23_hours() -> None:
    # Europe/Lisbon moves to summer time on 31 March 2024 (01:00 UTC)
    w = parse_time_window("yesterday", as_of="2024-04-01T12:00:00Z", tz="Europe/Lisbon")
    assert w is not None and w.start_ms is not None and w.end_ms is not None
    assert w.end_ms - w.start_ms == 23 * 3600 * 1000
    assert w.start_ms == to_ms("2024-03-31T00:00:00Z")  # midnight in winter time (UTC+0)
    assert w.end_ms == to_ms("2024-03-31T23:00:00Z")  # midnight in summer time (UTC+1)


def test_tz_accepts_a_tzinfo() -> None:
    plus2 = timezone(timedelta(hours=2))
    w = parse_time_window("today", as_of=WED, tz=plus2)
    assert w is not None and w.start_ms == to_ms("2024-05-14T22:00:00Z")


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "../etc/passwd", 5, b"UTC"])
def test_bad_tz_is_a_typed_error(tz: object) -> None:
    with pytest.raises(ValidationError) as exc:
        parse_time_window("yesterday", as_of=WED, tz=tz)
    assert exc.value.code == "validation.timezone"


def test_resolve_tz_default_is_utc() -> None:
    assert resolve_tz(None) is UTC


def test_bad_as_of_is_a_typed_error_even_without_an_expression() -> None:
    with pytest.raises(ValidationError) as exc:
        parse_time_window("where does Ada live", as_of="soon")
    assert exc.value.code == "validation.time_format"
    with pytest.raises(ValidationError) as exc:
        parse_time_window(None)  # type: ignore[arg-type]
    assert exc.value.code == "validation.type"


def test_as_of_forms_agree() -> None:
    dt = datetime(2024, 5, 15, 12, tzinfo=UTC)
    assert parse_time_window("last week", as_of=dt) == parse_time_window("last week", as_of=to_ms(dt))


def test_default_as_of_is_now() -> None:
    w = parse_time_window("today")
    assert w is not None and w.start_ms is not None and w.end_ms is not None
    now = datetime.now(UTC)
    assert w.start_ms <= to_ms(now) < w.end_ms + 1000  # a midnight between the two calls


# -- the window's own checks -------------------------------------------------------------


def test_contains_is_half_open() -> None:
    w = TimeWindow(start_ms=10, end_ms=20, text="x", span=(0, 1), query="")
    assert [w.contains(t) for t in (9, 10, 19, 20)] == [False, True, True, False]
    assert TimeWindow(None, 20, "x", (0, 1), "").contains(-(10**12))
    assert TimeWindow(10, None, "x", (0, 1), "").contains(10**15)


def test_overlaps_counts_a_state_that_began_before_the_window() -> None:
    w = TimeWindow(start_ms=100, end_ms=200, text="x", span=(0, 1), query="")
    assert w.overlaps(50, None)  # began before, still current
    assert w.overlaps(50, 150)  # began before, ended inside
    assert not w.overlaps(50, 100)  # ended as the window began
    assert not w.overlaps(200, None)  # began after
    assert w.overlaps(150, 160)


def test_describe() -> None:
    w = parse_time_window("before 2024", as_of=WED)
    assert w is not None
    assert w.describe() == "'before 2024' -> [-inf, 2024-01-01T00:00:00.000Z)"


# -- properties --------------------------------------------------------------------------


@given(
    st.datetimes(min_value=datetime(1950, 1, 1), max_value=datetime(2150, 12, 31), timezones=st.just(UTC)),
    st.sampled_from(
        [
            "today",
            "yesterday",
            "last week",
            "this week",
            "last weekend",
            "last month",
            "this year",
            "3 days ago",
            "two months ago",
            "in the last 2 months",
            "in May",
            "last May",
            "on 8 May",
            "on 29 February",
            "last Friday",
            "on Sunday",
            "last summer",
            "in the winter",
            "recently",
            "a few weeks ago",
        ]
    ),
)
def test_past_windows_are_nonempty_and_begin_by_today(as_of: datetime, query: str) -> None:
    w = parse_time_window(query, as_of=as_of)
    assert w is not None and w.start_ms is not None and w.end_ms is not None
    assert w.start_ms < w.end_ms
    tomorrow = datetime(as_of.year, as_of.month, as_of.day, tzinfo=UTC) + timedelta(days=1)
    assert w.start_ms < to_ms(tomorrow)


@given(st.text(max_size=80))
def test_any_text_parses_or_returns_none(text: str) -> None:
    for w in find_time_windows(text, as_of=WED):
        assert text[w.span[0] : w.span[1]] == w.text
        assert w.start_ms is None or w.end_ms is None or w.start_ms <= w.end_ms


@pytest.mark.parametrize(
    ("query", "text", "rest"),
    [
        ("What did I work on this month?", "this month", "What did I work on?"),
        ("what did I shop for yesterday?", "yesterday", "what did I shop for?"),
        ("What did I work on 2 days ago?", "2 days ago", "What did I work on?"),
        ("plans for 2024", "2024", "plans for"),
        ("What happened on Monday?", "on Monday", "What happened?"),
        ("Who did I see on 8 May?", "on 8 May", "Who did I see?"),
        ("Where did I go on the 8th of May?", "on the 8th of May", "Where did I go?"),
    ],
)
def test_a_preposition_of_the_verb_stays_in_the_query(query: str, text: str, rest: str) -> None:
    """ "on" joins a date, never a verb's particle; "for" is never taken (it guards a year only)."""
    w = parse_time_window(query, as_of=WED)
    assert w is not None
    assert (w.text, w.query) == (text, rest)


def test_each_rule_s_gate_regex_is_its_word_test() -> None:
    # ``_cores`` skips a rule whose gate finds nothing: the regex must say exactly what
    # ``any(word in lower for word in gate)`` (or "a digit in the text") says.
    from betterdb_memory.core import _time_rules as rules

    texts = [
        "", "What did I do yesterday?", "two weeks ago", "the other day", "In MAY 2023", "on 8 may",
        "last Friday", "since the 3rd", "spring break", "lately", "a fall", "no time here", "²³ superscripts",
        "٣ arabic-indic digit", "mondays", "backpacking", "the previous year", "Tonight!",
    ]  # fmt: skip
    for text in texts:
        lower = text.lower()
        for gate, search, on_text in zip(rules._GATES, rules._GATE_SEARCH, rules._ON_TEXT, strict=True):
            if gate == ("#",):
                expected = any(ch.isdecimal() for ch in text)
            else:
                expected = any(word in lower for word in gate)
            assert (search(text if on_text else lower) is not None) == expected, (text, gate)


def test_a_question_parsed_again_the_same_day_gives_the_same_windows() -> None:
    # A recall parses its question twice (its time plan, the ranker's dates): the second
    # comes from a cache keyed by question, day and zone; each caller gets its own list.
    as_of = datetime(2024, 5, 8, 15, 0, tzinfo=UTC)
    first = find_time_windows("What did I do last week and in March?", as_of=as_of)
    again = find_time_windows("What did I do last week and in March?", as_of=as_of.replace(hour=23))
    assert again == first and again is not first and len(first) == 2
    next_day = find_time_windows(
        "What did I do last week and in March?", as_of=datetime(2024, 5, 14, tzinfo=UTC)
    )
    assert next_day[0].start_ms != first[0].start_ms  # another day: resolved again
    lisbon = find_time_windows("What did I do yesterday?", as_of=as_of, tz="Europe/Lisbon")
    assert lisbon[0].start_ms != find_time_windows("What did I do yesterday?", as_of=as_of)[0].start_ms
    long = "x " * 400 + "yesterday"  # past the cached length: parsed each time, the same answer
    assert find_time_windows(long, as_of=as_of) == find_time_windows(long, as_of=as_of)


@given(
    as_of=st.datetimes(min_value=datetime(1950, 1, 1), max_value=datetime(2090, 12, 31)),
    days=st.integers(min_value=1, max_value=4000),
    query=st.sampled_from(
        [
            "What did I do last week and in March?",
            "between March and May 2023, what did I read?",
            "since 8 May, who did I meet?",
            "what did I cook two months ago",
            "what happened last winter or yesterday",
            "Where does Ada live?",
        ]
    ),
)
def test_a_question_read_on_another_day_resolves_as_a_fresh_parse(
    as_of: datetime, days: int, query: str
) -> None:
    # The rules' matches of a question are kept per question (``_found``), not per day: a
    # second day reuses them and must resolve exactly as a parse that never saw the first.
    from betterdb_memory.core import timewindow

    other = as_of + timedelta(days=days)
    find_time_windows(query, as_of=as_of.replace(tzinfo=UTC))
    reused = find_time_windows(query, as_of=other.replace(tzinfo=UTC))
    timewindow._found.cache_clear()
    timewindow._cached.cache_clear()
    assert reused == find_time_windows(query, as_of=other.replace(tzinfo=UTC))
