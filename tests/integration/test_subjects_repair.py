"""Subjects when versions leave by other ways than a write: forget of a past version, eviction,
TTL expiry, a tag-only ``forget_by_scope``; and the dates of consolidated facts (issue 26).

The rule these keep (docs/concepts/time.md): at every instant at most one version of a
subject is valid, and a version whose document is gone is never taken for the current one.
Also run on valkey-search standalone (scripts/with-valkey-search.sh).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import MemoryItem, MemoryStore
from betterdb_memory.core.facts import Fact
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.subjects import normalise_subject, subject_key_of

pytestmark = pytest.mark.integration

Y2018 = 1_514_764_800_000  # 2018-01-01T00:00:00Z
Y2019 = 1_546_300_800_000
Y2020 = 1_577_836_800_000
Y2022 = 1_640_995_200_000
Y2024 = 1_704_067_200_000
Y2025 = 1_735_689_600_000


def digest(thread: str | None, subject: str, kind: str = "memory") -> str:
    return subject_key_of(Scope(thread_id=thread).tag, kind, normalise_subject(subject))


async def ids_of(store: MemoryStore, **scope: str) -> set[str]:
    return {i.id for i in (await store.list(**scope)).items}


async def versions(client: avalkey.Valkey, store: MemoryStore, d: str) -> list[str]:
    return [m.decode() for m in await client.zrange(store.keys.subject_versions(d), 0, -1)]


async def gone(store: MemoryStore, client: avalkey.Valkey, mid: str) -> None:
    """Wait until ``mid`` reads as gone and its key is gone from the server (a TTL).

    ``get`` answers None once the memory's ``expires_at`` has passed; the server expires the
    key by its own ``PEXPIRE``, counted from when that command ran, after the document's
    ``HSET``: later. On valkey-search an ``HSET`` returns only once indexed, so under load
    the key outlives ``expires_at`` by tens of milliseconds, and a write of the subject in
    that window meets it still there, as the current version: the write is then rightly a
    past version, and these tests asked about a write after the expiry.
    """
    for _ in range(100):
        if await store.get(mid) is None and not await client.exists(store.keys.doc(mid)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{mid} never expired")


async def test_forgetting_a_past_version_deletes_it_and_leaves_the_rest_as_they_were(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    first = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    cur = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    mid = await store.remember("Porto", thread_id="ada", subject="city", valid_from=Y2022)
    assert await store.forget(mid) is True
    assert await store.get(mid) is None
    assert await client.exists(store.keys.hist_doc(mid), store.keys.doc(mid)) == 0
    assert await versions(client, store, digest("ada", "city")) == [first, cur]
    assert await store.forget(mid) is False
    # the current version is untouched
    assert await ids_of(store, thread_id="ada") == {cur}
    assert await client.hget(store.keys.subject(digest("ada", "city")), "current") == cur.encode()
    history = await store.fact_history("city", thread_id="ada")
    assert [(r.id, r.current) for r in history] == [(cur, True), (first, False)]
    # the neighbours keep their validity: the instants Porto covered have no version now
    kept = await store.get(first)
    assert kept is not None and kept.valid_until == Y2022
    assert await ids_of(store, thread_id="ada", as_of="2023-01-01") == set()
    assert await ids_of(store, thread_id="ada", as_of="2020-01-01") == {first}
    assert await ids_of(store, thread_id="ada", as_of="2024-06-01") == {cur}
    # writing it again, with its date, fills the gap
    again = await store.remember("Porto", thread_id="ada", subject="city", valid_from=Y2022)
    assert await ids_of(store, thread_id="ada", as_of="2023-01-01") == {again}
    assert await ids_of(store, thread_id="ada") == {cur}


async def _repaired(store: MemoryStore, client: avalkey.Valkey, vanished: str, thread: str) -> None:
    """After ``vanished`` (the current version) left: an older-dated write becomes current."""
    d = digest(thread, "city")
    older = await store.remember("Porto", thread_id=thread, subject="city", valid_from=Y2018)
    assert await client.hget(store.keys.subject(d), "current") == older.encode()
    assert older in await ids_of(store, thread_id=thread)
    assert vanished not in await versions(client, store, d)
    history = await store.fact_history("city", thread_id=thread)
    assert [(r.id, r.current) for r in history] == [(older, True)]
    newer = await store.remember("Berlin", thread_id=thread, subject="city", valid_from=Y2024)
    assert [(r.id, r.current) for r in await store.fact_history("city", thread_id=thread)] == [
        (newer, True),
        (older, False),
    ]


async def test_an_evicted_current_version_is_dropped_by_the_next_write(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store(max_items_per_scope=1)
    cur = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    await store.remember("a fresher note", thread_id="ada")  # the cap evicts the older keep-score
    assert await store.get(cur) is None
    assert await client.hget(store.keys.subject(digest("ada", "city")), "current") == cur.encode()
    await _repaired(store, client, cur, "ada")


async def test_an_expired_current_version_is_dropped_by_the_next_write(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    cur = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019, ttl=0.2)
    await gone(store, client, cur)
    await _repaired(store, client, cur, "ada")


async def test_fact_history_drops_an_expired_current_version(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    old = await store.remember("Porto", thread_id="ada", subject="city", valid_from=Y2018)
    cur = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019, ttl=0.2)
    await gone(store, client, cur)
    history = await store.fact_history("city", thread_id="ada")
    assert [(r.id, r.current) for r in history] == [(old, False)]
    d = digest("ada", "city")
    assert await client.hget(store.keys.subject(d), "current") is None
    assert await versions(client, store, d) == [old]
    # nothing later is left: a write between the two dates is current again
    new = await store.remember("Faro", thread_id="ada", subject="city", valid_from=Y2018 + 1)
    assert await ids_of(store, thread_id="ada") == {new}
    kept = await store.get(old)
    assert kept is not None and kept.valid_until == Y2018 + 1


async def test_a_tag_only_forget_by_scope_leaves_no_stale_current(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    cur = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019, tags=["moves"])
    assert await store.forget_by_scope(tags=["moves"]) == 1
    await _repaired(store, client, cur, "ada")


class _Extractor:
    """Undated facts, chosen by the memories' content (as an LLM extractor would answer)."""

    def __init__(self, table: dict[str, list[Fact]]) -> None:
        self.table = table

    def __call__(self, items: Sequence[MemoryItem]) -> list[Fact]:
        return [f for i in items for f in self.table.get(i.content, [])]


async def test_undated_facts_carry_the_time_of_what_they_were_read_from(
    make_store: Callable[..., MemoryStore],
) -> None:
    """A retired fact is found by ``as_of`` when it was current (its valid_from is its page's time)."""
    store = make_store()
    ext = _Extractor(
        {
            "I live in Lisbon now": [Fact("home", "lives in Lisbon")],
            "We moved to Berlin": [Fact("home", "lives in Berlin")],
            "I left Berlin": [Fact("home", "", tombstone=True)],
        }
    )
    await store.remember("I live in Lisbon now", thread_id="ada", valid_from=Y2020)
    await store.consolidate("facts", extract_facts=ext, thread_id="ada")
    await store.remember("We moved to Berlin", thread_id="ada", valid_from=Y2024)
    await store.consolidate("facts", extract_facts=ext, thread_id="ada")

    def facts(page: Sequence[MemoryItem]) -> list[str]:
        return [i.content for i in page if i.kind == "fact"]

    assert facts((await store.list(thread_id="ada", as_of="2022-01-01")).items) == ["lives in Lisbon"]
    assert facts((await store.list(thread_id="ada")).items) == ["lives in Berlin"]
    history = await store.fact_history("home", thread_id="ada", kind="fact")
    stamps = [(r.statement, r.valid_from, r.valid_until) for r in history]
    assert [(s, f and int(f.timestamp() * 1000), u and int(u.timestamp() * 1000)) for s, f, u in stamps] == [
        ("lives in Berlin", Y2024, None),
        ("lives in Lisbon", Y2020, Y2024),
    ]
    # a retraction read from a later page ends the version at that page's time
    await store.remember("I left Berlin", thread_id="ada", valid_from=Y2025)
    await store.consolidate("facts", extract_facts=ext, thread_id="ada")
    assert facts((await store.list(thread_id="ada")).items) == []
    assert facts((await store.list(thread_id="ada", as_of="2024-06-01")).items) == ["lives in Berlin"]
    assert facts((await store.list(thread_id="ada", as_of="2025-06-01")).items) == []


@pytest.mark.parametrize("seed", range(3))
async def test_concurrent_past_dated_writes_keep_one_version_at_each_instant(
    make_store: Callable[..., MemoryStore], seed: int
) -> None:
    """Sixteen writers at once, dates before the current one's, ties included: whichever order the
    pointer and the moves to history run in, each instant has at most one version."""
    rnd = random.Random(seed)
    day = 86_400_000
    store = make_store()
    await store.remember("now", thread_id="t", subject="city", valid_from=Y2019 + 100 * day)
    dates = [Y2019 + rnd.randrange(0, 12) * day for _ in range(16)]
    await asyncio.gather(
        *(store.remember(f"v{n}", thread_id="t", subject="city", valid_from=d) for n, d in enumerate(dates))
    )
    for d in sorted(set(dates)):
        for t in (d, d + day // 2):
            page = await store.list(thread_id="t", as_of=t, limit=100)
            assert len(page.items) == 1, [(i.content, i.valid_from, i.valid_until) for i in page.items]
    assert [i.content for i in (await store.list(thread_id="t")).items] == ["now"]


async def test_a_ties_loser_does_not_keep_an_older_write_from_being_current(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """Found by the model test (consolidation): of two versions of one instant the later write
    wins and the earlier is valid at no instant. With the winner gone, a write dated before
    them is current: no version valid at some instant starts after it."""
    store = make_store()
    loser = await store.remember("Paris", thread_id="ada", subject="job", valid_from=Y2024)
    winner = await store.remember("Berlin", thread_id="ada", subject="job", valid_from=Y2024)
    before = await store.get(loser)
    assert before is not None and before.valid_from == before.valid_until == Y2024  # valid at no instant
    assert await store.forget(winner)
    older = await store.remember("Lisbon", thread_id="ada", subject="job", valid_from=Y2020)
    assert await ids_of(store, thread_id="ada") == {older}, "the older write is current"
    assert await client.hget(store.keys.subject(digest("ada", "job")), "current") == older.encode()
    got = await store.get(older)
    assert got is not None and got.valid_until is None
    at_2025 = {i.id for i in (await store.list(thread_id="ada", as_of=Y2025)).items}
    assert at_2025 == {older}
    history = [v.id for v in await store.fact_history("job", thread_id="ada")]
    assert set(history) == {loser, older}  # the loser stays listed
