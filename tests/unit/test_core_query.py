"""Exact FT.CREATE / FT.SEARCH argument lists, and hostile scope values never leaking into a query."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.dialect import Capabilities, capabilities_for
from betterdb_memory.errors import ValidationError
from betterdb_memory.escaping import MAX_TAG_BYTES, escape_tag, tag_token
from betterdb_memory.keys import Scope
from betterdb_memory.query import (
    RETURN_FIELDS,
    SCORE_ALIAS,
    IndexSpec,
    MemoryFilter,
    build_filter,
    create_index_args,
    knn_search_args,
)

REDISEARCH = capabilities_for("redisearch", (2, 10, 5))
VALKEY_1_0 = capabilities_for("valkey-search", (1, 0, 3))
VALKEY_1_2 = capabilities_for("valkey-search", (1, 2, 1))
VALKEY_1_3 = capabilities_for("valkey-search", (1, 3, 0))
ALL_CAPS = pytest.mark.parametrize(
    "caps", [REDISEARCH, VALKEY_1_0, VALKEY_1_2, VALKEY_1_3], ids=["redisearch", "vs1.0", "vs1.2", "vs1.3"]
)

BLOB = b"\x00\x00\x80?" * 4
RETURN_ARGS = ["RETURN", "16", "__dist", *RETURN_FIELDS]

# Tokens (BLAKE2b-128 hex) of the scope values used below; pinned because stored data
# depends on them: a change here orphans every existing memory.
ACME, BOT, T1 = (
    "bded55e7ce1c08f27738f8c77ec971e3",
    "eee5bc016c6053aa3683479a693bd879",
    "391bbc3f95fd0429aba4ead7026fc4c0",
)

SCHEMA_WITHOUT_TEXT = [
    "FT.CREATE", "s:mem:idx", "ON", "HASH", "PREFIX", "1", "s:mem:", "SCHEMA",
    "embedding", "VECTOR", "HNSW", "12",
    "TYPE", "FLOAT32", "DIM", "384", "DISTANCE_METRIC", "COSINE", "M", "16", "EF_CONSTRUCTION", "200", "EF_RUNTIME", "10",
    "thread_id", "TAG", "agent_id", "TAG", "namespace", "TAG", "tags", "TAG", "source", "TAG",
    "sensitivity", "TAG", "kind", "TAG",
    "importance", "NUMERIC", "created_at", "NUMERIC", "expires_at", "NUMERIC",
]  # fmt: skip


# -- FT.CREATE --------------------------------------------------------------------------------


def test_create_index_args_redisearch_adds_a_text_field() -> None:
    """RediSearch: the full schema plus ``content TEXT``."""
    args = create_index_args(IndexSpec("s:mem:idx", "s:mem:", 384), REDISEARCH)
    assert args == [*SCHEMA_WITHOUT_TEXT, "content", "TEXT"]


def test_create_index_args_valkey_search_1_0_has_no_text_field() -> None:
    """valkey-search 1.0 has no TEXT fields: the schema stops at the NUMERIC fields."""
    assert create_index_args(IndexSpec("s:mem:idx", "s:mem:", 384), VALKEY_1_0) == SCHEMA_WITHOUT_TEXT


def test_create_index_args_valkey_search_1_2_has_a_text_field() -> None:
    """valkey-search 1.2 brought TEXT fields."""
    assert create_index_args(IndexSpec("s:mem:idx", "s:mem:", 384), VALKEY_1_2)[-2:] == ["content", "TEXT"]


def test_create_index_args_hnsw_parameters_and_initial_cap() -> None:
    """HNSW settings are passed through; INITIAL_CAP only when set; the count covers every pair."""
    spec = IndexSpec("i", "p:", 8, m=32, ef_construction=400, ef_runtime=64, initial_cap=5000)
    args = create_index_args(spec, VALKEY_1_0)
    start = args.index("HNSW")
    assert args[start : start + 18] == [
        "HNSW", "14",
        "TYPE", "FLOAT32", "DIM", "8", "DISTANCE_METRIC", "COSINE",
        "M", "32", "EF_CONSTRUCTION", "400", "EF_RUNTIME", "64", "INITIAL_CAP", "5000",
        "thread_id", "TAG",
    ]  # fmt: skip


# -- FT.SEARCH --------------------------------------------------------------------------------


def test_unscoped_knn_is_a_bare_star_query_on_valkey_search_1_0() -> None:
    """No filter: ``*=>[KNN ...]``, only the vec param, no SORTBY, RETURN, LIMIT, DIALECT 2."""
    args = knn_search_args("s:mem:idx", BLOB, k=5, flt=MemoryFilter(), caps=VALKEY_1_0)
    assert args == [
        "FT.SEARCH", "s:mem:idx", "*=>[KNN 5 @embedding $vec AS __dist]",
        "PARAMS", "2", "vec", BLOB,
        *RETURN_ARGS,
        "LIMIT", "0", "5",
        "DIALECT", "2",
    ]  # fmt: skip


def test_unscoped_knn_sorts_by_score_on_redisearch() -> None:
    """RediSearch returns KNN hits in doc-id order: SORTBY the score alias there."""
    args = knn_search_args("s:mem:idx", BLOB, k=5, flt=MemoryFilter(), caps=REDISEARCH)
    assert args == [
        "FT.SEARCH", "s:mem:idx", "*=>[KNN 5 @embedding $vec AS __dist]",
        "PARAMS", "2", "vec", BLOB,
        "SORTBY", "__dist",
        *RETURN_ARGS,
        "LIMIT", "0", "5",
        "DIALECT", "2",
    ]  # fmt: skip


def test_scoped_knn_is_a_hybrid_query_of_tokens() -> None:
    """A scope becomes ``(@namespace:{tok} @agent_id:{tok} @thread_id:{tok})=>[KNN ...]``."""
    scope = Scope.of(namespace="acme", agent_id="bot", thread_id="t1")
    args = knn_search_args("idx", BLOB, k=3, flt=MemoryFilter(scope=scope), caps=VALKEY_1_2, ef_runtime=50)
    assert args == [
        "FT.SEARCH", "idx",
        f"(@namespace:{{{ACME}}} @agent_id:{{{BOT}}} @thread_id:{{{T1}}})=>[KNN 3 @embedding $vec EF_RUNTIME 50 AS __dist]",
        "PARAMS", "2", "vec", BLOB,
        *RETURN_ARGS,
        "LIMIT", "0", "3",
        "DIALECT", "2",
    ]  # fmt: skip


def test_nocontent_when_return_fields_is_none() -> None:
    """``return_fields=None``: NOCONTENT and no RETURN; offset/limit page the KNN results."""
    args = knn_search_args(
        "idx", BLOB, k=10, flt=MemoryFilter(scope=Scope.of(thread_id="t1")), caps=VALKEY_1_0,
        return_fields=None, offset=4, limit=2,
    )  # fmt: skip
    assert args == [
        "FT.SEARCH", "idx", f"(@thread_id:{{{T1}}})=>[KNN 10 @embedding $vec AS __dist]",
        "PARAMS", "2", "vec", BLOB,
        "NOCONTENT",
        "LIMIT", "4", "2",
        "DIALECT", "2",
    ]  # fmt: skip


def test_custom_return_fields_put_the_score_first() -> None:
    """RETURN counts the score alias plus the fields asked for."""
    args = knn_search_args("idx", BLOB, k=2, flt=MemoryFilter(), caps=VALKEY_1_0, return_fields=("content",))
    assert args[7:11] == ["RETURN", "2", SCORE_ALIAS, "content"]


@ALL_CAPS
def test_every_engine_gets_dialect_2_one_param_and_no_vector_in_return(caps: Capabilities) -> None:
    """DIALECT 2 always; PARAMS only ``vec``; SORTBY only with sortby_knn_score; the vector never returned."""
    args = knn_search_args("idx", BLOB, k=7, flt=MemoryFilter(scope=Scope.of(agent_id="bot")), caps=caps)
    assert args[-2:] == ["DIALECT", "2"]
    assert args[3:7] == ["PARAMS", "2", "vec", BLOB]
    assert args.count("PARAMS") == 1
    assert str(args[2]).count("$") == 1
    assert ("SORTBY" in args) is caps.sortby_knn_score
    assert "embedding" not in args[args.index("RETURN") :]
    assert "embedding" not in RETURN_FIELDS


def test_sortby_only_on_engines_that_sort_by_the_knn_score() -> None:
    """valkey-search < 1.3 rejects or lacks SORTBY on the score alias; RediSearch and 1.3+ get it."""
    with_sortby = [
        c.version_string
        for c in (REDISEARCH, VALKEY_1_0, VALKEY_1_2, VALKEY_1_3)
        if "SORTBY" in knn_search_args("i", BLOB, k=1, flt=MemoryFilter(), caps=c)
    ]
    assert with_sortby == ["2.10.5", "1.3.0"]


# -- filters ----------------------------------------------------------------------------------


def test_filter_clauses_exact() -> None:
    """Tags tokenised and ORed; kinds escaped; exclusions negated; ranges exclusive at the top."""
    flt = MemoryFilter(
        tags=("acme", "bot"),
        kinds=("memory", "fact"),
        exclude_kinds=("summary",),
        exclude_sensitivity=("pii", "sensitive"),
        min_created_at=1.5,
        max_created_at=2.5,
        max_importance=0.5,
    )
    assert build_filter(flt) == (
        f"@tags:{{{ACME}|{BOT}}} @kind:{{memory|fact}} -@kind:{{summary}} "
        "-@sensitivity:{pii|sensitive} @created_at:[1.5 (2.5] @importance:[-inf 0.5]"
    )


def test_open_ended_created_range() -> None:
    """Only a lower or only an upper bound: the other side is infinite."""
    assert build_filter(MemoryFilter(min_created_at=10)) == "@created_at:[10.0 +inf]"
    assert build_filter(MemoryFilter(max_created_at=10)) == "@created_at:[-inf (10.0]"


def test_nan_bound_is_refused() -> None:
    """A NaN bound cannot be written as a range."""
    with pytest.raises(ValidationError) as info:
        build_filter(MemoryFilter(min_created_at=float("nan")))
    assert info.value.code == "validation.nan"


def test_internal_kind_values_are_still_escaped() -> None:
    """Kinds are not tokenised but go through the one escaper."""
    assert build_filter(MemoryFilter(kinds=("a|b}", "x y"))) == r"@kind:{a\|b\}|x\ y}"


def test_empty_filter_is_empty_string() -> None:
    """No constraint: ``""`` (the caller sends a bare ``*``)."""
    assert build_filter(MemoryFilter()) == ""


# -- Scope.of validation ----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["", " ", "\t\n", "\u3000\u00a0"])
@pytest.mark.parametrize("field", ["namespace", "agent_id", "thread_id"])
def test_scope_rejects_empty_and_whitespace(field: str, value: str) -> None:
    """Empty/whitespace would silently widen a scope: ``validation.empty``, naming the argument."""
    with pytest.raises(ValidationError) as info:
        Scope.of(**{field: value})
    assert info.value.code == "validation.empty"
    assert info.value.details["argument"] == field


@pytest.mark.parametrize("value", [5, 1.5, True, b"bytes", ["a"], object()])
@pytest.mark.parametrize("field", ["namespace", "agent_id", "thread_id"])
def test_scope_rejects_non_strings(field: str, value: object) -> None:
    """Only str: ``validation.type``."""
    with pytest.raises(ValidationError) as info:
        Scope.of(**{field: value})
    assert info.value.code == "validation.type"
    assert info.value.details["argument"] == field


def test_scope_rejects_too_long_and_lone_surrogates() -> None:
    """Over MAX_TAG_BYTES (in UTF-8 bytes, not characters) or not encodable: refused."""
    Scope.of(thread_id="é" * (MAX_TAG_BYTES // 2))  # exactly the limit
    with pytest.raises(ValidationError) as info:
        Scope.of(thread_id="é" * (MAX_TAG_BYTES // 2) + "x")
    assert info.value.code == "validation.too_long"
    with pytest.raises(ValidationError) as info:
        Scope.of(namespace="a\ud800b")
    assert info.value.code == "validation.encoding"


def test_scope_of_none_is_any() -> None:
    """None stays None (no constraint)."""
    assert Scope.of() == Scope()
    assert Scope.of(thread_id="t").agent_id is None


# -- hostile values (property tests) ----------------------------------------------------------

TAG_SYNTAX = "{}|\\-@*()[]$:;'\",.<>~!%^&=+?/`#"
WHITESPACE = " \t\n\r\x0b\x0c\u00a0\u2003\u3000"
UNICODE = "aZ09_éßİ漢字🙂\u200b\u0301\u202e"


def _fit(value: str) -> str:
    """Cut to MAX_TAG_BYTES of UTF-8 without splitting a character."""
    return value.encode("utf-8")[:MAX_TAG_BYTES].decode("utf-8", errors="ignore")


# Known-nasty values, including ones exactly at the size limit.
NASTY = [
    "|", "}", "{", "\\", "a|b", "t1}|@x:{y", "\\}", "*", "-x", "$vec", "()", "[0 1]", "'\"", ":;",
    " a ", "A", "İ", "🙂", "\u202e", "\u200b", "x" * MAX_TAG_BYTES, "é" * (MAX_TAG_BYTES // 2),
    "|" * MAX_TAG_BYTES, "\\" * MAX_TAG_BYTES,
]  # fmt: skip
hostile = (
    st.one_of(
        st.sampled_from(NASTY),
        st.text(alphabet=TAG_SYNTAX + WHITESPACE + UNICODE, min_size=1, max_size=24),
        st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=24),
        st.builds(
            lambda unit, n: unit * n,
            st.sampled_from(["|", "}", "\\", "{x}", "a b", "é", "🙂", "t1|t2"]),
            st.integers(1, MAX_TAG_BYTES),
        ),
    )
    .map(_fit)
    .filter(lambda v: bool(v.strip()))
)
maybe = st.none() | hostile


def _unescaped(text: str) -> str:
    """``text`` with every backslash-escaped pair removed (what the parser sees as syntax)."""
    return re.sub(r"\\.", "", text, flags=re.DOTALL)


def _expected_filter(
    ns: str | None, agent: str | None, thread: str | None, tags: list[str], kinds: list[str]
) -> str:
    parts = [
        f"@{f}:{{{tag_token(v)}}}"
        for f, v in (("namespace", ns), ("agent_id", agent), ("thread_id", thread))
        if v
    ]
    if tags:
        parts.append("@tags:{" + "|".join(tag_token(t) for t in tags) + "}")
    if kinds:
        parts.append("@kind:{" + "|".join(escape_tag(k) for k in kinds) + "}")
    return " ".join(parts)


FIELDS = ("namespace", "agent_id", "thread_id")
KNN_TAIL = "=>[KNN 10 @embedding $vec AS __dist]"


@settings(max_examples=2000, deadline=None)
@given(field=st.sampled_from(FIELDS), a=hostile, b=hostile)
def test_hostile_scope_values_reach_the_query_only_as_escaped_tokens(field: str, a: str, b: str) -> None:
    """A hostile scope value is only its escaped hex token; different values never share a filter."""
    scope_a, scope_b = Scope.of(**{field: a}), Scope.of(**{field: b})
    args = knn_search_args("idx", BLOB, k=10, flt=MemoryFilter(scope=scope_a), caps=VALKEY_1_0)
    filt = build_filter(MemoryFilter(scope=scope_a))

    # 1. The scope part holds only the tokenised + escaped form (a token is hex: escaping keeps it).
    token = tag_token(a)
    assert re.fullmatch(r"[0-9a-f]{32}", token) and escape_tag(token) == token
    assert filt == f"@{field}:{{{token}}}"
    assert args[2] == f"({filt}){KNN_TAIL}"
    assert args[3:7] == ["PARAMS", "2", "vec", BLOB]

    # 2. Nothing from the value becomes syntax: one {...}, no |, only $vec.
    syntax = _unescaped(str(args[2]))
    assert syntax.count("{") == syntax.count("}") == 1
    assert "|" not in syntax
    assert syntax.count("$") == 1

    # 3. Two different values never produce the same filter or scope tag.
    filt_b = build_filter(MemoryFilter(scope=scope_b))
    assert (filt == filt_b) is (a == b)
    assert (scope_a.tag == scope_b.tag) is (a == b)

    # 4. Scope A's filter never mentions scope B's token.
    if a != b:
        assert tag_token(b) not in filt and tag_token(b) not in str(args[2])


@settings(max_examples=300, deadline=None)
@given(
    ns=maybe,
    agent=maybe,
    thread=maybe,
    tags=st.lists(hostile, max_size=3),
    kinds=st.lists(hostile, max_size=2),
)
def test_hostile_scope_tags_and_kinds_build_exact_filters(
    ns: str | None, agent: str | None, thread: str | None, tags: list[str], kinds: list[str]
) -> None:
    """Any mix of scope fields, tags and kinds: exact clauses, and no user | { } $ left unescaped."""
    flt = MemoryFilter(
        scope=Scope.of(namespace=ns, agent_id=agent, thread_id=thread), tags=tuple(tags), kinds=tuple(kinds)
    )
    args = knn_search_args("idx", BLOB, k=10, flt=flt, caps=VALKEY_1_0)
    filt = build_filter(flt)
    assert filt == _expected_filter(ns, agent, thread, tags, kinds)
    assert args[2] == (f"({filt}){KNN_TAIL}" if filt else f"*{KNN_TAIL}")
    syntax = _unescaped(str(args[2]))
    clauses = sum(v is not None for v in (ns, agent, thread)) + bool(tags) + bool(kinds)
    assert syntax.count("{") == syntax.count("}") == clauses
    assert syntax.count("|") == max(0, len(tags) - 1) + max(0, len(kinds) - 1)
    assert syntax.count("$") == 1


@settings(max_examples=300, deadline=None)
@given(value=hostile)
def test_escape_tag_leaves_no_special_character_unescaped(value: str) -> None:
    """Every non-alphanumeric character gets a backslash; unescaping gives the value back."""
    escaped = escape_tag(value)
    i = 0
    while i < len(escaped):
        if escaped[i] == "\\":
            i += 2
            continue
        assert escaped[i].isalnum() or escaped[i] == "_", (escaped, i)
        i += 1
    assert i == len(escaped)  # no dangling backslash
    assert re.sub(r"\\(.)", r"\1", escaped, flags=re.DOTALL) == value
    assert not set(_unescaped(escaped)) & set(TAG_SYNTAX + WHITESPACE)
