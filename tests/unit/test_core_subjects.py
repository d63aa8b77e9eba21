"""``core.subjects``: subject digests and what round trip 2 of a write with subjects does (pure)."""

from __future__ import annotations

from betterdb_memory.core.keys import Scope
from betterdb_memory.core.subjects import (
    ORPHAN_GRACE_MS,
    PutReply,
    Retire,
    SubjectPut,
    plan_settle,
    subject_key_of,
    subject_search_query,
)


def put(mid: str, vf: int, digest: str = "d") -> SubjectPut:
    return SubjectPut(mid, digest, vf, "city", "[null, null, null]", "memory")


def reply(decision: str, replaced: str, pointer: str, *versions: tuple[str, int]) -> PutReply:
    flat: list[object] = [x for mid, vf in versions for x in (mid.encode(), str(vf).encode())]
    return PutReply.parse([decision.encode(), replaced.encode(), pointer.encode(), flat])


def test_the_digest_keeps_scopes_and_kinds_apart() -> None:
    a, b = Scope(thread_id="a").tag, Scope(thread_id="b").tag
    keys = {
        subject_key_of(a, "memory", "city"),
        subject_key_of(b, "memory", "city"),
        subject_key_of(a, "fact", "city"),
    }
    assert len(keys) == 3 and all(len(k) == 20 for k in keys)
    assert subject_search_query("0f" * 10) == "@subject_key:{" + "0f" * 10 + "}"


def test_a_new_current_retires_the_version_it_replaced() -> None:
    rep = reply("current", "old", "new", ("old", 1), ("new", 5))
    retires, orphans = plan_settle([put("new", 5)], [rep], {"d": [("new", 5, 9), ("old", 1, 8)]}, now_ms=10)
    assert retires == [Retire("old", 5, "new")] and orphans == []


def test_a_past_write_retires_itself_and_shortens_the_version_before_it() -> None:
    rep = reply("past", "", "cur", ("p0", 1), ("mid", 3), ("cur", 5))
    retires, _ = plan_settle([put("mid", 3)], [rep], {"d": [("mid", 3, 9), ("cur", 5, 8)]}, now_ms=10)
    assert retires == [Retire("mid", 5, "cur"), Retire("p0", 3, "mid", trim=True)]


def test_a_leftover_is_retired_and_a_young_unknown_document_is_left_alone() -> None:
    """A superseded version still in the index goes; a document no list knows is a write in flight."""
    rep = reply("current", "v2", "v3", ("v1", 1), ("v2", 2), ("v3", 3))
    found = {"d": [("v1", 1, 0), ("v3", 3, 0), ("x", 2, 10 - ORPHAN_GRACE_MS + 1)]}
    retires, orphans = plan_settle([put("v3", 3)], [rep], found, now_ms=10)
    assert retires == [Retire("v2", 3, "v3"), Retire("v1", 2, "v2")] and orphans == []
    old = {"d": [("x", 2, 10 - ORPHAN_GRACE_MS)]}
    assert plan_settle([put("v3", 3)], [rep], old, now_ms=10)[1] == [("d", "x", 2)]


def test_replays_and_equal_instants() -> None:
    """A replayed put of the current replaces nothing; of two versions at one instant the later write wins."""
    assert plan_settle([put("a", 5)], [reply("current", "", "a", ("a", 5))], {}, now_ms=0) == ([], [])
    rep = reply("current", "a", "b", ("a", 5), ("b", 5))
    assert plan_settle([put("b", 5)], [rep], {}, now_ms=0)[0] == [Retire("a", 5, "b")]
    assert rep.after("a", 5) == (5, "b")


def test_a_correction_is_current_and_ends_every_version_it_overlaps() -> None:
    """A correction at 3 (consolidation's statement after a retraction): the version it
    replaced (begun at 7) and a past one begun at 5 end where they began (valid at no
    instant); the one begun before it (1) ends at 3; the oldest already ends at 1."""
    fix = SubjectPut("new", "d", 3, "city", "[null, null, null]", "fact", correction=True)
    assert fix.args()[-1] == "1" and put("x", 1).args()[-1] == "memory"
    rep = reply("current", "cur", "new", ("p0", 0), ("p1", 1), ("new", 3), ("p5", 5), ("cur", 7))
    retires, _ = plan_settle([fix], [rep], {}, now_ms=10)
    assert retires == [
        Retire("cur", 7, "new"),
        Retire("p5", 5, "new", trim=True),
        Retire("p1", 3, "new", trim=True),
    ]
    # with nothing current (the plan's tombstone took it off), a later version is void too
    rep = reply("current", "", "new", ("p1", 1), ("new", 3), ("paris", 7))
    assert plan_settle([fix], [rep], {}, now_ms=10)[0] == [
        Retire("paris", 7, "new", trim=True),
        Retire("p1", 3, "new", trim=True),
    ]
