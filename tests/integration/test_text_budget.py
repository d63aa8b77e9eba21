"""Hybrid recall when its full-text side times out or fails: the KNN candidates alone, counted.

The text queries are forced to fail at the transport (the store's backend answers them
with the error valkey-search 1.2.1's cluster gave, or never answers), on the real
engine otherwise: the KNN and everything after it run for real.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.errors import QuerySyntaxError, ServerError

pytestmark = pytest.mark.integration

DIM = 64
QUERY = "Which city is Zanzibarite Priya moving to?"


def unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()


def is_text(searches: Sequence[Sequence[Any]]) -> bool:
    return any("@content:" in str(s[2]) for s in searches if len(s) > 2)


async def seed(store: MemoryStore) -> tuple[set[str], str]:
    """Two memories near the query (the KNN's two) and the answer, far from it: only its words find it."""
    [qv] = (await store.embedder.embed([QUERY])).tolist()
    near = set()
    for s, text in ((3, "The weather was mild all week."), (4, "We talked about nothing much.")):
        close = np.asarray(qv) + 1.5 * np.asarray(unit(s))
        near.add(await store.remember(text, vector=(close / np.linalg.norm(close)).tolist(), thread_id="h"))
    answer = await store.remember(
        "Zanzibarite Priya is moving to Porto in May.", vector=unit(1), thread_id="h"
    )
    await store.index.ensure_ready()
    return near, answer


def failing_text(store: MemoryStore, fail: Callable[[], Any]) -> list[int]:
    """Make the store's text queries fail with ``fail()`` (KNN and everything else untouched)."""
    backend = store._rt.backend
    real = backend.pipeline
    calls = [0]

    async def pipeline(operation: str, commands: Sequence[Any], **kw: Any) -> list[Any]:
        if is_text(kw.get("searches", ())):
            calls[0] += 1
            return await fail()
        return await real(operation, commands, **kw)

    backend.pipeline = pipeline  # type: ignore[method-assign]
    return calls


def degraded(registry: CollectorRegistry, store: MemoryStore, reason: str) -> float:
    value = registry.get_sample_value(
        "agent_memory_recall_degraded_total", {"store_name": store.name, "reason": reason}
    )
    return value or 0.0


@pytest.fixture
def make(make_store: Callable[..., MemoryStore]) -> Callable[..., tuple[MemoryStore, CollectorRegistry]]:
    def factory(**options: Any) -> tuple[MemoryStore, CollectorRegistry]:
        registry = CollectorRegistry()
        store = make_store(
            embedder=HashingEmbedder(DIM), discovery=False, rerank_candidates=2, registry=registry, **options
        )
        return store, registry

    return factory


async def test_the_text_side_answers_normally_with_its_timeout(make: Callable[..., Any]) -> None:
    """The engine accepts TIMEOUT on the text queries, and the answer is found by its words (not degraded)."""
    store, registry = make()
    _, answer = await seed(store)
    if not store._recall._text.available():
        pytest.skip("no TEXT fields on this engine (valkey-search 1.0): KNN only")
    sent: list[Sequence[Any]] = []
    real = store._rt.backend.pipeline

    async def spy(operation: str, commands: Sequence[Any], **kw: Any) -> list[Any]:
        sent.extend(kw.get("searches", ()))
        return await real(operation, commands, **kw)

    store._rt.backend.pipeline = spy  # type: ignore[method-assign]
    hits = await store.recall(QUERY, k=2, threshold=2.0, thread_id="h", reinforce=False, explain=True)
    assert hits[0].item.id == answer
    assert hits[0].explain is not None and hits[0].explain.degraded is None
    text = [s for s in sent if len(s) > 2 and "@content:" in str(s[2]) and "RETURN" in s]  # FT.INFO has 2
    assert text and all(s[s.index("TIMEOUT") + 1] == "500" for s in text)
    assert all(degraded(registry, store, r) == 0 for r in ("timeout", "error", "partial"))


async def test_a_text_timeout_error_recalls_the_knn_hits_counted_and_explained(
    make: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    store, registry = make()
    near, answer = await seed(store)
    if not store._recall._text.available():
        pytest.skip("no TEXT fields on this engine (valkey-search 1.0): KNN only")

    async def cancelled() -> list[Any]:  # valkey-search 1.2.1's answer on the cluster (bench_1m)
        raise ServerError(
            "recall: Search operation cancelled due to timeout",
            details={"server_message": "Search operation cancelled due to timeout"},
        )

    calls = failing_text(store, cancelled)
    with caplog.at_level(logging.DEBUG, logger="betterdb_memory.tiers.hybrid"):
        for _ in range(2):
            hits = await store.recall(QUERY, k=2, threshold=2.0, thread_id="h", reinforce=False, explain=True)
            assert {h.item.id for h in hits} == near  # the KNN's two; the answer only words could bring
            assert answer not in {h.item.id for h in hits}
            assert all(h.explain is not None and h.explain.degraded == "timeout" for h in hits)
    assert calls[0] == 2
    assert degraded(registry, store, "timeout") == 2
    assert degraded(registry, store, "error") == 0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "timed out" in warnings[0].getMessage()  # once, then at debug
    plain = await store.recall(QUERY, k=2, threshold=2.0, thread_id="h", reinforce=False)
    assert all(h.explain is None for h in plain)  # explain off: nothing attached


async def test_text_queries_that_never_answer_are_cut_by_the_client_bound(make: Callable[..., Any]) -> None:
    store, registry = make()
    near, _ = await seed(store)
    if not store._recall._text.available():
        pytest.skip("no TEXT fields on this engine (valkey-search 1.0): KNN only")
    store._rt.settings = dataclasses.replace(store._rt.settings, text_timeout_ms=20)
    stalled = asyncio.Event()

    async def stall() -> list[Any]:  # a server that ignores its TIMEOUT (or a stuck shard)
        await stalled.wait()
        return []

    failing_text(store, stall)
    hits = await store.recall(QUERY, k=2, threshold=2.0, thread_id="h", reinforce=False, explain=True)
    assert {h.item.id for h in hits} == near
    assert degraded(registry, store, "timeout") == 1


async def test_another_server_error_on_the_text_side_degrades_as_error(make: Callable[..., Any]) -> None:
    store, registry = make()
    near, _ = await seed(store)
    if not store._recall._text.available():
        pytest.skip("no TEXT fields on this engine (valkey-search 1.0): KNN only")

    async def syntax() -> list[Any]:
        raise QuerySyntaxError("recall: Syntax error at offset 1", details={"server_message": "Syntax error"})

    failing_text(store, syntax)
    hits = await store.recall(QUERY, k=2, threshold=2.0, thread_id="h", reinforce=False, explain=True)
    assert {h.item.id for h in hits} == near
    assert all(h.explain is not None and h.explain.degraded == "error" for h in hits)
    assert degraded(registry, store, "error") == 1


async def test_a_knn_failure_still_raises(make: Callable[..., Any]) -> None:
    store, registry = make()
    await seed(store)
    backend = store._rt.backend

    async def broken(operation: str, args: Sequence[Any]) -> Any:
        raise ServerError("recall: Search operation cancelled due to timeout")

    backend.search = broken  # type: ignore[method-assign]
    pipeline = backend.pipeline

    async def broken_main(
        operation: str, reads: Sequence[Any], *, searches: Sequence[Any] = (), **kw: Any
    ) -> Any:
        # The recall's main query rides in a pipeline when counts go with it (tiers.scope_scan):
        # fail that one, leave the text side's own pipeline alone.
        if searches and ("KNN" in str(searches[0][2]) or "@content:" not in str(searches[0][2])):
            raise ServerError("recall: Search operation cancelled due to timeout")
        return await pipeline(operation, reads, searches=searches, **kw)

    backend.pipeline = broken_main  # type: ignore[method-assign]
    with pytest.raises(ServerError, match="cancelled due to timeout"):
        await store.recall(QUERY, k=2, threshold=2.0, thread_id="h", reinforce=False)
    assert all(degraded(registry, store, r) == 0 for r in ("timeout", "error", "partial"))
