"""``tiers.subject_repair``: when a read looks at the journal, and what it sends (recording backend)."""

from __future__ import annotations

from typing import Any

from betterdb_memory.backend import scripts
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.subjects import SubjectPut, subject_key_of
from tests.unit.parts import build, search_reply

PUT = SubjectPut("m", "d1", 5, "city", '[null, null, "t"]', "memory")


async def test_a_read_looks_at_the_journal_once_per_interval_and_not_in_between() -> None:
    p = build()
    p.long_term.subjects.repair._next_probe = 0.0  # a store's first read
    p.backend.reply([])  # the journal: nothing due
    p.backend.reply([None], None)
    assert await p.docs.get_many(["x"]) == [None]
    probe = p.backend.sent[0]
    assert probe.operation == "get"
    assert probe.commands[0][:5] == (
        "ZRANGE",
        p.rt.keys.subject_pending,
        "-inf",
        probe.commands[0][3],
        "BYSCORE",
    )
    p.backend.reply([None], None)
    await p.docs.get_many(["x"])
    assert len(p.backend.sent) == 3  # no second look within the interval


async def test_settled_writes_leave_the_journal_with_the_next_look_not_a_round_trip_of_their_own() -> None:
    p = build()
    repair = p.long_term.subjects.repair
    repair.settled([PUT])
    assert p.backend.sent == []
    repair._next_probe = 0.0
    p.backend.reply(1, [])
    await repair.before("list")
    (trip,) = p.backend.sent
    assert trip.commands[0] == ("ZREM", p.rt.keys.subject_pending, "d1:m")
    assert trip.commands[1][0] == "ZRANGE"


async def test_a_failed_settle_is_repaired_before_this_stores_next_read_without_a_look() -> None:
    """Round trip 2 failed here: the next read repairs the subject first (pointer, versions, search)."""
    p = build()
    keys = p.rt.keys
    repair = p.long_term.subjects.repair
    repair.failed([PUT])
    # the subject: current m, the old version "o" still under the main prefix (a leftover)
    p.backend.reply(
        {b"current": b"m", b"subject": b"city"},
        [[b"o", 1.0], [b"m", 5.0]],
        [b"5", b"7", b"city", None, None, b"t", b"memory", None],
        [None, None],  # no history document
        search_reply(
            2, (keys.doc("o"), {"valid_from": 1, "created_at": 1}), (keys.doc("m"), {"valid_from": 5})
        ),
    )
    p.backend.reply(1, 1, 1)  # history mark, RETIRE o, SUBJECT_TRIM o
    p.backend.reply(1)  # the journal entry off
    p.backend.reply([None], None)  # the read itself
    await p.docs.get_many(["x"])
    reads, retire, done, _ = p.backend.sent
    assert reads.commands[:2] == (
        ("HGETALL", keys.subject("d1")),
        ("ZRANGE", keys.subject_versions("d1"), 0, -1, "WITHSCORES"),
    )
    assert reads.searches[0][2] == "@subject_key:{d1}"
    moved = retire.commands[1]
    assert (
        moved[:2] == ("EVALSHA", scripts.RETIRE.sha)
        and moved[3] == keys.doc("o")
        and moved[6:8] == ("5", "m")
    )
    assert retire.commands[2][:2] == ("EVALSHA", scripts.SUBJECT_TRIM.sha)
    assert done.commands == (("ZREM", keys.subject_pending, "d1:m"),)
    assert repair._local == {}
    p.backend.reply([None], None)
    await p.docs.get_many(["x"])
    assert len(p.backend.sent) == 5  # repaired once: nothing more before the next read


async def test_the_look_goes_beside_the_read_and_a_look_that_finds_nothing_sends_nothing_more() -> None:
    """Both round trips are in flight together (the read does not wait for the look to return)."""
    p = build()
    p.long_term.subjects.repair._next_probe = 0.0
    in_flight: list[int] = []  # at each round trip's start: how many others were out, unanswered
    out = 0
    real = p.backend._send

    async def send(trip: Any) -> list[Any]:
        nonlocal out
        in_flight.append(out)
        out += 1
        try:
            return await real(trip)
        finally:
            out -= 1

    p.backend._send = send  # type: ignore[method-assign]
    p.backend.reply([])  # the journal: nothing due
    p.backend.reply([None], None)
    assert await p.docs.get_many(["x"]) == [None]
    look, read = p.backend.sent
    assert look.commands[0][0] == "ZRANGE" and read.commands[0][0] != "ZRANGE"
    assert in_flight == [0, 1]  # the read left while the look was still out


async def test_a_read_that_decides_writes_of_its_own_looks_first() -> None:
    """``fact_history`` (``beside=False``): the look returns before its first round trip leaves."""
    p = build()
    p.long_term.subjects.repair._next_probe = 0.0
    p.backend.reply([])  # the journal: nothing due
    p.backend.reply(None, [])  # its pointer and versions: none
    assert await p.ledger.fact_history("city", thread_id="t", kind="memory") == []
    assert p.backend.sent[0].commands[0][0] == "ZRANGE"
    assert p.backend.sent[1].operation == "fact_history"


async def test_a_read_while_the_store_closes_looks_first_instead_of_starting_background_work() -> None:
    """Work still draining in ``close`` may read: its look runs inline (the supervisor refuses new tasks)."""
    p = build()
    p.long_term.subjects.repair._next_probe = 0.0
    p.rt.supervisor.closed = True
    p.backend.reply([])  # the journal: nothing due
    p.backend.reply([None], None)
    assert await p.docs.get_many(["x"]) == [None]
    look, read = p.backend.sent
    assert look.commands[0][0] == "ZRANGE" and read.operation == "get"


def _tracking(p: Any) -> list[int]:
    """At each round trip's start: how many others were out, unanswered."""
    in_flight: list[int] = []
    out = 0
    real = p.backend._send

    async def send(trip: Any) -> list[Any]:
        nonlocal out
        in_flight.append(out)
        out += 1
        try:
            return await real(trip)
        finally:
            out -= 1

    p.backend._send = send
    return in_flight


def _rt1_replies(p: Any) -> None:
    """A subject write's first round trip: HSET, SUBJECT_PUT (replaced "old"), registry x2, ZADD, its search."""
    put = [b"current", b"old", b"new", [b"old", b"1", b"new", b"2"]]
    p.backend.reply(1, put, 1, 1, 1, search_reply(1, (p.rt.keys.doc("old"), {})))


async def test_a_subject_writes_first_round_trip_goes_beside_the_look_and_it_settles_after(
    monkeypatch: Any,
) -> None:
    p = build()
    monkeypatch.setattr(p.rt.keys, "new_memory_id", lambda: "new")
    p.long_term.subjects.repair._next_probe = 0.0
    in_flight = _tracking(p)
    p.backend.reply([])  # the journal: nothing due
    _rt1_replies(p)
    p.backend.reply(1, 1)  # round trip 2: history mark, RETIRE old
    await p.long_term.remember("Berlin", thread_id="t", subject="city", valid_from=2)
    look, first, second = p.backend.sent
    assert look.commands[-1][0] == "ZRANGE" and first.commands[-1][:2] == ("ZADD", p.rt.keys.subject_pending)
    assert second.commands[1][:2] == ("EVALSHA", scripts.RETIRE.sha)
    assert in_flight == [0, 1, 0]  # round trip 1 left while the look was out; round trip 2 after both


async def test_a_subject_write_beside_a_repair_is_sent_once_and_returns_after_the_repair(
    monkeypatch: Any,
) -> None:
    """The look finds another subject's crash: its repair runs on, and the write settles and returns after it."""
    p = build()
    monkeypatch.setattr(p.rt.keys, "new_memory_id", lambda: "new")
    keys = p.rt.keys
    p.long_term.subjects.repair._next_probe = 0.0
    p.backend.reply([b"d1:m"])  # the journal: one entry past its grace
    _rt1_replies(p)
    p.backend.reply(  # the repair's read of d1: current m, "o" still under the main prefix
        {b"current": b"m", b"subject": b"city"},
        [[b"o", 1.0], [b"m", 5.0]],
        [b"5", b"7", b"city", None, None, b"t", b"memory", None],
        [None, None],
        search_reply(
            2, (keys.doc("o"), {"valid_from": 1, "created_at": 1}), (keys.doc("m"), {"valid_from": 5})
        ),
    )
    p.backend.reply(1, 1, 1)  # history mark, RETIRE o, SUBJECT_TRIM o
    p.backend.reply(1)  # the journal entry off
    p.backend.reply(1, 1)  # the write's round trip 2
    await p.long_term.remember("Berlin", thread_id="t", subject="city", valid_from=2)
    trips = [t.commands for t in p.backend.sent]
    assert [c[0][0] for c in trips] == ["ZRANGE", "HSET", "HGETALL", "EVALSHA", "ZREM", "EVALSHA"]
    assert (
        trips[3][0][:2] == trips[5][0][:2] == ("EVALSHA", scripts.HISTORY_MARK.sha)
    )  # marks before the moves
    assert trips[4] == (("ZREM", keys.subject_pending, "d1:m"),)  # the repair finished ...
    assert trips[5][1][:2] == ("EVALSHA", scripts.RETIRE.sha) and trips[5][1][3] == keys.doc("old")
    sent_once = [c for t in trips for c in t if c[:2] == ("ZADD", keys.subject_pending)]
    assert len(sent_once) == 1  # ... before the write settled; the write itself was sent once


async def test_a_look_leaves_this_stores_own_write_in_flight_alone_whatever_its_age(
    monkeypatch: Any,
) -> None:
    """The look beside a write may meet that write's own entry (past the grace: a slow round trip)."""
    p = build()
    monkeypatch.setattr(p.rt.keys, "new_memory_id", lambda: "new")
    d = subject_key_of(Scope(thread_id="t").tag, "memory", "city")
    p.long_term.subjects.repair._next_probe = 0.0
    p.backend.reply([f"{d}:new".encode()])  # the journal: the write's own entry
    _rt1_replies(p)
    p.backend.reply(1, 1)
    await p.long_term.remember("Berlin", thread_id="t", subject="city", valid_from=2)
    assert [t.commands[0][0] for t in p.backend.sent] == ["ZRANGE", "HSET", "EVALSHA"]  # no repair, no ZREM
    assert p.long_term.subjects.repair._writing == set()  # settled: off the journal with the next command
