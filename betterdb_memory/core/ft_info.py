"""FT.INFO replies of either engine, as the library uses them.

``parse_ft_info`` reads what the store needs at run time (document count, readiness,
vector dimensions); ``parse_index_schema`` reads an index's fields, key type and
prefixes, to decide whether an index another library created can be adopted. Both
engines and both protocols (difference 11 of shared/VALKEY_SEARCH_DIALECT.md); the
replies the unit tests hold them to: tests/fixtures/search_replies.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .codec import as_text, normalize_reply, reply_pairs

__all__ = ["IndexField", "IndexInfo", "IndexSchema", "parse_ft_info", "parse_index_schema"]


@dataclass(frozen=True, slots=True)
class IndexInfo:
    """The parts of FT.INFO the library uses, the same whichever engine answered."""

    name: str
    num_docs: int
    ready: bool  # no backfill / indexing in progress
    indexing_failures: int
    dimensions: int | None
    distance_metric: str | None
    memory_bytes: int | None
    fields: tuple[str, ...]


def parse_ft_info(reply: Any) -> IndexInfo:
    """Normalise an FT.INFO reply from either engine (difference 11 of the dialect doc).

    valkey-search: ``state``/``backfill_in_progress``, failures as a string, vector
    details nested under ``index`` (``dimensions``). RediSearch: ``indexing`` /
    ``percent_indexed``, failures as an int, vector details flat (``dim``).
    """
    info = reply_pairs(reply)
    fields: list[str] = []
    dims: int | None = None
    metric: str | None = None
    for attr in info.get("attributes") or []:
        a = reply_pairs(attr)
        fields.append(str(a.get("identifier", a.get("attribute", ""))))
        if str(a.get("type", "")).upper() == "VECTOR":
            if "dim" in a:
                dims = int(a["dim"])
                metric = str(a.get("distance_metric", "")) or None
            nested = reply_pairs(a.get("index")) if a.get("index") is not None else {}
            if "dimensions" in nested:
                dims = int(nested["dimensions"])
                metric = str(nested.get("distance_metric", "")) or None
    if "state" in info or "backfill_in_progress" in info:
        state = str(info.get("state", "")).lower()
        ready = state == "ready" or str(info.get("backfill_in_progress", "0")) == "0"
    else:
        ready = (
            int(float(as_text(info.get("indexing", 0)) or 0)) == 0
            and float(as_text(info.get("percent_indexed", 1)) or 1) >= 1.0
        )
    memory: int | None = None
    if "total_index_memory_sz_mb" in info:
        memory = int(
            float(as_text(info["total_index_memory_sz_mb"])) * 1024 * 1024
            + float(as_text(info.get("vector_index_sz_mb", 0)) or 0) * 1024 * 1024
        )
    elif "memory" in info:  # pragma: no cover - future valkey-search field
        memory = int(float(as_text(info["memory"])))
    return IndexInfo(
        name=str(info.get("index_name", "")),
        num_docs=int(float(as_text(info.get("num_docs", 0)) or 0)),
        ready=ready,
        indexing_failures=int(float(as_text(info.get("hash_indexing_failures", 0)) or 0)),
        dimensions=dims,
        distance_metric=metric,
        memory_bytes=memory,
        fields=tuple(fields),
    )


# -- index schema (adopting an index another library created) --------------------------------

# Attribute flags. RediSearch lists them bare (RESP2) or under "flags" (RESP3); valkey-search
# sends CASESENSITIVE with a value ("1"/"0") and never reports SORTABLE (it accepts and ignores it).
_FLAGS = frozenset(
    {"CASESENSITIVE", "SORTABLE", "UNF", "NOSTEM", "NOINDEX", "WITHSUFFIXTRIE", "INDEXEMPTY", "INDEXMISSING"}
)


@dataclass(frozen=True, slots=True)
class IndexField:
    """One field of an index, as FT.INFO describes it on either engine.

    Attributes:
        name: the document field (HASH field or JSON path), ``identifier`` in FT.INFO.
        alias: the name queries use (``AS``); equal to ``name`` when not aliased.
        type: ``TAG``, ``NUMERIC``, ``TEXT``, ``VECTOR``, ... (upper case).
        separator: a TAG's separator (``","`` unless set otherwise); None for other types.
        case_sensitive: whether a TAG is CASESENSITIVE (both engines fold case by
            default); None for other types.
        sortable: SORTABLE as RediSearch reports it (valkey-search never reports it).
        dimensions / distance_metric / algorithm / data_type: a VECTOR's parameters.
        ef_runtime: an HNSW vector's EF_RUNTIME where FT.INFO reports it (valkey-search does).
    """

    name: str
    alias: str
    type: str
    separator: str | None = None
    case_sensitive: bool | None = None
    sortable: bool = False
    dimensions: int | None = None
    distance_metric: str | None = None
    algorithm: str | None = None
    data_type: str | None = None
    ef_runtime: int | None = None


@dataclass(frozen=True, slots=True)
class IndexSchema:
    """What an index covers and how: enough to decide whether to adopt one created elsewhere."""

    name: str
    key_type: str  # HASH or JSON
    prefixes: tuple[str, ...]
    fields: tuple[IndexField, ...]

    def field(self, alias: str) -> IndexField | None:
        """The field queries call ``alias`` (its ``AS`` name), or None."""
        return next((f for f in self.fields if f.alias == alias), None)

    @property
    def exact_scope_tags(self) -> bool:
        """Whether every scope TAG is case-sensitive and split on "," alone (the index this
        library creates): only then is a count exact without a client-side check."""
        tags = [self.field(n) for n in ("threadId", "agentId", "namespace", "tags", "source")]
        return all(
            f and f.type == "TAG" and f.case_sensitive is True and f.separator in (None, ",") for f in tags
        )


def _attribute(entry: Any) -> tuple[dict[str, Any], set[str]]:
    """One FT.INFO attribute as ``({lower-case key: value}, {FLAGS})``, whichever engine and protocol."""
    entry = normalize_reply(entry)
    values: dict[str, Any] = {}
    flags: set[str] = set()
    if isinstance(entry, dict):  # RediSearch under RESP3: a map, flags in a list under "flags"
        for key, value in entry.items():
            if key.lower() == "flags":
                flags |= {as_text(f).upper() for f in value or []}
            elif key.upper() in _FLAGS:
                if as_text(value) not in ("0", "false"):
                    flags.add(key.upper())
            else:
                values[key.lower()] = value
        return values, flags
    tokens = list(entry) if isinstance(entry, list) else []
    i = 0
    while i < len(tokens):
        key = as_text(tokens[i])
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if key.upper() in _FLAGS:
            if following is not None and as_text(following) in ("0", "1"):  # valkey-search: FLAG value
                if as_text(following) == "1":
                    flags.add(key.upper())
                i += 2
            else:  # RediSearch under RESP2: a bare flag
                flags.add(key.upper())
                i += 1
            continue
        values[key.lower()] = following
        i += 2
    return values, flags


def _field_from(entry: Any) -> IndexField:
    values, flags = _attribute(entry)
    name = as_text(values.get("identifier", values.get("attribute", "")))
    kind = as_text(values.get("type", "")).upper()
    vector = reply_pairs(values["index"]) if values.get("index") is not None else {}  # valkey-search nests it
    algorithm: Any = values.get("algorithm")
    ef_runtime: Any = values.get("ef_runtime")
    if "algorithm" in vector:
        hnsw = reply_pairs(vector["algorithm"])
        algorithm, ef_runtime = hnsw.get("name"), hnsw.get("ef_runtime", ef_runtime)
    dims = vector.get("dimensions", values.get("dim"))
    metric = vector.get("distance_metric", values.get("distance_metric"))
    data_type = vector.get("data_type", values.get("data_type"))
    is_tag = kind == "TAG"
    return IndexField(
        name=name,
        alias=as_text(values.get("attribute", name)),
        type=kind,
        separator=as_text(values.get("separator") or ",") if is_tag else None,
        case_sensitive=("CASESENSITIVE" in flags) if is_tag else None,
        sortable="SORTABLE" in flags,
        dimensions=int(dims) if kind == "VECTOR" and dims is not None else None,
        distance_metric=as_text(metric).upper() if kind == "VECTOR" and metric is not None else None,
        algorithm=as_text(algorithm).upper() if kind == "VECTOR" and algorithm is not None else None,
        data_type=as_text(data_type).upper() if kind == "VECTOR" and data_type is not None else None,
        ef_runtime=int(as_text(ef_runtime)) if kind == "VECTOR" and ef_runtime is not None else None,
    )


def parse_index_schema(reply: Any) -> IndexSchema:
    """The fields, key type and prefixes of an index from its FT.INFO reply (either engine, RESP2 or 3).

    For adopting an index another library created: each field's name and type, and
    for TAG fields whether they are CASESENSITIVE and their SEPARATOR, which decide
    whether this library's exact-match tag queries mean the same thing on it.
    """
    info = reply_pairs(reply)
    definition = reply_pairs(info.get("index_definition")) if info.get("index_definition") is not None else {}
    prefixes = definition.get("prefixes") or []
    return IndexSchema(
        name=as_text(info.get("index_name", "")),
        key_type=as_text(definition.get("key_type", "HASH")).upper(),
        prefixes=tuple(as_text(x) for x in (prefixes if isinstance(prefixes, list) else [prefixes])),
        fields=tuple(_field_from(a) for a in info.get("attributes") or []),
    )
