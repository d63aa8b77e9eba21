"""Which search engine wrote a reply, and what each engine version can do.

The pure half of the dialect (the I/O half, asking the server, is
``backend.dialect.probe``): the capability table, and the parsing of ``MODULE LIST``,
``INFO`` and ``FT.INFO`` replies from both engines (valkey-search 1.x, RediSearch 2.x
to 8.x; RESP2 and RESP3 shapes) that decides which engine answered. Facts:
shared/VALKEY_SEARCH_DIALECT.md; the replies the unit tests hold these parsers to:
tests/fixtures/search_replies.json.

Telling the engines apart. Both load as a module named ``search``, and the version
number alone cannot tell them apart: valkey-search encodes ``major<<16 | minor<<8 |
patch`` (1.2.1 is 66049), RediSearch ``major*10000 + minor*100 + patch`` (2.10.5 is
21005, 8.0.2 is 80002), so RediSearch 7 and later land where valkey-search 1.4 and
later would. The engine is therefore decided by what each engine reports beyond the
number, and by the number only where no other engine can have it:

* ``INFO``: RediSearch has a ``search_version`` field (its section ``version``; 2.10
  and 8.x alike); valkey-search has none, but fields of its own
  (``search_background_indexing_status``, ``search_writer_queue_size``, ...).
* ``FT.INFO`` of any index: valkey-search reports ``backfill_in_progress`` / ``state``,
  RediSearch ``percent_indexed`` / ``index_options``.
* the number alone: below 65536 only RediSearch 2.x-6.x; from 65536 to 69999 only
  valkey-search 1.0-1.17; from 70000 on it is ambiguous.

When nothing decides, the most limited engine (valkey-search 1.0) is assumed, which
every query in this library runs on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .codec import as_text, normalize_reply, reply_pairs

__all__ = [
    "Capabilities",
    "Engine",
    "capabilities_for",
    "engine_from_ft_info",
    "engine_from_info",
    "engine_from_version",
    "identify_engine",
    "info_module_version",
    "module_version",
    "parse_info_modules",
    "parse_module_list",
]

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
    def partial_on_timeout(self) -> bool:
        """Whether a query that runs past the module's timeout answers a silent partial result.

        RediSearch's default (``TIMEOUT`` 500 ms, ``ON_TIMEOUT RETURN``) answers what it found
        so far, with nothing to tell it apart: a ``count`` of 500k memories on a busy server
        answered 72,499. Queries whose answer must be exact then carry ``TIMEOUT 0`` (no
        limit). valkey-search >= 1.1 does the same unless asked for ``ALLSHARDS``
        (``shard_options``), which every query of this library then carries.
        """
        return self.engine == "redisearch"

    @property
    def shard_options(self) -> bool:
        """Whether FT.SEARCH takes ``ALLSHARDS`` / ``SOMESHARDS`` (valkey-search >= 1.1).

        With ``search.enable-partial-results`` on (the default since 1.1, named
        ``prefer-partial-results`` there), a query that runs past its ``TIMEOUT`` answers
        the results found so far, standalone as well as on a cluster, with no error and
        no marker: a KNN 5,000 answered 2,315 hits and a total of 2,315; a tag query
        matching 15,000 answered a total of 101 (``bench/probe_search_timeout.py``,
        1.2.1). ``ALLSHARDS`` turns both a timeout and a missing shard into an error
        ("Search operation cancelled due to timeout"), whatever the server's setting.
        valkey-search 1.0 has no partial results (a timeout is an error) and rejects the
        option ("Unexpected parameter").
        """
        return self.engine == "valkey-search" and self.version[:2] >= (1, 1)

    @property
    def defers_script_writes(self) -> bool:
        """Whether a document written by a Lua script is indexed only at a later search on its node.

        valkey-search (1.2.1 read) queues a script's or a MULTI/EXEC's mutations and indexes
        them when the next FT.SEARCH *command* reaches that node (or the queue holds as many
        as the node has writer threads); a cluster's fan-out from another node does not
        drain it (``backend.index_nudge``). RediSearch indexes inside the script's call.
        """
        return self.engine != "redisearch"

    @property
    def knn_names_ef(self) -> bool:
        """Whether every KNN names its ``EF_RUNTIME`` (the index's) instead of leaving it to the engine.

        valkey-search 1.2.1 on a cluster walks a KNN that names none with EF = K on every shard,
        not the index's ``EF_RUNTIME``: with ``hnsw_ef_runtime=200`` over 240 memories, 9 of 40
        recalls of k = 1-4 missed a nearest memory (``tests/cluster/test_cluster_ef_runtime.py``);
        none does now. Standalone it applies the index's own, as RediSearch does; naming it there
        costs nothing and keeps one query form.
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


def engine_from_version(ver: int) -> Engine:
    """The engine a ``search`` module version number alone decides, or ``"unknown"`` (module docstring)."""
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
    info = reply_pairs(reply)
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
        engine = engine_from_version(ver)
    if engine is None or engine == "unknown":
        return "unknown", (0, 0, 0)
    if ver:
        return engine, _decode_module_version(engine, ver)
    stated = from_info[1] if from_info else None
    return engine, stated or (0, 0, 0)


def module_version(reply: Any) -> int | None:
    """The ``search`` module's version number in a ``MODULE LIST`` reply (RESP2 arrays or RESP3 maps)."""
    for entry in normalize_reply(reply) or []:
        fields = reply_pairs(entry)
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


def info_module_version(text: Any) -> int | None:
    """The ``search`` module's version number in ``INFO modules`` (raw text or the client's dict), or None."""
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
    ver = info_module_version(text)
    if ver is None:
        return None
    return identify_engine(ver, info=text)
