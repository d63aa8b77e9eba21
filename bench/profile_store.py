"""Where one benchmark scenario spends its time: client side (pyinstrument) and server side.

Populates a store with ``--n`` memories (untimed), warms up, runs ``--calls`` calls
of one scenario unprofiled (wall time per call, and ``INFO commandstats``: server-side
microseconds per command, which pyinstrument shows only as an ``await``), then as many
again under pyinstrument (the call tree; the profiler slows the client, so read its
shares, not its absolute times).

    .venv/bin/pip install pyinstrument
    .venv/bin/python bench/profile_store.py recall-reinforce --n 10000
    .venv/bin/python bench/profile_store.py remember-many --n 2000 --calls 4

Scenarios: recall, recall-reinforce, recall-cf1, recall-scoped, remember, remember-many.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import valkey.asyncio as avalkey
from bench_store import BATCH, DEFAULT_PLAN, READER, WRITER, Bench, K

from betterdb_memory import MemoryStore
from betterdb_memory.server import EmbeddedServer

SCENARIOS = ("recall", "recall-reinforce", "recall-cf1", "recall-scoped", "remember", "remember-many")


def make_call(bench: Bench, store: MemoryStore, scenario: str, count: int) -> Callable[[int], Awaitable[Any]]:
    """The measured call of ``scenario``, for call numbers ``0 .. count - 1``."""
    if scenario.startswith("recall"):
        queries = bench.unit_vectors(count)
        scoped = scenario == "recall-scoped"
        reinforce = scenario == "recall-reinforce"
        return lambda i: store.recall_by_vector(
            queries[i], k=K, thread_id="t0" if scoped else None, reinforce=reinforce
        )
    if scenario == "remember":
        docs = bench.docs(count, agent=WRITER, thread="w")
        return lambda i: store.remember(
            docs[i].content, vector=docs[i].vector, thread_id=docs[i].thread, agent_id=docs[i].agent
        )
    batches = [[d.item() for d in bench.docs(BATCH, agent=WRITER, thread="w")] for _ in range(count)]
    return lambda i: store.remember_many(batches[i])


def commandstats(raw: dict[str, Any]) -> list[str]:
    rows = sorted(
        ((k.removeprefix("cmdstat_"), v) for k, v in raw.items() if not k.endswith("resetstat")),
        key=lambda kv: -float(kv[1]["usec"]),
    )
    lines = [f"{'command':<24}{'calls':>8}{'usec/call':>12}{'total ms':>12}"]
    for name, v in rows:
        lines.append(
            f"{name:<24}{v['calls']:>8}{float(v['usec_per_call']):>12.1f}{int(v['usec']) / 1000:>12.1f}"
        )
    return lines


async def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenario", choices=SCENARIOS)
    parser.add_argument("--n", type=int, default=2000, help="memories in the store before profiling")
    parser.add_argument("--calls", type=int, default=100, help="profiled calls")
    parser.add_argument("--flat", action="store_true", help="functions by self time instead of the tree")
    args = parser.parse_args(argv)
    try:
        from pyinstrument import Profiler
    except ImportError:
        sys.exit("pyinstrument is not installed: .venv/bin/pip install pyinstrument")

    server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    client = avalkey.Valkey.from_url(server.url)
    try:
        bench = Bench(client, DEFAULT_PLAN)
        store = bench.store("profile", candidate_factor=1 if args.scenario == "recall-cf1" else 2)
        await bench.fill(store, bench.docs(args.n, agent=READER))
        warmup = min(10, args.calls)
        # Unprofiled calls first (the profiler slows the client), then profiled ones.
        call = make_call(bench, store, args.scenario, 2 * args.calls + warmup)
        for i in range(warmup):
            await call(2 * args.calls + i)
        await client.config_resetstat()
        t0 = time.perf_counter()
        for i in range(args.calls):
            await call(i)
        elapsed = time.perf_counter() - t0
        stats = await client.info("commandstats")
        profiler = Profiler(async_mode="enabled")
        with profiler:
            for i in range(args.calls, 2 * args.calls):
                await call(i)
        await bench.close_stores()
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
    print(profiler.output_text(unicode=False, color=False, flat=args.flat, time="percent_of_total"))
    print(
        f"{args.scenario}: {args.calls} calls on {args.n:,} memories, {elapsed / args.calls * 1e3:.2f} ms/call"
    )
    print("\n".join(commandstats(stats)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
