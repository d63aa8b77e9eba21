"""Time in the question: English time expressions in a recall query, resolved to a window.

``parse_time_window("what did I do last weekend?", as_of=..., tz="Europe/Lisbon")``
finds the expression ("last weekend"), resolves it against ``as_of`` (default now) in
the calendar of ``tz`` (UTC by default), and returns the half-open window
``[start_ms, end_ms)`` in epoch ms with the matched text and its span, so ``explain``
can show what was understood and the rest of the query ("what did I do?") can be
searched without words that only say *when*. ``None`` when the query holds no time
expression: such a query behaves exactly as before.

Why a small parser and not a library (measured in /work/notes/temporal.md): the
installed environment has no date parser; ``dateparser`` (the well-kept choice, with
``search_dates`` to find dates inside a sentence) pulls in ``regex``, ``pytz``,
``tzlocal`` and ``python-dateutil``, costs milliseconds per query where this costs
tens of microseconds, and returns instants, not windows: "last week" becomes one
moment seven days ago rather than Monday-to-Monday, "in May 2023" a day, and "may I"
or "march forward" come back as dates. What recall needs is the window a person
means, which is calendar arithmetic on a closed set of English forms, below.

Forms understood (case-insensitive; a leading preposition is part of the match):

* days: today, tonight, this morning/afternoon/evening, yesterday, last night, the
  day before yesterday, tomorrow, the day after tomorrow, the other day (fuzzy);
* relative units: this/last/previous/next week, month, year, weekend (calendar units,
  weeks start on Monday, ISO 8601); past/last N days/weeks/months/years and "the past
  week" (rolling, ending today); N days/weeks/months/years ago (the unit containing
  that day; "a few"/"several"/"about" widen it and mark it fuzzy); recently/lately
  (the last 30 days, fuzzy);
* weekdays: on/last/this/next Monday;
* dates: May 8, 2023 / 8 May 2023 / the 8th of May / 2023-05-08 / May 2023 /
  2023-05 / in May / last May / early-mid-late May / in 2021 / summer 2023 / last
  winter (meteorological seasons of the northern hemisphere);
* bounds: since X / from X / after X (open end), before X / until X / by X (open
  start), between X and Y / from X to Y.

A month or date without a year, and a weekday, mean their most recent occurrence that
began on or before ``as_of``'s day: a memory question is most often about the past.

Words that only look like times are not: "may I", "it may be", "march forward",
"April said", "the second", "2000 steps". A bare month name counts only after a
preposition or a modifier (in, since, last, early, ...) or beside a day or year; a
bare year only after a preposition; lower-case "may" never when a pronoun or verb
follows it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import ValidationError
from .times import from_ms, iso_of, now_ms, to_ms

__all__ = ["TimeWindow", "find_time_windows", "parse_time_window", "resolve_tz"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
RECENT_DAYS = 30


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A time expression found in a query, and the window it means.

    Attributes:
        start_ms: first instant inside (epoch ms), or ``None`` when open ("before 2024").
        end_ms: first instant after (exclusive), or ``None`` when open ("since March").
        text: the expression as written in the query (with its preposition).
        span: ``(start, end)`` character offsets of ``text`` in the query.
        query: the query without the expression (what similarity search should use).
        fuzzy: the expression is vague ("recently", "a few weeks ago"): a caller may
            prefer to boost rather than filter on it.
    """

    start_ms: int | None
    end_ms: int | None
    text: str
    span: tuple[int, int]
    query: str
    fuzzy: bool = False

    def contains(self, ms: int) -> bool:
        """An event at ``ms`` falls inside the window."""
        return (self.start_ms is None or ms >= self.start_ms) and (self.end_ms is None or ms < self.end_ms)

    def overlaps(self, valid_from: int, valid_until: int | None) -> bool:
        """A state valid over ``[valid_from, valid_until)`` was valid at some instant of the window.

        A state that began before the window and was still valid in it (an address,
        a job) counts as inside, as the issue asks.
        """
        starts_before_end = self.end_ms is None or valid_from < self.end_ms
        ends_after_start = valid_until is None or self.start_ms is None or valid_until > self.start_ms
        return starts_before_end and ends_after_start

    def describe(self) -> str:
        """``"last week" -> [2024-04-29T00:00:00.000Z, 2024-05-06T00:00:00.000Z)"`` (for ``explain``)."""
        lo = iso_of(self.start_ms) if self.start_ms is not None else "-inf"
        hi = iso_of(self.end_ms) if self.end_ms is not None else "+inf"
        return f"{self.text!r} -> [{lo}, {hi})" + (" (fuzzy)" if self.fuzzy else "")


# -- vocabulary ------------------------------------------------------------------------

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sept": 9,
    "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_WEEKDAYS = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
}
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90, "hundred": 100,
}  # fmt: skip
# Vague quantities: (fewest, most) units.
_VAGUE = {"couple of": (2, 2), "a couple of": (2, 2), "few": (2, 4), "a few": (2, 4), "several": (3, 7)}
# Words after lower-case "may" that make it the verb ("may I", "it may be", "may not").
_MODAL_NEXT = frozenset(
    [
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "it",
        "be",
        "have",
        "not",
        "also",
        "well",
        "still",
        "need",
        "want",
        "help",
        "come",
        "go",
        "get",
        "take",
        "seem",
        "look",
        "find",
        "use",
        "do",
        "make",
        "know",
        "ask",
    ]
)
# Nouns after a bare number that make it a count, not a year ("in 2000 steps").
_COUNT_NOUNS = frozenset(
    [
        "steps",
        "meters",
        "metres",
        "calories",
        "kcal",
        "km",
        "miles",
        "dollars",
        "euros",
        "pounds",
        "people",
        "words",
        "items",
        "points",
        "pages",
        "feet",
        "lines",
        "times",
        "rows",
        "users",
        "tokens",
        "ms",
        "seconds",
        "minutes",
        "hours",
        "bytes",
        "kb",
        "mb",
        "gb",
    ]
)

_CONNECTIVES = frozenset(["and", "or", "at", "in", "on", "when", "where", "with", "to", "for"])

_MONTH_FULL = r"january|february|march|april|may|june|july|august|september|october|november|december"
_MONTH_ANY = _MONTH_FULL + r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
_NUM = (
    r"(?P<n>\d{1,3}|a\s+couple\s+of|couple\s+of|a\s+few|few|several|an?|"
    + "|".join(k for k in _NUMBERS if k not in ("a", "an"))
    + r")"
)
_DAY = r"(?P<day>3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>19\d\d|2[01]\d\d)"
_UNIT = r"(?P<unit>day|week|fortnight|month|year)s?"
_PREPS = (
    r"ever\s+since|since|after|before|prior\s+to|until|till|up\s+to|through|thru|by|as\s+of|"
    r"starting|beginning|from|in|on|during|throughout|of|around|within|over"
)
_PREP_BEFORE = re.compile(rf"(?:^|(?<=\W))(?P<prep>{_PREPS})\s+(?:the\s+)?$", re.IGNORECASE)
# Words before a bare month or year that make it a time (the prepositions, "for" as in
# "plans for 2024", and the joiners of "between March and May", "from 2020 to 2022").
# "for" guards but is never part of a match: "what did I shop for yesterday" keeps it.
_GUARD_BEFORE = re.compile(
    rf"(?:^|(?<=\W))(?:(?:{_PREPS}|for|between)\s+(?:the\s+)?|(?:between|from)\s.{{1,30}}\s(?:and|to|until|till)\s+)$",
    re.IGNORECASE,
)
_BETWEEN_BEFORE = re.compile(r"(?:^|(?<=\W))(?P<w>between|from)\s+$", re.IGNORECASE)
_JOINER = re.compile(r"\s*(?:and|to|until|till|through|thru|-|–)\s*", re.IGNORECASE)
_WORD = re.compile(r"\s*([A-Za-z]+)")
_ON_DATE = re.compile(
    rf"(?:the\s+)?(?:\d\d?(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH_ANY})\b|\d{{4}}-\d\d|(?:{_MONTH_ANY})\b)",
    re.IGNORECASE,
)

# Any word that can start a time expression: a query with none of them is answered
# without running the rules (most queries hold no time at all).
_TRIGGER = re.compile(
    r"\d|\b(?:" + _MONTH_ANY + "|" + "|".join(_WEEKDAYS) + r"|today|tonight|tomorrow|yesterday|"
    r"ago|back|last|past|previous|prior|this|next|current|coming|recently|lately|other|"
    r"spring|summer|autumn|fall|winter|mid)\b",
    re.IGNORECASE,
)


# -- calendar arithmetic ----------------------------------------------------------------


def _add_months(d: date, months: int) -> date:
    """Same day ``months`` later, clamped to the month's last day (31 Mar - 1 month = 29 Feb)."""
    total = d.year * 12 + d.month - 1 + months
    y, m = divmod(total, 12)
    m += 1
    return date(y, m, min(d.day, _month_len(y, m)))


def _month_len(y: int, m: int) -> int:
    nxt = date(y + (m == 12), m % 12 + 1, 1)
    return (nxt - date(y, m, 1)).days


def _month(y: int, m: int) -> tuple[date, date]:
    start = date(y, m, 1)
    return start, _add_months(start, 1)


def _week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _unit_window(d: date, unit: str) -> tuple[date, date]:
    """The calendar unit (day, Monday-week, month, year) containing ``d``."""
    if unit == "day":
        return d, d + timedelta(days=1)
    if unit in ("week", "fortnight"):
        w = _week_start(d)
        return w, w + timedelta(days=7 if unit == "week" else 14)
    if unit == "month":
        return _month(d.year, d.month)
    return date(d.year, 1, 1), date(d.year + 1, 1, 1)


def _shift(d: date, unit: str, n: int) -> date:
    """``d`` moved by ``n`` units (negative: back)."""
    if unit == "day":
        return d + timedelta(days=n)
    if unit == "week":
        return d + timedelta(days=7 * n)
    if unit == "fortnight":
        return d + timedelta(days=14 * n)
    if unit == "month":
        return _add_months(d, n)
    return _add_months(d, 12 * n)


def _recent_month(today: date, month: int, *, strictly_before: bool = False) -> int:
    """The year of ``month``'s most recent occurrence that began on or before ``today``."""
    if month < today.month or (month == today.month and not strictly_before):
        return today.year
    return today.year - 1


_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


def _season(year: int, season: str) -> tuple[date, date]:
    """Meteorological seasons (northern hemisphere): three months from March, June, September, December."""
    start = date(year, _SEASONS[season], 1)
    return start, _add_months(start, 3)


# -- rules ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Core:
    """A rule's match: a window of local days (``None`` = open) over ``[start, end)`` characters."""

    start: int
    end: int
    lo: date | None
    hi: date | None
    fuzzy: bool = False


_Rule = Callable[[re.Match[str], str, date], "tuple[date | None, date | None, bool] | None"]


def _prep_before(text: str, pos: int) -> str | None:
    m = _PREP_BEFORE.search(text, max(0, pos - 16), pos)
    return " ".join(m.group("prep").lower().split()) if m else None


def _guarded(text: str, pos: int) -> bool:
    return _GUARD_BEFORE.search(text, max(0, pos - 48), pos) is not None


def _next_word(text: str, pos: int) -> str | None:
    m = _WORD.match(text, pos)
    return m.group(1).lower() if m else None


def _is_modal_may(m: re.Match[str], text: str) -> bool:
    """Lower-case "may" followed by a pronoun or a verb is the verb ("may I", "this may be")."""
    raw = m.group("month")
    return raw == "may" and _next_word(text, m.end("month")) in _MODAL_NEXT


def _number(raw: str) -> tuple[int, int] | None:
    key = " ".join(raw.lower().split())
    if key in _VAGUE:
        return _VAGUE[key]
    n = int(key) if key.isdigit() else _NUMBERS.get(key)
    return (n, n) if n else None


def _day_words(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    w = " ".join(m.group(0).lower().split())
    offsets = {"yesterday": -1, "last night": -1, "tomorrow": 1}
    if "before yesterday" in w:
        off = -2
    elif "after tomorrow" in w:
        off = 2
    elif "other day" in w:
        return today - timedelta(days=7), today, True
    else:
        off = offsets.get(w, 0)
    d = today + timedelta(days=off)
    return d, d + timedelta(days=1), False


def _ago(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    span = _number(m.group("n"))
    if span is None:
        return None
    unit = m.group("unit").lower()
    fewest, most = span
    about = m.group("about") is not None
    if about:
        fewest, most = max(0, fewest - 1), most + 1
    lo, _ = _unit_window(_shift(today, unit, -most), unit)
    _, hi = _unit_window(_shift(today, unit, -fewest), unit)
    return lo, hi, about or fewest != most


def _last_n(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    span = _number(m.group("n"))
    if span is None:
        return None
    unit = m.group("unit").lower()
    return _shift(today, unit, -span[1]), today + timedelta(days=1), span[0] != span[1]


def _unit_rel(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    mod = m.group("mod").lower()
    unit = m.group("unit").lower()
    if unit == "weekend":
        monday = _week_start(today)
        step = {"last": -1, "previous": -1, "prior": -1, "past": -1, "next": 1, "coming": 1, "following": 1}
        sat = monday + timedelta(days=5 + 7 * step.get(mod, 0))
        return sat, sat + timedelta(days=2), False
    if mod == "past":  # "the past week": the last seven days, ending today
        return _shift(today, unit, -1), today + timedelta(days=1), False
    n = {"last": -1, "previous": -1, "prior": -1, "next": 1, "coming": 1, "following": 1}.get(mod, 0)
    return (*_unit_window(_shift(today, unit, n), unit), False)


def _weekday(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    if m.group("plural"):  # "on Mondays": a habit, not a day
        return None
    mod = " ".join(m.group("mod").lower().split())
    wd = _WEEKDAYS[m.group("wd").lower()]
    if mod == "this":
        d = _week_start(today) + timedelta(days=wd)
    elif mod == "next":
        d = today + timedelta(days=(wd - today.weekday() - 1) % 7 + 1)
    elif mod == "on":  # most recent, today included
        d = today - timedelta(days=(today.weekday() - wd) % 7)
    else:  # last / past / this past: most recent before today
        d = today - timedelta(days=(today.weekday() - wd - 1) % 7 + 1)
    return d, d + timedelta(days=1), False


def _valid_day(y: int, mo: int, d: int) -> date | None:
    try:
        return date(y, mo, d)
    except ValueError:
        return None


def _date(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    if _is_modal_may(m, text):
        return None
    mo = _MONTHS[m.group("month").lower().rstrip(".")]
    day = int(m.group("day"))
    if m.group("year"):
        y = int(m.group("year"))
    else:
        # lower-case "may 3 people": a count after the verb, unless a connective follows
        w = _next_word(text, m.end()) if m.group("month") == "may" else None
        if w is not None and w not in _CONNECTIVES:
            return None
        y = today.year if (mo, day) <= (today.month, today.day) else today.year - 1
        if mo == 2 and day == 29:  # the most recent 29 February
            while _valid_day(y, 2, 29) is None:
                y -= 1
    d = _valid_day(y, mo, day)
    return None if d is None else (d, d + timedelta(days=1), False)


def _iso_date(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    y, mo = int(m.group("y")), int(m.group("m"))
    if not 1 <= mo <= 12 or not 1900 <= y <= 2199:
        return None
    if m.group("d") is None:
        return (*_month(y, mo), False)
    d = _valid_day(y, mo, int(m.group("d")))
    return None if d is None else (d, d + timedelta(days=1), False)


_PARTS = {"early": (1, 11), "mid": (11, 21), "late": (21, 32)}


def _month_part(y: int, mo: int, part: str | None) -> tuple[date, date]:
    if part is None:
        return _month(y, mo)
    first, last = _PARTS[part.lower().rstrip("-")]
    end = min(last, _month_len(y, mo) + 1)
    return date(y, mo, first), (date(y, mo, end) if end <= _month_len(y, mo) else _month(y, mo)[1])


def _month_year(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    if _is_modal_may(m, text):
        return None
    mo = _MONTHS[m.group("month").lower().rstrip(".")]
    return (*_month_part(int(m.group("year")), mo, m.group("part")), False)


def _month_bare(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    mod = " ".join((m.group("mod") or "").lower().split()) or None
    if mod is None and not _guarded(text, m.start()):
        return None  # "March forward", "April said": a month needs a preposition or a modifier
    if _is_modal_may(m, text):
        return None
    mo = _MONTHS[m.group("month").lower()]
    if mod in ("this",):
        y = today.year
    elif mod == "next":
        y = today.year if mo > today.month else today.year + 1
    else:
        y = _recent_month(today, mo, strictly_before=mod in ("last", "past"))
    part = mod if mod in _PARTS else None
    return (*_month_part(y, mo, part), False)


def _year(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    if m.group("theyear") is None and not _guarded(text, m.start()):
        return None  # "2023 meters", "room 1984": a bare number is not a year
    if _next_word(text, m.end()) in _COUNT_NOUNS:
        return None
    y = int(m.group("year"))
    return date(y, 1, 1), date(y + 1, 1, 1), False


def _season_rule(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    season = m.group("season").lower()
    mod = (m.group("mod") or "").lower()
    if m.group("year"):
        return (*_season(int(m.group("year")), season), False)
    if not mod and not _SEASON_BEFORE.search(text, max(0, m.start() - 16), m.start()):
        return None  # "fall asleep", "spring cleaning"
    first = _SEASONS[season]
    begun = today.year if today.month >= first else today.year - 1  # most recent that has begun
    start, end = _season(begun, season)
    current = start <= today < end
    if mod in ("last", "past"):
        year = begun - 1 if current else begun
    elif mod == "next":
        year = begun + 1
    elif mod == "this":
        year = begun if current else today.year
    else:
        year = begun
    return (*_season(year, season), False)


_SEASON_BEFORE = re.compile(
    r"(?:^|(?<=\W))(?:in|during|over|through|since|before|after|until|by|from|between|and|to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)


def _recent(m: re.Match[str], text: str, today: date) -> tuple[date | None, date | None, bool] | None:
    return today - timedelta(days=RECENT_DAYS), today + timedelta(days=1), True


_I = re.IGNORECASE
_RULES: tuple[tuple[re.Pattern[str], _Rule], ...] = (
    (
        re.compile(
            r"\b(?:(?:the\s+)?day\s+before\s+yesterday|(?:the\s+)?day\s+after\s+tomorrow|yesterday|today|"
            r"tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening)|earlier\s+today|"
            r"the\s+other\s+day)\b",
            _I,
        ),
        _day_words,
    ),
    (
        re.compile(
            rf"\b(?P<about>(?:about|around|roughly|approximately|some)\s+)?{_NUM}\s+{_UNIT}\s+(?:ago|back)\b",
            _I,
        ),
        _ago,
    ),
    (
        re.compile(
            rf"\b(?:(?:in|over|during|within)\s+)?(?:the\s+)?(?:last|past|previous|prior)\s+{_NUM}\s+{_UNIT}\b",
            _I,
        ),
        _last_n,
    ),
    (
        re.compile(
            r"\b(?:(?:earlier|later)\s+)?(?:(?:in|over|during|within)\s+)?(?:the\s+)?"
            r"(?P<mod>last|past|previous|prior|this|current|next|coming|following)\s+"
            r"(?P<unit>weekend|week|month|year)\b",
            _I,
        ),
        _unit_rel,
    ),
    (
        re.compile(
            r"\b(?P<mod>on|last|this\s+past|past|this|next)\s+"
            r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?P<plural>s)?\b",
            _I,
        ),
        _weekday,
    ),
    (
        re.compile(
            rf"\b(?P<month>{_MONTH_ANY})\.?\s+{_DAY}\b(?![:.]\d)(?:,?\s+{_YEAR}\b)?",
            _I,
        ),
        _date,
    ),
    (
        re.compile(rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?(?P<month>{_MONTH_ANY})\b\.?(?:,?\s+{_YEAR}\b)?", _I),
        _date,
    ),
    (re.compile(r"\b(?P<y>\d{4})-(?P<m>\d\d)(?:-(?P<d>\d\d))?\b(?!-\d)", _I), _iso_date),
    (
        re.compile(
            rf"\b(?:(?P<part>early|mid|late)[\s-]+)?(?P<month>{_MONTH_ANY})\.?,?\s+(?:of\s+)?{_YEAR}\b(?![.,:/-]?\d)",
            _I,
        ),
        _month_year,
    ),
    (
        re.compile(
            r"\b(?:(?P<mod>last|this|next|past|early|mid|late)(?:\s+|-))?"
            rf"(?P<month>{_MONTH_FULL})\b",
            _I,
        ),
        _month_bare,
    ),
    (
        re.compile(rf"\b(?P<theyear>the\s+year\s+)?(?<![\d,.$€£-]){_YEAR}\b(?![.,:/-]?\d)", _I),
        _year,
    ),
    (
        re.compile(
            rf"\b(?:the\s+(?=\w+\s+(?:of\s+)?\d))?(?:(?P<mod>last|this|next|past)\s+)?(?P<season>spring|summer|autumn|fall|winter)\b"
            rf"(?:\s+(?:of\s+)?{_YEAR}\b)?",
            _I,
        ),
        _season_rule,
    ),
    (re.compile(r"\b(?:recently|lately)\b", _I), _recent),
)


# -- the parser --------------------------------------------------------------------------


def resolve_tz(tz: object) -> tzinfo:
    """``tz=`` as a ``tzinfo``: ``None`` is UTC, a string an IANA zone name ("Europe/Lisbon").

    Raises:
        ValidationError: ``validation.timezone`` for an unknown name or another type.
    """
    if tz is None:
        return UTC
    if isinstance(tz, tzinfo):
        return tz
    if isinstance(tz, str) and tz.strip():
        try:
            return ZoneInfo(tz.strip())
        except (ZoneInfoNotFoundError, ValueError):
            pass
    raise ValidationError(
        f"tz must be an IANA time zone name (e.g. 'Europe/Lisbon') or a tzinfo, got {tz!r}",
        code="validation.timezone",
        details={"argument": "tz", "value": repr(tz)[:80]},
    )


def _local_ms(d: date, zone: tzinfo) -> int:
    return (datetime(d.year, d.month, d.day, tzinfo=zone) - _EPOCH) // _ONE_MS


_MONTH_STEMS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# Per rule (same order as ``_RULES``), words one of which its match must contain; "#" a digit.
# A rule whose words are all absent is not run: most queries wake one or two rules.
_GATES: tuple[tuple[str, ...], ...] = (
    ("yesterday", "today", "tonight", "tomorrow", "night", "morning", "afternoon", "evening", "other day"),
    ("ago", "back"),
    ("last", "past", "previous", "prior"),
    ("week", "month", "year"),
    ("day",),  # every weekday name ends in "day"
    _MONTH_STEMS,
    _MONTH_STEMS,
    ("#",),
    _MONTH_STEMS,
    _MONTH_STEMS,
    ("#",),
    ("spring", "summer", "autumn", "fall", "winter"),
    ("recently", "lately"),
)


def _cores(text: str, today: date) -> list[_Core]:
    """Every rule's matches, then the leftmost-longest ones that do not overlap."""
    found: list[_Core] = []
    lower = text.lower()
    digit = any(ch.isdigit() for ch in text)
    for (pattern, rule), gate in zip(_RULES, _GATES, strict=True):
        if not any(digit if g == "#" else g in lower for g in gate):
            continue
        for m in pattern.finditer(text):
            out = rule(m, text, today)
            if out is not None:
                found.append(_Core(m.start(), m.end(), *out))
    found.sort(key=lambda c: (c.start, -c.end))
    chosen: list[_Core] = []
    for c in found:
        if not chosen or c.start >= chosen[-1].end:
            chosen.append(c)
    return chosen


def _with_bounds(text: str, cores: list[_Core]) -> list[_Core]:
    """Join "between X and Y" / "from X to Y", and take a preposition before each expression.

    "since X" / "from X" keep X's start and open the end; "after X" starts at X's end;
    "before X" ends at X's start; "until X" / "by X" / "through X" end at X's end;
    "in" / "on" / "during" ... only join the span.
    """
    out: list[_Core] = []
    i = 0
    while i < len(cores):
        c = cores[i]
        if i + 1 < len(cores):
            nxt = cores[i + 1]
            between = _BETWEEN_BEFORE.search(text, max(0, c.start - 12), c.start)
            if between and _JOINER.fullmatch(text, c.end, nxt.start):
                lo = c.lo
                # "between March and May 2023": a first part without its own year takes
                # the second's (it was resolved to its most recent occurrence).
                while lo is not None and nxt.lo is not None and lo > nxt.lo:
                    lo = _add_months(lo, -12)
                out.append(_Core(between.start(), nxt.end, lo, nxt.hi, c.fuzzy or nxt.fuzzy))
                i += 2
                continue
        m = _PREP_BEFORE.search(text, max(0, c.start - 16), c.start)
        if m:
            prep = " ".join(m.group("prep").lower().split())
            lo, hi = c.lo, c.hi
            if prep in ("since", "ever since", "from", "starting", "beginning", "as of"):
                hi = None
            elif prep == "after":
                lo, hi = c.hi, None
            elif prep in ("before", "prior to"):
                lo, hi = None, c.lo
            elif prep in ("until", "till", "up to", "by", "through", "thru"):
                lo = None
            elif prep == "on" and not _ON_DATE.match(text, c.start):
                # "on" goes with a date ("on 8 May", "on the 8th of May"); before anything
                # else it belongs to the verb ("what did I work on this month"): leave it.
                out.append(c)
                i += 1
                continue
            c = _Core(m.start(), c.end, lo, hi, c.fuzzy)
        out.append(c)
        i += 1
    return out


def _without(text: str, start: int, end: int) -> str:
    rest = (text[:start] + " " + text[end:]).strip()
    rest = re.sub(r"\s+([?.!,;:])", r"\1", rest)
    return " ".join(rest.lstrip(",;: ").split())


def find_time_windows(query: str, *, as_of: object = None, tz: object = None) -> list[TimeWindow]:
    """Every time expression of ``query``, left to right (see ``parse_time_window``)."""
    if not isinstance(query, str):
        raise ValidationError(
            f"query must be a string, not {type(query).__name__}",
            code="validation.type",
            details={"argument": "query", "type": type(query).__name__},
        )
    zone = resolve_tz(tz)
    ref = now_ms() if as_of is None else to_ms(as_of, name="as_of")
    if not _TRIGGER.search(query):
        return []
    today = from_ms(ref).astimezone(zone).date()
    out = []
    for c in _with_bounds(query, _cores(query, today)):
        out.append(
            TimeWindow(
                start_ms=None if c.lo is None else _local_ms(c.lo, zone),
                end_ms=None if c.hi is None else _local_ms(c.hi, zone),
                text=query[c.start : c.end],
                span=(c.start, c.end),
                query=_without(query, c.start, c.end),
                fuzzy=c.fuzzy,
            )
        )
    return out


def parse_time_window(query: str, *, as_of: object = None, tz: object = None) -> TimeWindow | None:
    """The first time expression of a recall query, resolved to a window; ``None`` when there is none.

    Args:
        query: the recall query (English).
        as_of: the instant "now" means (``datetime``, epoch ms or ISO 8601 text);
            default the current time. Relative expressions count from its day.
        tz: the calendar the days are counted in: an IANA zone name or a ``tzinfo``;
            default UTC. "Yesterday" in Lisbon starts at Lisbon's midnight.

    Returns:
        The window with the matched text, its span and the query without it, or
        ``None``. A query with no time expression costs one regex search.

    Raises:
        ValidationError: a non-string query (``validation.type``), a bad ``as_of``
            (as ``times.to_ms``) or ``tz`` (``validation.timezone``).
    """
    found = find_time_windows(query, as_of=as_of, tz=tz)
    return found[0] if found else None
