"""A scoped recall on a 3-primary valkey-search cluster: the scan fans out like the KNN (issue 29).

The standalone tests (``tests/integration/test_scope_scan.py``: each recall held to a
brute-force cosine KNN over its scope, computed in the test) on memories spread on every
shard: the scan's ``FT.SEARCH`` and its counts answer for the whole cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import HashingEmbedder, MemoryStore
from tests.integration.test_scope_scan import (
    test_a_kind_of_scope_found_large_is_walked_when_new as _shape_found_large,
)
from tests.integration.test_scope_scan import (
    test_a_new_kind_of_scope_reads_a_little_first as _a_little_first,
)
from tests.integration.test_scope_scan import (
    test_a_scope_above_the_limit_keeps_the_knn as _above_the_limit,
)
from tests.integration.test_scope_scan import (
    test_one_round_trip_per_recall_small_or_large as _one_round_trip,
)
from tests.integration.test_scope_scan import (
    test_scoped_recall_equals_brute_force as _brute_force,
)
from tests.integration.test_scope_scan import (
    test_tags_and_negations_keep_their_meaning as _tags_and_negations,
)
from tests.integration.test_scope_scan import (
    test_the_first_recall_of_a_scope_is_its_scan as _first_recall,
)
from tests.integration.test_window_scan import (
    test_a_window_in_the_question_over_a_small_scope_is_scanned as _window_scanned,
)
from tests.integration.test_window_scan import (
    test_past_versions_of_a_small_scope_are_scanned as _past_versions,
)
from tests.integration.test_window_scan import (
    test_relative_bounds_find_their_scope_s_size as _relative_bounds,
)
from tests.integration.test_window_scan import (
    test_the_index_size_is_read_from_ft_info as _ft_info,
)

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


async def test_scoped_recall_equals_brute_force_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    await _brute_force(make_store, "valkey-search")


async def test_tags_and_negations_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    await _tags_and_negations(make_store)


async def test_a_scope_above_the_limit_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    await _above_the_limit(make_store, "valkey-search")


async def test_the_first_recall_of_a_scope_is_its_scan_on_a_cluster(
    make_store: Callable[..., MemoryStore],
) -> None:
    """A new store reads one shard's count at opening (FT.INFO): a guess low by the shard count,
    enough for the bounded scan; the index's count rides with the first query."""
    await _first_recall(make_store, "valkey-search")


async def test_one_round_trip_per_recall_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    await _one_round_trip(make_store, "valkey-search")


async def test_a_kind_of_scope_found_large_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    await _shape_found_large(make_store, "valkey-search")


async def test_a_new_kind_of_scope_reads_a_little_first_on_a_cluster(
    make_store: Callable[..., MemoryStore],
) -> None:
    await _a_little_first(make_store, "valkey-search")


async def test_a_window_over_a_small_scope_is_scanned_on_a_cluster(
    make_store: Callable[..., MemoryStore],
) -> None:
    await _window_scanned(make_store, "valkey-search")


async def test_relative_bounds_find_their_scope_s_size_on_a_cluster(
    make_store: Callable[..., MemoryStore],
) -> None:
    await _relative_bounds(make_store, "valkey-search")


async def test_the_index_size_is_the_primaries_sum_on_a_cluster(
    make_store: Callable[..., MemoryStore],
) -> None:
    """``FT.INFO <index> PRIMARY``: every shard's documents (a plain FT.INFO counts one shard's)."""
    await _ft_info(make_store, "valkey-search")


async def test_past_versions_of_a_small_scope_are_scanned_on_a_cluster(
    make_store: Callable[..., MemoryStore],
) -> None:
    await _past_versions(make_store, "valkey-search")
