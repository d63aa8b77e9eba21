"""``where=`` costs (issue 27): filtered reads are index queries, and cost what a scope filter costs.

Rows (a store of ``--n`` memories, HashingEmbedder, on the embedded engine or ``--url``):

* ``count`` / ``list`` with ``where`` (1% selective): median latency, and the server's
  ``FT.SEARCH`` calls per read (``INFO commandstats``: 1 = one index query, no scan);
* ``recall`` filtered by ``where`` against the same recall filtered by a scope of equal
  selectivity (the goal: no dearer);
* the LangGraph adapter's filtered ``search`` at ``--lg`` items: the declared key (an
  index query) against the same filter undeclared (the client path reads the prefix).

    python bench/bench_where.py --n 100000 --lg 10000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from betterdb_memory import MemoryStore
from betterdb_memory.core.codec import as_text
from betterdb_memory.testing import temporary_store

FIELDS = {"priority": "numeric", "project": "tag"}


async def _median_ms(fn: Callable[[], Awaitable[object]], repeat: int) -> float:
    await fn()
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


async def _searches(store: MemoryStore) -> int:
    info = await store.backend.command("bench", "INFO", "commandstats")
    for line in as_text(info).splitlines() if not isinstance(info, dict) else []:
        if line.lower().startswith("cmdstat_ft.search:"):
            return int(line.split("calls=")[1].split(",")[0])
    if isinstance(info, dict):
        stat = info.get("cmdstat_FT.SEARCH") or info.get("cmdstat_ft.search") or {}
        return int(stat.get("calls", 0))
    return 0


async def _calls_per(store: MemoryStore, fn: Callable[[], Awaitable[object]]) -> int:
    before = await _searches(store)
    await fn()
    return await _searches(store) - before


async def _fill(store: MemoryStore, n: int) -> None:
    batch = 1000
    for start in range(0, n, batch):
        await store.remember_many(
            [
                {
                    "content": f"memory {i} about topic {i % 50}",
                    "namespace": f"ns{i % 100}",
                    "metadata": {"priority": i % 100, "project": f"p{i % 100}"},
                }
                for i in range(start, min(n, start + batch))
            ]
        )


async def _store_rows(n: int, repeat: int) -> list[str]:
    rows = []
    async with temporary_store(metadata_fields=FIELDS) as store:
        await _fill(store, n)
        where: dict[str, Any] = {"project": "p7"}
        for name, fn in (
            ("count where (1%)", lambda: store.count(where=where)),
            ("count scope (1%)", lambda: store.count(namespace="ns7")),
            ("list where (1%, 20)", lambda: store.list(where=where)),
            ("list scope (1%, 20)", lambda: store.list(namespace="ns7")),
            ("recall where (1%)", lambda: store.recall("topic 7", where=where, reinforce=False)),
            ("recall scope (1%)", lambda: store.recall("topic 7", namespace="ns7", reinforce=False)),
            ("recall where range (10%)", lambda: store.recall("topic 7", where={"priority": {"$lt": 10}})),
        ):
            ms = await _median_ms(fn, repeat)
            calls = await _calls_per(store, fn)
            rows.append(f"| {name} | {n:,} | {ms:.2f} | {calls} |")
    return rows


async def _langgraph_rows(n: int, repeat: int) -> list[str]:
    from betterdb_memory.adapters.langgraph import LangGraphStore

    rows = []
    for declared in (False, True):
        fields = {"status": "tag"} if declared else None
        options: dict[str, Any] = {"metadata_fields": LangGraphStore.store_fields(fields)} if fields else {}
        async with temporary_store(**options) as store:
            lg = LangGraphStore(store, filter_fields=fields)
            for start in range(0, n, 1000):
                await lg.abatch(
                    [
                        _put(("docs",), f"k{i}", {"status": "open" if i % 100 == 0 else "done", "i": i})
                        for i in range(start, min(n, start + 1000))
                    ]
                )
            ms = await _median_ms(
                lambda lg=lg: lg.asearch(("docs",), filter={"status": "open"}, limit=10), repeat
            )
            label = "declared (where=)" if declared else "undeclared (client path)"
            rows.append(f"| LangGraph search filter, {label} | {n:,} | {ms:.2f} | |")
    return rows


def _put(namespace: tuple[str, ...], key: str, value: dict[str, Any]) -> Any:
    from langgraph.store.base import PutOp

    return PutOp(namespace, key, value, index=False)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--lg", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print("| read | memories | median ms | FT.SEARCH calls |")
    print("| --- | ---: | ---: | ---: |")
    for row in await _store_rows(args.n, args.repeat):
        print(row)
    if args.lg:
        for row in await _langgraph_rows(args.lg, max(3, args.repeat // 4)):
            print(row)


if __name__ == "__main__":
    asyncio.run(main())
