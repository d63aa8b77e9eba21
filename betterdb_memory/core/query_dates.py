"""The time a query names, as ranking features: its months, years and days (``LearnedRanker``'s).

A question that names a time ("what did Melanie paint in May 2023?", "on 8 May,
2023") is most often answered by a memory from that time. Conversations imported
after the fact carry each turn's date in ``valid_from``; a memory written live has its
``created_at``. These helpers turn the question's time expressions, as the package's
one time parser reads them (``timewindow.find_time_windows``: no second parser), into
three 0/1 features per candidate: its date falls in a month, a year, or a day the
question names. Pure: no I/O, no clock (relative expressions count from ``as_of``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .times import from_ms
from .timewindow import find_time_windows

__all__ = ["QueryDates", "date_columns", "query_dates"]


@dataclass(frozen=True, slots=True)
class QueryDates:
    """What a query's time expressions name: calendar months (1-12), years, and day windows."""

    months: frozenset[int]
    years: frozenset[int]
    days: tuple[tuple[int, int], ...]  # [start_ms, end_ms) of each window at most one day long

    def __bool__(self) -> bool:
        return bool(self.months or self.years or self.days)


_DAY_MS = 86_400_000


def query_dates(query: str, as_of: int) -> QueryDates:
    """The months, years and days the query's time expressions fall in (``as_of``: epoch ms).

    The package's one time parser (``timewindow.find_time_windows``) reads the
    expressions; a window inside one calendar month gives its month ("in May", "on 8
    May, 2023", "last month"), one inside a calendar year its year ("in 2023", "in May
    2023"), one at most a day long its day ("on 8 May, 2023", "yesterday"). Vague
    expressions ("recently") and open bounds ("since March") give nothing. The month is
    matched without its year: "in May" resolves to the latest May, and a memory dated
    another May may still be the one meant. Relative expressions count from ``as_of``
    (UTC calendar).
    """
    months: set[int] = set()
    years: set[int] = set()
    days: list[tuple[int, int]] = []
    for w in find_time_windows(query, as_of=as_of):
        if w.fuzzy or w.start_ms is None or w.end_ms is None or w.end_ms <= w.start_ms:
            continue
        if w.end_ms - w.start_ms <= _DAY_MS:
            days.append((w.start_ms, w.end_ms))
        lo, hi = from_ms(w.start_ms), from_ms(w.end_ms - 1)
        if lo.year == hi.year:
            years.add(lo.year)
            if lo.month == hi.month:
                months.add(lo.month)
    return QueryDates(frozenset(months), frozenset(years), tuple(days))


def date_columns(named: QueryDates, dates: Sequence[int]) -> tuple[list[float], list[float], list[float]]:
    """``month``, ``year`` and ``day`` of each candidate date (epoch ms, UTC) against ``named``.

    All 0 when the query names no time (most queries: one pass of the parser's trigger).
    """
    n = len(dates)
    month, year, day = [0.0] * n, [0.0] * n, [0.0] * n
    if not named:
        return month, year, day
    for i, ms in enumerate(dates):
        when = from_ms(ms)
        month[i] = 1.0 if when.month in named.months else 0.0
        year[i] = 1.0 if when.year in named.years else 0.0
        day[i] = 1.0 if any(lo <= ms < hi for lo, hi in named.days) else 0.0
    return month, year, day
