"""``where=`` on a 3-primary valkey-search cluster (issue 27): the same answers as on one server.

The store-level differential (``tests/integration/test_where_differential.py``: random
memories written through ``remember_many``, random filters through ``list`` / ``count``
/ ``recall_by_vector``, each answer held to ``filter_eval.evaluate``) over documents
spread on every shard, and a filtered ``forget_by_scope``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore
from tests.filter_cases import DECLARED
from tests.integration.test_where_differential import BASE_SEED, FILTERS, _one_store

pytestmark = pytest.mark.integration


@pytest.fixture
async def make_store(
    cluster_client: ValkeyCluster, unique_name: str
) -> AsyncIterator[Callable[..., MemoryStore]]:
    made: list[MemoryStore] = []

    def factory(**options: Any) -> MemoryStore:
        options.setdefault("client", cluster_client)
        options.setdefault("name", unique_name)
        options.setdefault("embedder", HashingEmbedder())
        store = MemoryStore(**options)
        made.append(store)
        return store

    try:
        yield factory
    finally:
        for store in made:
            await store.close()


async def test_where_answers_equal_the_evaluator_on_a_cluster(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = make_store(metadata_fields=dict(DECLARED.fields))
    assert await _one_store(store, cluster_client, BASE_SEED + 900) == FILTERS


async def test_forget_by_scope_with_where_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields={"priority": "numeric"})
    await store.remember_many([{"content": f"m{i}", "metadata": {"priority": i % 3}} for i in range(30)])
    assert await store.count(where={"priority": 0}) == 10
    assert await store.forget_by_scope(where={"priority": {"$lte": 0}}) == 10
    assert await store.count() == 20 and await store.count(where={"priority": 0}) == 0
