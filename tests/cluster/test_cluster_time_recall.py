"""Time in the recall on a 3-primary valkey-search cluster: a window's two queries and same-slot supersession."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import MemoryStore
from betterdb_memory.core.timewindow import parse_time_window
from betterdb_memory.embedders import OnnxEmbedder

pytestmark = pytest.mark.integration

DAY = 86_400_000


@pytest.fixture
def make_store(cluster_store_factory: Callable[..., MemoryStore]) -> Callable[..., MemoryStore]:
    return cluster_store_factory  # tests/cluster/conftest.py: stores on the cluster client


async def test_a_window_ranks_events_inside_and_states_valid_in_it_first(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = make_store()
    query = "What did I do in May 2023?"
    w = parse_time_window(query)
    assert w is not None and w.start_ms is not None and w.end_ms is not None
    inside = [await store.remember(f"I did thing {i}.", valid_from=w.start_ms + i * DAY) for i in range(6)]
    outside = [
        await store.remember(f"I did thing {10 + i}.", valid_from=w.end_ms + i * DAY) for i in range(6)
    ]
    state = await store.remember("I live in Lisbon.", valid_from=w.start_ms - 400 * DAY)
    await cluster_client.hset(store.keys.doc(state), "state_from", str(w.start_ms - 400 * DAY))
    hits = await store.recall(query, k=10, threshold=2.0, reinforce=False)
    # The window's events and states first (7), then the rest of the recall.
    assert {h.item.id for h in hits[:7]} == {*inside, state}
    assert {h.item.id for h in hits[7:]} <= set(outside)


async def test_the_newer_statement_of_a_slot_comes_first(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(embedder=OnnxEmbedder())
    lisbon = await store.remember("Ada lives in Lisbon.", valid_from="2021-09-01")
    berlin = await store.remember("Ada moved to Berlin in May 2024.", valid_from="2024-05-01")
    hits = await store.recall("Where does Ada live?", k=2, threshold=2.0, reinforce=False, explain=True)
    assert [h.item.id for h in hits] == [berlin, lisbon]
    assert hits[1].explain is not None and hits[1].explain.superseded_by == berlin
