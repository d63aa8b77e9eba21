"""``hnsw_ef_runtime`` reaches every shard's KNN walk on a 3-primary valkey-search cluster.

The standalone test (``tests/integration/test_ef_runtime.py``) on memories spread over
every shard: without ``EF_RUNTIME`` in the query, valkey-search 1.2.1's fan-out walks each
shard's graph with EF = K; 9 of its 40 recalls missed a nearest memory before the fix.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from betterdb_memory import MemoryStore
from tests.integration.test_ef_runtime import (
    test_small_k_recalls_are_exact_with_a_large_ef_runtime as _small_k_exact,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def make_store(cluster_store_factory: Callable[..., MemoryStore]) -> Callable[..., MemoryStore]:
    return cluster_store_factory  # tests/cluster/conftest.py: stores on the cluster client


async def test_small_k_recalls_are_exact_on_a_cluster(make_store: Callable[..., MemoryStore]) -> None:
    await _small_k_exact(make_store)
