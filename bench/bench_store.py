"""Benchmark ``MemoryStore`` against the raw Valkey commands it wraps, on one embedded server.

Every comparison runs the library call and its hand-written raw equivalent in
alternating rounds (``_harness.interleave``), on the same server, with the same
precomputed 384-d unit vectors (seeded numpy; no embedding model runs, so the figures
measure the library, not a model). See ``bench/README.md`` for what each row means.

    .venv/bin/python bench/bench_store.py                       # 1k and 10k memories
    .venv/bin/python bench/bench_store.py --sizes 1000,10000,100000
    .venv/bin/python bench/bench_store.py --quick               # smoke run, a few seconds
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import itertools
import math
import os
import platform
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import valkey.asyncio as avalkey
import valkey.utils
from _harness import Pair, Row, Samples, concurrent, cpu_count, cpu_model, interleave, render_rows

from betterdb_memory import MemoryStore, Scope
from betterdb_memory.codec import encode_vector
from betterdb_memory.dialect import Capabilities
from betterdb_memory.escaping import tag_token
from betterdb_memory.query import IndexSpec, MemoryFilter, create_index_args, knn_search_args
from betterdb_memory.server import EmbeddedServer

FloatMatrix = npt.NDArray[np.float32]
Fields = dict[str, str | bytes]

DIM = 384
K = 10
BATCH = 500  # remember_many batch size, and the raw pipeline's
THREADS = 20  # the populated memories spread over this many thread scopes
INFLIGHT = 32
INFLIGHT_ROUND = 128  # ops per side per round of the 32-in-flight comparison
READER = "bench-reader"  # agent of the populated memories (recall, forget)
WRITER = "bench-writer"  # agent of memories written by the write scenarios
SEED = 20240601
CONTEXT_TURNS = 40  # turns stored in the session retrieve_context reads
CONTEXT_BUDGET = 4096  # retrieve_context's token_budget


@dataclass(frozen=True, slots=True)
class Plan:
    """How much to measure. Rounds are maxima; ``budget_s`` caps each scenario's time."""

    sizes: tuple[int, ...]
    caps: tuple[int, ...]
    recall_rounds: int
    reinforce_rounds: int
    write_rounds: int
    inflight_rounds: int
    capped_rounds: int
    context_rounds: int
    budget_s: float
    warmup: int


DEFAULT_PLAN = Plan(
    sizes=(1000, 10000),
    caps=(1000, 10000),
    recall_rounds=300,
    reinforce_rounds=100,
    write_rounds=200,
    inflight_rounds=8,
    capped_rounds=200,
    context_rounds=200,
    budget_s=8.0,
    warmup=20,
)
QUICK_PLAN = Plan(
    sizes=(500,),
    caps=(100, 300),
    recall_rounds=20,
    reinforce_rounds=10,
    write_rounds=20,
    inflight_rounds=2,
    capped_rounds=20,
    context_rounds=20,
    budget_s=0.5,
    warmup=3,
)


class PrecomputedOnly:
    """Embedder stand-in: every benchmarked call passes its vector, so none is embedded."""

    dimensions = DIM
    model_id = "bench-precomputed-384"

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        raise RuntimeError("the benchmark passes vectors; embedding would distort the figures")


class VectorBook:
    """Embedder for ``retrieve_context``, which embeds its query: a dict lookup of vectors
    computed up front (the populated memories' own), so no embedding time is measured."""

    dimensions = DIM
    model_id = PrecomputedOnly.model_id  # same vector space: the store's index accepts it

    def __init__(self, book: dict[str, FloatMatrix]) -> None:
        self._book = book

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return np.stack([self._book[t] for t in texts])

    def vector(self, text: str) -> FloatMatrix:
        return self._book[text]


@dataclass(frozen=True, slots=True)
class Doc:
    content: str
    thread: str
    agent: str
    vector: FloatMatrix

    def item(self) -> dict[str, Any]:
        """The ``remember_many`` item for this memory."""
        return {
            "content": self.content,
            "vector": self.vector,
            "thread_id": self.thread,
            "agent_id": self.agent,
        }


@dataclass(frozen=True, slots=True)
class RawIndex:
    """A hand-made index with the library's schema, written to by plain HSET."""

    name: str

    @property
    def prefix(self) -> str:
        return f"{self.name}:mem:"

    @property
    def index(self) -> str:
        return f"{self.name}:mem:idx"

    def entry(self, doc: Doc, now: float) -> tuple[str, Fields]:
        """Key and fields of ``doc``: the HASH fields the library writes, computed up front."""
        scope = Scope.of(agent_id=doc.agent, thread_id=doc.thread)
        fields: Fields = {
            "content": doc.content,
            "embedding": encode_vector(doc.vector),
            "importance": "0.5",
            "created_at": repr(now),
            "last_accessed_at": repr(now),
            "access_count": "0",
            "sensitivity": "none",
            "kind": "memory",
            "dedup": hashlib.blake2b(doc.content.encode(), digest_size=16).hexdigest(),
            "metadata": "{}",
            "tags": "",
            "tags_raw": "[]",
            "thread_id": tag_token(doc.thread),
            "thread_id_raw": doc.thread,
            "agent_id": tag_token(doc.agent),
            "agent_id_raw": doc.agent,
        }
        return f"{self.prefix}{{{scope.tag}}}:{uuid.uuid4().hex}", fields


class Bench:
    """The shared state of one run: client, engine capabilities, seeded vectors."""

    def __init__(self, client: Any, plan: Plan) -> None:
        self.client = client
        self.plan = plan
        self.caps: Capabilities | None = None
        self._rng = np.random.default_rng(SEED)
        self._serial = itertools.count()
        self._stores: list[MemoryStore] = []

    def store(self, name: str, embedder: Any = None, **options: Any) -> MemoryStore:
        # threshold 0: random vectors sit near similarity 0.5, and every recall must
        # return (and reinforce) k hits for the figures to mean anything.
        store = MemoryStore(
            client=self.client,
            name=name,
            embedder=embedder or PrecomputedOnly(),
            threshold=2.0,
            **options,
        )
        self._stores.append(store)
        return store

    async def close_stores(self) -> None:
        """Let the stores finish their background work (stats flushes); the client stays open."""
        stores, self._stores = self._stores, []
        for store in stores:
            await store.close()

    async def raw_index(self, name: str) -> RawIndex:
        assert self.caps is not None
        raw = RawIndex(name)
        spec = IndexSpec(index=raw.index, prefix=raw.prefix, dimensions=DIM)
        await self.client.execute_command(*create_index_args(spec, self.caps))
        return raw

    def unit_vectors(self, n: int) -> FloatMatrix:
        v = self._rng.standard_normal((n, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v

    def docs(self, n: int, *, agent: str, thread: str | None = None) -> list[Doc]:
        """``n`` memories with unique contents; round-robin over THREADS threads unless one is given."""
        vectors = self.unit_vectors(n)
        out = []
        for i in range(n):
            serial = next(self._serial)
            content = f"memory {serial}: the user prefers window seats and vegetarian meals on long flights"
            out.append(Doc(content, thread or f"t{i % THREADS}", agent, vectors[i]))
        return out

    async def used_memory(self) -> int:
        return int((await self.client.info("memory"))["used_memory"])

    async def fill(self, store: MemoryStore, docs: Sequence[Doc]) -> None:
        """Untimed population through the library, in batches."""
        for i in range(0, len(docs), BATCH):
            await store.remember_many([d.item() for d in docs[i : i + BATCH]])

    async def raw_write(self, entries: Sequence[tuple[str, Fields]]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for key, fields in entries:
            pipe.hset(key, mapping=fields)
        await pipe.execute()

    async def flush(self) -> None:
        """Close this scenario's stores, then empty the server for the next one."""
        await self.close_stores()
        # Our own throw-away server: FLUSHALL also drops every search index.
        await self.client.flushall(asynchronous=False)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- scenarios at size N --------------------------------------------------------------------


@dataclass(slots=True)
class SizeResult:
    n: int
    rows: list[Row]
    memory: Pair  # memory_delta / ops = bytes per memory


async def populate(
    bench: Bench, ours: MemoryStore, raw: RawIndex, docs: Sequence[Doc]
) -> tuple[Row, Pair, list[str]]:
    """remember_many (batches of 500) vs pipelined HSET of the same fields, with memory deltas."""
    now = time.time()
    entries = [raw.entry(d, now) for d in docs]
    batches = [docs[i : i + BATCH] for i in range(0, len(docs), BATCH)]
    raw_batches = [entries[i : i + BATCH] for i in range(0, len(entries), BATCH)]
    items = [[d.item() for d in b] for b in batches]  # the caller's own data, built before timing

    async def ours_op(i: int) -> None:
        await ours.remember_many(items[i])

    async def raw_op(i: int) -> None:
        await bench.raw_write(raw_batches[i])

    pair = await interleave(
        ours_op, raw_op, rounds=len(batches), budget_s=float("inf"), memory_probe=bench.used_memory
    )
    # Batch latency is per 500 memories; throughput counts memories, not batches.
    for side, sizes in ((pair.ours, batches), (pair.raw, raw_batches)):
        side.ops = sum(len(b) for b in sizes)
    row = Row(f"remember_many, batches of {BATCH} (vs pipelined HSET)", pair, flag_below=0.9)
    return row, pair, [key for key, _ in entries]


async def recall_rows(
    bench: Bench, ours: MemoryStore, ours_cf1: MemoryStore, docs: Sequence[Doc]
) -> list[Row]:
    """recall_by_vector vs FT.SEARCH with the same query string, k and filter."""
    plan, caps = bench.plan, bench.caps
    assert caps is not None
    rng = np.random.default_rng(SEED + len(docs))
    variants: list[tuple[str, MemoryStore, bool, bool]] = [
        ("recall unscoped, reinforce off", ours, False, False),
        ("recall unscoped, reinforce on", ours, False, True),
        ("recall unscoped, reinforce off, candidate_factor=1", ours_cf1, False, False),
        ("recall scoped (thread), reinforce off", ours, True, False),
        ("recall scoped (thread), reinforce on", ours, True, True),
        ("recall scoped (thread), reinforce off, candidate_factor=1", ours_cf1, True, False),
    ]
    rows = []
    for label, store, scoped, reinforce in variants:
        rounds = plan.reinforce_rounds if reinforce else plan.recall_rounds
        total = rounds + plan.warmup
        # Queries near a stored memory (as a real recall is): its vector plus noise.
        picks = rng.integers(0, len(docs), size=total)
        noise = rng.standard_normal((total, DIM)).astype(np.float32) / np.sqrt(DIM)
        queries = np.stack([docs[j].vector for j in picks]) + noise
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        threads = [docs[j].thread if scoped else None for j in picks]
        raw_args = [
            knn_search_args(
                ours.keys.index,
                encode_vector(q),
                k=K,
                flt=MemoryFilter(scope=Scope.of(thread_id=t)) if t else MemoryFilter(),
                caps=caps,
            )
            for q, t in zip(queries, threads, strict=True)
        ]

        async def ours_op(
            i: int,
            store: MemoryStore = store,
            reinforce: bool = reinforce,
            queries: FloatMatrix = queries,
            threads: list[str | None] = threads,
        ) -> None:
            hits = await store.recall_by_vector(queries[i], k=K, thread_id=threads[i], reinforce=reinforce)
            assert len(hits) == K, len(hits)

        async def raw_op(i: int, raw_args: list[list[str | bytes]] = raw_args) -> None:
            await bench.client.execute_command(*raw_args[i])

        for i in range(plan.warmup):
            await ours_op(rounds + i)
            await raw_op(rounds + i)
        pair = await interleave(ours_op, raw_op, rounds=rounds, budget_s=plan.budget_s)
        rows.append(Row(label, pair, flag_above=1.3))
        log(f"  {label}: p50 {pair.ours.p50 * 1e3:.2f} ms vs raw {pair.raw.p50 * 1e3:.2f} ms")
    return rows


def context_k(store: MemoryStore, token_budget: int) -> tuple[int, int]:
    """(k, KNN k) of the recall ``retrieve_context`` issues, per short_term.py and recall.py.

    k: ``max(4, min(50, ceil(usable / 40)))``, usable = budget minus the system reserve;
    KNN k: ``k * candidate_factor``, at least ``rerank_candidates`` when a reranker is on.
    """
    usable = token_budget - math.floor(token_budget * store._st.budget.system)
    k = max(4, min(50, math.ceil(usable / 40)))
    knn = k * store.candidate_factor
    if store.reranker is not None:
        knn = max(knn, store.rerank_candidates)
    return k, min(knn, 10_000)


def turn_text(i: int, role: str) -> str:
    """About 90 tokens (heuristic: 4 chars each) of varied conversation per message."""
    topics = (
        "flight to Lisbon",
        "hotel near the river",
        "vegetarian dinner",
        "museum tickets",
        "train to Porto",
    )
    topic = topics[i % len(topics)]
    return (
        f"{role} turn {i}: about the {topic}. "
        + f"Let us compare options for the {topic}, prices, times and what was said before. " * 4
    ).strip()


async def context_rows(bench: Bench, name: str, docs: Sequence[Doc]) -> list[Row]:
    """retrieve_context(budget 4096) vs the raw commands it issues, gathered as it gathers them.

    Two more store objects over the populated index, whose embedder looks the query's
    vector up in a dict (no embedding time). One session of CONTEXT_TURNS turns
    (``summarize_batch=0``: no background summary runs while measuring). Raw: LRANGE of
    the session's turn list and the FT.SEARCH KNN of the recall (same k, same filter),
    run with ``asyncio.gather``.
    """
    plan, caps, client = bench.plan, bench.caps, bench.client
    assert caps is not None
    rng = np.random.default_rng(SEED + 7 * len(docs))
    total = plan.context_rounds + plan.warmup
    picks = rng.integers(0, len(docs), size=total)
    # The query text is a populated memory's content; its vector, the one it was stored with.
    queries = [docs[j].content for j in picks]
    book = VectorBook({docs[j].content: docs[j].vector for j in picks})
    thread = docs[0].thread  # one thread scope of the populated store
    variants = [
        (f"retrieve_context, budget {CONTEXT_BUDGET}", {}),
        (f"retrieve_context, budget {CONTEXT_BUDGET}, reranker=False", {"reranker": False}),
    ]
    stores = [bench.store(name, embedder=book, summarize_batch=0, **opts) for _, opts in variants]
    for i in range(CONTEXT_TURNS):
        await stores[0].store_turn(thread, turn_text(i, "user"), turn_text(i, "assistant"))
    turns_key = stores[0].keys.session(None, thread).turns
    assert await client.llen(turns_key) == CONTEXT_TURNS
    rows = []
    for (label, _), store in zip(variants, stores, strict=True):
        k, knn = context_k(store, CONTEXT_BUDGET)
        flt = MemoryFilter()  # agent_id / namespace None: recall across the whole store
        raw_args = [
            knn_search_args(store.keys.index, encode_vector(book.vector(q)), k=knn, flt=flt, caps=caps)
            for q in queries
        ]

        # Check once that the raw side issues what the library does (KNN k and filter).
        seen: list[tuple[MemoryFilter, int]] = []
        search = store.search_candidates

        async def spy(
            vector: Any, f: MemoryFilter, kk: int, search: Any = search, seen: list[Any] = seen, **kw: Any
        ) -> Any:
            seen.append((f, kk))
            return await search(vector, f, kk, **kw)

        store.search_candidates = spy  # type: ignore[method-assign]
        ctx = await store.retrieve_context(thread, queries[0], token_budget=CONTEXT_BUDGET)
        del store.search_candidates
        assert seen == [(flt, knn)], (seen, flt, knn)
        assert ctx.turns and ctx.memories, ctx

        async def ours_op(i: int, store: MemoryStore = store) -> None:
            await store.retrieve_context(thread, queries[i], token_budget=CONTEXT_BUDGET)

        async def raw_op(i: int, raw_args: list[list[str | bytes]] = raw_args) -> None:
            await asyncio.gather(client.lrange(turns_key, 0, -1), client.execute_command(*raw_args[i]))

        for i in range(plan.warmup):
            await ours_op(plan.context_rounds + i)
            await raw_op(plan.context_rounds + i)
        pair = await interleave(ours_op, raw_op, rounds=plan.context_rounds, budget_s=plan.budget_s)
        full = f"{label} (vs LRANGE + FT.SEARCH KNN {knn}, gathered)"
        rows.append(Row(full, pair))
        log(
            f"  {label}: p50 {pair.ours.p50 * 1e3:.2f} ms vs raw {pair.raw.p50 * 1e3:.2f} ms "
            f"(k={k}, KNN {knn}; assembled {len(ctx.turns)}/{CONTEXT_TURNS} turns, "
            f"{len(ctx.memories)} memories, {ctx.tokens_used.total} tokens)"
        )
    return rows


async def write_rows(bench: Bench, ours: MemoryStore, raw: RawIndex) -> list[Row]:
    """remember (sequential; 32 in flight) vs HSET of the same fields (sequential; 32 in flight)."""
    plan, client = bench.plan, bench.client
    now = time.time()

    single = bench.docs(plan.write_rounds + plan.warmup, agent=WRITER, thread="w-single")
    single_raw = [raw.entry(d, now) for d in single]

    async def ours_single(i: int) -> None:
        d = single[i]
        await ours.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

    async def raw_single(i: int) -> None:
        key, fields = single_raw[i]
        await client.hset(key, mapping=fields)

    for i in range(plan.warmup):
        await ours_single(plan.write_rounds + i)
        await raw_single(plan.write_rounds + i)
    rows = [
        Row(
            "remember, one at a time (vs HSET)",
            await interleave(ours_single, raw_single, rounds=plan.write_rounds, budget_s=plan.budget_s),
        )
    ]

    flight = bench.docs(plan.inflight_rounds * INFLIGHT_ROUND, agent=WRITER, thread="w-inflight")
    flight_raw = [raw.entry(d, now) for d in flight]

    def ours_call(d: Doc) -> Callable[[], Awaitable[str]]:
        return lambda: ours.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

    def raw_call(key: str, fields: Fields) -> Callable[[], Awaitable[int]]:
        return lambda: client.hset(key, mapping=fields)

    async def ours_flight(i: int) -> list[float]:
        chunk = flight[i * INFLIGHT_ROUND : (i + 1) * INFLIGHT_ROUND]
        return await concurrent([ours_call(d) for d in chunk], INFLIGHT)

    async def raw_flight(i: int) -> list[float]:
        chunk = flight_raw[i * INFLIGHT_ROUND : (i + 1) * INFLIGHT_ROUND]
        return await concurrent([raw_call(k, f) for k, f in chunk], INFLIGHT)

    pair = await interleave(
        ours_flight, raw_flight, rounds=plan.inflight_rounds, budget_s=plan.budget_s, min_rounds=2
    )
    rows.append(Row(f"remember, {INFLIGHT} in flight (vs HSET, {INFLIGHT} in flight)", pair))
    return rows


async def forget_row(bench: Bench, ours: MemoryStore, raw_keys: Sequence[str], n: int) -> Row:
    """forget_by_scope of the n populated memories vs UNLINK of their known keys, 500 per pipeline."""
    t0 = time.perf_counter()
    deleted = await ours.forget_by_scope(agent_id=READER)
    ours_s = time.perf_counter() - t0
    assert deleted == n, (deleted, n)
    t0 = time.perf_counter()
    for i in range(0, len(raw_keys), BATCH):
        pipe = bench.client.pipeline(transaction=False)
        for key in raw_keys[i : i + BATCH]:
            pipe.unlink(key)
        await pipe.execute()
    raw_s = time.perf_counter() - t0
    pair = Pair(Samples([ours_s], n, ours_s), Samples([raw_s], n, raw_s))
    return Row(f"forget_by_scope of {n:,} memories in {THREADS} scopes (vs UNLINK pipelines)", pair)


async def run_size(bench: Bench, n: int) -> SizeResult:
    name = f"size{n}"
    ours = bench.store(name)
    ours_cf1 = bench.store(name, candidate_factor=1)  # same data and index, KNN k = requested k
    await ours.ensure_index()
    await ours_cf1.ensure_index()
    bench.caps = ours.capabilities
    raw = await bench.raw_index(f"{name}-raw")

    # Warm up both write paths (script load, connections, the first index blocks).
    warm = bench.docs(2 * bench.plan.warmup, agent=WRITER, thread="warmup")
    await bench.fill(ours, warm)
    await bench.raw_write([raw.entry(d, time.time()) for d in warm])

    log(f"N={n:,}: populating (remember_many vs pipelined HSET)")
    docs = bench.docs(n, agent=READER)
    populate_row, memory, raw_keys = await populate(bench, ours, raw, docs)
    log(f"N={n:,}: recall")
    rows = [*await recall_rows(bench, ours, ours_cf1, docs)]
    log(f"N={n:,}: retrieve_context")
    rows += await context_rows(bench, name, docs)
    log(f"N={n:,}: writes")
    rows += await write_rows(bench, ours, raw)
    rows.append(populate_row)
    log(f"N={n:,}: forget_by_scope")
    rows.append(await forget_row(bench, ours, raw_keys, n))
    await bench.flush()
    return SizeResult(n, rows, memory)


# -- fixed-size scenarios -------------------------------------------------------------------


async def capped_rows(bench: Bench) -> list[Row]:
    """A write into a scope already at its cap (so it evicts one) vs an uncapped write.

    Both stores are views of one store name, so both writes pay for the same index
    size; the uncapped one writes into another scope (a write's cost does not depend
    on its scope's size: the bookkeeping is O(log n) sorted-set work).
    """
    plan = bench.plan
    rows = []
    for cap in plan.caps:
        capped = bench.store(f"cap{cap}", max_items_per_scope=cap)
        uncapped = bench.store(f"cap{cap}")
        log(f"cap {cap:,}: filling one scope to the cap")
        await bench.fill(capped, bench.docs(cap, agent=WRITER, thread="full"))
        writes = bench.docs(plan.capped_rounds + plan.warmup, agent=WRITER, thread="full")

        async def capped_op(i: int, store: MemoryStore = capped, writes: list[Doc] = writes) -> None:
            d = writes[i]
            await store.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

        async def uncapped_op(i: int, store: MemoryStore = uncapped, writes: list[Doc] = writes) -> None:
            d = writes[i]
            await store.remember(d.content, vector=d.vector, thread_id="open", agent_id=d.agent)

        for i in range(plan.warmup):
            await capped_op(plan.capped_rounds + i)
            await uncapped_op(plan.capped_rounds + i)
        pair = await interleave(capped_op, uncapped_op, rounds=plan.capped_rounds, budget_s=plan.budget_s)
        held = await capped.count(thread_id="full", agent_id=WRITER)
        assert held == cap, (held, cap)  # every capped write evicted exactly one
        rows.append(Row(f"remember into a full scope, cap {cap:,} (vs uncapped)", pair, flag_above=2.0))
        await bench.flush()
    return rows


# -- report --------------------------------------------------------------------------------


def memory_table(results: Sequence[SizeResult]) -> str:
    lines = [
        "| memories | ours bytes/memory | raw bytes/memory | ours/raw |",
        "|---|---|---|---|",
    ]
    for r in results:
        o = r.memory.ours.memory_delta / r.memory.ours.ops
        w = r.memory.raw.memory_delta / r.memory.raw.ops
        lines.append(f"| {r.n:,} | {o:,.0f} | {w:,.0f} | {o / w:.2f}x |")
    return "\n".join(lines)


async def machine(bench: Bench, load_start: tuple[float, float, float]) -> list[str]:
    info = await bench.client.info("server")
    caps = bench.caps
    search = f"{caps.engine} {caps.version_string}" if caps else "unknown"
    load_end = os.getloadavg()
    return [
        f"- CPU: {cpu_count()} cores available (nproc), {cpu_model()}",
        f"- OS: {platform.system()} {platform.release()}, Python {platform.python_version()}",
        f"- valkey-server {info.get('valkey_version', info.get('redis_version'))}, "
        f"search module {search}, valkey-py {dist_version('valkey')} "
        f"({'libvalkey' if valkey.utils.LIBVALKEY_AVAILABLE else 'pure-Python'} reply parser), "
        f"numpy {np.__version__}",
        "- load average (1/5/15 min) at start: "
        + " / ".join(f"{x:.2f}" for x in load_start)
        + ", at end: "
        + " / ".join(f"{x:.2f}" for x in load_end),
    ]


def render(
    argv: Sequence[str],
    plan: Plan,
    machine_lines: Sequence[str],
    results: Sequence[SizeResult],
    capped: Sequence[Row],
    elapsed: float,
) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# betterdb-memory: MemoryStore vs raw commands",
        "",
        f"`{' '.join(['bench/bench_store.py', *argv])}`, {stamp}, run took {elapsed:.0f} s.",
        "",
        *machine_lines,
        "",
        f"k={K}, {DIM}-d precomputed unit vectors, HNSW M=16 EF_CONSTRUCTION=200 EF_RUNTIME=10, "
        f"memories spread over {THREADS} thread scopes. Ours and raw alternate round by round "
        "(order flips each round). Latency ratio: ours/raw p50 (lower is better); throughput "
        "ratio: ours/raw ops/s (higher is better). ⚠ marks a ratio past its threshold "
        "(recall > 1.3x, remember_many < 0.9x, capped > 2x). `n`: samples per side.",
        "",
        f"Rounds per scenario (at most, and at most {plan.budget_s:g} s each after {plan.warmup} "
        f"warm-up calls per side): recall {plan.recall_rounds}, recall with reinforcement "
        f"{plan.reinforce_rounds}, single writes {plan.write_rounds}, {INFLIGHT}-in-flight "
        f"{plan.inflight_rounds} x {INFLIGHT_ROUND} writes, capped writes {plan.capped_rounds}, "
        f"retrieve_context {plan.context_rounds} ({CONTEXT_TURNS} turns in the session, "
        "query embedding a dict lookup).",
        "",
    ]
    for r in results:
        out += [f"## {r.n:,} memories", "", render_rows(r.rows), ""]
    if results:
        out += [
            "## Memory used in Valkey per memory (INFO used_memory delta / N)",
            "",
            memory_table(results),
            "",
        ]
    if capped:
        out += [
            "## Capped writes (each write evicts one)",
            "",
            render_rows(capped, ours="capped", raw="uncapped"),
            "",
        ]
    return "\n".join(out)


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> tuple[Plan, Path]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes (default 1000,10000)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/latest.md"), help="markdown output")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes and few rounds")
    args = parser.parse_args(argv)
    plan = QUICK_PLAN if args.quick else DEFAULT_PLAN
    if args.sizes:
        sizes = tuple(int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())
        if not sizes or any(s < 2 * K * THREADS for s in sizes):
            parser.error(
                f"every size must be at least {2 * K * THREADS} (k={K} hits in each of {THREADS} scopes)"
            )
        plan = replace(plan, sizes=sizes)
    return plan, args.out


async def main(argv: Sequence[str]) -> None:
    plan, out = parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()
    server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    client = avalkey.Valkey.from_url(server.url)
    bench = Bench(client, plan)
    try:
        results = [await run_size(bench, n) for n in plan.sizes]
        capped = await capped_rows(bench)
        machine_lines = await machine(bench, load_start)
    finally:
        await bench.close_stores()
        await client.aclose()
        await asyncio.to_thread(server.stop)
    report = render(argv, plan, machine_lines, results, capped, time.perf_counter() - started)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n", encoding="utf-8")
    print(report)
    log(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
