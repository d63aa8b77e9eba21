"""The scope scan's index size: FT.INFO's ``num_docs`` vs a count over every document, server µs each.

Writes ``--size`` memories (random 384-d vectors, one store), then asks each form
``--n`` times, alternating, and prints the servers' µs per call (INFO commandstats, every
primary on a cluster) and what each answered.

    .venv/bin/python bench/probe_ft_info.py --url valkey://127.0.0.1:6379 --size 20000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from betterdb_memory import MemoryStore
from betterdb_memory.core.ft_info import parse_ft_info
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.replies import parse_search_reply
from betterdb_memory.core.scope_scan import count_args, index_count_args
from betterdb_memory.embedders import HashingEmbedder


async def _usec(client: Any, command: str) -> tuple[float, float]:
    nodes = (
        [await client.info("commandstats", target_nodes=n) for n in client.get_primaries()]
        if hasattr(client, "get_primaries")
        else [await client.info("commandstats")]
    )
    usec = calls = 0.0
    for stats in nodes:
        for k, v in stats.items():
            if str(k).lower() == f"cmdstat_{command}":
                usec, calls = usec + float(v["usec"]), calls + float(v["calls"])
    return usec, calls


async def run(args: argparse.Namespace) -> None:
    store = await MemoryStore.connect(
        args.url, name=f"ftinfo-{uuid.uuid4().hex[:6]}", embedder=HashingEmbedder(384)
    )
    try:
        rng = np.random.default_rng(7)
        for start in range(0, args.size, 1000):
            v = rng.standard_normal((min(1000, args.size - start), 384)).astype(np.float32)
            await store.remember_many(
                [
                    {"content": f"m {start + i}", "vector": x.tolist(), "thread_id": f"t{i % 100}"}
                    for i, x in enumerate(v)
                ]
            )
        backend, name = store.backend, store.index.name
        forms = {
            "FT.INFO": index_count_args(name, cluster=backend.cluster),
            "count": count_args(name, MemoryFilter(), store.index.layout),
        }
        cmd = {"FT.INFO": "ft.info", "count": "ft.search"}
        spent: dict[str, list[float]] = {k: [] for k in forms}
        answers: dict[str, Any] = {}
        for i in range(args.n):
            for label in list(forms) if i % 2 else list(forms)[::-1]:
                before = await _usec(store.client, cmd[label])
                answers[label] = await backend.search("probe", forms[label])
                after = await _usec(store.client, cmd[label])
                spent[label].append((after[0] - before[0]) / max(1.0, after[1] - before[1]))
        print(f"{args.size} memories, {args.n} calls each, load {os.getloadavg()[0]:.1f}")
        print("| form | server µs per call (median) | answer |\n|---|---|---|")
        print(
            f"| FT.INFO num_docs | {np.median(spent['FT.INFO']):.0f} | {parse_ft_info(answers['FT.INFO']).num_docs} |"
        )
        print(
            f"| FT.SEARCH @created_at:[-inf +inf] LIMIT 0 0 | {np.median(spent['count']):.0f} | "
            f"{parse_search_reply(answers['count'], nocontent=True).total} |"
        )
    finally:
        await store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default=os.environ.get("VALKEY_URL"))
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--n", type=int, default=100)
    asyncio.run(run(ap.parse_args()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
