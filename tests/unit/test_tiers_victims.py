"""``tiers.victims``: the reads that find a full scope's lowest keep-scores (over a recording backend)."""

from __future__ import annotations

from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.tiers.victims import LOOKAHEAD, Victims, _Ceiling
from tests.unit.parts import build, search_reply

FLT = MemoryFilter(scope=Scope(thread_id="t"))


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
