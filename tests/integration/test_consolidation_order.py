"""consolidate(mode="facts") against the subject rule: tombstones in the plan's order, and
``fact_ids`` as the subjects decided (docs/concepts/time.md, "One version at each instant").

Each scenario: a source, a run stating ``Paris`` (undated, so it starts at its source's
time, today), then runs with tombstones and statements of the same subject.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.core.facts import ConsolidateFactsResult, Fact

pytestmark = pytest.mark.integration

SCOPE = {"namespace": "n1", "agent_id": "a1", "thread_id": "t1"}


@pytest.fixture
async def store(client: Any, unique_name: str) -> AsyncIterator[Any]:
    s = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder())
    yield s
    await s.close()


async def run(store: Any, facts: Sequence[Fact]) -> ConsolidateFactsResult:
    """A fresh source, then one facts run whose extractor returns ``facts``."""
    await asyncio.sleep(0.003)  # each source in a later millisecond
    await store.remember(f"source {len(facts)} {id(facts)}", **SCOPE)
    result: ConsolidateFactsResult = await store.consolidate(
        "facts", extract_facts=lambda items: list(facts), **SCOPE
    )
    return result


async def listed_facts(store: Any) -> set[str]:
    return {m.id for m in (await store.list(limit=100, **SCOPE)).items if m.kind == "fact"}


async def check_agrees(store: Any, result: ConsolidateFactsResult) -> None:
    """``fact_ids`` names exactly the facts the store lists as current."""
    assert set(result.fact_ids) == await listed_facts(store)
    assert result.facts == len(result.fact_ids)


async def test_a_statement_older_than_a_retracted_fact_is_past_and_not_named_current(store: Any) -> None:
    """After a retraction (another run), a fact dated before the retracted one began is a past
    version (no version is current); the run used to name it current in ``fact_ids``."""
    first = await run(store, [Fact("city", "Paris")])
    paris = first.created[0]
    await run(store, [Fact("city", "", tombstone=True)])
    third = await run(store, [Fact("city", "Berlin", "2022-01-01")])
    (berlin,) = third.created
    await check_agrees(store, third)
    assert third.fact_ids == []
    history = {r.id: r for r in await store.fact_history("city", **SCOPE)}
    assert not history[berlin].current and history[berlin].valid_until == history[paris].valid_from
    assert history[paris].retracted


async def test_a_fact_retracted_at_its_start_keeps_no_older_statement_from_being_current(store: Any) -> None:
    """A tombstone dated before the current fact began (2021, Paris began today) ends it at its
    start: valid at no instant. The run's Berlin (2022) is then current. It used to be written
    while Paris was still current, so it went to history and no fact was current."""
    await run(store, [Fact("city", "Paris")])
    second = await run(
        store, [Fact("city", "", "2021-01-01", tombstone=True), Fact("city", "Berlin", "2022-01-01")]
    )
    (berlin,) = second.created
    await check_agrees(store, second)
    assert second.fact_ids == [berlin]
    assert (await store.get(berlin)).valid_until is None


async def test_a_fact_written_and_retracted_in_one_run_keeps_no_later_statement_from_being_current(
    store: Any,
) -> None:
    """[Paris, tombstone] in one run: Paris is valid at no instant (retracted where it began),
    so the next run's Berlin (2021) is current; it used to go to history as older than Paris."""
    first = await run(store, [Fact("city", "Paris"), Fact("city", "", tombstone=True)])
    assert first.fact_ids == [] and first.retracted == 1
    second = await run(store, [Fact("city", "Berlin", "2021-01-01")])
    (berlin,) = second.created
    await check_agrees(store, second)
    assert second.fact_ids == [berlin]


async def test_a_tombstone_before_a_statement_in_one_run_retracts_the_old_fact(store: Any) -> None:
    """[tombstone, Berlin]: the tombstone retracts Paris before Berlin is written, so Paris's
    history says retracted (it used to say superseded by Berlin, the tombstone applied last)."""
    first = await run(store, [Fact("city", "Paris", "2020-01-01")])
    paris = first.created[0]
    second = await run(store, [Fact("city", "", tombstone=True), Fact("city", "Berlin")])
    (berlin,) = second.created
    await check_agrees(store, second)
    assert second.fact_ids == [berlin]
    history = {r.id: r for r in await store.fact_history("city", **SCOPE)}
    assert history[paris].retracted and history[paris].superseded_by is None
    assert history[berlin].current
