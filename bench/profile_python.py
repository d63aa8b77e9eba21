"""The library's own Python time per call, with no I/O: recall of 10 hits, single writes.

Issue 29's budget (at most 90 µs per recall of 10 hits and 35 µs per single write) is
the library's Python, not the server's or the network's. This script populates one
store per package on the embedded server, records 20 calls of each scenario (their
real round trips), then answers them again with ``profile_store.py``'s stand-ins
(``_noio.Replay``: no socket, no valkey-py packing or parsing) and reports the same
figure as that script's no-I/O pass: *library µs* = the replayed call's p50 minus the
stand-ins' own p50. Only the measured calls are replayed; the stores' background work
(stats flush, heartbeat, reinforcement flush) goes to the real server. Every scenario of
every package is timed interleaved, call by call, with ``_noio.reference_work`` in the
same rounds (compare runs by it).

How it differs from ``profile_store.py``'s pass, on purpose: 1,000 memories (not 10,000:
a recall of 10 reads ten rows either way), the reinforcement rows (hits whose accesses
lag), and ``--against`` (two versions of the package in one process). Before
2026-12-02 this script replayed through a proxy client whose own cost (a task lookup
per command, a copy per reply) was counted as the library's, and timed one scenario
after the other: its absolute figures were not comparable with ``profile_store.py``'s.

``--against DIR``: another version of the package (``DIR/betterdb_memory``, e.g. a
``git worktree`` of an older commit), copied under another name and measured
interleaved with this one, call by call (order rotated every call): on a loaded
machine only such a comparison means anything. ``--profile NAME``: cProfile one
scenario of this package and print its top functions by own time.

    .venv/bin/python bench/profile_python.py                       # this package, p50 µs per call
    git worktree add /tmp/old <commit> && .venv/bin/python bench/profile_python.py --against /tmp/old
    .venv/bin/python bench/profile_python.py --profile "recall_by_vector k=10 (default"
    .venv/bin/python bench/profile_python.py --against /tmp/old --cpu   # a loaded machine: CPU time

The embedder is a dict lookup (``VectorBook``-like), the threshold 2.0 (every recall
returns its 10 hits), every other option the default (reinforcement on, with its lag:
the recalls that reinforce run on a second store, whose items then carry their lagging
accesses, as a store's repeated recalls do).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import valkey.asyncio as avalkey
from prometheus_client import CollectorRegistry

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package first

from _noio import Replay, reference_work

DIM = 384
Call = Callable[[], Awaitable[Any]]


class Book:
    """The embedder: vectors computed up front, looked up by text."""

    dimensions = DIM
    model_id = "bench-book"

    def __init__(self) -> None:
        self.vectors: dict[str, Any] = {}

    async def embed(self, texts: list[str]) -> Any:
        return np.stack([self.vectors[t] for t in texts])


def load_against(path: str) -> str:
    """Copy ``path/betterdb_memory`` to a temporary directory as ``bm_against``; its module name."""
    source = Path(path) / "betterdb_memory"
    if not source.is_dir():
        raise SystemExit(f"--against: no betterdb_memory package in {path}")
    target = Path(tempfile.mkdtemp(prefix="profile_python_")) / "bm_against"
    shutil.copytree(source, target)
    sys.path.insert(0, str(target.parent))
    return "bm_against"


async def scenarios(pkg: str, client: Any, name: str, book: Book, n: int) -> dict[str, Call]:
    """Two populated stores of package ``pkg`` and their scenarios (each recorded once).

    The recalls that reinforce run on a store of their own: their hits' lagging accesses
    (``tiers.reinforce``) would otherwise be in the other recall's items too.
    """
    texts = sorted(book.vectors)
    memories = [t for t in texts if t.startswith("memory ")]
    made = []
    for suffix in ("", "r"):
        made.append(
            importlib.import_module(f"{pkg}.store").MemoryStore(
                client=client,
                name=name + suffix,
                embedder=book,
                default_threshold=2.0,
                registry=CollectorRegistry(),
            )
        )
        for i in range(0, n, 500):
            await made[-1].remember_many(
                [
                    {"content": t, "vector": book.vectors[t], "thread_id": f"t{j % 20}", "agent_id": "a"}
                    for j, t in enumerate(memories[i : min(n, i + 500)], start=i)
                ]
            )
    store, reinforced = made
    queries = [t for t in texts if t.startswith("query")]  # recorded call i asks queries[i % len(queries)]
    writes = memories[n:]
    counter = iter(range(10**12))

    async def by_vector_off(i: int) -> None:
        await store.recall_by_vector(book.vectors[queries[i % len(queries)]], k=10, reinforce=False)

    async def by_vector(i: int) -> None:
        await reinforced.recall_by_vector(book.vectors[queries[i % len(queries)]], k=10)

    async def text(i: int) -> None:
        await reinforced.recall(queries[i % len(queries)], k=10)

    async def text_off(i: int) -> None:
        await store.recall(queries[i % len(queries)], k=10, reinforce=False)

    async def remember(i: int) -> None:
        t = writes[next(counter) % len(writes)]
        await store.remember(t, vector=book.vectors[t], thread_id="w", agent_id="a")

    async def remember_embedded(i: int) -> None:
        await store.remember(writes[next(counter) % len(writes)], thread_id="w", agent_id="a")

    calls: dict[str, Callable[[int], Awaitable[Any]]] = {
        "recall_by_vector k=10, reinforce=False": by_vector_off,
        "recall_by_vector k=10 (defaults: reinforcement)": by_vector,
        "recall k=10 (defaults: hybrid, reinforcement)": text,
        "recall k=10 (hybrid, reinforce=False)": text_off,
        "remember, vector given": remember,
        "remember, embedded (dict lookup)": remember_embedded,
    }
    store_calls: dict[str, Call] = {}
    for label, call in calls.items():
        for i in range(RECORDED):  # the index ready, scripts loaded, caches warm, word counts learnt
            await call(i)
        replay = Replay(client)
        for i in range(RECORDED):
            await replay.record(call, i)
        store_calls[label] = replayed(replay, call)

    async def close() -> None:
        await store.close()
        await reinforced.close()

    store_calls["__close__"] = close
    return store_calls


RECORDED = 20  # calls recorded per scenario (replayed in turn)
# The clock the replayed calls are timed by: wall time, or (``--cpu``) this thread's CPU time.
CLOCK = {"clock": time.perf_counter}


def quantile(samples: list[float], q: float) -> float:
    """The ``q`` quantile of ``samples`` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def replayed(replay: Replay, call: Callable[[int], Awaitable[Any]]) -> Call:
    """``call`` answered from its recordings: returns (library seconds, stand-ins' seconds)."""
    turn = iter(range(10**12))

    async def run() -> tuple[float, float]:
        i = next(turn) % RECORDED
        clock = CLOCK["clock"]
        with replay.replaying():
            replay.begin(i)
            t0 = clock()
            await call(i)
            t1 = clock()
            await replay.stand_ins(i)
            t2 = clock()
        return t1 - t0, t2 - t1

    return run


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000, help="memories in each store (default 1000)")
    parser.add_argument(
        "--calls", type=int, default=3000, help="calls per scenario and package (default 3000)"
    )
    parser.add_argument("--against", metavar="DIR", help="a checkout holding another betterdb_memory")
    parser.add_argument("--profile", metavar="NAME", help="cProfile the scenario whose name contains NAME")
    parser.add_argument("--top", type=int, default=10, help="functions listed by --profile (default 10)")
    parser.add_argument(
        "--quantile", type=float, default=0.5,
        help="the quantile of each scenario's times reported (default 0.5, the p50; on a loaded machine 0.1, "
        "the quietest tenth, is nearer what a quiet machine gives)",
    )  # fmt: skip
    parser.add_argument(
        "--queries", type=int, default=1,
        help="recalls ask this many queries in turn (default 1: one query text; more: numbered texts as "
        f"profile_store.py's, a word each never seen before; at most {RECORDED} are recorded)",
    )  # fmt: skip
    parser.add_argument(
        "--cpu", action="store_true",
        help="time by this thread's CPU time (time.thread_time), not wall time: on a loaded machine a "
        "call of a millisecond is often descheduled partway, which wall time counts and CPU time does not",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.cpu:
        CLOCK["clock"] = time.thread_time
    from betterdb_memory.server import EmbeddedServer

    pkgs = ["betterdb_memory"] if args.against is None else [load_against(args.against), "betterdb_memory"]
    rng = np.random.default_rng(7)
    book = Book()
    vectors = rng.standard_normal((args.n + 200, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for i, v in enumerate(vectors):
        book.vectors[
            f"memory {i:07d}: the user prefers window seats and vegetarian meals on long flights"
        ] = v
    if args.queries == 1:
        q = vectors[3] + rng.standard_normal(DIM).astype(np.float32) / 20
        book.vectors["query: which seats and meals does the user prefer on flights?"] = q / np.linalg.norm(q)
    for j in range(args.queries if args.queries > 1 else 0):  # as profile_store.py's: a number each
        q = vectors[int(rng.integers(0, args.n))] + rng.standard_normal(DIM).astype(np.float32) / np.sqrt(DIM)
        text = f"query {args.n + 200 + j}: which seats and meals does the user prefer on flights?"
        book.vectors[text] = (q / np.linalg.norm(q)).astype(np.float32)

    server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    real = avalkey.Valkey.from_url(server.url)
    stores: dict[str, dict[str, Call]] = {}
    try:
        for i, pkg in enumerate(pkgs):
            stores[pkg] = await scenarios(pkg, real, f"pp{i}", book, args.n)
        labels = [label for label in stores[pkgs[-1]] if label != "__close__"]
        gc.collect()
        load = os.getloadavg()
        print(f"load average (1/5/15 min) {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; {args.n} memories")
        if args.profile:
            label = next(x for x in labels if args.profile in x)
            call = stores[pkgs[-1]][label]
            for _ in range(200):
                await call()
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                await call()
            prof.disable()
            print(
                f"\n{label}: top {args.top} by own time ({args.calls} calls, the replay's stand-ins included; "
                "the profiler inflates Python)\n"
            )
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            return
        pct = f"p{args.quantile * 100:g}"
        head = " | ".join(f"{p} µs {pct}" for p in pkgs)
        print(
            f"\nlibrary µs = replayed call {pct} - the stand-ins' own {pct} (as profile_store.py's no-I/O pass); "
            "every scenario and package interleaved call by call"
            + ("; timed by this thread's CPU time (--cpu)" if args.cpu else "")
        )
        print(f"\n| scenario | {head} |" + (" new ÷ old |" if len(pkgs) > 1 else ""))
        print("|---|" + "---|" * len(pkgs) + ("---|" if len(pkgs) > 1 else ""))
        runs = [(label, p) for label in labels for p in pkgs]
        call_s: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
        stand_s: dict[tuple[str, str], list[float]] = {r: [] for r in runs}
        reference: list[float] = []
        for label, p in runs:
            for _ in range(50):
                await stores[p][label]()
        for i in range(args.calls):
            # Labels rotated, and the two packages' calls of a label in turn, their order flipped every
            # round: each package follows the other's same call as often as it precedes it (the one run
            # second finds the shared code - numpy, valkey-py, prometheus - warm in the CPU's caches).
            shift = i % len(labels)
            order = pkgs if i % 2 == 0 else pkgs[::-1]
            for label, p in [(lb, q) for lb in [*labels[shift:], *labels[:shift]] for q in order]:
                lib, stand = await stores[p][label]()
                call_s[(label, p)].append(lib)
                stand_s[(label, p)].append(stand)
            t0 = CLOCK["clock"]()
            reference_work()
            reference.append(CLOCK["clock"]() - t0)
        for label in labels:
            us = {
                p: (
                    quantile(call_s[(label, p)], args.quantile) - quantile(stand_s[(label, p)], args.quantile)
                )
                * 1e6
                for p in pkgs
            }
            cells = " | ".join(f"{us[p]:.1f}" for p in pkgs)
            ratio = f" {us[pkgs[-1]] / us[pkgs[0]]:.2f} |" if len(pkgs) > 1 else ""
            print(f"| {label} | {cells} |{ratio}")
        load = os.getloadavg()
        print(
            f"\nreference work (_noio.reference_work, timed in the same rounds): "
            f"{quantile(reference, args.quantile) * 1e6:.1f} µs {pct}"
        )
        print(f"load average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    finally:
        for calls in stores.values():
            await calls["__close__"]()
        await real.aclose()
        await asyncio.to_thread(server.stop)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
