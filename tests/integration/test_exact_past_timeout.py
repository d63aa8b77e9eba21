"""Exact answers from queries that run past the engine's query timeout, or an error saying so.

RediSearch's default policy answers a query that runs past its ``TIMEOUT`` (500 ms by
default) with what it found so far, under RESP2 and RESP3 alike with nothing to tell
it apart. At half a million memories on a busy 2-core server ``count()`` answered
72,499 (``bench/bench_1m.py``). Every query that must be whole now carries
``TIMEOUT 0`` (``Capabilities.partial_on_timeout``); here the module's timeout is set to
1 ms, so any query over the 21,000 documents below that did not would come back partial.

valkey-search (1.1+) answers the same way by default (``search.enable-partial-results
yes``), standalone too; the library asks every query for ``ALLSHARDS``, which makes it
answer an error instead (``server.search_timeout``). With its ``search.default-timeout-ms``
at 1 ms the same calls must each answer whole or raise that error, never answer short,
and at least one must run out of time (else nothing was tested).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.backend.dialect import keyless_route
from betterdb_memory.core.query import VECTOR_FIELD
from betterdb_memory.errors import ServerError
from tests.timeouts import exact_or_timeout

pytestmark = pytest.mark.integration

N = 21_000
DIM = 4  # small vectors: the HNSW graph is not what is tested, and 384-d takes minutes to build


@pytest.fixture
async def big_store(make_store: Any, client: Any) -> AsyncIterator[MemoryStore]:
    store: MemoryStore = make_store(embedder=HashingEmbedder(dimensions=DIM))
    await store.ensure_index()
    # Documents as the reference library writes them (its fields, one HSET each): fast to make.
    prefix = store.spec.prefix
    now = str(int(time.time() * 1000))
    rng = np.random.default_rng(7)  # distinct vectors: identical ones make HNSW deletions crawl
    for start in range(0, N, 1000):
        pipe = client.pipeline(transaction=False)
        vectors = rng.standard_normal((1000, DIM)).astype(np.float32)
        for i in range(start, start + 1000):
            pipe.execute_command(
                "HSET", f"{prefix}m{i}", "content", f"note {i}", VECTOR_FIELD, vectors[i - start].tobytes(),
                "threadId", f"t{i % 3}", "agentId", "a", "importance", "0.5", "created_at", now,
                "last_accessed_at", now, "access_count", "0", "metadata", "{}",
            )  # fmt: skip
        await pipe.execute()
    try:
        yield store
    finally:
        for start in range(0, N, 100):  # each deletion also leaves the HNSW graph: small batches
            await client.delete(*(f"{prefix}m{i}" for i in range(start, start + 100)))


@asynccontextmanager
async def module_timeout(client: Any, engine: str, ms: int) -> AsyncIterator[None]:
    """The engine's default query budget set to ``ms`` for the block (restored after)."""
    if engine == "redisearch":
        route = keyless_route(client)
        old = await client.execute_command("FT.CONFIG", "GET", "TIMEOUT", **route)
        await client.execute_command("FT.CONFIG", "SET", "TIMEOUT", str(ms), **route)
        try:
            yield
        finally:
            value = old[0][1] if old and isinstance(old[0], list) else b"500"
            await client.execute_command("FT.CONFIG", "SET", "TIMEOUT", value, **route)
        return
    name = "search.default-timeout-ms"
    old_ms = (await client.config_get(name))[name]
    await client.config_set(name, ms)
    try:
        yield
    finally:
        await client.config_set(name, old_ms)


async def _page(store: MemoryStore) -> tuple[int, int]:
    page = await store.list(thread_id="t2", limit=5)
    return len(page.items), page.total


async def test_count_and_scans_are_whole_past_the_module_timeout(
    big_store: MemoryStore, client: Any, expected_engine: str
) -> None:
    store = big_store
    await store.index.ensure_ready()
    caps = store.index.capabilities
    assert caps is not None
    if not (caps.partial_on_timeout or caps.shard_options):
        pytest.skip("an engine that answers a timed-out query with an error only (valkey-search 1.0)")
    async with module_timeout(client, expected_engine, 1):
        outcomes = [
            await exact_or_timeout(lambda: store.count(), N),
            await exact_or_timeout(lambda: store.count(thread_id="t1"), N // 3),
            await exact_or_timeout(lambda: _page(store), (5, N // 3)),
            await exact_or_timeout(lambda: store.forget_by_scope(thread_id="t0"), N // 3),
        ]
    if caps.partial_on_timeout:  # RediSearch: TIMEOUT 0, so never out of time
        assert outcomes == ["whole"] * 4
    else:  # valkey-search: ALLSHARDS, so an error; 1 ms over 21,000 memories is not enough for all
        assert "timeout" in outcomes, f"nothing ran out of time in 1 ms over {N} memories: {outcomes}"
    await store.forget_by_scope(thread_id="t0")  # what a timed-out deletion left
    assert await store.count() == N - N // 3


async def test_a_query_past_its_own_budget_raises_the_search_timeout_code(
    big_store: MemoryStore, client: Any, expected_engine: str
) -> None:
    """The engine's own reply to a search that ran out of time becomes ``server.search_timeout``.

    RediSearch answers an error only under ``ON_TIMEOUT FAIL`` (its default returns what it
    found); valkey-search answers one to a query with ``ALLSHARDS``, which the library adds.
    A sorted read of 1,000 of the 21,000 documents with ``TIMEOUT 1``, a few times.
    """
    store = big_store
    await store.index.ensure_ready()
    route = keyless_route(client)
    policy = None
    if expected_engine == "redisearch":
        policy = await client.execute_command("FT.CONFIG", "GET", "ON_TIMEOUT", **route)
        await client.execute_command("FT.CONFIG", "SET", "ON_TIMEOUT", "FAIL", **route)
    args = [
        "FT.SEARCH", store.keys.index, "@created_at:[-inf +inf]", "SORTBY", "created_at", "DESC",
        "LIMIT", "0", "1000", "TIMEOUT", "1", "DIALECT", "2",
    ]  # fmt: skip
    errors: list[ServerError] = []
    try:
        for _ in range(5):
            try:
                await store.backend.search("test", args)
            except ServerError as exc:
                errors.append(exc)
    finally:
        if policy is not None:
            value = policy[0][1] if policy and isinstance(policy[0], list) else b"RETURN"
            await client.execute_command("FT.CONFIG", "SET", "ON_TIMEOUT", value, **route)
    assert errors, "no search ran out of time in 1 ms"
    for exc in errors:
        assert exc.code == "server.search_timeout", exc
        assert type(exc) is ServerError and "timeout" in exc.details["server_message"].lower()
