"""A ``where`` tree as query text (``core.filter_query``): exact strings on both engines, hostile values,
what an engine cannot answer, no negation below a union."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.escaping import escape_tag, validate_tag_value
from betterdb_memory.core.filter_eval import evaluate
from betterdb_memory.core.filter_fields import (
    FilterSchema,
)
from betterdb_memory.core.filter_query import (
    MAX_WHERE_QUERY_BYTES,
    _negation_free,
    _union_safe,
    hybrid_query,
    require_filter_queries,
    standalone_query,
)
from betterdb_memory.core.filters import (
    And,
    Not,
    Or,
    parse_where,
)
from betterdb_memory.core.query import MATCH_ALL
from betterdb_memory.errors import CommandNotSupportedError, ValidationError
from tests.filter_cases import (
    DECLARED,
    REDISEARCH,
    VALKEY_1_0,
    VALKEY_1_2,
    document_fields,
    q,
    random_memory,
    random_where,
)

ENGINES = pytest.mark.parametrize("caps", [REDISEARCH, VALKEY_1_2], ids=["redisearch", "valkey-search"])


def test_compiled_size_bound() -> None:
    big = ["x" * 1000 + str(i) for i in range(9)]  # each escapes to ~1 kB
    with pytest.raises(ValidationError) as info:
        q({"project": {"$in": big}})
    assert info.value.code == "validation.filter_size"
    assert info.value.details["max"] == MAX_WHERE_QUERY_BYTES
    q({"project": {"$in": big[:7]}})


# -- query text ------------------------------------------------------------------------------


@ENGINES
@pytest.mark.parametrize(
    ("where", "text"),
    [
        ({"priority": 2}, "@meta_priority:[2.0 2.0]"),
        ({"priority": {"$ne": 2}}, "-@meta_priority:[2.0 2.0]"),
        ({"priority": {"$gt": 2}}, "@meta_priority:[(2.0 +inf]"),
        ({"priority": {"$gte": -1.5}}, "@meta_priority:[-1.5 +inf]"),
        ({"priority": {"$lt": 0.1}}, "@meta_priority:[-inf (0.1]"),
        ({"priority": {"$lte": 1e300}}, "@meta_priority:[-inf 1e+300]"),
        ({"priority": {"$in": [1, 2]}}, "(@meta_priority:[1.0 1.0]|@meta_priority:[2.0 2.0])"),
        ({"priority": {"$nin": [1, 2]}}, "-(@meta_priority:[1.0 1.0]|@meta_priority:[2.0 2.0])"),
        ({"priority": {"$exists": True}}, "@meta_priority:[-inf +inf]"),
        ({"priority": {"$exists": False}}, "-@meta_priority:[-inf +inf]"),
        ({"project": "apollo"}, "@meta_project:{apollo}"),
        ({"project": {"$in": ["apollo", "gemini"]}}, "@meta_project:{apollo|gemini}"),
        ({"project": {"$nin": ["apollo", "gemini"]}}, "-@meta_project:{apollo|gemini}"),
        ({"project": {"$exists": True}}, "@present:{project}"),
        ({"project": {"$exists": False}}, "-@present:{project}"),
        ({"thread_id": "t1"}, "@threadId:{t1}"),
        ({"agent_id": {"$ne": "a1"}}, "-@agentId:{a1}"),
        ({"namespace": "ns"}, "@namespace:{ns}"),
        ({"tags": {"$in": ["x", "y"]}}, "@tags:{x|y}"),
        ({"source": {"$nin": ["web"]}}, "-@source:{web}"),
        ({"importance": {"$gte": 0.5}}, "@importance:[0.5 +inf]"),
        ({"created_at": {"$lt": 1000}}, "@created_at:[-inf (1000.0]"),
        (
            {"valid_from": {"$gte": 1000}},
            "-(-@valid_from:[1000.0 +inf] -(@created_at:[1000.0 +inf] -@valid_from:[-inf +inf]))",
        ),
        (
            {"valid_from": {"$in": [1, 2]}},
            "-(-(@valid_from:[1.0 1.0]|@valid_from:[2.0 2.0]) "
            "-((@created_at:[1.0 1.0]|@created_at:[2.0 2.0]) -@valid_from:[-inf +inf]))",
        ),
        ({"priority": {"$gte": 2}, "project": "a"}, "(@meta_priority:[2.0 +inf] @meta_project:{a})"),
        ({"$or": [{"priority": 1}, {"project": "a"}]}, "(@meta_priority:[1.0 1.0]|@meta_project:{a})"),
        ({"$not": {"priority": 1, "project": "a"}}, "-(@meta_priority:[1.0 1.0] @meta_project:{a})"),
        (
            {"$and": [{"$or": [{"tags": "a"}, {"$not": {"tags": "b"}}]}, {"priority": {"$ne": 3}}]},
            # No negation below a union (RediSearch 2.10.5; filter_query's docstring): De Morgan.
            "(-(-@tags:{a} @tags:{b}) -@meta_priority:[3.0 3.0])",
        ),
        (
            {"$or": [{"priority": 1}, {"$or": [{"project": "a"}, {"project": {"$ne": "b"}}]}]},
            "-(-@meta_priority:[1.0 1.0] -@meta_project:{a} @meta_project:{b})",
        ),
        (
            {"$or": [{"priority": {"$nin": [1, 2]}}, {"project": "a"}]},
            "-((@meta_priority:[1.0 1.0]|@meta_priority:[2.0 2.0]) -@meta_project:{a})",
        ),
        ({}, MATCH_ALL),
        ({"$not": {}}, f"-{MATCH_ALL}"),
    ],
)
def test_query_text_is_exact_and_the_same_on_both_engines(caps: Any, where: Any, text: str) -> None:
    assert q(where, caps) == text


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        ("a b", "a\\ b"),
        ("x|y", "x\\|y"),
        ("{z}", "\\{z\\}"),
        ('q"u', 'q\\"u'),
        ("back\\slash", "back\\\\slash"),
        ("-x", "\\-x"),
        ("*a", "\\*a"),
        ("a*b", "a\\*b"),
        ("$p", "\\$p"),
        ("@f", "\\@f"),
        ("1.5", "1\\.5"),
        ("a_b", "a\\_b"),
        ("日本", "日本"),
        ("😀x", "😀x"),
        ("é", "é"),
        ("(p)", "\\(p\\)"),
    ],
)
def test_hostile_tag_values_are_escaped_by_the_one_escaper(value: str, escaped: str) -> None:
    assert escape_tag(value) == escaped
    assert q({"project": value}) == f"@meta_project:{{{escaped}}}"
    assert q({"source": {"$nin": [value, "w"]}}) == f"-@source:{{{escaped}|w}}"


TAG_SYNTAX = "{}|\\-@*()[]$:;'\".<>~!%^&=+?/`# _"
hostile = st.text(alphabet=TAG_SYNTAX + "aZ09éß漢🙂\u00a0", min_size=1, max_size=24).filter(
    lambda v: _valid(v)
)


def _split_escaped(body: str) -> list[str]:
    """The values of ``a|b\\|c``: a backslash takes the next character literally, a bare ``|`` separates."""
    out, cur, chars = [], [], iter(body)
    for ch in chars:
        if ch == "\\":
            cur.append(next(chars))
        elif ch == "|":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    return [*out, "".join(cur)]


def _valid(value: str) -> bool:
    try:
        validate_tag_value(value, name="v")
    except ValidationError:
        return False
    return True


@given(values=st.lists(hostile, min_size=1, max_size=4, unique=True))
@settings(max_examples=300, deadline=None)
def test_hostile_values_are_only_their_escaped_selves(values: list[str]) -> None:
    """Between the braces, every ASCII character but letters and digits is escaped; nothing else is syntax."""
    text = q({"project": {"$in": values}})
    body = text[len("@meta_project:{") : -1]
    assert text.startswith("@meta_project:{") and text.endswith("}")
    assert _split_escaped(body) == values
    syntax = re.sub(r"\\.", "", body, flags=re.DOTALL)
    assert all(ch.isalnum() or ord(ch) > 0x7F or ch == "|" for ch in syntax)


def test_valkey_search_1_0_runs_no_filter_only_query() -> None:
    expr = q({"priority": 1}, VALKEY_1_0)
    with pytest.raises(CommandNotSupportedError) as info:
        standalone_query(VALKEY_1_0, expr)
    assert info.value.code == "server.filter_unsupported"
    assert info.value.details["engine"] == "valkey-search" and info.value.details["version"] == "1.0.3"
    assert "valkey-search 1.0.3" in str(info.value)
    require_filter_queries(VALKEY_1_2)
    # A KNN query pre-filtered by it is fine on 1.0.
    assert hybrid_query("KNN 5 @vector $vec", expr) == "(@meta_priority:[1.0 1.0])=>[KNN 5 @vector $vec]"


def test_query_shapes_make_negations_safe_alone() -> None:
    knn = "KNN 3 @vector $vec AS __dist"
    neg = q({"project": {"$ne": "a"}})
    assert standalone_query(REDISEARCH, neg) == f"({MATCH_ALL} -@meta_project:{{a}})"
    assert standalone_query(REDISEARCH, "@threadId:{t}", neg) == "(@threadId:{t} -@meta_project:{a})"
    assert standalone_query(REDISEARCH) == MATCH_ALL
    assert standalone_query(REDISEARCH, "@threadId:{t}") == "@threadId:{t}"
    assert hybrid_query(knn, neg) == f"({MATCH_ALL} -@meta_project:{{a}})=>[{knn}]"
    assert hybrid_query(knn) == f"*=>[{knn}]"
    assert hybrid_query(knn, "", "(@a:{x}|@b:{y})") == f"(@a:{{x}}|@b:{{y}})=>[{knn}]"


def test_case_insensitive_index_refuses_negated_builtin_tags_only() -> None:
    with pytest.raises(CommandNotSupportedError) as info:
        q({"source": {"$ne": "web"}}, REDISEARCH, exact_tags=False)
    assert info.value.details["engine"] == "redisearch"
    with pytest.raises(CommandNotSupportedError):
        q({"$not": {"$or": [{"priority": 1}, {"tags": "a"}]}}, exact_tags=False)
    # Positive: the engine's superset is trimmed by the client-side check.
    assert q({"source": "web"}, exact_tags=False) == "@source:{web}"
    # Double negation is positive again; declared fields live only in this library's exact index.
    assert q({"$not": {"$not": {"tags": "a"}}}, exact_tags=False) == "@tags:{a}"
    assert q({"project": {"$ne": "a"}}, exact_tags=False) == "-@meta_project:{a}"


def _unions_hold_no_negation(node: Any) -> bool:
    if isinstance(node, Or):
        return all(_negation_free(c) for c in node.children) and all(
            _unions_hold_no_negation(c) for c in node.children
        )
    if isinstance(node, And):
        return all(_unions_hold_no_negation(c) for c in node.children)
    if isinstance(node, Not):
        return _unions_hold_no_negation(node.child)
    return True


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_union_safe_rewrite_keeps_the_meaning_and_leaves_no_negation_in_a_union(seed: int) -> None:
    """De Morgan for RediSearch 2.10.5 (filter_query's docstring): same answers, no negation below an Or."""
    rng = random.Random(seed)
    schema = FilterSchema(DECLARED, valid_from=True)
    fields = [document_fields(random_memory(rng)) for _ in range(8)]
    for _ in range(8):
        node = parse_where(random_where(rng), schema)
        safe = _union_safe(node)
        assert _unions_hold_no_negation(safe)
        assert [evaluate(safe, f) for f in fields] == [evaluate(node, f) for f in fields]


def test_negating_a_fallback_field_drops_its_minus_instead_of_doubling_it() -> None:
    """``--x`` is no double negation to the engines' parsers (the differential test met it)."""
    text = q({"$not": {"valid_from": {"$gte": 1000}}})
    assert text == "(-@valid_from:[1000.0 +inf] -(@created_at:[1000.0 +inf] -@valid_from:[-inf +inf]))"
    assert "--" not in q({"valid_from": {"$ne": 5}, "$or": [{"valid_from": 1}, {"priority": {"$ne": 2}}]})
