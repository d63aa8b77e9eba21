"""The ``where=`` language parsed and checked (``core.filters``): the tree, folding, every error with its code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from betterdb_memory.core.escaping import MAX_TAG_BYTES
from betterdb_memory.core.filter_fields import (
    BUILTIN_FIELDS,
    FilterSchema,
)
from betterdb_memory.core.filters import (
    FALSE,
    MAX_FILTER_DEPTH,
    MAX_FILTER_TERMS,
    TRUE,
    And,
    Exists,
    Match,
    Not,
    Or,
    Range,
    parse_where,
)
from tests.filter_cases import MD, SCHEMA, where_error

# -- parsing ---------------------------------------------------------------------------------


def test_bare_value_is_eq_and_keys_are_anded() -> None:
    p, proj = MD.specs["priority"], MD.specs["project"]
    assert parse_where({"priority": 2}, SCHEMA) == Match(p, (2.0,))
    assert parse_where({"priority": 2, "project": "a"}, SCHEMA) == And(
        (Match(p, (2.0,)), Match(proj, ("a",)))
    )
    assert parse_where({"project": {"$ne": "a"}}, SCHEMA) == Not(Match(proj, ("a",)))
    assert parse_where({"project": {"$nin": ["a", "b", "a"]}}, SCHEMA) == Not(Match(proj, ("a", "b")))
    assert parse_where({"priority": {"$gt": 1, "$lte": 3}}, SCHEMA) == And(
        (Range(p, low=1.0, low_inclusive=False), Range(p, high=3.0, high_inclusive=True))
    )
    assert parse_where({"project": {"$exists": False}}, SCHEMA) == Not(Exists(proj))


def test_constants_fold() -> None:
    assert parse_where(None, SCHEMA) == TRUE
    assert parse_where({}, SCHEMA) == TRUE
    assert parse_where({"$or": [{}, {"priority": 1}]}, SCHEMA) == TRUE
    assert parse_where({"$not": {}}, SCHEMA) == FALSE
    assert parse_where({"importance": {"$exists": True}}, SCHEMA) == TRUE
    assert parse_where({"created_at": {"$exists": False}, "priority": 1}, SCHEMA) == FALSE
    assert parse_where({"$not": {"$not": {"priority": 1}}}, SCHEMA) == parse_where({"priority": 1}, SCHEMA)
    proj = MD.specs["project"]
    assert parse_where({"$or": [{"project": "a"}, {"$or": [{"project": "b"}]}]}, SCHEMA) == Or(
        (Match(proj, ("a",)), Match(proj, ("b",)))
    )


def test_time_fields_take_datetimes_naive_as_utc() -> None:
    spec = BUILTIN_FIELDS["created_at"]
    aware = datetime(2024, 5, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert parse_where({"created_at": {"$gte": aware}}, SCHEMA) == Range(spec, low=1714521600000.0)
    assert parse_where({"created_at": {"$gte": datetime(2024, 5, 1)}}, SCHEMA) == Range(
        spec, low=datetime(2024, 5, 1, tzinfo=UTC).timestamp() * 1000
    )
    assert where_error({"priority": {"$gte": datetime(2024, 5, 1)}}).code == "validation.filter_type"


@pytest.mark.parametrize(
    ("where", "code"),
    [
        ("priority", "validation.filter_type"),
        ([{"priority": 1}], "validation.filter_type"),
        ({"undeclared": 1}, "validation.filter_field"),
        ({"meta_priority": 1}, "validation.filter_field"),
        ({"threadId": "t"}, "validation.filter_field"),
        ({1: 1}, "validation.filter_field"),
        ({"$gt": 1}, "validation.filter_operator"),
        ({"$nor": [{"priority": 1}]}, "validation.filter_operator"),
        ({"priority": {"$foo": 1}}, "validation.filter_operator"),
        ({"priority": {"$and": [{"priority": 1}]}}, "validation.filter_operator"),
        ({"priority": {"$not": {"$gt": 1}}}, "validation.filter_operator"),
        ({"priority": {"gt": 1}}, "validation.filter_operator"),
        ({"priority": {"$gt": 1, "nested": 1}}, "validation.filter_operator"),
        ({"thread_id": {"$exists": True}}, "validation.filter_operator"),
        ({"tags": {"$exists": False}}, "validation.filter_operator"),
        ({"source": {"$exists": True}}, "validation.filter_operator"),
        ({"project": {"$gt": "a"}}, "validation.filter_type"),
        ({"tags": {"$lte": "a"}}, "validation.filter_type"),
        ({"priority": "2"}, "validation.filter_type"),
        ({"priority": {"$gt": "2"}}, "validation.filter_type"),
        ({"priority": True}, "validation.filter_type"),
        ({"priority": None}, "validation.filter_type"),
        ({"priority": {"$in": [1, "2"]}}, "validation.filter_type"),
        ({"priority": {"$in": 1}}, "validation.filter_type"),
        ({"priority": {"$in": "12"}}, "validation.filter_type"),
        ({"priority": [1, 2]}, "validation.filter_type"),
        ({"project": 3}, "validation.filter_type"),
        ({"project": ["a", "b"]}, "validation.filter_type"),
        ({"project": {"$exists": 1}}, "validation.filter_type"),
        ({"$or": {"priority": 1}}, "validation.filter_type"),
        ({"$or": "x"}, "validation.filter_type"),
        ({"$and": [1]}, "validation.filter_type"),
        ({"$not": [{"priority": 1}]}, "validation.filter_type"),
        ({"priority": float("nan")}, "validation.filter_value"),
        ({"priority": {"$lt": float("inf")}}, "validation.filter_value"),
        ({"project": "a,b"}, "validation.filter_value"),
        ({"project": "a*"}, "validation.filter_value"),
        ({"project": " a"}, "validation.filter_value"),
        ({"project": ""}, "validation.filter_value"),
        ({"project": "a\x00"}, "validation.filter_value"),
        ({"project": "x" * (MAX_TAG_BYTES + 1)}, "validation.filter_value"),
        ({"project": {"$in": []}}, "validation.filter_empty"),
        ({"project": {"$nin": []}}, "validation.filter_empty"),
        ({"$or": []}, "validation.filter_empty"),
        ({"$and": []}, "validation.filter_empty"),
        ({"priority": {}}, "validation.filter_empty"),
    ],
)
def test_bad_filters_are_validation_errors_with_codes(where: Any, code: str) -> None:
    err = where_error(where)
    assert err.code == code
    assert err.details["argument"] == "where"


def test_error_details_name_the_path_field_and_operator() -> None:
    err = where_error({"$or": [{"priority": 1}, {"project": {"$gt": "a"}}]})
    assert err.details == {
        "argument": "where",
        "path": "where.$or[1].project.$gt",
        "field": "project",
        "operator": "$gt",
    }
    err = where_error({"project": "a,b"})
    assert err.details["reason"] == "validation.comma"


def test_valid_from_only_where_the_index_has_it() -> None:
    err = where_error({"valid_from": {"$gt": 1}}, FilterSchema(MD))
    assert err.code == "validation.filter_field"
    assert "valid_from" not in FilterSchema(MD).names and "valid_from" in SCHEMA.names


def _nested(depth: int) -> dict[str, Any]:
    where: dict[str, Any] = {"priority": 1}
    for i in range(depth):
        where = {("$not", "$and", "$or")[i % 3]: where if i % 3 == 0 else [where]}
    return where


def test_nesting_bound() -> None:
    parse_where(_nested(MAX_FILTER_DEPTH), SCHEMA)
    assert where_error(_nested(MAX_FILTER_DEPTH + 1)).code == "validation.filter_depth"


def test_size_bound_counts_operators_and_list_values() -> None:
    parse_where({"priority": {"$in": list(range(MAX_FILTER_TERMS))}}, SCHEMA)
    assert (
        where_error({"priority": {"$in": list(range(MAX_FILTER_TERMS + 1))}}).code == "validation.filter_size"
    )
    parse_where({"$and": [{"priority": i} for i in range(MAX_FILTER_TERMS)]}, SCHEMA)
    err = where_error(
        {"$and": [{"priority": i} for i in range(MAX_FILTER_TERMS - 1)] + [{"project": {"$in": ["a", "b"]}}]}
    )
    assert err.code == "validation.filter_size"
    # A huge list is refused before any of its values is looked at.
    assert where_error({"project": {"$in": [object()] * 10**6}}).code == "validation.filter_size"
