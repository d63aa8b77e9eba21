"""``core.subject_repair``: what a repairer decides from a subject's state alone (no server)."""

from __future__ import annotations

from betterdb_memory.core.subject_repair import (
    Pointer,
    end_of,
    history_state,
    journal_member,
    parse_member,
    plan_repair,
)
from betterdb_memory.core.subjects import ORPHAN_GRACE_MS, Retire

NOW = 10**13


def test_journal_members_round_trip_and_anything_else_is_ignored() -> None:
    assert parse_member(journal_member("ab12", "m-1")) == ("ab12", "m-1")
    assert parse_member(b"ab12:m-1") == ("ab12", "m-1")
    assert parse_member("nocolon") is None and parse_member(":x") is None and parse_member("x:") is None


def test_the_pointer_reads_its_current_voids_and_put_fields_under_resp2_and_resp3() -> None:
    flat = [
        b"current",
        b"b",
        b"void:a",
        b"b",
        b"void:c",
        b"1",
        b"subject",
        b"city",
        b"scope",
        b"[]",
        b"kind",
        b"memory",
    ]
    for raw in (flat, dict(zip(flat[0::2], flat[1::2], strict=True))):
        p = Pointer.parse(raw)
        assert (p.current, dict(p.voids), p.subject, p.scope_json, p.kind) == (
            "b",
            {"a": "b", "c": ""},
            "city",
            "[]",
            "memory",
        )
    assert Pointer.parse(None) == Pointer(None) and Pointer.parse({}).current is None


def test_a_version_ends_where_the_next_valid_one_begins_and_a_void_one_where_it_began() -> None:
    versions = [("a", 1), ("b", 3), ("v", 5), ("c", 7)]
    p = Pointer("c", {"v": "c"})
    assert end_of(versions, p, "a") == (3, "b")
    assert end_of(versions, p, "b") == (7, "c")  # the void version in between does not count
    assert end_of(versions, p, "v") == (5, "c")
    assert end_of(versions, Pointer(None), "c") is None  # nothing later: keeps its end


def test_a_leftover_moves_and_every_past_version_gets_its_end() -> None:
    """Round trip 2 lost after a past-dated write (p) between a and c: p moves, a ends at p."""
    versions = [("a", 1), ("p", 2), ("c", 3)]
    plan = plan_repair(Pointer("c"), versions, [("p", 2, 5), ("c", 3, 6)], {"p": "main"}, now_ms=NOW)
    assert not plan.rewrites_pointer
    assert plan.retires == (
        Retire("p", 3, "c"),
        Retire("a", 2, "p", trim=True),
        Retire("p", 3, "c", trim=True),
    )


def test_a_tie_and_a_correction_end_the_versions_they_voided_where_they_began() -> None:
    versions = [("old", 1), ("paris", 5), ("berlin", 3)]
    pointer = Pointer("berlin", {"paris": "berlin"})
    plan = plan_repair(
        pointer, versions, [("paris", 5, 9), ("berlin", 3, 10)], {"berlin": "main"}, now_ms=NOW
    )
    assert Retire("paris", 5, "berlin") in plan.retires
    assert Retire("old", 3, "berlin", trim=True) in plan.retires


def test_a_document_the_journal_names_but_no_list_knows_is_put_again() -> None:
    plan = plan_repair(Pointer("a"), [("a", 1)], [("a", 1, 1), ("n", 4, NOW)], {"n": "main"}, now_ms=NOW)
    assert plan.puts == (("n", 4),) and plan.retires == ()
    # not in the journal and younger than the grace: a concurrent write in flight
    young = plan_repair(Pointer("a"), [("a", 1)], [("a", 1, 1), ("n", 4, NOW)], {}, now_ms=NOW)
    assert young.puts == ()
    old = plan_repair(Pointer("a"), [("a", 1)], [("n", 4, NOW - ORPHAN_GRACE_MS)], {}, now_ms=NOW)
    assert old.puts == (("n", 4),)


def test_a_pointer_naming_a_write_whose_document_never_landed_drops_it_and_puts_the_old_one_again() -> None:
    versions = [("a", 1), ("b", 2), ("x", 3)]
    plan = plan_repair(Pointer("x"), versions, [("b", 2, 5), ("a", 1, 4)], {"x": ""}, now_ms=NOW)
    assert plan.drop == "x" and plan.puts == (("b", 2),)
    none_left = plan_repair(Pointer("x"), versions, [], {"x": ""}, now_ms=NOW)
    assert none_left.drop == "x" and none_left.puts == ()


def test_a_healthy_subject_only_gets_the_end_dates_it_already_has() -> None:
    versions = [("a", 1), ("b", 2)]
    plan = plan_repair(Pointer("b"), versions, [("b", 2, 5)], {"b": "main"}, now_ms=NOW)
    assert plan.retires == (Retire("a", 2, "b", trim=True),) and not plan.rewrites_pointer


def test_a_retraction_that_died_before_leaving_its_subject_is_taken_off_it() -> None:
    """The retracted version is in history and the pointer still names it: off the pointer, listed still."""
    assert history_state(b"5", b"9") == "history" and history_state(b"5", b"5") == "void"
    plan = plan_repair(Pointer("r"), [("a", 1), ("r", 5)], [], {"r": "history"}, now_ms=NOW)
    assert (plan.drop, plan.keep, plan.void, plan.puts) == ("r", True, False, ())
    void = plan_repair(Pointer("r"), [("a", 1), ("r", 5)], [], {"r": "void"}, now_ms=NOW)
    assert (void.drop, void.keep, void.void) == ("r", True, True)


def test_a_crashed_version_a_later_write_already_replaced_leaves_the_list_when_it_never_landed() -> None:
    """Berlin (3) crashed with its pointer only; Rome (4) replaced it before the repair came:
    Berlin leaves the version list, so Lisbon then ends where Rome begins, not at 3."""
    versions = [("lisbon", 1), ("berlin", 3), ("rome", 4)]
    hits = [("lisbon", 1, 1), ("rome", 4, NOW)]
    plan = plan_repair(Pointer("rome"), versions, hits, {"berlin": ""}, now_ms=NOW)
    assert plan.gone == ("berlin",) and plan.rewrites_pointer and plan.retires == ()
    after = plan_repair(Pointer("rome"), [("lisbon", 1), ("rome", 4)], hits, {"berlin": ""}, now_ms=NOW)
    assert after.retires[0] == Retire("lisbon", 4, "rome") and not after.rewrites_pointer


def test_a_crashed_version_in_history_and_valid_at_no_instant_is_marked_void_once() -> None:
    """A retraction ended it where it began and died; a later write replaced it meanwhile."""
    versions = [("a", 1), ("r", 5), ("w", 6)]
    plan = plan_repair(Pointer("w"), versions, [("w", 6, NOW)], {"r": "void"}, now_ms=NOW)
    assert plan.voided == ("r",) and plan.gone == () and plan.rewrites_pointer
    marked = plan_repair(Pointer("w", {"r": ""}), versions, [("w", 6, NOW)], {"r": "void"}, now_ms=NOW)
    assert marked.voided == () and not marked.rewrites_pointer
    ended = plan_repair(Pointer("w"), versions, [("w", 6, NOW)], {"r": "history"}, now_ms=NOW)
    assert ended.voided == () and not ended.rewrites_pointer  # a plain past version: nothing to mark
