"""What the full-text query of hybrid recall costs on real text, next to the KNN it rides with.

10,000 memories from LoCoMo's conversation turns (the turns repeated to reach the size;
the data is read in place, never copied), 100 of its questions; each variant's
FT.SEARCH (built by the library's own ``core.query`` builders) timed on one embedded
engine, p50 and mean. ``bench_store.py`` times the same query on synthetic memories that
share most of their words, the worst case; this is the ordinary one.

    .venv/bin/python bench/bench_text_query.py [--data ../shared/data/locomo10.json]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.core.codec import encode_vector
from betterdb_memory.core.query import MemoryFilter, knn_search_args
from betterdb_memory.core.ranking import query_words
from betterdb_memory.core.text_query import text_search_args
from betterdb_memory.server import EmbeddedServer

REPO = Path(__file__).resolve().parent.parent
SLIM = ["content", "importance", "created_at", "last_accessed_at", "expires_at"]


def load(path: Path, size: int) -> tuple[list[str], list[str]]:
    data = json.loads(path.read_text("utf-8"))
    turns: list[str] = []
    questions: list[str] = []
    for conv in data:
        for key, session in conv["conversation"].items():
            if key.startswith("session_") and isinstance(session, list):
                turns += [f"{t['speaker']}: {t['text']}" for t in session]
        questions += [q["question"] for q in conv["qa"] if q.get("category") in (1, 2, 3, 4)]
    return (turns * (size // len(turns) + 1))[:size], questions


async def main(args: argparse.Namespace) -> int:
    turns, questions = load(args.data, args.size)
    started = time.perf_counter()
    server = EmbeddedServer(persistence=False)
    await asyncio.to_thread(server.start)
    client = avalkey.Valkey.from_url(server.url)
    store = MemoryStore(client=client, name="textcost", embedder=HashingEmbedder(384), discovery=False)
    rows: list[tuple[str, float, float]] = []
    try:
        for i in range(0, len(turns), 500):
            await store.remember_many([{"content": t} for t in turns[i : i + 500]])
        await store.index.ensure_ready()
        sample = random.Random(1).sample(questions, args.questions)
        vectors = await store.embedder.embed(sample)
        flt = MemoryFilter()
        index = store.keys.index

        def text(fields: list[str], limit: int = 50) -> Callable[[str, Any], list[list[Any]]]:
            return lambda q, v: [
                list(a)
                for a in text_search_args(
                    index, query_words(q), flt, per_word=False, return_fields=fields, limit=limit
                )
            ]

        variants: dict[str, Callable[[str, Any], list[list[Any]]]] = {
            "KNN 50, ranking fields (recall's)": lambda q, v: [
                list(knn_search_args(index, encode_vector(v), k=50, flt=flt, return_fields=SLIM))
            ],
            "text 50, ranking fields + vector (recall's)": text([*SLIM, "vector"]),
            "text 50, ranking fields": text(SLIM),
            "text 50, content only": text(["content"]),
            "text 25, ranking fields + vector": text([*SLIM, "vector"], 25),
        }
        for name, build in variants.items():
            latencies = []
            for q, v in zip(sample, vectors, strict=True):
                for cmd in build(q, v):
                    t0 = time.perf_counter()
                    await client.execute_command(*cmd)
                    latencies.append((time.perf_counter() - t0) * 1000)
            rows.append((name, statistics.median(latencies), statistics.mean(latencies)))
            print(f"{name}: p50 {rows[-1][1]:.2f} ms, mean {rows[-1][2]:.2f} ms", file=sys.stderr)
    finally:
        await store.close()
        await client.aclose()
        await asyncio.to_thread(server.stop)
    report = "\n".join(
        [
            "# The full-text query of hybrid recall on real text",
            "",
            f"`bench/bench_text_query.py`, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, run took "
            f"{time.perf_counter() - started:.0f} s; {len(turns):,} LoCoMo turns as memories (unscoped), "
            f"{args.questions} of its questions, one embedded engine (RediSearch 2.10).",
            "",
            "| query | p50 ms | mean ms |",
            "|---|---|---|",
            *[f"| {n} | {p50:.2f} | {mean:.2f} |" for n, p50, mean in rows],
            "",
        ]
    )
    print(report)
    args.out.write_text(report, "utf-8")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "locomo10.json")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "text-query.md")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--questions", type=int, default=100)
    sys.exit(asyncio.run(main(parser.parse_args())))
