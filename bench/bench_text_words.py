"""The per-word text queries of a hybrid recall on real text: where the time goes, and what a words cap trades.

valkey-search 1.2 has no scored multi-word OR, so a hybrid recall's full-text side
sends one ``FT.SEARCH @content:<word>`` per word of the question (``tiers.hybrid``)
and ranks their union itself. LoCoMo's questions hold several content words, and the
speakers' names are in hundreds of turns. This script stores LoCoMo's turns (packaged
ONNX embedder, vectors from the cache ``bench/quality.py`` fills, scoped to their
conversation, exactly as ``quality.py`` stores them) on one server and measures:

1. **Anatomy** (once, with the shipped plan): words per question before and after the
   document-frequency cut; per word query its round trip alone, the same query counting
   only (``LIMIT 0 0``: the engine's matching without building hits), the hits it
   returns and the client's parsing of its reply; a ``PING``'s round trip for scale.
2. **The trade** per words cap (``TextCandidates.max_words``; ``none`` = every word the
   frequency cut keeps): LoCoMo hit@5 / MRR@10 held out by conversation (the default
   recall, ``LearnedRanker`` weights fitted without the question's conversation, as
   ``quality.py``'s headline row; without ``--folds`` the shipped weights, in-sample),
   and ``recall_by_vector(query=...)`` p50 against the raw KNN 50 it starts from,
   interleaved round by round, scoped and unscoped (reinforcement off: this compares the
   text side; ``bench_store.py --locomo`` measures the defaults).

    PYTHONPATH=. .venv/bin/python bench/bench_text_words.py --url valkey://127.0.0.1:PORT
    PYTHONPATH=. .venv/bin/python bench/bench_text_words.py            # the embedded engine

The run FLUSHALLs a ``--url`` server. LoCoMo (CC BY-NC 4.0) is read in place; vectors stay
outside the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import valkey.asyncio as avalkey

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import quality  # noqa: E402  (the LoCoMo loader, cache and stores of bench/quality.py)

from betterdb_memory import MemoryStore, Scope  # noqa: E402
from betterdb_memory.core.codec import encode_vector  # noqa: E402
from betterdb_memory.core.frequencies import word_count_args  # noqa: E402
from betterdb_memory.core.query import MemoryFilter, filter_search_args, knn_search_args  # noqa: E402
from betterdb_memory.core.ranking import query_words  # noqa: E402
from betterdb_memory.core.replies import parse_search_reply  # noqa: E402
from betterdb_memory.core.time_recall import time_plan  # noqa: E402
from betterdb_memory.server import EmbeddedServer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
K = 10
POOL = 50


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def rtt(client: Any, args: Sequence[Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    reply = await client.execute_command(*args)
    return time.perf_counter() - t0, reply


def set_cap(stores: Sequence[MemoryStore], cap: int | None) -> None:
    for s in stores:
        s._recall._text.max_words = cap  # the bench's knob; None: no cap


async def warm_counts(stores: Sequence[MemoryStore], questions: Sequence[Any], qvecs: Any) -> None:
    """One recall per question and store: every word counted (the probes ride with those recalls)."""
    for s in stores:
        for qi, q in enumerate(questions[:: max(1, len(questions) // 300)]):
            await s.recall_by_vector(qvecs[qi], query=q.text, k=K, thread_id=q.conv, reinforce=False)


async def anatomy(client: Any, store: MemoryStore, questions: Sequence[Any], sample: int) -> list[str]:
    text = store._recall._text
    index = store.keys.index
    # Count every word of every question once (what the probes learn), then plan as a warm store does.
    words_all = sorted({w for q in questions for w in query_words(q.text)})
    everything = filter_search_args(index, MemoryFilter(), layout=store.layout, limit=0)
    total = parse_search_reply(await client.execute_command(*everything), nocontent=True).total
    counts: dict[str, int] = {}
    for w in words_all:
        counts[w] = parse_search_reply(
            await client.execute_command(*word_count_args(index, w)), nocontent=True
        ).total
    now = time.monotonic()
    text._frequencies.learn(counts, total, now)
    picked = questions[:: max(1, len(questions) // sample)][:sample]
    fields = [*_ranking_fields(), "vector"]
    raw_words, kept_words, capped_words = [], [], []
    cap = text.max_words
    capped: dict[str, list[float]] = {"scoped": [], "unscoped": []}
    per_word: dict[str, list[float]] = {"rtt": [], "count_rtt": [], "hits": [], "parse": [], "bytes": []}
    by_count: list[tuple[int, float]] = []
    ping = []
    whole: dict[str, list[float]] = {"scoped": [], "unscoped": []}
    for q in picked:
        words = query_words(q.text)
        raw_words.append(len(words))
        for scoped in (True, False):
            flt = MemoryFilter(scope=Scope(thread_id=q.conv)) if scoped else MemoryFilter()
            text.max_words = None  # every word the frequency cut keeps (the plan before the cap)
            request = text.request(q.text, flt, fields, pool=POOL)
            text.max_words = cap
            chosen = text.request(q.text, flt, fields, pool=POOL)
            searches = request.searches[: request.queries] if request else []
            picks = set(chosen.plan.words) if chosen else set()
            if scoped:
                kept_words.append(len(searches))
                capped_words.append(len(picks))
            t_all = t_capped = 0.0
            for args in searches:
                secs, reply = await rtt(client, args)
                t_all += secs
                t0 = time.perf_counter()
                parsed = parse_search_reply(reply)
                parse_s = time.perf_counter() - t0
                count_args = [a for a in args]
                at = count_args.index("LIMIT")
                count_args[at + 2] = "0"
                csecs, _ = await rtt(client, count_args)
                per_word["rtt"].append(secs * 1e3)
                per_word["count_rtt"].append(csecs * 1e3)
                per_word["hits"].append(len(parsed.hits))
                per_word["parse"].append(parse_s * 1e3)
                per_word["bytes"].append(
                    sum(len(v) for h in parsed.hits for v in h.fields.values() if isinstance(v, bytes | str))
                )
                word = args[2].split(":", 1)[1].split(" ", 1)[0].rstrip(")").replace("\\", "")
                by_count.append((counts.get(word, -1), secs * 1e3))
                t_capped += secs if word in picks else 0.0
            whole["scoped" if scoped else "unscoped"].append(t_all * 1e3)
            capped["scoped" if scoped else "unscoped"].append(t_capped * 1e3)
        ping.append((await rtt(client, ["PING"]))[0] * 1e3)
    lines = [
        f"## Anatomy: the per-word text queries (counts warm; words cap {cap})",
        "",
        f"{len(picked)} of the plain questions, each asked scoped (its conversation) and unscoped; index of "
        f"{total:,} memories. Times are round trips from this client, one query in flight (the recall "
        "pipelines them beside its KNN).",
        "",
        "| measure | mean | p50 | p90 | max |",
        "|---|---|---|---|---|",
    ]

    def row(name: str, vals: Sequence[float], fmt: str = "{:.2f}") -> str:
        if not vals:
            return f"| {name} | - | - | - | - |"
        return (
            f"| {name} | {fmt.format(statistics.mean(vals))} | {fmt.format(pct(vals, 50))} | "
            f"{fmt.format(pct(vals, 90))} | {fmt.format(max(vals))} |"
        )

    lines += [
        row("words per question (query_words)", raw_words, "{:.1f}"),
        row("words searched after the frequency cut (no cap)", kept_words, "{:.1f}"),
        row(f"words searched with the cap of {cap} (the rarest)", capped_words, "{:.1f}"),
        row("one word query: round trip, ms", per_word["rtt"]),
        row("the same query, LIMIT 0 0 (matching only), ms", per_word["count_rtt"]),
        row("hits per word query", per_word["hits"], "{:.0f}"),
        row("reply payload per word query, KB (fields)", [b / 1024 for b in per_word["bytes"]], "{:.0f}"),
        row("client parse of one reply (parse_search_reply), ms", per_word["parse"]),
        row("all word queries of a question, scoped, sum of round trips, ms", whole["scoped"]),
        row("all word queries of a question, unscoped, sum of round trips, ms", whole["unscoped"]),
        row(f"the same, scoped, the {cap} rarest only, ms", capped["scoped"]),
        row(f"the same, unscoped, the {cap} rarest only, ms", capped["unscoped"]),
        row("PING round trip, ms", ping),
    ]
    buckets = [(0, 0), (1, 50), (51, 200), (201, 1000), (1001, 10**9)]
    lines += [
        "",
        "Round trip of a word query by the word's count in the index:",
        "",
        "| memories holding the word | queries | p50 ms |",
        "|---|---|---|",
    ]
    for lo, hi in buckets:
        sel = [ms for n, ms in by_count if lo <= n <= hi]
        label = f"{lo}-{hi}" if hi < 10**9 else f"> {lo - 1}"
        lines.append(f"| {label} | {len(sel)} | {pct(sel, 50):.2f} |" if sel else f"| {label} | 0 | - |")
    dist = [counts[w] for w in words_all]
    lines += [
        "",
        f"Distinct question words: {len(words_all):,}; held by 0 memories: {sum(1 for n in dist if n == 0)}, "
        f"1-50: {sum(1 for n in dist if 1 <= n <= 50)}, 51-500: {sum(1 for n in dist if 51 <= n <= 500)}, "
        f"more: {sum(1 for n in dist if n > 500)}.",
        "",
    ]
    return lines


def _ranking_fields() -> list[str]:
    from betterdb_memory.tiers.recall import _RANKING_FIELDS

    return list(_RANKING_FIELDS)


async def quality_of(
    stores: dict[str, MemoryStore], questions: Sequence[Any], qvecs: Any
) -> tuple[float, float]:
    """hit@5 and MRR@10 of the default recall (reinforcement off), per conversation's store."""
    result = quality.Result("cap")
    for qi, q in enumerate(questions):
        st = stores[q.conv]
        hits = await st.recall_by_vector(qvecs[qi], query=q.text, k=K, thread_id=q.conv, reinforce=False)
        result.ranks.append(quality.first_hit(quality.dia([h.item for h in hits]), q.evidence))
    return result.hit(5), result.mrr()


async def latency(
    client: Any,
    store: MemoryStore,
    questions: Sequence[Any],
    qvecs: Any,
    *,
    scoped: bool,
    rounds: int,
    seed: int,
) -> tuple[float, float]:
    """p50 ms of ``recall_by_vector(query=)`` and of the raw KNN 50 (the library's candidate query), interleaved."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(questions), rounds + 5)
    fields = _ranking_fields()
    ours, raw = [], []
    for i, j in enumerate(picks):
        q, vec = questions[j], qvecs[j]
        thread = q.conv if scoped else None
        args = knn_search_args(
            store.keys.index, encode_vector(vec), k=POOL, flt=MemoryFilter(scope=Scope.of(thread_id=thread)),
            layout=store.layout, return_fields=fields,
        )  # fmt: skip
        order = (0, 1) if i % 2 else (1, 0)
        for side in order:
            t0 = time.perf_counter()
            if side == 0:
                await store.recall_by_vector(vec, query=q.text, k=K, thread_id=thread, reinforce=False)
            else:
                await client.execute_command(*args)
            if i >= 5:
                (ours if side == 0 else raw).append(time.perf_counter() - t0)
    return statistics.median(ours) * 1e3, statistics.median(raw) * 1e3


async def main_async(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    load0 = os.getloadavg()
    turns, questions = quality.load(args.data, args.conversations)
    from betterdb_memory.embedders import OnnxEmbedder

    embedder = OnnxEmbedder(batch_size=64)
    tvecs, _ = await quality.embed_all(embedder, [t.text for t in turns], args.embeddings_cache)
    qvecs, _ = await quality.embed_all(embedder, [q.text for q in questions], args.embeddings_cache)
    server = None if args.url else EmbeddedServer(persistence=False)
    if server is not None:
        await asyncio.to_thread(server.start)
    client = avalkey.Valkey.from_url(args.url or server.url, decode_responses=False)  # type: ignore[union-attr]
    run_id = uuid.uuid4().hex[:8]
    lines: list[str] = []
    try:
        if args.url:
            await client.flushall(asynchronous=False)
        store, populate_s = await quality.populate(client, embedder, turns, tvecs, run_id)
        await store.index.ensure_ready()
        caps = store.capabilities
        engine = f"{caps.engine} {caps.version_string}" if caps else "unknown"
        print(f"{engine}: stored {len(turns)} turns in {populate_s:.0f} s", file=sys.stderr)
        plain = [i for i, q in enumerate(questions) if time_plan(q.text).window is None]
        pq, pv = [questions[i] for i in plain], qvecs[plain]
        held = quality.held_out_stores(args.folds, client, embedder, run_id)
        per_conv: dict[str, MemoryStore] = (
            held if held and {q.conv for q in questions} <= set(held) else {q.conv: store for q in questions}
        )
        quality_label = "held out by conversation" if per_conv is held else "shipped weights, in-sample"
        all_stores = [store, *held.values()]
        lines += await anatomy(client, store, pq, args.sample)
        print("\n".join(lines), file=sys.stderr)
        caps_list = [None if c == "none" else int(c) for c in args.caps.split(",")]
        table = [
            f"## The trade: words cap vs quality vs latency ({engine})",
            "",
            f"Quality: all {len(questions):,} LoCoMo questions (categories 1-4), `recall_by_vector(vector, "
            f"query=question, k=10, thread_id=conversation)`, the default recall, LearnedRanker {quality_label}. "
            f"Latency: {args.rounds} plain questions per cell, ours and the raw KNN 50 (the library's candidate "
            "query: ranking fields) alternating, reinforcement off.",
            "",
            "| words cap | hit@5 | MRR@10 | scoped p50 ms (ours / raw) | scoped ratio | unscoped p50 ms (ours / raw) "
            "| unscoped ratio |",
            "|---|---|---|---|---|---|---|",
        ]
        for rep in range(args.repeat):
            for ci, cap in enumerate(caps_list):
                set_cap(all_stores, cap)
                await warm_counts([store], pq, pv)
                hit5, mrr = await quality_of(per_conv, questions, qvecs) if rep == 0 else (float("nan"),) * 2
                s_ours, s_raw = await latency(
                    client, store, pq, pv, scoped=True, rounds=args.rounds, seed=ci + 7 * rep
                )
                u_ours, u_raw = await latency(
                    client, store, pq, pv, scoped=False, rounds=args.rounds, seed=ci + 7 * rep + 3
                )
                table.append(
                    f"| {cap if cap is not None else 'none'} | {hit5:.3f} | {mrr:.3f} | {s_ours:.2f} / {s_raw:.2f} "
                    f"| {s_ours / s_raw:.2f}x | {u_ours:.2f} / {u_raw:.2f} | {u_ours / u_raw:.2f}x |"
                )
                print(table[-1], file=sys.stderr)
        lines += table
    finally:
        await client.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)
    head = [
        "# Per-word text queries on real text (LoCoMo)",
        "",
        f"`bench/bench_text_words.py {' '.join(sys.argv[1:])}`, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
        f"run took {time.perf_counter() - started:.0f} s; load average {load0[0]:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end; {len(turns):,} turns, {len(questions):,} questions "
        f"({len(pq):,} without a time expression).",
        "",
    ]
    report = "\n".join(head + lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report, "utf-8")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=None, help="a throw-away server (FLUSHALLed); default: the embedded engine"
    )
    parser.add_argument("--data", type=Path, default=quality.DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None)
    parser.add_argument(
        "--embeddings-cache", type=Path, default=Path(quality.tempfile.gettempdir()) / "quality-cache" / "emb"
    )
    parser.add_argument(
        "--folds",
        type=Path,
        default=Path(quality.tempfile.gettempdir()) / "quality-cache" / "lab" / "folds.json",
    )
    parser.add_argument("--caps", default="none,6,4,3,2", help="comma-separated words caps ('none': no cap)")
    parser.add_argument("--sample", type=int, default=150, help="questions in the anatomy")
    parser.add_argument("--rounds", type=int, default=300, help="latency rounds per cell")
    parser.add_argument(
        "--repeat", type=int, default=1, help="latency passes over the caps (quality: first only)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: LoCoMo data not found at {args.data}", file=sys.stderr)
        return 0
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
