"""FT.CREATE and FT.SEARCH argument lists, as pure functions of their inputs.

The index is betterdb-agent-memory's (``<name>:mem:idx`` over ``<name>:mem:``, vector
field ``vector``, TAG fields ``threadId`` / ``agentId`` / ``namespace`` / ``tags`` /
``source`` holding raw values, times in milliseconds), so the reference library and
BetterDB Monitor query the same documents. An index this library creates adds
``CASESENSITIVE`` to its TAG fields and a few fields of its own (``keep``,
``sensitivity``, ``expires_at``, ``dedup``); an index created by another library may
lack them, which ``IndexLayout`` records so queries never name a missing field (an
error on valkey-search, an empty result on RediSearch: dialect point 8).

Every query carries ``DIALECT 2`` and only the PARAMS it uses; filters are inlined
(no ``$params`` inside filters on valkey-search) with values through
``escaping.escape_tag``. Query results are checked against the raw values again
(``item_matches``) before they are used, so a case-insensitive index never widens a scope.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .codec import as_text, split_tags
from .dialect import Capabilities
from .escaping import escape_tag, format_number
from .keys import Scope
from .times import check_window, optional_ms
from .validity import in_time, time_clause
from .where_clause import WhereClause

__all__ = [
    "CHECK_FIELDS",
    "ITEM_FIELDS",
    "MATCH_ALL",
    "SCOPE_FIELDS",
    "SCORE_ALIAS",
    "VECTOR_FIELD",
    "IndexLayout",
    "IndexSpec",
    "MemoryFilter",
    "build_filter",
    "create_index_args",
    "filter_search_args",
    "item_matches",
    "knn_search_args",
    "with_times",
]

SCORE_ALIAS = "__dist"
VECTOR_FIELD = "vector"

# valkey-search rejects a bare ``*`` outside KNN; every memory has ``created_at``, so
# this range matches all documents on both engines (the reference's match-all).
MATCH_ALL = "@created_at:[-inf +inf]"

# HASH field of each scope dimension (the reference's names).
SCOPE_FIELDS: Mapping[str, str] = {"thread_id": "threadId", "agent_id": "agentId", "namespace": "namespace"}

# Fields a memory is read with: never the vector.
ITEM_FIELDS: tuple[str, ...] = (
    "content",
    "importance",
    "tags",
    "created_at",
    "last_accessed_at",
    "access_count",
    "source",
    "threadId",
    "agentId",
    "namespace",
    "subject",
    "date",
    "sensitivity",
    "kind",
    "metadata",
    "expires_at",
    "valid_from",
)

# What a filter's exactness check reads (scope, tags, source, sensitivity, expiry).
CHECK_FIELDS: tuple[str, ...] = (
    "threadId",
    "agentId",
    "namespace",
    "tags",
    "source",
    "sensitivity",
    "expires_at",
    "created_at",
    "valid_from",
)


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """Shape of the memory index (HNSW parameters are settable)."""

    index: str
    prefix: str
    dimensions: int
    m: int = 16
    ef_construction: int = 200
    ef_runtime: int = 10
    initial_cap: int | None = None
    # SCHEMA arguments of the store's declared metadata fields (``filter_fields.schema_args``);
    # empty when the store declares none.
    extra_schema: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """Which optional fields the index in use has (all of them when this library made it)."""

    keep: bool = True  # NUMERIC SORTABLE keep-score: O(log n) capacity victims
    sensitivity: bool = True
    expires_at: bool = True
    dedup: bool = True
    case_sensitive: bool = True  # TAG fields CASESENSITIVE: counts need no client-side check
    text: bool = True  # ``content`` is a TEXT field (full-text candidates for hybrid recall)
    # Time-aware fields (issue 26): event time, the subject digest, a state's start.
    valid_from: bool = True
    subject_key: bool = True
    state_from: bool = True
    # Every field the index holds (``meta_*`` and ``present`` of declared metadata among
    # them); empty means "not read from FT.INFO" (the index this process creates).
    fields: frozenset[str] = frozenset()
    # The EF every KNN names in its query (None: the engine applies the index's own). A
    # valkey-search 1.2.1 cluster walks a KNN without it with EF = K, not the index's
    # EF_RUNTIME, and misses nearest memories (``Capabilities.knn_names_ef``).
    ef_runtime: int | None = None

    @classmethod
    def from_fields(
        cls, fields: Sequence[str], *, case_sensitive: bool, ef_runtime: int | None = None
    ) -> IndexLayout:
        names = frozenset(fields)
        return cls(
            text="content" in names,
            keep="keep" in names,
            sensitivity="sensitivity" in names,
            expires_at="expires_at" in names,
            dedup="dedup" in names,
            case_sensitive=case_sensitive,
            valid_from="valid_from" in names,
            subject_key="subject_key" in names,
            state_from="state_from" in names,
            fields=names,
            ef_runtime=ef_runtime,
        )

    def has(self, fieldname: str) -> bool:
        """Whether the index holds ``fieldname`` (always True for an index this process made)."""
        return not self.fields or fieldname in self.fields


def create_index_args(spec: IndexSpec, caps: Capabilities) -> list[str]:
    """The FT.CREATE argument list: the reference's schema, exact TAGs, and our extra fields."""
    vector_params = [
        "TYPE", "FLOAT32",
        "DIM", str(spec.dimensions),
        "DISTANCE_METRIC", "COSINE",
        "M", str(spec.m),
        "EF_CONSTRUCTION", str(spec.ef_construction),
        "EF_RUNTIME", str(spec.ef_runtime),
    ]  # fmt: skip
    if spec.initial_cap is not None:
        vector_params += ["INITIAL_CAP", str(spec.initial_cap)]
    exact = ["CASESENSITIVE"]
    schema = [
        VECTOR_FIELD, "VECTOR", "HNSW", str(len(vector_params)), *vector_params,
        "threadId", "TAG", *exact,
        "agentId", "TAG", *exact,
        "namespace", "TAG", *exact,
        "tags", "TAG", "SEPARATOR", ",", *exact,
        "source", "TAG", *exact,
        "importance", "NUMERIC",
        "created_at", "NUMERIC", "SORTABLE",
        "last_accessed_at", "NUMERIC",
        "access_count", "NUMERIC",
        "keep", "NUMERIC", "SORTABLE",
        "sensitivity", "TAG", *exact,
        "expires_at", "NUMERIC",
        "dedup", "TAG", *exact,
        # Time-aware memory (issue 26): written only by this library, absent on the
        # reference's documents (a clause on them falls back to ``created_at``).
        "valid_from", "NUMERIC",
        "state_from", "NUMERIC",
        "subject_key", "TAG", *exact,
        *spec.extra_schema,
    ]  # fmt: skip
    if caps.text_fields:
        schema += ["content", "TEXT"]
    return ["FT.CREATE", spec.index, "ON", "HASH", "PREFIX", "1", spec.prefix, "SCHEMA", *schema]


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a query may see. Every user value is escaped on its way in.

    ``scope`` fields set to None mean "any"; ``tags`` means ALL of them (the reference's
    meaning); ``sources`` any of them; times are epoch milliseconds.
    """

    scope: Scope = field(default_factory=Scope)
    tags: tuple[str, ...] = ()
    exclude_sensitivity: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    exclude_sources: tuple[str, ...] = ()
    min_created_at: int | None = None  # inclusive
    max_created_at: int | None = None  # inclusive
    max_importance: float | None = None  # inclusive
    dedup: str | None = None
    exclude_expired_at: int | None = None  # leave out memories whose expires_at <= this
    # Only memories whose keep-score is at most this (inclusive); sent only to an index
    # with the keep field (capacity's victim search), never checked in the client.
    max_keep: float | None = None
    # A ``where=`` filter (``core.where``), one more AND clause; always re-checked in the client.
    where: WhereClause | None = None
    # Time (issue 26, ``core.validity``): ``valid_from`` in ``[valid_since, valid_before)``,
    # and valid at ``as_of``; ``history``: the filter is for the history index.
    valid_since: int | None = None
    valid_before: int | None = None
    as_of: int | None = None
    history: bool = False

    @property
    def has_time(self) -> bool:
        return self.valid_since is not None or self.valid_before is not None or self.as_of is not None

    # Engine clauses ANDed as written (a time window's ``core.validity`` clause): pure
    # NUMERIC ranges the engine answers exactly, so ``item_matches`` has nothing to check.
    clauses: tuple[str, ...] = ()

    @property
    def is_unscoped(self) -> bool:
        return self.scope.is_empty and not self.tags


def with_times(flt: MemoryFilter, *, as_of: object, since: object, until: object) -> MemoryFilter:
    """``flt`` narrowed to a time window and an instant, checked (``core.times``) before any I/O.

    Raises:
        ValidationError: an unparseable or out-of-range time, or ``since`` after ``until``.
    """
    lo, hi = check_window(since, until)
    at = optional_ms(as_of, name="as_of")
    if lo is None and hi is None and at is None:
        return flt
    return dataclasses.replace(flt, valid_since=lo, valid_before=hi, as_of=at)


def _tag(fieldname: str, values: Sequence[str]) -> str:
    return f"@{fieldname}:{{{'|'.join(escape_tag(v) for v in values)}}}"


def build_filter(flt: MemoryFilter, layout: IndexLayout = IndexLayout()) -> str:
    """The filter clauses of ``flt`` joined with spaces (AND), or ``""`` for none.

    Parts the index cannot express (a field it lacks) are left to ``item_matches``.
    """
    parts: list[str] = []
    for attr, fieldname in SCOPE_FIELDS.items():
        value = getattr(flt.scope, attr)
        if value is not None:
            parts.append(_tag(fieldname, [value]))
    parts.extend(_tag("tags", [t]) for t in flt.tags)
    if flt.sources:
        parts.append(_tag("source", flt.sources))
    if flt.exclude_sources:
        parts.append("-" + _tag("source", flt.exclude_sources))
    if flt.exclude_sensitivity and layout.sensitivity:
        parts.append("-" + _tag("sensitivity", flt.exclude_sensitivity))
    if flt.dedup is not None and layout.dedup:
        parts.append(_tag("dedup", [flt.dedup]))
    if flt.min_created_at is not None or flt.max_created_at is not None:
        lo = "-inf" if flt.min_created_at is None else str(int(flt.min_created_at))
        hi = "+inf" if flt.max_created_at is None else str(int(flt.max_created_at))
        parts.append(f"@created_at:[{lo} {hi}]")
    if flt.max_importance is not None:
        parts.append(f"@importance:[-inf {format_number(flt.max_importance)}]")
    if flt.max_keep is not None and layout.keep:
        parts.append(f"@keep:[-inf {format_number(flt.max_keep)}]")
    if flt.exclude_expired_at is not None and layout.expires_at:
        parts.append(f"-@expires_at:[-inf {int(flt.exclude_expired_at)}]")
    if flt.has_time and layout.valid_from:
        parts.append(time_clause(flt.valid_since, flt.valid_before, flt.as_of, history=flt.history))
    if flt.where is not None:
        # A positive clause goes first: a query starting with a negation gets MATCH_ALL in
        # front (``_filter_query``), a range over every document the engine then intersects.
        parts.insert(0 if not flt.where.text.startswith("-") else len(parts), flt.where.text)
    parts.extend(flt.clauses)
    return " ".join(parts)


def _filter_query(flt: MemoryFilter, layout: IndexLayout) -> str:
    clauses = build_filter(flt, layout)
    if not clauses:
        return MATCH_ALL
    if clauses.startswith("-"):
        clauses = f"{MATCH_ALL} {clauses}"
    return f"({clauses})"


def knn_search_args(
    index: str,
    vector_blob: bytes,
    *,
    k: int,
    flt: MemoryFilter,
    layout: IndexLayout = IndexLayout(),
    return_fields: Sequence[str] | None = ITEM_FIELDS,
    ef_runtime: int | None = None,
) -> list[str | bytes]:
    """FT.SEARCH arguments for a KNN query with an optional hybrid filter.

    Hits are sorted client-side (RediSearch 2.10 returns KNN hits in document order
    without SORTBY, and SORTBY on the score alias fails on valkey-search < 1.3).
    ``return_fields=None`` sends NOCONTENT.
    """
    knn = f"KNN {k} @{VECTOR_FIELD} $vec"
    ef_runtime = layout.ef_runtime if ef_runtime is None else ef_runtime
    if ef_runtime is not None:
        knn += f" EF_RUNTIME {ef_runtime}"
    knn += f" AS {SCORE_ALIAS}"
    clauses = build_filter(flt, layout)
    if clauses.startswith("-"):
        clauses = f"{MATCH_ALL} {clauses}"
    query = f"({clauses})=>[{knn}]" if clauses else f"*=>[{knn}]"
    args: list[str | bytes] = ["FT.SEARCH", index, query, "PARAMS", "2", "vec", vector_blob]
    if return_fields is None:
        args.append("NOCONTENT")
    else:
        fields = [SCORE_ALIAS, *return_fields]
        args += ["RETURN", str(len(fields)), *fields]
    args += ["LIMIT", "0", str(k), "DIALECT", "2"]
    return args


def filter_search_args(
    index: str,
    flt: MemoryFilter,
    *,
    layout: IndexLayout = IndexLayout(),
    return_fields: Sequence[str] | None = ITEM_FIELDS,
    sortby: tuple[str, bool] | None = None,
    offset: int = 0,
    limit: int = 10,
) -> list[str]:
    """FT.SEARCH arguments for a filter query without KNN (RediSearch, valkey-search >= 1.1).

    ``sortby`` is ``(field, ascending)`` (needs SORTBY: RediSearch, valkey-search >= 1.2);
    ``limit=0`` counts (the reply's first element is the total).
    """
    args = ["FT.SEARCH", index, _filter_query(flt, layout)]
    if return_fields is None or limit == 0:
        args.append("NOCONTENT")
    else:
        args += ["RETURN", str(len(return_fields)), *return_fields]
    if sortby is not None:
        args += ["SORTBY", sortby[0], "ASC" if sortby[1] else "DESC"]
    args += ["LIMIT", str(offset), str(limit), "DIALECT", "2"]
    return args


def item_matches(fields: Mapping[str, Any], flt: MemoryFilter) -> bool:
    """The exact check of one result's raw fields against the filter.

    The engine's match is a superset where the index is case-insensitive (an index
    another library created) and where a field the index lacks was left out of the
    query; this check makes the result exact either way.
    """
    for attr, fieldname in SCOPE_FIELDS.items():
        want = getattr(flt.scope, attr)
        if want is not None and as_text(fields.get(fieldname)) != want:
            return False
    if flt.tags:
        have = set(split_tags(fields.get("tags")))
        if not all(t in have for t in flt.tags):
            return False
    source = as_text(fields.get("source"))
    if flt.sources and source not in flt.sources:
        return False
    if flt.exclude_sources and source in flt.exclude_sources:
        return False
    if flt.exclude_sensitivity and (as_text(fields.get("sensitivity")) or "none") in flt.exclude_sensitivity:
        return False
    if flt.exclude_expired_at is not None:
        expires = as_text(fields.get("expires_at"))
        if expires:
            try:
                if float(expires) <= flt.exclude_expired_at:
                    return False
            except ValueError:
                pass
    if flt.has_time and ("created_at" in fields or "valid_from" in fields) and not _in_time(fields, flt):
        return False
    return flt.where is None or flt.where.matches(fields)


def _in_time(fields: Mapping[str, Any], flt: MemoryFilter) -> bool:
    def ms(name: str) -> int | None:
        text = as_text(fields.get(name))
        try:
            return int(float(text)) if text else None
        except ValueError:
            return None

    return in_time(
        ms("valid_from"), ms("created_at") or 0, ms("valid_until"),
        since=flt.valid_since, until=flt.valid_before, as_of=flt.as_of,
    )  # fmt: skip
