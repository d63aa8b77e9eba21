"""The LangGraph store adapter's pure parts: ids, prefix tags, filters, namespace matching (no server)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed (make test installs it)")

from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import InvalidNamespaceError, MatchCondition
from langgraph.store.memory import _compare_values, _does_match

from betterdb_memory.adapters._langgraph_items import (
    check_labels,
    index_text,
    item_id,
    literal_prefix,
    matches_filter,
    matches_namespace,
    namespace_tags,
    prefix_tag,
)
from betterdb_memory.core.escaping import validate_tag_value
from betterdb_memory.core.keys import validate_memory_id

labels = st.text(min_size=1, max_size=8).filter(lambda s: "." not in s and "\x00" not in s)
namespaces = st.lists(labels, min_size=1, max_size=5).map(tuple)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", ""]))
values = st.dictionaries(
    st.sampled_from(["n", "s", "nested", "list"]),
    st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(st.sampled_from(["x", "y"]), scalars)),
)
conditions = st.one_of(
    scalars,
    st.lists(scalars, max_size=2),
    st.dictionaries(st.sampled_from(["x", "y"]), scalars, min_size=1),
    st.dictionaries(st.sampled_from(["$eq", "$ne"]), scalars, min_size=1),
)
filters = st.dictionaries(st.sampled_from(["n", "s", "nested", "list", "absent"]), conditions, max_size=3)


@given(namespaces, st.text(max_size=10))
def test_ids_and_tags_are_valid_store_values(namespace: tuple[str, ...], key: str) -> None:
    """Whatever the labels and key hold, the id is a valid memory id and every tag a valid TAG value."""
    assert validate_memory_id(item_id("langgraph", namespace, key)) == item_id("langgraph", namespace, key)
    tags = namespace_tags("langgraph", namespace)
    assert len(tags) == len(namespace) + 1
    for tag in tags:
        assert validate_tag_value(tag, name="tags") == tag


def test_ids_and_tags_keep_label_boundaries_and_scopes_apart() -> None:
    """("a,b",) is not ("a", "b"); the key is not a label; another scope gets other ids and tags."""
    assert item_id("s", ("a,b",), "k") != item_id("s", ("a", "b"), "k")
    assert item_id("s", ("a",), "b") != item_id("s", ("a", "b"), "")
    assert prefix_tag("s", ("a,b",)) != prefix_tag("s", ("a", "b"))
    assert prefix_tag("s", ("foo",)) != prefix_tag("s", ("foobar",))
    assert item_id("s", ("a",), "k") != item_id("t", ("a",), "k")
    assert prefix_tag("s", ()) != prefix_tag("t", ())
    assert namespace_tags("s", ("a", "b"))[:2] == namespace_tags("s", ("a", "c"))[:2]


@given(values, filters)
def test_filters_decide_as_in_memory_store(value: dict[str, Any], flt: dict[str, Any]) -> None:
    """Equality, nested dicts, lists and $eq/$ne: the same answer as InMemoryStore's _compare_values."""
    expected = all(_compare_values(value.get(k), v) for k, v in flt.items())
    assert matches_filter(value, flt) == expected


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        ({"n": {"$gt": 2}}, True),
        ({"n": {"$gte": 3, "$lt": 4}}, True),
        ({"n": {"$lte": 2.5}}, False),
        ({"n": {"$ne": 3}}, False),
        ({"nested": {"x": 1}}, True),
        ({"nested": {"x": 2}}, False),
        ({"tags": ["a", "b"]}, True),
        ({"tags": ["b", "a"]}, False),
        ({"missing": None}, True),
        (None, True),
        ({}, True),
    ],
)
def test_filter_operators(flt: dict[str, Any] | None, expected: bool) -> None:
    value = {"n": 3, "nested": {"x": 1, "y": "z"}, "tags": ["a", "b"]}
    assert matches_filter(value, flt) is expected


def test_unknown_operator_is_refused() -> None:
    with pytest.raises(ValueError, match="Unsupported operator"):
        matches_filter({"n": 1}, {"n": {"$in": [1]}})


@given(
    namespaces,
    st.sampled_from(["prefix", "suffix"]),
    st.lists(st.one_of(labels, st.just("*")), max_size=4).map(tuple),
)
def test_namespace_conditions_match_as_in_memory_store(
    namespace: tuple[str, ...], kind: str, path: tuple[str, ...]
) -> None:
    condition = MatchCondition(kind, path)  # type: ignore[arg-type]
    assert matches_namespace(condition, namespace) == _does_match(condition, namespace)


def test_literal_prefix_stops_at_the_first_wildcard() -> None:
    assert literal_prefix(("a", "b", "*", "c")) == ("a", "b")
    assert literal_prefix(("*", "b")) == ()
    assert literal_prefix(()) == ()


def test_labels_follow_langgraphs_rule() -> None:
    check_labels(("a", "b c", "x,y", "line\n"))
    for bad in [("a.b",), ("",), ("a\x00",), (1,)]:
        with pytest.raises(InvalidNamespaceError):
            check_labels(bad)


def test_index_text_takes_the_fields_in_order() -> None:
    value = {"text": "Ada", "meta": {"city": "Lisbon"}, "items": [{"t": "x"}, {"t": "y"}], "n": 3}
    assert index_text(value, ["text", "meta.city"]) == "Ada\nLisbon"
    assert index_text(value, ["items[*].t"]) == "x\ny"
    assert index_text(value, ["absent"]) == ""
    assert index_text({"b": 1, "a": "é"}, ["$"]) == '{"a": "é", "b": 1}'
