"""Where the time of a write and of a recall goes: client building, round trips, server, parsing, ranking.

Populates one store with ``--n`` memories (untimed), then for each scenario:

1. **wall**: ``--calls`` unprofiled calls (p50 / mean per call), the round trips one
   call sends (``_harness.Recorder``) and the server's own time per call (``INFO
   commandstats`` microseconds, reset before the calls);
2. **phases**: as many calls again with timers wrapped around the library's phases
   (validation, argument building, each round trip, reply parsing, item building,
   re-ranking, scoring; wrapped from outside, on the store instance and on the
   names its modules import: no library file changes). "rest" is the wall time no
   timer covers (spans, metrics, ids, glue);
3. **CPU**: as many calls again under ``cProfile``, self time grouped by where it is
   spent (valkey-py's reply parser, its command packing, asyncio, each library
   module, waiting in ``epoll`` for the server). The profiler slows Python code, so
   read shares, not milliseconds.

Then the baselines (a PING and the raw FT.SEARCH of the same shapes), the parser
comparison (``--libvalkey DIR``: the wall pass again in a subprocess whose
``PYTHONPATH`` holds ``libvalkey``, valkey-py's C reply parser) and experiments: the
changes proposed for the library, applied by monkeypatching in this process only.

    .venv/bin/pip install --target /tmp/libvalkey-bench libvalkey   # outside the venv
    .venv/bin/python bench/profile_store.py --n 10000 --libvalkey /tmp/libvalkey-bench
    .venv/bin/python bench/profile_store.py --quick                  # smoke run

Writes ``bench/results/profile.md`` (``--out``); text after the line
``<!-- findings -->`` in an existing file is kept (the hand-written reading of the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import datetime as dt
import functools
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import valkey.asyncio as avalkey
import valkey.utils
from _harness import Recorder, is_background, summarize_trips
from _noio import Conditions, NoIo, measure_noio_all, render_noio
from _noio import Scenario as NoIoScenario
from bench_store import (
    BATCH,
    CONTEXT_BUDGET,
    CONTEXT_TURNS,
    DEFAULT_PLAN,
    READER,
    WRITER,
    Bench,
    Doc,
    K,
    machine,
    turn_text,
)

import betterdb_memory.core.models as models_mod
import betterdb_memory.core.ranking as ranking_mod
import betterdb_memory.tiers.documents as documents_mod
import betterdb_memory.tiers.erasure as erasure_mod
import betterdb_memory.tiers.long_term as long_term_mod
import betterdb_memory.tiers.recall as recall_mod
import betterdb_memory.tiers.sessions as sessions_mod
import betterdb_memory.tiers.single_write as single_write_mod
from betterdb_memory import MemoryStore
from betterdb_memory.core.codec import encode_vector
from betterdb_memory.core.query import ITEM_FIELDS, MemoryFilter, filter_search_args, knn_search_args
from betterdb_memory.server import EmbeddedServer

FINDINGS_MARK = "<!-- findings -->"
Call = Callable[[int], Awaitable[Any]]


# -- phase timers ---------------------------------------------------------------------------


class Phases:
    """Wall time per named phase, summed over calls; installed by wrapping callables from outside."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._undo: list[Callable[[], None]] = []
        self._in_flight = 0
        self._since = 0.0
        self.any_trip = 0.0  # wall time with at least one round trip in flight (concurrent ones overlap)
        self.missing: list[str] = []

    @contextmanager
    def trip(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        if self._in_flight == 0:
            self._since = t0
        self._in_flight += 1
        try:
            yield
        finally:
            t1 = time.perf_counter()
            self._in_flight -= 1
            if self._in_flight == 0:
                self.any_trip += t1 - self._since
            self.add(name, t1 - t0)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds
        self.counts[name] += 1

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        """Replace ``owner.attr`` (a module global or an instance attribute) with a timed wrapper.

        A name the library no longer has is skipped (listed in ``missing``): its time
        then shows as "rest".
        """
        if not hasattr(owner, attr):
            self.missing.append(f"{getattr(owner, '__name__', type(owner).__name__)}.{attr}")
            return
        original = getattr(owner, attr)
        on_instance = not isinstance(owner, type(sys)) and attr not in vars(owner)
        if asyncio.iscoroutinefunction(original):

            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await original(*args, **kwargs)
                finally:
                    self.add(name, time.perf_counter() - t0)

            setattr(owner, attr, timed_async)
        else:

            def timed(*args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return original(*args, **kwargs)
                finally:
                    self.add(name, time.perf_counter() - t0)

            setattr(owner, attr, timed)

        def undo() -> None:
            if on_instance:
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)

        self._undo.append(undo)

    def wrap_round_trips(self, client: Any) -> None:
        """Time every round trip on ``client``, named by its first command (``round trip: FT.SEARCH``)."""
        execute_command = client.execute_command
        make_pipeline = client.pipeline

        async def timed_command(*args: Any, **options: Any) -> Any:
            if is_background([args], False):  # the stores' own background work: not a phase
                return await execute_command(*args, **options)
            with self.trip(f"round trip: {str(args[0]).upper()}"):
                return await execute_command(*args, **options)

        def timed_pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = make_pipeline(*args, **kwargs)
            execute = pipe.execute

            async def timed_execute(*a: Any, **k: Any) -> Any:
                commands = [tuple(c) for c, _ in pipe.command_stack]
                if is_background(commands, True):
                    return await execute(*a, **k)
                names = Counter(str(c[0]).upper() for c in commands)
                label = " ".join(f"{n}×{c}" if c > 1 else n for n, c in names.items())
                with self.trip(f"round trip: pipeline {label}"):
                    return await execute(*a, **k)

            pipe.execute = timed_execute
            return pipe

        client.execute_command = timed_command
        client.pipeline = timed_pipeline

        def undo() -> None:
            del client.execute_command
            del client.pipeline

        self._undo.append(undo)

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()


def install_phases(phases: Phases, stores: Sequence[MemoryStore], client: Any) -> None:
    """The library's phases, wrapped from outside (instance attributes and module-level names)."""
    phases.wrap_round_trips(client)
    rerankers: list[Any] = []
    phases.wrap(long_term_mod, "new_memory", "validate arguments (new_memory)")
    phases.wrap(long_term_mod, "new_memories", "validate items (new_memories)")
    phases.wrap(single_write_mod, "encode_record", "build records (single write: encode_record)")
    for store in stores:
        # write path (the parts are private attributes of the facade; see store.py)
        phases.wrap(store._long_term, "_record", "build records (LongTermMemory._record)")
        phases.wrap(store._capacity, "plan", "cap scopes and their round-trip plans (Capacity.plan)")
        phases.wrap(store._capacity._victims, "_learn", "capacity: the next keep ceiling (Victims._learn)")
        # both paths
        phases.wrap(store._rt, "embed", "embed (dict lookup + checks)")
        if store.reranker is not None and store.reranker not in rerankers:
            rerankers.append(store.reranker)
            phases.wrap(store.reranker, "rerank", "re-rank (HybridRanker)")
    phases.wrap(recall_mod, "knn_search_args", "build FT.SEARCH args (knn_search_args)")
    phases.wrap(recall_mod, "encode_vector", "encode query vector")
    phases.wrap(recall_mod, "parse_search_reply", "parse FT.SEARCH reply (replies)")
    phases.wrap(models_mod, "item_from_fields", "build MemoryItems (item_from_fields)")
    phases.wrap(documents_mod, "item_from_fields", "build MemoryItems (item_from_fields)")
    # ranking.rank's own composite arithmetic is inline (in "rest"); its re-ranker is timed above.
    # context assembly
    phases.wrap(sessions_mod, "decode_turn", "decode turns")
    phases.wrap(sessions_mod, "count_tokens", "count tokens")
    phases.wrap(sessions_mod, "allocate", "split the budget (allocate)")


# -- CPU categories (cProfile) --------------------------------------------------------------

_LIB_MODULES = {
    "validation": "library: validation, keys, escaping",
    "keys": "library: validation, keys, escaping",
    "escaping": "library: validation, keys, escaping",
    "codec": "library: codec (vectors, field values)",
    "query": "library: query building",
    "store": "library: store (write path, get_many)",
    "capacity": "library: capacity",
    "scopes": "library: scope reads",
    "recall": "library: recall logic",
    "replies": "library: FT.SEARCH reply parsing",
    "models": "library: MemoryItem building",
    "ranking": "library: hybrid re-ranking",
    "hashing": "library: hybrid re-ranking",
    "text": "library: hybrid re-ranking",
    "scoring": "library: composite scoring",
    "hub": "library: observability (spans, metrics, stats)",
    "retry": "library: retry wrapper (backend.retry.call)",
    "sessions": "library: context assembly (turns, tokens, budget)",
    "context": "library: context assembly (turns, tokens, budget)",
    "tokens": "library: context assembly (turns, tokens, budget)",
    "turns": "library: context assembly (turns, tokens, budget)",
}


def category(filename: str, funcname: str) -> str:
    f = filename.replace("\\", "/")
    if "/betterdb_memory/" in f:
        if "/observability/" in f:
            return "library: observability (spans, metrics, stats)"
        return _LIB_MODULES.get(Path(f).stem, f"library: {Path(f).stem}")
    if "/valkey/_parsers/" in f and not f.endswith("encoders.py"):
        return "valkey-py: reply parsing"
    if "/valkey/" in f and (f.endswith("connection.py") or f.endswith("encoders.py")):
        return "valkey-py: command packing, socket I/O"
    if "/valkey/" in f:
        return "valkey-py: client, pipeline, commands"
    if "/libvalkey/" in f:
        return "valkey-py: reply parsing"
    if f.endswith("asyncio/streams.py"):  # valkey-py's pure-Python parser reads RESP line by line here
        return "valkey-py: reply parsing"
    if "/asyncio/" in f or f.endswith("selectors.py"):
        return "asyncio event loop"
    if "/numpy/" in f:
        return "numpy"
    if "/prometheus_client/" in f or "/opentelemetry/" in f:
        return "library: observability (spans, metrics, stats)"
    if "/bench/" in f:
        return "benchmark harness"
    return "other Python"


WAITING = "waiting for the server (epoll)"


def cpu_categories(stats: pstats.Stats) -> dict[str, float]:
    """Self time (seconds) per category; a builtin's time goes to its callers' categories."""
    out: dict[str, float] = defaultdict(float)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, _, funcname), (_, _, tt, _, callers) in raw.items():
        if filename == "~":  # a builtin: split by caller
            if "poll" in funcname and "epoll" in funcname:
                out[WAITING] += tt
                continue
            edge_total = sum(c[2] for c in callers.values()) or 1.0
            for (cfile, _, cfunc), c in callers.items():
                out[category(cfile, cfunc)] += tt * c[2] / edge_total
            if not callers:
                out["other Python"] += tt
        else:
            out[category(filename, funcname)] += tt
    return dict(out)


# -- scenarios ------------------------------------------------------------------------------


@dataclass(slots=True)
class Scenario:
    name: str
    call: Call
    calls: int
    note: str = ""
    writes: bool = False  # grows the store: measured after the reads and the client-side experiments
    before: Callable[[], Awaitable[None]] | None = None  # untimed set-up


@dataclass(slots=True)
class Measured:
    name: str
    calls: int
    wall: list[float] = field(default_factory=list)
    server_us: dict[str, float] = field(default_factory=dict)  # per call, by command (nested ones too)
    server_ms: float = 0.0  # per call, the commands the client sent (a script's own calls inside it)
    trips: str = ""
    n_trips: int = 0
    phases: dict[str, float] = field(default_factory=dict)  # ms per call
    phase_wall_ms: float = 0.0
    trip_ms: float = 0.0  # ms per call with a round trip in flight (overlaps counted once)
    missing: list[str] = field(default_factory=list)  # phase timers whose target the library no longer has
    cpu: dict[str, float] = field(default_factory=dict)  # ms per call (profiled)
    cpu_wall_ms: float = 0.0
    note: str = ""

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.wall) * 1000

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.wall) * 1000


class Ctx:
    def __init__(
        self,
        bench: Bench,
        store: MemoryStore,
        docs: list[Doc],
        n: int,
        context_store: MemoryStore,
        capped: MemoryStore,
        cap: int,
    ) -> None:
        self.bench = bench
        self.client = bench.client
        self.store = store
        self.docs = docs
        self.n = n
        self.context_store = context_store  # same index, summarize_batch=0
        self.thread = docs[0].thread  # the session retrieve_context reads
        self.capped = capped  # same index, max_items_per_scope=cap
        self.cap = cap
        self._capped_full = False

    async def fill_capped(self) -> None:
        """Fill the capped scope (thread CAPPED_THREAD) to its cap, once."""
        if not self._capped_full:
            await self.bench.fill(self.capped, self.bench.docs(self.cap, agent=WRITER, thread=CAPPED_THREAD))
            self._capped_full = True


CAPPED_THREAD = "full"


def scenarios(ctx: Ctx, calls: int) -> list[Scenario]:
    """Each scenario's call, for call numbers 0 .. 3 * calls + warm-up (every pass uses new data)."""
    bench, store = ctx.bench, ctx.store
    total = 3 * calls + 20
    single = bench.docs(total, agent=WRITER, thread="w-single")
    many_calls = max(3, calls // 40)
    batches = [
        [d.item() for d in bench.docs(BATCH, agent=WRITER, thread="w-many")]
        for _ in range(3 * many_calls + 12)
    ]
    vq = bench.text_queries(ctx.docs, total, 101)
    tq = bench.text_queries(ctx.docs, total, 202)
    rq = bench.text_queries(ctx.docs, total, 303)
    cq = bench.text_queries(ctx.docs, total, 404)

    async def remember(i: int) -> None:
        d = single[i]
        await store.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

    async def remember_many(i: int) -> None:
        await store.remember_many(batches[i])

    async def recall_vector(i: int) -> None:
        await store.recall_by_vector(vq[i][1], k=K, reinforce=False)

    async def recall_text(i: int) -> None:
        await store.recall(tq[i][0], k=K, reinforce=False)

    async def recall_default(i: int) -> None:
        await store.recall(rq[i][0], k=K)

    async def context(i: int) -> None:
        await ctx.context_store.retrieve_context(ctx.thread, cq[i][0], token_budget=CONTEXT_BUDGET)

    capped_docs = bench.docs(total, agent=WRITER, thread=CAPPED_THREAD)

    async def capped_write(i: int) -> None:
        d = capped_docs[i]
        await ctx.capped.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

    # Reads first, at the populated size; then the writes (which grow the store).
    return [
        Scenario("recall_by_vector (k=10, reinforce off)", recall_vector, calls),
        Scenario("recall text (k=10, hybrid re-ranking, reinforce off)", recall_text, calls),
        Scenario(
            "recall text with the defaults (hybrid re-ranking, reinforce on)",
            recall_default,
            calls,
            "reinforcing hits: counted beside their documents; the flush writes the documents later",
        ),
        Scenario(f"retrieve_context (budget {CONTEXT_BUDGET}, {CONTEXT_TURNS} turns)", context, calls),
        Scenario("remember (one memory)", remember, calls, writes=True),
        Scenario(f"remember_many ({BATCH} memories)", remember_many, many_calls, writes=True),
        Scenario(
            f"remember into a full scope (cap {ctx.cap:,}: evicts one)",
            capped_write,
            calls,
            f"the scope holds {ctx.cap:,} memories; the uncapped write is 'remember (one memory)'",
            writes=True,
            before=ctx.fill_capped,
        ),
    ]


async def measure(ctx: Ctx, sc: Scenario) -> Measured:
    client = ctx.client
    m = Measured(sc.name, sc.calls, note=sc.note)
    if sc.before is not None:
        await sc.before()
    base = 0
    warm = min(10, sc.calls)
    for i in range(warm):
        await sc.call(3 * sc.calls + i)
    with Recorder(client) as rec:
        await sc.call(3 * sc.calls + warm)
    m.trips, m.n_trips = summarize_trips(rec.trips), len(rec.trips)
    # 1. wall, and the server's own time
    await client.config_resetstat()
    for i in range(base, base + sc.calls):
        t0 = time.perf_counter()
        await sc.call(i)
        m.wall.append(time.perf_counter() - t0)
    stats = await client.info("commandstats")
    per_command: dict[str, float] = {}
    for key, v in stats.items():
        name = key.removeprefix("cmdstat_")
        if name in ("config|resetstat", "info"):
            continue
        m.server_us[name] = int(v["usec"]) / sc.calls
        per_command[name.upper()] = float(v["usec_per_call"])
    # A command run inside a script is counted again under its own name: the server's time
    # per call is that of the commands the client sent, as many as one recorded call sent.
    sent = Counter(str(c[0]).upper() for trip in rec.trips for c in trip)
    m.server_ms = sum(n * per_command.get(name, 0.0) for name, n in sent.items()) / 1000
    # 2. phases
    base += sc.calls
    phases = Phases()
    install_phases(phases, (ctx.store, ctx.context_store, ctx.capped), client)
    try:
        t0 = time.perf_counter()
        for i in range(base, base + sc.calls):
            await sc.call(i)
        m.phase_wall_ms = (time.perf_counter() - t0) / sc.calls * 1000
    finally:
        phases.restore()
    m.phases = {k: v / sc.calls * 1000 for k, v in phases.seconds.items()}
    m.missing = phases.missing
    m.trip_ms = phases.any_trip / sc.calls * 1000
    # 3. CPU
    base += sc.calls
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for i in range(base, base + sc.calls):
        await sc.call(i)
    prof.disable()
    m.cpu_wall_ms = (time.perf_counter() - t0) / sc.calls * 1000
    m.cpu = {k: v / sc.calls * 1000 for k, v in cpu_categories(pstats.Stats(prof)).items()}
    return m


# -- baselines and experiments ---------------------------------------------------------------


async def timed(fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    """p50 wall ms of ``calls`` calls (after 5 warm-up calls)."""
    for _ in range(5):
        await fn()
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out) * 1000


async def baselines(ctx: Ctx, calls: int) -> list[tuple[str, float]]:
    """Raw round trips of the shapes the library sends (p50 ms)."""
    client, store = ctx.client, ctx.store
    vec = encode_vector(ctx.docs[0].vector)
    knn10 = knn_search_args(store.keys.index, vec, k=K, flt=MemoryFilter(), layout=store.layout)
    slim = knn_search_args(
        store.keys.index, vec, k=50, flt=MemoryFilter(), layout=store.layout,
        return_fields=recall_mod._RANKING_FIELDS,
    )  # fmt: skip
    knn50 = knn_search_args(store.keys.index, vec, k=50, flt=MemoryFilter(), layout=store.layout)
    nocontent = knn_search_args(
        store.keys.index, vec, k=K, flt=MemoryFilter(), layout=store.layout, return_fields=None
    )
    ids = [store.keys.memory_id_of(h) for h in (await client.execute_command(*nocontent))[1:]]

    async def get_many_raw() -> None:
        pipe = client.pipeline(transaction=False)
        for mid in ids:
            pipe.hmget(store.keys.doc(mid), list(ITEM_FIELDS))
            pipe.get(store.keys.access(mid))
        await pipe.execute()

    async def one_pipe() -> None:
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("PING")
        await pipe.execute()

    return [
        ("PING (execute_command)", await timed(lambda: client.execute_command("PING"), calls)),
        ("PING in a pipeline of one", await timed(one_pipe, calls)),
        ("FT.SEARCH KNN 10, NOCONTENT", await timed(lambda: client.execute_command(*nocontent), calls)),
        ("FT.SEARCH KNN 10, RETURN the 16 item fields", await timed(lambda: client.execute_command(*knn10), calls)),
        ("FT.SEARCH KNN 50, RETURN 5 ranking fields (text recall's)", await timed(lambda: client.execute_command(*slim), calls)),
        ("FT.SEARCH KNN 50, RETURN the 16 item fields (retrieve_context's)", await timed(lambda: client.execute_command(*knn50), calls)),
        ("pipeline HMGET×10 + GET×10 (get_many of 10)", await timed(get_many_raw, calls)),
    ]  # fmt: skip


@contextmanager
def patched(owner: Any, attr: str, value: Any) -> Iterator[None]:
    original = getattr(owner, attr)
    on_instance = not isinstance(owner, type(sys)) and attr not in vars(owner)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        if on_instance:
            delattr(owner, attr)
        else:
            setattr(owner, attr, original)


Experiment = tuple[str, str, float, float, str]


async def pair(base: Call, changed: Call, n: int) -> tuple[float, float]:
    """p50 ms of ``base`` and ``changed``, interleaved call by call (order flips each round).

    ``base`` gets even call numbers, ``changed`` odd ones, from 0 to ``2 * n + 10``.
    """
    a: list[float] = []
    b: list[float] = []
    for i in range(5):
        await base(2 * n + 2 * i)
        await changed(2 * n + 2 * i + 1)
    for i in range(n):
        sides = [(base, a, 2 * i), (changed, b, 2 * i + 1)]
        for fn, acc, j in sides if i % 2 == 0 else sides[::-1]:
            t0 = time.perf_counter()
            await fn(j)
            acc.append(time.perf_counter() - t0)
    return statistics.median(a) * 1000, statistics.median(b) * 1000


async def client_experiments(ctx: Ctx, calls: int) -> list[Experiment]:
    """(change, scenario, as shipped p50 ms, changed p50 ms, what changes) for proposed library changes.

    Each change is applied by monkeypatching this process's store (never a library
    file) and measured interleaved with the shipped code. These are the recall-side
    ones, whose gain depends on the client's reply parser (the subprocess runs them
    too); they run on the populated store, before the write scenarios grow it.
    """
    bench, store = ctx.bench, ctx.store
    out: list[Experiment] = []

    # 1. (Rank on full items, no second round trip: not measured since the winners are read by
    #    one FETCH; the idea stays open, see README "Where the time goes".)

    # 1b. Text recall: a term-count cache that holds the store's memories (8,192 entries as shipped).
    bigger = functools.lru_cache(maxsize=65_536)(ranking_mod._term_counts.__wrapped__)
    warm_q = bench.text_queries(ctx.docs, 2 * calls + 20, 707)

    async def recall_text(i: int) -> None:
        await store.recall(tq[i][0], k=K, reinforce=False)

    with patched(ranking_mod, "_term_counts", bigger):
        for text, _, _ in warm_q:  # as warm as the shipped cache, which every recall so far filled
            await store.recall(text, k=K, reinforce=False)

    async def recall_big_cache(i: int) -> None:
        with patched(ranking_mod, "_term_counts", bigger):
            await store.recall(tq[i][0], k=K, reinforce=False)

    tq = bench.text_queries(ctx.docs, 2 * calls + 20, 808)
    a, b = await pair(recall_text, recall_big_cache, calls)
    info = bigger.cache_info()
    out.append(
        (
            "term cache of 65,536 texts",
            "recall text (hybrid, reinforce off)",
            a,
            b,
            "ranking.py `_term_counts`: `lru_cache(maxsize=8192)` holds fewer texts than a 10k store, so re-ranking "
            f"tokenizes most candidates again (the bigger cache: {info.hits:,} hits, {info.misses:,} "
            "misses; ~1 KB per cached text)",
        )
    )

    # 2. (Winners fetched in the reinforcement's round trip: shipped, as the ACCESS script.)
    return out


async def server_experiments(ctx: Ctx, calls: int) -> list[Experiment]:
    """The changes whose cost is the server's (reinforcement, capacity, forget); after the writes."""
    bench, store = ctx.bench, ctx.store
    out: list[Experiment] = []

    # 3. Reinforcement: REINFORCE on never-accessed hits (document rewritten) vs the same hits again.
    fresh = bench.docs(10 * (2 * calls + 20), agent=WRITER, thread="x-reinforce")
    await bench.fill(store, fresh)
    ids = [store.keys.memory_id_of(k) for k in await _keys_of(ctx.client, store, "x-reinforce")]
    groups = [ids[j : j + 10] for j in range(0, len(ids), 10)]
    half_life = store.half_life_seconds

    async def reinforce_first(i: int) -> None:  # even i: never accessed
        await store._recall.reinforce(groups[i], time.time(), half_life)

    async def reinforce_again(i: int) -> None:  # odd i: accessed once just before
        await store._recall.reinforce(groups[i], time.time(), half_life)

    for g in groups[1::2]:
        await store._recall.reinforce(g, time.time(), half_life)
    a, b = await pair(reinforce_first, reinforce_again, calls)
    out.append(
        (
            "reinforcement: a later access instead of the first",
            "the reinforcement round trip of 10 hits",
            a,
            b,
            "not a change: what the first access costs. FETCH rewrites a document on its first "
            "access (HSET of 3 fields; RediSearch then re-indexes the whole document, vector included); "
            "later ones within the interval only INCR the counter",
        )
    )

    # 4. (Count and victims in one search under the capacity lock: shipped.)

    # 5. forget_by_scope: one DEL per memory (document and counter share a slot) instead of
    #    two; pages of 5,000 instead of 500 (each page is a filter FT.SEARCH over what is left
    #    of the scope). One call deletes a whole scope: variants alternate A B C C B A.
    n = min(5000, ctx.n)
    runs: dict[str, list[float]] = {"shipped": [], "one DEL": [], "pages of 5,000": []}
    for variant in ("shipped", "one DEL", "pages of 5,000", "pages of 5,000", "one DEL", "shipped"):
        await bench.fill(store, bench.docs(n, agent="x-forget", thread="f"))
        with contextlib.ExitStack() as stack:
            if variant == "one DEL":
                stack.enter_context(patched(store._docs, "delete_ids", _one_del(store)))
            if variant == "pages of 5,000":
                stack.enter_context(patched(erasure_mod, "_FORGET_PAGE", 5000))
            t0 = time.perf_counter()
            deleted = await store.forget_by_scope(agent_id="x-forget")
            runs[variant].append((time.perf_counter() - t0) * 1000)
        assert deleted == n, deleted
    shipped = statistics.fmean(runs["shipped"])
    out.append(
        (
            "one DEL per memory",
            f"forget_by_scope of {n:,} (two calls each, A B C C B A)",
            shipped,
            statistics.fmean(runs["one DEL"]),
            "documents.py `delete_ids`: `DEL doc counter history` (one command: the keys share the "
            "document's slot) instead of two DELs per memory; it loses the count of documents that "
            "existed (figures: means)",
        )
    )
    out.append(
        (
            "forget in pages of 5,000",
            f"forget_by_scope of {n:,} (two calls each, A B C C B A)",
            shipped,
            statistics.fmean(runs["pages of 5,000"]),
            "erasure.py `_FORGET_PAGE` 500 -> 5,000: each page is one filter FT.SEARCH over the rest of the "
            "scope and one DEL pipeline, so a scope of n costs n/500 searches (figures: means)",
        )
    )
    return out


def _one_del(store: MemoryStore) -> Callable[..., Awaitable[int]]:
    async def delete_ids(ids: Sequence[str], *, also: Any = None, operation: str = "forget") -> int:
        dels = [("DEL", store.keys.doc(mid), store.keys.access(mid), store.keys.updates(mid)) for mid in ids]
        if not ids and also is None:
            return 0
        replies = await store.backend.pipeline(operation, [*dels, *(also or ())])
        return sum(min(1, int(r)) for r in replies[: len(ids)])

    return delete_ids


async def _keys_of(client: Any, store: MemoryStore, thread: str) -> list[str]:
    from betterdb_memory.core.keys import Scope

    args = filter_search_args(
        store.keys.index, MemoryFilter(scope=Scope.of(thread_id=thread)), return_fields=None, limit=10_000
    )
    reply = await client.execute_command(*args)
    return [k.decode() if isinstance(k, bytes) else k for k in reply[1:]]


# -- run ------------------------------------------------------------------------------------

# The no-I/O pass: (scenario, issue 29's budget in µs or None for a reference row).
NOIO = (
    ("recall_by_vector (k=10, reinforce off)", 90.0),
    ("remember (one memory)", 35.0),
    ("recall text (k=10, hybrid re-ranking, reinforce off)", None),
    ("recall text with the defaults (hybrid re-ranking, reinforce on)", None),
)


async def noio_pass(ctx: Ctx, calls: int, repeat: int) -> tuple[list[NoIo], Conditions]:
    """Issue 29's Python budgets: each scenario's calls recorded, then replayed with no I/O (``_noio``).

    Its own scenario objects (fresh memories and queries), so the passes after it see new data.
    """
    by_name = {sc.name: sc for sc in scenarios(ctx, calls)}
    client = ctx.client

    async def server_cpu() -> float:
        info = await client.info("cpu")
        return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])

    print("no-I/O: " + ", ".join(name for name, _ in NOIO), file=sys.stderr)
    return await measure_noio_all(
        client,
        [NoIoScenario(name, goal, by_name[name].call) for name, goal in NOIO],
        range(calls),
        repeat=repeat,
        categorize=cpu_categories,
        server_cpu=server_cpu,
    )


async def setup(client: Any, n: int) -> Ctx:
    bench = Bench(client, DEFAULT_PLAN)
    store = bench.store("profile")
    await store.ensure_index()
    bench.caps = store.capabilities
    docs = bench.docs(n, agent=READER)
    await bench.fill(store, docs)
    cap = min(n, 10_000)
    capped = bench.store("profile", max_items_per_scope=cap)
    ctx = Ctx(bench, store, docs, n, bench.store("profile", summarize_batch=0), capped, cap)
    for i in range(CONTEXT_TURNS):
        await ctx.context_store.store_turn(ctx.thread, turn_text(i, "user"), turn_text(i, "assistant"))
    return ctx


async def wall_only(n: int, calls: int, *, with_experiments: bool) -> dict[str, Any]:
    """The wall pass and the baselines, for the parser comparison subprocess."""
    server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    client = avalkey.Valkey.from_url(server.url)
    try:
        ctx = await setup(client, n)
        out: dict[str, Any] = {"parser": "libvalkey" if valkey.utils.LIBVALKEY_AVAILABLE else "pure-Python"}
        walls = {}

        async def wall(sc: Scenario) -> None:
            if sc.before is not None:
                await sc.before()
            for i in range(min(10, sc.calls)):
                await sc.call(3 * sc.calls + i)
            ws = []
            for i in range(sc.calls):
                t0 = time.perf_counter()
                await sc.call(i)
                ws.append(time.perf_counter() - t0)
            walls[sc.name] = statistics.median(ws) * 1000

        all_scenarios = scenarios(ctx, calls)
        for sc in all_scenarios:
            if not sc.writes:
                await wall(sc)
        out["baselines"] = dict(await baselines(ctx, calls))
        if with_experiments:
            out["experiments"] = {e[0]: e[3] / e[2] for e in await client_experiments(ctx, calls)}
        for sc in all_scenarios:
            if sc.writes:
                await wall(sc)
        out["scenarios"] = walls
        await ctx.bench.close_stores()
        return out
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)


def parser_compare(libvalkey_dir: str, n: int, calls: int, *, with_experiments: bool) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (libvalkey_dir, env.get("PYTHONPATH", "")) if p)
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--wall-only",
            "--n",
            str(n),
            "--calls",
            str(calls),
            *(() if with_experiments else ("--no-experiments",)),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


# -- report ---------------------------------------------------------------------------------


def rest_ms(m: Measured) -> float:
    """Wall time no timer covers (concurrent round trips counted once)."""
    own = sum(v for k, v in m.phases.items() if not k.startswith("round trip"))
    return m.phase_wall_ms - m.trip_ms - own


def _f(ms: float) -> str:
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:,.0f}"


def render(
    argv: Sequence[str],
    machine_lines: Sequence[str],
    n: int,
    results: Sequence[Measured],
    base: Sequence[tuple[str, float]],
    other_parser: dict[str, Any] | None,
    exps: Sequence[tuple[str, str, float, float, str]],
    ranking_cache: str,
    elapsed: float,
    noio: Sequence[NoIo] = (),
    noio_conditions: Conditions | None = None,
) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Where the time goes: the write path and recall",
        "",
        f"`{' '.join(['bench/profile_store.py', *argv])}`, {stamp}, run took {elapsed:.0f} s; "
        f"{n:,} memories in the store (384-d, 20 thread scopes), one embedded server, one client.",
        "",
        *machine_lines,
        "",
        "Per scenario: **wall** (unprofiled calls: p50 / mean), the **round trips** one call sends, the "
        "**server**'s own time per call (`INFO commandstats` µs), **phases** (timers wrapped around the "
        "library's steps from outside; a round trip's time is pack + send + server + network + reply "
        "parsing; *rest* is what no timer covers: spans, metrics, ids, validation glue), and **CPU** "
        "(cProfile self time by where it runs, a builtin's time charged to its caller; "
        f"'{WAITING}' is idle time; the profiler inflates Python code, so read shares).",
        "",
        *render_noio(noio, noio_conditions),
        "## Baselines: raw round trips on this client (p50)",
        "",
        "| command | ms |",
        "|---|---|",
        *(f"| {name} | {_f(ms)} |" for name, ms in base),
        "",
    ]
    out += ["## Summary", ""]
    head = "| scenario | wall p50 ms | round trips | server ms/call | round-trip wall ms/call | client (not in a round trip) ms/call | biggest client phases |"
    out += [head, "|---|---|---|---|---|---|---|"]
    for m in results:
        trips = m.trip_ms
        server = m.server_ms
        client_ms = m.phase_wall_ms - trips
        top = sorted(
            ((k, v) for k, v in m.phases.items() if not k.startswith("round trip")), key=lambda kv: -kv[1]
        )[:3]
        rest = rest_ms(m)
        parts = [f"{k} {_f(v)}" for k, v in top] + [f"rest {_f(rest)}"]
        out.append(
            f"| {m.name} | {_f(m.p50_ms)} | {m.n_trips} | {_f(server)} | {_f(trips)} | {_f(client_ms)} "
            f"| {'; '.join(parts)} |"
        )
    out.append("")
    for m in results:
        out += [
            f"## {m.name}",
            "",
            f"- wall: p50 {_f(m.p50_ms)} ms, mean {_f(m.mean_ms)} ms ({m.calls} calls)"
            + (f"; {m.note}" if m.note else ""),
            f"- round trips of one call ({m.n_trips}): {m.trips}",
            "- server time per call: "
            + ", ".join(
                f"{k} {v:,.0f} µs" for k, v in sorted(m.server_us.items(), key=lambda kv: -kv[1]) if v >= 1
            )
            + f"; the commands sent: {m.server_ms:.3f} ms (commands inside scripts are also listed under "
            "their own names, inside the script's time)",
            "",
            f"Phases (mean ms per call over {m.calls} calls with timers; wall {_f(m.phase_wall_ms)} ms):",
            "",
            "| phase | ms/call | share of wall |",
            "|---|---|---|",
        ]
        for k, v in [
            *sorted(m.phases.items(), key=lambda kv: -kv[1]),
            ("rest (untimed library code)", rest_ms(m)),
        ]:
            out.append(f"| {k} | {_f(v)} | {v / m.phase_wall_ms:.0%} |")
        if m.missing:
            out += [
                "",
                "Not timed (the library no longer has them): " + ", ".join(f"`{x}`" for x in m.missing) + ".",
            ]
        if m.trip_ms < sum(v for k, v in m.phases.items() if k.startswith("round trip")) - 1e-9:
            out += [
                "",
                f"Round trips run concurrently here: {_f(m.trip_ms)} ms per call with one in flight; client "
                "phases run while the other round trip is in flight, so *rest* is approximate (it can go below zero).",
            ]
        out += [
            "",
            f"CPU (cProfile, ms per profiled call; profiled wall {_f(m.cpu_wall_ms)} ms):",
            "",
            "| where | ms/call | share |",
            "|---|---|---|",
        ]
        total = sum(m.cpu.values()) or 1.0
        for k, v in sorted(m.cpu.items(), key=lambda kv: -kv[1]):
            if v / total >= 0.005:
                out.append(f"| {k} | {_f(v)} | {v / total:.0%} |")
        out.append("")
    out += [
        f"Re-ranking's term cache after the read scenarios (`ranking._term_counts`): {ranking_cache}.",
        "",
    ]
    if other_parser is not None:
        here = "libvalkey" if valkey.utils.LIBVALKEY_AVAILABLE else "pure-Python"
        there = other_parser["parser"]
        out += [
            f"## Reply parser: {here} (this process) vs {there} (a subprocess, same data and calls)",
            "",
            f"| p50 ms | {here} | {there} | {there} ÷ {here} |",
            "|---|---|---|---|",
        ]
        mine = {m.name: m.p50_ms for m in results} | dict(base)
        theirs = other_parser["scenarios"] | other_parser["baselines"]
        for name, ms in mine.items():
            if name in theirs:
                out.append(f"| {name} | {_f(ms)} | {_f(theirs[name])} | {theirs[name] / ms:.2f}x |")
        out.append("")
    if exps:
        other_exps = (other_parser or {}).get("experiments", {})
        there = other_parser["parser"] if other_parser else ""
        out += [
            "## Experiments: proposed library changes, applied by monkeypatching (bench only)",
            "",
            "Measured interleaved, call by call, in this process; the library files are unchanged.",
            "",
            "| change | scenario | as shipped p50 ms | changed p50 ms | changed ÷ shipped | "
            + (f"changed ÷ shipped with {there} |" if other_exps else "")
            + " what |",
            "|---|---|---|---|---|---|" + ("---|" if other_exps else ""),
        ]
        for name, scen, a, b, what in exps:
            extra = ""
            if other_exps:
                r = other_exps.get(name)
                extra = f" {r:.2f}x |" if r is not None else " - |"
            out.append(f"| {name} | {scen} | {_f(a)} | {_f(b)} | {b / a:.2f}x |{extra} {what} |")
        out.append("")
    return "\n".join(out)


async def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10_000, help="memories in the store (default 10000)")
    parser.add_argument("--calls", type=int, default=200, help="calls per pass and scenario (default 200)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/profile.md"))
    parser.add_argument("--libvalkey", metavar="DIR", help="a directory holding libvalkey (pip --target)")
    parser.add_argument("--no-experiments", action="store_true")
    parser.add_argument(
        "--url", default=None, help="a throw-away server instead of the embedded one (the run FLUSHALLs it)"
    )
    parser.add_argument(
        "--noio-calls",
        type=int,
        default=200,
        help="no-I/O pass (issue 29): calls recorded per scenario, each replayed --noio-repeat times (default 200)",
    )
    parser.add_argument(
        "--noio-repeat", type=int, default=5, help="replays of each recorded call (default 5)"
    )
    parser.add_argument("--no-noio", action="store_true", help="leave out the no-I/O pass")
    parser.add_argument(
        "--noio-only", action="store_true", help="the no-I/O pass alone, printed (no file written)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 1000 memories, 20 calls")
    parser.add_argument("--wall-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.calls = 1000, 20
        args.noio_calls, args.noio_repeat = 20, 3
    if args.wall_only:
        print(json.dumps(await wall_only(args.n, args.calls, with_experiments=not args.no_experiments)))
        return
    if args.url and args.libvalkey:
        parser.error("--libvalkey compares parsers on the embedded server; leave out --url")
    started = time.perf_counter()
    load_start = os.getloadavg()
    server = None if args.url else await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    client = avalkey.Valkey.from_url(args.url or server.url)  # type: ignore[union-attr]
    try:
        if args.url:
            await client.flushall(asynchronous=False)
        print(f"populating {args.n:,} memories", file=sys.stderr)
        ctx = await setup(client, args.n)
        noio, noio_cond = (
            ([], None) if args.no_noio else await noio_pass(ctx, args.noio_calls, args.noio_repeat)
        )
        if args.noio_only:
            load = os.getloadavg()
            print(f"{args.n:,} memories; load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}\n")
            print("\n".join(render_noio(noio, noio_cond)))
            await ctx.bench.close_stores()
            return
        # Reads on the populated store, then the client-side experiments, then the writes
        # (which grow the store), then the server-side experiments.
        results = []
        all_scenarios = scenarios(ctx, args.calls)
        for sc in all_scenarios:
            if not sc.writes:
                print(f"profiling: {sc.name}", file=sys.stderr)
                results.append(await measure(ctx, sc))
        base = await baselines(ctx, args.calls)
        info = ranking_mod._term_counts.cache_info()
        cache = f"{info.hits:,} hits, {info.misses:,} misses, {info.currsize:,} of {info.maxsize:,} entries"
        exps = [] if args.no_experiments else await client_experiments(ctx, args.calls)
        for sc in all_scenarios:
            if sc.writes:
                print(f"profiling: {sc.name}", file=sys.stderr)
                results.append(await measure(ctx, sc))
        if not args.no_experiments:
            exps += await server_experiments(ctx, args.calls)
        machine_lines = await machine(ctx.bench, load_start)
        await ctx.bench.close_stores()
    finally:
        await client.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)
    other = None
    if args.libvalkey:
        print("parser comparison (subprocess)", file=sys.stderr)
        other = parser_compare(args.libvalkey, args.n, args.calls, with_experiments=not args.no_experiments)
    report = render(
        argv,
        machine_lines,
        args.n,
        results,
        base,
        other,
        exps,
        cache,
        time.perf_counter() - started,
        noio,
        noio_cond,
    )
    kept = ""
    if args.out.exists():
        old = args.out.read_text(encoding="utf-8")
        if FINDINGS_MARK in old:
            kept = old[old.index(FINDINGS_MARK) :]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n" + (kept or FINDINGS_MARK + "\n"), encoding="utf-8")
    print(report)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
