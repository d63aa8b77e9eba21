"""MemoryItem building from hash fields: the fast readers keep every field in its place."""

from __future__ import annotations

import dataclasses

from betterdb_memory.core.models import MemoryItem, item_from_fields, ranking_item, with_access

_FULL = {
    "content": b"Ada lives in Lisbon",
    "importance": b"0.7",
    "tags": b"home,city",
    "created_at": b"1700000000000",
    "last_accessed_at": b"1700000100000",
    "access_count": b"3",
    "source": b"chat",
    "threadId": b"t1",
    "agentId": b"a1",
    "namespace": b"ns",
    "subject": b"home city",
    "date": b"2024-05-01",
    "sensitivity": b"pii",
    "kind": b"fact",
    "metadata": b'{"priority": 2}',
    "expires_at": b"1800000000000",
    "valid_from": b"1600000000000",
    "valid_until": b"1750000000000",
}


def test_every_field_read_from_its_own_hash_field() -> None:
    item = item_from_fields("m1", _FULL)
    assert item == MemoryItem(
        id="m1",
        content="Ada lives in Lisbon",
        importance=0.7,
        created_at=1700000000000,
        last_accessed_at=1700000100000,
        access_count=3,
        tags=["home", "city"],
        source="chat",
        thread_id="t1",
        agent_id="a1",
        namespace="ns",
        sensitivity="pii",
        kind="fact",
        subject="home city",
        expires_at=1800000000000,
        metadata={"priority": 2},
        date="2024-05-01",
        valid_from=1600000000000,
        valid_until=1750000000000,
    )


def test_absent_fields_read_as_a_reader_assumes() -> None:
    item = item_from_fields("m1", {"content": "x", "created_at": "5", "source": "summary"})
    assert item == MemoryItem(
        id="m1", content="x", importance=0.5, created_at=5, last_accessed_at=0, access_count=0,
        source="summary", kind="summary", valid_from=5,
    )  # fmt: skip
    assert item_from_fields("m1", {"metadata": b"not json", "expires_at": b"0"}).metadata == {}
    assert item_from_fields("m1", {"valid_until": b"soon"}).valid_until is None


def test_a_ranking_item_carries_what_ranking_reads() -> None:
    item = ranking_item("m1", _FULL)
    assert (item.content, item.importance, item.created_at, item.last_accessed_at, item.access_count) == (
        "Ada lives in Lisbon", 0.7, 1700000000000, 1700000100000, 3,
    )  # fmt: skip
    assert (item.thread_id, item.agent_id, item.namespace, item.expires_at, item.valid_from) == (
        "t1", "a1", "ns", 1800000000000, 1600000000000,
    )  # fmt: skip
    assert (item.tags, item.source, item.kind, item.metadata, item.valid_until) == (
        [],
        None,
        "memory",
        {},
        None,
    )
    assert ranking_item("m2", {"created_at": b"9"}).valid_from == 9


def test_with_access_is_replace_of_the_two_fields() -> None:
    """Positional construction: a field moved in ``MemoryItem`` fails here."""
    item = item_from_fields("m1", _FULL)
    assert with_access(item, 42, 7) == dataclasses.replace(item, last_accessed_at=42, access_count=7)
    assert len(dataclasses.fields(MemoryItem)) == 19


def test_a_lagging_access_is_built_in_as_with_access_would() -> None:
    """``seen``: the later last access and the greater count, each on its own."""
    stored = item_from_fields("m1", _FULL)
    for seen in ((1700000200000, 5), (1700000200000, 1), (1, 9), (1, 1)):
        expected = with_access(
            stored, max(seen[0], stored.last_accessed_at), max(seen[1], stored.access_count)
        )
        assert item_from_fields("m1", _FULL, seen=seen) == expected
        assert ranking_item("m1", _FULL, seen=seen).last_accessed_at == expected.last_accessed_at
        assert ranking_item("m1", _FULL, seen=seen).access_count == expected.access_count


def test_the_fast_constructor_takes_every_field_in_order_and_builds_the_same_item() -> None:
    """``_item`` bypasses ``MemoryItem.__init__``: a field added to the class must be added to it too."""
    import inspect

    from betterdb_memory.core import models

    names = [f.name for f in dataclasses.fields(MemoryItem)]
    assert list(inspect.signature(models._item).parameters) == names
    values: list[object] = ["m1", "text", 0.7, 1000, 2000, 3, ["a"], "chat", "t", "ag", "ns", "pii", "fact",
                            "subj", 5000, {"k": 1}, "2024-05-01", 900, 4000]  # fmt: skip
    built = models._item(*values)  # type: ignore[arg-type]
    assert built == MemoryItem(*values)  # type: ignore[arg-type]
    assert [getattr(built, n) for n in names] == values
    # valid_from left out (the sentinel): the item's created_at, as MemoryItem.__post_init__ does.
    values[17] = models._FROM_CREATED
    assert models._item(*values).valid_from == 1000 == MemoryItem(*values).valid_from  # type: ignore[arg-type]
    try:
        built.content = "changed"  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("the item must stay frozen")


def test_the_short_way_for_a_plain_hash_builds_what_the_long_way_does() -> None:
    """A hash with none of the optional fields takes a short way; a field the reader ignores sends
    the same hash the long way: the two items must be equal, field by field, for every subset."""
    import itertools

    plain = {
        "__dist": b"0.25", "content": b"Ada lives in Lisbon.", "importance": b"0.7", "created_at": b"1000",
        "last_accessed_at": b"2000", "access_count": b"3", "threadId": b"t1", "agentId": b"", "namespace": b"ns",
        "valid_from": b"500",
    }  # fmt: skip
    names = list(plain)
    for r in range(len(names) + 1):
        for keep in itertools.combinations(names, r):
            f = {n: plain[n] for n in keep}
            for seen in (None, (5000, 9)):
                short = item_from_fields("m1", f, seen=seen)
                long = item_from_fields("m1", {**f, "ignored_by_the_reader": b"x"}, seen=seen)
                assert short == long and type(short) is MemoryItem
