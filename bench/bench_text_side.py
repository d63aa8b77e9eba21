"""The hybrid recall's full-text side, before and after a change, interleaved in one run (issue 29).

Two copies of the library share one server and one index: the working tree's
(``betterdb_memory``, "after") and a git ref's (``--before``, extracted to a temporary
package ``betterdb_memory_before``). Each round times the default ``recall(text, k=10)``
(hybrid re-ranking, reinforcement on) of both and the raw FT.SEARCH KNN 50 it starts
from, in a rotating order, scoped and unscoped; the report gives each one's p50 and its
ratio to the raw KNN. Then the FT.SEARCH calls per recall of each (``INFO commandstats``).

Data: ``--zipf N`` (``bench_1m.py``'s corpus: seeded random vectors, Zipf-worded
sentences, 1,000 thread scopes; queries: four words of a stored memory, its vector
nudged) in an embedded server started here, steps at each size of ``--sizes``; or
``--locomo`` (LoCoMo turns in conversation scopes, its plain questions, the ONNX vectors
``quality.py`` caches) on ``--url`` or an embedded server.

    .venv/bin/python bench/bench_text_side.py --before main --zipf --sizes 100k,250k
    scripts/with-valkey-search.sh standalone .venv/bin/python bench/bench_text_side.py \
        --before main --locomo --url env
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))  # this checkout's library ("after"), whatever the venv installed

from betterdb_memory import MemoryStore  # noqa: E402
from betterdb_memory.core.codec import encode_vector  # noqa: E402
from betterdb_memory.core.keys import Scope  # noqa: E402
from betterdb_memory.core.query import MemoryFilter, knn_search_args  # noqa: E402
from betterdb_memory.tiers.recall import _RANKING_FIELDS  # noqa: E402

FloatMatrix = npt.NDArray[np.float32]
NAME = "textside"
READER = "bench-reader"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load_before(ref: str) -> Any:
    """The library as of ``ref``, importable as ``betterdb_memory_before`` (relative imports only)."""
    root = Path(tempfile.mkdtemp(prefix="textside-before-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "betterdb_memory"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    (root / "betterdb_memory").rename(root / "betterdb_memory_before")
    sys.path.insert(0, str(root))
    return importlib.import_module("betterdb_memory_before")


class Book:
    """Embedder stand-in: every text's vector is registered beforehand."""

    def __init__(self, dimensions: int, model_id: str) -> None:
        self.dimensions = dimensions
        self.model_id = model_id
        self.vectors: dict[str, FloatMatrix] = {}

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return np.stack([self.vectors[t] for t in texts])


Query = tuple[str, FloatMatrix, str | None]  # text, vector, thread scope (None: unscoped)


def p50(xs: Sequence[float]) -> float:
    return statistics.median(xs) * 1e3 if xs else float("nan")


async def ft_search_calls(client: Any) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_FT.SEARCH", {}).get("calls", 0))


async def interleaved(
    ops: dict[str, Callable[[int], Awaitable[Any]]], rounds: int, warmup: int
) -> dict[str, list[float]]:
    names = list(ops)
    for i in range(warmup):
        for name in names:
            await ops[name](rounds + i)
    lat: dict[str, list[float]] = {n: [] for n in names}
    for i in range(rounds):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            t0 = time.perf_counter()
            await ops[name](i)
            lat[name].append(time.perf_counter() - t0)
    return lat


async def measure(
    client: Any,
    stores: dict[str, Any],
    queries: Sequence[Query],
    rounds: int,
    label: str,
    fresh: Sequence[Query] = (),
) -> list[str]:
    """One table row per variant: p50 of before / after / raw KNN 50, interleaved; FT.SEARCH per recall."""
    index = stores["after"].keys.index
    layout = stores["after"].layout
    fields = _RANKING_FIELDS

    def raw_args(q: Query) -> list[Any]:
        flt = MemoryFilter(scope=Scope.of(thread_id=q[2])) if q[2] else MemoryFilter()
        return knn_search_args(index, encode_vector(q[1]), k=50, flt=flt, layout=layout, return_fields=fields)

    raws = [raw_args(q) for q in queries]

    def recall_op(store: Any, reinforce: bool = True) -> Callable[[int], Awaitable[Any]]:
        async def op(i: int) -> Any:
            text, _, thread = queries[i % len(queries)]
            return await store.recall(text, k=10, thread_id=thread, reinforce=reinforce)

        return op

    async def raw_op(i: int) -> Any:
        return await client.execute_command(*raws[i % len(raws)])

    async def text_op(i: int) -> Any:
        """The after-side's text queries alone, as its next recall of this question would send them."""
        text, _, thread = queries[i % len(queries)]
        flt = MemoryFilter(scope=Scope.of(thread_id=thread)) if thread else MemoryFilter()
        req = stores["after"]._recall._text.request(text, flt, _RANKING_FIELDS, pool=50)
        if req is None or not req.queries:
            return None
        pipe = client.pipeline(transaction=False)
        for args in req.searches[: req.queries]:
            pipe.execute_command(*args)
        return await pipe.execute()

    ops = {
        "before": recall_op(stores["before"]),
        "after": recall_op(stores["after"]),
        "after, reinforce off": recall_op(stores["after"], reinforce=False),
        "after's text queries alone": text_op,
        "raw KNN 50": raw_op,
    }
    lat = await interleaved(ops, rounds, warmup=3)
    raw = p50(lat["raw KNN 50"])
    # FT.SEARCH calls per recall (background word counts included): on questions neither side
    # met yet when ``fresh`` is given (first meetings), else on questions both have met.
    calls = {}
    asked = list(fresh) or list(queries[:20])
    for name in ("before", "after"):
        c0 = await ft_search_calls(client)
        for text, _, thread in asked:
            await stores[name].recall(text, k=10, thread_id=thread)
        if name == "after":
            await stores[name]._recall._text.settled()
        calls[name] = (await ft_search_calls(client) - c0) / len(asked)
    rows = []
    for name in ops:
        ms = p50(lat[name])
        n_calls = f"{calls[name]:.1f}" if name in calls else "-"
        rows.append(
            f"| {label} | {name} | {ms:.2f} | {raw:.2f} | {ms / raw:.2f}x | {n_calls} | {len(lat[name])} |"
        )
    log("\n".join(rows))
    return rows


HEAD = [
    "| recall | code | p50 ms | raw KNN 50 p50 ms | ratio | FT.SEARCH per recall | n |",
    "|---|---|---|---|---|---|---|",
]


async def zipf_run(args: argparse.Namespace, before: Any) -> list[str]:
    from bench_1m import DIM, THREADS, Corpus

    from betterdb_memory.server import EmbeddedServer

    server = EmbeddedServer(persistence=False)
    server.start()
    import valkey.asyncio as avalkey

    client: Any = avalkey.Valkey.from_url(server.url, socket_timeout=120)
    book, corpus = Book(DIM, "bench:random-384"), Corpus()
    out: list[str] = []
    try:
        stores = {
            "after": MemoryStore(client=client, name=NAME, embedder=book, default_threshold=2.0),
            "before": before.MemoryStore(client=client, name=NAME, embedder=book, default_threshold=2.0),
        }
        await stores["after"].ensure_index()
        have = 0
        for size in [int(float(s.lower().replace("k", "e3"))) for s in args.sizes.split(",")]:
            t0 = time.perf_counter()
            while have < size:
                n = min(1000, size - have)
                await stores["after"].remember_many(corpus.items(have, n))
                have += n
            while (info := await stores["after"].index.info()) is not None and not info.ready:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            log(f"{size:,} memories ({time.perf_counter() - t0:.0f} s to populate)")
            rng = np.random.default_rng(size)
            queries: list[Query] = []
            for j, t in enumerate(rng.integers(0, size, size=70)):
                v, texts = corpus.batch(int(t), 1)
                near = v[0] + rng.standard_normal(DIM).astype(np.float32) / np.float32(np.sqrt(DIM))
                near /= np.linalg.norm(near)
                text = f"q{size}-{j} " + " ".join(texts[0].split()[2:6])
                book.vectors[text] = near
                queries.append((text, near, f"t{int(t) % THREADS}"))
            load = os.getloadavg()[0]
            out.append(f"\n### {size:,} memories (Zipf), load average {load:.1f} at start\n")
            out += HEAD
            out += await measure(
                client, stores, [(a, b, None) for a, b, _ in queries], args.rounds, "unscoped"
            )
            out += await measure(client, stores, queries, args.rounds, "one thread")
            out.append(f"\nload average at end: {os.getloadavg()[0]:.1f}")
        for s in stores.values():
            await s.close()
    finally:
        await client.aclose()
        server.stop()
    return out


async def locomo_run(args: argparse.Namespace, before: Any) -> list[str]:
    import quality

    from betterdb_memory.core.time_recall import time_plan
    from betterdb_memory.embedders import OnnxEmbedder

    turns, questions = quality.load(args.locomo_data, None)
    embedder = OnnxEmbedder(batch_size=64)
    tvecs, _ = await quality.embed_all(embedder, [t.text for t in turns], args.cache)
    qvecs, _ = await quality.embed_all(embedder, [q.text for q in questions], args.cache)
    book = Book(tvecs.shape[1], "bench:locomo-onnx")
    server = None
    url = os.environ["VALKEY_URL"] if args.url == "env" else args.url
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = EmbeddedServer(persistence=False)
        server.start()
        url = server.url
    import valkey.asyncio as avalkey

    client: Any = avalkey.Valkey.from_url(url, socket_timeout=120)
    out: list[str] = []
    try:
        stores = {
            "after": MemoryStore(client=client, name=NAME, embedder=book, default_threshold=2.0),
            "before": before.MemoryStore(client=client, name=NAME, embedder=book, default_threshold=2.0),
        }
        await stores["after"].ensure_index()
        if await stores["after"].count() == 0:
            items = [
                {"content": t.text, "vector": v, "thread_id": t.conv, "agent_id": READER}
                for t, v in zip(turns, tvecs, strict=True)
            ]
            for i in range(0, len(items), 500):
                await stores["after"].remember_many(items[i : i + 500])
        while (info := await stores["after"].index.info()) is not None and not info.ready:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        plain = [i for i, q in enumerate(questions) if time_plan(q.text).window is None]
        order = np.random.default_rng(20240601).permutation(len(plain))
        queries: list[Query] = []
        for j in order:
            q = questions[plain[int(j)]]
            book.vectors[q.text] = qvecs[plain[int(j)]]
            queries.append((q.text, qvecs[plain[int(j)]], q.conv))
        engine = stores["after"].capabilities.engine if stores["after"].capabilities else "?"
        out.append(
            f"\n### LoCoMo ({len(turns):,} turns), {engine}, load average {os.getloadavg()[0]:.1f} at start\n"
        )
        out += HEAD
        # Each variant asks its own questions (first meetings of words included, as a user's would be).
        n = args.rounds
        unscoped = [(a, b, None) for a, b, _ in queries]
        tail = len(queries) - 40
        out += await measure(client, stores, unscoped[: n + 3], n, "unscoped", unscoped[tail : tail + 20])
        out += await measure(client, stores, queries[n + 3 : 2 * n + 6], n, "scoped", queries[tail + 20 :])
        out.append(f"\nload average at end: {os.getloadavg()[0]:.1f}")
        for s in stores.values():
            await s.close()
    finally:
        await client.aclose()
        if server is not None:
            server.stop()
    return out


async def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="git ref of the 'before' code")
    ap.add_argument("--zipf", action="store_true")
    ap.add_argument("--sizes", default="10k,100k")
    ap.add_argument("--locomo", action="store_true")
    ap.add_argument("--url", default=None, help="LoCoMo: a server URL ('env': $VALKEY_URL); default embedded")
    ap.add_argument("--locomo-data", type=Path, default=ROOT.parent / "shared" / "data" / "locomo10.json")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "quality-cache" / "emb")
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    before = load_before(args.before)
    started = time.perf_counter()
    rev = subprocess.run(  # noqa: ASYNC221
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    lines = [
        f"# bench_text_side.py {' '.join(argv)}",
        "",
        f"before: {args.before}; after: the working tree at {rev.stdout.strip()}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Default recall (k=10, reinforcement on); "
        "before, after and the raw KNN 50 interleaved, order rotating per round.",
    ]
    if args.zipf:
        lines += await zipf_run(args, before)
    if args.locomo:
        lines += await locomo_run(args, before)
    lines.append(f"\nrun took {time.perf_counter() - started:.0f} s")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
