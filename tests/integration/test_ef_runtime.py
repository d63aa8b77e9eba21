"""``hnsw_ef_runtime`` reaches every KNN walk, on every engine (issue 29's CI flake, found in stop 42).

valkey-search 1.2.1 on a cluster walks a KNN that names no ``EF_RUNTIME`` with EF = K, not
the index's: here 9 of the 40 recalls missed a nearest memory on the cluster before the fix
(none standalone), and the store's ``hnsw_ef_runtime`` changed nothing. Every KNN now names the index's EF there
(``Capabilities.knn_names_ef``). Held here the way a user sees it: with EF_RUNTIME 200 over a
graph of a few hundred memories the walk is exact, so every small-k recall equals a
brute-force cosine ranking computed in the test.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from tests.integration.test_scope_scan import DIM, _exact, _recall, _same, _unit

pytestmark = pytest.mark.integration


async def test_small_k_recalls_are_exact_with_a_large_ef_runtime(
    make_store: Callable[..., MemoryStore],
) -> None:
    rng = random.Random(4242)
    store = make_store(embedder=HashingEmbedder(dimensions=DIM), hnsw_ef_runtime=200)
    written: dict[str, dict[str, object]] = {}
    items = []
    for i in range(240):
        vector = _unit(rng)
        thread = ("ta", "tb", "tc")[i % 3]
        items.append({"content": f"memory {i}", "thread_id": thread, "vector": vector, "importance": 0.5})
        written[f"#{i}"] = {"thread": thread, "vector": vector}
    ids = await store.remember_many(items)  # type: ignore[arg-type]
    written = {mid: written[f"#{i}"] for i, mid in enumerate(ids)}
    misses = []
    for n in range(40):
        query, k = _unit(rng), 1 + n % 4
        thread = ("ta", "tb", "tc")[n % 3]
        keep = (lambda m, t=thread: m["thread"] == t) if n % 2 else (lambda m: True)
        scope = {"thread_id": thread} if n % 2 else {}
        got = await _recall(store, query, k, **scope)
        want = _exact(written, query, k, keep)
        if [g[0] for g in got] != [w[0] for w in want]:
            misses.append((n, k, scope))
        else:
            _same(got, want)
    assert misses == [], f"{len(misses)} of 40 recalls missed a nearest memory"
