"""Time in the recall on a 3-primary valkey-search cluster: a window's queries and same-slot supersession."""

from __future__ import annotations

import asyncio
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


async def test_a_window_ranks_past_versions_valid_in_it_first_across_shards(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    """Twelve people's 2022 homes, superseded in 2024, each on its own slot: the history query finds them."""
    store = make_store()
    query = "Where did they live in 2022?"
    w = parse_time_window(query)
    assert w is not None and w.start_ms is not None and w.end_ms is not None
    past, now = [], []
    for n in range(12):
        old = await store.remember(
            f"Person {n} lives in Lisbon.", thread_id="t", valid_from=w.start_ms - 400 * DAY
        )
        new = await store.remember(
            f"Person {n} lives in Berlin.", thread_id="t", valid_from=w.end_ms + 400 * DAY
        )
        # Supersession's move by plain commands (tests/cluster/test_cluster_as_of.py: valkey-search
        # 1.2.1's cluster indexes what a script writes under a prefix only after later writes).
        fields = await cluster_client.hgetall(store.keys.doc(old))
        fields.update({b"valid_until": str(w.end_ms + 400 * DAY).encode(), b"superseded_by": new.encode()})
        await cluster_client.hset(store.keys.hist_doc(old), mapping=fields)
        await cluster_client.delete(store.keys.doc(old))
        past.append(old)
        now.append(new)
    assert len({await cluster_client.cluster_keyslot(store.keys.hist_doc(m)) for m in past}) > 1
    other = await store.remember("Person 0 lives in Lisbon.", thread_id="u", valid_from=w.start_ms)
    hits: list[str] = []
    for _ in range(300):  # the shards index the history documents asynchronously
        hits = [h.item.id for h in await store.recall(query, thread_id="t", k=24, threshold=2.0)]
        if set(hits[:12]) == set(past):
            break
        await asyncio.sleep(0.02)
    assert set(hits[:12]) == set(past) and set(hits[12:]) == set(now) and other not in hits
    assert await store.count(thread_id="t") == 12  # the recall reinforced no past version back
    item = await store.get(past[0])
    assert item is not None and item.valid_until == w.end_ms + 400 * DAY
