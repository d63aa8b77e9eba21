"""A million memories: how the store's costs grow with its size (``make bench-1m``, not in CI).

Populates one store in steps (default 10k, 100k, 250k, 500k, 1M memories of 384-d seeded
random unit vectors passed as ``vector=``, so no model runs; contents are sentences drawn
from a Zipf vocabulary, so the full-text side of a hybrid recall meets realistic posting
lists) over 1,000 thread scopes of one agent, and at each step measures, at the defaults
the user runs (hybrid re-ranked recall with reinforcement, live config and discovery on):

* populate rate (memories/s, ``remember_many`` batches of 1,000, vectors precomputed);
* ``recall`` p50/p99, unscoped, scoped to one thread (which grows with the store: 1,000
  threads) and scoped to one of 100 threads of 10 memories written before the first step (a
  scope of fixed size: the store's size alone); queries are near a stored memory of the scope;
  ``recall_by_vector`` p50/p99 and a raw ``FT.SEARCH`` KNN 10 (the engine's own figure);
* ``list`` and ``count`` of one thread (an index query each);
* a capped write (``max_items_per_scope`` at the scope's size: every write evicts one);
* ``forget_by_scope`` of one thread (then written back, untimed);
* server calls per operation (``INFO commandstats`` deltas, summed over the nodes): the
  library must not grow on a hot path, so these are equal at every size;
* recalls whose full-text side timed out or failed and that ranked their KNN candidates
  alone (``agent_memory_recall_degraded_total``, by reason), per row: a default recall
  never fails for its text side (valkey-search 1.2.1's cluster stalled text queries
  for its 50 s default timeout while reinforcement's writes were being indexed);
* bytes per memory (``used_memory`` delta / memories) against the same documents written
  raw (the reference's fields, ``HSET`` into an index of the same schema), measured first on
  the empty server and deleted before the library populates;
* embedded engine only: restart-to-ready (``SHUTDOWN`` with the AOF, start, the search
  module's rebuild until FT.INFO says ready) and the first recall's latency after it.

Engines: ``--engine embedded`` (Valkey + RediSearch 2.10 of the ``embedded`` extra, with
persistence, data dir kept with ``--data-dir`` so a later run can continue from it) and
``--engine cluster`` (the 3-primary valkey-search test cluster of ``../shared/engines``,
no persistence: restart is not measured there). ``--max-minutes`` bounds the populating:
when the next step cannot be reached in time, the report says which size was the largest
and shows the growth curve up to it.

    .venv/bin/python bench/bench_1m.py --engine embedded --sizes 10k,100k --max-minutes 20
    .venv/bin/python bench/bench_1m.py --engine cluster
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _harness import cpu_count, cpu_model
from prometheus_client import CollectorRegistry

from betterdb_memory import MemoryInput, MemoryStore
from betterdb_memory.backend.dialect import keyless_route
from betterdb_memory.core.ft_info import parse_ft_info
from betterdb_memory.core.query import SCORE_ALIAS, VECTOR_FIELD

FloatMatrix = npt.NDArray[np.float32]
DIM = 384
THREADS = 1000
BATCH = 1000
SAMPLES = 60
NAME = "bench1m"
SEED = 1_000_000
#: Scopes whose size does not grow with the store: FIXED_THREADS threads of FIXED_PER memories,
#: written once before the first step, so one row tests the store's size alone.
FIXED_THREADS = 100
FIXED_PER = 10
FIXED_BASE = 50_000_000  # their corpus indices (a multiple of BATCH, far from the populated ones)
ROOT = Path(__file__).resolve().parents[1]
#: The stores' metrics (the degraded recalls are read from it).
REGISTRY = CollectorRegistry()
DEGRADED = "agent_memory_recall_degraded_total"
SCOPED_ROW = "recall, one thread (defaults)"
FIXED_ROW = f"recall, a {FIXED_PER}-memory thread (defaults)"


def degraded_recalls() -> dict[str, float]:
    """Recalls that ranked their KNN candidates alone so far, by reason (every store of the run)."""
    out: dict[str, float] = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name == DEGRADED and sample.value:
                reason = sample.labels["reason"]
                out[reason] = out.get(reason, 0.0) + sample.value
    return out


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Book:
    """Embedder stand-in: writes pass their vectors; a query's vector is registered beforehand."""

    dimensions = DIM
    model_id = "bench:random-384"

    def __init__(self) -> None:
        self.queries: dict[str, FloatMatrix] = {}

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return np.stack([self.queries[t] for t in texts])


class Corpus:
    """Seeded memories: unit vectors and Zipf-worded sentences, memory ``i`` always the same."""

    def __init__(self) -> None:
        rng = np.random.default_rng(SEED)
        syllables = ["ka", "lo", "mi", "ren", "tu", "sa", "vo", "ne", "di", "por", "el", "an"]
        self.words = ["".join(rng.choice(syllables, size=3)) + str(i % 7) for i in range(4000)]
        ranks = np.arange(1, len(self.words) + 1, dtype=np.float64)
        self.p = (1 / ranks) / (1 / ranks).sum()

    def batch(self, start: int, n: int) -> tuple[FloatMatrix, list[str]]:
        rng = np.random.default_rng(SEED + start)
        v = rng.standard_normal((n, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        picks = rng.choice(len(self.words), size=(n, 12), p=self.p)
        texts = [
            f"memory {start + i}: " + " ".join(self.words[w] for w in row) for i, row in enumerate(picks)
        ]
        return v, texts

    def one(self, i: int) -> tuple[FloatMatrix, str]:
        """Memory ``i`` as the populate loop wrote it (it writes batches of BATCH from multiples of BATCH)."""
        start = i - i % BATCH
        v, texts = self.batch(start, BATCH)
        return v[i - start], texts[i - start]

    def fixed(self) -> list[MemoryInput]:
        """The fixed-size threads' memories: ``f0`` ... ``f99``, FIXED_PER each."""
        out = self.items(FIXED_BASE, FIXED_THREADS * FIXED_PER)
        for i, item in enumerate(out):
            item["thread_id"] = f"f{i % FIXED_THREADS}"
        return out

    def items(self, start: int, n: int) -> list[MemoryInput]:
        v, texts = self.batch(start, n)
        return [
            {
                "content": texts[i],
                "vector": v[i],
                "thread_id": f"t{(start + i) % THREADS}",
                "agent_id": "fleet",
            }
            for i in range(n)
        ]


@dataclass
class Step:
    size: int
    populate_rate: float = float("nan")
    rows: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (p50 ms, p99 ms)
    calls: dict[str, float] = field(default_factory=dict)  # name -> server calls per op
    bytes_per_memory: float = float("nan")
    restart: tuple[float, float] | None = None  # (seconds to ready, first recall ms)
    errors: dict[str, str] = field(default_factory=dict)  # name -> the error that stopped the row
    degraded: dict[str, dict[str, float]] = field(default_factory=dict)  # name -> reason -> recalls


async def commandstats_total(client: Any) -> int:
    """Calls of every command on every node (INFO commandstats), minus the INFO calls themselves."""
    replies = await _per_node(client, "commandstats")
    total = 0
    for info in replies:
        for key, value in info.items():
            if str(key).startswith("cmdstat_") and str(key) != "cmdstat_info":
                total += int(value["calls"] if isinstance(value, dict) else 0)
    return total


async def used_memory(client: Any) -> int:
    return sum(int(info["used_memory"]) for info in await _per_node(client, "memory"))


async def _per_node(client: Any, section: str) -> list[dict[str, Any]]:
    if hasattr(client, "get_primaries"):
        return [await client.info(section, target_nodes=node) for node in client.get_primaries()]
    return [await client.info(section)]


async def measure(
    client: Any, name: str, step: Step, op: Callable[[int], Awaitable[Any]], n: int = SAMPLES
) -> None:
    lat = []
    seen = degraded_recalls()
    try:
        for i in range(3):  # warm-up
            await op(10_000 + i)
        before = await commandstats_total(client)
        for i in range(n):
            t0 = time.perf_counter()
            await op(i)
            lat.append(time.perf_counter() - t0)
        after = await commandstats_total(client)
    except Exception as exc:  # a row that fails is reported with its error, the run goes on
        step.rows[name] = (float("nan"), float("nan"))
        step.errors[name] = f"{type(exc).__name__}: {exc}"[:200]
        log(f"  {name}: {step.errors[name]} after {len(lat)} calls")
        return
    finally:
        now = degraded_recalls()
        delta = {r: v - seen.get(r, 0.0) for r, v in now.items() if v > seen.get(r, 0.0)}
        if delta:
            step.degraded[name] = delta
            log(f"  {name}: {sum(delta.values()):.0f} recalls ranked the KNN candidates alone {delta}")
    step.rows[name] = (statistics.median(lat) * 1e3, float(np.percentile(lat, 99)) * 1e3)
    step.calls[name] = (after - before) / n


async def raw_bytes_per_memory(client: Any, corpus: Corpus, store: MemoryStore, n: int = 10_000) -> float:
    """The same documents written raw (reference fields, plain HSET) into an index of the same schema."""
    from betterdb_memory.core.query import create_index_args

    spec = store.spec
    prefix, index = "rawbench:mem:", "rawbench:mem:idx"
    caps = store.index.caps
    await client.execute_command(
        *create_index_args(spec.__class__(index, prefix, DIM), caps), **keyless_route(client)
    )
    before = await used_memory(client)
    now = int(time.time() * 1000)
    for start in range(0, n, BATCH):
        v, texts = corpus.batch(start, BATCH)
        pipe = client.pipeline(transaction=False)
        for i in range(BATCH):
            pipe.execute_command(
                "HSET", f"{prefix}{start + i}", "content", texts[i], VECTOR_FIELD, v[i].tobytes(),
                "threadId", f"t{(start + i) % THREADS}", "agentId", "fleet", "importance", "0.5",
                "created_at", str(now), "last_accessed_at", str(now), "access_count", "0", "metadata", "{}",
            )  # fmt: skip
        await pipe.execute()
    await asyncio.sleep(1.0)
    per = (await used_memory(client) - before) / n
    await client.execute_command("FT.DROPINDEX", index, **keyless_route(client))  # no DD on valkey-search
    for start in range(0, n, BATCH):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + BATCH, n)):
            pipe.execute_command("DEL", f"{prefix}{i}")
        await pipe.execute()
    return per


async def run_step(client: Any, store: MemoryStore, book: Book, corpus: Corpus, step: Step) -> None:
    rng = np.random.default_rng(step.size)
    targets = rng.integers(0, step.size, size=SAMPLES + 10)
    queries: list[tuple[str, FloatMatrix, str]] = []
    fixed_queries: list[tuple[str, FloatMatrix, str]] = []
    for j, t in enumerate(targets):
        # Near a stored memory: its own vector plus noise, four of its words. (Before this,
        # ``corpus.batch(t, 1)`` drew a vector and words the store never held: random queries.)
        for index, scope, into in (
            (int(t), f"t{int(t) % THREADS}", queries),
            (FIXED_BASE + j % (FIXED_THREADS * FIXED_PER), f"f{j % FIXED_THREADS}", fixed_queries),
        ):
            vec, content = corpus.one(index)
            near = vec + rng.standard_normal(DIM).astype(np.float32) / np.float32(np.sqrt(DIM))
            near /= np.linalg.norm(near)
            text = f"q{step.size}-{scope}-{j} " + " ".join(content.split()[2:6])
            book.queries[text] = near
            into.append((text, near, scope))

    def q(i: int) -> tuple[str, FloatMatrix, str]:
        return queries[i % len(queries)]

    def fq(i: int) -> tuple[str, FloatMatrix, str]:
        return fixed_queries[i % len(fixed_queries)]

    await measure(client, "recall, unscoped (defaults)", step, lambda i: store.recall(q(i)[0], k=10))
    await measure(
        client,
        "recall, one thread (defaults)",
        step,
        lambda i: store.recall(q(i)[0], k=10, thread_id=q(i)[2]),
    )
    await measure(
        client,
        FIXED_ROW,
        step,
        lambda i: store.recall(fq(i)[0], k=10, thread_id=fq(i)[2]),
    )
    await measure(
        client,
        "recall_by_vector, unscoped",
        step,
        lambda i: store.recall_by_vector(q(i)[1].tolist(), k=10, reinforce=False),
    )

    async def raw_knn(i: int) -> Any:
        return await client.execute_command(
            "FT.SEARCH", store.spec.index, f"*=>[KNN 10 @{VECTOR_FIELD} $vec AS {SCORE_ALIAS}]",
            "PARAMS", "2", "vec", q(i)[1].tobytes(), "NOCONTENT",
            "LIMIT", "0", "10", "DIALECT", "2", **keyless_route(client),
        )  # fmt: skip

    await measure(client, "raw FT.SEARCH KNN 10", step, raw_knn)
    await measure(client, "list one thread (10)", step, lambda i: store.list(thread_id=q(i)[2], limit=10))
    await measure(client, "count one thread", step, lambda i: store.count(thread_id=q(i)[2]))

    per_thread = step.size // THREADS
    capped = MemoryStore(
        client=client, name=NAME, embedder=book, max_items_per_scope=max(per_thread, 1), registry=REGISTRY
    )
    extra = corpus.items(step.size + 5_000_000, SAMPLES + 3)
    try:
        await measure(
            client,
            "capped write (evicts one)",
            step,
            lambda i: capped.remember(
                extra[i % len(extra)]["content"],
                vector=extra[i % len(extra)]["vector"],
                thread_id="t7",
                agent_id="fleet",
            ),
        )
    finally:
        await capped.close()
    t0 = time.perf_counter()
    before = await commandstats_total(client)
    gone = await store.forget_by_scope(thread_id="t3")
    step.rows["forget_by_scope one thread"] = ((time.perf_counter() - t0) * 1e3, float("nan"))
    step.calls["forget_by_scope one thread"] = float(await commandstats_total(client) - before)
    log(f"  forget_by_scope removed {gone}; writing them back")
    back = [it for s in range(0, step.size, BATCH) for it in corpus.items(s, min(BATCH, step.size - s))
            if it["thread_id"] == "t3"]  # fmt: skip
    for s in range(0, len(back), BATCH):
        await store.remember_many(back[s : s + BATCH])


def render(engine: str, steps: Sequence[Step], raw_per: float, note: str, seconds: float) -> str:
    sizes = [s.size for s in steps]
    out = [
        f"# A million memories: {engine}",
        "",
        f"{cpu_count()} cores ({cpu_model()}), load average at the end {os.getloadavg()[0]:.1f}; "
        f"run took {seconds / 60:.1f} min. {note}",
        "",
        "| operation | " + " | ".join(f"{n:,} p50 / p99 ms" for n in sizes) + " | calls/op per size |",
        "|---|" + "---|" * len(sizes) + "---|",
    ]
    for name in steps[0].rows:
        cells = []
        for s in steps:
            p50, p99 = s.rows.get(name, (float("nan"), float("nan")))
            cells.append(f"{p50:.2f} / {p99:.2f}")
        calls = " / ".join(f"{s.calls.get(name, float('nan')):.1f}" for s in steps)
        out.append(f"| {name} | " + " | ".join(cells) + f" | {calls} |")
    out += ["", "| size | populate (memories/s) | bytes per memory | vs raw | restart to ready | first recall |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for s in steps:
        restart = f"{s.restart[0]:.1f} s | {s.restart[1]:.1f} ms" if s.restart else "n/a | n/a"
        ratio = s.bytes_per_memory / raw_per if raw_per == raw_per and raw_per > 0 else float("nan")
        out.append(
            f"| {s.size:,} | {s.populate_rate:,.0f} | {s.bytes_per_memory:,.0f} | {ratio:.2f}x | {restart} |"
        )
    first, last = steps[0], steps[-1]
    if len(steps) > 1:
        out.append("")
        for row, what in (
            (SCOPED_ROW, "a thread that grows with the store"),
            (FIXED_ROW, f"a {FIXED_PER}-memory thread"),
        ):
            if row in first.rows and row in last.rows:
                r = last.rows[row][0] / first.rows[row][0]
                out.append(
                    f"Default recall scoped to {what}: p50 at {last.size:,} is {r:.2f}x its {first.size:,} figure (goal <= 2x)."
                )
    out.append(f"Raw documents (reference fields, plain HSET, same schema): {raw_per:,.0f} bytes per memory.")
    for s in steps:
        for name, error in s.errors.items():
            out.append(f"- {s.size:,}, {name}: failed with {error}")
        for name, reasons in s.degraded.items():
            why = ", ".join(f"{r} {n:.0f}" for r, n in sorted(reasons.items()))
            out.append(
                f"- {s.size:,}, {name}: {sum(reasons.values()):.0f} of {SAMPLES + 3} recalls ranked the KNN "
                f"candidates alone (text side: {why})"
            )
    return "\n".join(out)


async def restart_and_recall(
    server: Any, client: Any, store: MemoryStore, book: Book, step: Step
) -> tuple[Any, MemoryStore]:
    """Restart the embedded server (AOF load and the index rebuild), time it and the first recall."""
    import valkey.asyncio as avalkey

    await store.close()
    await client.aclose()
    t0 = time.perf_counter()
    server.restart()
    client = avalkey.Valkey.from_url(server.url, socket_timeout=120)
    store = MemoryStore(client=client, name=NAME, embedder=book, default_threshold=2.0, registry=REGISTRY)
    while True:
        try:
            if parse_ft_info(await client.execute_command("FT.INFO", store.spec.index)).ready:
                break
        except Exception:  # still loading: ask again
            pass
        await asyncio.sleep(0.1)
    ready = time.perf_counter() - t0
    text = next(iter(book.queries))
    t1 = time.perf_counter()
    await store.recall(text, k=10)
    step.restart = (ready, (time.perf_counter() - t1) * 1e3)
    return client, store


async def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=("embedded", "cluster"), default="embedded")
    ap.add_argument("--sizes", default="10k,100k,250k,500k,1m")
    ap.add_argument("--max-minutes", type=float, default=60.0, help="populating budget per engine")
    ap.add_argument(
        "--data-dir", default=None, help="embedded: keep the server's data here (default: temporary)"
    )
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--restart-at",
        default="100k,last",
        help="embedded: sizes after which to restart the server and time the rebuild ('last': the largest reached)",
    )
    args = ap.parse_args(argv)
    sizes = [int(float(s.lower().replace("k", "e3").replace("m", "e6"))) for s in args.sizes.split(",")]
    restart_at = {
        int(float(s.lower().replace("k", "e3").replace("m", "e6")))
        for s in args.restart_at.split(",")
        if s not in ("last", "none", "")
    }
    out = Path(args.out or ROOT / "bench" / "results" / f"bench-1m-{args.engine}.md")
    started = time.perf_counter()
    server: Any = None
    engine: Any = None
    if args.engine == "embedded":
        from betterdb_memory.server import EmbeddedServer

        server = EmbeddedServer(data_dir=args.data_dir or tempfile.mkdtemp(prefix="bench1m-"))
        server.start()
        log(
            f"server answered after {time.perf_counter() - started:.1f} s (a kept --data-dir is loaded first)"
        )
        import valkey.asyncio as avalkey

        client: Any = avalkey.Valkey.from_url(server.url, socket_timeout=120)
    else:
        from bench_cluster import Engine, engine_dir, free_cluster_base
        from valkey.asyncio.cluster import ValkeyCluster

        path = engine_dir()
        if path is None:
            print("valkey-search test engine not found: skipping")
            return 0
        engine = Engine(path)
        engine.base = free_cluster_base()
        await asyncio.to_thread(engine._script, str(path / "cluster.sh"), "start", str(engine.base))
        client = ValkeyCluster(host="127.0.0.1", port=engine.base, socket_timeout=120)
        await client.initialize()
    book, corpus = Book(), Corpus()
    steps: list[Step] = []
    note = ""
    raw_per = float("nan")
    try:
        store = MemoryStore(client=client, name=NAME, embedder=book, default_threshold=2.0, registry=REGISTRY)
        await store.ensure_index()
        while (info := await store.index.info()) is not None and not info.ready:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        have = await store.count()
        fixed_there = await store.count(thread_id="f0") > 0
        have -= FIXED_THREADS * FIXED_PER if fixed_there else 0
        log(
            f"{args.engine}: {have:,} memories already in the store, index ready after {time.perf_counter() - started:.1f} s"
        )
        if have == 0:
            # Raw first, on an empty server, then deleted: valkey-search shares a text's index
            # structures between indexes, so whichever writes a text first pays for them. Measured
            # after the library (the old order), raw looked ~10-15% cheaper than it is.
            raw_per = await raw_bytes_per_memory(client, corpus, store)
            await asyncio.sleep(2.0)  # lazily freed memory settles before the baseline
        base_mem = await used_memory(client) if have == 0 else None
        if not fixed_there:
            await store.remember_many(corpus.fixed())
        deadline = time.monotonic() + args.max_minutes * 60
        for size in sizes:
            step = Step(size)
            t0, start = time.perf_counter(), have
            while have < size:
                if time.monotonic() > deadline:
                    break
                n = min(BATCH, size - have)
                await store.remember_many(corpus.items(have, n))
                have += n
            if have < size:
                note = f"Populating stopped at {have:,} memories: the {args.max_minutes:.0f}-minute budget ran out before {size:,}."
                log(note)
                break
            step.populate_rate = (
                (have - start) / max(time.perf_counter() - t0, 1e-9) if have > start else float("nan")
            )
            # A resumed store (--data-dir with memories in it) has no empty baseline: the
            # server's own few MB are then counted in, under 0.1% at these sizes.
            step.bytes_per_memory = (await used_memory(client) - (base_mem or 0)) / (
                have + FIXED_THREADS * FIXED_PER
            )
            # valkey-search indexes writes on background threads: measure once it has caught up.
            while (info := await store.index.info()) is not None and not info.ready:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            log(f"{size:,} memories ({step.populate_rate:,.0f}/s); measuring")
            await run_step(client, store, book, corpus, step)
            if server is not None and size in restart_at:
                client, store = await restart_and_recall(server, client, store, book, step)
            steps.append(step)
            log(f"  {step.rows}")
            partial = render(
                args.engine,
                steps,
                raw_per,
                note + " (partial: the run goes on)",
                time.perf_counter() - started,
            )
            await asyncio.to_thread(out.write_text, partial + "\n", encoding="utf-8")
        if server is not None and steps and steps[-1].restart is None and "last" in args.restart_at:
            client, store = await restart_and_recall(server, client, store, book, steps[-1])
            log(f"  restart with {have:,} memories: {steps[-1].restart}")
            if have != steps[-1].size:
                note += f" The last restart was timed with the {have:,} memories then stored."
        if raw_per != raw_per:  # a resumed store: no empty server to measure raw on first
            raw_per = await raw_bytes_per_memory(client, corpus, store)
        await store.close()
    finally:
        await client.aclose()
        if server is not None:
            server.stop()
        if engine is not None:
            await asyncio.to_thread(engine.stop)
    if not steps:
        print("no step completed")
        return 1
    report = render(args.engine, steps, raw_per, note, time.perf_counter() - started)
    await asyncio.to_thread(out.write_text, report + "\n", encoding="utf-8")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
