"""backend.index_switch against a RecordingBackend: the order of the build and the compare-and-set."""

from __future__ import annotations

import pytest

from betterdb_memory.backend import scripts
from betterdb_memory.backend.index import IndexManager
from betterdb_memory.backend.index_switch import IndexSwitch
from betterdb_memory.core.keys import KeySpace
from betterdb_memory.embedders import HashingEmbedder
from betterdb_memory.testing import RecordingBackend

pytestmark = pytest.mark.asyncio

READY = ["index_name", "x", "indexing", 0, "percent_indexed", "1", "num_docs", 0]


def manager(backend: RecordingBackend) -> IndexManager:
    m = IndexManager(backend, KeySpace("s"), HashingEmbedder(8), auto_migrate=False)
    m.capabilities = backend.capabilities
    m.ready = True
    m.outdated = ("valid_from",)

    async def relocate() -> None:  # the real one re-reads meta + FT.INFO (integration tests)
        return None

    m.relocate = relocate  # type: ignore[method-assign]
    return m


async def test_the_new_generation_is_built_ready_then_switched_by_compare_and_set() -> None:
    backend = RecordingBackend()
    backend.reply(None)  # FT.INFO s:mem:idx:g1: absent
    backend.reply("OK")  # FT.CREATE
    backend.reply(READY)  # FT.INFO: ready
    backend.reply(1)  # INDEX_SWITCH
    backend.reply(1)  # DEL of the switch state
    m = manager(backend)
    switch = IndexSwitch(m)
    lock = backend.lock(switch.lock_key, ttl=30, wait=0, heartbeat=False)
    report = await switch._migrate(lock, keep_reference=True, settle=0.0)
    assert report.switched and report.missing == ("valid_from",)
    names = [c[:2] for c in backend.commands]
    assert names[0] == ("FT.INFO", "s:mem:idx:g1")
    assert names[1] == ("FT.CREATE", "s:mem:idx:g1")
    assert "valid_from" in backend.commands[1] and names[2] == ("FT.INFO", "s:mem:idx:g1")
    cas = backend.commands[3]
    assert cas[:2] == ("EVALSHA", scripts.INDEX_SWITCH.sha)
    assert cas[3:] == ("s:__mem_meta", "0", "s:mem:idx:g1", "1", report_digest(m))
    assert backend.commands[4] == ("DEL", "s:__mem_idxswitch")
    assert not any(c[0] == "FT.DROPINDEX" for c in backend.commands)  # keep_reference


async def test_a_migrator_that_loses_the_compare_and_set_drops_what_it_built() -> None:
    backend = RecordingBackend()
    backend.reply(None)
    backend.reply("OK")
    backend.reply(READY)
    backend.reply(0)  # INDEX_SWITCH: the generation moved on
    backend.reply(b"s:mem:idx:g7")  # HGET meta index: another name
    backend.reply("OK")  # FT.DROPINDEX of ours
    m = manager(backend)
    switch = IndexSwitch(m)
    report = await switch._migrate(
        backend.lock(switch.lock_key, ttl=30, wait=0, heartbeat=False), keep_reference=False, settle=0.0
    )
    assert not report.switched
    assert backend.commands[-2] == ("HGET", "s:__mem_meta", "index")
    assert backend.commands[-1] == ("FT.DROPINDEX", "s:mem:idx:g1")  # no DD: documents stay


async def test_the_reference_name_is_rebuilt_and_switched_back_to() -> None:
    backend = RecordingBackend()
    for reply in (None, "OK", READY, 1):  # g1: info, create, ready, switch
        backend.reply(reply)
    for reply in ("OK", None, "OK", READY, 1, "OK", 1):  # drop ref, info, create, ready, switch, drop g1, DEL
        backend.reply(reply)
    m = manager(backend)
    switch = IndexSwitch(m)
    report = await switch._migrate(
        backend.lock(switch.lock_key, ttl=30, wait=0, heartbeat=False), keep_reference=False, settle=0.0
    )
    assert report.switched
    sent = [c[:2] for c in backend.commands]
    assert sent[4:8] == [
        ("FT.DROPINDEX", "s:mem:idx"),
        ("FT.INFO", "s:mem:idx"),
        ("FT.CREATE", "s:mem:idx"),
        ("FT.INFO", "s:mem:idx"),
    ]
    assert backend.commands[8][3:6] == ("s:__mem_meta", "1", "s:mem:idx")  # gen 1 -> 2, back to the reference
    assert sent[9] == ("FT.DROPINDEX", "s:mem:idx:g1")


def report_digest(m: IndexManager) -> str:
    from betterdb_memory.core.index_gen import schema_digest

    return schema_digest(m.wanted_fields())
