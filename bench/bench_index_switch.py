"""The index switch at scale: an old-schema store of N memories migrated while recall runs.

On its own embedded server (no persistence): an index with the schema of betterdb-memory
before issue 26 (no ``valid_from`` / ``state_from`` / ``subject_key``) over N memories
written as raw HSETs (seeded random 384-d unit vectors, so no model runs; each memory's
metadata holds a ``priority``). Then ``IndexManager.migrate`` with a declared numeric field
(``priority``: the document backfill has work to do), while one task recalls by vector
continuously (``recall_by_vector`` k=10, reinforce off). Reported:

- the document backfill (``meta_priority`` + ``present`` written from each memory's metadata),
- the engine's build of ``g1`` (FT.CREATE until FT.INFO says ready),
- the switch itself (the compare-and-set script),
- the reference name's rebuild (drop + FT.CREATE ``<name>:mem:idx`` until ready: the window
  in which betterdb-agent-memory and Monitor see a partial index),
- recall latency p50/p99 before, and during each phase, and whether any recall missed the
  memory whose own vector it searched with (it must not).

    .venv/bin/python bench/bench_index_switch.py --size 100000
    .venv/bin/python bench/bench_index_switch.py --size 20000 --engine-url valkey://...   # another server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from typing import Any

import numpy as np
import valkey.asyncio as avalkey

from betterdb_memory import MemoryStore
from betterdb_memory.backend.index import IndexManager
from betterdb_memory.backend.index_switch import IndexSwitch
from betterdb_memory.core.filter_fields import MetadataFields
from betterdb_memory.core.query import create_index_args
from betterdb_memory.embedders import HashingEmbedder
from betterdb_memory.errors import BetterDBMemoryError
from betterdb_memory.server import EmbeddedServer

DIM = 384
_NEW = {"valid_from", "state_from", "subject_key"}


def old_create_args(store: MemoryStore) -> list[str]:
    args = create_index_args(store.index.spec, store.index.caps)
    schema = args.index("SCHEMA") + 1
    out, i = args[:schema], schema
    while i < len(args):
        if args[i] in _NEW:
            i += 3 if args[i] == "subject_key" else 2
            continue
        out.append(args[i])
        i += 1
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000


async def load(client: Any, prefix: str, vectors: np.ndarray[Any, Any], batch: int = 1000) -> None:
    now = int(time.time() * 1000)
    for start in range(0, len(vectors), batch):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(len(vectors), start + batch)):
            pipe.hset(
                f"{prefix}{uuid.UUID(int=i)}",
                mapping={
                    "content": f"memory {i}",
                    "vector": vectors[i].tobytes(),
                    "importance": "0.5",
                    "tags": "",
                    "created_at": str(now - (len(vectors) - i) * 10),
                    "last_accessed_at": str(now),
                    "access_count": "0",
                    "source": "bench",
                    "threadId": f"t{i % 20}",
                    "agentId": "a",
                    "namespace": "",
                    "metadata": json.dumps({"priority": i % 5}),
                },
            )
        await pipe.execute()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--engine-url", default=None, help="an existing server (default: an embedded one)")
    args = ap.parse_args()
    server = None if args.engine_url else await asyncio.to_thread(EmbeddedServer(persistence=False).start)
    url = args.engine_url or server.url  # type: ignore[union-attr]
    client = avalkey.Valkey.from_url(url)
    name = f"bench{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((args.size, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embedder = HashingEmbedder(DIM)
    store = MemoryStore(client=client, name=name, embedder=embedder, config_refresh=False)
    try:
        store.index.capabilities = await store.backend.probe()
        caps = store.index.capabilities
        await store.backend.search("bench", old_create_args(store))
        t = time.monotonic()
        await load(client, store.keys.doc_prefix, vectors)
        await IndexSwitch(store.index)._wait_ready(store.keys.index)
        print(f"loaded {args.size} memories into the old-schema index in {time.monotonic() - t:.1f}s")
        store.index.auto_migrate = False
        await store.index.ensure_ready()
        assert store.index.outdated, "the index should be outdated"

        phase = "before"
        latencies: dict[str, list[float]] = {}
        misses: dict[str, int] = {}
        errors: dict[str, int] = {}
        stop = asyncio.Event()

        async def recalls() -> None:
            i = 0
            while not stop.is_set():
                j = (i * 7919) % args.size
                t0 = time.monotonic()
                try:
                    hits = await store.recall_by_vector(
                        vectors[j].tolist(), k=10, reinforce=False, threshold=2.0
                    )
                except BetterDBMemoryError:
                    errors[phase] = errors.get(phase, 0) + 1
                    continue
                finally:
                    latencies.setdefault(phase, []).append(time.monotonic() - t0)
                    i += 1
                if not any(h.item.content == f"memory {j}" for h in hits):
                    misses[phase] = misses.get(phase, 0) + 1

        task = asyncio.create_task(recalls())
        await asyncio.sleep(5)
        declared = MetadataFields.of({"priority": "numeric"})
        manager = IndexManager(
            store.backend, store.keys, embedder, metadata_fields=declared, auto_migrate=False
        )
        manager.capabilities = caps
        manager.settle_seconds = 0.0
        await manager.ensure_ready()
        t = time.monotonic()

        def on_phase(name: str) -> None:
            nonlocal phase
            phase = name

        report = await manager.migrate(on_phase=on_phase)
        total = time.monotonic() - t
        phase = "after"
        await asyncio.sleep(3)
        stop.set()
        await task
        print(
            f"engine: {caps.engine} {caps.version_string}; size {args.size}; loaded machine (2 cores shared)"
        )
        print(
            f"document backfill {report.backfill_seconds:.1f}s ({report.backfilled} written); "
            f"g1 build {report.build_seconds:.1f}s; switch {report.switch_seconds * 1000:.1f} ms; "
            f"reference rebuild {report.reference_seconds:.1f}s; whole migration {total:.1f}s"
        )
        for ph, values in latencies.items():
            print(
                f"recall {ph:>9}: n={len(values)} p50={pct(values, 0.5):.1f} ms "
                f"p99={pct(values, 0.99):.1f} ms mean={statistics.mean(values) * 1000:.1f} ms "
                f"self-misses={misses.get(ph, 0)} errors={errors.get(ph, 0)}"
            )
    finally:
        await store.close()
        await client.flushall()
        await client.aclose()
        if server is not None:
            await asyncio.to_thread(server.stop)


if __name__ == "__main__":
    asyncio.run(main())
