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

Layout: this module holds the public window and the parser's last steps (bounds,
prepositions, the rest of the query); the rules are in ``_time_rules``, their words in
``_time_words``, the calendar arithmetic in ``_calendar``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import ValidationError
from ._calendar import _add_months
from ._time_rules import _Core, _cores, _matches, _Rule
from ._time_words import _BETWEEN_BEFORE, _JOINER, _ON_DATE, _PREP_BEFORE, _TRIGGER
from .times import from_ms, iso_of, now_ms, to_ms

__all__ = ["TimeWindow", "find_time_windows", "parse_time_window", "resolve_tz"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


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
    today = from_ms(ref).astimezone(zone).date()
    if len(query) <= _CACHED_CHARS:
        return list(_cached(query, today, zone))
    return _windows(query, today, zone)


def _windows(query: str, today: date, zone: tzinfo) -> list[TimeWindow]:
    found = _found(query) if len(query) <= _CACHED_CHARS else _match(query)
    if found is None:  # most queries: one regex search
        return []
    return [
        TimeWindow(
            start_ms=None if c.lo is None else _local_ms(c.lo, zone),
            end_ms=None if c.hi is None else _local_ms(c.hi, zone),
            text=query[c.start : c.end],
            span=(c.start, c.end),
            query=_without(query, c.start, c.end),
            fuzzy=c.fuzzy,
        )
        for c in _with_bounds(query, _cores(query, today, found))
    ]


def _match(query: str) -> tuple[tuple[_Rule, re.Match[str]], ...] | None:
    """The rules' matches of ``query`` (``_time_rules._matches``); None when nothing triggers."""
    return _matches(query) if _TRIGGER.search(query) else None


# A recall parses its question twice, as a time plan (against its "now") and for the
# ranker's date features (``query_dates``, against the store's latest write: most often
# another day). The windows of a (question, day, zone) are kept, and per question what
# does not depend on the day (``_found``: the trigger and the rules' matches, two thirds
# of a parse), for questions of a recall's usual length (the bound keeps the caches small).
_CACHED_CHARS = 512
_found = functools.lru_cache(maxsize=256)(_match)


@functools.lru_cache(maxsize=256)
def _cached(query: str, today: date, zone: tzinfo) -> tuple[TimeWindow, ...]:
    return tuple(_windows(query, today, zone))


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
        ``None``. A query with no time expression costs one regex search (a
        question seen again the same day, a cache lookup).

    Raises:
        ValidationError: a non-string query (``validation.type``), a bad ``as_of``
            (as ``times.to_ms``) or ``tz`` (``validation.timezone``).
    """
    found = find_time_windows(query, as_of=as_of, tz=tz)
    return found[0] if found else None
