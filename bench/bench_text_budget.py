"""RediSearch's full-text query of a hybrid recall as the store grows: what it touches, and what a budget saves.

On RediSearch the text side of a hybrid recall is one BM25-scored ``FT.SEARCH`` of the
question's words (``core.text_query``), whose words hold at most a postings budget of
memories between them (``core.frequencies``). Its cost is the documents it reads: the
union's counter in ``FT.PROFILE`` unscoped; scoped, each word's branch intersects the
scope's tag with the word and walks the shorter of the two (the leaves' counters).

On ``bench_1m.py``'s Zipf corpus (seeded random vectors, Zipf-worded sentences, 1,000
thread scopes; a question: four words of a stored memory, its vector nudged), per size:

1. **Touched** per budget (and with the words capped at 3): words searched, the union's
   and the leaves' FT.PROFILE counters (p50 / max over 60 questions), and the text
   query's p50 alone. Deterministic but for the p50.
2. **Recall** p50 per variant, interleaved round by round with the raw KNN 50 it starts
   from (reinforcement off, and the default with it on): the shipped text side; none
   (``text_candidates=0``); other budgets.

    .venv/bin/python bench/bench_text_budget.py --sizes 10k,100k
    .venv/bin/python bench/bench_text_budget.py --url valkey://127.0.0.1:6390 --reuse z10k=10k,z100k=100k

``--reuse NAME=SIZE,...`` measures stores already holding the corpus's first SIZE memories
(populated by this script or ``bench_1m.py``'s corpus) instead of populating. Say the
machine's load next to any figure (printed per table).
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))  # this checkout's library

from bench_1m import DIM, THREADS, Book, Corpus  # noqa: E402

from betterdb_memory import MemoryStore  # noqa: E402
from betterdb_memory.core.codec import encode_vector  # noqa: E402
from betterdb_memory.core.keys import Scope  # noqa: E402
from betterdb_memory.core.query import MemoryFilter, knn_search_args  # noqa: E402
from betterdb_memory.core.ranking import query_words  # noqa: E402
from betterdb_memory.core.text_query import text_search_args  # noqa: E402
from betterdb_memory.tiers.recall import _RANKING_FIELDS  # noqa: E402

Query = tuple[str, Any, str]  # text, vector, thread
TOUCHED = [(5000, None), (2000, None), (1000, None), (500, None), (5000, 3), (2000, 3)]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def p50(xs: Sequence[float]) -> float:
    return statistics.median(xs) * 1e3 if xs else float("nan")


def profile_counters(reply: Any) -> tuple[int, int]:
    """FT.PROFILE's iterator tree: (the root's counter, the sum of the TEXT / TAG leaves' counters)."""
    nodes: list[dict[Any, Any]] = []

    def walk(node: Any) -> None:
        if not isinstance(node, list):
            return
        if len(node) >= 2 and node[0] in (b"Type", "Type"):
            d: dict[Any, Any] = {}
            i = 0
            while i + 1 < len(node) and not isinstance(node[i], list):
                if node[i] in (b"Child iterators", "Child iterators"):
                    break
                d[node[i].decode() if isinstance(node[i], bytes) else node[i]] = node[i + 1]
                i += 2
            nodes.append(d)
        for x in node:
            walk(x)

    walk(reply[1])
    kinds = [
        (str(d.get("Type", b"").decode() if isinstance(d.get("Type"), bytes) else d.get("Type")), d)
        for d in nodes
    ]
    iters = [(t, d) for t, d in kinds if "Counter" in d and t not in ("Index", "Scorer", "Sorter", "Loader")]
    root = int(iters[0][1]["Counter"]) if iters else 0
    leaves = sum(int(d["Counter"]) for t, d in iters if t in ("TEXT", "TAG"))
    return root, leaves


def questions(corpus: Corpus, book: Book, size: int) -> list[Query]:
    rng = np.random.default_rng(size)
    out: list[Query] = []
    for j, t in enumerate(rng.integers(0, size, size=60)):
        v, texts = corpus.batch(int(t), 1)
        near = v[0] + rng.standard_normal(DIM).astype(np.float32) / np.float32(np.sqrt(DIM))
        near /= np.linalg.norm(near)
        text = f"q{size}-{j} " + " ".join(texts[0].split()[2:6])
        book.queries[text] = near
        out.append((text, near, f"t{int(t) % THREADS}"))
    return out


def scope(thread: str | None) -> MemoryFilter:
    return MemoryFilter(scope=Scope.of(thread_id=thread)) if thread else MemoryFilter()


async def touched(client: Any, store: MemoryStore, qs: Sequence[Query], size: int) -> list[str]:
    side = store._recall._text
    freq = side._frequencies
    rows = []
    for scoped in (False, True):
        for budget, cap in TOUCHED:
            roots, leaves, times, words = [], [], [], []
            for text, _, thread in qs:
                flt = scope(thread if scoped else None)
                plan = freq.plan(
                    query_words(text), time.monotonic(), pool=50, max_words=cap, postings_budget=budget
                )
                words.append(len(plan.words))
                if not plan.words:
                    roots.append(0), leaves.append(0), times.append(0.0)
                    continue
                [args] = text_search_args(
                    store.keys.index, plan.words, flt, layout=store.layout, per_word=False,
                    return_fields=_RANKING_FIELDS,
                )  # fmt: skip
                root, leaf = profile_counters(
                    await client.execute_command("FT.PROFILE", args[1], "SEARCH", "QUERY", *args[2:])
                )
                roots.append(root), leaves.append(leaf)
                t0 = time.perf_counter()
                await client.execute_command(*args)
                times.append(time.perf_counter() - t0)
            rows.append(
                f"| {size:,} | {'one thread' if scoped else 'unscoped'} | {budget:,} | {cap or '-'} "
                f"| {statistics.mean(words):.1f} | {statistics.median(roots):.0f} / {max(roots)} "
                f"| {statistics.median(leaves):.0f} / {max(leaves)} | {p50(times):.2f} | {os.getloadavg()[0]:.1f} |"
            )
            log(rows[-1])
    return rows


def recall_ops(
    client: Any, stores: dict[str, MemoryStore], qs: Sequence[Query], scoped: bool
) -> dict[str, Callable[[int], Awaitable[Any]]]:
    """The raw KNN 50 and each variant's recall of question ``i`` (modulo), scoped or not."""
    first = stores["shipped"]
    raws = [
        knn_search_args(first.keys.index, encode_vector(v), k=50, flt=scope(t if scoped else None),
                        layout=first.layout, return_fields=_RANKING_FIELDS)
        for _, v, t in qs
    ]  # fmt: skip

    def op(st: MemoryStore, reinforce: bool = False) -> Callable[[int], Awaitable[Any]]:
        def run(i: int) -> Awaitable[Any]:
            text, _, thread = qs[i % len(qs)]
            return st.recall(text, k=10, thread_id=thread if scoped else None, reinforce=reinforce)

        return run

    ops: dict[str, Callable[[int], Awaitable[Any]]] = {
        "raw KNN 50": lambda i: client.execute_command(*raws[i % len(raws)]),
        "shipped, reinforce on": op(first, True),
    }
    ops.update({label: op(st) for label, st in stores.items()})
    return ops


async def recalls(
    client: Any, name: str, book: Book, qs: Sequence[Query], size: int, rounds: int
) -> list[str]:
    variants: dict[str, dict[str, Any]] = {"shipped": {}, "no text side": {"text_candidates": 0}}
    variants["text query even for a scope read whole"] = {"always": True}
    variants.update({f"budget {b:,}": {"budget": b} for b in (5000, 2000, 1000)})
    stores: dict[str, MemoryStore] = {}
    for label, opts in variants.items():
        st = MemoryStore(client=client, name=name, embedder=book, default_threshold=2.0,
                         text_candidates=opts.get("text_candidates", 50))  # fmt: skip
        if "budget" in opts:
            st._recall._text.scored_budget = opts["budget"]
        if opts.get("always"):  # the text side before ``ScopesReadWhole``
            st._recall._text._whole.capacity = 0
        stores[label] = st
    for st in stores.values():  # every question's words counted: the steady state
        for text, _, thread in qs:
            await st.recall(text, k=10, reinforce=False)
            await st.recall(text, k=10, thread_id=thread, reinforce=False)
        await st._recall._text.settled()
    rows = []
    for scoped in (False, True):
        ops = recall_ops(client, stores, qs, scoped)
        names = list(ops)
        lat: dict[str, list[float]] = {n: [] for n in names}
        for i in range(rounds):
            for n in names[i % len(names) :] + names[: i % len(names)]:
                t0 = time.perf_counter()
                await ops[n](i)
                lat[n].append(time.perf_counter() - t0)
        raw = p50(lat["raw KNN 50"])
        for n in names:
            rows.append(
                f"| {size:,} | {'one thread' if scoped else 'unscoped'} | {n} | {p50(lat[n]):.2f} "
                f"| {p50(lat[n]) / raw:.2f}x | {os.getloadavg()[0]:.1f} |"
            )
            log(rows[-1])
    for st in stores.values():
        await st.close()
    return rows


def parse_size(text: str) -> int:
    return int(float(text.lower().replace("k", "e3").replace("m", "e6")))


async def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--url", default=None, help="a server (default: an embedded one started here)")
    ap.add_argument("--reuse", default=None, help="NAME=SIZE,... stores already populated")
    ap.add_argument("--rounds", type=int, default=120)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import valkey.asyncio as avalkey

    server = None
    url = args.url
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = EmbeddedServer(persistence=False)
        server.start()
        url = server.url
    client: Any = avalkey.Valkey.from_url(url, socket_timeout=300)
    corpus, book = Corpus(), Book()
    plan = (
        [(n, parse_size(s)) for n, s in (p.split("=") for p in args.reuse.split(","))]
        if args.reuse
        else [("textbudget", parse_size(s)) for s in args.sizes.split(",")]
    )
    lines = [
        f"# bench_text_budget.py {' '.join(argv)}",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
    ]
    touched_rows: list[str] = []
    recall_rows: list[str] = []
    try:
        for name, size in plan:
            store = MemoryStore(client=client, name=name, embedder=book, default_threshold=2.0)
            await store.ensure_index()
            have = await store.count()
            while have < size:
                n = min(1000, size - have)
                await store.remember_many(corpus.items(have, n))
                have += n
            await store.index.ensure_ready()
            qs = questions(corpus, book, size)
            for text, _, _ in qs:  # count every question's words (the steady state)
                await store.recall(text, k=10, reinforce=False)
            await store._recall._text.settled()
            touched_rows += await touched(client, store, qs, size)
            await store.close()
            recall_rows += await recalls(client, name, book, qs, size, args.rounds)
    finally:
        await client.aclose()
        if server is not None:
            server.stop()
    lines += [
        "",
        "## The text query alone: documents touched (FT.PROFILE counters, p50 / max of 60 questions)",
        "",
        "| memories | recall | budget | words cap | words searched | union | leaves | text query p50 ms | load |",
        "|---|---|---|---|---|---|---|---|---|",
        *touched_rows,
        "",
        "## Recall p50 (reinforcement off unless said), interleaved with the raw KNN 50",
        "",
        "| memories | recall | variant | p50 ms | ÷ raw KNN 50 | load |",
        "|---|---|---|---|---|---|",
        *recall_rows,
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
