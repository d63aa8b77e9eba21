"""Subjects on a 3-primary valkey-search cluster: the new version, the old one and the pointer in different slots.

One current version per subject holds across slots (20 concurrent writers too); a
writer that lost round trip 2 leaves one version too many, which the next write of the
subject retires; forget and forget_by_scope clean every slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import Fact, MemoryStore
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.subjects import subject_key_of

pytestmark = pytest.mark.integration

Y2019 = 1_546_300_800_000
Y2022 = 1_640_995_200_000
Y2024 = 1_704_067_200_000


@pytest.fixture
def make_store(cluster_store_factory: Callable[..., MemoryStore]) -> Callable[..., MemoryStore]:
    return cluster_store_factory  # tests/cluster/conftest.py: stores on the cluster client


async def live(store: MemoryStore, **scope: str) -> set[str]:
    return {i.id for i in (await store.list(**scope)).items}


async def test_versions_across_slots_keep_one_current(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = make_store()
    ids = [
        await store.remember(f"Ada lives in city {n}", thread_id="ada", subject="city", valid_from=Y2019 + n)
        for n in range(6)
    ]
    past = await store.remember("Ada lived in Faro", thread_id="ada", subject="city", valid_from=Y2019 - 1)
    assert await live(store, thread_id="ada") == {ids[-1]}
    assert await store.count(thread_id="ada") == 1
    history = await store.fact_history("city", thread_id="ada")
    assert [r.id for r in history] == [*reversed(ids), past]
    assert await cluster_client.hget(store.keys.hist_doc(past), "superseded_by") == ids[0].encode()
    # The history mark (core.history_mark), on another slot than the versions, set with them.
    assert await cluster_client.hget(store.keys.meta, "history") == f"u{Y2019 + 5}".encode()  # the latest end


async def test_twenty_concurrent_writers_leave_one_current(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    await asyncio.gather(
        *(
            store.remember(f"city {n}", thread_id="ada", subject="city", valid_from=Y2019 + n % 7)
            for n in range(20)
        )
    )
    assert len(await live(store, thread_id="ada")) == 1
    assert sum(r.current for r in await store.fact_history("city", thread_id="ada")) == 1


async def test_a_lost_round_trip_2_is_repaired_by_the_next_write(
    make_store: Callable[..., MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    first = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)

    async def lost(*args: object, **kwargs: object) -> int:
        return 0

    monkeypatch.setattr(store._long_term.subjects, "settle", lost)
    second = await store.remember("Porto", thread_id="ada", subject="city", valid_from=Y2022)
    monkeypatch.undo()
    assert await live(store, thread_id="ada") == {first, second}
    third = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    assert await live(store, thread_id="ada") == {third}


async def test_forget_and_forget_by_scope_clean_every_slot(
    make_store: Callable[..., MemoryStore], cluster_client: ValkeyCluster
) -> None:
    store = make_store()
    await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    cur = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    d = subject_key_of(Scope(thread_id="ada").tag, "memory", "city")
    assert await store.forget(cur) is True
    assert await cluster_client.hget(store.keys.subject(d), "current") is None
    assert await store.forget_by_scope(thread_id="ada") == 0
    assert await cluster_client.exists(store.keys.subject(d), store.keys.subject_versions(d)) == 0
    assert await store.fact_history("city", thread_id="ada") == []


async def test_facts_mode_supersedes_through_subjects(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    facts = {
        "a": [Fact("home city", "lives in Lisbon", "2019-01-01")],
        "b": [Fact("home city", "lives in Berlin", "2024-05-01")],
    }

    def extract(items: list[Any]) -> list[Fact]:
        return [f for i in items for f in facts.get(i.content, [])]

    await store.remember("a", thread_id="t")
    await store.consolidate("facts", extract_facts=extract, thread_id="t")
    await store.remember("b", thread_id="t")
    res = await store.consolidate("facts", extract_facts=extract, thread_id="t")
    assert res.superseded == 1
    history = await store.fact_history("home city", thread_id="t", kind="fact")
    assert [(r.statement, r.current) for r in history] == [
        ("lives in Berlin", True),
        ("lives in Lisbon", False),
    ]


async def test_a_retraction_with_its_replacement_across_slots(make_store: Callable[..., MemoryStore]) -> None:
    """[tombstone, Berlin 2022] after an undated Paris (issue #26): Berlin current from 2022,
    Paris valid at no instant; the pointer, the versions and the documents in other slots agree."""
    store = make_store()
    facts = {
        "paris": [Fact("home city", "lives in Paris")],
        "moved": [Fact("home city", "", tombstone=True), Fact("home city", "lives in Berlin", "2022-01-01")],
    }

    def extract(items: list[Any]) -> list[Fact]:
        return [f for i in items for f in facts.get(i.content, [])]

    await store.remember("paris", thread_id="t")
    (paris,) = (await store.consolidate("facts", extract_facts=extract, thread_id="t")).fact_ids
    await store.remember("moved", thread_id="t")
    res = await store.consolidate("facts", extract_facts=extract, thread_id="t")
    (berlin,) = res.created
    listed = (await store.list(thread_id="t")).items
    assert res.fact_ids == [berlin] and {i.id for i in listed if i.kind == "fact"} == {berlin}
    history = {r.id: r for r in await store.fact_history("home city", thread_id="t", kind="fact")}
    assert history[berlin].current and history[berlin].valid_from is not None
    assert history[berlin].valid_from.year == 2022
    assert history[paris].retracted and history[paris].valid_until == history[paris].valid_from
    as_of = await store.list(thread_id="t", as_of=history[paris].valid_from)
    assert {i.id for i in as_of.items if i.kind == "fact"} == {berlin}
