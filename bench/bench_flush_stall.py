"""What a reinforcement flush pass costs the other clients of the engine (issue 29, bench-1m's capped write).

Reinforcement writes a recalled memory's ``access_count`` / ``last_accessed_at`` back to its
document in a pass (``tiers.reinforce``, once a minute at the default half-life); on
RediSearch each written document re-indexes its vector. The engine runs a pipeline's
commands back to back, so how many documents a pass sends per round trip is how long
every other client can wait behind it.

On an embedded engine (RediSearch 2.10, persistence off) holding ``--size`` memories
(``bench_1m.py``'s corpus), ``--hits`` first accesses are made (``recall_by_vector`` with
reinforcement, the write interval set long so no pass runs on its own), then one pass is
run while a second client sends a raw ``FT.SEARCH`` KNN 10 in a loop. Per mode, in one run:
the pass's documents and duration, and the loop's latency during it (p50 / p99 / max) next
to the same loop's with no pass running. Modes: the shipped pass (8 documents a round
trip) and the previous one (each HSCAN page of 256 in one pipeline, ``_TRIP_DOCS`` patched).

    .venv/bin/python bench/bench_flush_stall.py --size 100k --hits 2000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))  # this checkout's library

from bench_1m import DIM, Book, Corpus  # noqa: E402

from betterdb_memory import MemoryStore  # noqa: E402
from betterdb_memory.core.query import SCORE_ALIAS, VECTOR_FIELD  # noqa: E402
from betterdb_memory.tiers import reinforce  # noqa: E402


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def stats(lat: Sequence[float]) -> str:
    ms = sorted(x * 1e3 for x in lat)
    if not ms:
        return "- / - / -"
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{statistics.median(ms):.2f} / {p99:.2f} / {ms[-1]:.2f}"


async def knn_loop(client: Any, index: str, stop: asyncio.Event, rng: np.random.Generator) -> list[float]:
    lat = []
    while not stop.is_set():
        v = rng.standard_normal(DIM).astype(np.float32)
        v /= np.linalg.norm(v)
        t0 = time.perf_counter()
        await client.execute_command(
            "FT.SEARCH", index, f"*=>[KNN 10 @{VECTOR_FIELD} $vec AS {SCORE_ALIAS}]",
            "PARAMS", "2", "vec", v.tobytes(), "NOCONTENT", "LIMIT", "0", "10", "DIALECT", "2",
        )  # fmt: skip
        lat.append(time.perf_counter() - t0)
    return lat


async def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="100k")
    ap.add_argument("--hits", type=int, default=2000, help="first accesses before each pass")
    args = ap.parse_args(argv)
    size = int(float(args.size.lower().replace("k", "e3").replace("m", "e6")))
    import valkey.asyncio as avalkey

    from betterdb_memory.server import EmbeddedServer

    server = EmbeddedServer(persistence=False)
    server.start()
    client: Any = avalkey.Valkey.from_url(server.url, socket_timeout=300)
    other: Any = avalkey.Valkey.from_url(server.url, socket_timeout=300)
    book, corpus = Book(), Corpus()
    store = MemoryStore(
        client=client, name="flushstall", embedder=book, default_threshold=2.0, reinforce_write_interval=3600
    )
    out = [f"# bench_flush_stall.py {' '.join(argv)}", ""]
    try:
        t0 = time.perf_counter()
        for start in range(0, size, 1000):
            await store.remember_many(corpus.items(start, 1000))
        log(f"{size:,} memories in {time.perf_counter() - t0:.0f} s")
        index = store.spec.index
        rng = np.random.default_rng(7)
        stop = asyncio.Event()
        task = asyncio.create_task(knn_loop(other, index, stop, rng))
        await asyncio.sleep(2.0)
        stop.set()
        quiet = await task
        out += [
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; embedded engine, {size:,} memories, "
            f"{args.hits:,} first accesses before each pass.",
            "",
            "| pass | documents written | pass duration s | raw KNN 10 meanwhile p50 / p99 / max ms | KNNs |",
            "|---|---|---|---|---|",
            f"| none (the loop alone, 2 s) | - | - | {stats(quiet)} | {len(quiet)} |",
        ]
        log(out[-1])
        seen = 0
        for label, trip in (
            ("one pipeline per page of 256 (before)", 10**9),
            ("8 documents a round trip (now)", 8),
        ):
            # First accesses of memories no earlier mode touched: each k=10 recall near a new memory.
            made = 0
            while made < args.hits:
                vec, _ = corpus.one(seen)
                seen += 97
                hits = await store.recall_by_vector(vec.tolist(), k=10)
                made += len(hits)
            reinforce._TRIP_DOCS = trip
            stop = asyncio.Event()
            task = asyncio.create_task(knn_loop(other, index, stop, rng))
            await asyncio.sleep(0.2)
            t0 = time.perf_counter()
            written = await store._docs.reinforcement.flush()
            took = time.perf_counter() - t0
            stop.set()
            lat = await task
            out.append(f"| {label} | {written:,} | {took:.2f} | {stats(lat)} | {len(lat)} |")
            log(out[-1])
        reinforce._TRIP_DOCS = reinforce._CHUNK
    finally:
        await store.close()
        await client.aclose()
        await other.aclose()
        server.stop()
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
