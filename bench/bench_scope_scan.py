"""A scoped recall on valkey-search: the exact scan of a small scope against the filtered KNN (issue 29).

Populates one store on the server at ``VALKEY_URL`` (run it under
``scripts/with-valkey-search.sh standalone``) with bench_1m's corpus (384-d seeded unit
vectors passed as ``vector=``, Zipf-worded contents, ``--threads`` thread scopes of one
agent) up to ``--size`` memories, then measures, interleaved in one run:

* scoped default ``recall`` and ``recall_by_vector`` p50/p99, ``before`` (a store whose
  recalls always send the filtered KNN, as before this change) against ``after`` (the
  default: a scope known small is read whole and ranked in the client);
* server calls per operation of each (``INFO commandstats`` deltas);
* to choose ``SCAN_LIMIT``: for filters of growing size (unions of whole threads), the raw
  filtered KNN 50 against the raw scan returning the recall's fields and vectors, its
  reply bytes, and the client's parse + exact ranking of it;
* with ``--cold``, first: the *first* recall of a scope (each sample a thread no store
  has recalled), interleaved: ``before`` (a never-seen filter sends the filtered KNN with
  its count: the code before the bounded scan), ``count first`` (one ``LIMIT 0 0`` round
  trip, then the warm decision: the alternative weighed) and ``after`` (the default: the
  bounded scan); and the first recall of the agent's scope (the whole store: the bounded
  scan's worst case) in a store opened for it (a new process).

    PYTHON=.venv/bin/python bash scripts/with-valkey-search.sh standalone \\
        .venv/bin/python bench/bench_scope_scan.py --size 30000 --threads 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import bench_1m
import numpy as np
import valkey.asyncio as avalkey
from bench_1m import BATCH, DIM, Book, Corpus, commandstats_total, log

from betterdb_memory import MemoryStore
from betterdb_memory.core.codec import encode_vector
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import MemoryFilter, knn_search_args
from betterdb_memory.core.replies import parse_search_reply
from betterdb_memory.core.scope_scan import (
    SizeClasses,
    count_args,
    filter_key,
    nearest,
    nearest_reply,
    scan_args,
)
from betterdb_memory.tiers.recall import _RANKING_FIELDS

NAME = "benchscope"


class _NeverSmall(SizeClasses):
    """``before``: no filter is ever small or counted, so every recall sends the filtered KNN."""

    def scan(self, key: str, k: int) -> bool:
        return False

    def bound(self, k: int) -> int:
        return 0

    def needs_count(self, key: str, now: float) -> bool:
        return False


class _WalkNew(SizeClasses):
    """``before`` of the cold rows: a never-seen filter sends the KNN and its count (the
    code before the bounded scan); a filter learned small is scanned, as then."""

    def bound(self, k: int) -> int:
        return 0


def _ms(xs: Sequence[float]) -> tuple[float, float]:
    return statistics.median(xs) * 1e3, float(np.percentile(xs, 99)) * 1e3


async def _populate(store: MemoryStore, corpus: Corpus, size: int) -> float:
    have = await store.count()
    t0 = time.perf_counter()
    for start in range(have, size, BATCH):
        await store.remember_many(corpus.items(start, min(BATCH, size - start)))
        if (start // BATCH) % 10 == 0:
            log(f"  {start + BATCH} written")
    return (size - have) / max(time.perf_counter() - t0, 1e-9)


async def _calls(client: Any, op: Callable[[int], Awaitable[Any]], n: int = 20) -> float:
    before = await commandstats_total(client)
    for i in range(n):
        await op(i)
    return (await commandstats_total(client) - before) / n


async def _limit_table(client: Any, store: MemoryStore, book: Book, threads: int, size: int) -> list[str]:
    """Raw scan vs raw filtered KNN 50 for unions of 1, 2, 4, ... threads."""
    per = size // threads
    rng = np.random.default_rng(29)
    out = [
        "| filter matches | raw filtered KNN 50 p50 ms | raw scan p50 ms | scan reply KB | parse + rank ms | read by position ms | total |",
        "|---|---|---|---|---|---|---|",
    ]
    n = 1
    while n <= threads and n * per <= 8_000:
        scope_threads = [f"t{i}" for i in range(n)]
        flt = MemoryFilter(clauses=("@threadId:{" + "|".join(scope_threads) + "}",))
        knn_t, scan_t, rank_t, pos_t, size_b, total = [], [], [], [], 0, 0
        for _ in range(15):
            q = rng.standard_normal(DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            knn = knn_search_args(
                store.spec.index, encode_vector(q), k=50, flt=flt, return_fields=_RANKING_FIELDS
            )
            scan = scan_args(store.spec.index, flt, store.index.layout, _RANKING_FIELDS, limit=8_000)
            t0 = time.perf_counter()
            await client.execute_command(*knn)
            t1 = time.perf_counter()
            reply = await client.execute_command(*scan)
            t2 = time.perf_counter()
            result = parse_search_reply(reply)
            nearest(result.hits, q, 50)
            t3 = time.perf_counter()
            nearest_reply(reply, q, 50, limit=8_000)  # what a recall's scan does (core.scan_rows)
            t4 = time.perf_counter()
            knn_t.append(t1 - t0)
            scan_t.append(t2 - t1)
            rank_t.append(t3 - t2)
            pos_t.append(t4 - t3)
            total = result.total
            size_b = sum(len(x) for x in _flat(reply))
        out.append(
            f"| {n * per:,} ({n} threads) | {_ms(knn_t)[0]:.2f} | {_ms(scan_t)[0]:.2f} | {size_b / 1024:.0f} | "
            f"{_ms(rank_t)[0]:.2f} | {_ms(pos_t)[0]:.2f} | {total} |"
        )
        log(out[-1])
        n *= 2
    count_all = count_args(store.spec.index, MemoryFilter(), store.index.layout)
    lat = []
    for _ in range(15):
        t0 = time.perf_counter()
        await client.execute_command(*count_all)
        lat.append(time.perf_counter() - t0)
    out += ["", f"Count of the whole index (the probe's second count): p50 {_ms(lat)[0]:.2f} ms."]
    return out


async def _cold(
    client: Any, url: str, book: Book, corpus: Corpus, args: argparse.Namespace, used: set[str]
) -> list[str]:
    """First recalls of scopes no store has recalled, interleaved before / count first / after."""
    stores = {
        m: MemoryStore(client=client, name=NAME, embedder=book) for m in ("before", "count first", "after")
    }
    stores["before"]._recall._scan.sizes = _WalkNew()
    fresh = [f"t{i}" for i in range(args.threads) if f"t{i}" not in used]
    rng = np.random.default_rng(args.size + 1)
    lat: dict[str, list[float]] = {}
    modes = list(stores)

    async def first(
        mode: str, thread: str | None, text: str, vec: Any, store: MemoryStore, dense: bool
    ) -> None:
        scope: dict[str, Any] = {"thread_id": thread} if thread else {"agent_id": "fleet"}
        t0 = time.perf_counter()
        if mode == "count first":  # the alternative: one count round trip, then the warm decision
            flt = MemoryFilter(scope=Scope(**scope))
            reply = await client.execute_command(*count_args(store.spec.index, flt, store.index.layout))
            store._recall._scan.sizes.learn(
                filter_key(flt, store.index.layout), int(reply[0]), time.monotonic()
            )
        if dense:
            await store.recall_by_vector(vec.tolist(), k=10, reinforce=False, **scope)
        else:
            await store.recall(text, k=10, **scope)
        name = "recall_by_vector, k=10" if dense else "recall (defaults)"
        where = "first of a thread" if thread else "first of the agent (whole store), new store"
        lat.setdefault(f"{name}, {where}, {mode}", []).append(time.perf_counter() - t0)

    for store in stores.values():  # every store opened, its index count learned (unscoped)
        await store.recall_by_vector(corpus.batch(0, 1)[0][0].tolist(), k=10, reinforce=False)
    for i in range(min(args.samples, len(fresh) // 6)):
        order = modes[i % 3 :] + modes[: i % 3]
        for dense in (False, True):
            for j, mode in enumerate(order):
                thread = fresh[(i * 6) + (3 if dense else 0) + j]
                target = int(thread[1:]) + args.threads * int(rng.integers(0, args.size // args.threads))
                v, texts = corpus.batch(target, 1)
                text = f"cold{i}{mode}{dense} " + " ".join(texts[0].split()[2:6])
                book.queries[text] = v[0]
                await first(mode, thread, text, v[0], stores[mode], dense)
        for mode in order if i < 12 else ():  # a store opened for it: its first recall of the agent scope
            opened = MemoryStore(
                client=avalkey.Valkey.from_url(url, decode_responses=False), name=NAME, embedder=book
            )
            if mode == "before":
                opened._recall._scan.sizes = _WalkNew()
            await opened.index.ensure_ready()
            await first(mode, None, "", corpus.batch(i, 1)[0][0], opened, True)
            await opened.close()
            await opened._rt.backend.client.aclose()
    for store in stores.values():
        await store.close()
    out = [
        f"First recalls ({args.samples} new threads per row and mode; 12 new stores per agent-scope row), "
        f"interleaved; load average {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| first recall of a scope | p50 ms | p99 ms |",
        "|---|---|---|",
    ]
    for name, xs in lat.items():
        p50, p99 = _ms(xs)
        out.append(f"| {name} | {p50:.2f} | {p99:.2f} |")
    log("\n".join(out))
    return out


def _flat(reply: Any) -> list[bytes]:
    out: list[bytes] = []
    for x in reply if isinstance(reply, list) else [reply]:
        if isinstance(x, list):
            out += _flat(x)
        elif isinstance(x, bytes):
            out.append(x)
        else:
            out.append(str(x).encode())
    return out


async def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=30_000)
    ap.add_argument("--threads", type=int, default=100)
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--out", default="")
    ap.add_argument("--cold", action="store_true", help="also the first recall of never-recalled scopes")
    ap.add_argument("--no-limit-table", action="store_true", help="skip the raw scan vs KNN table")
    args = ap.parse_args(argv)
    url = os.environ.get("VALKEY_URL")
    if not url:
        print("VALKEY_URL is not set: run under scripts/with-valkey-search.sh standalone", file=sys.stderr)
        return 2
    bench_1m.THREADS = args.threads  # Corpus.items reads it
    client = avalkey.Valkey.from_url(url, decode_responses=False)
    book, corpus = Book(), Corpus()
    after = MemoryStore(client=client, name=NAME, embedder=book)
    before = MemoryStore(client=client, name=NAME, embedder=book)
    before._recall._scan.sizes = _NeverSmall()
    try:
        log(f"populating {args.size:,} memories over {args.threads} threads")
        rate = await _populate(after, corpus, args.size)
        log(f"  {rate:,.0f} memories/s")
        rng = np.random.default_rng(args.size)
        queries = []
        for j in range(args.samples):
            target = int(rng.integers(0, args.size))
            v, texts = corpus.batch(target, 1)
            near = v[0] + rng.standard_normal(DIM).astype(np.float32) / np.float32(np.sqrt(DIM))
            near /= np.linalg.norm(near)
            text = f"q{j} " + " ".join(texts[0].split()[2:6])
            book.queries[text] = near
            queries.append((text, near, f"t{target % args.threads}"))
        cold = await _cold(client, url, book, corpus, args, {q[2] for q in queries}) if args.cold else []
        for text, _, thread in queries:  # warm-up: each store learns each scope's size
            await after.recall(text, k=10, thread_id=thread)
            await before.recall(text, k=10, thread_id=thread)
        lat: dict[str, list[float]] = {}
        for i, (text, vec, thread) in enumerate(queries):
            pair = [("before", before), ("after", after)]
            for mode, store in pair if i % 2 == 0 else pair[::-1]:
                t0 = time.perf_counter()
                await store.recall(text, k=10, thread_id=thread)
                t1 = time.perf_counter()
                await store.recall_by_vector(vec.tolist(), k=10, thread_id=thread, reinforce=False)
                t2 = time.perf_counter()
                lat.setdefault(f"recall, one thread (defaults) {mode}", []).append(t1 - t0)
                lat.setdefault(f"recall_by_vector, one thread {mode}", []).append(t2 - t1)
        calls: dict[str, float] = {}
        for mode, store in (("before", before), ("after", after)):

            def op(i: int, s: MemoryStore = store) -> Awaitable[Any]:
                q = queries[i % len(queries)]
                return s.recall(q[0], k=10, thread_id=q[2])

            def vop(i: int, s: MemoryStore = store) -> Awaitable[Any]:
                q = queries[i % len(queries)]
                return s.recall_by_vector(q[1].tolist(), k=10, thread_id=q[2], reinforce=False)

            calls[f"recall, one thread (defaults) {mode}"] = await _calls(client, op)
            calls[f"recall_by_vector, one thread {mode}"] = await _calls(client, vop)
        lines = [
            f"# Scoped recall on {after.index.caps.engine}: scan vs filtered KNN ({args.size:,} memories, "
            f"{args.threads} threads of {args.size // args.threads:,})",
            "",
            f"load average {os.getloadavg()[0]:.1f} at the end; populate {rate:,.0f} memories/s; "
            f"{args.samples} queries, before/after interleaved (order alternating).",
            "",
            "| operation | p50 ms | p99 ms | server calls / op |",
            "|---|---|---|---|",
        ]
        for name, xs in lat.items():
            p50, p99 = _ms(xs)
            lines.append(f"| {name} | {p50:.2f} | {p99:.2f} | {calls.get(name, float('nan')):.1f} |")
        if cold:
            lines += ["", *cold]
        if not args.no_limit_table:
            lines += ["", *await _limit_table(client, after, book, args.threads, args.size)]
        text = "\n".join(lines) + "\n"
        print(text)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text)
    finally:
        await before.close()
        await after.close()
        await client.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
