"""Measurement and reporting helpers for the benchmarks: no library code, no scenarios.

Three ideas live here:

* ``interleave``: run the library side and the raw side of a comparison in
  alternating rounds (the order flips every round), so load from other processes on
  a shared machine drifts into both columns equally instead of into one.
* ``Recorder``: the commands a client sends while it is active, one entry per round
  trip (a command, or a pipeline's commands), so the raw side of a comparison can be
  checked against exactly what the library issues.
* ``Row`` / ``render_*``: medians, p99s and ratios as markdown tables.
"""

from __future__ import annotations

import asyncio
import math
import os
import platform
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "Op",
    "Pair",
    "Recorder",
    "Row",
    "Samples",
    "concurrent",
    "cpu_count",
    "cpu_model",
    "interleave",
    "is_background",
    "render_rows",
    "summarize_trips",
]

# One measured call: receives the round number; returns per-op latencies (seconds)
# when it ran several ops concurrently, or None when the call itself is one op.
Op = Callable[[int], Awaitable[list[float] | None]]


@dataclass(slots=True)
class Samples:
    """What one side of a comparison measured."""

    latencies: list[float] = field(default_factory=list)  # seconds per op (or per batch)
    ops: int = 0  # operations completed (memories written, queries run, ...)
    seconds: float = 0.0  # wall time spent in measured calls
    memory_delta: int = 0  # sum of used_memory deltas around measured calls (when probed)

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies) if self.latencies else math.nan

    @property
    def p99(self) -> float:
        return float(np.percentile(self.latencies, 99)) if self.latencies else math.nan

    @property
    def throughput(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else math.nan


@dataclass(slots=True)
class Pair:
    ours: Samples = field(default_factory=Samples)
    raw: Samples = field(default_factory=Samples)


async def interleave(
    ours: Op,
    raw: Op,
    *,
    rounds: int,
    budget_s: float,
    min_rounds: int = 5,
    ops_per_call: int = 1,
    memory_probe: Callable[[], Awaitable[int]] | None = None,
) -> Pair:
    """Alternate ``ours`` and ``raw`` for ``rounds`` rounds (or until ``budget_s`` is spent).

    Round ``i`` runs ours-then-raw when ``i`` is even and raw-then-ours when odd.
    ``memory_probe`` (untimed) is read before and after each call, and the deltas are
    summed per side.
    """
    pair = Pair()
    start = time.perf_counter()
    for i in range(rounds):
        if i >= min_rounds and time.perf_counter() - start > budget_s:
            break
        sides = ((ours, pair.ours), (raw, pair.raw))
        for fn, out in sides if i % 2 == 0 else sides[::-1]:
            before = await memory_probe() if memory_probe else 0
            t0 = time.perf_counter()
            per_op = await fn(i)
            elapsed = time.perf_counter() - t0
            if memory_probe:
                out.memory_delta += await memory_probe() - before
            out.seconds += elapsed
            if per_op is None:
                out.latencies.append(elapsed)
                out.ops += ops_per_call
            else:
                out.latencies.extend(per_op)
                out.ops += len(per_op)
    return pair


async def concurrent(calls: Sequence[Callable[[], Awaitable[object]]], width: int) -> list[float]:
    """Run ``calls`` with ``width`` in flight; returns each call's latency in seconds."""
    latencies: list[float] = []
    pending = iter(calls)

    async def worker() -> None:
        for call in pending:  # the shared iterator hands each call to one worker
            t0 = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(width)))
    return latencies


# -- what the library sends -----------------------------------------------------------------


# The stores' own background work (stats flushes, live config reads, Monitor discovery),
# never part of a measured call: not recorded.
def is_background(commands: Sequence[tuple[Any, ...]], pipelined: bool) -> bool:
    def key(cmd: tuple[Any, ...]) -> bytes:
        return _text(cmd[1]) if len(cmd) > 1 else b""

    def name(cmd: tuple[Any, ...]) -> str:
        return str(cmd[0]).upper()

    if any(b"__betterdb" in key(c) for c in commands):
        return True
    if all(name(c) == "HGETALL" and key(c).endswith(b":__mem_config") for c in commands):
        return True
    # A stats flush is a pipeline of HINCRBYs on the stats hash (eviction counts are a plain HINCRBY).
    return pipelined and all(name(c) == "HINCRBY" and key(c).endswith(b":__mem_stats") for c in commands)


def _text(value: object) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class Recorder:
    """Records the commands ``client`` sends while active: ``trips``, one list per round trip.

    Patches the client *instance* (``execute_command`` and ``pipeline``), so every
    store built on that client is seen; a pipeline's commands are recorded when it is
    executed. The stores' background work (stats flushes, live config, discovery) is
    left out.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.trips: list[list[tuple[Any, ...]]] = []

    def _keep(self, commands: list[tuple[Any, ...]], *, pipelined: bool) -> None:
        if commands and not is_background(commands, pipelined):
            self.trips.append(commands)

    def __enter__(self) -> Recorder:
        client = self.client
        execute_command = client.execute_command
        make_pipeline = client.pipeline

        async def recorded_command(*args: Any, **options: Any) -> Any:
            self._keep([args], pipelined=False)
            return await execute_command(*args, **options)

        def recorded_pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = make_pipeline(*args, **kwargs)
            execute = pipe.execute

            async def recorded_execute(*a: Any, **k: Any) -> Any:
                self._keep([tuple(cmd) for cmd, _ in pipe.command_stack], pipelined=True)
                return await execute(*a, **k)

            pipe.execute = recorded_execute
            return pipe

        client.execute_command = recorded_command
        client.pipeline = recorded_pipeline
        return self

    def __exit__(self, *exc: object) -> None:
        del self.client.execute_command
        del self.client.pipeline

    def commands(self, name: str) -> list[tuple[Any, ...]]:
        """Every recorded command called ``name`` (e.g. ``FT.SEARCH``), in order."""
        return [c for trip in self.trips for c in trip if str(c[0]).upper() == name]


def summarize_trips(trips: Sequence[Sequence[tuple[Any, ...]]]) -> str:
    """``FT.SEARCH; HMGET×10 GET×10`` : one part per round trip, commands counted by name."""
    parts = []
    for trip in trips:
        counts = Counter(str(c[0]).upper() for c in trip)
        parts.append(" ".join(name if n == 1 else f"{name}×{n}" for name, n in counts.items()))
    return "; ".join(parts)


# -- report ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One line of a comparison table.

    ``flag_above`` / ``flag_below``: mark the row when the p50 latency ratio exceeds,
    or the throughput ratio falls under, the threshold (what the report calls "bad").
    """

    label: str
    pair: Pair
    flag_above: float | None = None
    flag_below: float | None = None
    commands: str = ""  # what one library call sends, per round trip (``summarize_trips``)
    note: str = ""

    @property
    def latency_ratio(self) -> float:
        return _ratio(self.pair.ours.p50, self.pair.raw.p50)

    @property
    def throughput_ratio(self) -> float:
        return _ratio(self.pair.ours.throughput, self.pair.raw.throughput)

    @property
    def flagged(self) -> bool:
        above = self.flag_above is not None and self.latency_ratio > self.flag_above
        below = self.flag_below is not None and self.throughput_ratio < self.flag_below
        return above or below


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else math.nan


def _ms(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    ms = seconds * 1000
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def _x(ratio: float) -> str:
    return "-" if math.isnan(ratio) else f"{ratio:.2f}x"


def _rate(ops_per_s: float) -> str:
    return "-" if math.isnan(ops_per_s) else f"{ops_per_s:,.0f}"


def render_rows(rows: Sequence[Row], *, ours: str = "ours", raw: str = "raw") -> str:
    """A markdown table: latency p50/p99 per side, their ratios, throughput per side and ratio.

    A last column lists the round trips of one library call when any row recorded them.
    """
    with_commands = any(row.commands for row in rows)
    head = (
        f"| scenario | n | {ours} p50 ms | {ours} p99 ms | {raw} p50 ms | {raw} p99 ms "
        f"| p50 {ours}/{raw} | p99 {ours}/{raw} | {ours} ops/s | {raw} ops/s | ops/s {ours}/{raw} |"
    )
    if with_commands:
        head += f" {ours}: round trips of one call |"
    lines = [head, "|" + "---|" * (12 if with_commands else 11)]
    for row in rows:
        o, r = row.pair.ours, row.pair.raw
        label = f"{row.label} ⚠" if row.flagged else row.label
        line = (
            f"| {label} | {len(o.latencies)} | {_ms(o.p50)} | {_ms(o.p99)} | {_ms(r.p50)} | {_ms(r.p99)} "
            f"| {_x(row.latency_ratio)} | {_x(_ratio(o.p99, r.p99))} "
            f"| {_rate(o.throughput)} | {_rate(r.throughput)} | {_x(row.throughput_ratio)} |"
        )
        if with_commands:
            line += f" {row.commands or '-'} |"
        lines.append(line)
    return "\n".join(lines)


# -- machine -----------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 0
