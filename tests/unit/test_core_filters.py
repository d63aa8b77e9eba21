"""The ``where=`` language without a server: declarations, parsing, errors, exact query text, the evaluator.

Modules: ``core.filter_fields`` (declared fields, what a write adds), ``core.filters``
(the tree), ``core.filter_query`` (query text), ``core.filter_eval`` (the client-side
check). The server-backed differential test is tests/integration/test_filters_differential.py.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.dialect import capabilities_for
from betterdb_memory.core.escaping import MAX_TAG_BYTES, escape_tag, validate_tag_value
from betterdb_memory.core.filter_eval import evaluate, referenced_fields
from betterdb_memory.core.filter_fields import (
    BUILTIN_FIELDS,
    MAX_METADATA_FIELDS,
    PRESENCE_FIELD,
    RESERVED_NAMES,
    FilterSchema,
    MetadataFields,
    index_fields,
    schema_args,
)
from betterdb_memory.core.filter_query import (
    MAX_WHERE_QUERY_BYTES,
    _negation_free,
    _union_safe,
    compile_where,
    hybrid_query,
    require_filter_queries,
    standalone_query,
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
from betterdb_memory.core.query import ITEM_FIELDS, MATCH_ALL
from betterdb_memory.errors import CommandNotSupportedError, ConfigurationError, ValidationError
from tests.filter_cases import (
    DECLARED,
    document_fields,
    mongo_matches,
    mongo_view,
    random_memory,
    random_where,
)

REDISEARCH = capabilities_for("redisearch", (2, 10, 5))
VALKEY_1_2 = capabilities_for("valkey-search", (1, 2, 1))
VALKEY_1_0 = capabilities_for("valkey-search", (1, 0, 3))
ENGINES = pytest.mark.parametrize("caps", [REDISEARCH, VALKEY_1_2], ids=["redisearch", "valkey-search"])

MD = MetadataFields.of({"priority": "numeric", "project": "tag"})
SCHEMA = FilterSchema(MD, valid_from=True)


def where_error(where: Any, schema: FilterSchema = SCHEMA) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        parse_where(where, schema)
    assert type(info.value) is ValidationError
    return info.value


def q(where: Any, caps: Any = VALKEY_1_2, **kw: Any) -> str:
    return compile_where(parse_where(where, SCHEMA), caps, **kw)


# -- declarations ----------------------------------------------------------------------------


def test_declaration_keeps_order_and_builds_field_specs() -> None:
    assert list(MD) == [("priority", "numeric"), ("project", "tag")]
    assert len(MD) == 2
    assert MD.specs["priority"].doc_field == "meta_priority"
    assert MD.specs["project"].multi and MD.specs["project"].exists_by == "presence"
    assert MD.specs["priority"].exists_by == "range"
    assert MetadataFields.of(None) == MetadataFields() and not MetadataFields.of({})
    assert MetadataFields.of(MD) is MD


def test_declaration_digest_ignores_order_and_tells_types_apart() -> None:
    a = MetadataFields.of({"x": "tag", "y": "numeric"})
    assert a.digest == MetadataFields.of({"y": "numeric", "x": "tag"}).digest
    assert a.digest != MetadataFields.of({"x": "numeric", "y": "numeric"}).digest


@pytest.mark.parametrize(
    ("declared", "code"),
    [
        (["priority"], "configuration.type"),
        ({"priority": "int"}, "configuration.choice"),
        ({"priority": None}, "configuration.choice"),
        ({"": "tag"}, "configuration.field_name"),
        ({"1st": "tag"}, "configuration.field_name"),
        ({"a-b": "tag"}, "configuration.field_name"),
        ({"a.b": "tag"}, "configuration.field_name"),
        ({"x" * 65: "tag"}, "configuration.field_name"),
        ({3: "tag"}, "configuration.field_name"),
        ({"source": "tag"}, "configuration.reserved_field"),
        ({"Source": "tag"}, "configuration.reserved_field"),
        ({"threadId": "tag"}, "configuration.reserved_field"),
        ({"thread_id": "tag"}, "configuration.reserved_field"),
        ({"subject": "tag"}, "configuration.reserved_field"),
        ({"present": "tag"}, "configuration.reserved_field"),
        ({"valid_from": "numeric"}, "configuration.reserved_field"),
        ({"project": "tag", "Project": "tag"}, "configuration.reserved_field"),
        ({f"f{i}": "tag" for i in range(MAX_METADATA_FIELDS + 1)}, "configuration.too_many"),
    ],
)
def test_bad_declarations_are_configuration_errors(declared: Any, code: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        MetadataFields.of(declared)
    assert info.value.code == code
    assert info.value.details["argument"] == "metadata_fields"


def test_every_field_a_memory_is_written_with_is_reserved() -> None:
    written = {*ITEM_FIELDS, "vector", "keep", "dedup", "metadata", "kind", "date", *BUILTIN_FIELDS}
    assert {n.lower() for n in written} <= RESERVED_NAMES
    for name in written:
        with pytest.raises(ConfigurationError):
            MetadataFields.of({name: "tag"})


def test_schema_args_declare_tags_exact_and_the_presence_field() -> None:
    assert schema_args(MD) == [
        "meta_priority", "NUMERIC",
        "meta_project", "TAG", "SEPARATOR", ",", "CASESENSITIVE",
        "present", "TAG", "SEPARATOR", ",", "CASESENSITIVE",
    ]  # fmt: skip
    assert schema_args(MetadataFields()) == []


# -- what a write adds -----------------------------------------------------------------------


def test_index_fields_write_values_and_presence() -> None:
    assert index_fields({"priority": 3, "project": ["a", "b", "a"], "other": 1}, MD) == {
        "meta_priority": "3.0",
        "meta_project": "a,b",
        "present": "priority,project",
    }
    assert index_fields({"project": "apollo"}, MD) == {"meta_project": "apollo", "present": "project"}
    assert index_fields({"priority": -0.5}, MD) == {"meta_priority": "-0.5", "present": "priority"}


@pytest.mark.parametrize(
    "metadata", [None, {}, {"other": 1}, {"priority": None, "project": None}, {"project": []}]
)
def test_index_fields_absent_none_and_empty_list_are_missing(metadata: Any) -> None:
    assert index_fields(metadata, MD) == {}


def test_index_fields_without_declarations_add_nothing() -> None:
    assert index_fields({"priority": 1}, MetadataFields()) == {}


@pytest.mark.parametrize(
    ("metadata", "code"),
    [
        ({"priority": "high"}, "validation.metadata_field"),
        ({"priority": True}, "validation.metadata_field"),
        ({"priority": float("nan")}, "validation.metadata_field"),
        ({"priority": 10**400}, "validation.metadata_field"),
        ({"priority": [1]}, "validation.metadata_field"),
        ({"project": 7}, "validation.metadata_field"),
        ({"project": {"a": 1}}, "validation.metadata_field"),
        ({"project": ["ok", 3]}, "validation.type"),
        ({"project": "a,b"}, "validation.comma"),
        ({"project": " a"}, "validation.whitespace"),
        ({"project": ""}, "validation.empty"),
        ({"project": "a*"}, "validation.wildcard"),
        ({"project": [f"v{i}" for i in range(65)]}, "validation.metadata_field"),
    ],
)
def test_index_fields_strict_refuses_values_that_do_not_fit(metadata: Any, code: str) -> None:
    with pytest.raises(ValidationError) as info:
        index_fields(metadata, MD)
    assert info.value.code == code
    # A backfill of older memories leaves the value out instead (the field is missing).
    lenient = index_fields(metadata, MD, strict=False)
    assert not any(k.startswith("meta_") for k in lenient) and PRESENCE_FIELD not in lenient


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
