"""The client-side check (``core.filter_eval``) against the document and against MongoDB's rules read plainly."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.filter_eval import evaluate, referenced_fields
from betterdb_memory.core.filter_fields import (
    FilterSchema,
)
from betterdb_memory.core.filters import (
    TRUE,
    parse_where,
)
from tests.filter_cases import (
    DECLARED,
    SCHEMA,
    document_fields,
    mongo_matches,
    mongo_view,
    random_memory,
    random_where,
)

# -- the evaluator ---------------------------------------------------------------------------


DOC = {
    "threadId": "t1",
    "tags": "a,b",
    "importance": "0.5",
    "created_at": "2000",
    "meta_priority": "3.0",
    "meta_project": "apollo,gemini",
    "present": "priority,project",
}


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"priority": 3}, True),
        ({"priority": {"$gt": 3}}, False),
        ({"priority": {"$gte": 3, "$lt": 4}}, True),
        ({"project": "gemini"}, True),
        ({"project": {"$nin": ["gemini"]}}, False),
        ({"tags": {"$in": ["b", "z"]}}, True),
        ({"tags": {"$ne": "c"}}, True),
        ({"source": {"$ne": "web"}}, True),  # missing: $ne matches
        ({"source": {"$in": ["web"]}}, False),
        ({"source": {"$nin": ["web"]}}, True),
        ({"agent_id": "x"}, False),
        ({"project": {"$exists": True}}, True),
        ({"valid_from": 2000}, True),  # no valid_from: its created_at
        ({"valid_from": {"$exists": False}}, False),
        ({"$not": {"thread_id": "t1"}}, False),
        ({"$or": [{"thread_id": "t2"}, {"priority": {"$lte": 3}}]}, True),
    ],
)
def test_evaluate_reads_the_document_as_the_engine_does(where: Any, expected: bool) -> None:
    assert evaluate(parse_where(where, SCHEMA), DOC) is expected
    as_bytes = {k: v.encode() for k, v in DOC.items()}
    assert evaluate(parse_where(where, SCHEMA), as_bytes) is expected


def test_evaluate_treats_unparsable_numbers_as_missing() -> None:
    doc = {**DOC, "meta_priority": "high"}
    assert not evaluate(parse_where({"priority": {"$exists": True}}, SCHEMA), doc)
    assert evaluate(parse_where({"priority": {"$ne": 3}}, SCHEMA), doc)
    assert not evaluate(parse_where({"priority": {"$lt": 100}}, SCHEMA), {**DOC, "meta_priority": "inf"})


def test_referenced_fields_are_what_a_recheck_must_return() -> None:
    node = parse_where(
        {"priority": 1, "project": {"$exists": True}, "$not": {"valid_from": {"$gt": 1}}, "tags": "a"}, SCHEMA
    )
    assert referenced_fields(node) == ("created_at", "meta_priority", "present", "tags", "valid_from")
    assert referenced_fields(TRUE) == ()


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_evaluator_agrees_with_a_plain_reading_of_mongodb_rules(seed: int) -> None:
    """Random memories (missing fields, lists, values that do not fit) and random filters."""
    rng = random.Random(seed)
    schema = FilterSchema(DECLARED, valid_from=True)
    memories = [random_memory(rng) for _ in range(8)]
    for _ in range(8):
        where = random_where(rng)
        node = parse_where(where, schema)
        for m in memories:
            assert evaluate(node, document_fields(m)) == mongo_matches(where, mongo_view(m)), (where, m)


def test_random_filters_select_strict_subsets() -> None:
    """The generated filters are neither always empty nor always full: the comparisons have teeth."""
    rng = random.Random(27)
    schema = FilterSchema(DECLARED, valid_from=True)
    fields = [document_fields(random_memory(rng)) for _ in range(30)]
    sizes = [sum(evaluate(parse_where(random_where(rng), schema), f) for f in fields) for _ in range(200)]
    assert sum(0 < s < 30 for s in sizes) > 100, sizes
