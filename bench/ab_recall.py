"""Differential check of recall: two versions of the package rank the same recalls the same way.

Issue 29's recall work rewrites the Python between the search replies and the hits
(reply parsing, item building, re-ranking, same-slot supersession); the rankings must
not change. This script loads another version of the package (``--against DIR``: its
``betterdb_memory`` copied as ``bm_against``, as ``profile_python.py`` does), opens a
store of each version over the same memories on one embedded server, replays the same
recalls through both, call by call, and compares the ordered ids, every field of the items, the scores,
similarities and distances (to ``--tolerance``; the clock the composite score reads is
fixed, so they are expected to be equal to the bit) and, with ``explain``, every score
part. It exits 1 when any recall differs.

The memories are four families, each meant to exercise one part of the path:
``synthetic`` (``profile_store.py``'s texts, random vectors: every candidate leads with
the same name, none is close), ``topics`` (``bench_compare.py``'s: candidates close to
each other, so same-slot supersession compares them and embeds its prototypes),
``people`` (facts about named people with dates: same-slot pairs that supersede) and
``turns`` (conversation turns in threads: ``LearnedRanker``'s neighbours). Recalls vary
the re-ranker (the default ``HybridRanker``, ``LearnedRanker``, none), ``k``, the scope,
``explain``, text and vector recall, and filters (``where``, tags, sensitivity). Some
memories store optional fields (importance, tags, metadata, a TTL, a sensitivity), so
replies mix rows of several shapes. Reinforcement is off (both versions read the same
documents).

Then single writes (``remember``, the store's defaults: issue 29 rewrote the transport a
write goes through and the metrics it records): about ``--writes`` of the memories are
written again through each version, with the write clock fixed; the commands each sent
(the new id replaced by a placeholder) and the item read back must be equal.

    git worktree add /tmp/old <commit>   # or: git archive <commit> betterdb_memory | tar -x -C /tmp/old
    .venv/bin/python bench/ab_recall.py --against /tmp/old
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import hashlib
import importlib
import itertools
import math
import sys
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import valkey.asyncio as avalkey
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package first
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import is_background
from profile_python import load_against

DIM = 384
NOW = 1_790_000_000.0  # the composite score's clock, fixed (2026-09)
DAY_MS = 86_400_000


class Book:
    """The embedder: known texts' vectors, any other text a fixed random vector of its hash."""

    dimensions = DIM
    model_id = "ab-book"

    def __init__(self, model: Any = None) -> None:
        self.vectors: dict[str, Any] = {}
        self.model = model  # ``--onnx``: the shipped MiniLM embeds every text (its model id too)
        if model is not None:
            self.model_id = model.model_id

    def vector(self, text: str) -> Any:
        v = self.vectors.get(text)
        if v is None:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            v /= np.linalg.norm(v)
            self.vectors[text] = v
        return v

    async def embed(self, texts: Sequence[str]) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing and self.model is not None:
            self.vectors.update(zip(missing, await self.model.embed(missing), strict=True))
        return np.stack([self.vector(t) for t in texts])


def unit(v: Any) -> Any:
    return (v / np.linalg.norm(v)).astype(np.float32)


VERBS = ("prefers", "dislikes", "asked about", "booked", "cancelled")
SUBJECTS = (
    "window seats",
    "vegetarian meals",
    "late checkout",
    "quiet rooms",
    "rental cars",
    "museum tickets",
)
PEOPLE = ("Ada Moreau", "Ivan Reyes", "Greta Zeller", "Tom", "Lena Park", "Omar")
SLOTS = (
    ("lives in", ("Lisbon", "Berlin", "Oslo", "Madrid")),
    ("works at", ("Acme", "Initech", "Globex", "Umbrella")),
    ("drives a", ("Volvo", "Tesla", "bike", "Fiat")),
    ("likes", ("tea", "coffee", "jazz", "chess")),
)
SPEAKERS = ("Caroline", "Melanie", "John")
TOPICS = ("pottery", "the marathon", "her new job", "the camping trip", "adoption", "painting")


def dataset(
    book: Book, rng: np.random.Generator, n: int
) -> tuple[list[dict[str, Any]], list[tuple[str, str | None]]]:
    """The memories (``remember_many`` items) and the recalls' (query, thread or None)."""
    items: list[dict[str, Any]] = []
    queries: list[tuple[str, str | None]] = []
    base = int(NOW * 1000) - 400 * DAY_MS
    serial = itertools.count()

    def add(text: str, vector: Any, thread: str, days: float | None) -> None:
        book.vectors[text] = vector
        item: dict[str, Any] = {"content": text, "vector": vector, "thread_id": thread, "agent_id": "a"}
        s = next(serial)
        item["id"] = f"m{s:06d}"
        if days is not None:
            item["valid_from"] = base + int(days * DAY_MS)
        # Some memories store optional fields: their rows read another way than the plain ones
        # (``core.knn_rows``), in the same replies.
        if s % 5 == 0:
            item["importance"] = 0.2 + (s % 7) / 10
        if s % 6 == 0:
            item["tags"] = ["blue", f"g{s % 3}"]
        if s % 9 == 0:
            item["metadata"] = {"n": s % 4}
        if s % 11 == 0:
            item["ttl"] = 3600 * (1 + s % 5)
        if s % 13 == 0:
            item["sensitivity"] = "low"
        items.append(item)

    # synthetic: profile_store's texts
    for i in range(n):
        add(f"memory {i}: the user prefers window seats and vegetarian meals on long flights",
            unit(rng.standard_normal(DIM)), f"t{i % 20}", float(rng.integers(0, 300)) if i % 3 else None)  # fmt: skip
    for _ in range(n // 10):
        q = f"query {next(serial)}: which seats and meals does the user prefer on flights?"
        book.vectors[q] = unit(
            book.vectors[items[int(rng.integers(0, n))]["content"]] + rng.standard_normal(DIM) / 20
        )
        queries.append((q, f"t{int(rng.integers(0, 20))}" if rng.random() < 0.5 else None))
    # topics: bench_compare's texts
    centroids = rng.standard_normal((len(VERBS) * len(SUBJECTS), DIM)).astype(np.float32)
    for i in range(n):
        t = int(rng.integers(0, len(centroids)))
        add(f"memory t{i}: the user {VERBS[t % len(VERBS)]} {SUBJECTS[t // len(VERBS)]}",
            unit(centroids[t] + rng.standard_normal(DIM) * 0.8), f"t{i % 20}", float(rng.integers(0, 300)))  # fmt: skip
    for _ in range(n // 10):
        t = int(rng.integers(0, len(centroids)))
        q = f"question {next(serial)}: what does the user think of {SUBJECTS[t // len(VERBS)]}?"
        book.vectors[q] = unit(centroids[t] + rng.standard_normal(DIM) * 0.8)
        queries.append((q, f"t{int(rng.integers(0, 20))}" if rng.random() < 0.5 else None))
    # people: versions of slots with dates
    person = {p: rng.standard_normal(DIM) for p in PEOPLE}
    slot = {s: rng.standard_normal(DIM) for s, _ in SLOTS}
    for p in PEOPLE:
        for s, values in SLOTS:
            for v, value in enumerate(values):
                text = f"{p} {s} {value}." if v == 0 else f"{p} now {s} {value}."
                add(text, unit(person[p] + slot[s] + rng.standard_normal(DIM) * 0.5), "people",
                    float(rng.integers(0, 350)))  # fmt: skip
        for s, _ in SLOTS:
            q = f"What is it that {p} {s}?"
            book.vectors[q] = unit(person[p] + slot[s] + rng.standard_normal(DIM) * 0.5)
            queries += [(q, None), (q, "people")]
    # turns: conversations in threads, a session a day
    for c in range(4):
        for i in range(n // 4):
            who, topic = SPEAKERS[i % len(SPEAKERS)], TOPICS[int(rng.integers(0, len(TOPICS)))]
            add(f"{who}: we talked about {topic} again, turn {i} of chat {c}", unit(rng.standard_normal(DIM)),
                f"chat{c}", float(i // 8))  # fmt: skip
    for _ in range(n // 10):
        who, topic, c = (
            SPEAKERS[int(rng.integers(0, 3))],
            TOPICS[int(rng.integers(0, len(TOPICS)))],
            int(rng.integers(0, 4)),
        )
        q = (
            f"What did {who} say about {topic} in June?"
            if rng.random() < 0.2
            else f"What did {who} say about {topic}?"
        )
        book.vectors[q] = unit(rng.standard_normal(DIM))
        queries.append((q, f"chat{c}" if rng.random() < 0.5 else None))
    return items, queries


# Recalls' filters: ``where`` (read through the exact check), tags, the sensitivity exclusion.
FILTERS: tuple[dict[str, Any], ...] = (
    {"where": {"importance": {"$gte": 0.4}}},
    {"tags": ["blue"]},
    {"exclude_sensitivity": ["low"]},
    {"where": {"tags": {"$nin": ["g1"]}}},
)


def fixed_clock(pkg: str) -> None:
    """The composite score's clock (``time.time`` in the recall module) fixed at ``NOW``."""
    mod = importlib.import_module(f"{pkg}.tiers.recall")
    mod.time = types.SimpleNamespace(time=lambda: NOW, perf_counter=time.perf_counter)  # type: ignore[attr-defined]


def fixed_write_clock(pkg: str, at: float) -> None:
    """A single write's clock (``time.time`` in the single-write module) fixed at ``at``
    (the run's start: a TTL counted from ``NOW``, months ago, would have expired)."""
    mod = importlib.import_module(f"{pkg}.tiers.single_write")
    mod.time = types.SimpleNamespace(time=lambda: at)  # type: ignore[attr-defined]


async def sent_by(client: Any, call: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    """``call()``'s result and the commands it sent on ``client`` (one call at a time), in order."""
    sent: list[tuple[Any, ...]] = []
    real_command, real_pipeline = client.execute_command, client.pipeline

    async def command(*args: Any, **options: Any) -> Any:
        if not is_background([args], False):  # a stats flush, a live-config read: not the write's
            sent.append(args)
        return await real_command(*args, **options)

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = real_pipeline(*args, **kwargs)
        execute = pipe.execute

        async def recorded(*a: Any, **k: Any) -> Any:
            commands = [tuple(c) for c, _ in pipe.command_stack]
            if not is_background(commands, True):
                sent.extend(commands)
            return await execute(*a, **k)

        pipe.execute = recorded
        return pipe

    client.execute_command, client.pipeline = command, pipeline
    try:
        return await call(), sent
    finally:
        del client.execute_command
        del client.pipeline


def without_id(commands: list[tuple[Any, ...]], mid: str) -> list[tuple[Any, ...]]:
    """The commands of ``commands`` on the new memory's key, its random id replaced by a placeholder.

    Other commands sent meanwhile are the stores' background work (a reinforcement flush's
    ``HMGET``, a stats flush, a live-config read), on either side as its timers fall.
    """

    def plain(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(mid, "<id>")
        if isinstance(value, bytes):
            return value.replace(mid.encode(), b"<id>")
        return value

    return [tuple(plain(v) for v in c) for c in commands if len(c) > 1 and mid in str(c[1])]


async def compare_writes(
    client: Any, stores: Sequence[Any], items: Sequence[dict[str, Any]]
) -> tuple[int, list[str]]:
    """Each item written by ``remember`` through each version: the same commands, the same item read back."""
    differ: list[str] = []
    for i, item in enumerate(items):
        got = []
        for store in stores:
            mid, sent = await sent_by(client, functools.partial(store.remember, **item))
            back = await store.get(mid)
            fields = tuple(kv for kv in item_fields(back) if kv[0] != "id")
            got.append((without_id(sent, mid), fields))
        if got[0] != got[1]:
            differ.append(f"write {i}: {item['content'][:40]!r}")
            if len(differ) <= 3:  # the commands' names and the items (a vector is 1.5 kB)
                names = [[c[0] for c in g[0]] for g in got]
                print(f"DIFFER: {differ[-1]}\n  old {names[0]} {got[0][1]}\n  new {names[1]} {got[1][1]}")
    return len(items), differ


def item_fields(item: Any) -> tuple[Any, ...]:
    """Every field of a hit's item, by name (the two versions' ``MemoryItem`` are two classes)."""
    return tuple((f.name, getattr(item, f.name)) for f in dataclasses.fields(item))


def summary(hits: Sequence[Any]) -> list[tuple[Any, ...]]:
    out = []
    for h in hits:
        ex = h.explain
        parts = None
        if ex is not None:
            parts = (
                ex.similarity,
                ex.recency,
                ex.importance,
                ex.score,
                ex.superseded_by,
                ex.degraded,
                ex.time_window,
            )
        out.append((h.item.id, h.score, h.similarity, h.distance, item_fields(h.item), parts))
    return out


def same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]], tol: float) -> bool:
    if [x[0] for x in a] != [x[0] for x in b]:
        return False
    for x, y in zip(a, b, strict=True):
        if any(not math.isclose(p, q, rel_tol=0.0, abs_tol=tol) for p, q in zip(x[1:4], y[1:4], strict=True)):
            return False
        if x[4] != y[4]:  # the items, field by field
            return False
        if (x[5] is None) != (y[5] is None):
            return False
        if x[5] is not None:
            nums = [(p, q) for p, q in zip(x[5][:4], y[5][:4], strict=True)]
            if any(not math.isclose(p, q, rel_tol=0.0, abs_tol=tol) for p, q in nums) or x[5][4:] != y[5][4:]:
                return False
    return True


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--against", metavar="DIR", required=True, help="a checkout holding the other betterdb_memory"
    )
    parser.add_argument("--n", type=int, default=600, help="memories per family (default 600)")
    parser.add_argument("--tolerance", type=float, default=1e-12)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--writes", type=int, default=200, help="single writes compared (default 200)")
    parser.add_argument(
        "--onnx", action="store_true",
        help="embed every text with the shipped MiniLM (its model id: LearnedRanker by default, the slot model)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    from betterdb_memory.server import EmbeddedServer

    pkgs = [load_against(args.against), "betterdb_memory"]
    started = time.time()
    for p in pkgs:
        fixed_clock(p)
        fixed_write_clock(p, started)
    model = None
    if args.onnx:
        from betterdb_memory.embedders.onnx import OnnxEmbedder

        model = OnnxEmbedder()
    book = Book(model)
    rng = np.random.default_rng(args.seed)
    items, queries = dataset(book, rng, args.n)
    if model is not None:  # the real vectors of every text, in place of the family's made-up ones
        texts = [it["content"] for it in items] + [q for q, _ in queries]
        book.vectors.clear()
        await book.embed(texts)
        for it in items:
            it["vector"] = book.vectors[it["content"]]
    server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    client = avalkey.Valkey.from_url(server.url)
    try:
        stores: dict[tuple[str, str], Any] = {}
        for p in pkgs:
            store_mod = importlib.import_module(f"{p}.store")
            learned = importlib.import_module(f"{p}.core.learned_rank").LearnedRanker
            hybrid = importlib.import_module(f"{p}.core.ranking").HybridRanker
            for label, reranker in (("hybrid", hybrid()), ("learned", learned()), ("dense", False)):
                options: dict[str, Any] = {"reranker": reranker}
                stores[(p, label)] = store_mod.MemoryStore(
                    client=client, name="ab", embedder=book, default_threshold=2.0,
                    registry=CollectorRegistry(), **options,
                )  # fmt: skip
        first = stores[(pkgs[-1], "hybrid")]
        await first.ensure_index()
        for i in range(0, len(items), 500):
            await first.remember_many(items[i : i + 500])
        calls = 0
        differ: list[str] = []
        kinds: dict[str, int] = {}
        for qi, (query, thread) in enumerate(queries):
            for label in ("hybrid", "learned", "dense"):
                for k, explain, by_vector, more in (
                    (10, qi % 2 == 0, False, {}),
                    (1 + qi % 20, qi % 3 == 0, qi % 4 == 0, {}),
                    (
                        10,
                        qi % 3 == 1,
                        qi % 2 == 0,
                        FILTERS[qi % len(FILTERS)],
                    ),  # an exact check, a tag filter
                ):
                    got = []
                    for p in pkgs:
                        store = stores[(p, label)]
                        options = {
                            "k": k,
                            "thread_id": thread,
                            "explain": explain,
                            "reinforce": False,
                            **more,
                        }
                        if by_vector:
                            hits = await store.recall_by_vector(
                                book.vector(query), query=query if qi % 8 else None, **options
                            )
                        else:
                            hits = await store.recall(query, **options)
                        got.append(summary(hits))
                    calls += 1
                    kinds[label] = kinds.get(label, 0) + 1
                    if not same(got[0], got[1], args.tolerance):
                        differ.append(
                            f"{label} k={k} explain={explain} vector={by_vector} {query!r} {thread}"
                        )
                        if len(differ) <= 5:
                            print(f"DIFFER: {differ[-1]}\n  old {got[0][:3]}\n  new {got[1][:3]}")
        superseded = 0
        for (p, label), store in stores.items():
            if p == pkgs[-1] and label != "dense":
                for query, thread in [q for q in queries if q[0].startswith("What is it that")]:
                    hits = await store.recall(query, k=20, thread_id=thread, explain=True, reinforce=False)
                    superseded += sum(1 for h in hits if h.explain and h.explain.superseded_by)
        print(
            f"{calls} recalls compared ({', '.join(f'{k} {v}' for k, v in kinds.items())}; "
            f"{len(items)} memories, {len(queries)} queries); {len(differ)} differ; "
            f"superseded hits seen in a sample: {superseded}"
        )
        # Single writes (``remember``), the store's defaults: the same commands and the same items.
        # No id (a caller's id is an upsert: the batch path), a new text (no twin of a memory there).
        sample = [
            {k: v for k, v in it.items() if k != "id"} for it in items[:: max(1, len(items) // args.writes)]
        ]
        for it in sample:
            it["content"] = "written again: " + it["content"]
        written, write_differ = await compare_writes(client, [stores[(p, "dense")] for p in pkgs], sample)
        print(f"{written} single writes compared (commands sent, item read back); {len(write_differ)} differ")
        for s in stores.values():
            await s.close()
        return 1 if differ or write_differ else 0
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(sys.argv[1:])))
