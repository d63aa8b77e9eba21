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
  reply bytes, and the client's parse + exact ranking of it.

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
from betterdb_memory.core.query import MemoryFilter, knn_search_args
from betterdb_memory.core.replies import parse_search_reply
from betterdb_memory.core.scope_scan import SizeClasses, count_args, nearest, scan_args
from betterdb_memory.tiers.recall import _RANKING_FIELDS

NAME = "benchscope"


class _NeverSmall(SizeClasses):
    """``before``: no filter is ever small or counted, so every recall sends the filtered KNN."""

    def small(self, key: str) -> bool:
        return False

    def needs_count(self, key: str, now: float) -> bool:
        return False


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
        "| filter matches | raw filtered KNN 50 p50 ms | raw scan p50 ms | scan reply KB | parse + rank ms | total |",
        "|---|---|---|---|---|---|",
    ]
    n = 1
    while n <= threads and n * per <= 8_000:
        scope_threads = [f"t{i}" for i in range(n)]
        flt = MemoryFilter(clauses=("@threadId:{" + "|".join(scope_threads) + "}",))
        knn_t, scan_t, rank_t, size_b, total = [], [], [], 0, 0
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
            knn_t.append(t1 - t0)
            scan_t.append(t2 - t1)
            rank_t.append(t3 - t2)
            total = result.total
            size_b = sum(len(x) for x in _flat(reply))
        out.append(
            f"| {n * per:,} ({n} threads) | {_ms(knn_t)[0]:.2f} | {_ms(scan_t)[0]:.2f} | {size_b / 1024:.0f} | "
            f"{_ms(rank_t)[0]:.2f} | {total} |"
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
        for text, _, thread in queries:  # warm-up: ``after`` learns each scope's size (KNN + count)
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
