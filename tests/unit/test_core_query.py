"""Exact FT.CREATE / FT.SEARCH argument lists, and hostile scope values never leaking into a query."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from betterdb_memory.core.dialect import Capabilities, capabilities_for
from betterdb_memory.core.escaping import MAX_TAG_BYTES, escape_tag, validate_tag_value
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import (
    ITEM_FIELDS,
    MATCH_ALL,
    SCORE_ALIAS,
    IndexLayout,
    IndexSpec,
    MemoryFilter,
    build_filter,
    create_index_args,
    filter_search_args,
    item_matches,
    knn_search_args,
)
from betterdb_memory.errors import ValidationError

REDISEARCH = capabilities_for("redisearch", (2, 10, 5))
VALKEY_1_0 = capabilities_for("valkey-search", (1, 0, 3))
VALKEY_1_2 = capabilities_for("valkey-search", (1, 2, 1))
VALKEY_1_3 = capabilities_for("valkey-search", (1, 3, 0))
ALL_CAPS = pytest.mark.parametrize(
    "caps", [REDISEARCH, VALKEY_1_0, VALKEY_1_2, VALKEY_1_3], ids=["redisearch", "vs1.0", "vs1.2", "vs1.3"]
)

BLOB = b"\x00\x00\x80?" * 4
RETURN_ARGS = ["RETURN", str(len(ITEM_FIELDS) + 1), "__dist", *ITEM_FIELDS]
FOREIGN = IndexLayout(keep=False, sensitivity=False, expires_at=False, dedup=False, case_sensitive=False)

# betterdb-agent-memory's schema (the fields BetterDB Monitor and the reference read),
# made exact (CASESENSITIVE), then this library's own fields.
SCHEMA_WITHOUT_TEXT = [
    "FT.CREATE", "s:mem:idx", "ON", "HASH", "PREFIX", "1", "s:mem:", "SCHEMA",
    "vector", "VECTOR", "HNSW", "12",
    "TYPE", "FLOAT32", "DIM", "384", "DISTANCE_METRIC", "COSINE", "M", "16", "EF_CONSTRUCTION", "200", "EF_RUNTIME", "10",
    "threadId", "TAG", "CASESENSITIVE", "agentId", "TAG", "CASESENSITIVE", "namespace", "TAG", "CASESENSITIVE",
    "tags", "TAG", "SEPARATOR", ",", "CASESENSITIVE", "source", "TAG", "CASESENSITIVE",
    "importance", "NUMERIC", "created_at", "NUMERIC", "SORTABLE", "last_accessed_at", "NUMERIC",
    "access_count", "NUMERIC", "keep", "NUMERIC", "SORTABLE", "sensitivity", "TAG", "CASESENSITIVE",
    "expires_at", "NUMERIC", "dedup", "TAG", "CASESENSITIVE",
    "valid_from", "NUMERIC", "state_from", "NUMERIC", "subject_key", "TAG", "CASESENSITIVE",
]  # fmt: skip


# -- FT.CREATE --------------------------------------------------------------------------------


def test_create_index_args_redisearch_adds_a_text_field() -> None:
    """RediSearch: the full schema plus ``content TEXT`` (the reference's schema has it too)."""
    args = create_index_args(IndexSpec("s:mem:idx", "s:mem:", 384), REDISEARCH)
    assert args == [*SCHEMA_WITHOUT_TEXT, "content", "TEXT"]


def test_create_index_args_valkey_search_1_0_has_no_text_field() -> None:
    assert create_index_args(IndexSpec("s:mem:idx", "s:mem:", 384), VALKEY_1_0) == SCHEMA_WITHOUT_TEXT


def test_create_index_args_valkey_search_1_2_has_a_text_field() -> None:
    args = create_index_args(IndexSpec("s:mem:idx", "s:mem:", 384), VALKEY_1_2)
    assert args[-2:] == ["content", "TEXT"]


def test_create_index_args_hnsw_parameters_and_initial_cap() -> None:
    args = create_index_args(
        IndexSpec("s:mem:idx", "s:mem:", 8, m=32, ef_construction=400, ef_runtime=50, initial_cap=1000),
        VALKEY_1_0,
    )
    i = args.index("HNSW")
    assert args[i + 1] == "14"
    assert args[i + 2 : i + 16] == [
        "TYPE", "FLOAT32", "DIM", "8", "DISTANCE_METRIC", "COSINE",
        "M", "32", "EF_CONSTRUCTION", "400", "EF_RUNTIME", "50", "INITIAL_CAP", "1000",
    ]  # fmt: skip


# -- FT.SEARCH with KNN -------------------------------------------------------------------------


def test_unscoped_knn_is_a_bare_star_query() -> None:
    """No filter: ``*=>[KNN ...]``, RETURN the score then the item fields, never the vector, no SORTBY."""
    args = knn_search_args("idx", BLOB, k=5, flt=MemoryFilter())
    assert args == [
        "FT.SEARCH", "idx", "*=>[KNN 5 @vector $vec AS __dist]", "PARAMS", "2", "vec", BLOB,
        *RETURN_ARGS, "LIMIT", "0", "5", "DIALECT", "2",
    ]  # fmt: skip
    assert "vector" not in args[8:] and "SORTBY" not in args


def test_scoped_knn_is_a_hybrid_query_of_raw_escaped_values() -> None:
    """Scope values go in raw (the reference's layout), escaped; every tag is its own clause (ALL)."""
    flt = MemoryFilter(scope=Scope.of(namespace="acme", agent_id="bot-1", thread_id="t 1"), tags=("a", "b"))
    args = knn_search_args("idx", BLOB, k=3, flt=flt)
    assert args[2] == (
        "(@threadId:{t\\ 1} @agentId:{bot\\-1} @namespace:{acme} @tags:{a} @tags:{b})"
        "=>[KNN 3 @vector $vec AS __dist]"
    )


def test_a_layout_s_ef_runtime_is_named_in_every_knn() -> None:
    """valkey-search's cluster fan-out walks a KNN that names no EF with EF = K (issue 29, stop 42):
    the index's EF_RUNTIME goes in the query when the layout carries one; an explicit one wins."""
    layout = IndexLayout(ef_runtime=200)
    scoped = MemoryFilter(scope=Scope.of(thread_id="t"))
    assert knn_search_args("idx", BLOB, k=4, flt=scoped, layout=layout)[2] == (
        "(@threadId:{t})=>[KNN 4 @vector $vec EF_RUNTIME 200 AS __dist]"
    )
    assert knn_search_args("idx", BLOB, k=4, flt=MemoryFilter(), layout=layout, ef_runtime=64)[2] == (
        "*=>[KNN 4 @vector $vec EF_RUNTIME 64 AS __dist]"
    )
    assert "EF_RUNTIME" not in knn_search_args("idx", BLOB, k=4, flt=scoped)[2]  # RediSearch: the index's own
    assert IndexLayout.from_fields(["vector"], case_sensitive=True, ef_runtime=32).ef_runtime == 32


def test_nocontent_when_return_fields_is_none() -> None:
    args = knn_search_args("idx", BLOB, k=2, flt=MemoryFilter(), return_fields=None)
    assert "NOCONTENT" in args and "RETURN" not in args


def test_custom_return_fields_put_the_score_first() -> None:
    args = knn_search_args("idx", BLOB, k=2, flt=MemoryFilter(), return_fields=("content",))
    i = args.index("RETURN")
    assert args[i : i + 4] == ["RETURN", "2", SCORE_ALIAS, "content"]


@ALL_CAPS
def test_every_engine_gets_dialect_2_one_param_and_no_vector_in_return(caps: Capabilities) -> None:
    args = knn_search_args("idx", BLOB, k=4, flt=MemoryFilter(scope=Scope.of(thread_id="t")))
    assert args[-2:] == ["DIALECT", "2"]
    assert args[3:7] == ["PARAMS", "2", "vec", BLOB]
    assert "vector" not in args[args.index("RETURN") :]


def test_negation_only_filter_is_anchored() -> None:
    """RediSearch matches nothing with a purely negative query: the match-all range anchors it."""
    flt = MemoryFilter(exclude_sensitivity=("pii",))
    assert knn_search_args("idx", BLOB, k=1, flt=flt)[2] == (
        f"({MATCH_ALL} -@sensitivity:{{pii}})=>[KNN 1 @vector $vec AS __dist]"
    )
    assert filter_search_args("idx", flt, limit=0)[2] == f"({MATCH_ALL} -@sensitivity:{{pii}})"


# -- FT.SEARCH without KNN ----------------------------------------------------------------------


def test_filter_search_counts_with_limit_0_0_and_sorts_by_field() -> None:
    flt = MemoryFilter(scope=Scope.of(thread_id="t1"))
    assert filter_search_args("idx", flt, limit=0) == [
        "FT.SEARCH", "idx", "(@threadId:{t1})", "NOCONTENT", "LIMIT", "0", "0", "DIALECT", "2",
    ]  # fmt: skip
    args = filter_search_args(
        "idx", flt, return_fields=("content",), sortby=("created_at", False), offset=20, limit=10
    )
    assert args == [
        "FT.SEARCH", "idx", "(@threadId:{t1})", "RETURN", "1", "content", "SORTBY", "created_at", "DESC",
        "LIMIT", "20", "10", "DIALECT", "2",
    ]  # fmt: skip


def test_unscoped_filter_search_is_the_match_all_range() -> None:
    """valkey-search rejects a bare ``*`` without KNN; every memory has created_at."""
    assert filter_search_args("idx", MemoryFilter(), limit=0)[2] == "@created_at:[-inf +inf]"


def test_filter_clauses_exact() -> None:
    flt = MemoryFilter(
        scope=Scope.of(agent_id="a"),
        tags=("x",),
        sources=("fact",),
        exclude_sources=("summary",),
        exclude_sensitivity=("pii", "sensitive"),
        max_created_at=1700000000123,
        max_importance=0.5,
        dedup="ab12",
        exclude_expired_at=1700000000999,
    )
    assert build_filter(flt) == (
        "@agentId:{a} @tags:{x} @source:{fact} -@source:{summary} -@sensitivity:{pii|sensitive} "
        "@dedup:{ab12} @created_at:[-inf 1700000000123] @importance:[-inf 0.5] "
        "-@expires_at:[-inf 1700000000999]"
    )


def test_created_at_range_bounds_are_inclusive_and_open_ended() -> None:
    """Consolidation pages oldest first from the last millisecond seen (``[t +inf]``)."""
    assert build_filter(MemoryFilter(min_created_at=5)) == "@created_at:[5 +inf]"
    assert build_filter(MemoryFilter(min_created_at=5, max_created_at=5)) == "@created_at:[5 5]"


def test_a_foreign_index_never_gets_a_clause_on_a_field_it_lacks() -> None:
    """valkey-search errors on an unknown field; those parts are left to ``item_matches``."""
    flt = MemoryFilter(exclude_sensitivity=("pii",), dedup="d", exclude_expired_at=5, tags=("x",))
    assert build_filter(flt, FOREIGN) == "@tags:{x}"


def test_a_keep_ceiling_is_a_numeric_range_only_on_an_index_with_keep() -> None:
    """Capacity's victim read below a keep-score ceiling: full precision, inclusive."""
    flt = MemoryFilter(scope=Scope.of(thread_id="t"), max_keep=2903.123456789012)
    assert build_filter(flt) == "@threadId:{t} @keep:[-inf 2903.123456789012]"
    assert build_filter(flt, FOREIGN) == "@threadId:{t}"  # the caller never sends it there
    args = filter_search_args("idx", flt, return_fields=("keep",), sortby=("keep", True), limit=3)
    assert args[2:] == [
        "(@threadId:{t} @keep:[-inf 2903.123456789012])",
        "RETURN", "1", "keep", "SORTBY", "keep", "ASC", "LIMIT", "0", "3", "DIALECT", "2",
    ]  # fmt: skip


def test_nan_bound_is_refused() -> None:
    with pytest.raises(ValidationError):
        build_filter(MemoryFilter(max_importance=float("nan")))


def test_empty_filter_is_empty_string() -> None:
    """No constraint: ``""`` (the caller sends a bare ``*`` or the match-all range)."""
    assert build_filter(MemoryFilter()) == ""


# -- the exact check ----------------------------------------------------------------------------


def test_item_matches_is_exact_where_a_foreign_index_is_not() -> None:
    """Case, tags ALL, sources, sensitivity and expiry are checked on the raw fields."""
    flt = MemoryFilter(scope=Scope.of(thread_id="T1"), tags=("a", "b"))
    assert item_matches({"threadId": "T1", "tags": "a,b,c"}, flt)
    assert not item_matches({"threadId": "t1", "tags": "a,b"}, flt)  # case-insensitive TAG match
    assert not item_matches({"threadId": "T1", "tags": "a"}, flt)  # ALL tags, not ANY
    assert not item_matches({"tags": "a,b"}, flt)  # no thread at all
    assert item_matches({"source": "x"}, MemoryFilter(exclude_sources=("fact",)))
    assert not item_matches({"source": "fact"}, MemoryFilter(exclude_sources=("fact",)))
    assert not item_matches({"sensitivity": "pii"}, MemoryFilter(exclude_sensitivity=("pii",)))
    assert item_matches({}, MemoryFilter(exclude_sensitivity=("pii",)))  # absent = "none"
    assert not item_matches({"expires_at": "100"}, MemoryFilter(exclude_expired_at=100))
    assert item_matches({"expires_at": "101"}, MemoryFilter(exclude_expired_at=100))


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


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("a,b", "validation.comma"),
        (" a", "validation.whitespace"),
        ("a\n", "validation.whitespace"),
        ("a\x00b", "validation.control"),
        ("a\x7fb", "validation.control"),
        ("\x01", "validation.control"),
    ],
)
def test_scope_rejects_commas_and_outer_whitespace(value: str, code: str) -> None:
    """A comma would split the TAG value in two (a filter on ``a`` would see ``a,b``); the
    engine trims outer whitespace, so such a value could never be found again."""
    with pytest.raises(ValidationError) as info:
        Scope.of(thread_id=value)
    assert info.value.code == code


def test_scope_of_none_is_any() -> None:
    """None stays None (no constraint)."""
    assert Scope.of() == Scope()
    assert Scope.of(thread_id="t").agent_id is None


# -- hostile values (property tests) ----------------------------------------------------------

TAG_SYNTAX = "{}|\\-@*()[]$:;'\",.<>~!%^&=+?/`#"
WHITESPACE = " \t\n\r\x0b\x0c\u00a0\u2003\u3000"
UNICODE = "aZ09_éßİ漢字🙂\u200b\u0301\u202e"


def _accepted(value: str) -> bool:
    """Values the validator lets through (the ones that reach a query)."""
    try:
        validate_tag_value(value, name="v")
    except ValidationError:
        return False
    return True


def _fit(value: str) -> str:
    """Cut to MAX_TAG_BYTES of UTF-8 without splitting a character."""
    return value.encode("utf-8")[:MAX_TAG_BYTES].decode("utf-8", errors="ignore")


# Known-nasty values, including ones exactly at the size limit.
NASTY = [
    "|", "}", "{", "\\", "a|b", "t1}|@x:{y", "\\}", "*", "-x", "$vec", "()", "[0 1]", "'\"", ":;",
    "a b", "A", "İ", "🙂", "\u202e", "\u200b", "x" * MAX_TAG_BYTES, "é" * (MAX_TAG_BYTES // 2),
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
    .map(lambda v: "".join(ch for ch in v if ord(ch) >= 0x20 and ord(ch) != 0x7F).replace(",", ";").strip())
    .filter(_accepted)
)
maybe = st.none() | hostile


def _unescaped(text: str) -> str:
    """``text`` with every backslash-escaped pair removed (what the parser sees as syntax)."""
    return re.sub(r"\\.", "", text, flags=re.DOTALL)


def _expected_filter(ns: str | None, agent: str | None, thread: str | None, tags: list[str]) -> str:
    parts = [
        f"@{f}:{{{escape_tag(v)}}}"
        for f, v in (("threadId", thread), ("agentId", agent), ("namespace", ns))
        if v is not None
    ]
    parts += [f"@tags:{{{escape_tag(t)}}}" for t in dict.fromkeys(tags)]
    return " ".join(parts)


FIELDS = {"namespace": "namespace", "agent_id": "agentId", "thread_id": "threadId"}
KNN_TAIL = "=>[KNN 10 @vector $vec AS __dist]"


@settings(max_examples=2000, deadline=None)
@given(field=st.sampled_from(sorted(FIELDS)), a=hostile, b=hostile)
def test_hostile_scope_values_reach_the_query_only_escaped(field: str, a: str, b: str) -> None:
    """A hostile scope value is only its escaped self; different values never share a filter."""
    scope_a, scope_b = Scope.of(**{field: a}), Scope.of(**{field: b})
    args = knn_search_args("idx", BLOB, k=10, flt=MemoryFilter(scope=scope_a))
    filt = build_filter(MemoryFilter(scope=scope_a))

    # 1. The scope part holds only the escaped value.
    assert filt == f"@{FIELDS[field]}:{{{escape_tag(a)}}}"
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

    # 4. A result holding B's raw value never passes A's exact check.
    if a != b:
        assert not item_matches({FIELDS[field]: b}, MemoryFilter(scope=scope_a))


@settings(max_examples=300, deadline=None)
@given(ns=maybe, agent=maybe, thread=maybe, tags=st.lists(hostile, max_size=3))
def test_hostile_scope_and_tags_build_exact_filters(
    ns: str | None, agent: str | None, thread: str | None, tags: list[str]
) -> None:
    """Any mix of scope fields and tags: exact clauses, and no user | { } $ left unescaped."""
    flt = MemoryFilter(
        scope=Scope.of(namespace=ns, agent_id=agent, thread_id=thread), tags=tuple(dict.fromkeys(tags))
    )
    args = knn_search_args("idx", BLOB, k=10, flt=flt)
    filt = build_filter(flt)
    assert filt == _expected_filter(ns, agent, thread, tags)
    assert args[2] == (f"({filt}){KNN_TAIL}" if filt else f"*{KNN_TAIL}")
    syntax = _unescaped(str(args[2]))
    clauses = sum(v is not None for v in (ns, agent, thread)) + len(dict.fromkeys(tags))
    assert syntax.count("{") == syntax.count("}") == clauses
    assert syntax.count("|") == 0
    assert syntax.count("$") == 1


@settings(max_examples=300, deadline=None)
@given(value=hostile)
def test_escape_tag_leaves_no_special_character_unescaped(value: str) -> None:
    """Every ASCII non-alphanumeric character gets a backslash (non-ASCII ones never: a backslash
    there makes RediSearch match nothing); unescaping gives the value back."""
    escaped = escape_tag(value)
    i = 0
    while i < len(escaped):
        if escaped[i] == "\\":
            i += 2
            continue
        assert escaped[i].isalnum() or ord(escaped[i]) > 0x7F, (escaped, i)
        i += 1
    assert i == len(escaped)  # no dangling backslash
    assert re.sub(r"\\(.)", r"\1", escaped, flags=re.DOTALL) == value
    assert not {ch for ch in _unescaped(escaped) if ord(ch) < 0x80} & set(TAG_SYNTAX + WHITESPACE)


# -- time (issue 26): one appended clause, checked in the client too ---------------------


def test_time_fields_add_one_clause_after_the_others() -> None:
    from betterdb_memory.core.validity import history_valid_at, valid_at, window

    scope = Scope(thread_id="t")
    assert build_filter(MemoryFilter(scope=scope, valid_since=10, valid_before=20)) == (
        f"@threadId:{{t}} {window(10, 20)}"
    )
    assert build_filter(MemoryFilter(scope=scope, as_of=15)) == f"@threadId:{{t}} {valid_at(15)}"
    assert build_filter(MemoryFilter(scope=scope, as_of=15, history=True)) == (
        f"@threadId:{{t}} {history_valid_at(15)}"
    )
    # an index without valid_from (the reference's): left to the client's check
    assert build_filter(MemoryFilter(scope=scope, as_of=15), IndexLayout(valid_from=False)) == "@threadId:{t}"
    # a filter of the clause alone starts with the match-all (a negation needs something to negate from)
    args = filter_search_args("i", MemoryFilter(valid_since=10))
    assert args[2] == f"({MATCH_ALL} {window(10, None)})"


def test_with_times_checks_before_anything_is_sent() -> None:
    from betterdb_memory.core.query import with_times

    base = MemoryFilter()
    assert with_times(base, as_of=None, since=None, until=None) is base
    flt = with_times(base, as_of="2024-05-01", since=0, until="2025")
    assert (flt.as_of, flt.valid_since, flt.valid_before) == (1_714_521_600_000, 0, 1_735_689_600_000)
    for kwargs, code in [
        ({"since": "2025", "until": "2024"}, "validation.time_window"),
        ({"as_of": "yesterday"}, "validation.time_format"),
        ({"until": 10**15}, "validation.range"),
        ({"since": 1.5}, "validation.type"),
    ]:
        with pytest.raises(ValidationError) as err:
            with_times(base, **{"as_of": None, "since": None, "until": None, **kwargs})
        assert err.value.code == code


def test_item_matches_checks_the_window_and_the_instant() -> None:
    doc = {"threadId": "t", "created_at": "100", "valid_from": "50"}
    assert item_matches(doc, MemoryFilter(valid_since=50, valid_before=51))
    assert not item_matches(doc, MemoryFilter(valid_since=51))
    assert not item_matches(doc, MemoryFilter(as_of=49))
    reference = {"threadId": "t", "created_at": "100"}  # no valid_from: its created_at
    assert item_matches(reference, MemoryFilter(as_of=100)) and not item_matches(
        reference, MemoryFilter(as_of=99)
    )
    past = {**doc, "valid_until": "70"}
    assert item_matches(past, MemoryFilter(as_of=69)) and not item_matches(past, MemoryFilter(as_of=70))
