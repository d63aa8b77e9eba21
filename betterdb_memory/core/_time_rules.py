"""The rules of ``core.timewindow``: one pattern and one handler per form of time expression.

Each handler takes the match, the whole query and today's local date, and returns the
window as local days ``(first, first_after, fuzzy)`` (``None`` for an open side), or
``None`` when the match is a word that only looks like a time ("may I", "march
forward"). ``cores`` runs the rules whose words occur in the query and keeps the
leftmost-longest matches. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from ._calendar import (
    _PARTS,
    _SEASONS,
    _month,
    _month_part,
    _recent_month,
    _season,
    _shift,
    _unit_window,
    _valid_day,
    _week_start,
)
from ._time_words import (
    _CONNECTIVES,
    _COUNT_NOUNS,
    _DAY,
    _GUARD_BEFORE,
    _MODAL_NEXT,
    _MONTH_ANY,
    _MONTH_FULL,
    _MONTHS,
    _NUM,
    _NUMBERS,
    _PREP_BEFORE,
    _UNIT,
    _VAGUE,
    _WEEKDAYS,
    _WORD,
    _YEAR,
)

RECENT_DAYS = 30  # "recently", "lately"


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
# The gates as one regex search each: a word anywhere in the lowered text (the test
# ``any(g in lower for g in gate)``), "#" a decimal digit in the text (what the rules'
# ``\d`` can match), without a Python loop over the words (a third of a query's parse).
_GATE_SEARCH = tuple(
    re.compile(r"\d").search if gate == ("#",) else re.compile("|".join(map(re.escape, gate))).search
    for gate in _GATES
)
_ON_TEXT = tuple(gate == ("#",) for gate in _GATES)  # a digit gate reads the text as written


def _matches(text: str) -> tuple[tuple[_Rule, re.Match[str]], ...]:
    """Every rule's matches in ``text`` with the rule that resolves each: what does not depend on the day.

    Two thirds of a parse (the gates and the patterns); ``_cores`` resolves them for a
    day. A recall reads its question against two days (its own "now" for the window, the
    store's latest write for the ranker's date features), so these are kept per question
    by the caller (``timewindow``).
    """
    lower = text.lower()
    return tuple(
        (rule, m)
        for (pattern, rule), on_text, search in zip(_RULES, _ON_TEXT, _GATE_SEARCH, strict=True)
        if search(text if on_text else lower) is not None
        for m in pattern.finditer(text)
    )


def _cores(text: str, today: date, matches: tuple[tuple[_Rule, re.Match[str]], ...]) -> list[_Core]:
    """The rules' ``matches`` of ``text`` (``_matches``) resolved for ``today``; the leftmost-longest that do not overlap."""
    found: list[_Core] = []
    for rule, m in matches:
        out = rule(m, text, today)
        if out is not None:
            found.append(_Core(m.start(), m.end(), *out))
    found.sort(key=lambda c: (c.start, -c.end))
    chosen: list[_Core] = []
    for c in found:
        if not chosen or c.start >= chosen[-1].end:
            chosen.append(c)
    return chosen
