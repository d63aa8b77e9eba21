"""Part C of ``temporal_eval``: the same knowledge updates written WITH subjects, on a real engine.

Every version of every chain (``temporal_data.knowledge_updates``) is written with
``subject=f"{person} {attribute}"`` and its ``valid_from``, in a shuffled order (so
most subjects see past-dated writes) and by 8 concurrent writers; the both-current
pairs are written without a subject. Then, per chain: is the current version the only
one left in the index (recall, list and count see it alone), does ``fact_history``
list every version newest first with the current one marked, and is the current
version the top hit of the question (by the same vectors as part A)?

Runs on a temporary embedded server (the ``embedded`` extra: RediSearch).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from betterdb_memory import MemoryStore

Matrix = npt.NDArray[np.float32]
WRITERS = 8


class _Given:
    """An embedder that is never called: every write and recall here passes its vector."""

    model_id = "bench:given"

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("vectors are given")


async def _run(store: MemoryStore, a: Any, vecs: Matrix, qvecs: Matrix, k: int) -> dict[str, float]:
    stmts = a.stmts
    pos = {s.id: i for i, s in enumerate(stmts)}
    chain_of: dict[str, int] = {}
    items: list[dict[str, Any]] = []
    for c, chain in enumerate(a.chains):
        subject = f"person {chain.entity} {chain.attribute}"
        for s in chain.versions:
            chain_of[s.id] = c
            items.append({"content": s.text, "subject": subject, "valid_from": s.valid_from, "id": s.id})
    for p in a.pairs:
        items += [{"content": s.text, "valid_from": s.valid_from, "id": s.id} for s in (p.older, p.newer)]
    random.Random(26).shuffle(items)
    past_dated = 0
    newest: dict[str, int] = {}
    for it in items:
        subj = it.get("subject")
        if subj is not None:
            past_dated += newest.get(subj, -(2**62)) > it["valid_from"]
            newest[subj] = max(newest.get(subj, -(2**62)), it["valid_from"])
    for it in items:
        it["vector"] = vecs[pos[it["id"]]].tolist()
    queue = list(items)
    t0 = time.perf_counter()

    async def writer() -> None:
        while queue:
            it = queue.pop()
            await store.remember_many([it])

    await asyncio.gather(*(writer() for _ in range(WRITERS)))
    write_s = time.perf_counter() - t0
    live: set[str] = set()
    while True:
        page = await store.list(limit=1000, offset=len(live))
        live |= {i.id for i in page.items}
        if len(page.items) < 1000:
            break
    only_current = history_ok = top_current = stale_shown = 0
    for c, chain in enumerate(a.chains):
        ids = {s.id for s in chain.versions}
        only_current += (live & ids) == {chain.current.id}
        hist = await store.fact_history(f"person {chain.entity} {chain.attribute}", kind="memory")
        expected = [s.id for s in sorted(chain.versions, key=lambda s: s.valid_from, reverse=True)]
        history_ok += [r.id for r in hist] == expected and [r.current for r in hist] == [
            r.id == chain.current.id for r in hist
        ]
        hits = await store.recall_by_vector(qvecs[c].tolist(), k=k, threshold=2.0, reinforce=False)
        first = next((h.item.id for h in hits if h.item.id in ids), None)
        top_current += first == chain.current.id
        stale_shown += any(h.item.id in ids and h.item.id != chain.current.id for h in hits)
    return {
        "chains": len(a.chains),
        "writes": len(items),
        "past_dated": past_dated,
        "only_current": only_current,
        "history_ok": history_ok,
        "top_current": top_current,
        "stale_shown": stale_shown,
        "count": await store.count(),
        "expected_count": len(a.chains) + 2 * len(a.pairs),
        "write_ms": write_s * 1000 / len(items),
    }


async def part_c(a: Any, vecs: Matrix, qvecs: Matrix, k: int) -> dict[str, float]:
    """Write the set with subjects on a temporary embedded server and measure (module docstring)."""
    from betterdb_memory.testing import temporary_store

    embedder: Any = _Given(vecs.shape[1])
    async with temporary_store(embedder=embedder, dimensions=vecs.shape[1]) as store:
        return await _run(store, a, vecs, qvecs, k)
