"""forget_by_scope against betterdb-agent-memory, and against this library sending a DEL per memory.

Issue #29: forget at least as fast as the reference. The reference deletes a page of 500
with one multi-key ``DEL``; this library used to send two commands per memory (the
document, then its access counter and update history), and now one ``DEL`` per hash
slot for the documents and one for the side keys (``core.slots.deletes``). The rows,
interleaved round by round on one embedded server (or ``VALKEY_URL``) so load lands on
every side alike; each round fills a fresh store of ``n`` memories of one agent (untimed)
and times one ``forget_by_scope(agent_id=...)`` of it:

* ``ours``: this tree;
* ``ours, a DEL per memory``: this tree with ``deletes`` swapped for the old per-memory
  commands (the same number of commands as before), the old-vs-new A/B;
* ``betterdb-agent-memory``: the reference, same documents and vectors.

    .venv/bin/python bench/bench_forget.py                  # 1k and 10k
    .venv/bin/python bench/bench_forget.py --sizes 1000 --rounds 9
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import valkey.asyncio as avalkey
from _refs import AgentMemoryAdapter, OursAdapter, VectorBook
from bench_store import Doc

import betterdb_memory.tiers.documents as documents_module
from betterdb_memory.core import slots

DIM = 384
AGENT = "forgetter"


def per_memory(
    counted: Sequence[str], rest: Sequence[str] = (), *, cluster: bool, verb: str = "DEL"
) -> tuple[list[tuple[str, ...]], int]:
    """The old commands: one DEL per document, one per memory's side keys (two each)."""
    docs = [(verb, k) for k in counted]
    sides = [(verb, *rest[i : i + 2]) for i in range(0, len(rest), 2)]
    return [*docs, *sides], len(docs)


def make_docs(book: VectorBook, n: int, serial: int) -> list[Doc]:
    rng = np.random.default_rng(serial)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for i in range(n):
        content = f"memory {serial}-{i}: the user likes item {i % 97}"
        book.add(content, vectors[i])
        out.append(Doc(content, f"t{i % 10}", AGENT, vectors[i]))
    return out


async def fill_ours(side: OursAdapter, docs: list[Doc]) -> None:
    for j in range(0, len(docs), 500):
        await side.remember_batch(docs[j : j + 500])


async def fill_bam(side: AgentMemoryAdapter, docs: list[Doc]) -> None:
    for j in range(0, len(docs), 200):
        await side.remember_batch(docs[j : j + 200])


async def run(client: Any, sizes: Sequence[int], rounds: int) -> None:
    book = VectorBook(DIM)
    serial = 0
    print(f"load before: {os.getloadavg()[0]:.2f} (1-min average)")
    for n in sizes:
        times: dict[str, list[float]] = {
            "ours": [],
            "ours, a DEL per memory": [],
            "betterdb-agent-memory": [],
        }
        for r in range(rounds):
            order = list(times)
            order = order[r % 3 :] + order[: r % 3]  # rotate who goes first
            for label in order:
                serial += 1
                docs = make_docs(book, n, serial)
                if label == "betterdb-agent-memory":
                    bam = AgentMemoryAdapter(client, f"bfg{serial}", book, threshold=2.0)
                    await bam.start()
                    await fill_bam(bam, docs)
                    forget: Callable[[], Awaitable[int]] = lambda bam=bam: bam.forget_agent(AGENT)  # noqa: E731
                    close: Callable[[], Awaitable[None]] = bam.close
                else:
                    ours = OursAdapter(client, f"ofg{serial}", book, threshold=2.0)
                    await ours.start()
                    await fill_ours(ours, docs)
                    forget, close = (lambda ours=ours: ours.forget_agent(AGENT)), ours.close
                documents_module.deletes = per_memory if label == "ours, a DEL per memory" else slots.deletes  # type: ignore[assignment]
                t0 = time.perf_counter()
                deleted = await forget()
                times[label].append(time.perf_counter() - t0)
                documents_module.deletes = slots.deletes
                assert deleted == n, (label, deleted, n)
                await close()
        base = statistics.median(times["betterdb-agent-memory"])
        print(f"\nforget_by_scope of {n:,} memories, {rounds} interleaved rounds, p50 (all samples, ms):")
        for label, ts in times.items():
            med = statistics.median(ts)
            print(
                f"  {label:26s} {med * 1e3:8.1f} ms  {med / base:5.2f}x the reference  "
                f"[{', '.join(f'{t * 1e3:.0f}' for t in ts)}]"
            )
    print(f"\nload after: {os.getloadavg()[0]:.2f} (1-min average)")


async def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    server = None
    url = os.environ.get("VALKEY_URL")
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
        url = server.url
    client = avalkey.Valkey.from_url(
        url, socket_timeout=600
    )  # a 500-key DEL of indexed documents can take seconds
    try:
        await run(client, sizes, args.rounds)
    finally:
        await client.aclose()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
