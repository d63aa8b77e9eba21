"""Calendar arithmetic on local days for ``core.timewindow``: months, Monday weeks, seasons. Pure.

Every window is a half-open pair of ``date`` s (the first day in, the first day out),
turned into epoch ms in the caller's time zone only at the end.
"""

from __future__ import annotations

from datetime import date, timedelta


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


def _valid_day(y: int, mo: int, d: int) -> date | None:
    try:
        return date(y, mo, d)
    except ValueError:
        return None


_PARTS = {"early": (1, 11), "mid": (11, 21), "late": (21, 32)}


def _month_part(y: int, mo: int, part: str | None) -> tuple[date, date]:
    if part is None:
        return _month(y, mo)
    first, last = _PARTS[part.lower().rstrip("-")]
    end = min(last, _month_len(y, mo) + 1)
    return date(y, mo, first), (date(y, mo, end) if end <= _month_len(y, mo) else _month(y, mo)[1])
