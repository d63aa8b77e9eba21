"""``tiers.subjects``: a write with a subject costs one more round trip, a write without none (recording backend)."""

from __future__ import annotations

import pytest

from betterdb_memory.backend import scripts
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.subjects import subject_key_of
from betterdb_memory.errors import ValidationError
from tests.unit.parts import build, search_reply


async def test_a_write_without_a_subject_is_one_round_trip() -> None:
    p = build()
    p.backend.reply(1)
    await p.long_term.remember("plain", thread_id="t")
    assert len(p.backend.sent) == 1 and p.backend.sent[0].commands[0][0] == "HSET"


async def test_a_write_with_a_subject_decides_in_its_round_trip_and_settles_in_one_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = build()
    monkeypatch.setattr(p.rt.keys, "new_memory_id", lambda: "new")
    keys = p.rt.keys
    d = subject_key_of(Scope(thread_id="t").tag, "memory", "home city")
    # HSET, SUBJECT_PUT (replaced "old"), registry HSET x2, the journal's ZADD, then the subject search
    p.backend.reply(
        1,
        [b"current", b"old", b"new", [b"old", b"1", b"new", b"2"]],
        1,
        1,
        1,
        search_reply(1, (keys.doc("old"), {})),
    )
    p.backend.reply(1, 1)  # the store's history mark, RETIRE old
    mid = await p.long_term.remember("Berlin", thread_id="t", subject="Home City", valid_from=2)
    first, second = p.backend.sent
    hset, put, scopes, scope, journal = first.commands
    assert journal[:2] == ("ZADD", keys.subject_pending) and journal[3] == f"{d}:{mid}"
    assert hset[0] == "HSET" and ("subject_key", d) == tuple(
        hset[hset.index("subject_key") : hset.index("subject_key") + 2]
    )
    assert put[:5] == ("EVALSHA", scripts.SUBJECT_PUT.sha, 2, keys.subject(d), keys.subject_versions(d))
    assert put[5:7] == (mid, "2")
    assert scopes[:2] == ("HSET", keys.subject_scopes) and scope[:2] == (
        "HSET",
        keys.subject_scope(Scope(thread_id="t").tag),
    )
    assert first.searches[0][:3] == ("FT.SEARCH", keys.index, "@subject_key:{" + d + "}")
    assert second.commands == (
        (
            "EVALSHA",
            scripts.HISTORY_MARK.sha,
            1,
            keys.meta,
            "2",
        ),  # before the move, its valid_until (core.history_mark)
        (
            "EVALSHA",
            scripts.RETIRE.sha,
            3,
            keys.doc("old"),
            keys.hist_doc("old"),
            keys.access("old"),
            "2",
            mid,
            "0",
        ),
    )


async def test_a_bad_subject_sends_nothing() -> None:
    p = build()
    with pytest.raises(ValidationError):
        await p.long_term.remember("x", subject=" \t ")
    assert p.backend.sent == []


async def test_a_vanished_current_version_is_dropped_and_the_write_put_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pointer names "gone" (evicted, expired): the search misses it, EXISTS confirms, the write is put again."""
    p = build()
    monkeypatch.setattr(p.rt.keys, "new_memory_id", lambda: "new")
    keys = p.rt.keys
    d = subject_key_of(Scope(thread_id="t").tag, "memory", "city")
    p.backend.reply(
        1,
        [b"past", b"", b"gone", [b"new", b"1", b"gone", b"5"]],
        1,
        1,
        1,
        search_reply(1, (keys.doc("new"), {})),
    )
    p.backend.reply(0)  # EXISTS gone
    p.backend.reply(1, [b"current", b"", b"new", [b"new", b"1"]])  # SUBJECT_DROP gone, SUBJECT_PUT new
    mid = await p.long_term.remember("Porto", thread_id="t", subject="city", valid_from=1)
    assert mid == "new"
    _, check, heal = p.backend.sent
    assert check.commands == (("EXISTS", keys.doc("gone"), keys.hist_doc("gone")),)
    drop, put = heal.commands
    assert drop == (
        "EVALSHA",
        scripts.SUBJECT_DROP.sha,
        2,
        keys.subject(d),
        keys.subject_versions(d),
        "gone",
        "0",
    )
    assert put[:2] == ("EVALSHA", scripts.SUBJECT_PUT.sha) and put[5] == "new"
