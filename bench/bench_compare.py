"""betterdb-memory side by side with betterdb-agent-memory and actrone-memory, in one run.

All three libraries (and the raw commands of ``bench_store.py``) run on one embedded
server and one event loop, with one shared deterministic 384-d embedder
(``_refs.VectorBook``), and every workload rotates through the libraries round by
round so load from other processes lands on all of them. See ``bench/README.md``
("Comparison with the reference libraries") for what each row means.

    .venv/bin/pip install -e '.[embedded,bench]'
    .venv/bin/python bench/bench_compare.py                       # 1k and 10k memories
    .venv/bin/python bench/bench_compare.py --sizes 1000,10000,100000
    .venv/bin/python bench/bench_compare.py --quick               # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import math
import os
import sys
import time
import types
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import numpy as np
import valkey.asyncio as avalkey
from _harness import Samples, concurrent
from _refs import (
    ACTRONE_MISSING,
    ActroneAdapter,
    Adapter,
    AgentMemoryAdapter,
    Context,
    OursAdapter,
    RawAdapter,
    Unsupported,
    VectorBook,
)
from bench_store import DIM, Doc, RawIndex, log, machine

from betterdb_memory.core.keys import KeySpace
from betterdb_memory.core.query import create_index_args
from betterdb_memory.server import EmbeddedServer

K = 10
BATCH = 500
THREADS = 20
TOPICS = 50
SPREAD = 0.75  # noise norm around a topic centroid: cos(member, member) ~ 0.64, across topics ~ 0
INFLIGHT = 32
INFLIGHT_ROUND = 128
BUDGET_TOKENS = 4096
READER = "bench-reader"
WRITER = "bench-writer"
SEED = 20241130
SLICE_S = 0.15  # per round, each library runs about this long (at least one call)
MAX_REPS = 25

# One relevance cut, on each library's own scale: cosine 0.3 (topic members pass,
# other topics do not). Both Valkey libraries take a cosine-distance ceiling, 1 - cos;
# actrone-memory a cosine. Recall rows override the first two (threshold 2.0, the widest
# ceiling) so every call returns exactly k hits.
RELEVANT_COS = 0.3
OURS_THRESHOLD = 1 - RELEVANT_COS
BAM_THRESHOLD = 1 - RELEVANT_COS

SIDES = ("ours", "bam", "actrone", "raw")
LABELS = {
    "ours": "betterdb-memory",
    "bam": "betterdb-agent-memory",
    "actrone": "actrone-memory",
    "raw": "raw commands",
}

SUBJECTS = (
    "window seats on long flights", "vegetarian meals", "dark mode in the editor",
    "morning meetings", "weekly email summaries", "python type hints", "hiking in the alps",
    "jazz playlists while working", "budget hotels near stations", "espresso with oat milk",
)  # fmt: skip
VERBS = ("prefers", "dislikes", "asked about", "mentioned", "wants reminders about")


@dataclass(frozen=True, slots=True)
class Plan:
    """Rounds are maxima; each workload also stops after ``budget_s`` (with >= 5 samples per side)."""

    sizes: tuple[int, ...]
    caps: tuple[int, ...]
    recall_rounds: int
    reinforce_rounds: int
    context_rounds: int
    write_rounds: int
    inflight_rounds: int
    capped_rounds: int
    budget_s: float
    warmup: int
    turns: int
    actrone_max: int


DEFAULT_PLAN = Plan(
    sizes=(1000, 10000),
    caps=(1000, 10000),
    recall_rounds=300,
    reinforce_rounds=100,
    context_rounds=100,
    write_rounds=200,
    inflight_rounds=8,
    capped_rounds=200,
    budget_s=7.0,
    warmup=10,
    turns=30,
    actrone_max=20000,
)
QUICK_PLAN = Plan(
    sizes=(1000,),
    caps=(100,),
    recall_rounds=20,
    reinforce_rounds=10,
    context_rounds=10,
    write_rounds=20,
    inflight_rounds=2,
    capped_rounds=20,
    budget_s=0.5,
    warmup=2,
    turns=30,
    actrone_max=20000,
)


# -- measurement --------------------------------------------------------------------------

# One measured call of one library: gets its call number; returns per-op latencies when
# it ran several ops concurrently, None when the call is one op.
Call = Callable[[int], Awaitable[list[float] | None]]


@dataclass(slots=True)
class Row:
    """One workload: samples per library, or the reason it could not run."""

    label: str
    samples: dict[str, Samples] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def p50(self, side: str) -> float:
        s = self.samples.get(side)
        return s.p50 if s else math.nan


async def rotate(
    calls: Mapping[str, Call],
    *,
    rounds: int,
    budget_s: float,
    warmup: int,
    min_samples: int = 5,
    ops_per_call: int = 1,
    probe: Callable[[], Awaitable[int]] | None = None,
    probed: frozenset[str] = frozenset(),
    balance: bool = True,
) -> tuple[dict[str, Samples], dict[str, str]]:
    """Rotate through the libraries round by round until ``rounds`` calls each or ``budget_s``.

    Round ``r`` starts with the ``r % n``-th library. Warm-up calls (numbered from
    ``rounds`` up) time each library; with ``balance`` a library then makes
    ``SLICE_S / its call time`` calls per round (1..MAX_REPS), so a 1 s call and a
    2 ms call share every round instead of the slow one setting the pace for all.
    A library that raises ``Unsupported`` is left out, with the reason returned.
    ``probe`` (untimed, INFO used_memory) is read around the calls of ``probed`` sides.
    """
    active: dict[str, Call] = {}
    missing: dict[str, str] = {}
    reps: dict[str, int] = {}
    for key, fn in calls.items():
        t0 = time.perf_counter()
        done = 0
        try:
            while done < warmup and (done < 2 or time.perf_counter() - t0 < 1.0):
                await fn(rounds + done)
                done += 1
        except Unsupported as exc:
            missing[key] = str(exc)
            continue
        active[key] = fn
        per_call = (time.perf_counter() - t0) / done if done else SLICE_S
        reps[key] = max(1, min(MAX_REPS, round(SLICE_S / per_call))) if balance else 1
    out = {key: Samples() for key in active}
    made = dict.fromkeys(active, 0)
    order = list(active)
    start = time.perf_counter()
    r = 0
    while True:
        todo = [k for k in order if made[k] < rounds]
        if not todo:
            break
        if time.perf_counter() - start > budget_s and all(made[k] >= min_samples for k in todo):
            break
        shift = r % len(todo)
        for key in todo[shift:] + todo[:shift]:
            for _ in range(min(reps[key], rounds - made[key])):
                before = await probe() if probe and key in probed else 0
                t0 = time.perf_counter()
                try:
                    per_op = await active[key](made[key])
                except Unsupported as exc:  # only possible without warm-up
                    missing[key] = str(exc)
                    out.pop(key, None)
                    made[key] = rounds
                    break
                elapsed = time.perf_counter() - t0
                side = out[key]
                if probe and key in probed:
                    side.memory_delta += await probe() - before
                side.seconds += elapsed
                made[key] += 1
                if per_op is None:
                    side.latencies.append(elapsed)
                    side.ops += ops_per_call
                else:
                    side.latencies.extend(per_op)
                    side.ops += len(per_op)
        r += 1
    return out, missing


# -- data ------------------------------------------------------------------------------------


class Corpus:
    """Clustered unit vectors and the texts they belong to, registered in the shared book.

    Memories and queries sit around ``TOPICS`` random centroids, so a query has a set of
    relevant memories (its topic) and a relevance threshold means something, which
    context assembly needs; recall rows disable thresholds anyway.
    """

    def __init__(self, seed: int) -> None:
        self.book = VectorBook(DIM)
        self.rng = np.random.default_rng(seed)
        c = self.rng.standard_normal((TOPICS, DIM)).astype(np.float32)
        self.centroids = c / np.linalg.norm(c, axis=1, keepdims=True)
        self._serial = 0

    def _near(self, topics: np.ndarray) -> np.ndarray:
        noise = self.rng.standard_normal((len(topics), DIM)).astype(np.float32)
        v = self.centroids[topics] + noise * np.float32(SPREAD / math.sqrt(DIM))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    def docs(self, n: int, *, agent: str, thread: str | None = None) -> list[Doc]:
        topics = self.rng.integers(0, TOPICS, size=n)
        vectors = self._near(topics)
        out = []
        for i in range(n):
            t = int(topics[i])
            content = f"memory {self._next()}: the user {VERBS[t % len(VERBS)]} {SUBJECTS[t // len(VERBS)]}"
            self.book.add(content, vectors[i])
            out.append(Doc(content, thread or f"t{i % THREADS}", agent, vectors[i]))
        return out

    def queries(self, n: int) -> list[str]:
        topics = self.rng.integers(0, TOPICS, size=n)
        vectors = self._near(topics)
        out = []
        for i in range(n):
            text = f"question {self._next()}: what does the user think of {SUBJECTS[int(topics[i]) // len(VERBS)]}?"
            self.book.add(text, vectors[i])
            out.append(text)
        return out

    def turn(self, i: int) -> tuple[str, str]:
        subject = SUBJECTS[i % len(SUBJECTS)]
        user = f"Turn {i}: can you plan the next trip around {subject}? " * 4
        assistant = f"Sure. For turn {i} I looked at {subject} and found three options that fit. " * 6
        return user.strip(), assistant.strip()


# -- the run ---------------------------------------------------------------------------------


@dataclass(slots=True)
class SizeResult:
    n: int
    rows: list[Row]
    bytes_per_memory: dict[str, float]
    contexts: dict[str, Context]


class Run:
    def __init__(self, client: Any, plan: Plan) -> None:
        self.client = client
        self.plan = plan
        self.corpus = Corpus(SEED)
        self.caps: Any = None
        self.adapters: list[Adapter] = []

    async def used_memory(self) -> int:
        return int((await self.client.info("memory"))["used_memory"])

    async def flush(self) -> None:
        adapters, self.adapters = self.adapters, []
        for adapter in adapters:
            await adapter.close()
        await self.client.flushall(asynchronous=False)

    def keep(self, *adapters: Adapter) -> None:
        self.adapters += adapters

    async def sides(self, n: int) -> dict[str, Adapter]:
        """The four sides of one size: three libraries (actrone only up to ``actrone_max``) and raw."""
        ours = OursAdapter(self.client, f"ours{n}", self.corpus.book, threshold=OURS_THRESHOLD)
        bam = AgentMemoryAdapter(self.client, f"bam{n}", self.corpus.book, threshold=BAM_THRESHOLD)
        await ours.start()
        await bam.start()
        self.caps = ours.store.capabilities
        # The raw index: betterdb-memory's own FT.CREATE arguments (its spec), another name.
        raw_index = RawIndex(KeySpace(f"raw{n}"))
        spec = replace(ours.store.spec, index=raw_index.index, prefix=raw_index.keys.doc_prefix)
        await self.client.execute_command(*create_index_args(spec, self.caps))
        raw = RawAdapter(self.client, raw_index, ours=ours.store)
        raw.bind(self.corpus.book)
        sides: dict[str, Adapter] = {"ours": ours, "bam": bam}
        if n <= self.plan.actrone_max and not ACTRONE_MISSING:
            sides["actrone"] = await ActroneAdapter.create(
                self.corpus.book, relevance_threshold=RELEVANT_COS, agent=READER, write_agent=READER
            )
        sides["raw"] = raw
        self.keep(*sides.values())
        return sides

    async def run_size(self, n: int) -> SizeResult:
        plan = self.plan
        sides = await self.sides(n)
        skipped = (
            {}
            if "actrone" in sides
            else {"actrone": ACTRONE_MISSING or f"not run above {plan.actrone_max:,} (--actrone-max)"}
        )
        rows: list[Row] = []

        warm = self.corpus.docs(2 * plan.warmup, agent=WRITER, thread="warmup")
        for key, side in sides.items():
            side.prepare(docs=warm)
            if key != "actrone":  # scripts, connections, first index blocks; actrone is in-process
                await side.remember_batch(warm)

        log(f"N={n:,}: populating ({', '.join(sides)})")
        docs = self.corpus.docs(n, agent=READER)
        sides["raw"].prepare(docs=docs)
        batches = [docs[i : i + BATCH] for i in range(0, n, BATCH)]

        def batch_call(side: Adapter) -> Call:
            async def call(i: int) -> None:
                await side.remember_batch(batches[i])

            return call

        valkey_sides = frozenset(k for k, s in sides.items() if s.valkey)
        samples, missing = await rotate(
            {k: batch_call(s) for k, s in sides.items()},
            rounds=len(batches),
            budget_s=math.inf,
            warmup=0,
            ops_per_call=BATCH,
            probe=self.used_memory,
            probed=valkey_sides,
            balance=False,
        )
        populate = Row(f"batch write, {BATCH} per call (populate)", samples, {**missing, **skipped})
        bytes_per_memory = {k: s.memory_delta / n for k, s in samples.items() if k in valkey_sides}

        log(f"N={n:,}: recall")
        rows += await self.recall_rows(sides, skipped)
        log(f"N={n:,}: retrieve_context")
        context_row, contexts = await self.context_row(sides, skipped)
        rows.append(context_row)
        log(f"N={n:,}: writes")
        rows += await self.write_rows(sides, skipped)
        rows.append(populate)
        log(f"N={n:,}: forget_by_scope")
        rows.append(await self.forget_row(sides, n, skipped))
        await self.flush()
        return SizeResult(n, rows, bytes_per_memory, contexts)

    async def recall_rows(self, sides: Mapping[str, Adapter], skipped: dict[str, str]) -> list[Row]:
        plan = self.plan
        rows = []
        ours = sides["ours"]
        knn_only = ours.knn_only() if isinstance(ours, OursAdapter) else ours
        for label, scoped, reinforce, rounds, dense in (
            ("recall k=10, unscoped", False, False, plan.recall_rounds, False),
            ("recall k=10, scoped (thread)", True, False, plan.recall_rounds, False),
            ("recall k=10, unscoped, reinforce on", False, True, plan.reinforce_rounds, False),
            ("recall k=10, unscoped, ours with reranker=False", False, False, plan.recall_rounds, True),
            ("recall k=10, scoped (thread), ours with reranker=False", True, False, plan.recall_rounds, True),
            (
                "recall k=10, unscoped, reinforce on, ours with reranker=False",
                False,
                True,
                plan.reinforce_rounds,
                True,
            ),
        ):
            row_sides = {**sides, "ours": knn_only} if dense else dict(sides)
            texts = self.corpus.queries(rounds + plan.warmup)
            threads = [
                f"t{int(t)}" if scoped else None for t in self.corpus.rng.integers(0, THREADS, len(texts))
            ]
            sides["raw"].prepare(queries=list(zip(texts, threads, strict=True)))

            short: dict[str, int] = {}

            def recall_call(
                side: Adapter,
                texts: list[str] = texts,
                threads: list[str | None] = threads,
                reinforce: bool = reinforce,
                short: dict[str, int] = short,
            ) -> Call:
                async def call(i: int) -> None:
                    hits = await side.recall(texts[i], thread=threads[i], reinforce=reinforce)
                    if hits < K:  # actrone-memory's threshold can admit fewer than k
                        short[side.key] = short.get(side.key, 0) + 1

                return call

            samples, missing = await rotate(
                {k: recall_call(s) for k, s in row_sides.items()},
                rounds=rounds,
                budget_s=plan.budget_s,
                warmup=plan.warmup,
            )
            note = "; ".join(
                f"{LABELS[k]} returned fewer than {K} hits in {v} calls (incl. warm-up)"
                for k, v in short.items()
            )
            rows.append(Row(label, samples, {**missing, **skipped}, note))
            log(f"  {label}: " + ", ".join(f"{k} {s.p50 * 1e3:.2f} ms" for k, s in samples.items()))
        if knn_only is not ours:
            await knn_only.close()
        return rows

    async def context_row(
        self, sides: Mapping[str, Adapter], skipped: dict[str, str]
    ) -> tuple[Row, dict[str, Context]]:
        """retrieve_context(token_budget=4096) on a session of ``plan.turns`` turns, over the N memories."""
        plan = self.plan
        thread = "ctx-session"
        able: dict[str, Adapter] = {}
        missing: dict[str, str] = {}
        for key, side in sides.items():
            try:
                for i in range(plan.turns):
                    await side.store_turn(READER, thread, *self.corpus.turn(i))
                able[key] = side
            except Unsupported as exc:
                missing[key] = str(exc)
        texts = self.corpus.queries(plan.context_rounds + plan.warmup)
        last: dict[str, Context] = {}

        def context_call(side: Adapter) -> Call:
            async def call(i: int) -> None:
                last[side.key] = await side.retrieve_context(READER, thread, texts[i], BUDGET_TOKENS)

            return call

        samples, more = await rotate(
            {k: context_call(s) for k, s in able.items()},
            rounds=plan.context_rounds,
            budget_s=plan.budget_s,
            warmup=plan.warmup,
        )
        row = Row(
            f"retrieve_context, budget {BUDGET_TOKENS:,} tokens", samples, {**missing, **more, **skipped}
        )
        log("  context: " + ", ".join(f"{k} {s.p50 * 1e3:.2f} ms" for k, s in samples.items()))
        return row, last

    async def write_rows(self, sides: Mapping[str, Adapter], skipped: dict[str, str]) -> list[Row]:
        plan = self.plan
        single = self.corpus.docs(plan.write_rounds + plan.warmup, agent=WRITER, thread="w-single")
        flight = self.corpus.docs(
            (plan.inflight_rounds + 1) * INFLIGHT_ROUND, agent=WRITER, thread="w-flight"
        )
        sides["raw"].prepare(docs=single + flight)

        def single_call(side: Adapter) -> Call:
            async def call(i: int) -> None:
                await side.remember(single[i])

            return call

        def flight_call(side: Adapter) -> Call:
            async def call(i: int) -> list[float]:
                chunk = flight[i * INFLIGHT_ROUND : (i + 1) * INFLIGHT_ROUND]
                return await concurrent([lambda d=d: side.remember(d) for d in chunk], INFLIGHT)

            return call

        s1, m1 = await rotate(
            {k: single_call(s) for k, s in sides.items()},
            rounds=plan.write_rounds,
            budget_s=plan.budget_s,
            warmup=plan.warmup,
        )
        s2, m2 = await rotate(
            {k: flight_call(s) for k, s in sides.items()},
            rounds=plan.inflight_rounds,
            budget_s=plan.budget_s,
            warmup=1,
            min_samples=2,
        )
        return [
            Row("remember, one at a time", s1, {**m1, **skipped}),
            Row(f"remember, {INFLIGHT} in flight", s2, {**m2, **skipped}),
        ]

    async def forget_row(self, sides: Mapping[str, Adapter], n: int, skipped: dict[str, str]) -> Row:
        """One call per library (it empties the store), one after the other."""
        row = Row(f"forget_by_scope of {n:,} memories (one call)", missing=dict(skipped))
        notes = []
        for key, side in sides.items():
            t0 = time.perf_counter()
            deleted = await side.forget_agent(READER)
            s = time.perf_counter() - t0
            row.samples[key] = Samples([s], n, s)
            if deleted >= 0 and deleted != n:
                notes.append(f"{LABELS[key]} deleted {deleted:,} of {n:,}")
        if "actrone" in sides:
            notes.append("actrone-memory: `erase_agent_memories` (drops the agent's Python list)")
        row.note = "; ".join(notes)
        return row

    # -- capped writes ----------------------------------------------------------------------

    async def capped_rows(self) -> list[Row]:
        """A write into a scope at its cap (it evicts one) vs an uncapped write, per library.

        As in bench_store.py, the capped and the uncapped store are two views of one
        store name (same index size); the uncapped write goes to another scope.
        """
        plan = self.plan
        rows = []
        for cap in plan.caps:
            book = self.corpus.book
            ours_c = OursAdapter(self.client, f"cap{cap}", book, threshold=2.0, max_items_per_scope=cap)
            ours_u = OursAdapter(self.client, f"cap{cap}", book, threshold=2.0)
            bam_c = AgentMemoryAdapter(
                self.client, f"bcap{cap}", book, threshold=2.0, max_items_per_scope=cap
            )
            bam_u = AgentMemoryAdapter(self.client, f"bcap{cap}", book, threshold=2.0)
            self.keep(ours_c, ours_u, bam_c, bam_u)
            for a in (ours_c, ours_u, bam_c, bam_u):
                await a.start()
            log(f"cap {cap:,}: filling one scope to the cap")
            fill = self.corpus.docs(cap, agent=WRITER, thread="full")
            for j in range(0, cap, BATCH):
                await ours_c.remember_batch(fill[j : j + BATCH])
                await bam_u.remember_batch(fill[j : j + BATCH])  # its capacity pass only costs time here
            writes = self.corpus.docs(plan.capped_rounds + plan.warmup, agent=WRITER, thread="full")
            opens = [replace(d, thread="open") for d in writes]

            def call(side: Adapter, docs: list[Doc]) -> Call:
                async def run(i: int) -> None:
                    await side.remember(docs[i])

                return run

            samples, _ = await rotate(
                {
                    "ours capped": call(ours_c, writes),
                    "ours uncapped": call(ours_u, opens),
                    "bam capped": call(bam_c, writes),
                    "bam uncapped": call(bam_u, opens),
                },
                rounds=plan.capped_rounds,
                budget_s=plan.budget_s,
                warmup=plan.warmup,
            )
            held_ours = await ours_c.count_scope(WRITER, "full")
            held_bam = await bam_c.count_scope(WRITER, "full")
            row = Row(f"cap {cap:,}", samples)
            row.note = (
                f"held after: betterdb-memory {held_ours:,}, betterdb-agent-memory {held_bam:,} (cap {cap:,})"
            )
            rows.append(row)
            log(f"  cap {cap:,}: " + ", ".join(f"{k} {s.p50 * 1e3:.2f} ms" for k, s in samples.items()))
            await self.flush()
        return rows

    # -- findings: what the references cannot do ---------------------------------------------

    async def findings(self, url: str) -> list[str]:
        """Small probes of reported failures, recorded as findings (errors included), never fatal."""
        out = []
        book = self.corpus.book
        bam = AgentMemoryAdapter(self.client, "probe-bam", book, threshold=BAM_THRESHOLD)
        ours = OursAdapter(self.client, "probe-ours", book, threshold=OURS_THRESHOLD)
        self.keep(bam, ours)
        await bam.start()
        await ours.start()

        # 1. get() of a record the library itself wrote.
        doc = self.corpus.docs(1, agent=WRITER, thread="get")[0]
        mid = await bam.store.remember(doc.content, thread_id=doc.thread, agent_id=doc.agent)
        try:
            item = await bam.get(mid)
            out.append(f"betterdb-agent-memory `get()` of a memory it wrote: OK ({item is not None}).")
        except Exception as exc:  # the finding
            out.append(
                "betterdb-agent-memory `get()` of a memory it wrote **crashes**: "
                f"`{type(exc).__name__}: {exc}` (HGETALL returns the binary vector, which it decodes as UTF-8). "
                "betterdb-memory `get()` reads named fields only."
            )

        # 2. A batch under a bounded (non-blocking) connection pool.
        pool = avalkey.ConnectionPool.from_url(url, max_connections=64)
        bounded = avalkey.Valkey(connection_pool=pool)
        try:
            b2 = AgentMemoryAdapter(bounded, "probe-bam", book, threshold=BAM_THRESHOLD)
            o2 = OursAdapter(bounded, "probe-ours", book, threshold=OURS_THRESHOLD)
            docs = self.corpus.docs(BATCH, agent=WRITER, thread="pool")
            results = []
            for a in (o2, b2):
                before = await self._count(a, "pool")
                try:
                    await a.remember_batch(docs)
                    err = "no error"
                except Exception as exc:
                    err = f"`{type(exc).__name__}: {exc}`"
                await asyncio.sleep(0.2)
                stored = await self._count(a, "pool") - before
                results.append(f"{a.label}: {err}, {stored} of {BATCH} stored")
            out.append(
                f"A batch of {BATCH} on a valkey-py `ConnectionPool(max_connections=64)` (one that raises when "
                "exhausted): "
                + "; ".join(results)
                + ". betterdb-agent-memory has no batch API, so a batch is "
                f"{BATCH} concurrent `remember` calls, each holding a connection; `remember_many` is one pipeline."
            )
        finally:
            await o2.close()
            await b2.close()
            await bounded.aclose()

        # 3. The cap under concurrent writers.
        cap = 100
        oc = OursAdapter(self.client, "probe-cap", book, threshold=2.0, max_items_per_scope=cap)
        bc = AgentMemoryAdapter(self.client, "probe-bcap", book, threshold=2.0, max_items_per_scope=cap)
        self.keep(oc, bc)
        held = []
        for a in (oc, bc):
            await a.start()
            await a.remember_batch(self.corpus.docs(cap, agent=WRITER, thread="race"))
            more = self.corpus.docs(256, agent=WRITER, thread="race")
            await concurrent([lambda d=d, a=a: a.remember(d) for d in more], INFLIGHT)
            count = await a.count_scope(WRITER, "race")
            verdict = "exact" if count == cap else "evicted too many" if count < cap else "over the cap"
            held.append(f"{a.label} holds {count} ({verdict})")
        out.append(
            f"Cap {cap} under {INFLIGHT} concurrent writers (256 writes into a full scope): "
            + ", ".join(held)
            + "."
        )
        await self.flush()
        return out

    async def _count(self, a: Adapter, thread: str) -> int:
        return await a.count_scope(WRITER, thread)


# -- report ----------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    ms = seconds * 1000
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:,.0f}"


def _x(a: float, b: float) -> str:
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return "-"
    r = a / b
    return f"{r:.2f}x" if r < 100 else f"{r:,.0f}x"


def _rate(s: Samples | None) -> str:
    return "-" if s is None or not s.seconds else f"{s.throughput:,.0f}"


class Footnotes:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def mark(self, reason: str) -> str:
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"n/a [{self.reasons.index(reason) + 1}]"

    def render(self) -> list[str]:
        return [f"[{i}] {r}" + "  " for i, r in enumerate(self.reasons, 1)]


def latency_table(rows: Sequence[Row], notes: Footnotes) -> str:
    head = ["workload"]
    for side in SIDES:
        head += [f"{side} p50 ms", f"{side} p99 ms"]
    head += ["ours ÷ raw", "bam ÷ raw", "bam ÷ ours", "actrone ÷ ours", "n (o/b/a/r)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row.label]
        for side in SIDES:
            s = row.samples.get(side)
            if s is None:
                reason = row.missing.get(side, "not measured")
                cells += [notes.mark(f"{LABELS[side]}: {reason}"), ""]
            else:
                cells += [_ms(s.p50), _ms(s.p99)]
        o, b, a, r = (row.p50(x) for x in SIDES)
        cells += [_x(o, r), _x(b, r), _x(b, o), _x(a, o)]
        cells.append("/".join(str(len(row.samples[x].latencies)) if x in row.samples else "-" for x in SIDES))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def throughput_table(rows: Sequence[Row]) -> str:
    lines = [
        "| workload | " + " | ".join(f"{s} ops/s" for s in SIDES) + " | ours ÷ bam | ours ÷ actrone |",
        "|" + "---|" * (len(SIDES) + 3),
    ]
    for row in rows:
        s = {k: row.samples.get(k) for k in SIDES}
        t = {k: (v.throughput if v and v.seconds else math.nan) for k, v in s.items()}
        lines.append(
            f"| {row.label} | "
            + " | ".join(_rate(s[k]) for k in SIDES)
            + f" | {_x(t['ours'], t['bam'])} | {_x(t['ours'], t['actrone'])} |"
        )
    return "\n".join(lines)


def capped_table(rows: Sequence[Row]) -> str:
    lines = [
        "| cap | ours capped p50 / p99 ms | ours uncapped p50 ms | ours capped ÷ uncapped "
        "| bam capped p50 / p99 ms | bam uncapped p50 ms | bam capped ÷ uncapped | bam capped ÷ ours capped "
        "| n (per side) | after the run |",
        "|" + "---|" * 10,
    ]
    for row in rows:
        s = row.samples
        oc, ou, bc, bu = (s[k] for k in ("ours capped", "ours uncapped", "bam capped", "bam uncapped"))
        lines.append(
            f"| {row.label.removeprefix('cap ')} | {_ms(oc.p50)} / {_ms(oc.p99)} | {_ms(ou.p50)} | {_x(oc.p50, ou.p50)} "
            f"| {_ms(bc.p50)} / {_ms(bc.p99)} | {_ms(bu.p50)} | {_x(bc.p50, bu.p50)} | {_x(bc.p50, oc.p50)} "
            f"| {'/'.join(str(len(x.latencies)) for x in (oc, ou, bc, bu))} | {row.note} |"
        )
    return "\n".join(lines)


def memory_table(results: Sequence[SizeResult]) -> str:
    lines = [
        "| memories | ours bytes/memory | bam bytes/memory | raw bytes/memory | ours ÷ raw | bam ÷ raw | ours ÷ bam |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        b = r.bytes_per_memory
        o, m, w = b.get("ours", math.nan), b.get("bam", math.nan), b.get("raw", math.nan)
        lines.append(f"| {r.n:,} | {o:,.0f} | {m:,.0f} | {w:,.0f} | {_x(o, w)} | {_x(m, w)} | {_x(o, m)} |")
    return "\n".join(lines)


def find(results: Sequence[SizeResult], n: int, prefix: str) -> Row | None:
    for r in results:
        if r.n == n:
            for row in r.rows:
                if row.label.startswith(prefix):
                    return row
    return None


def targets(results: Sequence[SizeResult], capped: Sequence[Row]) -> list[str]:
    """Issue 15's goals that this comparison measures, at 10k (or the largest size)."""
    n = 10000 if any(r.n == 10000 for r in results) else max((r.n for r in results), default=0)
    lines = ["| goal (issue 15) | measured | met | p50 figures |", "|---|---|---|---|"]

    def line(name: str, ratio: float, goal: float, better_above: bool, figures: str) -> None:
        ok = (
            "-"
            if math.isnan(ratio)
            else ("yes" if (ratio >= goal if better_above else ratio <= goal) else "**no**")
        )
        lines.append(f"| {name} | {'-' if math.isnan(ratio) else f'{ratio:.2f}x'} | {ok} | {figures} |")

    size = next((r for r in results if r.n == n), None)
    for row in size.rows if size else []:
        if "ours" in row.samples and "bam" in row.samples:
            o, b = row.p50("ours"), row.p50("bam")
            line(
                f"{row.label} at {n:,}: at least as fast as betterdb-agent-memory (bam ÷ ours ≥ 1)",
                b / o,
                1.0,
                True,
                f"ours {_ms(o)} ms, betterdb-agent-memory {_ms(b)} ms",
            )
    for row in capped:
        o, b = row.samples["ours capped"].p50, row.samples["bam capped"].p50
        line(
            f"capped write, {row.label}: at least as fast as betterdb-agent-memory's",
            b / o,
            1.0,
            True,
            f"ours {_ms(o)} ms, betterdb-agent-memory {_ms(b)} ms",
        )
    ctx = find(results, n, "retrieve_context")
    if ctx and "actrone" in ctx.samples:
        o, a = ctx.p50("ours"), ctx.p50("actrone")
        line(
            f"retrieve_context at {n:,}: >= 50x faster than actrone-memory",
            a / o,
            50.0,
            True,
            f"ours {_ms(o)} ms, actrone-memory {_ms(a)} ms",
        )
    forget = find(results, n, "forget_by_scope")
    if forget:
        o, r = forget.p50("ours"), forget.p50("raw")
        line(
            f"forget_by_scope of {n:,}: <= 1.2x the raw UNLINK pipelines of the same keys",
            o / r,
            1.2,
            False,
            f"ours {o:.2f} s, raw {r:.2f} s (the search module's per-document delete is the floor of both; "
            "bench_store.py measures it)",
        )
    return lines


# Issue 29's goals against betterdb-agent-memory: (row label prefix, what, ours ÷ bam p50 at most).
# At the defaults every recall row within 1.5x; reinforcement, writes, 32 in flight, batches and
# forget at least as fast; with reranker=False every row at least as fast (the write rows do not
# depend on the reranker: they are the same rows).
GOALS29: tuple[tuple[str, str, float], ...] = (
    ("recall k=10, unscoped", "recall, unscoped, defaults (reranker on)", 1.5),
    ("recall k=10, scoped (thread)", "recall, scoped, defaults (reranker on)", 1.5),
    ("recall k=10, unscoped, reinforce on", "recall with reinforcement, defaults (a recall row: 1.5x; reinforcement: 1x)", 1.0),
    ("recall k=10, unscoped, ours with reranker=False", "recall, unscoped, reranker=False", 1.0),
    ("recall k=10, scoped (thread), ours with reranker=False", "recall, scoped, reranker=False", 1.0),
    ("recall k=10, unscoped, reinforce on, ours with reranker=False", "recall with reinforcement, reranker=False", 1.0),
    ("remember, one at a time", "remember, one at a time", 1.0),
    (f"remember, {INFLIGHT} in flight", f"remember, {INFLIGHT} in flight (per write)", 1.0),
    ("batch write", f"batch write of {BATCH} (per batch)", 1.0),
    ("forget_by_scope", "forget_by_scope of the store (one call)", 1.0),
)  # fmt: skip


def targets29(results: Sequence[SizeResult]) -> list[str]:
    """Issue 29's goals against betterdb-agent-memory, per size: ours ÷ bam p50, met, both p50s."""
    shown = [r for r in results if r.n in (1000, 10000)] or list(results)
    lines = [
        "| goal (issue 29): ours ÷ betterdb-agent-memory, p50 | at most | "
        + " | ".join(f"{r.n:,}" for r in shown)
        + " |",
        "|---|---|" + "---|" * len(shown),
    ]
    for prefix, what, goal in GOALS29:
        cells = []
        for r in shown:
            # The exact row: "recall k=10, unscoped" is also the start of longer labels.
            row = next((x for x in r.rows if x.label == prefix), None) or find([r], r.n, prefix)
            o, b = (row.p50("ours"), row.p50("bam")) if row else (math.nan, math.nan)
            if math.isnan(o) or math.isnan(b) or b <= 0:
                cells.append("-")
                continue
            met = "yes" if o / b <= goal else "**no**"
            cells.append(f"{o / b:.2f}x {met} ({_ms(o)} / {_ms(b)} ms)")
        lines.append(f"| {what} | {goal:g}x | " + " | ".join(cells) + " |")
    if not any(r.n in (1000, 10000) for r in results):
        lines += ["", "Issue 29 asks 1k and 10k; this run measured other sizes."]
    return lines


def render(
    argv: Sequence[str],
    plan: Plan,
    machine_lines: Sequence[str],
    results: Sequence[SizeResult],
    capped: Sequence[Row],
    findings: Sequence[str],
    elapsed: float,
) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    notes = Footnotes()
    out = [
        "# betterdb-memory vs betterdb-agent-memory vs actrone-memory",
        "",
        f"`{' '.join(['bench/bench_compare.py', *argv])}`, {stamp}, run took {elapsed:.0f} s.",
        "",
        *machine_lines,
        "",
        "Columns: **ours** betterdb-memory, **bam** betterdb-agent-memory (reference 1, on the same Valkey "
        'client), **actrone** actrone-memory (reference 2, in-process backend `backend="memory"`), **raw** '
        "the commands of `bench_store.py`, built from betterdb-memory's own builders: HSET / pipelined HSET of "
        "the records it writes (`LongTermMemory._record`) into an index made with its FT.CREATE arguments, the "
        "FT.SEARCH KNN k=10 of `knn_search_args` returning the fields a hit carries, on betterdb-memory's index, "
        "UNLINK. One embedded server, one event loop, one shared deterministic 384-d embedder "
        "(precomputed unit vectors looked up by text). Libraries rotate round by round (the first one changes "
        "every round). `X ÷ ours` is X's p50 over ours (above 1: ours is faster); `÷ raw` is the overhead over "
        "the raw commands. `n`: samples per side (p99 of a handful of samples is their maximum).",
        "",
        f"k={K}; {TOPICS} topics (memories and queries are unit vectors around random centroids), memories "
        f"spread over {THREADS} thread scopes of one agent. betterdb-memory runs with its defaults (text recall "
        "re-ranks 50 KNN candidates with its HybridRanker, then fetches the k winners; reinforcement on). "
        "Recall rows disable the relevance threshold of the "
        "two Valkey libraries so every call returns k hits; actrone-memory admits cosine >= "
        f"{RELEVANT_COS} (its own threshold, applied to the query's topic). Rounds per workload at most: recall "
        f"{plan.recall_rounds}, with reinforcement {plan.reinforce_rounds}, context {plan.context_rounds}, single "
        f"writes {plan.write_rounds}, {INFLIGHT}-in-flight {plan.inflight_rounds} x {INFLIGHT_ROUND}, capped "
        f"{plan.capped_rounds}; and at most {plan.budget_s:g} s each after up to {plan.warmup} warm-up calls per "
        "side.",
        "",
    ]
    for r in results:
        out += [f"## {r.n:,} memories", "", latency_table(r.rows, notes), ""]
        writes = [row for row in r.rows if row.label.startswith(("remember", "batch", "forget"))]
        out += [
            "Throughput (memories per second; forget: deleted per second):",
            "",
            throughput_table(writes),
            "",
        ]
        for row in r.rows:
            if row.note:
                out.append(f"- {row.label}: {row.note}")
        for key, c in r.contexts.items():
            out.append(
                f"- retrieve_context, {LABELS[key]}: {c.memories} memories + {c.turns} turns = {c.tokens:,} "
                f"tokens of {BUDGET_TOKENS:,} (last call)"
            )
        out.append("")
    if results:
        out += [
            "## Memory used in Valkey per memory (INFO used_memory delta / N)",
            "",
            memory_table(results),
            "",
        ]
        out += [
            "The vector index allocates in blocks (the first at FT.CREATE, before the probes), so small sizes "
            "under-count; the largest size is the better figure. actrone-memory keeps its memories in the "
            "Python process (not measured here).",
            "",
        ]
    if capped:
        out += [
            "## Capped writes (each write into the full scope evicts one)",
            "",
            "actrone-memory has no per-scope cap: n/a.",
            "",
            capped_table(capped),
            "",
        ]
    out += [
        "## Issue 29 goals",
        "",
        "Cells: ours ÷ betterdb-agent-memory p50 (below 1: ours is faster), met, (ours / betterdb-agent-memory "
        "p50 ms), from the tables above. Capped writes: see issue 15's table.",
        "",
        *targets29(results),
        "",
    ]
    out += ["## Issue 15 goals", "", *targets(results, capped), ""]
    if findings:
        out += ["## Findings", "", *(f"- {f}" for f in findings), ""]
    if notes.reasons:
        out += ["## n/a", "", *notes.render(), ""]
    return "\n".join(out)


def to_json(results: Sequence[SizeResult], capped: Sequence[Row]) -> dict[str, Any]:
    def samples(row: Row) -> dict[str, Any]:
        return {
            "label": row.label,
            "note": row.note,
            "missing": row.missing,
            "sides": {
                k: {"p50_s": s.p50, "p99_s": s.p99, "n": len(s.latencies), "ops_per_s": s.throughput}
                for k, s in row.samples.items()
            },
        }

    return {
        "sizes": [
            {
                "n": r.n,
                "rows": [samples(row) for row in r.rows],
                "bytes_per_memory": r.bytes_per_memory,
                "contexts": {k: dataclasses.asdict(c) for k, c in r.contexts.items()},
            }
            for r in results
        ],
        "capped": [samples(row) for row in capped],
    }


CHARTS = {
    "recall": ("recall k=10, unscoped", "recall k=10, scoped", "recall k=10, unscoped, reinforce on"),
    "writes": ("remember, one at a time", f"remember, {INFLIGHT} in flight", "batch write"),
    "context": ("retrieve_context",),
    "forget": ("forget_by_scope",),
}


def charts(data: Mapping[str, Any], out: Path) -> list[Path]:
    """One PNG per group from ``to_json`` output: p50 (solid) and p99 (dashed) latency vs memory count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"ours": "tab:blue", "bam": "tab:orange", "actrone": "tab:green", "raw": "tab:gray"}
    written = []
    for group, prefixes in CHARTS.items():
        wide = len(prefixes) > 1
        fig, axes = plt.subplots(
            1, len(prefixes), figsize=(5 * len(prefixes), 4 if wide else 4.6), squeeze=False
        )
        for ax, prefix in zip(axes[0], prefixes, strict=True):
            title = prefix
            for side in SIDES:
                xs, p50, p99, counts = [], [], [], []
                for size in data["sizes"]:
                    row = next((r for r in size["rows"] if r["label"].startswith(prefix)), None)
                    if row and side in row["sides"]:
                        title = row["label"].split(" (")[0].replace(f" of {size['n']:,} memories", "")
                        got = row["sides"][side]
                        xs.append(size["n"])
                        p50.append(got["p50_s"] * 1000)
                        p99.append(got["p99_s"] * 1000)
                        counts.append(got["n"])
                if xs:
                    ax.plot(xs, p50, "o-", color=colors[side], label=f"{LABELS[side]} p50")
                    if max(counts) > 1:  # one sample: p99 is the same point
                        ax.plot(xs, p99, "--", color=colors[side], alpha=0.5, label=f"{LABELS[side]} p99")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("memories in the store")
            ax.set_ylabel("latency, ms" + (" per batch" if prefix == "batch write" else ""))
            ax.set_title(title, fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        handles, names = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, names, loc="lower center", ncol=4 if wide else 2, fontsize=8)
        fig.tight_layout(rect=(0, 0.12 if wide else 0.2, 1, 1))
        path = out.with_name(f"{out.stem}_{group}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> tuple[Plan, Path, bool, bool]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes (default 1000,10000)")
    parser.add_argument(
        "--caps", default=None, help="comma-separated caps for capped writes (default 1000,10000)"
    )
    parser.add_argument(
        "--actrone-max",
        type=int,
        default=None,
        help="largest size actrone-memory is filled to (default 20000: its insert scans the agent's list)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/compare.md"), help="markdown output")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes and few rounds")
    parser.add_argument("--no-findings", action="store_true", help="skip the failure probes")
    parser.add_argument(
        "--charts-only", action="store_true", help="redraw the PNGs from the JSON beside --out; run nothing"
    )
    parser.add_argument("--no-charts", action="store_true", help="write the markdown and JSON only")
    args = parser.parse_args(argv)
    if args.charts_only:
        charts(json.loads(args.out.with_suffix(".json").read_text(encoding="utf-8")), args.out)
        sys.exit(0)
    plan = QUICK_PLAN if args.quick else DEFAULT_PLAN

    def ints(text: str) -> tuple[int, ...]:
        return tuple(int(s.replace("_", "")) for s in text.split(",") if s.strip())

    if args.sizes:
        sizes = ints(args.sizes)
        if not sizes or any(s < 2 * K * THREADS for s in sizes):
            parser.error(f"every size must be at least {2 * K * THREADS}")
        plan = replace(plan, sizes=sizes)
    if args.caps:
        plan = replace(plan, caps=ints(args.caps))
    if args.actrone_max is not None:
        plan = replace(plan, actrone_max=args.actrone_max)
    return plan, args.out, not args.no_findings, not args.no_charts


async def main(argv: Sequence[str]) -> None:
    plan, out, with_findings, with_charts = parse_args(argv)
    started = time.perf_counter()
    load_start = os.getloadavg()
    server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    client = avalkey.Valkey.from_url(server.url)
    run = Run(client, plan)
    try:
        results = [await run.run_size(n) for n in plan.sizes]
        capped = await run.capped_rows()
        findings = await run.findings(server.url) if with_findings else []
        machine_lines = await machine(types.SimpleNamespace(client=client, caps=run.caps), load_start)  # type: ignore[arg-type]
    finally:
        await run.flush()
        await client.aclose()
        await asyncio.to_thread(server.stop)
    machine_lines.append(
        f"- libraries: betterdb-memory {dist_version('betterdb-memory')} (this tree), betterdb-agent-memory "
        f"{dist_version('betterdb-agent-memory')}, actrone-memory "
        f"{ACTRONE_MISSING or dist_version('actrone-memory')}; "
        f"matplotlib {dist_version('matplotlib')}; valkey-py default connection pool (unbounded)"
    )
    elapsed = time.perf_counter() - started
    report = render(argv, plan, machine_lines, results, capped, findings, elapsed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n", encoding="utf-8")
    data = to_json(results, capped)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    pngs = charts(data, out) if with_charts else []
    print(report)
    log(f"wrote {out}, {out.with_suffix('.json')}, " + ", ".join(str(p) for p in pngs))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
