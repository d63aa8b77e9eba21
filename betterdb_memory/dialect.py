"""Which search engine is on the other end, and what it can do.

Pure parsing of ``MODULE LIST``, ``INFO modules`` and ``FT.INFO`` replies from both
engines (valkey-search 1.x and RediSearch 2.x, RESP2 and RESP3 shapes), plus one
``probe`` coroutine that asks the server. Managed services may block
``MODULE LIST``; the probe falls back to ``INFO``, then to ``FT._LIST``, and when
it still cannot tell it assumes the most limited engine (valkey-search 1.0), which
every query in this library runs on. Facts: shared/VALKEY_SEARCH_DIALECT.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from .codec import as_text

__all__ = [
    "Capabilities",
    "IndexInfo",
    "capabilities_for",
    "normalize_reply",
    "parse_ft_info",
    "parse_info_modules",
    "parse_module_list",
    "probe",
]

log = logging.getLogger("betterdb_memory")

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
        return Capabilities(engine, version, True, True, True, True, True, True, True, True)
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
    # RediSearch: 21005 -> 2.10.5
    return ver // 10000, (ver // 100) % 100, ver % 100


def _engine_from_version(ver: int) -> Engine:
    # valkey-search encodes major<<16; RediSearch encodes major*10000 (< 65536 for 2.x-6.x).
    return "valkey-search" if ver >= 0x10000 else "redisearch"


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


def parse_module_list(reply: Any) -> tuple[Engine, tuple[int, int, int]] | None:
    """Find the search module in a ``MODULE LIST`` reply (RESP2 arrays or RESP3 maps)."""
    for entry in normalize_reply(reply) or []:
        fields = _pairs(entry)
        if str(fields.get("name", "")).lower() in ("search", "ft", "searchlight"):
            ver = int(fields.get("ver", 0))
            engine = _engine_from_version(ver)
            return engine, _decode_module_version(engine, ver)
    return None


def parse_info_modules(text: Any) -> tuple[Engine, tuple[int, int, int]] | None:
    """Find the search module in ``INFO modules`` text (or the client's parsed dict)."""
    if isinstance(text, dict):
        mods = text.get("modules") or []
        for mod in mods if isinstance(mods, list) else []:
            if isinstance(mod, dict) and str(mod.get("name")) == "search":
                ver = int(mod.get("ver", 0))
                engine = _engine_from_version(ver)
                return engine, _decode_module_version(engine, ver)
        return None
    body = as_text(text)
    if body.startswith("txt:"):
        body = body[4:]
    for line in body.splitlines():
        if line.startswith("module:") and "name=search," in line:
            fields = dict(part.split("=", 1) for part in line[len("module:") :].split(",") if "=" in part)
            ver = int(fields.get("ver", "0"))
            engine = _engine_from_version(ver)
            return engine, _decode_module_version(engine, ver)
    return None


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


async def probe(client: Any) -> Capabilities:
    """Ask the server which search engine it runs, never failing on a blocked command.

    Order: ``MODULE LIST`` -> ``INFO modules`` -> ``FT._LIST`` (proves a search
    module exists; assume the smallest dialect). Raises only when no search module
    answers at all.
    """
    from .errors import ConfigurationError, is_connection_error

    # A connection fault is not "no search module": re-raise it so the caller's retry /
    # translation (``_io.call``) reports StoreConnectionError instead of a bad set-up.
    attempts: list[str] = []
    try:
        found = parse_module_list(await client.execute_command("MODULE", "LIST"))
        if found:
            return capabilities_for(*found)
    except Exception as exc:
        if is_connection_error(exc):
            raise
        attempts.append(f"MODULE LIST: {exc}")
    try:
        found = parse_info_modules(await client.info("modules"))
        if found:
            return capabilities_for(*found)
    except Exception as exc:
        if is_connection_error(exc):
            raise
        attempts.append(f"INFO modules: {exc}")
    try:
        await client.execute_command("FT._LIST")
        log.warning("search engine version unknown (%s); assuming valkey-search 1.0 dialect", attempts)
        return capabilities_for("unknown", (0, 0, 0))
    except Exception as exc:
        if is_connection_error(exc):
            raise
        attempts.append(f"FT._LIST: {exc}")
    raise ConfigurationError(
        "the server has no search module (valkey-search or RediSearch); use valkey/valkey-bundle "
        "or the embedded server",
        code="configuration.no_search_module",
        details={"attempts": attempts},
    )
