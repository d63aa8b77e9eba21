"""consolidate / fact_history / purge_fact_history on the real engine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder, MemoryItem, MemoryStore, Scope, ValidationError
from betterdb_memory.core.facts import ConsolidateFactsResult, ConsolidateResult, Fact
from betterdb_memory.core.keys import ConsolidationKeys
from betterdb_memory.errors import ConsolidationBusyError

pytestmark = pytest.mark.integration

_Store: Any = MemoryStore


@pytest.fixture
async def store(client: Any, unique_name: str) -> AsyncIterator[Any]:
    s = _Store(client=client, name=unique_name, embedder=HashingEmbedder())
    yield s
    await s.close()


class Extractor:
    """A deterministic 'model': each memory's content maps to the facts it states."""

    def __init__(self, table: dict[str, list[Fact]]) -> None:
        self.table = table
        self.calls: list[list[MemoryItem]] = []

    async def __call__(self, items: list[MemoryItem]) -> list[Fact]:
        self.calls.append(list(items))
        return [f for item in items for f in self.table.get(item.content, [])]


async def tick() -> None:
    """Let the millisecond clock move on: created_at is in ms, and equal times order by id."""
    await asyncio.sleep(0.003)


async def remember_all(store: Any, contents: Sequence[str], **opts: Any) -> list[str]:
    """Remember each in turn, each created in a later millisecond than the one before."""
    ids = []
    for c in contents:
        ids.append(await store.remember(c, **opts))
        await tick()
    return ids


async def recalled_ids(store: Any, query: str, **scope: Any) -> set[str]:
    hits = await store.recall(query, k=50, threshold=2.0, reinforce=False, **scope)
    return {h.item.id for h in hits}


# -- facts -----------------------------------------------------------------------------------


async def test_facts_written_with_subject_date_and_sources_kept(store: Any) -> None:
    """Each fact is a kind='fact' memory carrying its subject and date; sources stay."""
    src = await remember_all(store, ["I moved to Paris in March"], thread_id="t")
    ext = Extractor({"I moved to Paris in March": [Fact("User city", "lives in Paris", "2024-03-01")]})
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert isinstance(res, ConsolidateFactsResult)
    assert (res.candidates, res.facts, res.superseded, res.unchanged, res.deleted) == (1, 1, 0, 0, 0)
    (fid,) = res.fact_ids
    assert res.created == [fid]
    fact = await store.get(fid)
    assert fact is not None and fact.kind == "fact" and fact.subject == "User city"
    assert fact.content == "[2024-03-01] lives in Paris" and fact.date == "2024-03-01"
    assert fact.source == "fact" and fact.thread_id == "t"
    assert await store.get(src[0]) is not None
    assert all(i.kind != "fact" for call in ext.calls for i in call)


async def test_rerun_over_unchanged_sources_writes_nothing(store: Any, client: Any) -> None:
    """A second run finds every source consumed: no model call, no write, no key changed."""
    contents = ["a1", "a2", "a3"]
    await remember_all(store, contents, thread_id="t")
    ext = Extractor({"a1": [Fact("x", "one")], "a2": [Fact("y", "two")], "a3": [Fact("x", "three")]})
    first = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (len(first.created), first.superseded, first.facts) == (3, 1, 2)
    before = await _dump(client, store.name)
    again = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (again.candidates, again.created, again.superseded, again.retracted) == (0, [], 0, 0)
    assert sorted(again.fact_ids) == sorted(first.fact_ids)
    assert len(ext.calls) == 1
    assert await _dump(client, store.name) == before


async def test_restated_fact_from_new_source_is_unchanged(store: Any) -> None:
    """The same statement again (other case/spacing, later date) changes nothing."""
    await store.remember("s1", thread_id="t")
    ext = Extractor(
        {"s1": [Fact("Pet", "has a cat", "2024-01-01")], "s2": [Fact("pet ", "Has  a CAT", "2024-05-01")]}
    )
    await store.consolidate("facts", extract_facts=ext, thread_id="t")
    await store.remember("s2", thread_id="t")
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (res.candidates, res.created, res.unchanged, res.facts) == (1, [], 1, 1)
    assert len(await store.fact_history("PET", thread_id="t")) == 1


async def test_newer_statement_supersedes_and_history_is_kept(store: Any, client: Any) -> None:
    """The old fact leaves recall, count and list (moved to history), and fact_history shows both, newest first."""
    ext = Extractor(
        {
            "old": [Fact("user city", "lives in Paris", "2024-01-01")],
            "new": [Fact("User  City", "lives in Berlin", "2024-06-01T12:00:00Z")],
        }
    )
    await store.remember("old", thread_id="t")
    r1 = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    (paris,) = r1.fact_ids
    await store.remember("new", thread_id="t")
    r2 = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    (berlin,) = r2.fact_ids
    assert (r2.created, r2.superseded, r2.deleted, r2.facts) == ([berlin], 1, 1, 1)

    # get() reads the superseded version from its history document, with when it ended.
    old = await store.get(paris)
    assert old is not None and old.valid_until is not None and old.content.endswith("lives in Paris")
    # Moved (RENAME) out of the index prefix, not deleted: <name>:hist:{<name>:mem:<id>}.
    assert not await client.exists(store.keys.doc(paris))
    assert await client.hget(f"{store.name}:hist:{{{store.keys.doc(paris)}}}", "content") == (
        b"[2024-01-01] lives in Paris"
    )
    ids = await recalled_ids(store, "user city lives in Paris", thread_id="t")
    assert berlin in ids and paris not in ids
    assert await store.count(thread_id="t") == 3  # two sources + the current fact
    assert paris not in {i.id for i in (await store.list(thread_id="t")).items}

    hist = await store.fact_history("USER CITY", thread_id="t")
    assert [h.id for h in hist] == [berlin, paris]
    cur, old = hist
    assert cur.current and cur.statement == "lives in Berlin" and cur.superseded_by is None
    assert cur.valid_from is not None and cur.valid_from.isoformat() == "2024-06-01T12:00:00+00:00"
    assert not old.current and old.superseded_by == berlin and not old.retracted
    assert old.valid_until == cur.valid_from and old.date == "2024-01-01"


async def test_tombstone_retracts(store: Any) -> None:
    ext = Extractor(
        {
            "has": [Fact("car", "drives a Volvo", "2024-01-01")],
            "sold": [Fact("car", "", "2024-02-01", tombstone=True)],
        }
    )
    await store.remember("has", thread_id="t")
    (volvo,) = (await store.consolidate("facts", extract_facts=ext, thread_id="t")).fact_ids
    await store.remember("sold", thread_id="t")
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (res.retracted, res.created, res.facts, res.unmatched_tombstones) == (1, [], 0, [])
    assert res.fact_ids == [] and res.deleted == 1
    assert volvo not in await recalled_ids(store, "car drives a Volvo", thread_id="t")
    (rec,) = await store.fact_history("car", thread_id="t")
    assert rec.id == volvo and rec.retracted and not rec.current
    assert rec.valid_until is not None and rec.valid_until.isoformat() == "2024-02-01T00:00:00+00:00"


async def test_unmatched_tombstone_is_reported(store: Any) -> None:
    seen: list[tuple[str, dict[str, int]]] = []

    class Metrics:
        """Records observe_consolidation; every other metric goes to the store's own."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def observe_consolidation(self, mode: str, **counts: int) -> None:
            seen.append((mode, counts))

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    store.metrics = Metrics(store.metrics)
    await store.remember("forget my boat", thread_id="t")
    ext = Extractor({"forget my boat": [Fact("Boat", "", tombstone=True)]})
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert res.unmatched_tombstones == ["Boat"] and res.retracted == 0
    assert seen == [("facts", {"created": 0, "deleted": 0, "superseded": 0, "unmatched": 1})]


async def test_older_dated_statement_does_not_win(store: Any) -> None:
    ext = Extractor(
        {"n": [Fact("job", "engineer", "2024-05-01")], "o": [Fact("job", "student", "2019-09-01")]}
    )
    await store.remember("n", thread_id="t")
    (eng,) = (await store.consolidate("facts", extract_facts=ext, thread_id="t")).fact_ids
    await store.remember("o", thread_id="t")
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (res.created, res.superseded, res.unchanged, res.fact_ids) == ([], 0, 1, [eng])
    assert [h.id for h in await store.fact_history("job", thread_id="t")] == [eng]


async def test_dates_compare_as_instants_not_strings(store: Any) -> None:
    """'2024-01-02T00:00:00+05:00' is 2024-01-01T19:00Z: earlier than '2024-01-01T23:00:00Z'."""
    ext = Extractor(
        {
            "a": [Fact("meeting", "in room 1", "2024-01-01T23:00:00Z")],
            "b": [Fact("meeting", "in room 2", "2024-01-02T00:00:00+05:00")],  # later text, earlier time
            "c": [Fact("meeting", "in room 3", "2024-01-02")],  # naive date = 2024-01-02T00:00Z: later
        }
    )
    await store.remember("a", thread_id="t")
    await store.consolidate("facts", extract_facts=ext, thread_id="t")
    await store.remember("b", thread_id="t")
    rb = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (rb.created, rb.unchanged) == ([], 1)
    await store.remember("c", thread_id="t")
    rc = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (len(rc.created), rc.superseded) == (1, 1)
    assert [h.statement for h in await store.fact_history("meeting", thread_id="t")] == [
        "in room 3",
        "in room 1",
    ]


async def test_dateless_statement_supersedes(store: Any) -> None:
    ext = Extractor({"a": [Fact("diet", "vegetarian", "2030-01-01")], "b": [Fact("diet", "vegan")]})
    await store.remember("a", thread_id="t")
    await store.consolidate("facts", extract_facts=ext, thread_id="t")
    await store.remember("b", thread_id="t")
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (len(res.created), res.superseded) == (1, 1)
    cur = (await store.fact_history("diet", thread_id="t"))[0]
    assert cur.statement == "vegan" and cur.date is None
    assert cur.content == "vegan"  # undated: the statement alone


async def test_statements_within_one_run_reconcile_in_order(store: Any) -> None:
    """A, B, A again in one page: the last one is current and history has all three."""
    ext = Extractor(
        {
            "m": [
                Fact("mood", "happy", "2024-01-01"),
                Fact("mood", "sad", "2024-01-01"),
                Fact("mood", "happy", "2024-01-01"),
            ]
        }
    )
    await store.remember("m", thread_id="t")
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert (len(res.created), res.superseded, res.facts) == (3, 2, 1)
    hist = await store.fact_history("mood", thread_id="t")
    assert [h.statement for h in hist] == ["happy", "sad", "happy"]
    assert hist[0].current and [hist[0].id] == res.fact_ids
    assert sorted(h.id for h in hist) == sorted(res.created)
    assert hist[1].superseded_by == hist[0].id and hist[2].superseded_by == hist[1].id


async def test_prior_facts_and_summaries_are_not_sources(store: Any) -> None:
    """Facts are never fed back; digests are facts-mode sources, summary-mode ones only with include_summaries."""
    await store.remember("x", thread_id="t")
    await tick()
    await store.remember("a digest", thread_id="t", source="summary")
    ext = Extractor({"x": [Fact("s", "v")]})
    await store.consolidate("facts", extract_facts=ext, thread_id="t")
    await store.remember("y", thread_id="t")
    res = await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert [[i.content for i in call] for call in ext.calls] == [["x", "a digest"], ["y"]]
    assert res.facts == 1  # the fact of the first run is current, and was no candidate

    summ = Summarizer()
    await store.consolidate("summary", summ, thread_id="t", delete_sources=False)
    await store.consolidate("summary", summ, thread_id="t", delete_sources=False, include_summaries=True)
    assert [[i.content for i in call] for call in summ.calls] == [
        ["x", "y"],
        ["a digest", "digest: x; y"],
    ]


async def test_sync_extractor_and_selectors(store: Any) -> None:
    """A plain function works; tags, max_importance and older_than_seconds select candidates."""
    got: list[str] = []

    def extract(items: list[MemoryItem]) -> list[Fact]:
        got.extend(i.content for i in items)
        return []

    await store.remember("old keep", thread_id="t", tags=["k"], importance=0.2)
    await store.remember("old important", thread_id="t", tags=["k"], importance=0.9)
    await store.remember("old untagged", thread_id="t", importance=0.2)
    await asyncio.sleep(1.1)
    await store.remember("new", thread_id="t", tags=["k"], importance=0.2)
    res = await store.consolidate(
        "facts", extract_facts=extract, thread_id="t", tags=["k"], max_importance=0.5, older_than_seconds=1.0
    )
    assert got == ["old keep"] and res.candidates == 1


async def test_malformed_model_output_commits_nothing_and_can_be_retried(store: Any) -> None:
    """A bad date fails the page before any write; the sources stay unconsumed."""
    await store.remember("x", thread_id="t")
    outputs: list[Any] = [[Fact("s", "v", "next tuesday")], [{"subject": "s", "statement": "v"}]]

    def extract(items: list[MemoryItem]) -> Any:
        return outputs.pop(0)

    with pytest.raises(ValidationError) as info:
        await store.consolidate("facts", extract_facts=extract, thread_id="t")
    assert info.value.code == "validation.fact_date"
    assert await store.count(thread_id="t") == 1
    res = await store.consolidate("facts", extract_facts=extract, thread_id="t")  # mappings work too
    assert (res.candidates, len(res.created), res.facts) == (1, 1, 1)


async def test_scope_filter_spans_scopes_and_writes_to_named_scope(store: Any) -> None:
    """agent_id alone matches every thread of the agent; facts land in (agent, no thread)."""
    await store.remember("t1 fact", agent_id="a", thread_id="t1")
    await store.remember("t2 fact", agent_id="a", thread_id="t2")
    await store.remember("other agent", agent_id="b", thread_id="t1")
    ext = Extractor(
        {"t1 fact": [Fact("k1", "v1")], "t2 fact": [Fact("k2", "v2")], "other agent": [Fact("k3", "v3")]}
    )
    res = await store.consolidate("facts", extract_facts=ext, agent_id="a")
    assert res.candidates == 2 and res.facts == 2 and len(res.fact_ids) == 2
    items = await store.get_many(res.fact_ids)
    assert {(i.agent_id, i.thread_id) for i in items if i} == {("a", None)}
    assert len(await store.fact_history("k1", agent_id="a")) == 1
    # History is addressed by the exact target scope: a thread of the agent holds none.
    assert await store.fact_history("k1", agent_id="a", thread_id="t1") == []
    assert await store.fact_history("k1") == []


async def test_purge_fact_history_keeps_current(store: Any, client: Any) -> None:
    ext = Extractor({"1": [Fact("s", "one")], "2": [Fact("s", "two")], "3": [Fact("s", "three")]})
    for c in ("1", "2", "3"):
        await store.remember(c, thread_id="t")
        await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert len(await store.fact_history("s", thread_id="t")) == 3
    # The exact target scope named: the global scope (no thread) has no history of its own.
    assert await store.purge_fact_history(subject="s") == 0
    assert len(await store.fact_history("s", thread_id="t")) == 3
    assert await store.purge_fact_history(thread_id="t") == 2
    hist = await store.fact_history("s", thread_id="t")
    assert [h.statement for h in hist] == ["three"] and hist[0].current
    assert [k async for k in client.scan_iter(match=f"{store.name}:hist:*")] == []
    assert await store.purge_fact_history(subject="s", thread_id="t") == 0


async def test_deprecated_alias_warns_then_consolidates(store: Any) -> None:
    await store.remember("z", thread_id="t")
    with pytest.warns(DeprecationWarning, match="consolidate_facts"):
        res = await store.consolidate_facts(extract_facts=Extractor({"z": [Fact("z", "zz")]}), thread_id="t")
    assert res.mode == "facts" and len(res.created) == 1 and res.facts == 1


async def test_two_concurrent_runs_leave_the_state_of_one(store: Any, client: Any, unique_name: str) -> None:
    contents = [f"m{i}" for i in range(40)]
    table = {
        c: [Fact(f"s{i % 7}", f"v{i}", f"2024-{i // 28 + 1:02d}-{i % 28 + 1:02d}")]
        for i, c in enumerate(contents)
    }
    await store.remember_many([{"content": c, "thread_id": "t"} for c in contents])

    slow_calls = 0

    async def slow(items: list[MemoryItem]) -> list[Fact]:
        nonlocal slow_calls
        slow_calls += 1
        await asyncio.sleep(0.3)  # let the second caller arrive while the first holds the lock
        return [f for i in items for f in table.get(i.content, [])]

    a, b = await asyncio.gather(
        store.consolidate("facts", extract_facts=slow, thread_id="t"),
        store.consolidate("facts", extract_facts=slow, thread_id="t"),
    )
    assert slow_calls == 1
    assert sorted([a.candidates, b.candidates]) == [0, 40]
    assert [] in (a.created, b.created)

    # The same sources consolidated once, sequentially, in a second store.
    ref = _Store(client=client, name=f"{unique_name}r", embedder=HashingEmbedder())
    await ref.remember_many([{"content": c, "thread_id": "t"} for c in contents])
    one = await ref.consolidate("facts", extract_facts=Extractor(table), thread_id="t")
    assert (len(one.created), one.superseded) == (len(a.created + b.created), a.superseded + b.superseded)
    for s in range(7):
        mine = [h.statement for h in await store.fact_history(f"s{s}", thread_id="t")]
        theirs = [h.statement for h in await ref.fact_history(f"s{s}", thread_id="t")]
        assert mine == theirs
    assert await store.count(thread_id="t") == await ref.count(thread_id="t")
    await ref.close()


async def test_second_caller_gives_up_after_the_bounded_wait(store: Any, client: Any) -> None:
    """A lock held elsewhere (say a crashed run within its TTL) bounds the wait; nothing is read."""
    await store.remember("x", thread_id="t")
    lock = ConsolidationKeys(store.keys, Scope(thread_id="t")).lock
    await client.set(lock, "someone-else", px=5000)
    store.consolidation_lock_wait = 0.3
    ext = Extractor({"x": [Fact("s", "v")]})
    with pytest.raises(ConsolidationBusyError) as info:
        await store.consolidate("facts", extract_facts=ext, thread_id="t")
    assert info.value.code == "consolidation.busy" and ext.calls == []
    assert await client.get(lock) == b"someone-else"  # never deletes another holder's lock


async def test_run_that_lost_its_lock_writes_nothing(store: Any, client: Any) -> None:
    """If the lock is taken over mid-run (TTL expired), the run stops before writing."""
    await store.remember("x", thread_id="t")
    lock = ConsolidationKeys(store.keys, Scope(thread_id="t")).lock
    store.consolidation_lock_ttl = 1.0  # heartbeat every ~0.33 s

    async def hijacked(items: list[MemoryItem]) -> list[Fact]:
        await client.set(lock, "usurper", px=10_000)
        await asyncio.sleep(0.8)  # a heartbeat finds the lock gone
        return [Fact("s", "v")]

    with pytest.raises(ConsolidationBusyError) as info:
        await store.consolidate("facts", extract_facts=hijacked, thread_id="t")
    assert info.value.code == "consolidation.lock_lost"
    assert await store.count(thread_id="t") == 1 and await store.fact_history("s", thread_id="t") == []
    assert await client.get(lock) == b"usurper"


async def test_paging_survives_deletion_of_the_next_page_member(store: Any) -> None:
    """2,500 memories of one timestamp (one batch), three extractor pages: deleting the next
    page's first member mid-run skips nothing and repeats nothing.

    Candidates are read from the index once, ordered by (created_at, id); there is no
    cursor member to lose.
    """
    dim = store.embedder.dimensions
    vecs = _vectors(2500, dim, 3)
    ids = await store.remember_many(
        [{"content": f"c{i}", "vector": vecs[i], "thread_id": "p"} for i in range(2500)]
    )
    stamps = {i.created_at for i in await store.get_many(ids) if i is not None}
    assert len(stamps) == 1  # one batch, one timestamp: order ties everywhere
    seen: list[str] = []
    sizes: list[int] = []
    deleted: list[str] = []

    async def extract(items: list[MemoryItem]) -> list[Fact]:
        sizes.append(len(items))
        seen.extend(i.id for i in items)
        nxt = sorted(ids)[len(seen) : len(seen) + 1]  # the next page's first member
        if nxt:
            deleted.append(nxt[0])
            await store.forget(nxt[0])
        return []

    res = await store.consolidate("facts", extract_facts=extract, thread_id="p")
    assert sizes == [1000, 1000, 500] and res.candidates == 2500
    assert sorted(seen) == sorted(ids) and len(seen) == len(set(seen))
    assert seen == sorted(ids)  # ties in created_at break by id
    assert len(deleted) == 2 and await store.get_many(deleted) == [None, None]


# -- summary ---------------------------------------------------------------------------------


class Summarizer:
    def __init__(self) -> None:
        self.calls: list[list[MemoryItem]] = []

    def __call__(self, items: list[MemoryItem]) -> str:
        self.calls.append(list(items))
        return "digest: " + "; ".join(i.content for i in items)


async def test_summary_deletes_sources_and_passes_oldest_first(store: Any) -> None:
    ids = await remember_all(store, ["first", "second", "third"], thread_id="t", tags=["chat"])
    await store.remember("secret", thread_id="t", tags=["chat"], sensitivity="pii")
    await store.forget(ids.pop(1))  # a gap in the bookkeeping is skipped
    await store.remember("untagged stays", thread_id="t")
    summ = Summarizer()
    res = await store.consolidate("summary", summ, thread_id="t", summary_importance=0.9, tags=["chat"])
    assert isinstance(res, ConsolidateResult)
    assert (res.candidates, len(res.created), res.deleted) == (3, 1, 3)
    assert res.created == [res.summary_id]
    assert [i.content for i in summ.calls[0]] == ["first", "third", "secret"]
    assert [i.created_at for i in summ.calls[0]] == sorted(i.created_at for i in summ.calls[0])
    assert await store.get_many(ids) == [None, None]
    digest = await store.get(res.summary_id)
    assert digest is not None and digest.kind == "summary" and digest.source == "summary"
    assert digest.importance == pytest.approx(0.9) and digest.tags == ["chat"]
    assert digest.sensitivity == "pii"  # the most sensitive source's class: redaction filters still hold
    assert digest.metadata["source_ids"][:2] == ids and digest.metadata["source_count"] == 3
    assert digest.metadata["date_from"] <= digest.metadata["date_to"]
    assert await store.count(thread_id="t") == 2  # the digest and the untagged memory
    again = await store.consolidate("summary", summ, thread_id="t", tags=["chat"])
    assert (again.candidates, again.created, again.summary_id) == (0, [], None) and len(summ.calls) == 1


async def test_summary_keeping_sources_does_not_resummarise_them(store: Any) -> None:
    ids = await remember_all(store, ["one", "two"], thread_id="t")
    summ = Summarizer()
    res = await store.consolidate("summary", summ, thread_id="t", delete_sources=False)
    assert (res.candidates, len(res.created), res.deleted) == (2, 1, 0)
    assert all(i is not None for i in await store.get_many(ids))
    again = await store.consolidate("summary", summ, thread_id="t", delete_sources=False)
    assert again.created == [] and len(summ.calls) == 1
    await tick()
    await store.remember("three", thread_id="t")
    third = await store.consolidate(
        "summary", summ, thread_id="t", delete_sources=False, include_summaries=True
    )
    assert [i.content for i in summ.calls[1]] == [await _content(store, res.summary_id), "three"]
    assert len(third.created) == 1


async def test_memory_deleted_directly_is_no_candidate(store: Any, client: Any) -> None:
    """Candidates, count and list read the index: a document another client DELs (as BetterDB
    Monitor's forget does) is gone from all of them at once, with no bookkeeping to heal."""
    ids = await remember_all(store, ["a", "b", "c"], thread_id="t")
    assert await client.delete(store.keys.doc(ids[1])) == 1
    assert await store.count(thread_id="t") == 2
    page = await store.list(thread_id="t")
    assert [i.id for i in page.items] == [ids[2], ids[0]] and page.total == 2
    summ = Summarizer()
    res = await store.consolidate("summary", summ, thread_id="t")
    assert [i.content for i in summ.calls[0]] == ["a", "c"] and (res.candidates, res.deleted) == (2, 2)
    assert await store.count(thread_id="t") == 1


async def _content(store: Any, mid: str | None) -> str:
    item = await store.get(mid)
    assert item is not None
    return str(item.content)


# -- scale -----------------------------------------------------------------------------------


@pytest.fixture
async def small_store(client: Any, unique_name: str) -> AsyncIterator[Any]:
    """32-d vectors and a light HNSW graph: the scale tests measure consolidation, not indexing."""
    s = _Store(
        client=client, name=unique_name, embedder=HashingEmbedder(32), hnsw_m=4, hnsw_ef_construction=16
    )
    yield s
    await s.close()


def _vectors(n: int, dim: int, seed: int) -> np.ndarray[Any, Any]:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


async def _fill(store: Any, n: int, **scope: Any) -> None:
    vecs = _vectors(n, store.embedder.dimensions, 7)
    for start in range(0, n, 1000):
        await store.remember_many(
            [
                {"content": f"memory {i}", "vector": vecs[i], **scope}
                for i in range(start, min(n, start + 1000))
            ]
        )


@pytest.mark.slow
async def test_facts_over_12000_candidates_in_pages(small_store: Any) -> None:
    """Every one of 12,000 sources reaches the extractor exactly once, oldest first, ≤1,000 a call."""
    store = small_store
    await _fill(store, 12_000, thread_id="big")
    sizes: list[int] = []
    seen: list[str] = []

    async def extract(items: list[MemoryItem]) -> list[Fact]:
        sizes.append(len(items))
        seen.extend(i.id for i in items)
        return [Fact(f"bucket {int(i.content.split()[1]) % 5}", i.content) for i in items[-5:]]

    t0 = time.monotonic()
    res = await store.consolidate("facts", extract_facts=extract, thread_id="big")
    assert res.candidates == 12_000 and len(seen) == len(set(seen)) == 12_000
    assert max(sizes) <= 1000 and len(sizes) == 12
    assert len(res.created) == 60 and res.facts == 5 and len(res.fact_ids) == 5
    again = await store.consolidate("facts", extract_facts=extract, thread_id="big")
    assert again.candidates == 0
    assert time.monotonic() - t0 < 30


@pytest.mark.slow
async def test_summary_over_12000_candidates_across_scopes(small_store: Any) -> None:
    """12,000 memories in two threads fold into one digest; every source is deleted."""
    store = small_store
    await _fill(store, 6_000, agent_id="a", thread_id="t1")
    await _fill(store, 6_000, agent_id="a", thread_id="t2")
    summ = Summarizer()
    res = await store.consolidate("summary", summ, agent_id="a")
    assert (res.candidates, len(res.created), res.deleted) == (12_000, 1, 12_000)
    (items,) = summ.calls
    assert [i.created_at for i in items] == sorted(i.created_at for i in items)
    assert await store.count(agent_id="a") == 1
    digest = await store.get(res.summary_id)
    assert digest is not None and digest.metadata["source_count"] == 12_000
    assert digest.metadata["source_ids_truncated"] is True


async def _dump(client: Any, name: str) -> dict[str, Any]:
    """Every key of a store with its value (vectors included), to compare states."""
    out: dict[str, Any] = {}
    async for raw in client.scan_iter(match=f"{name}:*", count=1000):
        key = raw.decode()
        kind = (await client.type(key)).decode()
        if kind == "hash":
            out[key] = await client.hgetall(key)
        elif kind == "zset":
            out[key] = await client.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            out[key] = await client.smembers(key)
        elif kind == "string":
            out[key] = await client.get(key)
    out.pop(f"{name}:__mem_stats", None)  # counters of the read path
    return out
