"""consolidate(mode="facts"): a retraction with its replacement in one run (issue #26).

"I no longer live in Paris; I have lived in Berlin since 2022" comes out of an extractor
as ``[tombstone city, Berlin 2022]``. Berlin is the user's current city, from 2022, even
when the Paris fact began later (undated, it began at its write). The statement is a
correction (docs/concepts/time.md, "A retraction with its replacement"): current from its
date, every version that began at or after that date valid at no instant, the one before
it ending there. A tombstone alone, or a statement in a later run, keeps the subject rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.backend.scripts_subjects import SUBJECT_PUT
from betterdb_memory.core.facts import ConsolidateFactsResult, Fact, FactRecord

pytestmark = pytest.mark.integration

SCOPE = {"namespace": "n1", "agent_id": "a1", "thread_id": "t1"}
NO_LONGER = Fact("city", "", tombstone=True)


@pytest.fixture
async def store(client: Any, unique_name: str) -> AsyncIterator[Any]:
    s = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder())
    yield s
    await s.close()


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


async def run(store: Any, facts: Sequence[Fact]) -> ConsolidateFactsResult:
    """A fresh source, then one facts run whose extractor returns ``facts``."""
    await asyncio.sleep(0.003)  # each source in a later millisecond
    await store.remember(f"source {len(facts)} {id(facts)}", **SCOPE)
    result: ConsolidateFactsResult = await store.consolidate(
        "facts", extract_facts=lambda items: list(facts), **SCOPE
    )
    return result


async def history(store: Any) -> dict[str, FactRecord]:
    return {r.id: r for r in await store.fact_history("city", **SCOPE)}


async def facts_as_of(store: Any, when: datetime | None = None) -> set[str]:
    page = await store.list(limit=100, as_of=when, **SCOPE)
    return {m.id for m in page.items if m.kind == "fact"}


def void(record: FactRecord) -> bool:
    return not record.current and record.valid_until == record.valid_from


async def test_no_longer_paris_berlin_since_2022_makes_berlin_current(store: Any) -> None:
    """Paris (undated, so from its write) retracted and Berlin since 2022 in one run: Berlin is
    current from 2022 and Paris, begun after that, is valid at no instant. On main Berlin was a
    past version (2022 until Paris began) and the user had no current city."""
    (paris,) = (await run(store, [Fact("city", "Paris")])).created
    second = await run(store, [NO_LONGER, Fact("city", "Berlin", "2022-01-01")])
    (berlin,) = second.created
    assert second.fact_ids == [berlin] and second.facts == 1 and second.retracted == 1
    assert await facts_as_of(store) == {berlin}
    versions = await history(store)
    assert versions[berlin].current and versions[berlin].valid_from == at("2022-01-01")
    assert versions[berlin].valid_until is None
    assert versions[paris].retracted and void(versions[paris])
    assert versions[paris].superseded_by == berlin
    # what was true then: Berlin from 2022, also at the instant Paris was written
    assert await facts_as_of(store, at("2023-06-01")) == {berlin}
    paris_from = versions[paris].valid_from
    assert paris_from is not None and await facts_as_of(store, paris_from) == {berlin}
    assert await facts_as_of(store, at("2021-06-01")) == set()


async def test_a_dated_old_fact_ends_where_the_replacement_begins(store: Any) -> None:
    """Paris since 2019, [tombstone, Berlin 2022]: Paris [2019, 2022) retracted, Berlin current
    (as on main: the replacement began after the retracted fact; pinned)."""
    (paris,) = (await run(store, [Fact("city", "Paris", "2019-01-01")])).created
    second = await run(store, [NO_LONGER, Fact("city", "Berlin", "2022-01-01")])
    (berlin,) = second.created
    assert second.fact_ids == [berlin]
    versions = await history(store)
    assert versions[paris].retracted and versions[paris].valid_until == at("2022-01-01")
    assert await facts_as_of(store, at("2020-01-01")) == {paris}
    assert await facts_as_of(store, at("2022-01-01")) == {berlin}


async def test_every_version_the_replacement_overlaps_ends_at_its_date(store: Any) -> None:
    """Lisbon 2018, Rome 2020, Paris 2023 current; then [tombstone, Berlin 2021]. Berlin is
    current from 2021: Rome ends at 2021, Paris (begun 2023) is valid at no instant, Lisbon
    keeps [2018, 2020). On main Berlin was a past version [2021, 2023), nothing current."""
    (lisbon,) = (await run(store, [Fact("city", "Lisbon", "2018-01-01")])).created
    (rome,) = (await run(store, [Fact("city", "Rome", "2020-01-01")])).created
    (paris,) = (await run(store, [Fact("city", "Paris", "2023-01-01")])).created
    last = await run(store, [NO_LONGER, Fact("city", "Berlin", "2021-01-01")])
    (berlin,) = last.created
    assert last.fact_ids == [berlin] and await facts_as_of(store) == {berlin}
    versions = await history(store)
    assert versions[rome].valid_until == at("2021-01-01") and versions[rome].superseded_by == berlin
    assert void(versions[paris]) and versions[paris].retracted
    assert versions[lisbon].valid_until == at("2020-01-01")
    assert sum(v.current for v in versions.values()) == 1
    for when, expected in [("2019-01-01", lisbon), ("2020-06-01", rome), ("2022-01-01", berlin)]:
        assert await facts_as_of(store, at(when)) == {expected}, when
    assert await facts_as_of(store, at("2024-01-01")) == {berlin}


async def test_a_retraction_alone_leaves_no_current_fact(store: Any) -> None:
    """A tombstone with no statement: the subject has no current fact (unchanged)."""
    (paris,) = (await run(store, [Fact("city", "Paris")])).created
    second = await run(store, [NO_LONGER])
    assert second.fact_ids == [] and second.retracted == 1 and await facts_as_of(store) == set()
    versions = await history(store)
    assert versions[paris].retracted and not versions[paris].current and not void(versions[paris])


async def test_the_same_words_again_after_an_earlier_retraction_make_the_replacement_current(
    store: Any,
) -> None:
    """Paris retracted in an earlier run, then a run with [tombstone, Berlin 2022]: the tombstone
    finds nothing current (unmatched) yet still says Paris is over, so Berlin is current. A
    statement alone in a later run keeps the subject rule (test_consolidation_order)."""
    (paris,) = (await run(store, [Fact("city", "Paris")])).created
    await run(store, [NO_LONGER])
    third = await run(store, [NO_LONGER, Fact("city", "Berlin", "2022-01-01")])
    (berlin,) = third.created
    assert third.unmatched_tombstones == ["city"]
    assert third.fact_ids == [berlin] and await facts_as_of(store) == {berlin}
    assert void((await history(store))[paris])


async def test_a_later_statement_in_the_same_run_supersedes_the_correction(store: Any) -> None:
    """[tombstone, Berlin 2022, Munich 2024]: Berlin is the correction, Munich supersedes it."""
    (paris,) = (await run(store, [Fact("city", "Paris")])).created
    second = await run(
        store, [NO_LONGER, Fact("city", "Munich", "2024-01-01"), Fact("city", "Berlin", "2022-01-01")]
    )
    berlin, munich = second.created  # dated facts in date order
    assert second.fact_ids == [munich] and second.superseded == 1
    versions = await history(store)
    assert versions[berlin].valid_until == at("2024-01-01") and versions[berlin].superseded_by == munich
    assert void(versions[paris])
    assert await facts_as_of(store, at("2023-01-01")) == {berlin}
    assert await facts_as_of(store) == {munich}


async def test_the_script_decides_a_correction_once_and_a_replay_voids_nothing(
    client: Any, unique_name: str
) -> None:
    """``SUBJECT_PUT`` with the correction flag: current whatever its start, later versions
    void in the pointer. Replayed after another version superseded it (a retried round trip),
    it is decided as a plain write: a past version, nothing more voided."""
    pointer, versions = f"{unique_name}:subj:{{d}}", f"{unique_name}:subj:{{d}}:hist"

    async def put(mid: str, vf: int, *flag: str) -> list[Any]:
        args = [mid, str(vf), "city", "[null, null, null]", "fact", *flag]
        reply: list[Any] = await client.eval(SUBJECT_PUT.source, 2, pointer, versions, *args)
        return reply

    assert (await put("paris", 700))[0] == b"current"
    assert (await put("rome", 500))[0] == b"past"
    fix = await put("berlin", 300, "1")
    assert fix[:3] == [b"current", b"paris", b"berlin"]
    # void, each naming the version that ended it (a repair ends its history document there)
    assert (
        await client.hget(pointer, "void:paris") == b"berlin"
        and await client.hget(pointer, "void:rome") == b"berlin"
    )
    assert (await put("munich", 800))[:3] == [b"current", b"berlin", b"munich"]
    replay = await put("berlin", 300, "1")
    assert replay[:3] == [b"past", b"", b"munich"]
    assert await client.hget(pointer, "void:munich") is None
    await client.delete(pointer, versions)
