"""``tiers.reinforce``: what a recall's access and a flush send (recording backend).

The scripts' behaviour on a server (exact counts, the snapshot after the lag, close,
a crashed store's entries) is tested in tests/integration/test_reinforce_lag.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from betterdb_memory.backend.scripts_reinforce import ACCESS, FLUSH, PEND, SETTLE
from betterdb_memory.tiers.reinforce import Reinforcement
from tests.unit.parts import build, runtime


def test_the_lag_is_the_write_interval_else_a_two_hundredth_of_the_half_life() -> None:
    r = Reinforcement(runtime())
    assert r.interval(7 * 86400) == 60.0  # the default half-life: one minute
    assert r.interval(3600) == 18.0
    assert r.interval(10) == 1.0
    assert Reinforcement(runtime(reinforce_write_interval=0.0)).interval(3600) == 0.0
    assert Reinforcement(runtime(reinforce_write_interval=5.0)).interval(3600) == 5.0


async def test_one_server_reads_and_counts_in_one_script_with_the_pending_hash() -> None:
    p = build()
    keys = p.rt.keys
    p.backend.reply([[b"x", 3, 1700]])
    rows = await p.docs._fetch_rows(
        ["m1"], p.docs.reinforcement.flags(1.0, 3600.0), idempotent=False, fields=("f",)
    )
    assert rows == [[b"x", 3, 1700]]
    (trip,) = p.backend.sent
    assert trip.commands == (
        ("EVALSHA", ACCESS.sha, 3, keys.doc("m1"), keys.access("m1"), keys.access_pending, "1", "1000", "3600.0",
         "18000", "f"),
    )  # fmt: skip
    assert not trip.idempotent  # a replay would count twice
    await p.rt.supervisor.close(grace=0)  # the flush loop the access started


async def test_a_cluster_reads_the_pending_hash_beside_one_script_per_memory() -> None:
    p = build(cluster=True)
    keys = p.rt.keys
    # PEND (answers the pending times as they were, and raises them), then one ACCESS per memory.
    p.backend.reply([b"2000", None], [[b"x", 3, 1700]], [None])
    rows = await p.docs._fetch_rows(
        ["m1", "m2"], p.docs.reinforcement.flags(1.0, 3600.0), idempotent=False, fields=("f",)
    )
    assert rows == [[b"x", 3, 2000.0], None]  # the later of the document's time and the pending one
    sent = p.backend.sent[0].commands
    assert [c[0] for c in sent] == ["EVALSHA", "EVALSHA", "EVALSHA"]
    assert sent[0][1:4] == (PEND.sha, 1, keys.access_pending) and sent[0][5:] == (
        keys.doc("m1"),
        keys.doc("m2"),
    )
    assert {c[1] for c in sent[1:]} == {ACCESS.sha}
    await p.rt.supervisor.close(grace=0)


async def test_a_cluster_read_without_reinforcing_reads_the_pending_hash() -> None:
    p = build(cluster=True)
    p.backend.reply([None], [[b"x", 3, 1700]])
    rows = await p.docs._fetch_rows(["m1"], ("0", "1000", "3600.0", "0"), idempotent=True, fields=("f",))
    assert rows == [[b"x", 3, 1700]]
    assert p.backend.sent[0].commands[0] == ("HMGET", p.rt.keys.access_pending, p.rt.keys.doc("m1"))


async def test_write_through_marks_nothing_pending_and_starts_no_flush() -> None:
    p = build(cluster=True, reinforce_write_interval=0.0)
    p.backend.reply([None], [[b"x", 0, 0]])
    await p.docs._fetch_rows(["m1"], p.docs.reinforcement.flags(1.0, 3600.0), idempotent=False, fields=("f",))
    assert [c[1] for c in p.backend.sent[0].commands][1:] == [ACCESS.sha]
    assert len(p.rt.supervisor) == 0 and p.docs.reinforcement._loop is None


async def test_a_read_counts_nothing() -> None:
    p = build()
    p.backend.reply([None], None)  # the document, then its history document
    assert await p.docs.get_many(["m1"]) == [None]
    assert p.backend.sent[0].commands[0][5:7] == (p.rt.keys.access_pending, "0")
    assert p.docs.reinforcement._loop is None


@pytest.mark.parametrize("cluster", [False, True])
async def test_a_flush_writes_each_pending_document_and_settles_only_ripe_entries(cluster: bool) -> None:
    p = build(cluster=cluster)
    keys = p.rt.keys
    old = str(int(time.time() * 1000) - 60_000)
    fresh = str(int(time.time() * 1000))
    a, b, c = keys.doc("a"), keys.doc("b"), keys.doc("c")
    p.backend.reply([0, {a.encode(): old.encode(), b.encode(): fresh.encode(), c.encode(): fresh.encode()}])
    # a written, b current, c gone
    p.backend.reply(*([[1], [0], [-1]] if cluster else [[1, 0, -1]]))
    p.backend.reply(2)
    assert await p.docs.reinforcement.flush() == 1
    scan, flush, settle = p.backend.sent
    assert scan.commands == (("HSCAN", keys.access_pending, 0, "COUNT", 256),)
    assert {cmd[1] for cmd in flush.commands} == {FLUSH.sha}
    if not cluster:
        assert flush.commands[0][2:9] == (6, a, keys.access("a"), b, keys.access("b"), c, keys.access("c"))
        assert flush.commands[0][9:] == (repr(p.rt.config().half_life_seconds), old, fresh, fresh)
    # b was written from a time too recent to settle (an access in flight may hold it): kept.
    assert settle.commands == (("EVALSHA", SETTLE.sha, 1, keys.access_pending, a, old, c, fresh),)


@pytest.mark.parametrize("cluster", [False, True])
async def test_a_pass_sends_a_few_documents_per_round_trip(cluster: bool) -> None:
    """The engine runs a pipeline back to back: a page's 256 documents in one pipeline held every
    other client for the page (~0.7 s at 250k memories on RediSearch). At most 8 a round trip."""
    p = build(cluster=cluster)
    keys = p.rt.keys
    at = str(int(time.time() * 1000) - 60_000)
    docs = [keys.doc(f"m{i}") for i in range(20)]
    p.backend.reply([0, {d.encode(): at.encode() for d in docs}])
    for n in (8, 8, 4):  # one round trip each: one script per document on a cluster, one per chunk else
        p.backend.reply(*([[1]] * n)) if cluster else p.backend.reply([1] * n)
    p.backend.reply(20)
    assert await p.docs.reinforcement.flush() == 20
    _scan, *trips, settle = p.backend.sent
    assert [len(t.commands) for t in trips] == ([8, 8, 4] if cluster else [1, 1, 1])
    written = [k for t in trips for cmd in t.commands for k in cmd[3 : 3 + int(cmd[2])]]
    assert written[::2] == docs and all(cmd[1] == FLUSH.sha for t in trips for cmd in t.commands)
    assert settle.commands[0][:2] == ("EVALSHA", SETTLE.sha)


async def test_close_flushes_only_a_store_that_reinforced() -> None:
    p = build()
    await p.docs.reinforcement.close()
    assert p.backend.sent == []
    p.backend.reply([[b"x", 0, 0]])
    await p.docs._fetch_rows(["m1"], p.docs.reinforcement.flags(1.0, 3600.0), idempotent=False, fields=("f",))
    await p.rt.supervisor.close(grace=0)
    p.backend.reply([0, {}])
    await p.docs.reinforcement.close()
    assert p.backend.sent[-1].commands[0][0] == "HSCAN"


async def test_a_periodic_pass_runs_only_when_it_claims_the_interval() -> None:
    """Stores over one name share one claim per interval: a store whose claim fails (another
    ran this interval's pass) does not flush, so a document is rewritten once per interval."""
    p = build(reinforce_write_interval=0.05)
    p.backend.reply([[b"x", 0, 0]])
    await p.docs._fetch_rows(["m1"], p.docs.reinforcement.flags(1.0, 3600.0), idempotent=False, fields=("f",))
    p.backend.reply(None)  # the first tick's claim: taken by another store
    p.backend.reply(b"OK")  # the second's: this store's
    p.backend.reply([0, {}])
    for _ in range(400):
        if len(p.backend.sent) >= 4:
            break
        await asyncio.sleep(0.01)
    await p.rt.supervisor.close(grace=0)
    assert [t.commands[0][0] for t in p.backend.sent[:4]] == ["EVALSHA", "SET", "SET", "HSCAN"]
    claim = p.backend.sent[1].commands[0]
    assert claim[1] == p.rt.keys.access_pending + ":flush" and claim[3:] == ("NX", "PX", 50)
