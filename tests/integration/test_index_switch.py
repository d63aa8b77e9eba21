"""An index created with an older schema: detected, migrated beside itself, switched atomically.

The old index is made by hand with the FT.CREATE arguments of betterdb-memory before
issue 26 (no ``valid_from`` / ``state_from`` / ``subject_key``), as an older release or
betterdb-agent-memory leaves it; documents are then written through the public API.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import MemoryStore
from betterdb_memory.backend.index import IndexManager
from betterdb_memory.core.codec import as_text
from betterdb_memory.core.filter_fields import MetadataFields
from betterdb_memory.core.query import create_index_args
from betterdb_memory.embedders import HashingEmbedder
from betterdb_memory.errors import ConfigurationError, ValidationError

pytestmark = pytest.mark.asyncio

_NEW = {"valid_from", "state_from", "subject_key"}


def old_create_args(store: MemoryStore) -> list[str]:
    """FT.CREATE of the schema before issue 26 (git show c168ee8:betterdb_memory/core/query.py)."""
    args = create_index_args(store.index.spec, store.index.caps)
    schema = args.index("SCHEMA") + 1
    out, i = args[:schema], schema
    while i < len(args):
        if args[i] in _NEW:
            i += 3 if args[i] == "subject_key" else 2  # subject_key TAG CASESENSITIVE
            continue
        out.append(args[i])
        i += 1
    return out


async def ft(store: MemoryStore, *args: Any) -> Any:
    """An FT.* command through the store's backend (routed right on a cluster too)."""
    return await store.backend.search("test", list(args))


async def index_names(store: MemoryStore) -> set[str]:
    return {as_text(n) or "" for n in await ft(store, "FT._LIST")}


async def old_store(make_store: Callable[..., MemoryStore], client: avalkey.Valkey) -> MemoryStore:
    """A store on an index with the old schema (created by hand before the store first looks)."""
    probe = make_store()
    probe.index.capabilities = await probe.backend.probe()
    await ft(probe, *old_create_args(probe))
    await probe.close()
    store = make_store()
    store.index.auto_migrate = False
    store.index.settle_seconds = 0.2
    return store


async def fill(store: MemoryStore, n: int) -> list[str]:
    return [
        await store.remember(
            f"memory number {i} about topic {i * 7}", tags=[f"m{i}"], metadata={"priority": i % 5}
        )
        for i in range(n)
    ]


async def test_an_old_index_is_detected_and_features_needing_its_missing_fields_are_refused(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = await old_store(make_store, client)
    await fill(store, 3)
    assert set(store.index.outdated) == _NEW
    assert store.index.name == store.keys.index
    with pytest.raises(ConfigurationError) as err:
        store.index.require(["valid_from"], feature="as_of")
    assert err.value.code == "configuration.index_outdated"
    assert "betterdb-memory reindex" in str(err.value)


async def test_migrate_switches_while_recall_keeps_finding_every_memory(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = await old_store(make_store, client)
    n = 40
    await fill(store, n)
    misses: list[int] = []
    done = asyncio.Event()

    async def recalls() -> int:
        count = 0
        while not done.is_set():
            for i in range(0, n, 7):
                hits = await store.recall(f"memory number {i} about topic {i * 7}", k=1, tags=[f"m{i}"])
                count += 1
                if not hits or hits[0].item.tags != [f"m{i}"]:
                    misses.append(i)
        return count

    task = asyncio.create_task(recalls())
    report = await store.migrate_index()
    done.set()
    count = await task
    assert count > 0 and misses == []
    assert report.switched and set(report.missing) == _NEW
    # The reference's name carries the new schema; the intermediate generation is gone.
    assert store.index.name == store.keys.index and store.index.outdated == ()
    assert store.index.generation.gen == 2
    names = await index_names(store)
    assert store.keys.index in names and f"{store.keys.index}:g1" not in names
    info = await store.index_info()
    assert info is not None and set(info.fields) >= _NEW and info.num_docs == n
    meta = {as_text(k): as_text(v) for k, v in (await client.hgetall(store.keys.meta)).items()}
    assert meta["index"] == store.keys.index and meta["index_gen"] == "2" and meta["index_schema"]
    store.index.require(["valid_from"], feature="as_of")  # no longer refused
    assert (await store.migrate_index()).switched is False  # current: a no-op


async def test_two_migrators_race_and_exactly_one_switches(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    a = await old_store(make_store, client)
    await fill(a, 10)
    b = make_store()
    b.index.auto_migrate = False
    b.index.settle_seconds = 0.2
    await b.index.ensure_ready()
    assert b.index.outdated
    ra, rb = await asyncio.gather(a.migrate_index(keep_reference=True), b.migrate_index(keep_reference=True))
    assert [ra.switched, rb.switched].count(True) == 1
    assert ra.index == rb.index == f"{a.keys.index}:g1" and ra.generation == rb.generation == 1
    # keep_reference: the reference's index stays (old schema) beside generation 1.
    assert {a.keys.index, f"{a.keys.index}:g1"} <= await index_names(a)


async def test_a_second_process_adopts_the_new_generation_and_never_resurrects_the_old(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    a = await old_store(make_store, client)
    await fill(a, 5)
    b = make_store()
    b.index.auto_migrate = False
    assert len(await b.recall("memory number 1 about topic 7", k=5)) == 5
    assert b.index.name == b.keys.index
    await a.migrate_index(keep_reference=True)
    # The live-config refresh reads the meta's index fields in its round trip.
    await b._obs.live.refresh()
    assert len(await b.recall("memory number 1 about topic 7", k=5)) == 5
    assert b.index.name == f"{b.keys.index}:g1" and b.index.outdated == ()
    # A process that has not refreshed finds its index gone: it re-reads the meta hash.
    c = make_store()
    c.index.auto_migrate = False
    c.index.capabilities = await c.backend.probe()
    c.index.ready = True  # as if ready before the switch, on the old name
    await ft(a, "FT.DROPINDEX", a.keys.index)
    # The call that finds its index gone adopts the generation the meta names, and its
    # query (built for the old name) is sent to it: the call answers.
    assert len(await c.recall("memory number 1 about topic 7", k=5)) == 5
    assert c.index.name == f"{c.keys.index}:g1"
    assert a.keys.index not in await index_names(a)  # not re-created with the old schema


async def test_a_small_outdated_store_is_migrated_at_first_use(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = await old_store(make_store, client)
    await fill(store, 3)
    again = make_store()  # auto_migrate on (the default): 3 documents are few
    assert len(await again.recall("memory number 2 about topic 14", k=3)) == 3
    assert again.index.outdated == () and again.index.name == again.keys.index
    info = await again.index_info()
    assert info is not None and set(info.fields) >= _NEW


async def test_an_index_the_reference_library_made_is_never_rebuilt_unasked(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    probe = make_store()
    probe.index.capabilities = await probe.backend.probe()
    # betterdb-agent-memory's schema: the old fields, TAGs without CASESENSITIVE.
    await ft(probe, *[a for a in old_create_args(probe) if a != "CASESENSITIVE"])
    store = make_store()  # auto_migrate on, and only a few documents
    await store.remember("a memory", thread_id="t")
    assert store.index.name == store.keys.index and set(store.index.outdated) >= _NEW
    assert not store.layout.case_sensitive
    report = await store.migrate_index(keep_reference=True)  # asked: it switches
    assert report.switched and store.index.outdated == ()


async def test_declared_fields_are_backfilled_from_metadata_before_the_switch(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = await old_store(make_store, client)
    await fill(store, 12)
    await client.hset(f"{store.keys.doc_prefix}stale", mapping={"x": "1"})  # not a memory: no created_at
    declared = MetadataFields.of({"priority": "numeric"})
    manager = IndexManager(
        store.backend, store.keys, HashingEmbedder(), metadata_fields=declared, auto_migrate=False
    )
    manager.settle_seconds = 0.0
    await manager.ensure_ready()
    assert {"meta_priority", "present"} <= set(manager.outdated)
    report = await manager.migrate()
    assert report.switched and report.backfilled == 12
    reply = await ft(
        store,
        "FT.SEARCH",
        manager.name,
        "@meta_priority:[3 3]",
        "NOCONTENT",
        "LIMIT",
        "0",
        "100",
        "DIALECT",
        "2",
    )
    assert reply[0] == 2  # priorities 0..4 over 12 memories: i = 3 and 8
    doc: dict[Any, Any] = await client.hgetall(reply[1])
    assert as_text(doc[b"present"]) == "priority"
    assert json.loads(as_text(doc[b"metadata"]) or "{}")["priority"] == 3
    assert manager.generation.gen == 2 and manager.name == store.keys.index


async def test_after_keep_reference_a_later_migration_moves_back_to_the_reference_name(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = await old_store(make_store, client)
    await fill(store, 6)
    first = await store.migrate_index(keep_reference=True)
    assert first.switched and store.index.name == f"{store.keys.index}:g1"
    again = await store.migrate_index()  # current, but on a generation: the reference is rebuilt
    assert again.switched and store.index.name == store.keys.index and store.index.generation.gen == 2
    names = await index_names(store)
    assert f"{store.keys.index}:g1" not in names
    info = await store.index_info()
    assert info is not None and set(info.fields) >= _NEW and info.num_docs == 6
    assert len(await store.recall("memory number 3 about topic 21", k=6)) == 6


async def test_a_store_declaring_fields_on_an_old_index_filters_on_them_after_the_switch(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = await old_store(make_store, client)
    await fill(store, 15)  # priorities 0..4, written before the declaration
    declared = make_store(metadata_fields={"priority": "numeric"})
    declared.index.auto_migrate = False
    declared.index.settle_seconds = 0.0
    with pytest.raises(ValidationError) as err:  # never answered from an index without the field
        await declared.count(where={"priority": 3})
    assert err.value.details["reason"] == "indexing"
    report = await declared.migrate_index()
    assert report.switched and report.backfilled == 15
    assert await declared.count(where={"priority": 3}) == 3
    assert await declared.count(where={"priority": {"$gte": 3}}) == 6
    meta = {as_text(k): as_text(v) for k, v in (await client.hgetall(store.keys.meta)).items()}
    assert json.loads(meta["metadata_fields"] or "{}") == {"priority": "numeric"}
