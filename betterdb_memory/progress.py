"""Progress of long operations (export, import, re-embedding): a bar on a terminal, plain lines elsewhere.

No dependency: a small class with three methods, ``begin`` / ``advance`` / ``end``,
which is also the protocol the operations accept (``ProgressSink``), so a caller can
pass an adapter to tqdm, rich or a log instead.

On a terminal (the stream's ``isatty()``) one line is redrawn in place at most ten
times a second::

    export memories [############··················]  4,200/10,000  42%  1,310/s  ETA 0:04

Anywhere else (a pipe, a CI log, a file) a plain line every ``interval`` seconds and
one at the end, so logs stay readable and small::

    export memories: 4,200/10,000 (42%), 1,310/s, ETA 4s
    export memories: done, 10,000 in 7.6s (1,310/s)

Progress goes to standard error by default, so ``--json`` output on standard output
stays machine-readable.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Protocol, TextIO, runtime_checkable

from .errors import ValidationError

__all__ = ["NullProgress", "Progress", "ProgressSink", "check_progress", "format_duration"]


@runtime_checkable
class ProgressSink(Protocol):
    """What a long operation reports to: phases, each with an optional total, and steps done."""

    def begin(self, label: str, total: int | None = None) -> None:
        """A new phase starts (its count starts at 0); ``total`` None when unknown."""
        ...

    def advance(self, n: int = 1) -> None:
        """``n`` more items of the current phase are done."""
        ...

    def end(self) -> None:
        """The current phase is over (a final line)."""
        ...


def check_progress(value: object, argument: str = "progress") -> ProgressSink:
    """``value`` as a ``ProgressSink`` (None: ``NullProgress``), checked before any work starts.

    Raises:
        ValidationError: it lacks ``begin`` / ``advance`` / ``end`` (code ``validation.type``),
            so nothing was read, written or deleted.
    """
    if value is None:
        return NullProgress()
    if not isinstance(value, ProgressSink):
        raise ValidationError(
            f"{argument} must have begin(label, total), advance(n) and end() methods, "
            f"got {type(value).__name__}",
            code="validation.type",
            details={"argument": argument, "type": type(value).__name__},
        )
    return value


class NullProgress:
    """Reports nothing (the default of the Python API)."""

    def begin(self, label: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def end(self) -> None:
        pass


def format_duration(seconds: float) -> str:
    """``0:04``, ``12:30``, ``1:02:03``: a compact clock for an ETA or an elapsed time."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(seconds)


class Progress:
    """A progress display: a redrawn bar on a terminal, periodic plain lines otherwise.

    Args:
        stream: where to write (standard error by default).
        tty: force the terminal (True) or plain (False) style; default: ``stream.isatty()``.
        interval: seconds between plain lines (the bar redraws at most every 0.1 s).
        width: characters of the bar.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        tty: bool | None = None,
        interval: float = 5.0,
        width: int = 30,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        self.interval = interval
        self.width = width
        self._clock = clock
        self.label = ""
        self.total: int | None = None
        self.done = 0
        self._started = 0.0
        self._last_draw = float("-inf")
        self._open = False

    # -- ProgressSink ---------------------------------------------------------------------

    def begin(self, label: str, total: int | None = None) -> None:
        if self._open:
            self.end()
        self.label, self.total, self.done = label, total, 0
        self._started = self._clock()
        self._last_draw = self._started if not self.tty else float("-inf")
        self._open = True
        if self.tty:
            self._draw()

    def advance(self, n: int = 1) -> None:
        if not self._open:
            self.begin(self.label)
        self.done += n
        now = self._clock()
        if now - self._last_draw >= (0.1 if self.tty else self.interval):
            self._last_draw = now
            self._draw()

    def end(self) -> None:
        if not self._open:
            return
        self._open = False
        elapsed = self._clock() - self._started
        if self.tty:
            self._write("\r" + self._bar_line(final=True) + "\x1b[K\n")
        else:
            rate = self.done / elapsed if elapsed > 0 else 0.0
            self._write(f"{self.label}: done, {self.done:,} in {_seconds(elapsed)} ({rate:,.0f}/s)\n")

    # -- rendering --------------------------------------------------------------------------

    def rate(self) -> float:
        """Items per second since the phase began (the mean: steadier than a moving window)."""
        elapsed = self._clock() - self._started
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float | None:
        """Seconds left at the mean rate; None without a total or a rate."""
        rate = self.rate()
        if self.total is None or rate <= 0:
            return None
        return max(0.0, (self.total - self.done) / rate)

    def _bar_line(self, *, final: bool = False) -> str:
        rate = self.rate()
        if self.total:
            frac = min(1.0, self.done / self.total)
            filled = int(frac * self.width)
            bar = "#" * filled + "·" * (self.width - filled)
            eta = self.eta()
            tail = (
                f"in {format_duration(self._clock() - self._started)}"
                if final
                else (f"ETA {format_duration(eta)}" if eta is not None else "ETA --:--")
            )
            return f"{self.label} [{bar}] {self.done:,}/{self.total:,} {frac:4.0%}  {rate:,.0f}/s  {tail}"
        tail = f"in {format_duration(self._clock() - self._started)}" if final else ""
        return f"{self.label} {self.done:,}  {rate:,.0f}/s  {tail}".rstrip()

    def _plain_line(self) -> str:
        rate = self.rate()
        if self.total:
            eta = self.eta()
            eta_text = f", ETA {_seconds(eta)}" if eta is not None else ""
            return (
                f"{self.label}: {self.done:,}/{self.total:,} ({self.done / self.total:.0%}), "
                f"{rate:,.0f}/s{eta_text}"
            )
        return f"{self.label}: {self.done:,}, {rate:,.0f}/s"

    def _draw(self) -> None:
        if self.tty:
            self._write("\r" + self._bar_line() + "\x1b[K")
        else:
            self._write(self._plain_line() + "\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
