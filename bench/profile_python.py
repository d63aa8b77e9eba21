"""The library's own Python time per call, with no I/O: recall of 10 hits, single writes.

Issue 29's budget (at most 90 µs per recall of 10 hits and 35 µs per single write) is
the library's Python, not the server's or the network's. This script populates one
store per package on the embedded server, records each scenario's round trips once
(their real replies), then swaps the store's client for a replay client that answers
the recorded replies in order without any I/O (valkey-py's packing and parsing are
not run either). Only the measuring task's commands are replayed; the stores'
background work (stats flush, heartbeat, reinforcement flush) goes to the real server.

``--against DIR``: another version of the package (``DIR/betterdb_memory``, e.g. a
``git worktree`` of an older commit), copied under another name and measured
interleaved with this one, call by call (order flipped every call): on a loaded
machine only such a comparison means anything. ``--profile NAME``: cProfile one
scenario of this package and print its top functions by own time.

    .venv/bin/python bench/profile_python.py                       # this package, p50 µs per call
    git worktree add /tmp/old <commit> && .venv/bin/python bench/profile_python.py --against /tmp/old
    .venv/bin/python bench/profile_python.py --profile "recall_by_vector k=10 (default"

The embedder is a dict lookup (``VectorBook``-like), the threshold 2.0 (every recall
returns its 10 hits), every other option the default (reinforcement on, with its lag:
the recalls that reinforce run on a second store, whose items then carry their lagging
accesses, as a store's repeated recalls do).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import os
import pstats
import shutil
import statistics
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


class _Pipe:
    def __init__(self, owner: Replay) -> None:
        self.owner = owner
        self.names: list[str] = []

    def execute_command(self, *args: Any, **kwargs: Any) -> None:
        self.names.append(str(args[0]))

    def __len__(self) -> int:
        return len(self.names)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self.owner.answer(("pipe", tuple(self.names)))


class Replay:
    """The store's client: records ("rec") or replays ("play") the measuring task's round trips."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.mode = "off"
        self.task: Any = None
        self.tape: list[tuple[Any, Any]] = []
        self.pos = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def _mine(self) -> bool:
        return self.mode != "off" and asyncio.current_task() is self.task

    def answer(self, key: Any) -> Any:
        recorded, reply = self.tape[self.pos]
        self.pos = (self.pos + 1) % len(self.tape)
        if recorded != key:
            raise AssertionError(f"the call sent {key}, the recording has {recorded}")
        return list(reply) if isinstance(reply, list) else reply

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if not self._mine():
            return await self.real.execute_command(*args, **kwargs)
        key = ("cmd", str(args[0]))
        if self.mode == "play":
            return self.answer(key)
        reply = await self.real.execute_command(*args, **kwargs)
        self.tape.append((key, reply))
        return reply

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        if not self._mine():
            return self.real.pipeline(*args, **kwargs)
        if self.mode == "play":
            return _Pipe(self)
        pipe = self.real.pipeline(*args, **kwargs)
        execute = pipe.execute

        async def recording(*a: Any, **k: Any) -> Any:
            names = tuple(str(c[0][0]) for c in pipe.command_stack)
            reply = await execute(*a, **k)
            self.tape.append((("pipe", names), list(reply)))
            return reply

        pipe.execute = recording
        return pipe


def load_against(path: str) -> str:
    """Copy ``path/betterdb_memory`` to a temporary directory as ``bm_against``; its module name."""
    source = Path(path) / "betterdb_memory"
    if not source.is_dir():
        raise SystemExit(f"--against: no betterdb_memory package in {path}")
    target = Path(tempfile.mkdtemp(prefix="profile_python_")) / "bm_against"
    shutil.copytree(source, target)
    sys.path.insert(0, str(target.parent))
    return "bm_against"


async def scenarios(pkg: str, client: Replay, name: str, book: Book, n: int) -> dict[str, Call]:
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
    query = next(t for t in texts if t.startswith("query"))
    writes = memories[n:]
    counter = iter(range(10**12))

    async def by_vector_off() -> None:
        await store.recall_by_vector(book.vectors[query], k=10, reinforce=False)

    async def by_vector() -> None:
        await reinforced.recall_by_vector(book.vectors[query], k=10)

    async def text() -> None:
        await reinforced.recall(query, k=10)

    async def remember() -> None:
        t = writes[next(counter) % len(writes)]
        await store.remember(t, vector=book.vectors[t], thread_id="w", agent_id="a")

    async def remember_embedded() -> None:
        await store.remember(writes[next(counter) % len(writes)], thread_id="w", agent_id="a")

    calls: dict[str, Call] = {
        "recall_by_vector k=10, reinforce=False": by_vector_off,
        "recall_by_vector k=10 (defaults: reinforcement)": by_vector,
        "recall k=10 (defaults: hybrid, reinforcement)": text,
        "remember, vector given": remember,
        "remember, embedded (dict lookup)": remember_embedded,
    }
    client.task = asyncio.current_task()
    tapes: dict[str, list[tuple[Any, Any]]] = {}
    for label, call in calls.items():
        for _ in range(3):  # the index ready, scripts loaded, caches warm
            await call()
        client.mode, client.tape, client.pos = "rec", [], 0
        await call()
        tapes[label] = client.tape
        client.mode = "off"

    def replayed(label: str, call: Call) -> Call:
        async def run() -> None:
            if client.tape is not tapes[label]:
                client.tape, client.pos = tapes[label], 0
            await call()

        return run

    store_calls = {label: replayed(label, call) for label, call in calls.items()}

    async def close() -> None:
        await store.close()
        await reinforced.close()

    store_calls["__close__"] = close
    return store_calls


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
    args = parser.parse_args(argv)
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
    q = vectors[3] + rng.standard_normal(DIM).astype(np.float32) / 20
    book.vectors["query: which seats and meals does the user prefer on flights?"] = q / np.linalg.norm(q)

    server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    real = avalkey.Valkey.from_url(server.url)
    clients: list[Replay] = []
    stores: dict[str, dict[str, Call]] = {}
    try:
        for i, pkg in enumerate(pkgs):
            client = Replay(real)
            clients.append(client)
            stores[pkg] = await scenarios(pkg, client, f"pp{i}", book, args.n)
        for client in clients:
            client.mode = "play"
        labels = [label for label in stores[pkgs[-1]] if label != "__close__"]
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
                f"\n{label}: top {args.top} by own time ({args.calls} calls; the profiler inflates Python)\n"
            )
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            return
        head = " | ".join(f"{p} µs p50" for p in pkgs)
        print(f"\n| scenario | {head} |" + (" new ÷ old |" if len(pkgs) > 1 else ""))
        print("|---|" + "---|" * len(pkgs) + ("---|" if len(pkgs) > 1 else ""))
        for label in labels:
            times: dict[str, list[float]] = {p: [] for p in pkgs}
            for p in pkgs:
                for _ in range(100):
                    await stores[p][label]()
            clock = time.perf_counter
            for i in range(args.calls):
                for p in pkgs if i % 2 == 0 else pkgs[::-1]:
                    call = stores[p][label]
                    t0 = clock()
                    await call()
                    times[p].append(clock() - t0)
            p50 = {p: statistics.median(times[p]) * 1e6 for p in pkgs}
            cells = " | ".join(f"{p50[p]:.1f}" for p in pkgs)
            ratio = f" {p50[pkgs[-1]] / p50[pkgs[0]]:.2f} |" if len(pkgs) > 1 else ""
            print(f"| {label} | {cells} |{ratio}")
        load = os.getloadavg()
        print(f"\nload average at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")
    finally:
        for client in clients:
            client.mode = "off"
        for calls in stores.values():
            await calls["__close__"]()
        await real.aclose()
        await asyncio.to_thread(server.stop)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
