"""Event times at the API boundary: ``valid_from``, ``as_of``, ``since``, ``until`` to epoch ms.

Every stored time in this library is an ``int`` of epoch milliseconds (``created_at``,
``last_accessed_at``, ``expires_at``: the reference library's unit), so the times a
caller gives about events are turned into the same unit once, here, before any I/O.
A caller may give:

* an aware ``datetime`` (converted to UTC) or a naive one (taken as UTC: the server
  has no zone, and guessing the machine's local zone would make the same call store
  a different instant on another host);
* a ``date`` (its first instant, UTC);
* epoch milliseconds as an ``int`` (never a ``bool``, which is an ``int`` to Python
  but never a time; never a ``float``, whose seconds-vs-milliseconds ambiguity is
  the classic bug this unit choice avoids);
* ISO 8601 text: a date, a date-time with ``Z`` or an offset (naive is UTC), or the
  reduced forms ``YYYY-MM`` and ``YYYY`` (their first instant).

Instants must fall in the years 1900-9999 (UTC): enough for birthdays and plans, and
a bound that keeps a typo (``20244-01-01``, seconds passed as ms) from being stored
as a date no query will ever reach.

Mistakes raise ``ValidationError`` before anything is sent, one code per mistake:
``validation.type`` (not a time at all), ``validation.time_format`` (text that is not
ISO 8601), ``validation.range`` (outside 1900-9999), ``validation.time_window``
(``since`` after ``until``). ``details`` names the argument and the value.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, date, datetime, timedelta

from ..errors import ValidationError
from .arguments import is_int

__all__ = [
    "MAX_MS",
    "MAX_YEAR",
    "MIN_MS",
    "MIN_YEAR",
    "check_window",
    "from_ms",
    "iso_of",
    "now_ms",
    "optional_ms",
    "to_ms",
]

MIN_YEAR = 1900
MAX_YEAR = 9999
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
#: First and last instant accepted, in epoch ms (1900-01-01T00:00:00Z, 9999-12-31T23:59:59.999Z).
MIN_MS = (datetime(MIN_YEAR, 1, 1, tzinfo=UTC) - _EPOCH) // _ONE_MS
MAX_MS = (datetime(MAX_YEAR, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - _EPOCH) // _ONE_MS

# ``datetime.fromisoformat`` (3.11) reads full ISO 8601 dates and date-times; these
# reduced precisions it does not, and a fact date may well be "2024-05" or "2024".
_YEAR_MONTH = re.compile(r"(\d{4})(?:-(\d{2}))?")
_SHOWN = 80  # characters of a bad value kept in an error's details


def now_ms() -> int:
    """The current instant in epoch ms (the default ``valid_from`` and ``as_of``)."""
    return time.time_ns() // 1_000_000


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _range_error(name: str, value: object) -> ValidationError:
    return ValidationError(
        f"{name} must fall in the years {MIN_YEAR}-{MAX_YEAR} (UTC), got {_shown(value)}",
        code="validation.range",
        details={"argument": name, "value": _shown(value), "min": MIN_MS, "max": MAX_MS},
    )


def _of_datetime(value: datetime, name: str, original: object) -> int:
    aware = value.replace(tzinfo=UTC) if value.tzinfo is None else value
    # Subtraction of aware datetimes works on their UTC offsets without building a
    # UTC datetime, so 9999-12-31T23:00-05:00 (past year 9999 in UTC) cannot overflow.
    ms = (aware - _EPOCH) // _ONE_MS
    if not MIN_MS <= ms <= MAX_MS:
        raise _range_error(name, original)
    return ms


def _of_text(value: str, name: str) -> int:
    text = value.strip()
    try:
        m = _YEAR_MONTH.fullmatch(text)
        if m:
            parsed = datetime(int(m.group(1)), int(m.group(2) or 1), 1)
        else:
            parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"{name} must be ISO 8601 text (2024-05-01, 2024-05-01T09:30:00Z, 2024-05), got {_shown(value)}",
            code="validation.time_format",
            details={"argument": name, "value": _shown(value)},
        ) from None
    return _of_datetime(parsed, name, value)


def to_ms(value: object, *, name: str = "valid_from") -> int:
    """A time as epoch milliseconds (UTC).

    Args:
        value: an aware or naive ``datetime`` (naive is UTC), a ``date``, epoch
            milliseconds as an ``int``, or ISO 8601 text.
        name: the argument's name, for the error.

    Returns:
        Epoch milliseconds, within ``MIN_MS``..``MAX_MS``.

    Raises:
        ValidationError: ``validation.type`` for a value of another type (``bool``,
            ``float``, ``None``, ...), ``validation.time_format`` for text that is
            not ISO 8601, ``validation.range`` outside the years 1900-9999.
    """
    if isinstance(value, datetime):
        return _of_datetime(value, name, value)
    if isinstance(value, date):
        return _of_datetime(datetime(value.year, value.month, value.day), name, value)
    if is_int(value):
        if not MIN_MS <= value <= MAX_MS:
            raise _range_error(name, value)
        return value
    if isinstance(value, str):
        return _of_text(value, name)
    raise ValidationError(
        f"{name} must be a datetime, epoch milliseconds (int) or ISO 8601 text, not {type(value).__name__}",
        code="validation.type",
        details={"argument": name, "type": type(value).__name__},
    )


def optional_ms(value: object, *, name: str) -> int | None:
    """``to_ms`` for an optional argument: ``None`` stays ``None``."""
    return None if value is None else to_ms(value, name=name)


def check_window(since: object, until: object) -> tuple[int | None, int | None]:
    """``since`` / ``until`` as epoch ms: the half-open window ``since <= valid_from < until``.

    Either may be ``None`` (unbounded on that side). ``since == until`` is an empty
    window, allowed (it matches nothing, as a range does); ``since > until`` is a
    mistake, refused rather than silently matching nothing.

    Raises:
        ValidationError: as ``to_ms`` for either bound; ``validation.time_window``
            when ``since`` is after ``until``.
    """
    lo = optional_ms(since, name="since")
    hi = optional_ms(until, name="until")
    if lo is not None and hi is not None and lo > hi:
        raise ValidationError(
            f"since ({iso_of(lo)}) is after until ({iso_of(hi)})",
            code="validation.time_window",
            details={"argument": "since", "since": lo, "until": hi},
        )
    return lo, hi


def from_ms(ms: int) -> datetime:
    """Epoch ms to an aware UTC ``datetime`` (exact to the millisecond, unlike ``fromtimestamp``)."""
    return _EPOCH + timedelta(milliseconds=ms)


def iso_of(ms: int) -> str:
    """Epoch ms as ISO 8601 text in UTC with a ``Z`` (what ``explain`` and errors show)."""
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
