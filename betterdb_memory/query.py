"""FT.CREATE and FT.SEARCH argument lists, as pure functions of their inputs.

Every query here runs on the smallest dialect (valkey-search 1.0): each FT.SEARCH is
a KNN query (a bare ``*`` or a hybrid ``(<filter>)=>[KNN ...]``), always with
``DIALECT 2``, only the PARAMS the query uses, filters inlined (no ``$params``
inside filters on valkey-search), values through ``escaping.escape_tag``. Larger
dialects only add optional parts (a TEXT field, SORTBY on the score).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .dialect import Capabilities
from .escaping import escape_tag, format_number, tag_token
from .keys import Scope

__all__ = [
    "RETURN_FIELDS",
    "SCORE_ALIAS",
    "IndexSpec",
    "MemoryFilter",
    "build_filter",
    "create_index_args",
    "knn_search_args",
]

SCORE_ALIAS = "__dist"

# Fields a recall ships back: never the vector (RETURN only what is needed).
RETURN_FIELDS: tuple[str, ...] = (
    "content",
    "importance",
    "created_at",
    "last_accessed_at",
    "access_count",
    "expires_at",
    "thread_id_raw",
    "agent_id_raw",
    "namespace_raw",
    "tags_raw",
    "source_raw",
    "sensitivity",
    "kind",
    "metadata",
    "subject",
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


def create_index_args(spec: IndexSpec, caps: Capabilities) -> list[str]:
    """The FT.CREATE argument list for the memory index on this engine."""
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
    schema = [
        "embedding", "VECTOR", "HNSW", str(len(vector_params)), *vector_params,
        "thread_id", "TAG",
        "agent_id", "TAG",
        "namespace", "TAG",
        "tags", "TAG",
        "source", "TAG",
        "sensitivity", "TAG",
        "kind", "TAG",
        "importance", "NUMERIC",
        "created_at", "NUMERIC",
        "expires_at", "NUMERIC",
    ]  # fmt: skip
    if caps.text_fields:
        schema += ["content", "TEXT"]
    return ["FT.CREATE", spec.index, "ON", "HASH", "PREFIX", "1", spec.prefix, "SCHEMA", *schema]


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories a query may see. Every user value is tokenised and escaped."""

    scope: Scope = field(default_factory=Scope)
    tags: tuple[str, ...] = ()  # any of these tags
    exclude_sensitivity: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()  # any of these kinds (memory / summary / fact ...)
    exclude_kinds: tuple[str, ...] = ()
    min_created_at: float | None = None
    max_created_at: float | None = None
    max_importance: float | None = None


def _tag_clause(fieldname: str, tokens: Sequence[str]) -> str:
    return f"@{fieldname}:{{{'|'.join(escape_tag(t) for t in tokens)}}}"


def build_filter(flt: MemoryFilter) -> str:
    """The filter part of a hybrid query, or ``""`` for none (then a bare ``*`` KNN)."""
    parts: list[str] = []
    s = flt.scope
    if s.namespace is not None:
        parts.append(_tag_clause("namespace", [tag_token(s.namespace)]))
    if s.agent_id is not None:
        parts.append(_tag_clause("agent_id", [tag_token(s.agent_id)]))
    if s.thread_id is not None:
        parts.append(_tag_clause("thread_id", [tag_token(s.thread_id)]))
    if flt.tags:
        parts.append(_tag_clause("tags", [tag_token(t) for t in flt.tags]))
    if flt.kinds:
        parts.append(_tag_clause("kind", list(flt.kinds)))
    if flt.exclude_kinds:
        parts.append("-" + _tag_clause("kind", list(flt.exclude_kinds)))
    if flt.exclude_sensitivity:
        parts.append("-" + _tag_clause("sensitivity", list(flt.exclude_sensitivity)))
    if flt.min_created_at is not None or flt.max_created_at is not None:
        lo = format_number(flt.min_created_at) if flt.min_created_at is not None else "-inf"
        hi = f"({format_number(flt.max_created_at)}" if flt.max_created_at is not None else "+inf"
        parts.append(f"@created_at:[{lo} {hi}]")
    if flt.max_importance is not None:
        parts.append(f"@importance:[-inf {format_number(flt.max_importance)}]")
    return " ".join(parts)


def knn_search_args(
    index: str,
    vector_blob: bytes,
    *,
    k: int,
    flt: MemoryFilter,
    caps: Capabilities,
    return_fields: Sequence[str] | None = RETURN_FIELDS,
    ef_runtime: int | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> list[str | bytes]:
    """FT.SEARCH arguments for a KNN query with an optional hybrid filter.

    ``return_fields=None`` sends NOCONTENT (ids only: used by deletions that must not
    fetch documents). Only the ``vec`` param is sent (unused PARAMS are an error on
    valkey-search); SORTBY on the score alias only where the engine supports it.
    """
    knn = f"KNN {k} @embedding $vec"
    if ef_runtime is not None:
        knn += f" EF_RUNTIME {ef_runtime}"
    knn += f" AS {SCORE_ALIAS}"
    filt = build_filter(flt)
    query = f"({filt})=>[{knn}]" if filt else f"*=>[{knn}]"
    args: list[str | bytes] = ["FT.SEARCH", index, query, "PARAMS", "2", "vec", vector_blob]
    if caps.sortby_knn_score:
        args += ["SORTBY", SCORE_ALIAS]
    if return_fields is None:
        args.append("NOCONTENT")
    else:
        fields = [SCORE_ALIAS, *return_fields]
        args += ["RETURN", str(len(fields)), *fields]
    args += ["LIMIT", str(offset), str(limit if limit is not None else k), "DIALECT", "2"]
    return args
