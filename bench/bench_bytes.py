"""Where a memory's bytes go: ``used_memory`` deltas of this library's writes against raw ones.

bench-1m measured 1.13-1.20x the bytes per memory of "the same documents written raw"
(the reference's fields, plain ``HSET``, numeric keys, into an index of the same schema)
on the valkey-search cluster (issue #29, goal 1.1x). This script writes ``N`` memories
(384-d, bench-1m's texts and scopes) several ways into fresh indexes of the store's schema
and prints each one's bytes per memory, so the difference splits into its parts:

1. ``raw``: bench-1m's raw documents (keys ``<prefix>:mem:<n>``);
2. ``raw, uuid keys``: the same with this library's key shape (a 36-character UUID4 id);
3. ``raw, uuid keys, keep``: plus the ``keep`` field (the NUMERIC keep-score of capacity eviction);
4. ``library``: ``remember_many`` (what a user's writes cost, side keys included).

    .venv/bin/python bench/bench_bytes.py                                  # embedded RediSearch
    PYTHON=.venv/bin/python bash scripts/with-valkey-search.sh standalone \\
        .venv/bin/python bench/bench_bytes.py                              # valkey-search 1.2
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import valkey.asyncio as avalkey

from betterdb_memory import MemoryStore
from betterdb_memory.backend.dialect import keyless_route
from betterdb_memory.core.query import VECTOR_FIELD, create_index_args
from betterdb_memory.embedders import HashingEmbedder

N = int(os.environ.get("BYTES_N", "5000"))
DIM = 384
THREADS = 1000
BATCH = 500


def texts(start: int, n: int) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(7 + start)
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    words = [f"w{i}" for i in range(2000)]
    picks = rng.integers(0, len(words), size=(n, 12))
    return v, [f"memory {start + i}: " + " ".join(words[w] for w in row) for i, row in enumerate(picks)]


async def used(client: Any) -> int:
    await asyncio.sleep(1.0)  # valkey-search indexes on background threads
    return int((await client.info("memory"))["used_memory"])


async def raw(client: Any, store: MemoryStore, label: str, *, uuid_keys: bool, keep: bool) -> float:
    tag = uuid.uuid4().hex[:6]
    prefix, index = f"raw{tag}:mem:", f"raw{tag}:mem:idx"
    spec = store.spec
    caps = store.index.caps
    assert caps is not None
    await client.execute_command(
        *create_index_args(spec.__class__(index, prefix, DIM), caps), **keyless_route(client)
    )
    before = await used(client)
    now = str(int(time.time() * 1000))
    for start in range(0, N, BATCH):
        v, t = texts(start, BATCH)
        pipe = client.pipeline(transaction=False)
        for i in range(BATCH):
            key = f"{prefix}{uuid.uuid4() if uuid_keys else start + i}"
            fields = [
                "content", t[i], VECTOR_FIELD, v[i].tobytes(), "threadId", f"t{(start + i) % THREADS}",
                "agentId", "fleet", "importance", "0.5", "created_at", now, "last_accessed_at", now,
                "access_count", "0",
            ]  # fmt: skip
            if keep:
                fields += ["keep", repr(0.5 + 1e-9 * (start + i))]
            pipe.execute_command("HSET", key, *fields)
        await pipe.execute()
    per = (await used(client) - before) / N
    print(f"| {label} | {per:,.0f} |", flush=True)
    return per


async def library(client: Any) -> tuple[MemoryStore, float]:
    store = MemoryStore(
        client=client, name=f"lib{uuid.uuid4().hex[:6]}", embedder=HashingEmbedder(DIM), discovery=False
    )
    await store.index.ensure_ready()
    before = await used(client)
    for start in range(0, N, BATCH):
        v, t = texts(start, BATCH)
        await store.remember_many(
            [
                {
                    "content": t[i],
                    "vector": v[i],
                    "thread_id": f"t{(start + i) % THREADS}",
                    "agent_id": "fleet",
                }
                for i in range(BATCH)
            ]
        )
    per = (await used(client) - before) / N
    return store, per


async def main() -> None:
    url = os.environ.get("VALKEY_URL")
    server = None
    if url is None:
        from betterdb_memory.server import EmbeddedServer

        server = await asyncio.to_thread(EmbeddedServer(persistence=False).start)
        url = server.url
    client = avalkey.Valkey.from_url(url)
    try:
        # The raw rows go both before and after the library's: what one write leaves behind for
        # the next (valkey-search's text index shares structures between indexes) shows as a
        # difference between the two ``raw`` rows.
        probe = MemoryStore(
            client=client, name=f"probe{uuid.uuid4().hex[:6]}", embedder=HashingEmbedder(DIM), discovery=False
        )
        await probe.index.ensure_ready()
        caps = probe.index.caps
        print(
            f"{N:,} memories of {DIM} dimensions; engine {caps.engine if caps else '?'}; load {os.getloadavg()[0]:.1f}"
        )
        print("| written (in this order) | bytes per memory |\n|---|---|")
        first = await raw(client, probe, "raw (bench-1m's)", uuid_keys=False, keep=False)
        await raw(client, probe, "raw, uuid keys", uuid_keys=True, keep=False)
        await raw(client, probe, "raw, uuid keys, keep", uuid_keys=True, keep=True)
        store, lib = await library(client)
        print(f"| library (`remember_many`) | {lib:,.0f} |")
        last = await raw(client, probe, "raw (bench-1m's), again", uuid_keys=False, keep=False)
        print(f"\nlibrary / raw: {lib / first:.3f}x (first raw row), {lib / last:.3f}x (last)")
        await store.close()
        await probe.close()
    finally:
        await client.aclose()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
