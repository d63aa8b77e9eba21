"""The cost of fan-out: ``MemoryStore`` on a 3-primary valkey-search cluster vs one standalone server.

Starts the optional valkey-search test engine (``../shared/engines/valkey-search``, or
``VALKEY_SEARCH_ENGINE``) twice, both without persistence, on free ports of 127.0.0.1:
a 3-primary cluster (``cluster.sh``, coordinator on: a search sent to one node fans out
to every shard and is merged there) and a standalone server (``start.sh``). The same
library calls, on the same data (seeded 384-d random unit vectors passed as ``vector=``,
so no model runs), alternate round by round between the two (``_harness.interleave``;
which side goes first flips every round). Both servers are always stopped.

Rows, per size N (N memories in 20 thread scopes of one agent, on both sides):
recall_by_vector k=10 unscoped and scoped to a thread (reinforce off), and the same KNN
as a hand-written FT.SEARCH (no library: the engine's own fan-out); remember one at
a time (into another agent's scope, deleted afterwards); remember_many, batches of 500,
measured while the index grows to N (an HNSW graph only grows: a deleted vector stays
in it, so a batch cannot be measured "at N" repeatedly); a growth of few batches
(0 -> 1k) is repeated on fresh indexes for more samples.

    .venv/bin/python bench/bench_cluster.py                 # 1k and 10k, ~2-3 min on 2 cores
    .venv/bin/python bench/bench_cluster.py --quick         # smoke run
    .venv/bin/python bench/bench_cluster.py --out /tmp/c.md # default: bench/results/cluster.md

Without the engine it prints one line and exits 0 (it is a test engine of this project,
not on users' machines).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import valkey.asyncio as avalkey
import valkey.utils
from _harness import Pair, Row, cpu_count, cpu_model, interleave, render_rows
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import MemoryStore
from betterdb_memory._ports import bindable as _port_free  # free for a server that binds with SO_REUSEADDR
from betterdb_memory.backend.dialect import keyless_route
from betterdb_memory.core.query import VECTOR_FIELD

FloatMatrix = npt.NDArray[np.float32]

ROOT = Path(__file__).resolve().parent.parent
DIM = 384
K = 10
BATCH = 500
THREADS = 20
READER = "bench-reader"  # agent of the N populated memories
WRITER = "bench-writer"  # agent of the measured writes (deleted between chunks)
NAME = "bench-cluster"
SEED = 20261130
COORDINATOR_OFFSET = 20294  # valkey-search's coordinator port: P + 20294 (engine README)
BUS_OFFSET = 10000


@dataclass(frozen=True, slots=True)
class Plan:
    """Rounds are maxima; ``budget_s`` caps each recall / remember row."""

    sizes: tuple[int, ...]
    recall_rounds: int
    write_rounds: int
    budget_s: float
    warmup: int
    min_batches: int  # remember_many samples per side wanted at each size...
    repeat_below: int  # ...got by repeating the growth on fresh indexes up to this size


DEFAULT_PLAN = Plan(
    sizes=(1000, 10000),
    recall_rounds=1000,
    write_rounds=200,
    budget_s=10.0,
    warmup=20,
    min_batches=20,
    repeat_below=2000,
)
QUICK_PLAN = Plan(
    sizes=(500,),
    recall_rounds=20,
    write_rounds=20,
    budget_s=1.0,
    warmup=3,
    min_batches=2,
    repeat_below=2000,
)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the engine ------------------------------------------------------------------------------


def engine_candidate() -> Path:
    configured = os.environ.get("VALKEY_SEARCH_ENGINE", "").strip()
    return Path(configured) if configured else ROOT.parent / "shared" / "engines" / "valkey-search"


def engine_dir() -> Path | None:
    path = engine_candidate()
    ok = all((path / f).exists() for f in ("start.sh", "cluster.sh", "lib/libsearch.so"))
    return path.resolve() if ok else None


def free_cluster_base(start: int = 30000, stop: int = 45239) -> int:
    """A base port whose 3 client, 3 bus and 3 coordinator ports are all free."""
    first = start + (os.getpid() * 13) % 997 * 10
    for base in [*range(first, stop, 10), *range(start, stop, 10)]:
        ports = [base + i + off for i in range(3) for off in (0, BUS_OFFSET, COORDINATOR_OFFSET)]
        if all(_port_free(p) for p in ports):
            return base
    raise RuntimeError("no free port range for a 3-node cluster")


def free_port(avoid: Sequence[int]) -> int:
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port not in avoid:
            return port
    raise RuntimeError("no free port")


class Engine:
    """The two servers of one run: started with the engine's scripts, always stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rundir = tempfile.mkdtemp(prefix="betterdb-bench-cluster-")
        self.base: int | None = None
        self.port: int | None = None

    def _script(self, *args: str) -> None:
        env = dict(os.environ, VALKEY_SEARCH_RUNDIR=self.rundir)
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.strip()[-2000:]}")

    def start(self) -> None:
        base = free_cluster_base()
        self.base = base  # set first: stop() tears down a half-started cluster too
        self._script(str(self.path / "cluster.sh"), "start", str(base))
        port = free_port([base + i + off for i in range(3) for off in (0, BUS_OFFSET, COORDINATOR_OFFSET)])
        self.port = port
        self._script(str(self.path / "start.sh"), str(port))

    def stop(self) -> None:
        env = dict(os.environ, VALKEY_SEARCH_RUNDIR=self.rundir)
        if self.base is not None:
            subprocess.run(
                [str(self.path / "cluster.sh"), "stop", str(self.base)],
                env=env,
                capture_output=True,
                check=False,
            )
        if self.port is not None:
            subprocess.run(
                [str(self.path / "stop.sh"), str(self.port)], env=env, capture_output=True, check=False
            )
        shutil.rmtree(self.rundir, ignore_errors=True)


# -- data and stores -------------------------------------------------------------------------


class PrecomputedOnly:
    """Embedder stand-in: every call passes its vector, so nothing is embedded."""

    dimensions = DIM
    model_id = "bench-precomputed-384"

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        raise RuntimeError("the benchmark passes vectors; embedding would distort the figures")


@dataclass(frozen=True, slots=True)
class Doc:
    content: str
    thread: str
    agent: str
    vector: FloatMatrix

    def item(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "vector": self.vector,
            "thread_id": self.thread,
            "agent_id": self.agent,
        }


class Data:
    """Seeded memories and queries, shared by both sides."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(SEED)
        self.serial = 0

    def vectors(self, n: int) -> FloatMatrix:
        v = self.rng.standard_normal((n, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v

    def docs(self, n: int, *, agent: str, thread: str | None = None) -> list[Doc]:
        out = []
        for i, vec in enumerate(self.vectors(n)):
            self.serial += 1
            content = (
                f"memory {self.serial}: the user prefers window seats and vegetarian meals on long flights"
            )
            out.append(Doc(content, thread or f"t{i % THREADS}", agent, vec))
        return out

    def queries(self, stored: Sequence[Doc], n: int) -> tuple[FloatMatrix, list[str]]:
        """Queries near stored memories (a stored vector plus noise), and each one's thread."""
        picks = self.rng.integers(0, len(stored), size=n)
        noise = self.rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
        q = np.stack([stored[j].vector for j in picks]) + noise
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        return q.astype(np.float32), [stored[j].thread for j in picks]


@dataclass(slots=True)
class Side:
    label: str
    client: Any
    store: MemoryStore


def make_store(client: Any, name: str = NAME) -> MemoryStore:
    # default_threshold 2.0: random vectors sit near cosine 0, and every recall must return k hits.
    return MemoryStore(
        client=client,
        name=name,
        embedder=PrecomputedOnly(),
        default_threshold=2.0,
        summarize_batch=0,
        discovery=False,
        config_refresh=False,
    )


# -- measuring -------------------------------------------------------------------------------

Call = Callable[[int], Awaitable[None]]


def _merge(into: Pair, part: Pair) -> None:
    for a, b in ((into.ours, part.ours), (into.raw, part.raw)):
        a.latencies.extend(b.latencies)
        a.ops += b.ops
        a.seconds += b.seconds


async def recall_rows(
    plan: Plan, data: Data, cluster: Side, standalone: Side, stored: Sequence[Doc]
) -> list[Row]:
    rows = []
    for label, scoped in (
        ("recall_by_vector k=10, unscoped", False),
        ("recall_by_vector k=10, scoped (thread)", True),
    ):
        total = plan.recall_rounds + plan.warmup
        queries, threads = data.queries(stored, total)

        def op(
            side: Side, scoped: bool = scoped, queries: FloatMatrix = queries, threads: list[str] = threads
        ) -> Call:
            async def run(i: int) -> None:
                hits = await side.store.recall_by_vector(
                    queries[i], k=K, thread_id=threads[i] if scoped else None, reinforce=False
                )
                if len(hits) != K:
                    raise AssertionError(f"{side.label}: {len(hits)} hits, expected {K}")

            return run

        c, s = op(cluster), op(standalone)
        for w in range(plan.warmup):
            await c(plan.recall_rounds + w)
            await s(plan.recall_rounds + w)
        pair = await interleave(c, s, rounds=plan.recall_rounds, budget_s=plan.budget_s)
        rows.append(Row(label, pair))
        log(f"  {label}: p50 {pair.ours.p50 * 1e3:.2f} / {pair.raw.p50 * 1e3:.2f} ms")
    return rows


async def engine_row(plan: Plan, data: Data, cluster: Side, standalone: Side, stored: Sequence[Doc]) -> Row:
    """No library: a hand-written KNN 10 FT.SEARCH (NOCONTENT) on the store's index, the engine's own fan-out."""
    total = plan.recall_rounds + plan.warmup
    queries, _ = data.queries(stored, total)
    blobs = [q.astype(np.float32).tobytes() for q in queries]

    def op(side: Side) -> Call:
        route = keyless_route(side.client)
        index = side.store.keys.index

        async def run(i: int) -> None:
            reply = await side.client.execute_command(
                "FT.SEARCH", index, f"*=>[KNN {K} @{VECTOR_FIELD} $vec]", "PARAMS", "2", "vec", blobs[i],
                "NOCONTENT", "LIMIT", "0", str(K), "DIALECT", "2", **route,
            )  # fmt: skip
            if len(reply) != K + 1:
                raise AssertionError(f"{side.label}: {len(reply) - 1} keys, expected {K}")

        return run

    c, s = op(cluster), op(standalone)
    for w in range(plan.warmup):
        await c(plan.recall_rounds + w)
        await s(plan.recall_rounds + w)
    pair = await interleave(c, s, rounds=plan.recall_rounds, budget_s=plan.budget_s)
    log(f"  raw FT.SEARCH: p50 {pair.ours.p50 * 1e3:.2f} / {pair.raw.p50 * 1e3:.2f} ms")
    return Row("engine only: FT.SEARCH KNN 10 NOCONTENT (no library)", pair)


async def remember_row(plan: Plan, data: Data, cluster: Side, standalone: Side) -> Row:
    """remember one at a time into another agent's scope; those memories are deleted afterwards."""
    singles = data.docs(plan.write_rounds + plan.warmup, agent=WRITER, thread="w-single")

    def single(side: Side) -> Call:
        async def run(i: int) -> None:
            d = singles[i]
            await side.store.remember(d.content, vector=d.vector, thread_id=d.thread, agent_id=d.agent)

        return run

    c, s = single(cluster), single(standalone)
    for w in range(plan.warmup):
        await c(plan.write_rounds + w)
        await s(plan.write_rounds + w)
    pair = await interleave(c, s, rounds=plan.write_rounds, budget_s=plan.budget_s)
    for side in (cluster, standalone):  # untimed: the live memories are the N again
        await side.store.forget_by_scope(agent_id=WRITER)
    log(f"  remember: p50 {pair.ours.p50 * 1e3:.2f} / {pair.raw.p50 * 1e3:.2f} ms")
    return Row("remember, one at a time", pair)


async def grow(cluster: Side, standalone: Side, docs: Sequence[Doc]) -> Pair:
    """remember_many of ``docs`` in batches of 500, cluster and standalone alternating per batch."""
    batches = [[d.item() for d in docs[i : i + BATCH]] for i in range(0, len(docs), BATCH)]

    def op(side: Side) -> Call:
        async def run(i: int) -> None:
            await side.store.remember_many(batches[i])

        return run

    n = len(batches)
    pair = await interleave(op(cluster), op(standalone), rounds=n, budget_s=math.inf, min_rounds=n)
    pair.ours.ops = pair.raw.ops = len(docs)  # latency per batch, throughput in memories
    return pair


async def remember_many_pair(
    plan: Plan, cluster: Side, standalone: Side, docs: Sequence[Doc], reps: int
) -> Pair:
    """Populate both stores with ``docs`` (measured), then ``reps`` more times into fresh indexes.

    The HNSW graph only grows (a deleted vector stays in it), so a batch is measured
    where it happens: while an index grows to N. A phase with few batches (0 -> 1k: two)
    is repeated on throw-away stores, each deleted and its index dropped afterwards.
    """
    pair = await grow(cluster, standalone, docs)
    for r in range(reps):
        extra = [
            Side(side.label, side.client, make_store(side.client, name=f"{NAME}-rep{r}"))
            for side in (cluster, standalone)
        ]
        try:
            for side in extra:
                await side.store.ensure_index()
            _merge(pair, await grow(extra[0], extra[1], docs))
            for side in extra:  # untimed
                await side.store.forget_by_scope(agent_id=READER)
                await side.client.execute_command(
                    "FT.DROPINDEX", side.store.keys.index, **keyless_route(side.client)
                )
        finally:
            for side in extra:
                await side.store.close()
    return pair


@dataclass(slots=True)
class SizeResult:
    n: int
    rows: list[Row]
    grown: str  # what the remember_many row measured: the growth, and how often


async def run(plan: Plan, cluster: Side, standalone: Side) -> list[SizeResult]:
    data = Data()
    stored: list[Doc] = []
    results = []
    for n in sorted(plan.sizes):
        before = len(stored)
        more = data.docs(n - before, agent=READER)
        batches = math.ceil(len(more) / BATCH)
        reps = max(0, math.ceil(plan.min_batches / batches) - 1) if n <= plan.repeat_below else 0
        log(f"N={n:,}: growing both sides {before:,} -> {n:,} ({batches} batches, {reps} repeats)")
        many = await remember_many_pair(plan, cluster, standalone, more, reps)
        stored += more
        for side in (cluster, standalone):
            held = await side.store.count(agent_id=READER)
            if held != n:
                raise AssertionError(f"{side.label} holds {held} memories, expected {n}")
        log(f"  remember_many: p50 {many.ours.p50 * 1e3:.1f} / {many.raw.p50 * 1e3:.1f} ms")
        grown = f"{before:,} -> {n:,}" + (f", {reps + 1} times" if reps else "")
        rows = await recall_rows(plan, data, cluster, standalone, stored)
        rows.append(await engine_row(plan, data, cluster, standalone, stored))
        rows.append(await remember_row(plan, data, cluster, standalone))
        rows.append(Row(f"remember_many, batches of {BATCH}", many))
        results.append(SizeResult(n, rows, grown))
    return results


# -- report ----------------------------------------------------------------------------------


def _x(r: float) -> str:
    return "-" if math.isnan(r) else f"{r:.2f}x"


def summary_table(results: Sequence[SizeResult]) -> str:
    head = "| scenario | " + " | ".join(f"p50 {r.n:,} | p99 {r.n:,}" for r in results) + " |"
    lines = [head, "|---|" + "---|---|" * len(results)]
    for j, row in enumerate(results[0].rows):
        cells = []
        for r in results:
            pair = r.rows[j].pair
            cells += [_x(pair.ours.p50 / pair.raw.p50), _x(pair.ours.p99 / pair.raw.p99)]
        lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def git_describe() -> str:
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True, check=False
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


async def machine(cluster: Side, standalone: Side, load_start: tuple[float, float, float]) -> list[str]:
    info = await standalone.client.info("server")
    caps = standalone.store.capabilities
    search = f"{caps.engine} {caps.version_string}" if caps else "unknown"
    ccaps = cluster.store.capabilities
    csearch = f"{ccaps.engine} {ccaps.version_string}" if ccaps else "unknown"
    describe = git_describe()
    load_end = os.getloadavg()
    return [
        f"- CPU: {cpu_count()} cores available (nproc), {cpu_model()}; every server and the client share them",
        f"- OS: {platform.system()} {platform.release()}, Python {platform.python_version()}",
        f"- valkey-server {info.get('valkey_version', info.get('redis_version'))}, search module {search} "
        f"(cluster: {csearch}, coordinator on), valkey-py {dist_version('valkey')} "
        f"({'libvalkey' if valkey.utils.LIBVALKEY_AVAILABLE else 'pure-Python'} reply parser), "
        f"numpy {np.__version__}, betterdb-memory {describe}",
        "- load average (1/5/15 min) at start: "
        + " / ".join(f"{x:.2f}" for x in load_start)
        + ", at end: "
        + " / ".join(f"{x:.2f}" for x in load_end),
    ]


def render(
    argv: Sequence[str],
    plan: Plan,
    machine_lines: Sequence[str],
    results: Sequence[SizeResult],
    elapsed: float,
) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# betterdb-memory: 3-primary valkey-search cluster vs standalone (the cost of fan-out)",
        "",
        f"`{' '.join(['bench/bench_cluster.py', *argv])}`, {stamp}, run took {elapsed:.0f} s.",
        "",
        *machine_lines,
        "",
        "Both sides run the same library calls on the same data: a `MemoryStore` on a "
        "`ValkeyCluster` client to a 3-primary cluster (`cluster.sh`, valkey-search with "
        "`--use-coordinator`: a search goes to one node, which fans it out to the three shards "
        "over gRPC and merges the replies), and on a `valkey.asyncio.Valkey` client to one "
        "standalone server (`start.sh`); one binary, no persistence, all on 127.0.0.1. "
        f"k={K}, {DIM}-d seeded random unit vectors passed as `vector=` (no model), HNSW M=16 "
        "EF_CONSTRUCTION=200 EF_RUNTIME=10, the N memories spread over "
        f"{THREADS} thread scopes of one agent; recall with reinforcement off. Cluster and "
        "standalone calls alternate round by round (the order flips every round). `remember` "
        "writes into another agent's scope (deleted, untimed, after the row). `remember_many` is "
        "measured while both indexes grow to N, batch by batch (an HNSW graph only grows: a "
        "deleted vector stays in it), so its latency is an average over the sizes it went "
        f"through; a growth of fewer than {plan.min_batches} batches is repeated on fresh "
        "indexes (each dropped afterwards). The engine-only row sends a hand-written "
        "`FT.SEARCH ... KNN 10 ... NOCONTENT` on the same index through the same clients: the "
        "fan-out's own cost, without the library's fields, parsing and scoring.",
        "",
        "Ratio: cluster ÷ standalone (above 1: the cluster is slower). `n`: samples per side. "
        f"At most {plan.recall_rounds} recall rounds and {plan.write_rounds} single writes per "
        f"side, and at most {plan.budget_s:g} s per row after {plan.warmup} warm-up calls per side.",
        "",
        "## Summary: cluster ÷ standalone",
        "",
        summary_table(results),
        "",
    ]
    for r in results:
        out += [
            f"## {r.n:,} memories",
            "",
            render_rows(r.rows, ours="cluster", raw="standalone"),
            "",
            f"remember_many: latency per batch of {BATCH}, ops/s in memories, measured while both "
            f"indexes grew {r.grown}.",
            "",
        ]
    return "\n".join(out)


# -- main ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> tuple[Plan, Path]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=None, help="comma-separated store sizes (default 1000,10000)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cluster.md")
    parser.add_argument("--quick", action="store_true", help="smoke run: one small size, few rounds")
    args = parser.parse_args(argv)
    plan = QUICK_PLAN if args.quick else DEFAULT_PLAN
    if args.sizes:
        sizes = tuple(int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip())
        if not sizes or any(s < 2 * K * THREADS for s in sizes):
            parser.error(
                f"every size must be at least {2 * K * THREADS} (k={K} hits in each of {THREADS} scopes)"
            )
        plan = replace(plan, sizes=sizes)
    return plan, args.out


async def main(argv: Sequence[str]) -> int:
    plan, out = parse_args(argv)
    path = engine_dir()
    if path is None:
        print(
            f"valkey-search test engine not found at {engine_candidate()}: skipping the cluster benchmark "
            "(set VALKEY_SEARCH_ENGINE to use another)"
        )
        return 0
    started = time.perf_counter()
    load_start = os.getloadavg()
    engine = Engine(path)
    clients: list[Any] = []
    stores: list[MemoryStore] = []
    try:
        log("starting a 3-primary cluster and a standalone server (valkey-search test engine)")
        await asyncio.to_thread(engine.start)
        assert engine.base is not None and engine.port is not None
        cclient = ValkeyCluster(host="127.0.0.1", port=engine.base, decode_responses=False)
        sclient = avalkey.Valkey(host="127.0.0.1", port=engine.port, decode_responses=False)
        clients += [cclient, sclient]
        await cclient.initialize()
        cluster = Side("cluster", cclient, make_store(cclient))
        standalone = Side("standalone", sclient, make_store(sclient))
        stores += [cluster.store, standalone.store]
        for side in (cluster, standalone):
            await side.store.ensure_index()
        results = await run(plan, cluster, standalone)
        machine_lines = await machine(cluster, standalone, load_start)
    finally:
        for store in stores:
            await store.close()
        for client in clients:
            await client.aclose()
        await asyncio.to_thread(engine.stop)
    report = render(argv, plan, machine_lines, results, time.perf_counter() - started)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report + "\n", encoding="utf-8")
    print(report)
    log(f"wrote {out}")
    return 0


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through main's finally: both servers are stopped


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    sys.exit(asyncio.run(main(sys.argv[1:])))
