"""``tiers.victims``: the reads that find a full scope's lowest keep-scores (over a recording backend)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.tiers import victims as victims_module
from betterdb_memory.tiers.victims import LOOKAHEAD, Victims, _Ceiling
from tests.unit.parts import build, search_reply

FLT = MemoryFilter(scope=Scope(thread_id="t"))


@pytest.fixture(autouse=True)
def _frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cap reads leave out memories expired *now* (``victims.live``): one instant for the
    reads a test builds and the ones it compares them with."""
    monkeypatch.setattr(victims_module, "time", SimpleNamespace(time=lambda: 1_700_000_000.0))


async def test_without_a_ceiling_the_scope_is_read_sorted_by_keep() -> None:
    p = build()
    victims = Victims(p.rt, p.scopes)
    p.backend.reply(search_reply(3, (p.rt.keys.doc("a"), {"keep": 1.0}), (p.rt.keys.doc("b"), {"keep": 2.0})))
    assert await victims.choose(FLT, 2, protect=set(), now=0.0, expected=3) == ["a"]
    [trip] = p.backend.sent
    [args] = trip.searches
    assert trip.commands == () and args[:2] == ("FT.SEARCH", p.rt.keys.index)
    assert args[args.index("SORTBY") :][:3] == ("SORTBY", "keep", "ASC")
    assert args[args.index("LIMIT") :][:3] == ("LIMIT", "0", str(1 + LOOKAHEAD))


async def test_under_a_known_ceiling_the_count_and_the_range_read_share_one_round_trip() -> None:
    p = build()
    victims = Victims(p.rt, p.scopes)
    victims._ceilings[FLT] = _Ceiling(floor=1.0, span=0.5)
    assert victims.bound(FLT) == 1.5
    p.backend.reply(
        [3], search_reply(2, (p.rt.keys.doc("a"), {"keep": 1.1}), (p.rt.keys.doc("b"), {"keep": 1.2}))
    )
    assert await victims.choose(FLT, 2, protect=set(), now=0.0, expected=3) == ["a"]
    [trip] = p.backend.sent
    count, below = trip.searches
    assert trip.operation == "capacity" and trip.commands == ()
    assert count[count.index("LIMIT") :][:3] == ("LIMIT", "0", "0")
    assert below == tuple(victims.below_args(FLT, 1.5, 1 + LOOKAHEAD))
    assert victims.bound(FLT) == 1.1 + 2 * (1.2 - 1.1)  # learnt: above the evicted, twice the gap to the next


def test_every_victim_read_leaves_out_expired_memories() -> None:
    """An expired memory whose key the server has not removed yet neither counts nor is chosen."""
    p = build()
    victims = Victims(p.rt, p.scopes)
    below = victims.below_args(FLT, 1.5, 3)
    assert any("-@expires_at:[-inf " in str(a) for a in below)
    assert "-@expires_at:[-inf " in str(p.capacity.count_args(FLT))


async def test_without_the_keep_field_a_subject_version_ranks_from_its_write() -> None:
    """An index without ``keep`` (another library's): the scope is ranked in the client by the
    same rule as the stored keep-score: an event from its ``valid_from``, a subject's version
    (it names a subject) never before its write."""
    p = build()
    p.rt.index.layout = dataclasses.replace(p.rt.index.layout, keep=False)
    victims = Victims(p.rt, p.scopes)
    now_ms, dated = 1_700_000_000_000, 1_546_300_800_000
    old = {"importance": 0.8, "created_at": now_ms, "last_accessed_at": now_ms, "valid_from": dated}
    p.backend.reply(
        search_reply(
            3,
            (p.rt.keys.doc("event"), old),
            (p.rt.keys.doc("state"), {**old, "subject": "home"}),
            (p.rt.keys.doc("note"), {"importance": 0.3, "created_at": now_ms, "last_accessed_at": now_ms}),
        )
    )
    assert await victims.choose(FLT, 1, protect=set(), now=now_ms / 1000, expected=3) == ["event", "note"]
    [trip] = p.backend.sent
    [args] = trip.searches
    assert "subject" in args and "-@expires_at:[-inf " in str(args)
