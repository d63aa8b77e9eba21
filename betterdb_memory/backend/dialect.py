"""Asking the server which search engine it runs, and addressing its keyless commands.

The I/O half of the dialect: ``probe`` sends ``MODULE LIST``, ``INFO modules``,
``FT._LIST`` and ``FT.INFO`` as far as needed and lets the pure parsers of
``core.dialect`` decide; ``keyless_route`` says where a cluster client sends an FT.*
command. Managed services may block ``MODULE LIST`` or ``INFO``; when nothing decides,
the probe assumes the most limited engine (valkey-search 1.0), which every query in
this library runs on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import valkey.exceptions as vexc

from ..core.codec import normalize_reply
from ..core.dialect import (
    Capabilities,
    capabilities_for,
    engine_from_version,
    identify_engine,
    info_module_version,
    module_version,
)
from ..core.ft_info import parse_ft_info

__all__ = ["index_ready", "keyless_route", "probe"]

log = logging.getLogger(__name__)


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


def search_command(args: Sequence[Any], *, all_shards: bool, unbounded: bool) -> list[Any]:
    """An FT.SEARCH as sent: ``ALLSHARDS`` and ``TIMEOUT 0`` where the engine needs them for whole results.

    ``all_shards`` (``Capabilities.shard_options``: valkey-search >= 1.1, standalone and
    cluster): with ``search.enable-partial-results`` on, its default, valkey-search answers
    a query that ran out of time, or that a cluster shard could not serve, with what it
    found so far and nothing to tell it apart; with ``ALLSHARDS`` it answers an error,
    which a recall's text side counts as degraded and every other query raises.
    ``unbounded`` (``Capabilities.partial_on_timeout``): RediSearch answers a query that
    ran past its 500 ms default with a silent partial result, so every query that has not
    set its own budget (the hybrid recall's text side does, and detects partial answers)
    runs without one.
    """
    if not args or args[0] != "FT.SEARCH":
        return list(args)
    out = [*args[:3], "ALLSHARDS", *args[3:]] if all_shards else list(args)
    if unbounded and "TIMEOUT" not in out:
        out += ["TIMEOUT", "0"]
    return out


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
    if ver and engine_from_version(ver) != "unknown":
        return capabilities_for(*identify_engine(ver))
    try:
        info = await client.info("modules")
        if ver is None:
            ver = info_module_version(info)
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


async def index_ready(client: Any, index: str, *, cluster: bool, route: dict[str, Any]) -> bool:
    """Whether ``index`` has indexed every document (an absent index counts as ready:
    the query then fails with ``IndexNotFoundError``, which the index manager handles).

    On a cluster ``FT.INFO <index> CLUSTER`` reports any shard's backfill; an engine
    without that form (valkey-search 1.0) is asked for the node's own state.
    """
    from .translate import is_connection_error

    forms: list[list[Any]] = [["FT.INFO", index]]
    if cluster:
        forms.insert(0, ["FT.INFO", index, "CLUSTER"])
    for args in forms:
        try:
            reply = await client.execute_command(*args, **route)
        except vexc.ResponseError as exc:
            if is_connection_error(exc):
                raise
            if len(args) == 3:  # the CLUSTER form is unknown here: ask the node
                continue
            return True  # no such index
        return parse_ft_info(reply).ready
    return True  # pragma: no cover - the plain form always answers or raises
