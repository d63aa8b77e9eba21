"""The words of time expressions: vocabulary, regular-expression pieces, and look-arounds.

Private to ``core.timewindow`` (whose docstring says which forms are understood and
why); ``core._time_rules`` builds its patterns from these pieces. Pure.
"""

from __future__ import annotations

import re

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
