"""What the hybrid's background word counts cost as the store grows (issue 29, bench-1m's unscoped row).

The full-text side of a default recall chooses its words by their document counts
(``core.frequencies``), taken off the recall's path by ``FT.SEARCH <index> @content:<word>
LIMIT 0 0`` and one count of the whole index, and retaken when older than their time to
live. A count walks the word's postings: on a large store a common word's count costs the
single-threaded engine as much as a search of it, and a recall that arrives meanwhile waits.

On a store populated with ``bench_1m.py``'s corpus (``--url`` of a server holding it,
``--name``), with ``bench_1m.py``'s questions (four words of a stored memory, its vector
nudged), this prints:

1. what one count costs: the server time (``FT.PROFILE``) and wall time of counting the
   questions' words, by how many memories hold them, and of counting the whole index;
2. the default unscoped recall (reinforcement off, and on with every hit a first access; the
   bench's 3 warm-ups then 60 timed) with every count fresh, and with every count ``--age``
   seconds old (as ``bench_1m.py`` meets them: its populating outlasts their time to live):
   recounted as before (one 30 s time to live, no pace), with the time to live in proportion
   to the count, and with that and the recounts' pace (the shipped code); with the FT.SEARCH
   calls per recall (``INFO commandstats``: its KNN, its text query, the counts it set off);
3. FT.PROFILE of the recalls' text query (the union's counter: documents read and scored).

    .venv/bin/python bench/bench_word_counts.py --url valkey://127.0.0.1:PORT --name bench1m --size 500k
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

from bench_1m import DIM, THREADS, Book, Corpus  # noqa: E402
from bench_text_budget import profile_counters  # noqa: E402

from betterdb_memory import MemoryStore  # noqa: E402
from betterdb_memory.core.frequencies import RecountPace, word_count_args  # noqa: E402
from betterdb_memory.core.query import MemoryFilter, filter_search_args  # noqa: E402
from betterdb_memory.core.ranking import query_words  # noqa: E402
from betterdb_memory.core.text_query import text_search_args  # noqa: E402
from betterdb_memory.tiers.recall import _RANKING_FIELDS  # noqa: E402

SAMPLES = 60


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def questions(corpus: Corpus, book: Book, size: int, seed: int | None = None) -> list[str]:
    """``bench_1m.run_step``'s unscoped questions for a store of ``size`` (its own with ``seed=size``)."""
    rng = np.random.default_rng(size if seed is None else seed)
    targets = rng.integers(0, size, size=SAMPLES + 10)
    out = []
    for j, t in enumerate(targets):
        vec, content = corpus.one(int(t))
        near = vec + rng.standard_normal(DIM).astype(np.float32) / np.float32(np.sqrt(DIM))
        near /= np.linalg.norm(near)
        text = f"q{size if seed is None else seed}-t{int(t) % THREADS}-{j} " + " ".join(content.split()[2:6])
        book.queries[text] = near
        rng.standard_normal(DIM)  # the fixed-thread question bench_1m draws next
        out.append(text)
    return out


def profile_ms(reply: Any) -> float:
    """FT.PROFILE's "Total profile time" (ms)."""

    def walk(node: Any) -> float | None:
        if isinstance(node, list):
            for i, x in enumerate(node):
                if x in (b"Total profile time", "Total profile time") and i + 1 < len(node):
                    return float(node[i + 1])
                found = walk(x)
                if found is not None:
                    return found
        return None

    found = walk(reply[1])
    return float("nan") if found is None else found


async def search_calls(client: Any) -> int:
    stats = await client.info("commandstats")
    entry = stats.get("cmdstat_FT.SEARCH") or stats.get("cmdstat_ft.search") or {}
    return int(entry.get("calls", 0))


async def recalls(
    client: Any, store: MemoryStore, qs: Sequence[str], reinforce: bool
) -> tuple[float, float, float]:
    """bench_1m's measure: 3 warm-ups, 60 timed; (p50 ms, p99 ms, FT.SEARCH calls per recall)."""
    for i in range(3):
        await store.recall(qs[SAMPLES + i], k=10, reinforce=reinforce)
    before = await search_calls(client)
    lat = []
    for text in qs[:SAMPLES]:
        t0 = time.perf_counter()
        await store.recall(text, k=10, reinforce=reinforce)
        lat.append(time.perf_counter() - t0)
    await store._recall._text.settled()
    sent = await search_calls(client) - before
    return statistics.median(lat) * 1e3, float(np.percentile(lat, 99)) * 1e3, sent / SAMPLES


def age_counts(store: MemoryStore, seconds: float) -> None:
    """Make every learned count ``seconds`` older (bench_1m's populating between two steps)."""
    freq = store._recall._text._frequencies
    for word, (n, at) in list(freq._words.items()):
        freq._words[word] = (n, at - seconds)
    if freq._total is not None:
        freq._total = (freq._total[0], freq._total[1] - seconds)


async def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--name", default="bench1m")
    ap.add_argument("--size", default="500k", help="the questions' size (bench_1m's step)")
    ap.add_argument("--age", type=float, default=600.0, help="seconds between two bench_1m steps")
    args = ap.parse_args(argv)
    size = int(float(args.size.lower().replace("k", "e3").replace("m", "e6")))
    import valkey.asyncio as avalkey

    client: Any = avalkey.Valkey.from_url(args.url, socket_timeout=300)
    book, corpus = Book(), Corpus()
    qs = questions(corpus, book, size)
    store = MemoryStore(client=client, name=args.name, embedder=book, default_threshold=2.0)
    await store.ensure_index()
    await store.index.ensure_ready()
    index = store.keys.index
    total = await store.count()
    log(f"{total:,} memories in {index}")
    out = [
        f"# bench_word_counts.py {' '.join(argv)}",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {total:,} memories",
        "",
    ]

    # 1. One count's cost, by the word's postings.
    words = sorted({w for q in qs for w in query_words(q)})
    rows = []
    for w in words:
        args_ = word_count_args(index, w)
        n = int((await client.execute_command(*args_))[0])
        prof = profile_ms(await client.execute_command("FT.PROFILE", index, "SEARCH", "QUERY", *args_[2:]))
        t0 = time.perf_counter()
        await client.execute_command(*args_)
        rows.append((n, prof, (time.perf_counter() - t0) * 1e3, w))
    rows.sort()
    out += ["## 1. One count (FT.SEARCH @content:<word> LIMIT 0 0)", "",
            "| memories holding the word | words | server ms (FT.PROFILE, median) | wall ms (median) |",
            "|---|---|---|---|"]  # fmt: skip
    for lo, hi in ((0, 100), (100, 2000), (2000, 20000), (20000, 100_000), (100_000, 10**9)):
        sel = [r for r in rows if lo <= r[0] < hi]
        if sel:
            out.append(
                f"| {lo:,}-{hi:,} | {len(sel)} | {statistics.median(r[1] for r in sel):.2f} "
                f"| {statistics.median(r[2] for r in sel):.2f} |"
            )
    whole = filter_search_args(index, MemoryFilter(), layout=store.layout, limit=0)
    prof = profile_ms(await client.execute_command("FT.PROFILE", index, "SEARCH", "QUERY", *whole[2:]))
    t0 = time.perf_counter()
    await client.execute_command(*whole)
    out.append(f"| the whole index ({total:,}) | 1 | {prof:.2f} | {(time.perf_counter() - t0) * 1e3:.2f} |")
    counted = sum(r[1] for r in rows)
    out += [
        "",
        f"Counting every one of the questions' {len(rows)} distinct words once: {counted:.0f} ms of server time.",
        "",
    ]
    log("\n".join(out[-12:]))

    # 2. Default recall with the counts fresh, and aged as bench_1m ages them, before and now.
    freq = store._recall._text._frequencies
    refresher = store._recall._text._refresher
    scale, inf = freq.recount_scale, float("inf")
    out += ["## 2. Default recall, unscoped (3 warm-ups, 60 timed; each row its own questions)", "",
            "| reinforcement | word counts | p50 ms | p99 ms | FT.SEARCH calls per recall (KNN, text query, the counts it set off) |",
            "|---|---|---|---|---|"]  # fmt: skip
    seed = size
    for reinforce in (False, True):
        for label, age, recount_scale, paced in (
            ("fresh", 0.0, scale, True),
            (
                f"{args.age:.0f} s old, one {freq.ttl:.0f} s time to live, no pace (before)",
                args.age,
                inf,
                False,
            ),
            (
                f"{args.age:.0f} s old, time to live in proportion to the count, no pace",
                args.age,
                scale,
                False,
            ),
            (f"{args.age:.0f} s old, in proportion and paced (now)", args.age, scale, True),
        ):
            seed += 1
            asked = questions(corpus, book, size, seed=seed)
            freq._words.clear()  # every count learned now, then aged by ``age`` at once
            freq._total = None
            for text in asked:  # every word counted; no reinforcement, so each hit is still a first access
                await store.recall(text, k=10, reinforce=False)
            await store._recall._text.settled()
            freq.recount_scale = recount_scale
            refresher._pace = RecountPace() if paced else RecountPace(rate=inf, burst=inf)
            age_counts(store, age)
            p50, p99, calls = await recalls(client, store, asked, reinforce)
            freq.recount_scale = scale
            refresher._pace = RecountPace()
            out.append(
                f"| {'on (first access)' if reinforce else 'off'} | {label} | {p50:.2f} | {p99:.2f} | {calls:.2f} |"
            )
            log(out[-1])
    out.append("")

    # 3. The text query itself.
    roots, times = [], []
    for text in qs[:SAMPLES]:
        await store.recall(text, k=10, reinforce=False)
    await store._recall._text.settled()
    for text in qs[:SAMPLES]:
        plan = freq.plan(
            query_words(text), time.monotonic(), pool=50, postings_budget=store._recall._text.scored_budget
        )
        if not plan.words:
            continue
        [targs] = text_search_args(index, plan.words, MemoryFilter(), layout=store.layout, per_word=False,
                                   return_fields=_RANKING_FIELDS)  # fmt: skip
        reply = await client.execute_command("FT.PROFILE", index, "SEARCH", "QUERY", *targs[2:])
        roots.append(profile_counters(reply)[0])
        times.append(profile_ms(reply))
    out += ["## 3. The recalls' text query (FT.PROFILE)", "",
            f"{len(roots)} of {SAMPLES} questions send one; documents read and scored p50 {statistics.median(roots):.0f}, "
            f"max {max(roots)}; server time p50 {statistics.median(times):.2f} ms, max {max(times):.2f} ms."]  # fmt: skip
    await store.close()
    await client.aclose()
    text = "\n".join(out) + "\n"
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
