"""What the subjects' repair look costs a read (issue 26): before it went beside the read, and now.

Every store read looks at the journal of unsettled subject writes (``ZRANGE
<name>:subj:pending``) at most once a second (``tiers.subject_repair``). A store read less
often than that looked on every read. ``before``: the look, then the read (the code up to
this change: ``SubjectRepair.before`` ahead of the read); ``after``: the look beside the
read (``SubjectRepair.read``, the library as it is). Each read here comes 1.5 s (``--gap``)
after its store's previous one, so every read of both columns looks.

Six stores on one name and one client (``before`` / ``after`` x ``get`` / ``list`` /
``recall_by_vector``), over one populated store (``--size`` memories in 20 threads, some
with subjects). Each round reads once through each of the six, in an order that flips
every round (a busy shared host slows both columns alike), each read waiting (untimed)
until its store's previous read is ``--gap`` old.
Reported per operation: p50 / p99 of each column and their ratio, server calls per read
(``INFO commandstats`` deltas around each read, outside its timing; commands a script
runs count too), the backend calls of each read and how many of them it waited for one
after another, this process's CPU per read, and how many reads looked. ``--rtt-ms``
adds a sleep to every backend call of both columns, standing for a network between the
client and the server (on one loaded host, a localhost round trip is mostly CPU, which
running two requests at once does not save).

    .venv/bin/python bench/bench_probe.py                       # embedded RediSearch
    PYTHON=.venv/bin/python bash scripts/with-valkey-search.sh standalone \\
        .venv/bin/python bench/bench_probe.py --url "$VALKEY_URL"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from bench_1m import commandstats_total  # noqa: E402

from betterdb_memory import HashingEmbedder, MemoryStore  # noqa: E402

THREADS = 20
OPS = ("get", "list", "recall_by_vector")
MODES = ("before", "after")


class Calls:
    """A store's backend calls per read: how many, and how deep (calls in flight together share a depth)."""

    def __init__(self, store: MemoryStore, rtt: float = 0.0) -> None:
        self.journal = f"{store.keys.name}:subj:pending"
        self.rtt = rtt  # seconds added to each backend call: a network's round trip (``--rtt-ms``)
        self.depth = self.count = self._ended = 0
        self.looked = False
        backend = store.backend
        for name in ("pipeline", "search", "command"):
            setattr(backend, name, self._wrap(getattr(backend, name)))

    def reset(self) -> None:
        self.depth = self.count = self._ended = 0
        self.looked = False

    def _wrap(self, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def counted(operation: str, *args: Any, **kwargs: Any) -> Any:
            depth = self._ended + 1
            self.depth, self.count = max(self.depth, depth), self.count + 1
            steps = args[0] if args and isinstance(args[0], list | tuple) else args
            self.looked |= any(isinstance(s, tuple) and s[:2] == ("ZRANGE", self.journal) for s in steps)
            try:
                if self.rtt:
                    await asyncio.sleep(self.rtt)
                return await fn(operation, *args, **kwargs)
            finally:
                self._ended = max(self._ended, depth)

        return counted


def looks_first(store: MemoryStore) -> None:
    """``before``: the read runs after the look and its repair, as every read did before this change."""
    repair = store._long_term.subjects.repair

    async def read(operation: str, fn: Callable[[], Awaitable[Any]], /, *, beside: bool = True) -> Any:
        await repair.before(operation)
        return await fn()

    store._rt.read = read


async def run(args: argparse.Namespace) -> str:
    name = f"probe-{uuid.uuid4().hex[:8]}"
    embedder = HashingEmbedder(dimensions=args.dim)
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as data_dir:
        first = await MemoryStore.connect(args.url, name=name, data_dir=data_dir, embedder=embedder)
        try:
            items: list[dict[str, Any]] = [
                {"content": f"note {i} about topic {i % 97}", "thread_id": f"t{i % THREADS}"}
                for i in range(args.size)
            ]
            ids: list[str] = []
            for n in range(0, len(items), 500):
                ids += await first.remember_many(items[n : n + 500])
            for i in range(args.subjects):  # subjects: the journal is written and settled
                await first.remember(f"lives in city {i}", subject=f"home {i}", thread_id="t0")
            vector = [float(x) for x in (await embedder.embed(["note about topic 5"]))[0]]
            stores: dict[tuple[str, str], MemoryStore] = {}
            calls: dict[tuple[str, str], Calls] = {}
            for mode in MODES:
                for op in OPS:
                    s = MemoryStore(client=first.client, name=name, embedder=embedder)
                    if mode == "before":
                        looks_first(s)
                    await s.count()  # the index known ready; a first look
                    stores[(mode, op)], calls[(mode, op)] = s, Calls(s, args.rtt_ms / 1000)
            reads: dict[str, Callable[[MemoryStore, int], Awaitable[Any]]] = {
                "get": lambda s, r: s.get(ids[(r * 7919) % len(ids)]),
                "list": lambda s, r: s.list(thread_id=f"t{r % THREADS}", limit=20),
                "recall_by_vector": lambda s, r: s.recall_by_vector(
                    vector, k=10, thread_id=f"t{r % THREADS}"
                ),
            }
            lat: dict[tuple[str, str], list[float]] = {key: [] for key in stores}
            server: dict[tuple[str, str], list[int]] = {key: [] for key in stores}
            depth: dict[tuple[str, str], list[int]] = {key: [] for key in stores}
            count: dict[tuple[str, str], list[int]] = {key: [] for key in stores}
            cpu: dict[tuple[str, str], list[float]] = {key: [] for key in stores}
            looked: dict[tuple[str, str], int] = dict.fromkeys(stores, 0)
            last = dict.fromkeys(stores, time.monotonic())
            order = [(m, op) for op in OPS for m in MODES]
            for r in range(args.rounds):
                for key in order if r % 2 == 0 else order[::-1]:
                    # every read ``gap`` after its store's previous one (so every read looks)
                    await asyncio.sleep(max(0.0, last[key] + args.gap - time.monotonic()))
                    last[key] = time.monotonic()
                    s, c = stores[key], calls[key]
                    before = await commandstats_total(first.client)
                    c.reset()
                    c0, t0 = time.process_time(), time.perf_counter()
                    await reads[key[1]](s, r)
                    lat[key].append(time.perf_counter() - t0)
                    cpu[key].append(time.process_time() - c0)
                    server[key].append(await commandstats_total(first.client) - before)
                    depth[key].append(c.depth)
                    count[key].append(c.count)
                    looked[key] += int(c.looked)
            for s in stores.values():
                await s.close()
        finally:
            await first.close()
    ms = {k: sorted(v) for k, v in lat.items()}

    def p(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000

    load = os.getloadavg()
    out = [
        f"Engine: {args.engine}; {args.size} memories, {args.rounds} rounds, a read per store every "
        f"{args.gap} s; {args.rtt_ms} ms added to each backend call; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) at the end.",
        "",
        "| read | before p50 | after p50 | after ÷ before | before p99 | after p99 "
        "| server calls / read (before, after) | backend calls / read | sequential round trips "
        "| client CPU / read | reads that looked |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for op in OPS:
        b, a = ("before", op), ("after", op)
        out.append(
            f"| {op} | {p(ms[b], 0.5):.2f} ms | {p(ms[a], 0.5):.2f} ms | "
            f"{statistics.median(ms[a]) / statistics.median(ms[b]):.2f}x | {p(ms[b], 0.99):.2f} ms | "
            f"{p(ms[a], 0.99):.2f} ms | {statistics.mean(server[b]):.2f}, {statistics.mean(server[a]):.2f} | "
            f"{statistics.mean(count[b]):.2f}, {statistics.mean(count[a]):.2f} | "
            f"{statistics.median(depth[b]):.0f}, {statistics.median(depth[a]):.0f} | "
            f"{statistics.median(cpu[b]) * 1000:.2f}, {statistics.median(cpu[a]) * 1000:.2f} ms | "
            f"{looked[b]}/{args.rounds}, {looked[a]}/{args.rounds} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=os.environ.get("VALKEY_URL"))
    ap.add_argument("--engine", default=None, help="the label of the engine in the report")
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--subjects", type=int, default=20)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=120)
    ap.add_argument("--gap", type=float, default=1.5)
    ap.add_argument(
        "--rtt-ms", type=float, default=0.0, help="added to each backend call: a network's round trip"
    )
    ap.add_argument("--out", default=None, help="also write the report to this markdown file")
    args = ap.parse_args()
    args.engine = args.engine or ("embedded RediSearch" if args.url is None else args.url)
    report = asyncio.run(run(args))
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
