"""core.index_gen: schema digests, generations, outdated fields, the backfill's paging and writes."""

from __future__ import annotations

import json

from betterdb_memory.core.dialect import capabilities_for
from betterdb_memory.core.filter_fields import MetadataFields, schema_args
from betterdb_memory.core.index_gen import (
    BackfillCursor,
    Generation,
    backfill_fields,
    backfill_page_args,
    backfill_writes,
    generation_name,
    missing_fields,
    schema_digest,
    schema_fields,
    switch_keys,
)
from betterdb_memory.core.query import IndexSpec, create_index_args

CAPS = capabilities_for("redisearch", (2, 10, 0))


def spec(**kw: object) -> IndexSpec:
    return IndexSpec(index="s:mem:idx", prefix="s:mem:", dimensions=8, **kw)  # type: ignore[arg-type]


def test_schema_fields_reads_every_field_of_the_create_arguments() -> None:
    declared = MetadataFields.of({"priority": "numeric", "project": "tag"})
    fields = schema_fields(create_index_args(spec(extra_schema=tuple(schema_args(declared))), CAPS))
    names = [n for n, _ in fields]
    assert names[0] == "vector" and fields[0] == ("vector", "VECTOR")
    assert ("tags", "TAG") in fields and ("created_at", "NUMERIC") in fields
    assert ("meta_priority", "NUMERIC") in fields and ("meta_project", "TAG") in fields
    assert ("present", "TAG") in fields and fields[-1] == ("content", "TEXT")
    assert len(names) == len(set(names)) and "SEPARATOR" not in names and "CASESENSITIVE" not in names


def test_the_digest_names_fields_and_types_not_tuning_or_order() -> None:
    a = schema_fields(create_index_args(spec(m=16), CAPS))
    b = schema_fields(create_index_args(spec(m=32, ef_runtime=50, initial_cap=1000), CAPS))
    assert schema_digest(a) == schema_digest(b) == schema_digest(list(reversed(a)))
    assert len(schema_digest(a)) == 16
    assert schema_digest(a) != schema_digest([*a, ("meta_x", "NUMERIC")])
    assert schema_digest([("meta_x", "NUMERIC")]) != schema_digest([("meta_x", "TAG")])


def test_missing_fields_counts_absent_fields_and_changed_types_but_not_text() -> None:
    wanted = [("vector", "VECTOR"), ("valid_from", "NUMERIC"), ("meta_p", "TAG"), ("content", "TEXT")]
    have = [("vector", "VECTOR"), ("meta_p", "NUMERIC")]
    assert missing_fields(wanted, have) == ("valid_from", "meta_p")
    assert missing_fields(wanted, [*wanted]) == ()
    assert missing_fields([("x", "tag")], [("x", "TAG")]) == ()


def test_generations_are_read_from_the_meta_hash_with_the_reference_name_by_default() -> None:
    assert Generation.from_meta({}, "s:mem:idx") == Generation("s:mem:idx", 0, None)
    meta = {"index": "s:mem:idx:g3", "index_gen": "3", "index_schema": "ab"}
    assert Generation.from_meta(meta, "s:mem:idx") == Generation("s:mem:idx:g3", 3, "ab")
    assert Generation.from_meta({"index_gen": "junk"}, "r").gen == 0
    assert generation_name("s:mem:idx", 4) == "s:mem:idx:g4"
    state, lock = switch_keys("s")
    assert not state.startswith("s:mem:") and not lock.startswith("s:mem:") and lock != state


def test_the_backfill_cursor_pages_by_created_at_and_counts_ties() -> None:
    c = BackfillCursor()
    assert c.encode() == "" and BackfillCursor.decode(None) == c and BackfillCursor.decode("x:y") == c
    c = c.advance([1, 2, 5, 5])
    assert c == BackfillCursor(5, 2)
    assert c.advance([5, 5]) == BackfillCursor(5, 4)  # a page of ties only: skip them all next time
    assert c.advance([5, 7]) == BackfillCursor(7, 1)
    assert c.advance([]) == c
    assert BackfillCursor.decode(c.encode()) == c
    args = backfill_page_args("i", c, ["metadata"], page=100)
    assert args[:3] == ["FT.SEARCH", "i", "@created_at:[5 +inf]"]
    assert args[args.index("LIMIT") + 1 : args.index("LIMIT") + 3] == ["2", "100"]
    assert args[args.index("SORTBY") + 1 : args.index("SORTBY") + 3] == ["created_at", "ASC"]
    assert args[-2:] == ["DIALECT", "2"]
    assert "@created_at:[-inf +inf]" in backfill_page_args("i", BackfillCursor(), [], page=1)


def test_backfill_writes_only_what_changes_and_deletes_fields_no_longer_declared() -> None:
    declared = MetadataFields.of({"priority": "numeric", "project": "tag"})
    assert backfill_fields(declared) == ["metadata", "present", "meta_priority", "meta_project"]
    doc = {"metadata": json.dumps({"priority": 2, "project": "apollo", "other": 1})}
    sets, dels = backfill_writes(doc, declared)
    assert sets == {"meta_priority": "2.0", "meta_project": "apollo", "present": "priority,project"}
    assert dels == []
    assert backfill_writes({**doc, **sets}, declared) == ({}, [])  # already right: nothing written
    # A field no longer declared, and a value that does not fit its type (left out, not refused).
    old = {"metadata": json.dumps({"priority": "high"}), "present": "gone", "meta_gone": "x"}
    assert backfill_writes(old, declared) == ({}, ["meta_gone", "present"])
    assert backfill_writes({"metadata": "not json"}, declared) == ({}, [])
    assert backfill_writes({}, declared) == ({}, [])
