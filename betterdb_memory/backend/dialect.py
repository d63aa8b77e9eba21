"""Which search engine is on the other end, and what it can do.

Pure parsing of ``MODULE LIST``, ``INFO`` and ``FT.INFO`` replies from both engines
(valkey-search 1.x, RediSearch 2.x to 8.x; RESP2 and RESP3 shapes), plus one
``probe`` coroutine that asks the server. Facts: shared/VALKEY_SEARCH_DIALECT.md;
the replies the unit tests hold these parsers to: tests/fixtures/search_replies.json.

Telling the engines apart. Both load as a module named ``search``, and the version
number alone cannot tell them apart: valkey-search encodes ``major<<16 | minor<<8 |
patch`` (1.2.1 is 66049), RediSearch ``major*10000 + minor*100 + patch`` (2.10.5 is
21005, 8.0.2 is 80002), so RediSearch 7 and later land where valkey-search 1.4 and
later would. The probe therefore decides by what each engine reports beyond the
number, and uses the number only where no other engine can have it:

* ``INFO``: RediSearch has a ``search_version`` field (its section ``version``; 2.10
  and 8.x alike); valkey-search has none, but fields of its own
  (``search_background_indexing_status``, ``search_writer_queue_size``, ...).
* ``FT.INFO`` of any index: valkey-search reports ``backfill_in_progress`` / ``state``,
  RediSearch ``percent_indexed`` / ``index_options``.
* the number alone: below 65536 only RediSearch 2.x-6.x; from 65536 to 69999 only
  valkey-search 1.0-1.17; from 70000 on it is ambiguous.

Managed services may block ``MODULE LIST`` or ``INFO``; when nothing decides, the
probe assumes the most limited engine (valkey-search 1.0), which every query in this
library runs on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from ..core.codec import as_text

__all__ = [
    "Capabilities",
    "IndexField",
    "IndexInfo",
    "IndexSchema",
    "capabilities_for",
    "engine_from_ft_info",
    "engine_from_info",
    "identify_engine",
    "keyless_route",
    "module_version",
    "normalize_reply",
    "parse_ft_info",
    "parse_index_schema",
    "parse_info_modules",
    "parse_module_list",
    "probe",
]

log = logging.getLogger(__name__)

Engine = Literal["valkey-search", "redisearch", "unknown"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the server's search module supports (decides which query forms we send)."""

    engine: Engine
    version: tuple[int, int, int]
    text_fields: bool  # TEXT fields and full-text terms (RediSearch; valkey-search >= 1.2)
    aggregate: bool  # FT.AGGREGATE (RediSearch; valkey-search >= 1.1)
    filter_queries: bool  # queries without KNN (RediSearch; valkey-search >= 1.1)
    sortby: bool  # SORTBY on an indexed field (RediSearch; valkey-search >= 1.2)
    sortby_knn_score: bool  # SORTBY on the KNN score alias (RediSearch; valkey-search >= 1.3)
    nocontent: bool  # NOCONTENT (both, all versions)
    aliases: bool  # FT.ALIASADD (RediSearch)
    resp3_map_replies: bool  # FT.SEARCH answers a map under RESP3 (RediSearch only)
    # An escaped '*' ending a TAG value is literal (RediSearch). valkey-search 1.2.1 still reads it
    # as a prefix wildcard: @t:{use\*} also matches "user", and a value of only "*" is an error.
    # Not a published capability (not in ``as_list``): a quirk the query side must allow for.
    tag_trailing_star_literal: bool = False

    @property
    def rebuilds_after_restart(self) -> bool:
        """Whether a restarted server answers queries before its indexes are rebuilt.

        valkey-search loads the data, then rebuilds each index in the background and
        answers from the part done so far; RediSearch indexes while loading (the server
        says LOADING until it is done).
        """
        return self.engine != "redisearch"

    @property
    def version_string(self) -> str:
        return ".".join(str(x) for x in self.version)

    def as_list(self) -> list[str]:
        """Capability names that are on (for the discovery marker and ``doctor``)."""
        names = (
            "text_fields",
            "aggregate",
            "filter_queries",
            "sortby",
            "sortby_knn_score",
            "nocontent",
            "aliases",
        )
        return [n for n in names if getattr(self, n)]


def capabilities_for(engine: Engine, version: tuple[int, int, int]) -> Capabilities:
    """The capability set of an engine version (the table in VALKEY_SEARCH_DIALECT.md)."""
    if engine == "redisearch":
        return Capabilities(engine, version, True, True, True, True, True, True, True, True, True)
    if engine == "valkey-search":
        v = version[:2]
        return Capabilities(
            engine,
            version,
            text_fields=v >= (1, 2),
            aggregate=v >= (1, 1),
            filter_queries=v >= (1, 1),
            sortby=v >= (1, 2),
            sortby_knn_score=v >= (1, 3),
            nocontent=True,
            aliases=False,
            resp3_map_replies=False,
        )
    # Unknown: assume valkey-search 1.0, the smallest dialect (KNN-only queries).
    return Capabilities("unknown", version, False, False, False, False, False, True, False, False)


def _decode_module_version(engine: Engine, ver: int) -> tuple[int, int, int]:
    if engine == "valkey-search":
        # 66049 == 0x010201 -> 1.2.1
        return (ver >> 16) & 0xFF, (ver >> 8) & 0xFF, ver & 0xFF
    # RediSearch: 21005 -> 2.10.5, 80002 -> 8.0.2
    return ver // 10000, (ver // 100) % 100, ver % 100


# The number alone decides only where one engine can have it (module docstring).
_VALKEY_SEARCH_1X = range(0x10000, 70000)


def _engine_from_version(ver: int) -> Engine:
    if 0 < ver < 0x10000:
        return "redisearch"  # 2.x-6.x
    if ver in _VALKEY_SEARCH_1X:
        return "valkey-search"
    return "unknown"  # RediSearch >= 7 or valkey-search >= 1.18 / 2.x: ask something else


# Fields of valkey-search's INFO sections that RediSearch does not have (captured from 1.2.1).
_VALKEY_SEARCH_INFO_FIELDS = frozenset(
    {
        "search_background_indexing_status",
        "search_writer_queue_size",
        "search_total_indexed_documents",
        "search_hnsw_add_exceptions_count",
        "search_string_interning_store_size",
    }
)
# RediSearch's version field: section "version", field "version" (2.6+ and 8.x); "RedisSearch_version" before.
_REDISEARCH_VERSION_FIELDS = ("search_version", "search_redissearch_version")


def _info_fields(info: Any) -> dict[str, Any]:
    """INFO as ``{field: value}``: raw text (bytes/str, RESP3 ``txt:`` prefix or not) or valkey-py's dict."""
    if isinstance(info, dict):
        return {as_text(k).lower(): v for k, v in info.items()}
    body = as_text(info)
    if body.startswith("txt:"):
        body = body[4:]
    out: dict[str, Any] = {}
    for line in body.splitlines():
        if line and not line.startswith("#") and ":" in line:
            key, value = line.split(":", 1)
            out[key.strip().lower()] = value.strip()
    return out


def _parse_version(text: object) -> tuple[int, int, int] | None:
    parts = str(text).strip().split(".")
    try:
        major, minor, patch = [*(int(p) for p in parts[:3]), 0, 0, 0][:3]
    except ValueError:
        return None
    return major, minor, patch


def engine_from_info(info: Any) -> tuple[Engine, tuple[int, int, int] | None] | None:
    """Which engine wrote an ``INFO`` reply (``INFO search`` or ``INFO modules``), by its fields.

    Returns ``(engine, version)`` (the version when the reply states it: RediSearch's
    ``search_version``), or None when neither engine's fields are there.
    """
    fields = _info_fields(info)
    if _VALKEY_SEARCH_INFO_FIELDS & fields.keys():
        return "valkey-search", None
    for key in _REDISEARCH_VERSION_FIELDS:
        if key in fields:
            return "redisearch", _parse_version(fields[key])
    return None


def engine_from_ft_info(reply: Any) -> Engine | None:
    """Which engine wrote an ``FT.INFO`` reply, by its shape (difference 11 of the dialect doc).

    valkey-search's cluster-wide forms (``FT.INFO idx PRIMARY`` / ``CLUSTER`` on a
    coordinator) carry ``mode``.
    """
    info = _pairs(reply)
    if (
        "backfill_in_progress" in info
        or "state" in info
        or as_text(info.get("mode")) in ("primary", "cluster")
    ):
        return "valkey-search"
    if "percent_indexed" in info or "index_options" in info or "indexing" in info:
        return "redisearch"
    return None


def identify_engine(
    ver: int | None, *, info: Any = None, ft_info: Any = None
) -> tuple[Engine, tuple[int, int, int]]:
    """Decide the engine and its version from what the server reported.

    Args:
        ver: the ``search`` module's version number (``MODULE LIST`` / ``INFO modules``).
        info: an ``INFO search`` or ``INFO modules`` reply, if the server answered one.
        ft_info: an ``FT.INFO`` reply of any index, if one was read.

    Evidence beyond the number decides first (INFO fields, then the FT.INFO shape);
    the number alone only where it is unambiguous. Undecided: ``("unknown", (0, 0, 0))``.
    """
    from_info = engine_from_info(info) if info is not None else None
    engine: Engine | None = from_info[0] if from_info else None
    if engine is None and ft_info is not None:
        engine = engine_from_ft_info(ft_info)
    if engine is None and ver:
        engine = _engine_from_version(ver)
    if engine is None or engine == "unknown":
        return "unknown", (0, 0, 0)
    if ver:
        return engine, _decode_module_version(engine, ver)
    stated = from_info[1] if from_info else None
    return engine, stated or (0, 0, 0)


def normalize_reply(value: Any) -> Any:
    """Turn a reply into plain Python: bytes -> str, RESP3 maps -> dict, lists kept."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {as_text(k): normalize_reply(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize_reply(v) for v in value]
    return value


def _pairs(value: Any) -> dict[str, Any]:
    """A flat [k, v, k, v] array or a map, as a dict with str keys."""
    value = normalize_reply(value)
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        return {as_text(value[i]): value[i + 1] for i in range(0, len(value) - 1, 2)}
    return {}


def module_version(reply: Any) -> int | None:
    """The ``search`` module's version number in a ``MODULE LIST`` reply (RESP2 arrays or RESP3 maps)."""
    for entry in normalize_reply(reply) or []:
        fields = _pairs(entry)
        if str(fields.get("name", "")).lower() in ("search", "ft", "searchlight"):
            return int(fields.get("ver", 0))
    return None


def parse_module_list(reply: Any) -> tuple[Engine, tuple[int, int, int]] | None:
    """The search module in a ``MODULE LIST`` reply, decided by its version number alone.

    None when no search module is listed; ``("unknown", (0, 0, 0))`` when the number
    is one both engines can have (RediSearch 7+): ``identify_engine`` with an ``INFO``
    reply decides those.
    """
    ver = module_version(reply)
    return None if ver is None else identify_engine(ver)


def _info_module_version(text: Any) -> int | None:
    if isinstance(text, dict):
        mods = text.get("modules") or []
        for mod in mods if isinstance(mods, list) else []:
            if isinstance(mod, dict) and str(mod.get("name")) == "search":
                return int(mod.get("ver", 0))
        return None
    body = as_text(text)
    if body.startswith("txt:"):
        body = body[4:]
    for line in body.splitlines():
        if line.startswith("module:") and "name=search," in line:
            fields = dict(part.split("=", 1) for part in line[len("module:") :].split(",") if "=" in part)
            return int(fields.get("ver", "0"))
    return None


def parse_info_modules(text: Any) -> tuple[Engine, tuple[int, int, int]] | None:
    """The search module in ``INFO modules`` (raw text or the client's parsed dict).

    The reply carries the module line and the module's own INFO sections, so the
    engine is decided by those fields (``identify_engine``), the version by the number.
    None when no search module is listed.
    """
    ver = _info_module_version(text)
    if ver is None:
        return None
    return identify_engine(ver, info=text)


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
    info = _pairs(reply)
    fields: list[str] = []
    dims: int | None = None
    metric: str | None = None
    for attr in info.get("attributes") or []:
        a = _pairs(attr)
        fields.append(str(a.get("identifier", a.get("attribute", ""))))
        if str(a.get("type", "")).upper() == "VECTOR":
            if "dim" in a:
                dims = int(a["dim"])
                metric = str(a.get("distance_metric", "")) or None
            nested = _pairs(a.get("index")) if a.get("index") is not None else {}
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
    vector = _pairs(values["index"]) if values.get("index") is not None else {}  # valkey-search nests it
    algorithm: Any = values.get("algorithm")
    if "algorithm" in vector:
        algorithm = _pairs(vector["algorithm"]).get("name")
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
    )


def parse_index_schema(reply: Any) -> IndexSchema:
    """The fields, key type and prefixes of an index from its FT.INFO reply (either engine, RESP2 or 3).

    For adopting an index another library created: each field's name and type, and
    for TAG fields whether they are CASESENSITIVE and their SEPARATOR, which decide
    whether this library's exact-match tag queries mean the same thing on it.
    """
    info = _pairs(reply)
    definition = _pairs(info.get("index_definition")) if info.get("index_definition") is not None else {}
    prefixes = definition.get("prefixes") or []
    return IndexSchema(
        name=as_text(info.get("index_name", "")),
        key_type=as_text(definition.get("key_type", "HASH")).upper(),
        prefixes=tuple(as_text(x) for x in (prefixes if isinstance(prefixes, list) else [prefixes])),
        fields=tuple(_field_from(a) for a in info.get("attributes") or []),
    )


def keyless_route(client: Any) -> dict[str, Any]:
    """Keyword arguments that let a cluster client send a keyless command (FT.*, MODULE LIST).

    valkey-search declares no key positions for its FT.* commands, and valkey-py's
    async ``ValkeyCluster`` (6.x) has no routing rule for them (its sync client sends
    them to the default node), so without ``target_nodes`` it refuses them: "No way to
    dispatch this command to Valkey Cluster". With the coordinator any node answers
    for the whole cluster (FT.CREATE reaches every shard, FT.SEARCH fans out), so the
    default node is the target. A plain client gets nothing to add.
    """
    try:
        from valkey.asyncio.cluster import ValkeyCluster
    except ImportError:  # pragma: no cover - valkey always ships it
        return {}
    return {"target_nodes": ValkeyCluster.DEFAULT_NODE} if isinstance(client, ValkeyCluster) else {}


async def probe(client: Any) -> Capabilities:
    """Ask the server which search engine it runs, never failing on a blocked command.

    ``MODULE LIST`` first: a version number only one engine can have decides (one round
    trip, no INFO, which least-privilege users often may not run). Otherwise (RediSearch
    7+ and valkey-search 1.18+ share numbers, or MODULE LIST is blocked) ``INFO modules``
    decides by the fields each engine reports, then the ``FT.INFO`` shape of an existing
    index (``FT._LIST``). When nothing decides but a search module answers, the smallest
    dialect is assumed. Raises only when no search module answers at all.
    """
    from ..errors import ConfigurationError
    from .translate import is_connection_error

    # A connection fault is not "no search module": re-raise it so the caller's retry /
    # translation (``backend.retry.call``) reports StoreConnectionError instead of a bad set-up.
    attempts: list[str] = []
    ver: int | None = None
    info: Any = None
    route = keyless_route(client)
    try:
        ver = module_version(await client.execute_command("MODULE", "LIST", **route))
    except Exception as exc:
        if is_connection_error(exc):
            raise
        attempts.append(f"MODULE LIST: {exc}")
    if ver and _engine_from_version(ver) != "unknown":
        return capabilities_for(*identify_engine(ver))
    try:
        info = await client.info("modules")
        if ver is None:
            ver = _info_module_version(info)
    except Exception as exc:
        if is_connection_error(exc):
            raise
        attempts.append(f"INFO modules: {exc}")
    engine, version = identify_engine(ver, info=info)
    if engine != "unknown":
        return capabilities_for(engine, version)
    try:
        names = normalize_reply(await client.execute_command("FT._LIST", **route)) or []
    except Exception as exc:
        if is_connection_error(exc):
            raise
        attempts.append(f"FT._LIST: {exc}")
        raise ConfigurationError(
            "the server has no search module (valkey-search or RediSearch); use valkey/valkey-bundle "
            "or the embedded server",
            code="configuration.no_search_module",
            details={"attempts": attempts},
        ) from None
    for name in names[:1]:
        try:
            engine, version = identify_engine(
                ver, info=info, ft_info=await client.execute_command("FT.INFO", name, **route)
            )
        except Exception as exc:
            if is_connection_error(exc):
                raise
            attempts.append(f"FT.INFO: {exc}")
    if engine != "unknown":
        return capabilities_for(engine, version)
    log.warning(
        "search engine not identified (module version %s; %s); assuming valkey-search 1.0 dialect",
        ver, attempts or "no engine-specific INFO fields",
    )  # fmt: skip
    return capabilities_for("unknown", (0, 0, 0))
