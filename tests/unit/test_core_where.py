"""``core.where``: a ``where=`` parsed before I/O, compiled for the index in use (no server)."""

from __future__ import annotations

import pytest

from betterdb_memory.core.filter_fields import MetadataFields
from betterdb_memory.core.query import IndexLayout, MemoryFilter, build_filter, item_matches
from betterdb_memory.core.where import MAX_QUERY_BYTES, Where, check_query_size, compile_for, parse
from betterdb_memory.errors import ValidationError
from tests.filter_cases import REDISEARCH, VALKEY_1_2

MD = MetadataFields.of({"priority": "numeric", "project": "tag"})


def test_no_filter_is_none_and_false_stays() -> None:
    assert parse(None, MD) is None
    assert parse({}, MD) is None
    assert parse({"importance": {"$exists": False}}, MD) is not None  # FALSE: selects nothing


def test_parse_checks_fields_types_and_size_before_any_io() -> None:
    for where, code in (
        ({"nope": 1}, "validation.filter_field"),
        ({"priority": "x"}, "validation.filter_type"),
        ({"project": {"$in": ["v" * 100 + str(i) for i in range(100)]}}, "validation.filter_size"),
    ):
        with pytest.raises(ValidationError) as info:
            parse(where, MD)
        assert info.value.code == code


@pytest.mark.parametrize("caps", [REDISEARCH, VALKEY_1_2])
def test_compiled_where_is_one_and_clause_and_rechecks(caps: object) -> None:
    node = parse({"priority": {"$gte": 2}, "project": {"$ne": "a"}}, MD)
    assert node is not None
    where = compile_for(node, caps, IndexLayout())  # type: ignore[arg-type]
    assert isinstance(where, Where) and where.fields == ("meta_priority", "meta_project")
    flt = MemoryFilter(where=where)
    assert build_filter(flt).endswith(where.text)
    assert item_matches({"meta_priority": "3.0", "meta_project": "b"}, flt)
    assert not item_matches({"meta_priority": "3.0", "meta_project": "a"}, flt)
    assert not item_matches({"meta_project": "b"}, flt)  # a comparison on a missing field is false


def test_a_field_the_index_lacks_is_refused_with_reason_indexing() -> None:
    node = parse({"priority": 1}, MD)
    assert node is not None
    layout = IndexLayout.from_fields(["vector", "created_at", "valid_from"], case_sensitive=True)
    with pytest.raises(ValidationError) as info:
        compile_for(node, REDISEARCH, layout)
    assert info.value.code == "validation.filter_field" and info.value.details["reason"] == "indexing"
    old = IndexLayout.from_fields(["vector", "created_at", "meta_priority"], case_sensitive=True)
    vf = parse({"valid_from": {"$gt": 0}}, MD)
    assert vf is not None
    with pytest.raises(ValidationError):
        compile_for(vf, REDISEARCH, old)
    assert compile_for(node, REDISEARCH, old).text == "@meta_priority:[1.0 1.0]"


def test_whole_query_size() -> None:
    check_query_size("x" * (MAX_QUERY_BYTES - 200))
    with pytest.raises(ValidationError) as info:
        check_query_size("x" * MAX_QUERY_BYTES)
    assert info.value.code == "validation.filter_size"
