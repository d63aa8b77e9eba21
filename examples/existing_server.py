"""Use a Valkey you already run (valkey/valkey-bundle, or any Valkey with a search module).

You create and own the client; ``MemoryStore(client=...)`` uses it and ``close()``
leaves it open. Then a ``doctor``-style check of what the store sees: the engine and
its capabilities, the index (``index_info``), the store's counters and settings
(``stats``) and one write/recall/forget round trip, with the index-backed ``count``
of its scope before and after. Exit code 1 if a check fails.

Run against your server::

    docker run -d -p 6379:6379 valkey/valkey-bundle
    VALKEY_URL=valkey://localhost:6379 python examples/existing_server.py

Without ``VALKEY_URL`` it starts the embedded engine in a temporary data dir to stand
in for "your server".
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time

import valkey.asyncio as valkey

from betterdb_memory import MemoryStore
from betterdb_memory.server import EmbeddedServer


class Doctor:
    def __init__(self) -> None:
        self.failed = 0

    def check(self, what: str, ok: bool, detail: str = "") -> None:
        self.failed += not ok
        print(f"  [{'ok' if ok else 'FAIL'}] {what}{': ' + detail if detail else ''}")


async def examine(client: valkey.Valkey, doc: Doctor) -> None:
    doc.check("server answers PING", bool(await client.ping()))
    store = MemoryStore(client=client, name="example-existing")  # the default ONNX embedder
    try:
        await store.ensure_index()
        caps = store.capabilities
        assert caps is not None  # set by ensure_index
        doc.check("search module", True, f"{caps.engine} {caps.version_string} ({', '.join(caps.as_list())})")

        info = await store.index_info()
        doc.check("index exists", info is not None, info.name if info else "missing")
        if info is not None:
            doc.check("index ready", info.ready, f"{info.num_docs} docs, {info.indexing_failures} failures")
            doc.check(
                "dimensions match the embedder",
                info.dimensions == store.embedder.dimensions,
                f"index {info.dimensions}, {store.embedder.model_id} {store.embedder.dimensions}",
            )

        await round_trip(store, doc)
        st = await store.stats()
        doc.check(
            "stats",
            True,
            f"items={st.items} evictions={st.evictions} remembers={st.counters.get('remembers', 0)}"
            f" distance threshold={store.effective_threshold():.2f}",
        )
    finally:
        await store.close()
    doc.check("client still open after store.close() (you own it)", bool(await client.ping()))


async def round_trip(store: MemoryStore, doc: Doctor) -> None:
    t0 = time.perf_counter()
    mid = await store.remember("The doctor was here.", thread_id="doctor-check")
    t1 = time.perf_counter()
    hits = await store.recall("Was the doctor here?", k=1, thread_id="doctor-check", reinforce=False)
    t2 = time.perf_counter()
    stored = await store.count(thread_id="doctor-check")
    forgotten = await store.forget(mid)
    t3 = time.perf_counter()
    left = await store.count(thread_id="doctor-check")
    doc.check(
        "remember / recall / forget",
        bool(hits) and hits[0].item.id == mid and forgotten,
        f"{(t1 - t0) * 1000:.0f} ms (first embedding loads the model) / {(t2 - t1) * 1000:.0f} ms"
        f" / {(t3 - t2) * 1000:.0f} ms",
    )
    doc.check(
        "count reads the index", (stored, left) == (1, 0), f"{stored} in the scope, {left} after forget"
    )


async def main(url: str) -> int:
    client = valkey.Valkey.from_url(url)  # yours: pool size, TLS, auth are your choice
    doc = Doctor()
    try:
        print(f"examining {url}")
        await examine(client, doc)
    finally:
        await client.aclose()
    print("all checks passed" if not doc.failed else f"{doc.failed} check(s) failed")
    return 1 if doc.failed else 0


def run() -> int:
    url = os.environ.get("VALKEY_URL")
    if url:
        return asyncio.run(main(url))
    with tempfile.TemporaryDirectory(prefix="betterdb-existing-") as data_dir:
        server = EmbeddedServer(data_dir=data_dir)
        server.start()
        try:
            return asyncio.run(main(server.url))
        finally:
            server.stop()


if __name__ == "__main__":
    sys.exit(run())
