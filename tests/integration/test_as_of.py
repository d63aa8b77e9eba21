"""``as_of``, ``since`` / ``until`` and superseded versions on the real engine (issue 26).

Superseded versions are written the way supersession writes them: ``scripts.RETIRE``
renames the document to its history key (``<name>:hist:{<name>:mem:<id>}``) with
``valid_until`` (ms) and ``superseded_by``; the history index ``<name>:hist:idx`` finds
them for ``as_of``, while default reads, ``count`` and ``stats`` see current memories only.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import MemoryStore
from betterdb_memory.backend import scripts
from betterdb_memory.core.facts import subject_digest
from betterdb_memory.core.keys import ConsolidationKeys, Scope
from betterdb_memory.embedders.hashing import HashingEmbedder
from betterdb_memory.errors import ConfigurationError, ValidationError

pytestmark = pytest.mark.integration

JAN_2019 = 1_546_300_800_000  # 2019-01-01T00:00:00Z
JAN_2022 = 1_640_995_200_000  # 2022-01-01T00:00:00Z
JAN_2023 = 1_672_531_200_000  # 2023-01-01T00:00:00Z
MAY_2024 = 1_714_521_600_000  # 2024-05-01T00:00:00Z
JAN_2030 = 1_893_456_000_000  # 2030-01-01T00:00:00Z
HOUR = 3_600_000


def hist_key(store: MemoryStore, memory_id: str) -> str:
    return f"{store.keys.history_prefix()}{{{store.keys.doc(memory_id)}}}"


async def retire(store: MemoryStore, memory_id: str, *, until: int | str, by: str = "") -> None:
    """What supersession does to the old version: RETIRE (same slot, out of the main index)."""
    keys = [store.keys.doc(memory_id), hist_key(store, memory_id), store.keys.access(memory_id)]
    moved = await store.backend.script("test", scripts.RETIRE.call(keys, [str(until), by, "0"]))
    assert moved == 1


async def eventually(check: Callable[[], Awaitable[bool]]) -> None:
    """Both engines index a renamed document asynchronously (valkey-search): poll briefly, no time asserted."""
    for _ in range(200):
        if await check():
            return
        await asyncio.sleep(0.01)
    assert await check()


async def ada(store: MemoryStore) -> tuple[str, str]:
    """Lisbon from 2019, Berlin from May 2024, which superseded it."""
    lisbon = await store.remember("Ada lives in Lisbon", thread_id="ada", valid_from=JAN_2019)
    berlin = await store.remember("Ada lives in Berlin", thread_id="ada", valid_from=MAY_2024)
    await retire(store, lisbon, until=MAY_2024, by=berlin)

    async def indexed() -> bool:
        return await store.count(thread_id="ada", as_of=JAN_2023) == 1

    await eventually(indexed)
    return lisbon, berlin


async def test_as_of_returns_the_version_valid_then(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    lisbon, berlin = await ada(store)
    q = "Where does Ada live?"
    # now: Berlin only; the superseded version leaves default reads and counts
    hits = await store.recall(q, thread_id="ada", threshold=2.0, reinforce=False)
    assert [h.item.id for h in hits] == [berlin]
    assert await store.count(thread_id="ada") == 1
    assert [i.id for i in (await store.list(thread_id="ada")).items] == [berlin]
    # as of 2023: Lisbon, with when it stopped being true
    then = await store.recall(q, thread_id="ada", threshold=2.0, as_of="2023-01-01")
    assert [(h.item.id, h.item.valid_until) for h in then] == [(lisbon, MAY_2024)]
    page = await store.list(thread_id="ada", as_of=datetime(2023, 1, 1, tzinfo=UTC))
    assert ([i.id for i in page.items], page.total) == ([lisbon], 1)
    assert page.items[0].valid_until == MAY_2024 and page.items[0].valid_from == JAN_2019
    # half-open: at the supersession instant, the new version
    assert [h.item.id for h in await store.recall(q, thread_id="ada", threshold=2.0, as_of=MAY_2024)] == [
        berlin
    ]
    assert await store.count(thread_id="ada", as_of=MAY_2024 - 1) == 1
    assert await store.count(thread_id="ada", as_of=JAN_2019 - 1) == 0
    # by vector too
    vector = [float(x) for x in (await store.embedder.embed([q]))[0]]
    by_vec = await store.recall_by_vector(vector, thread_id="ada", threshold=2.0, as_of=JAN_2022)
    assert [h.item.id for h in by_vec] == [lisbon]
    # get: the superseded version from its history document
    got = await store.get(lisbon)
    assert got is not None and (got.content, got.valid_until) == ("Ada lives in Lisbon", MAY_2024)
    current = await store.get(berlin)
    assert current is not None and current.valid_until is None
    assert [i and i.id for i in await store.get_many([berlin, lisbon, "0" * 8])] == [berlin, lisbon, None]
    # the history never counts toward stats
    assert (await store.stats()).items == 1


async def test_as_of_does_not_reinforce_a_superseded_version(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    lisbon, _ = await ada(store)
    await store.recall("Ada", thread_id="ada", threshold=2.0, as_of=JAN_2023)
    assert await client.exists(store.keys.doc(lisbon), store.keys.access(lisbon)) == 0


async def test_a_memory_written_without_valid_from_is_valid_from_its_created_at(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """The reference's documents (no valid_from): every clause falls back to created_at."""
    store = make_store()
    mid = await store.remember("Grace wrote the first compiler", thread_id="g")
    assert await client.hexists(store.keys.doc(mid), "valid_from") == 0
    item = await store.get(mid)
    assert item is not None
    created = item.created_at
    assert await store.count(thread_id="g", as_of=created) == 1
    assert await store.count(thread_id="g", as_of=created - 1) == 0
    assert await store.count(thread_id="g", since=created - HOUR) == 1
    assert await store.count(thread_id="g", until=created) == 0
    assert await store.count(thread_id="g", since=created - HOUR, until=created + 1) == 1
    hits = await store.recall("compiler", thread_id="g", threshold=2.0, reinforce=False, since=created - HOUR)
    assert [h.item.id for h in hits] == [mid]
    assert await store.recall("compiler", thread_id="g", threshold=2.0, as_of=created - HOUR) == []


async def test_a_future_dated_memory_is_returned_unless_as_of_says_otherwise(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store()
    plan = await store.remember("Dentist appointment", thread_id="p", valid_from=JAN_2030)
    assert await store.count(thread_id="p") == 1
    assert [h.item.id for h in await store.recall("dentist", thread_id="p", threshold=2.0)] == [plan]
    assert [i.id for i in (await store.list(thread_id="p")).items] == [plan]
    assert await store.count(thread_id="p", as_of=int(time.time() * 1000)) == 0
    assert await store.count(thread_id="p", as_of=JAN_2030) == 1
    assert await store.count(thread_id="p", since="2029") == 1


async def test_windows_filter_in_the_engine(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    ids = {
        year: await store.remember(f"Event of {year}", thread_id="w", valid_from=f"{year}-06-01")
        for year in (2019, 2022, 2024)
    }
    page = await store.list(thread_id="w", since="2020", until="2024-01-01")
    assert ([i.id for i in page.items], page.total) == ([ids[2022]], 1)
    assert await store.count(thread_id="w", since="2020") == 2
    assert await store.count(thread_id="w", until="2022-06-01") == 1  # until is exclusive
    assert await store.count(thread_id="w", since="2022-06-01", until="2022-06-01") == 0  # empty window
    hits = await store.recall("Event", thread_id="w", k=8, threshold=2.0, until="2020", reinforce=False)
    assert [h.item.id for h in hits] == [ids[2019]]
    # a window and an instant together
    assert await store.count(thread_id="w", since="2020", as_of="2023") == 1
    # forget_by_scope with a window deletes that window only
    assert await store.forget_by_scope(thread_id="w", since="2021", until="2023") == 1
    assert sorted(i.id for i in (await store.list(thread_id="w")).items) == sorted([ids[2019], ids[2024]])


async def test_forget_by_scope_and_erase_delete_superseded_versions(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    lisbon, berlin = await ada(store)
    other = await store.remember("Ada's old flat", thread_id="ada", valid_from=JAN_2019)
    await retire(store, other, until=JAN_2022)
    # a window reaches versions too: only the ones whose valid_from falls in it
    assert await store.forget_by_scope(thread_id="ada", since="2024") == 1  # Berlin (versions not counted)
    assert await client.exists(hist_key(store, lisbon), hist_key(store, other)) == 2
    assert await store.forget_by_scope(thread_id="ada") == 0
    assert await client.exists(hist_key(store, lisbon), hist_key(store, other)) == 0
    assert await store.get(lisbon) is None and await store.get(berlin) is None
    # erase: the agent's versions go with its memories
    kept = await store.remember("Ada again", agent_id="ag", thread_id="t", valid_from=JAN_2019)
    await retire(store, kept, until=JAN_2022)
    await store.erase(agent_id="ag")
    assert await client.exists(hist_key(store, kept)) == 0


Call = Callable[[MemoryStore], Awaitable[Any]]
BAD: list[tuple[dict[str, Any], str]] = [
    ({"since": "2024", "until": "2023"}, "validation.time_window"),
    ({"as_of": "last week"}, "validation.time_format"),
    ({"since": "1800-01-01"}, "validation.range"),
    ({"until": 1.5}, "validation.type"),
    ({"as_of": True}, "validation.type"),
]


@pytest.mark.parametrize(("kwargs", "code"), BAD)
@pytest.mark.parametrize("call", ["recall", "recall_by_vector", "list", "count", "forget_by_scope"])
async def test_bad_times_are_typed_errors_before_any_io(
    make_store: Callable[..., MemoryStore],
    client: avalkey.Valkey,
    call: str,
    kwargs: dict[str, Any],
    code: str,
) -> None:
    store = make_store()
    if call == "forget_by_scope":
        kwargs = {k: v for k, v in kwargs.items() if k != "as_of"} or {"since": "nope"}
        code = "validation.time_format" if "since" in kwargs and kwargs["since"] == "nope" else code
    calls: dict[str, Call] = {
        "recall": lambda s: s.recall("x", **kwargs),
        "recall_by_vector": lambda s: s.recall_by_vector([1.0] * s.embedder.dimensions, **kwargs),
        "list": lambda s: s.list(thread_id="t", **kwargs),
        "count": lambda s: s.count(**kwargs),
        "forget_by_scope": lambda s: s.forget_by_scope(thread_id="t", **kwargs),
    }
    with pytest.raises(ValidationError) as err:
        await calls[call](store)
    assert err.value.code == code
    # nothing was sent: the store never even set up its index
    assert await client.exists(store.keys.meta) == 0


async def test_legacy_fact_history_with_iso_valid_until_is_rewritten_when_the_index_is_made(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """Fact history written before time support held valid_until as ISO text: made numeric first."""
    store = make_store()
    scope = Scope(namespace=None, agent_id=None, thread_id="f")
    (fact,) = await store.remember_many(
        [
            {
                "content": "Ada lives in Porto",
                "thread_id": "f",
                "kind": "fact",
                "subject": "city",
                "valid_from": JAN_2019,
            }
        ]
    )
    ck = ConsolidationKeys(store.keys, scope)
    digest = subject_digest("city")
    await retire(store, fact, until="2022-01-01T00:00:00+00:00")
    await client.hset(store.keys.consolidation_targets, scope.tag, json.dumps([None, None, "f"]))
    await client.hset(ck.subjects, digest, "city")
    await client.zadd(ck.history(digest), {fact: 1.0})
    # the store that made the history index before this fact was retired is gone; a store
    # starting on a store without the index (an older version's) creates it, after the rewrite
    await client.execute_command("FT.DROPINDEX", store.index.history.name)
    fresh = make_store()
    assert await fresh.count(thread_id="f") == 0
    assert await client.hget(hist_key(store, fact), "valid_until") == str(JAN_2022).encode()

    async def indexed() -> bool:
        return await fresh.count(thread_id="f", as_of=JAN_2019) == 1

    await eventually(indexed)
    assert await fresh.count(thread_id="f", as_of=JAN_2022) == 0
    (record,) = await fresh.fact_history("city", thread_id="f")
    assert record.valid_until == datetime(2022, 1, 1, tzinfo=UTC)


async def test_on_an_index_the_reference_created_times_are_checked_in_the_client(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, unique_name: str
) -> None:
    """betterdb-agent-memory's index has no valid_from (and case-insensitive TAGs): exact all the same."""
    from betterdb_memory import HashingEmbedder
    from betterdb_memory.backend.dialect import probe

    schema = (
        f"vector VECTOR HNSW 6 TYPE FLOAT32 DIM {HashingEmbedder().dimensions} DISTANCE_METRIC COSINE "
        "threadId TAG agentId TAG namespace TAG tags TAG SEPARATOR , source TAG importance NUMERIC "
        "created_at NUMERIC SORTABLE last_accessed_at NUMERIC access_count NUMERIC"
    ).split()
    if (await probe(client)).text_fields:
        schema += ["content", "TEXT"]
    await client.execute_command(
        "FT.CREATE",
        f"{unique_name}:mem:idx",
        "ON",
        "HASH",
        "PREFIX",
        "1",
        f"{unique_name}:mem:",
        "SCHEMA",
        *schema,
    )
    store = make_store()
    lisbon, berlin = await ada(store)
    assert not store.layout.valid_from
    await store.remember("Ada lives in LISBON", thread_id="ADA", valid_from=JAN_2019)  # another scope
    assert await store.count(thread_id="ada", as_of=JAN_2023) == 1
    assert await store.count(thread_id="ada", as_of=MAY_2024) == 1
    assert await store.count(thread_id="ada", since="2024") == 1
    assert await store.count(thread_id="ada", until="2024") == 0  # Lisbon is history now
    page = await store.list(thread_id="ada", as_of=JAN_2023)
    assert ([i.id for i in page.items], page.total) == ([lisbon], 1)
    hits = await store.recall("Ada", thread_id="ada", threshold=2.0, as_of=MAY_2024, reinforce=False)
    assert [h.item.id for h in hits] == [berlin]


async def _drop_main_only(store: MemoryStore, client: avalkey.Valkey) -> None:
    """What deleting a store by hand often leaves: the main index, meta and documents gone, the history index not."""
    await client.execute_command("FT.DROPINDEX", store.keys.index)
    keys = [k async for k in client.scan_iter(match=f"{store.name}:mem*", count=1000)]
    await client.unlink(*keys, f"{store.name}:__mem_meta")


async def test_a_stale_empty_history_index_of_another_model_is_rebuilt(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """A new store under an old name with another vector length: ``as_of`` works (no engine error)."""
    old = make_store(embedder=HashingEmbedder(dimensions=22))
    await old.remember("Ada lives in Lisbon", thread_id="ada")
    await old.close()
    await _drop_main_only(old, client)
    new = make_store()  # the default test embedder: another vector length
    mid = await new.remember("Ada lives in Berlin", thread_id="ada", valid_from=MAY_2024)
    hits = await new.recall("Where does Ada live?", thread_id="ada", as_of=MAY_2024 + 1, threshold=2.0)
    assert [h.item.id for h in hits] == [mid]


async def test_a_history_index_of_another_model_holding_versions_is_refused(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    old = make_store(embedder=HashingEmbedder(dimensions=22))
    await ada(old)  # one superseded version in the history index
    await old.close()
    await _drop_main_only(old, client)
    new = make_store()
    with pytest.raises(ConfigurationError) as err:
        await new.remember("Ada lives in Berlin", thread_id="ada")
    assert err.value.code == "configuration.dimension_mismatch"
    assert err.value.details["index"] == f"{new.name}:hist:idx"
