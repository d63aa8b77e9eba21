"""Benchmark ``MemoryStore`` against the raw Valkey commands it issues, on one embedded server.

Every comparison runs the library call and its raw equivalent in alternating rounds
(``_harness.interleave``), on the same server, with the same precomputed 384-d unit
vectors (seeded numpy; no embedding model runs, so the figures measure the library,
not a model). The raw side is built from the library's own builders: the HSET fields
of ``LongTermMemory._record``, the FT.CREATE of ``query.create_index_args`` and the
FT.SEARCH of ``query.knn_search_args``; each scenario records what one library call
sends (``_harness.Recorder``) and checks the raw command against it before timing.
See ``bench/README.md`` for what each row means.

    .venv/bin/python bench/bench_store.py                       # 1k and 10k memories
    .venv/bin/python bench/bench_store.py --sizes 1000,10000,100000
    .venv/bin/python bench/bench_store.py --quick               # smoke run, under a minute
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import math
import os
import platform
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import valkey.asyncio as avalkey
import valkey.utils
from _harness import (
    Pair,
    Recorder,
    Row,
    Samples,
    concurrent,
    cpu_count,
    cpu_model,
    interleave,
    render_rows,
    summarize_trips,
)

from betterdb_memory import MemoryStore, Scope
from betterdb_memory.backend.dialect import search_command
from betterdb_memory.core.codec import encode_vector
from betterdb_memory.core.dialect import Capabilities
from betterdb_memory.core.keys import KeySpace
from betterdb_memory.core.query import (
    ITEM_FIELDS,
    SCORE_ALIAS,
    VECTOR_FIELD,
    MemoryFilter,
    create_index_args,
    filter_search_args,
    knn_search_args,
)
from betterdb_memory.core.requests import new_memory
from betterdb_memory.progress import Progress
from betterdb_memory.server import EmbeddedServer

FloatMatrix = npt.NDArray[np.float32]
Command = tuple[Any, ...]

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
MODEL_ID = "bench-precomputed-384"
# From this size on, a capped write is also measured inside the populated store (cap 10k).
IN_STORE_CAP_FROM = 50_000
IN_STORE_CAP = 10_000

# Issue 15's goals (p50 ratios ours / raw; throughput ours / raw for remember_many).
GOAL_VECTOR_RECALL = 1.3
GOAL_TEXT_RECALL = 2.5
GOAL_REINFORCE = 1.5
GOAL_REMEMBER = 1.3
GOAL_REMEMBER_MANY = 0.9
GOAL_CONTEXT = 1.3
GOAL_FORGET = 1.2
GOAL_CAPPED = 2.0
# Issue 29's goal: default recall (hybrid re-ranking, reinforcement on) p50 at most this many
# times the raw FT.SEARCH KNN 50 it starts from (the candidate query it sends, same fields).
GOAL29_DEFAULT_VS_KNN50 = 5.0


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
    read_rounds: int
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
    read_rounds=200,
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
    read_rounds=20,
    budget_s=0.5,
    warmup=3,
)


class VectorBook:
    """The stores' embedder: a dict of vectors computed up front, so no embedding time is measured.

    Writes and ``recall_by_vector`` pass their vectors; only text recall and
    ``retrieve_context`` embed their query, which is a dict lookup here. A text the
    benchmark did not register raises (embedding it would distort the figures).
    """

    dimensions = DIM
    model_id = MODEL_ID

    def __init__(self) -> None:
        self._book: dict[str, FloatMatrix] = {}

    def add(self, text: str, vector: FloatMatrix) -> None:
        self._book[text] = vector

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return np.stack([self.vector(t) for t in texts])

    def vector(self, text: str) -> FloatMatrix:
        try:
            return self._book[text]
        except KeyError:
            raise RuntimeError(f"the benchmark passes vectors; {text[:40]!r} was not precomputed") from None


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
    """A second index made with the library's own FT.CREATE arguments, written by plain HSETs."""

    keys: KeySpace

    @property
    def index(self) -> str:
        return self.keys.index

    def hset(self, store: MemoryStore, doc: Doc, now_ms: int) -> Command:
        """``HSET <key> <fields>``: the record ``store`` writes for ``doc`` (its own ``_record``), raw key."""
        memory_id, fields = library_record(store, doc, now_ms)
        return ("HSET", self.keys.doc(memory_id), *fields)


def library_record(store: MemoryStore, doc: Doc, now_ms: int) -> tuple[str, list[Any]]:
    """(memory id, HSET field/value list) that ``store`` writes for ``doc``: its own ``new_memory`` + ``_record``."""
    memory = new_memory(
        doc.content,
        dimensions=store.embedder.dimensions,
        thread_id=doc.thread,
        agent_id=doc.agent,
        vector=doc.vector,
    )
    assert memory.vector is not None
    memory_id, fields, ttl_ms = store._long_term._record(
        memory, memory.vector, now_ms, store.half_life_seconds
    )
    assert not ttl_ms  # no TTL: the library sends no PEXPIRE either
    return memory_id, fields


def field_names(hset: Sequence[Any]) -> list[str]:
    return [str(f) for f in hset[2::2]]


class Bench:
    """The shared state of one run: client, engine capabilities, seeded vectors, the vector book."""

    def __init__(self, client: Any, plan: Plan) -> None:
        self.client = client
        self.plan = plan
        self.caps: Capabilities | None = None
        self.book = VectorBook()
        self._rng = np.random.default_rng(SEED)
        self._serial = itertools.count()
        self._stores: list[MemoryStore] = []

    def store(self, name: str, **options: Any) -> MemoryStore:
        # default_threshold 2.0 (the widest cosine-distance ceiling): random vectors sit
        # near distance 1, and every recall must return (and reinforce) k hits for the
        # figures to mean anything. Everything else is the shipped default (reranker on
        # for text queries: the embedder is not an embed_fn; discovery and live config on).
        store = MemoryStore(
            client=self.client, name=name, embedder=self.book, default_threshold=2.0, **options
        )
        self._stores.append(store)
        return store

    async def close_stores(self) -> None:
        """Let the stores finish their background work (stats flushes); the client stays open."""
        stores, self._stores = self._stores, []
        for store in stores:
            await store.close()

    async def raw_index(self, store: MemoryStore, name: str) -> RawIndex:
        """An index created with ``create_index_args`` of ``store``'s own spec, under another name."""
        assert self.caps is not None
        raw = RawIndex(KeySpace(name))
        spec = replace(store.spec, index=raw.keys.index, prefix=raw.keys.doc_prefix)
        await self.client.execute_command(*create_index_args(spec, self.caps))
        return raw

    def unit_vectors(self, n: int) -> FloatMatrix:
        v = self._rng.standard_normal((n, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v

    def near(self, vectors: FloatMatrix) -> FloatMatrix:
        """Queries near stored memories (as a real recall is): their vectors plus noise."""
        noise = self._rng.standard_normal(vectors.shape).astype(np.float32) / np.float32(np.sqrt(DIM))
        q = vectors + noise
        return q / np.linalg.norm(q, axis=1, keepdims=True)

    def docs(self, n: int, *, agent: str, thread: str | None = None) -> list[Doc]:
        """``n`` memories with unique contents; round-robin over THREADS threads unless one is given."""
        vectors = self.unit_vectors(n)
        out = []
        for i in range(n):
            serial = next(self._serial)
            content = f"memory {serial}: the user prefers window seats and vegetarian meals on long flights"
            self.book.add(content, vectors[i])
            out.append(Doc(content, thread or f"t{i % THREADS}", agent, vectors[i]))
        return out

    def text_queries(self, docs: Sequence[Doc], n: int, seed: int) -> list[tuple[str, FloatMatrix, Doc]]:
        """``n`` (query text, its vector, the memory it is near): texts registered in the book."""
        picks = np.random.default_rng(seed).integers(0, len(docs), size=n)
        near = self.near(np.stack([docs[j].vector for j in picks]))
        out = []
        for i, j in enumerate(picks):
            text = f"query {next(self._serial)}: which seats and meals does the user prefer on flights?"
            self.book.add(text, near[i])
            out.append((text, near[i], docs[j]))
        return out

    async def used_memory(self) -> int:
        return int((await self.client.info("memory"))["used_memory"])

    async def fill(self, store: MemoryStore, docs: Sequence[Doc]) -> None:
        """Untimed population through the library, in batches."""
        for i in range(0, len(docs), BATCH):
            await store.remember_many([d.item() for d in docs[i : i + BATCH]])

    async def raw_write(self, commands: Sequence[Command]) -> None:
        """One pipeline of the given commands (the raw side of a batch write)."""
        pipe = self.client.pipeline(transaction=False)
        for cmd in commands:
            pipe.execute_command(*cmd)
        await pipe.execute()

    async def count_keys(self, pattern: str) -> int:
        n = 0
        async for _ in self.client.scan_iter(match=pattern, count=1000):
            n += 1
        return n

    async def flush(self) -> None:
        """Close this scenario's stores, then empty the server for the next one."""
        await self.close_stores()
        # Our own throw-away server: FLUSHALL also drops every search index.
        await self.client.flushall(asynchronous=False)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def record(client: Any, fn: Callable[[], Awaitable[Any]]) -> Recorder:
    """Run ``fn`` once (untimed) and return what it sent."""
    with Recorder(client) as rec:
        await fn()
    return rec


def as_sent(store: MemoryStore, args: list[Any]) -> list[Any]:
    """A raw FT.SEARCH as the library's backend sends it (``TIMEOUT 0`` on RediSearch, ``ALLSHARDS`` on valkey-search)."""
    caps = store.index.caps
    return search_command(
        args,
        all_shards=caps is not None and caps.shard_options,
        unbounded=caps is not None and caps.partial_on_timeout,
    )


def same_search(library: Command, raw: Sequence[Any], what: str) -> None:
    """The library's FT.SEARCH must be the raw side's, argument for argument."""
    if [_b(a) for a in library] != [_b(a) for a in raw]:
        raise AssertionError(f"{what}: the raw FT.SEARCH differs from the library's\n{library}\n{raw}")


def same_knn(library: Sequence[Any], raw: Sequence[Any]) -> bool:
    """Whether two KNN FT.SEARCHes are the same but for float rounding in the query vector.

    Text recall embeds its query itself (the vector book's vector, checked and normalised
    again), so its blob can differ from the raw side's in the last bit of a float.
    """
    lib, want = [_b(a) for a in library], [_b(a) for a in raw]
    if len(lib) != len(want):
        return False
    # The blob follows ``PARAMS n vec`` (after ``ALLSHARDS`` on valkey-search 1.1+).
    at = want.index(b"vec") + 1 if b"PARAMS" in want and b"vec" in want else -1
    if at < 1 or at >= len(want):  # not a KNN: no vector to round
        return lib == want
    if lib[:at] != want[:at] or lib[at + 1 :] != want[at + 1 :]:
        return False
    a = np.frombuffer(lib[at], dtype=np.float32)
    b = np.frombuffer(want[at], dtype=np.float32)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=0, atol=1e-6))


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


# -- scenarios at size N --------------------------------------------------------------------


@dataclass(slots=True)
class SizeResult:
    n: int
    rows: list[Row]
    memory: Pair  # memory_delta / ops = bytes per memory
    used_memory: int  # server used_memory after populating both sides
    populate_s: float  # wall time of the populate step (both sides)


async def populate(
    bench: Bench, ours: MemoryStore, raw: RawIndex, docs: Sequence[Doc]
) -> tuple[Row, Pair, list[str]]:
    """remember_many (batches of 500) vs one pipeline of the same records' HSETs, with memory deltas."""
    now_ms = int(time.time() * 1000)
    batches = [docs[i : i + BATCH] for i in range(0, len(docs), BATCH)]
    raw_batches = [[raw.hset(ours, d, now_ms) for d in b] for b in batches]
    items = [[d.item() for d in b] for b in batches]  # the caller's own data, built before timing

    progress = Progress()  # both sides' memories, on standard error (a bar on a terminal)
    progress.begin(f"populate {len(docs):,} memories (ours and raw)", 2 * len(docs))

    async def ours_op(i: int) -> None:
        await ours.remember_many(items[i])
        progress.advance(len(items[i]))

    async def raw_op(i: int) -> None:
        await bench.raw_write(raw_batches[i])
        progress.advance(len(raw_batches[i]))

    try:
        pair = await interleave(
            ours_op, raw_op, rounds=len(batches), budget_s=float("inf"), memory_probe=bench.used_memory
        )
    finally:
        progress.end()
    # Batch latency is per 500 memories; throughput counts memories, not batches.
    for side, sizes in ((pair.ours, batches), (pair.raw, raw_batches)):
        side.ops = sum(len(b) for b in sizes)
    row = Row(
        f"remember_many, batches of {BATCH} (vs one pipeline of {BATCH} HSETs)",
        pair,
        flag_below=GOAL_REMEMBER_MANY,
        commands=f"HSET×{BATCH}",
    )
    return row, pair, [str(cmd[1]) for b in raw_batches for cmd in b]


@dataclass(frozen=True, slots=True)
class RecallVariant:
    label: str
    text: bool  # recall(text) with the store's reranker; else recall_by_vector
    scoped: bool
    reinforce: bool
    goal: float
    # The raw side: KNN ``raw_k`` returning the 16 item fields; with ``candidate_query``, the
    # fields of the candidate query text recall sends itself (its ranking fields, and the stored
    # vector when its time-aware order reads it), taken from a recorded call and checked
    # argument for argument.
    raw_k: int = K
    candidate_query: bool = False


def defaults_vs_knn50(label: str, *, scoped: bool) -> RecallVariant:
    """Issue 29's row: ``recall(text, k=10)`` as shipped vs the FT.SEARCH KNN 50 it starts from."""
    return RecallVariant(
        label, True, scoped, True, GOAL29_DEFAULT_VS_KNN50, raw_k=KNN50, candidate_query=True
    )


KNN50 = 50  # the shipped rerank_candidates: text recall's KNN pool at k=10
DEFAULTS_UNSCOPED = "recall (text, hybrid), unscoped, the defaults, vs raw KNN 50"
DEFAULTS_SCOPED = "recall (text, hybrid), scoped (thread), the defaults, vs raw KNN 50"
RECALL_VARIANTS = (
    RecallVariant("recall_by_vector, unscoped", False, False, False, GOAL_VECTOR_RECALL),
    RecallVariant("recall_by_vector, scoped (thread)", False, True, False, GOAL_VECTOR_RECALL),
    RecallVariant("recall (text, hybrid re-ranking), unscoped", True, False, False, GOAL_TEXT_RECALL),
    RecallVariant("recall (text, hybrid re-ranking), scoped (thread)", True, True, False, GOAL_TEXT_RECALL),
    # Reinforcing rows last: the first access to a memory rewrites its document.
    RecallVariant("recall_by_vector, unscoped, reinforce on", False, False, True, GOAL_REINFORCE),
    RecallVariant(
        "recall (text, hybrid), unscoped, reinforce on (the defaults)", True, False, True, GOAL_TEXT_RECALL
    ),
    # Issue 29: the same default recall against the raw KNN 50 it starts from.
    defaults_vs_knn50(DEFAULTS_UNSCOPED, scoped=False),
    defaults_vs_knn50(DEFAULTS_SCOPED, scoped=True),
)


# (query text, its vector, the thread scope it is asked in or None), texts in the vector book.
Query = tuple[str, FloatMatrix, "str | None"]


async def recall_rows(bench: Bench, ours: MemoryStore, docs: Sequence[Doc]) -> list[Row]:
    """recall / recall_by_vector vs one FT.SEARCH KNN k=10 returning the fields a hit carries.

    The raw command is ``knn_search_args`` with the library's index, layout, filter and
    default ``RETURN`` fields (``ITEM_FIELDS``): for ``recall_by_vector`` it is exactly
    what the library sends (checked); text recall fetches ``rerank_candidates`` slim
    candidates instead and then the k winners (issue 15: "a raw FT.SEARCH that returns
    the same fields for k hits"). Issue 29's rows compare the default recall with that
    candidate query itself (KNN 50, the ranking fields; checked).
    """
    plan = bench.plan
    rows = []
    for vi, v in enumerate(RECALL_VARIANTS):
        total = (plan.reinforce_rounds if v.reinforce else plan.recall_rounds) + plan.warmup
        picked = bench.text_queries(docs, total, SEED + 31 * vi + len(docs))
        queries: list[Query] = [(text, vec, near.thread if v.scoped else None) for text, vec, near in picked]
        rows.append(await recall_row(bench, ours, v, queries))
    return rows


async def recall_row(bench: Bench, ours: MemoryStore, v: RecallVariant, queries: Sequence[Query]) -> Row:
    """One recall variant against its raw FT.SEARCH, interleaved, over ``queries`` (rounds + warm-up)."""
    plan, client = bench.plan, bench.client
    rounds = len(queries) - plan.warmup

    async def ours_op(i: int) -> None:
        text, vec, thread = queries[i]
        if v.text:
            hits = await ours.recall(text, k=K, thread_id=thread, reinforce=v.reinforce)
        else:
            hits = await ours.recall_by_vector(vec, k=K, thread_id=thread, reinforce=v.reinforce)
        assert len(hits) == K, len(hits)

    fields: Sequence[str] = ITEM_FIELDS
    scope_filter = knn_filter(ours, queries[rounds][2])
    if v.candidate_query:  # the fields the library's own candidate query returns
        await ours_op(rounds + 1)
        recorded = await record(client, partial(ours_op, rounds))
        searches = recorded.commands("FT.SEARCH")
        scan = scope_read(searches, scope_filter)
        knn_sent = any(f"KNN {v.raw_k} ".encode() in _b(a[2]) for a in searches if len(a) > 2)
        fields = (
            scan_fields(scan)
            if scan is not None and not knn_sent
            else knn_return_fields(searches, v.raw_k, v.label)
        )
    raw_args = [
        as_sent(
            ours,
            knn_search_args(
                ours.keys.index,
                encode_vector(vec),
                k=v.raw_k,
                flt=MemoryFilter(scope=Scope.of(thread_id=t)),
                layout=ours.layout,
                return_fields=fields,
            ),
        )
        for _, vec, t in queries
    ]

    async def raw_op(i: int) -> None:
        await client.execute_command(*raw_args[i])

    for i in range(1, plan.warmup):
        await ours_op(rounds + i)
        await raw_op(rounds + i)
    # One more call, recorded (after the warm-up: scripts loaded): what the library sends.
    rec = await record(client, partial(ours_op, rounds))
    counts = [a for a in rec.commands("FT.SEARCH") if scope_count(a, scope_filter)]
    searches = [a for a in rec.commands("FT.SEARCH") if not scope_count(a, scope_filter)]
    scan = scope_read(searches, scope_filter)
    knns = [a for a in searches if len(a) > 2 and b"=>[KNN" in _b(a[2])]
    # valkey-search's scope scan (issue 29): a scope known (or guessed) small is read whole by
    # its filter and ranked in the client instead of the KNN a client would send; when the
    # bounded read finds it larger, the KNN follows. The raw side stays that KNN: the work the
    # library replaces, or sends after its read.
    if not v.text:
        assert len(knns) <= 1 and (knns or scan is not None) and len(searches) <= 2, rec.trips
        if knns:
            same_search(knns[0], raw_args[rounds], v.label)
    elif v.candidate_query and (knns or scan is None):  # the raw KNN 50 is the library's own candidate query
        want = raw_args[rounds]
        if not any(same_knn(got, want) for got in searches):
            raise AssertionError(f"{v.label}: no FT.SEARCH of the library is the raw KNN\n{searches}\n{want}")
    before = await bench.count_keys(f"{ours.name}:acc:*") if v.reinforce else 0
    pair = await interleave(ours_op, raw_op, rounds=rounds, budget_s=plan.budget_s)
    notes = []
    if scan is not None and not knns:
        notes.append(
            "the library read the scope whole (valkey-search's scope scan: its filter, no KNN, "
            f"`LIMIT 0 {scan_limit(scan)}`) and ranked it in the client; raw: the KNN a client "
            "would send for it"
        )
    elif scan is not None:
        notes.append(
            f"the library read up to {scan_limit(scan)} memories of the scope first (the scope scan's "
            "bounded read) and, the scope being larger, sent the KNN in a second round trip"
        )
    if counts:
        notes.append(
            "a count of the scope went in the same round trip (the scope scan learning its size: a "
            "KNN over a scope too large to read whole)"
        )
    if v.candidate_query:
        notes.append(
            f"raw: KNN {v.raw_k} RETURNing {len(fields)} fields ({', '.join(fields)}), as the library's"
        )
    if v.reinforce:
        first = await bench.count_keys(f"{ours.name}:acc:*") - before
        reinforced = K * len(pair.ours.latencies)
        notes.append(
            f"{first:,} of {reinforced:,} reinforced hits were a memory's first access "
            "(a new access counter; the document's own fields follow as `reinforce_write_interval` and "
            "`reinforce_mode` say)"
        )
    raw_what = f"KNN {v.raw_k}, {len(fields)} fields"
    log(f"  {v.label}: p50 {pair.ours.p50 * 1e3:.2f} ms vs raw ({raw_what}) {pair.raw.p50 * 1e3:.2f} ms")
    note = f"{v.label}: " + "; ".join(notes) + "." if notes else ""
    return Row(v.label, pair, flag_above=v.goal, commands=summarize_trips(rec.trips), note=note)


def knn_filter(store: MemoryStore, thread: str | None) -> bytes:
    """The filter part (before ``=>``) of the KNN query the library builds for ``thread``."""
    args = knn_search_args(
        store.keys.index, b"", k=1, flt=MemoryFilter(scope=Scope.of(thread_id=thread)), layout=store.layout
    )
    return _b(args[2]).split(b"=>", 1)[0]


def scope_read(searches: Sequence[Command], scope_filter: bytes) -> Command | None:
    """The library's read of a whole scope by its filter (valkey-search's scope scan), if it sent one.

    The scan is the KNN's own filter with no ``=>[KNN ...]`` and RETURNs the stored vector: a
    text-side query never equals it, and the scope's count (``NOCONTENT``) returns nothing.
    """
    return next(
        (a for a in searches if len(a) > 2 and _b(a[2]) == scope_filter and b"RETURN" in map(_b, a)), None
    )


def scope_count(args: Command, scope_filter: bytes) -> bool:
    """Whether ``args`` is a count of the scope (``NOCONTENT``, ``LIMIT 0 0``): how the scope scan
    learns a scope's size, sent in the recall's own round trip beside its KNN."""
    return len(args) > 2 and _b(args[2]) == scope_filter and b"NOCONTENT" in map(_b, args)


def scan_fields(scan: Command) -> tuple[str, ...]:
    """The RETURN fields of a scope scan but the stored vector: the fields its KNN would return."""
    words = [_b(a).decode("latin-1") for a in scan]
    at = words.index("RETURN")
    return tuple(
        f for f in words[at + 2 : at + 2 + int(words[at + 1])] if f not in (VECTOR_FIELD, SCORE_ALIAS)
    )


def scan_limit(scan: Command) -> int:
    """The most memories a scope scan reads (its ``LIMIT 0 n``)."""
    words = [_b(a) for a in scan]
    return int(words[words.index(b"LIMIT") + 2])


def knn_return_fields(searches: Sequence[Command], k: int, label: str) -> tuple[str, ...]:
    """The RETURN fields (score alias left out) of the library's ``KNN {k}`` search among ``searches``."""
    marker = f"KNN {k} ".encode()
    for args in searches:
        if len(args) > 2 and marker in _b(args[2]):
            words = [_b(a).decode("latin-1") for a in args]  # the vector blob is binary
            if "RETURN" not in words:
                break
            at = words.index("RETURN")
            return tuple(f for f in words[at + 2 : at + 2 + int(words[at + 1])] if f != SCORE_ALIAS)
    raise AssertionError(f"{label}: the library sent no KNN {k} with RETURN fields: {searches}")


def context_k(store: MemoryStore, token_budget: int) -> tuple[int, int]:
    """(k, KNN k) of the recall ``retrieve_context`` issues, per tiers/sessions.py and tiers/recall.py.

    k: ``max(4, min(50, ceil(usable / 40)))``, usable = budget minus the system reserve;
    KNN k: ``k * candidate_factor``, at least ``rerank_candidates`` when a reranker is on.
    """
    usable = token_budget - math.floor(token_budget * store.session_config.budget.system)
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

    Two more store objects over the populated index (``summarize_batch=0``: no
    background summary runs while measuring; one with ``reranker=False``). One session
    of CONTEXT_TURNS turns. Raw: LRANGE of the session's turn list and the FT.SEARCH
    KNN the recall sends (checked argument for argument), run with ``asyncio.gather``.
    """
    plan, client = bench.plan, bench.client
    total = plan.context_rounds + plan.warmup
    queries = bench.text_queries(docs, total, SEED + 7 * len(docs))
    thread = docs[0].thread  # one thread scope of the populated store
    variants = [
        (f"retrieve_context, budget {CONTEXT_BUDGET}", {}),
        (f"retrieve_context, budget {CONTEXT_BUDGET}, reranker=False", {"reranker": False}),
    ]
    stores = [bench.store(name, summarize_batch=0, **opts) for _, opts in variants]
    for i in range(CONTEXT_TURNS - 1):
        await stores[0].store_turn(thread, turn_text(i, "user"), turn_text(i, "assistant"))
    # The last turn recorded: what one store_turn sends (issue 15: one round trip).
    last = CONTEXT_TURNS - 1
    turn_rec = await record(
        client, partial(stores[0].store_turn, thread, turn_text(last, "user"), turn_text(last, "assistant"))
    )
    turns_key = stores[0].keys.session(None, thread).turns
    assert await client.llen(turns_key) == CONTEXT_TURNS
    rows = []
    for (label, _), store in zip(variants, stores, strict=True):
        await store.ensure_index()
        k, knn = context_k(store, CONTEXT_BUDGET)
        flt = MemoryFilter()  # agent_id / namespace None: recall across the whole store

        async def ours_op(i: int, store: MemoryStore = store) -> None:
            await store.retrieve_context(thread, queries[i][0], token_budget=CONTEXT_BUDGET)

        # The KNN, and with re-ranking the full-text query of hybrid recall (issue 16) with
        # any word-count probes, all built by the library's own builders for each question,
        # once each question has been asked (the library then knows its words' counts, as a
        # store does after its first recalls; core.frequencies).
        for i in range(len(queries)):
            await ours_op(i)
        # What one call sends (checked below); its KNN's RETURN fields are the raw side's: the
        # ranking fields when it re-ranks more than k, the item fields otherwise, and the stored
        # vector when the time-aware order reads it.
        rec = await record(client, partial(ours_op, plan.context_rounds))
        searches = rec.commands("FT.SEARCH")
        fields = knn_return_fields(searches, knn, label)

        def text_searches(
            text: str, store: MemoryStore = store, fields: Any = fields, knn: int = knn, flt: Any = flt
        ) -> list[Any]:
            if store.reranker is None:
                return []
            request = store._recall._text.request(text, flt, fields, pool=knn)
            return request.searches if request is not None else []

        raw_args = [
            [
                as_sent(
                    store,
                    knn_search_args(
                        store.keys.index,
                        encode_vector(vec),
                        k=knn,
                        flt=flt,
                        layout=store.layout,
                        return_fields=fields,
                    ),
                ),
                *(as_sent(store, a) for a in text_searches(text)),
            ]
            for text, vec, _ in queries
        ]

        async def raw_op(i: int, raw_args: list[list[list[Any]]] = raw_args) -> None:
            await asyncio.gather(
                client.lrange(turns_key, 0, -1), *(client.execute_command(*a) for a in raw_args[i])
            )

        # Check once that the raw side sends what the library does (the KNN k, filter and fields).
        expected = raw_args[plan.context_rounds]
        # The LRANGE, and the searches in one pipeline or side by side (the text query goes beside the KNN).
        # (valkey-search has no OR across text fields: its text query is several searches, pipelined.)
        trips_ok = all(
            all(str(c[0]).upper() == "FT.SEARCH" for c in trip)
            for trip in rec.trips
            if trip != [("LRANGE", turns_key, 0, -1)]
        )
        assert len(searches) == len(expected) and trips_ok, (
            summarize_trips(rec.trips),
            [str(a[2]) for a in searches],
            [str(a[2]) for a in expected],
        )
        for got, want in zip(searches, expected, strict=True):
            if not same_knn(got, want):
                same_search(got, want, label)
        assert rec.commands("LRANGE") == [("LRANGE", turns_key, 0, -1)], rec.trips
        ctx = await store.retrieve_context(thread, queries[0][0], token_budget=CONTEXT_BUDGET)
        assert ctx.turns and ctx.memories, ctx

        for i in range(1, plan.warmup):
            await ours_op(plan.context_rounds + i)
            await raw_op(plan.context_rounds + i)
        pair = await interleave(ours_op, raw_op, rounds=plan.context_rounds, budget_s=plan.budget_s)
        text_note = " + the text query" if store.reranker is not None else ""
        full = f"{label} (vs LRANGE + FT.SEARCH KNN {knn}{text_note}, gathered)"
        rows.append(
            Row(
                full,
                pair,
                flag_above=GOAL_CONTEXT,
                commands=summarize_trips(rec.trips) + " (concurrent)",
                note=f"{label}: k={k}, KNN {knn}; assembled {len(ctx.turns)}/{CONTEXT_TURNS} turns, "
                f"{len(ctx.memories)} memories, {ctx.tokens_used.total:,} tokens. One `store_turn` sent "
                f"{len(turn_rec.trips)} round trip(s): {summarize_trips(turn_rec.trips)}.",
            )
        )
        log(
            f"  {label}: p50 {pair.ours.p50 * 1e3:.2f} ms vs raw {pair.raw.p50 * 1e3:.2f} ms "
            f"(k={k}, KNN {knn}; assembled {len(ctx.turns)}/{CONTEXT_TURNS} turns, "
            f"{len(ctx.memories)} memories, {ctx.tokens_used.total} tokens)"
        )
    return rows


async def read_rows(bench: Bench, ours: MemoryStore, docs: Sequence[Doc]) -> list[Row]:
    """count and list of one thread scope vs the filter FT.SEARCH each sends (checked)."""
    plan, client = bench.plan, bench.client
    thread = docs[0].thread
    # The filter the library builds (live memories only: its expiry cut is "now", so the
    # raw side uses a cut taken now; the engine's work is the same).
    flt = MemoryFilter(
        scope=Scope.of(agent_id=READER, thread_id=thread), exclude_expired_at=int(time.time() * 1000)
    )
    variants: list[tuple[str, Callable[[], Awaitable[Any]], list[Any]]] = [
        (
            "count, one thread scope",
            lambda: ours.count(agent_id=READER, thread_id=thread),
            as_sent(ours, filter_search_args(ours.keys.index, flt, layout=ours.layout, limit=0)),
        ),
        (
            "list, 20 newest of one thread scope",
            lambda: ours.list(agent_id=READER, thread_id=thread, limit=20),
            as_sent(
                ours,
                filter_search_args(
                    ours.keys.index, flt, layout=ours.layout, sortby=("created_at", False), limit=20
                ),
            ),
        ),
    ]
    rows = []
    for label, call, raw_args in variants:
        rec = await record(client, call)
        searches = rec.commands("FT.SEARCH")
        assert len(searches) == 1, rec.trips
        # Equal but for the expiry cut's millisecond value.
        lib = [_b(a) for a in searches[0]]
        want = [_b(a) for a in raw_args]
        assert len(lib) == len(want) and lib[3:] == want[3:] and lib[:2] == want[:2], (lib, want)

        async def ours_op(i: int, call: Callable[[], Awaitable[Any]] = call) -> None:
            await call()

        async def raw_op(i: int, raw_args: list[Any] = raw_args) -> None:
            await client.execute_command(*raw_args)

        for _ in range(plan.warmup):
            await ours_op(0)
            await raw_op(0)
        pair = await interleave(ours_op, raw_op, rounds=plan.read_rounds, budget_s=plan.budget_s / 2)
        rows.append(Row(f"{label} (vs its FT.SEARCH)", pair, commands=summarize_trips(rec.trips)))
        log(f"  {label}: p50 {pair.ours.p50 * 1e3:.2f} ms vs raw {pair.raw.p50 * 1e3:.2f} ms")
    return rows


async def write_rows(bench: Bench, ours: MemoryStore, raw: RawIndex) -> list[Row]:
    """remember (sequential; 32 in flight) vs HSET of the same record (sequential; 32 in flight)."""
    plan, client = bench.plan, bench.client
    now_ms = int(time.time() * 1000)

    single = bench.docs(plan.write_rounds + plan.warmup, agent=WRITER, thread="w-single")
    single_raw = [raw.hset(ours, d, now_ms) for d in single]

    async def ours_single(i: int) -> None:
        d = single[i]
        await ours.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

    async def raw_single(i: int) -> None:
        await client.execute_command(*single_raw[i])

    # What one remember sends: one round trip, one HSET of the same fields as the raw one.
    for i in range(1, plan.warmup):
        await ours_single(plan.write_rounds + i)
        await raw_single(plan.write_rounds + i)
    rec = await record(client, partial(ours_single, plan.write_rounds))
    hsets = rec.commands("HSET")
    assert len(rec.trips) == 1 and len(hsets) == 1, rec.trips
    assert field_names(hsets[0]) == field_names(single_raw[plan.write_rounds]), (hsets, single_raw[0])
    assert len(hsets[0]) == len(single_raw[plan.write_rounds])
    rows = [
        Row(
            "remember, one at a time (vs HSET of the same record)",
            await interleave(ours_single, raw_single, rounds=plan.write_rounds, budget_s=plan.budget_s),
            flag_above=GOAL_REMEMBER,
            commands=summarize_trips(rec.trips) + f" ({len(hsets[0])} arguments)",
        )
    ]

    flight = bench.docs(plan.inflight_rounds * INFLIGHT_ROUND, agent=WRITER, thread="w-inflight")
    flight_raw = [raw.hset(ours, d, now_ms) for d in flight]

    def ours_call(d: Doc) -> Callable[[], Awaitable[str]]:
        return lambda: ours.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

    def raw_call(cmd: Command) -> Callable[[], Awaitable[Any]]:
        return lambda: client.execute_command(*cmd)

    async def ours_flight(i: int) -> list[float]:
        chunk = flight[i * INFLIGHT_ROUND : (i + 1) * INFLIGHT_ROUND]
        return await concurrent([ours_call(d) for d in chunk], INFLIGHT)

    async def raw_flight(i: int) -> list[float]:
        chunk = flight_raw[i * INFLIGHT_ROUND : (i + 1) * INFLIGHT_ROUND]
        return await concurrent([raw_call(c) for c in chunk], INFLIGHT)

    pair = await interleave(
        ours_flight, raw_flight, rounds=plan.inflight_rounds, budget_s=plan.budget_s, min_rounds=2
    )
    rows.append(Row(f"remember, {INFLIGHT} in flight (vs HSET, {INFLIGHT} in flight)", pair, commands="HSET"))
    return rows


async def forget_row(bench: Bench, ours: MemoryStore, raw_keys: Sequence[str], n: int) -> Row:
    """forget_by_scope of the n populated memories vs UNLINK of their known keys, 500 per pipeline.

    The floor: the same UNLINK pipelines over n hashes of the same fields outside every
    index prefix (written untimed first) show what deleting costs without the index; the
    difference is the search module's per-document delete (HNSW included).
    """
    client = bench.client
    now_ms = int(time.time() * 1000)
    plain = [f"unindexed{n}:{uuid.uuid4()}" for _ in range(n)]
    for i in range(0, n, BATCH):
        chunk = bench.docs(min(BATCH, n - i), agent=WRITER, thread="unindexed")
        await bench.raw_write(
            [
                ("HSET", key, *library_record(ours, d, now_ms)[1])
                for key, d in zip(plain[i : i + BATCH], chunk, strict=True)
            ]
        )

    async def unlink_all(keys: Sequence[str]) -> float:
        t0 = time.perf_counter()
        for i in range(0, len(keys), BATCH):
            await bench.raw_write([("UNLINK", key) for key in keys[i : i + BATCH]])
        return time.perf_counter() - t0

    with Recorder(client) as rec:
        t0 = time.perf_counter()
        deleted = await ours.forget_by_scope(agent_id=READER)
        ours_s = time.perf_counter() - t0
    assert deleted == n, (deleted, n)
    raw_s = await unlink_all(raw_keys)
    plain_s = await unlink_all(plain)
    pair = Pair(Samples([ours_s], n, ours_s), Samples([raw_s], n, raw_s))
    searches = len(rec.commands("FT.SEARCH"))
    dels = len(rec.commands("DEL"))
    index_us = (raw_s - plain_s) / n * 1e6
    note = (
        f"forget_by_scope of {n:,}: {len(rec.trips)} round trips ({searches} FT.SEARCH pages of up to 500, "
        f"{dels:,} DELs: each memory's document and its access counter); raw UNLINK pipelines "
        f"{raw_s:.2f} s; the same UNLINKs of {n:,} unindexed hashes {plain_s:.3f} s, so the search "
        f"module's delete costs ~{index_us:,.0f} µs per memory, the floor of both columns."
    )
    log(f"  {note}")
    return Row(
        f"forget_by_scope of {n:,} memories in {THREADS} scopes (vs UNLINK pipelines)",
        pair,
        flag_above=GOAL_FORGET,
        commands=f"{searches}×FT.SEARCH + {len(rec.trips) - searches - 1} DEL pipelines",
        note=note,
    )


async def run_size(bench: Bench, n: int) -> SizeResult:
    name = f"size{n}"
    ours = bench.store(name)
    await ours.ensure_index()
    bench.caps = ours.capabilities
    raw = await bench.raw_index(ours, f"{name}-raw")

    # Warm up both write paths (connections, the first index blocks).
    warm = bench.docs(2 * bench.plan.warmup, agent=WRITER, thread="warmup")
    await bench.fill(ours, warm)
    now_ms = int(time.time() * 1000)
    await bench.raw_write([raw.hset(ours, d, now_ms) for d in warm])

    log(f"N={n:,}: populating (remember_many vs pipelined HSET)")
    t0 = time.perf_counter()
    docs = bench.docs(n, agent=READER)
    populate_row, memory, raw_keys = await populate(bench, ours, raw, docs)
    populate_s = time.perf_counter() - t0
    used = await bench.used_memory()
    log(f"N={n:,}: populated both sides in {populate_s:.0f} s; server used_memory {used / 2**20:,.0f} MiB")
    log(f"N={n:,}: recall")
    rows = [*await recall_rows(bench, ours, docs)]
    log(f"N={n:,}: retrieve_context")
    rows += await context_rows(bench, name, docs)
    log(f"N={n:,}: count / list")
    rows += await read_rows(bench, ours, docs)
    log(f"N={n:,}: writes")
    rows += await write_rows(bench, ours, raw)
    if n >= IN_STORE_CAP_FROM:
        rows.append(
            await capped_row(
                bench,
                name,
                IN_STORE_CAP,
                label=f"remember into a full scope of {IN_STORE_CAP:,}, cap {IN_STORE_CAP:,}, in this store "
                "(vs uncapped)",
            )
        )
    rows.append(populate_row)
    log(f"N={n:,}: forget_by_scope")
    rows.append(await forget_row(bench, ours, raw_keys, n))
    await bench.flush()
    return SizeResult(n, rows, memory, used, populate_s)


# -- fixed-size scenarios -------------------------------------------------------------------


async def capped_row(bench: Bench, name: str, cap: int, *, label: str) -> Row:
    """A write into a scope already at its cap (so it evicts one) vs an uncapped write.

    Both stores are views of the store ``name``, so both writes pay for the same index
    size; the uncapped one writes into another scope. The scope is filled here.
    """
    plan, client = bench.plan, bench.client
    capped = bench.store(name, max_items_per_scope=cap)
    uncapped = bench.store(name)
    log(f"cap {cap:,} in {name}: filling one scope to the cap")
    await bench.fill(capped, bench.docs(cap, agent=WRITER, thread="full"))
    writes = bench.docs(plan.capped_rounds + plan.warmup, agent=WRITER, thread="full")

    async def capped_op(i: int) -> None:
        d = writes[i]
        await capped.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

    async def uncapped_op(i: int) -> None:
        d = writes[i]
        await uncapped.remember(d.content, vector=d.vector, thread_id="open", agent_id=d.agent)

    for i in range(1, plan.warmup):
        await capped_op(plan.capped_rounds + i)
        await uncapped_op(plan.capped_rounds + i)
    rec = await record(client, partial(capped_op, plan.capped_rounds))
    pair = await interleave(capped_op, uncapped_op, rounds=plan.capped_rounds, budget_s=plan.budget_s)
    held = await capped.count(thread_id="full", agent_id=WRITER)
    assert held == cap, (held, cap)  # every capped write evicted exactly one
    log(f"  cap {cap:,}: p50 {pair.ours.p50 * 1e3:.2f} ms vs uncapped {pair.raw.p50 * 1e3:.2f} ms")
    return Row(label, pair, flag_above=GOAL_CAPPED, commands=summarize_trips(rec.trips))


async def capped_rows(bench: Bench) -> list[Row]:
    """Capped writes in a store that holds just the full scope, per cap of the plan."""
    rows = []
    for cap in bench.plan.caps:
        rows.append(
            await capped_row(
                bench, f"cap{cap}", cap, label=f"remember into a full scope, cap {cap:,} (vs uncapped)"
            )
        )
        await bench.flush()
    return rows


# -- report --------------------------------------------------------------------------------


def memory_table(results: Sequence[SizeResult]) -> str:
    lines = [
        "| memories | ours bytes/memory | raw bytes/memory | ours/raw | server used_memory after populating both | populate time (both sides) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        o = r.memory.ours.memory_delta / r.memory.ours.ops
        w = r.memory.raw.memory_delta / r.memory.raw.ops
        lines.append(
            f"| {r.n:,} | {o:,.0f} | {w:,.0f} | {o / w:.2f}x | {r.used_memory / 2**20:,.0f} MiB "
            f"| {r.populate_s:,.0f} s |"
        )
    return "\n".join(lines)


def _verdict(ratio: float, goal: float, *, at_least: bool = False) -> str:
    if math.isnan(ratio):
        return "-"
    return "yes" if (ratio >= goal if at_least else ratio <= goal) else "**no**"


def goals_table(results: Sequence[SizeResult], capped: Sequence[Row]) -> str:
    """Issue 15's ratio goals against this run, per size."""
    lines = ["| goal (issue 15) | " + " | ".join(f"{r.n:,}" for r in results) + " |"]
    lines.append("|---|" + "---|" * len(results))
    specs: list[tuple[str, str, float, bool]] = [
        ("remember, one at a time", "remember ≤ 1.3x HSET", GOAL_REMEMBER, False),
        ("remember_many", "remember_many ≥ 0.9x pipelined HSET (memories/s)", GOAL_REMEMBER_MANY, True),
        ("recall_by_vector, unscoped", "recall_by_vector unscoped ≤ 1.3x FT.SEARCH", GOAL_VECTOR_RECALL, False),
        ("recall_by_vector, scoped", "recall_by_vector scoped ≤ 1.3x FT.SEARCH", GOAL_VECTOR_RECALL, False),
        ("recall (text, hybrid re-ranking), unscoped", "text recall unscoped ≤ 2.5x FT.SEARCH", GOAL_TEXT_RECALL, False),
        ("recall (text, hybrid re-ranking), scoped", "text recall scoped ≤ 2.5x FT.SEARCH", GOAL_TEXT_RECALL, False),
        ("recall_by_vector, unscoped, reinforce on", "recall with reinforcement ≤ 1.5x FT.SEARCH", GOAL_REINFORCE, False),
        ("recall (text, hybrid), unscoped, reinforce on", "text recall + reinforcement (the defaults) ≤ 2.5x", GOAL_TEXT_RECALL, False),
        (f"retrieve_context, budget {CONTEXT_BUDGET} (", "retrieve_context ≤ 1.3x LRANGE + FT.SEARCH", GOAL_CONTEXT, False),
        ("forget_by_scope", "forget_by_scope ≤ 1.2x UNLINK pipelines", GOAL_FORGET, False),
        ("remember into a full scope of", f"capped write (cap {IN_STORE_CAP:,}) in the store ≤ 2x uncapped", GOAL_CAPPED, False),
    ]  # fmt: skip
    for prefix, name, goal, at_least in specs:
        cells = []
        for r in results:
            row = next((x for x in r.rows if x.label.startswith(prefix)), None)
            if row is None:
                cells.append("-")
                continue
            ratio = row.throughput_ratio if at_least else row.latency_ratio
            cells.append(f"{ratio:.2f}x {_verdict(ratio, goal, at_least=at_least)}")
        if any(c != "-" for c in cells):
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for row in capped:
        lines.append(
            f"| {row.label.replace('remember into a full scope, ', 'capped write, ')} ≤ 2x uncapped | "
            + f"{row.latency_ratio:.2f}x {_verdict(row.latency_ratio, GOAL_CAPPED)}"
            + " |" * len(results)
        )
    return "\n".join(lines)


def library_revision() -> str:
    """The tree measured: ``git describe --always --dirty`` of this checkout (the library may be mid-change)."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        return done.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


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
        f"numpy {np.__version__}; betterdb-memory at {library_revision()}",
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
    locomo: Any = None,
    engine: str = "",
) -> str:
    """The report. ``locomo``: ``store_goals29.LocomoResult`` of ``--locomo`` (None: not run)."""
    import store_goals29

    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# betterdb-memory: MemoryStore vs the raw commands it issues",
        "",
        f"`{' '.join(['bench/bench_store.py', *argv])}`, {stamp}, run took {elapsed:.0f} s.",
        "",
        *machine_lines,
        "",
        f"k={K}, {DIM}-d precomputed unit vectors, HNSW M=16 EF_CONSTRUCTION=200 EF_RUNTIME=10, "
        f"memories spread over {THREADS} thread scopes. The raw side is built from the library's own "
        "builders (`LongTermMemory._record` for HSET fields, `create_index_args`, `knn_search_args`, "
        "`filter_search_args`) and checked against what one library call sends. Ours and raw alternate "
        "round by round (order flips each round). Latency ratio: ours/raw p50 (lower is better); "
        "throughput ratio: ours/raw ops/s (higher is better). ⚠ marks a row past its goal (issue 15's; "
        "issue 29's 5x for the rows against the raw KNN 50). "
        "`n`: samples per side.",
        "",
        f"Rounds per scenario (at most, and at most {plan.budget_s:g} s each after {plan.warmup} "
        f"warm-up calls per side): recall {plan.recall_rounds}, recall with reinforcement "
        f"{plan.reinforce_rounds}, single writes {plan.write_rounds}, {INFLIGHT}-in-flight "
        f"{plan.inflight_rounds} x {INFLIGHT_ROUND} writes, capped writes {plan.capped_rounds}, "
        f"retrieve_context {plan.context_rounds} ({CONTEXT_TURNS} turns in the session), count/list "
        f"{plan.read_rounds}. Query embeddings are dict lookups.",
        "",
    ]
    if results or locomo is not None:
        out += store_goals29.goals29_section(engine, results, locomo)
    if results:
        out += ["## Issue 15 goals in this run", "", goals_table(results, capped), ""]
    for r in results:
        out += [f"## {r.n:,} memories", "", render_rows(r.rows), ""]
        out += [f"- {row.note}" for row in r.rows if row.note]
        out.append("")
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
    if locomo is not None:
        out += store_goals29.render_locomo(locomo)
    return "\n".join(out)


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> tuple[Plan, argparse.Namespace]:
    from store_goals29 import DEFAULT_CACHE, DEFAULT_DATA, check_paths

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated store sizes (default 1000,10000; 100000 is opt-in; empty with --locomo: "
        "the LoCoMo rows only)",
    )
    parser.add_argument(
        "--caps", default=None, help="comma-separated caps for capped writes (default 1000,10000)"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/latest.md"), help="markdown output")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny sizes and few rounds")
    parser.add_argument(
        "--url",
        default=None,
        help="a throw-away server to run on instead of the embedded one (the run FLUSHALLs it), "
        "e.g. the valkey-search test engine",
    )
    parser.add_argument(
        "--locomo",
        action="store_true",
        help="also measure default recall vs raw KNN 50 on real text: LoCoMo turns as memories, its "
        "questions as queries (issue 29), after the synthetic sizes",
    )
    parser.add_argument(
        "--locomo-data", type=Path, default=DEFAULT_DATA, help=f"locomo10.json (default {DEFAULT_DATA})"
    )
    parser.add_argument(
        "--locomo-conversations",
        type=int,
        default=None,
        help="only the first N LoCoMo conversations (default all 10; 2 with --quick)",
    )
    parser.add_argument(
        "--embeddings-cache",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"where the LoCoMo ONNX vectors are cached, outside the repository (default {DEFAULT_CACHE}, "
        "shared with bench/quality.py)",
    )
    args = parser.parse_args(argv)
    plan = QUICK_PLAN if args.quick else DEFAULT_PLAN
    if args.quick and args.locomo_conversations is None:
        args.locomo_conversations = 2
    if args.locomo and (problem := check_paths(args.locomo_data, args.embeddings_cache)):
        parser.error(problem)

    def ints(text: str) -> tuple[int, ...]:
        return tuple(int(s.replace("_", "")) for s in text.split(",") if s.strip())

    if args.sizes is not None:
        sizes = ints(args.sizes)
        if (not sizes and not args.locomo) or any(s < 5 * K * THREADS for s in sizes):
            parser.error(
                f"every size must be at least {5 * K * THREADS} (50 memories in each of {THREADS} scopes); "
                "no size at all only with --locomo"
            )
        plan = replace(plan, sizes=sizes)
        if not sizes and args.caps is None:
            plan = replace(plan, caps=())
    if args.caps is not None:
        plan = replace(plan, caps=ints(args.caps))
    return plan, args


async def main(argv: Sequence[str]) -> None:
    plan, args = parse_args(argv)
    out, url = args.out, args.url
    started = time.perf_counter()
    load_start = os.getloadavg()
    server = None if url else await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    client = avalkey.Valkey.from_url(url or server.url)  # type: ignore[union-attr]
    bench = Bench(client, plan)
    locomo = None
    try:
        if url:
            await client.flushall(asynchronous=False)
        results = [await run_size(bench, n) for n in plan.sizes]
        capped = await capped_rows(bench)
        if args.locomo:
            import store_goals29

            locomo = await store_goals29.run_locomo(
                bench, args.locomo_data, args.embeddings_cache, args.locomo_conversations
            )
        machine_lines = await machine(bench, load_start)
    finally:
        await bench.close_stores()
        await client.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)
    caps = bench.caps
    engine = f"{caps.engine} {caps.version_string}" if caps else "unknown engine"
    report = render(argv, plan, machine_lines, results, capped, time.perf_counter() - started, locomo, engine)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n", encoding="utf-8")
    print(report)
    log(f"wrote {out}")


if __name__ == "__main__":
    # Run as the importable module: store_goals29.py imports this one and must share its classes.
    import bench_store

    asyncio.run(bench_store.main(sys.argv[1:]))
