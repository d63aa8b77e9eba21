"""``tiers.capacity``: the commands a capped write's eviction sends (over a recording backend).

Which memories go and why is tested against the real engine in
tests/integration/test_capacity.py; here, the exact round trips: the deletes, the
eviction counter and the lock's release ride in one round trip on a single server,
and the release follows the deletes on a cluster.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from betterdb_memory.backend import scripts
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.tunables import ConfigSnapshot
from betterdb_memory.tiers import victims as victims_module
from tests.unit.parts import Parts, build, search_reply

FLT = MemoryFilter(scope=Scope(thread_id="t"))


@pytest.fixture(autouse=True)
def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cap reads leave out memories expired *now* (``victims.live``): one instant for the
    reads a test builds and the ones it compares them with."""
    monkeypatch.setattr(victims_module, "time", SimpleNamespace(time=lambda: 1_700_000_000.0))


def _full_scope(p: Parts) -> None:
    """The scope was counted full before: the next write's round trip takes its lock."""
    p.capacity._note_count(FLT, 3, 3)


def _lowest(p: Parts) -> list[object]:
    """The sorted read of the scope's lowest keep-scores: the write's own memory and three older."""
    return search_reply(
        5,
        *(
            (p.rt.keys.doc(mid), {"keep": keep})
            for mid, keep in (("new", 0.5), ("a", 1.0), ("b", 2.0), ("c", 3.0))
        ),
    )


async def test_a_full_scope_evicts_with_one_round_trip_of_deletes_counter_and_unlock() -> None:
    p = build()
    _full_scope(p)
    plan = p.capacity.plan(FLT, 1)
    assert plan.lock is not None and plan.bound is None
    p.backend.reply(_lowest(p))  # under the lock: the lowest keep-scores
    p.backend.reply(2, 0, 2, 1)  # two memories deleted (one DEL), their side keys, the counter, the unlock
    evicted = await p.capacity.hold_caps([plan], [1, [5]], 3, protect={"new"}, now=0.0)
    assert evicted == 2
    search, deletes = p.backend.sent
    assert search.operation == "capacity" and search.commands == () and search.names == ["FT.SEARCH"]
    keys = p.rt.keys
    assert deletes.operation == "capacity"
    assert deletes.commands == (
        ("DEL", keys.doc("a"), keys.doc("b")),
        ("DEL", keys.access("a"), keys.updates("a"), keys.access("b"), keys.updates("b")),
        ("HINCRBY", keys.stats, "evictions", 2),
        ("EVALSHA", scripts.UNLOCK.sha, 1, plan.lock.key, plan.lock.token),
    )


async def test_on_a_cluster_the_unlock_follows_the_deletes() -> None:
    """Commands of one pipeline run per node in no set order there: the unlock waits for the deletes."""
    p = build(cluster=True)
    _full_scope(p)
    plan = p.capacity.plan(FLT, 1)
    assert plan.lock is not None
    p.backend.reply(_lowest(p))
    p.backend.reply(1, 1, 1, 1, 2)
    p.backend.reply(1)
    assert await p.capacity.hold_caps([plan], [1, [5]], 3, protect={"new"}, now=0.0) == 2
    _, deletes, unlock = p.backend.sent
    assert deletes.names == ["DEL", "DEL", "DEL", "DEL", "HINCRBY"]
    assert (unlock.operation, unlock.commands) == (
        "unlock",
        (("EVALSHA", scripts.UNLOCK.sha, 1, plan.lock.key, plan.lock.token),),
    )


async def test_a_scope_under_its_cap_is_released_at_once_and_nothing_is_deleted() -> None:
    p = build()
    _full_scope(p)
    plan = p.capacity.plan(FLT, 1)
    assert plan.lock is not None
    p.backend.reply(1)
    assert await p.capacity.hold_caps([plan], [1, [3]], 3, protect={"new"}, now=0.0) == 0
    [unlock] = p.backend.sent
    assert unlock.commands == (("EVALSHA", scripts.UNLOCK.sha, 1, plan.lock.key, plan.lock.token),)


async def test_a_capped_write_sends_its_lock_attempt_after_the_writes_and_before_the_count() -> None:
    p = build(config=ConfigSnapshot(max_items_per_scope=3))
    _full_scope(p)
    p.backend.reply(1, 1, [2])  # HSET, lock taken, the scope's count: under the cap
    p.backend.reply(1)  # the unlock
    await p.long_term.remember_many([{"content": "x", "thread_id": "t"}])
    write, unlock = p.backend.sent
    assert write.operation == "remember"
    assert write.names == ["HSET", "EVALSHA", "FT.SEARCH"]
    assert write.commands[1][:2] == ("EVALSHA", scripts.LOCK.sha)
    assert write.searches == (tuple(p.capacity.count_args(FLT)),)
    assert unlock.commands[0][:2] == ("EVALSHA", scripts.UNLOCK.sha)
