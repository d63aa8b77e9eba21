"""The progress display: a redrawn bar on a terminal, periodic plain lines elsewhere."""

from __future__ import annotations

import io

import pytest

from betterdb_memory.progress import NullProgress, Progress, ProgressSink, format_duration


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_terminal_draws_one_line_with_total_rate_and_eta() -> None:
    """On a tty the bar is redrawn in place (``\\r``), with count, percent, rate and ETA, and ends with a newline."""
    out, clock = io.StringIO(), Clock()
    p = Progress(out, tty=True, width=10, clock=clock)
    p.begin("export memories", 1000)
    clock.now += 2.0
    p.advance(250)
    assert out.getvalue().split("\r")[-1] == (
        "export memories [##········] 250/1,000  25%  125/s  ETA 0:06\x1b[K"
    )
    clock.now += 0.05  # within 0.1 s: no redraw
    p.advance(10)
    assert "260/" not in out.getvalue()
    clock.now += 6.0
    p.advance(740)
    p.end()
    final = out.getvalue().split("\r")[-1]
    assert final.startswith("export memories [##########] 1,000/1,000 100%") and final.endswith(
        "in 0:08\x1b[K\n"
    )
    assert "\n" not in out.getvalue()[:-1]  # one line, redrawn


def test_plain_lines_are_periodic_and_end_with_a_summary() -> None:
    """Not a tty: a line every ``interval`` seconds (none in between), then ``done`` with the rate."""
    out, clock = io.StringIO(), Clock()
    p = Progress(out, tty=False, interval=5.0, clock=clock)
    p.begin("import", 100)
    for _ in range(4):
        clock.now += 1.0
        p.advance(10)
    assert out.getvalue() == ""
    clock.now += 1.0
    p.advance(10)
    assert out.getvalue() == "import: 50/100 (50%), 10/s, ETA 5.0s\n"
    clock.now += 5.0
    p.advance(50)
    p.end()
    assert out.getvalue().splitlines()[-1] == "import: done, 100 in 10.0s (10/s)"
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_unknown_total_and_phases() -> None:
    """Without a total there is no bar or ETA; a new phase ends the previous one."""
    out, clock = io.StringIO(), Clock()
    p = Progress(out, tty=False, interval=1.0, clock=clock)
    p.begin("export fact history")
    clock.now += 2.0
    p.advance(7)
    p.begin("export sessions and state")
    p.end()
    lines = out.getvalue().splitlines()
    assert lines == [
        "export fact history: 7, 4/s",
        "export fact history: done, 7 in 2.0s (4/s)",
        "export sessions and state: done, 0 in 0.0s (0/s)",
    ]
    tty = io.StringIO()
    t = Progress(tty, tty=True, clock=clock)
    t.begin("scan")
    clock.now += 1.0
    t.advance(3)
    assert tty.getvalue().split("\r")[-1] == "scan 3  3/s\x1b[K"


def test_stream_decides_tty_and_end_is_idempotent() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Progress(Tty()).tty and not Progress(io.StringIO()).tty
    out = io.StringIO()
    p = Progress(out, tty=False)
    p.end()
    assert out.getvalue() == ""


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (4.4, "0:04"), (750, "12:30"), (3723, "1:02:03")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_sinks_satisfy_the_protocol() -> None:
    assert isinstance(Progress(io.StringIO()), ProgressSink) and isinstance(NullProgress(), ProgressSink)


def test_check_progress_takes_a_sink_or_none_and_refuses_the_rest() -> None:
    from betterdb_memory.errors import ValidationError
    from betterdb_memory.progress import check_progress

    assert isinstance(check_progress(None), NullProgress)
    sink = NullProgress()
    assert check_progress(sink) is sink
    for bad in (object(), "bar", print):
        with pytest.raises(ValidationError) as err:
            check_progress(bad, "progress")
        assert err.value.code == "validation.type" and err.value.details["argument"] == "progress"
