"""Python on the hot path with no I/O (issue 29): the library's own code per call, replies replayed.

Issue 29 budgets the library's Python per call: at most 90 µs per recall of 10 hits
and 35 µs per single write, "measured with no I/O". Here that means: every round trip
a measured call sends is answered from the replies that the same call got from the
server when it ran for real, without a socket, without valkey-py (no command packing,
no reply parsing: the replies are already parsed) and without the event loop waiting.
What is left is the library: validation, argument and record building, the backend
layer (retry wrapper, routing), reply handling, item building, ranking, scoring,
metrics and spans, and the coroutines that carry them.

How:

1. **Record.** Each of ``n`` calls runs once against the server while the client's
   ``execute_command`` and ``pipeline`` are wrapped: every round trip's commands and
   replies are kept, per call, keyed by command (name; the query of an FT.SEARCH; the
   script of an EVALSHA), in order.
2. **Replay.** The client instance's ``execute_command`` and ``pipeline`` are replaced
   by stand-ins that answer call ``i``'s commands from its own recording (so a text
   recall's word-count probe that a later call no longer sends is simply not asked
   for). A command the recording lacks is an error (the call's shape changed). The
   stores' background work (stats flushes, live config) still goes to the server.
3. **Time.** Each recorded call is replayed ``repeat`` times, one call at a time, with
   ``perf_counter`` around it (the event loop never waits: no reply is pending), and each
   is followed by a fixed piece of pure Python (``reference_work``) timed the same way.
   Every row thus carries how fast the machine was while it was timed: on 2026-12-02 the
   same code read 262 µs (RediSearch run) and 136 µs (valkey-search run) for
   ``recall_by_vector``, and the stand-ins alone (no library code) 12.0 vs 4.5 µs: the
   first row of the first run was timed during a slow spell, which nothing showed. Before
   each row the run also waits until the server is idle (``INFO cpu``) and reports its CPU
   use while timing. The stand-ins' own cost is measured alone (the same recorded round
   trips sent through them, with no library call) and subtracted: *library µs* = replayed
   call − stand-ins.
4. **Where it went.** One more replay pass under ``cProfile``: self time by where it
   runs (the categories of ``profile_store.py``) and the functions with most self time,
   as shares scaled to the unprofiled per-call time (the profiler inflates Python code).
"""

from __future__ import annotations

import asyncio
import cProfile
import gc
import os
import pstats
import statistics
import time
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _harness import is_background

__all__ = [
    "Conditions",
    "NoIo",
    "Replay",
    "Scenario",
    "measure_noio",
    "measure_noio_all",
    "reference_work",
    "render_noio",
]

Call = Callable[[int], Awaitable[Any]]
HARNESS = "benchmark harness"  # profile_store.category() of code under bench/
Categorize = Callable[[pstats.Stats], dict[str, float]]


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)


def command_key(args: Sequence[Any]) -> tuple[str, ...]:
    """What identifies a command within one call: its name, and an FT.SEARCH's query or a script's sha."""
    name = _text(args[0]).upper()
    if name in ("FT.SEARCH", "FT.AGGREGATE", "EVALSHA", "EVAL") and len(args) > 2:
        return (name, _text(args[2] if name.startswith("FT.") else args[1]))
    return (name,)


class UnknownCommand(AssertionError):
    """A replayed call sent a command its recording does not hold."""


class Replay:
    """Records the round trips of calls on ``client``, then answers them again without I/O.

    Patches the client *instance* (as ``_harness.Recorder`` does); ``restore`` undoes it.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.recordings: dict[int, dict[tuple[str, ...], list[Any]]] = {}
        self.trips: dict[int, list[tuple[bool, list[tuple[Any, ...]]]]] = {}
        self._replies: dict[tuple[str, ...], deque[Any]] = {}
        self._current: dict[tuple[str, ...], list[Any]] = {}
        self._real_command = client.execute_command
        self._real_pipeline = client.pipeline
        self.background = 0  # background round trips sent to the server during replays
        self.leaked = 0  # round trips of measured calls not in their recording, sent to the server
        self.leaked_keys: Counter[tuple[str, ...]] = Counter()
        self.stand_in: Any = None  # the installed execute_command stand-in (checked after timing)

    # -- recording ------------------------------------------------------------------------

    async def record(self, call: Call, i: int) -> None:
        """Run ``call(i)`` against the server, keeping its round trips' commands and replies."""
        book: dict[tuple[str, ...], list[Any]] = defaultdict(list)
        trips: list[tuple[bool, list[tuple[Any, ...]]]] = []
        real_command, real_pipeline = self._real_command, self._real_pipeline

        async def command(*args: Any, **options: Any) -> Any:
            reply = await real_command(*args, **options)
            if not is_background([args], False):
                book[command_key(args)].append(reply)
                trips.append((False, [args]))
            return reply

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = real_pipeline(*args, **kwargs)
            execute = pipe.execute

            async def recorded(*a: Any, **k: Any) -> Any:
                commands = [tuple(c) for c, _ in pipe.command_stack]
                replies = await execute(*a, **k)
                if not is_background(commands, True):
                    for cmd, reply in zip(commands, replies, strict=True):
                        book[command_key(cmd)].append(reply)
                    trips.append((True, commands))
                return replies

            pipe.execute = recorded
            return pipe

        self.client.execute_command, self.client.pipeline = command, pipeline
        try:
            await call(i)
        finally:
            del self.client.execute_command
            del self.client.pipeline
        self.recordings[i] = dict(book)
        self.trips[i] = trips

    # -- replaying ------------------------------------------------------------------------

    def begin(self, i: int) -> None:
        """Answer the next round trips from call ``i``'s recording."""
        self._current = self.recordings[i]
        self._replies = {}

    def _known(self, args: Sequence[Any]) -> bool:
        key = command_key(args)
        return key in self._replies or bool(self._current.get(key))

    def _answer(self, args: Sequence[Any]) -> Any:
        key = command_key(args)
        queue = self._replies.get(key)
        if queue is None:
            got = self._current.get(key)
            if not got:
                raise UnknownCommand(f"not in the recording: {key} (recorded: {sorted(self._current)})")
            queue = self._replies[key] = deque(got)
        reply = queue.popleft()
        if not queue:  # a command sent more often than recorded: its last reply again
            queue.append(reply)
        return reply

    @contextmanager
    def replaying(self) -> Iterator[None]:
        """The client's ``execute_command`` and ``pipeline`` answered from the current recording."""
        replay = self
        real_command, real_pipeline = self._real_command, self._real_pipeline

        async def command(*args: Any, **options: Any) -> Any:
            if is_background([args], False):
                replay.background += 1
                return await real_command(*args, **options)
            if not replay._known(args):  # e.g. a word-count probe whose 30 s ran out: to the server
                replay.leaked += 1
                replay.leaked_keys[command_key(args)] += 1
                return await real_command(*args, **options)
            return replay._answer(args)

        class Pipe:
            """What the library uses of a valkey-py pipeline: queue commands, ``len``, ``execute``."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                self.command_stack: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
                self._args = (args, kwargs)

            def execute_command(self, *args: Any, **options: Any) -> Pipe:
                self.command_stack.append((args, options))
                return self

            def __len__(self) -> int:
                return len(self.command_stack)

            async def execute(self, *a: Any, **k: Any) -> list[Any]:
                commands = [c for c, _ in self.command_stack]
                leak = not all(replay._known(c) for c in commands)
                replay.leaked += leak
                replay.leaked_keys.update(command_key(c) for c in commands if leak and not replay._known(c))
                if leak or is_background(commands, True):
                    replay.background += not leak
                    pipe = real_pipeline(*self._args[0], **self._args[1])
                    for c, o in self.command_stack:
                        pipe.execute_command(*c, **o)
                    return list(await pipe.execute(*a, **k))
                return [replay._answer(c) for c in commands]

        self.client.execute_command, self.client.pipeline = command, Pipe
        self.stand_in = command
        try:
            yield
        finally:
            del self.client.execute_command
            del self.client.pipeline

    async def stand_ins(self, i: int) -> None:
        """Call ``i``'s recorded round trips sent through the stand-ins alone (their own cost)."""
        for pipelined, commands in self.trips[i]:
            if pipelined:
                pipe = self.client.pipeline(transaction=False)
                for c in commands:
                    pipe.execute_command(*c)
                await pipe.execute()
            else:
                await self.client.execute_command(*commands[0])


# -- measuring -----------------------------------------------------------------------------------


@dataclass(slots=True)
class NoIo:
    name: str
    goal_us: float | None  # issue 29's budget, or None (shown for reference)
    calls: int = 0  # recorded calls
    samples: list[float] = field(default_factory=list)  # seconds per replayed call
    stand_in: list[float] = field(default_factory=list)  # seconds per call of the stand-ins alone
    trips: int = 0  # round trips one call sends
    where: dict[str, float] = field(default_factory=dict)  # share of profiled self time by category
    functions: list[tuple[str, float]] = field(default_factory=list)  # (function, share), top ones
    error: str = ""
    leaked: int = 0  # replayed round trips that went to the server (not in the recording)
    leaked_keys: list[str] = field(default_factory=list)  # the commands that did, most frequent first
    real_while_timing: int = 0  # round trips that reached the server while the samples were taken
    reference: list[float] = field(default_factory=list)  # seconds per ``reference_work``, same rounds
    server_busy: float | None = None  # the server's CPU while timing, in cores (None: not probed)
    cpu: list[float] = field(default_factory=list)  # this thread's CPU seconds per replayed call
    cpu_stand_in: list[float] = field(default_factory=list)  # the same for the stand-ins alone

    @property
    def reference_us(self) -> float:
        return statistics.median(self.reference) * 1e6 if self.reference else 0.0

    @property
    def p50_us(self) -> float:
        return statistics.median(self.samples) * 1e6

    @property
    def mean_us(self) -> float:
        return statistics.fmean(self.samples) * 1e6

    @property
    def stand_in_us(self) -> float:
        return statistics.median(self.stand_in) * 1e6 if self.stand_in else 0.0

    @property
    def library_us(self) -> float:
        """Replayed call p50 minus the stand-ins' own p50: the library's Python per call."""
        return self.p50_us - self.stand_in_us

    @property
    def library_cpu_us(self) -> float | None:
        """``library_us`` by this thread's CPU time (``time.thread_time``), None when not taken.

        On a shared machine a call is sometimes descheduled partway: wall time counts the wait,
        CPU time does not (2026-12-02, load 10: a text recall read 12 ms wall p50, 3 ms CPU)."""
        if not self.cpu or not self.cpu_stand_in:
            return None
        return (statistics.median(self.cpu) - statistics.median(self.cpu_stand_in)) * 1e6


@dataclass(slots=True)
class Conditions:
    """What the machine was like while the no-I/O samples were taken (how far to trust them)."""

    reference: list[float] = field(default_factory=list)  # seconds per run of ``reference_work``
    idle_wait_s: float = 0.0  # how long the waits for an idle server took, in all
    server_busy_before: float | None = None  # the most the server used when an idle wait began (cores)
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before / after timing

    @property
    def reference_us(self) -> float:
        return statistics.median(self.reference) * 1e6 if self.reference else 0.0


# A fixed piece of pure Python shaped like the library's per-hit work (decode a reply row into a
# dict, convert numbers, build a frozen dataclass), timed in the same rounds as the library's
# calls: when the machine is slower (load, a busy server sharing the cores, frequency) it is
# slower by as much, so two runs compare by it. Its absolute value means nothing by itself.
_REF_ROW = (b"content", b"some remembered text", b"importance", b"0.5", b"created_at", b"1764633600000",
            b"last_accessed_at", b"1764633600000", b"access_count", b"3", b"threadId", b"t7")  # fmt: skip


@dataclass(frozen=True, slots=True)
class _RefItem:
    content: str
    importance: float
    created_at: int
    last_accessed_at: int
    access_count: int
    thread_id: str


def reference_work() -> None:
    """Ten reply rows to ten frozen items (the shape of a recall of 10 hits, without the library)."""
    names = [n.decode() for n in _REF_ROW[::2]]
    for _ in range(10):
        row = dict(zip(names, _REF_ROW[1::2], strict=True))
        _RefItem(row["content"].decode(), float(row["importance"]), int(row["created_at"]),
                 int(row["last_accessed_at"]), int(row["access_count"]), row["threadId"].decode())  # fmt: skip


ServerCpu = Callable[[], Awaitable[float]]  # the server's CPU seconds so far (INFO cpu)


async def _busy(server_cpu: ServerCpu, seconds: float) -> float:
    """The server's CPU use over ``seconds``, in cores."""
    c0, t0 = await server_cpu(), time.perf_counter()
    await asyncio.sleep(seconds)
    return (await server_cpu() - c0) / (time.perf_counter() - t0)


async def wait_idle(server_cpu: ServerCpu, cond: Conditions, *, limit: float = 60.0) -> None:
    """Wait (up to ``limit`` s) until the server uses under 5% of a core: after a populate an
    engine may still be working (index upkeep, a forked GC), and on a 2-core machine it then
    takes a core from the Python being measured."""
    t0 = time.perf_counter()
    busy = await _busy(server_cpu, 0.5)
    cond.server_busy_before = max(busy, cond.server_busy_before or 0.0)
    while busy > 0.05 and time.perf_counter() - t0 < limit:
        busy = await _busy(server_cpu, 0.5)
    cond.idle_wait_s += time.perf_counter() - t0


@dataclass(slots=True)
class Scenario:
    """One call measured with no I/O: its name, issue 29's budget (or None), the call."""

    name: str
    goal_us: float | None
    call: Call


async def measure_noio_all(
    client: Any,
    scenarios: Sequence[Scenario],
    indices: Sequence[int],
    *,
    repeat: int,
    categorize: Categorize,
    server_cpu: ServerCpu | None = None,
) -> tuple[list[NoIo], Conditions]:
    """Each scenario in turn: record ``call(i)`` for ``indices`` (real I/O), then replay it with none.

    Each replayed call is followed by one run of ``reference_work`` (a fixed piece of pure
    Python), so every row carries how fast the machine was while it was timed: a row timed
    during a slow spell (the server still busy after the populate, another process) shows
    it in its reference instead of passing for slower library code. Scenarios are not
    interleaved with each other: a store's state moved by one (lagging accesses, expired
    word counts) would send another's replay to the server.
    ``server_cpu``: read the server's CPU time, to wait for it to be idle before each row
    and to report how busy it was while timing (None: not probed).
    """
    out = [NoIo(sc.name, sc.goal_us, calls=len(indices)) for sc in scenarios]
    cond = Conditions()
    cond.load = (os.getloadavg()[0], 0.0)
    for sc, m in zip(scenarios, out, strict=True):
        replay = Replay(client)
        try:
            for i in (
                indices
            ):  # once for real first: what the store learns on a first call (word counts) is learnt
                await sc.call(i)
            for i in indices:
                await replay.record(sc.call, i)
            m.trips = len(replay.trips[indices[0]])
            gc.collect()  # the populate's and the recordings' garbage: not collected while timing
            if server_cpu is not None:
                await wait_idle(server_cpu, cond)
                cpu0, t0 = await server_cpu(), time.perf_counter()
            with replay.replaying():
                for i in indices[: min(20, len(indices))]:  # warm-up: caches, code paths
                    replay.begin(i)
                    await sc.call(i)
                for _ in range(repeat):
                    for i in indices:
                        replay.begin(i)
                        # Wall time inside CPU time: each window holds the other clock's two reads,
                        # the same in the call's and the stand-ins' samples (they cancel).
                        c, t = time.thread_time(), time.perf_counter()
                        await sc.call(i)
                        m.samples.append(time.perf_counter() - t)
                        m.cpu.append(time.thread_time() - c)
                        c, t = time.thread_time(), time.perf_counter()
                        await replay.stand_ins(i)
                        m.stand_in.append(time.perf_counter() - t)
                        m.cpu_stand_in.append(time.thread_time() - c)
                        t = time.perf_counter()
                        reference_work()
                        m.reference.append(time.perf_counter() - t)
                if client.execute_command is not replay.stand_in:  # something replaced the stand-ins: I/O
                    raise UnknownCommand("the client's execute_command was replaced during the replay")
                m.real_while_timing = replay.leaked + replay.background
            if server_cpu is not None:  # outside the replay: this INFO goes to the server
                m.server_busy = (await server_cpu() - cpu0) / (time.perf_counter() - t0)
            prof = cProfile.Profile()
            with replay.replaying():
                for i in indices:
                    replay.begin(i)
                    prof.enable()
                    await sc.call(i)
                    prof.disable()
        except Exception as exc:
            if not _unknown(exc, m):
                raise
            continue
        m.leaked = replay.leaked
        m.leaked_keys = [" ".join(k)[:80] for k, _ in replay.leaked_keys.most_common(3)]
        _profile(m, pstats.Stats(prof), categorize)
        cond.reference += m.reference
    cond.load = (cond.load[0], os.getloadavg()[0])
    return out, cond


def _unknown(exc: BaseException, m: NoIo) -> bool:
    """Note an ``UnknownCommand`` (possibly wrapped by the library's errors) on ``m``; False for another error."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, UnknownCommand):
        cause = cause.__cause__
    if cause is None:
        return False
    m.error = str(cause)
    return True


def _profile(m: NoIo, stats: pstats.Stats, categorize: Categorize) -> None:
    where = categorize(stats)
    where.pop(HARNESS, None)  # the stand-ins and the scenario's own closure: not the library
    total = sum(where.values()) or 1.0
    m.where = {k: v / total for k, v in where.items()}
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    per_function = sorted(
        (
            (f"{Path(f).name}:{fn}" if f != "~" else fn, tt)
            for (f, _, fn), (_, _, tt, _, _) in raw.items()
            if "/bench/" not in f.replace("\\", "/")
        ),
        key=lambda kv: -kv[1],
    )
    m.functions = [(fn, tt / total) for fn, tt in per_function[:12]]


async def measure_noio(
    client: Any,
    name: str,
    call: Call,
    indices: Sequence[int],
    *,
    goal_us: float | None,
    repeat: int,
    categorize: Categorize,
) -> NoIo:
    """One scenario alone (``measure_noio_all`` of one; no server probe)."""
    results, _ = await measure_noio_all(
        client, [Scenario(name, goal_us, call)], indices, repeat=repeat, categorize=categorize
    )
    return results[0]


# -- report --------------------------------------------------------------------------------------


def _verdict(m: NoIo) -> str:
    if m.error or m.goal_us is None:
        return "-"
    return "yes" if m.library_us <= m.goal_us else "**no**"


def render_noio(results: Sequence[NoIo], cond: Conditions | None = None) -> list[str]:
    """The section that opens the report: the two figures issue 29 budgets, then where they went."""
    out = [
        "## Python on the hot path, no I/O (issue 29)",
        "",
        "Each call's round trips answered from the replies the same call got from the server (recorded "
        "first, RESP2 replies as valkey-py parsed them), by stand-ins for the client's `execute_command` / "
        "`pipeline`: no socket, no valkey-py (no packing, no reply parsing), no waiting. What is timed is "
        "the library's own Python: argument checks, query and record building, the backend layers, reply "
        "parsing, item building, ranking, metrics and spans. *library µs* = the replayed call's p50 minus "
        "the stand-ins' own p50 (the same round trips through them, no library call); *CPU µs* the same "
        "by this thread's CPU time (`time.thread_time`), which a call descheduled partway on a shared "
        "machine does not inflate. "
        "Goals: at most 90 µs per recall of 10 hits (`recall_by_vector`, k=10, the API's cheapest recall: "
        "one KNN) and 35 µs per single `remember`.",
        "",
    ]
    if cond is not None:
        before = (
            ""
            if cond.server_busy_before is None
            else f"; before each row the run waited for the server to go under 5% of a core ({cond.idle_wait_s:.1f} s "
            f"in all; the most it was using when a wait began: {cond.server_busy_before:.0%} of a core)"
        )
        out += [
            "*reference µs*: a fixed piece of pure Python (`_noio.reference_work`, ten reply rows to ten frozen "
            "items) timed after each replayed call of the row: a row timed on a slower machine (load, the server "
            f"busy on a shared core) shows it there; compare rows and runs by it{before}. Load average (1 min) "
            f"{cond.load[0]:.2f} before, {cond.load[1]:.2f} after.",
            "",
        ]
    out += [
        "| call | library µs p50 (no I/O) | CPU µs p50 | goal | met | replayed call p50 / mean µs | stand-ins µs | reference µs | server CPU | round trips | samples |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in results:
        if m.error:
            out.append(f"| {m.name} | could not replay: {m.error} | - | - | - | - | - | - | - | - | - |")
            continue
        goal = f"≤ {m.goal_us:g}" if m.goal_us is not None else "(reference)"
        busy = "-" if m.server_busy is None else f"{m.server_busy:.0%}"
        cpu = "-" if m.library_cpu_us is None else f"{m.library_cpu_us:.0f}"
        out.append(
            f"| {m.name} | **{m.library_us:.0f}** | {cpu} | {goal} | {_verdict(m)} | {m.p50_us:.0f} / {m.mean_us:.0f} "
            f"| {m.stand_in_us:.1f} | {m.reference_us:.1f} | {busy} | {m.trips} | {len(m.samples):,} ({m.calls} calls recorded) |"
        )
    leaks = [
        f"{m.name}: {m.leaked:,} ({', '.join(f'`{k}`' for k in m.leaked_keys)}), "
        f"{m.real_while_timing:,} round trips to the server while timing {len(m.samples):,} calls"
        for m in results
        if m.leaked or m.real_while_timing
    ]
    if leaks:
        out += [
            "",
            "Round trips of replayed calls that their recording lacked went to the server (those samples "
            "include I/O; the stores' background work also runs there): " + "; ".join(leaks) + ".",
        ]
    out.append("")
    for m in results:
        if m.error or not m.where:
            continue
        out += [
            f"**Where the {m.library_us:.0f} µs of {m.name} go** (cProfile self time over one replay pass, as "
            "shares, scaled to the library µs; a builtin's time is charged to its caller):",
            "",
            "| where | ≈ µs | share |",
            "|---|---|---|",
        ]
        for k, share in sorted(m.where.items(), key=lambda kv: -kv[1]):
            if share >= 0.01:
                out.append(f"| {k} | {share * m.library_us:.1f} | {share:.0%} |")
        out += ["", "Functions with the most self time: " + "; ".join(
            f"`{fn}` {share:.0%}" for fn, share in m.functions if share >= 0.01
        ) + ".", ""]  # fmt: skip
    return out
