"""The LangGraph adapter's filter split: what the index answers, what stays client-side (no server)."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed (make test installs it)")

from betterdb_memory.adapters._langgraph_filters import (
    check_filter_fields,
    declared_filter_fields,
    indexed_values,
    split_filter,
    store_fields,
)
from betterdb_memory.errors import ConfigurationError, ValidationError

FIELDS = check_filter_fields({"status": "tag", "priority": "numeric"})


def test_store_fields_and_declaration_check() -> None:
    assert store_fields(FIELDS) == {"lg_status": "tag", "lg_priority": "numeric"}
    assert (
        declared_filter_fields(FIELDS, {"lg_status": "tag", "lg_priority": "numeric", "x": "tag"}) == FIELDS
    )
    with pytest.raises(ConfigurationError):
        declared_filter_fields(FIELDS, {"lg_status": "tag"})
    for bad in ({"a.b": "tag"}, {"a": "text"}, ["a"]):
        with pytest.raises(ConfigurationError):
            check_filter_fields(bad)


def test_indexed_values() -> None:
    assert indexed_values({"status": "open", "priority": 2, "x": 1}, FIELDS) == {
        "lg_status": "open",
        "lg_priority": 2,
    }
    assert indexed_values({"status": None}, FIELDS) == {}
    for bad in ({"status": ["open"]}, {"status": 1}, {"priority": True}, {"priority": "2"}):
        with pytest.raises(ValidationError):
            indexed_values(bad, FIELDS)


@pytest.mark.parametrize(
    ("flt", "where", "rest"),
    [
        ({"status": "open"}, {"lg_status": "open"}, {}),
        ({"status": {"$ne": "open"}}, {"lg_status": {"$ne": "open"}}, {}),
        ({"priority": {"$gt": 1, "$lte": 3}}, {"lg_priority": {"$gt": 1, "$lte": 3}}, {}),
        ({"status": {"$gt": "a"}}, {}, {"status": {"$gt": "a"}}),  # a range on a tag: LangGraph's rule
        ({"status": 3}, {}, {"status": 3}),
        ({"status": "a,b"}, {}, {"status": "a,b"}),  # no put could index it
        ({"priority": True}, {}, {"priority": True}),
        ({"priority": {"$in": [1]}}, {}, {"priority": {"$in": [1]}}),  # not a LangGraph operator
        ({"owner": {"name": "ada"}, "status": "x"}, {"lg_status": "x"}, {"owner": {"name": "ada"}}),
        ({"status": {}}, {}, {"status": {}}),
    ],
)
def test_split_filter(flt: dict[str, object], where: dict[str, object], rest: dict[str, object]) -> None:
    assert split_filter(flt, FIELDS) == (where, rest)
