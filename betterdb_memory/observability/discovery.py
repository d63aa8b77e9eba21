"""BetterDB Monitor discovery: the registry marker, the heartbeat and the stats hash.

Monitor finds every BetterDB library instance on a Valkey by reading keys the
libraries write (the layout below is Monitor's, not ours to change):

* ``HGETALL __betterdb:caches``: one field per instance, a JSON marker. Monitor
  skips entries that are not JSON or lack a string ``type`` / ``prefix``, and those
  whose ``type`` it does not know. A memory store's field is ``<name>:mem`` and its
  ``type`` is ``"agent_memory"``; ``prefix`` is the store name, which Monitor shows.
* ``GET __betterdb:heartbeat:<field>``: present = alive. Written with ``EX 60``
  every 30 s, so a crashed process turns "not alive" within a minute; deleted on
  a clean close. The registry entry is kept on close so Monitor still lists the
  store (as not alive) with its history.
* ``SET __betterdb:protocol 1 NX``: the protocol version of the whole registry.
* Every ~15 s Monitor reads ``HGETALL <stats_key>`` (``<name>:__mem_stats``; it
  shows ``evictions``), ``HGETALL <name>:__mem_config`` (``recall.threshold``) and
  ``FT.INFO <index_name>``.

Conflict rule (non-destructive): the registry is shared by every BetterDB library,
and ``<name>:mem`` could already hold another library's marker. We never overwrite
a marker whose ``type`` is not ``agent_memory`` (or a value that is not a JSON
object: we cannot know whose it is). In that case we log a warning and register
under ``<name>:mem:agent_memory`` instead, with the heartbeat key following the
field actually used. If that field is taken too, discovery is skipped for this
store (warning logged; the store keeps working). A marker of our own type under
our field is overwritten: it is this store, written by an earlier or a sibling
process. The check and the write are two commands, so two different libraries
registering the same field in the same millisecond could still race; that is
accepted for an advisory registry.

Failures never reach the store's callers: background writes log at warning, are
reported through ``on_error`` (the store counts them in a metric) and retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Final, Literal

from .._version import __version__
from ..backend import Backend, ValkeyClient, as_backend
from ..core.validation import check_number
from ..errors import ConfigurationError
from ..lifecycle import Spawn
from .stats_hash import STATS_FIELDS, StatsHash, _text, stats_key

__all__ = [
    "HEARTBEAT_KEY_PREFIX",
    "HEARTBEAT_TTL_SECONDS",
    "MARKER_TYPE",
    "PROTOCOL_KEY",
    "PROTOCOL_VERSION",
    "REGISTRY_KEY",
    "STATS_FIELDS",
    "DiscoveryMarker",
    "ErrorCallback",
    "StatsHash",
    "build_marker",
    "classify_registry_value",
    "fallback_registry_field",
    "heartbeat_key",
    "iso_now",
    "registry_field",
    "stats_key",
]

log = logging.getLogger(__name__)

REGISTRY_KEY: Final = "__betterdb:caches"
PROTOCOL_KEY: Final = "__betterdb:protocol"
HEARTBEAT_KEY_PREFIX: Final = "__betterdb:heartbeat:"
PROTOCOL_VERSION: Final = 1
HEARTBEAT_TTL_SECONDS: Final = 60
MARKER_TYPE: Final = "agent_memory"

ErrorCallback = Callable[[BaseException], None]
RegistryOwner = Literal["free", "ours", "foreign"]


def registry_field(name: str) -> str:
    """The store's field in ``__betterdb:caches`` (``<name>:mem``)."""
    return f"{name}:mem"


def fallback_registry_field(name: str) -> str:
    """The field used when ``<name>:mem`` holds another library's marker."""
    return f"{name}:mem:{MARKER_TYPE}"


def heartbeat_key(field: str) -> str:
    """The heartbeat key Monitor reads for a registry field."""
    return f"{HEARTBEAT_KEY_PREFIX}{field}"


def iso_now() -> str:
    """UTC now as ISO 8601 with milliseconds and ``Z``, as JavaScript's ``toISOString``.

    Monitor is written in TypeScript and parses the library timestamps it shows;
    matching the format its own libraries write avoids a second date dialect.
    """
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_marker(
    *,
    name: str,
    index_name: str,
    stats_key: str,
    capabilities: Iterable[str],
    started_at: str,
    pid: int,
    hostname: str,
    version: str = __version__,
) -> dict[str, Any]:
    """The JSON object written under the store's registry field.

    Args:
        name: the store name (Monitor shows ``prefix`` as the instance name).
        index_name: the search index Monitor runs ``FT.INFO`` on.
        stats_key: the stats hash Monitor polls.
        capabilities: feature names Monitor may key UI on (``"threshold_adjust"``...).
        started_at: ISO 8601 UTC start time.
        pid: the process id.
        hostname: the host name (shown by Monitor to tell processes apart).
        version: the library version.
    """
    return {
        "type": MARKER_TYPE,
        "prefix": name,
        "version": version,
        "protocol_version": PROTOCOL_VERSION,
        "capabilities": list(dict.fromkeys(capabilities)),
        "stats_key": stats_key,
        "index_name": index_name,
        "started_at": started_at,
        "pid": pid,
        "hostname": hostname,
    }


def classify_registry_value(raw: bytes | str | None) -> RegistryOwner:
    """Who owns a registry field's current value.

    Returns:
        ``"free"`` when the field is absent, ``"ours"`` for a JSON object whose
        ``type`` is ``agent_memory``, ``"foreign"`` for anything else (another
        library's marker, or a value we cannot read and so must not destroy).
    """
    if raw is None:
        return "free"
    try:
        parsed = json.loads(_text(raw))
    except ValueError:
        return "foreign"
    if isinstance(parsed, dict) and parsed.get("type") == MARKER_TYPE:
        return "ours"
    return "foreign"


def _report(on_error: ErrorCallback | None, exc: BaseException) -> None:
    if on_error is None:
        return
    try:
        on_error(exc)
    except Exception:
        log.exception("discovery on_error callback raised")


class DiscoveryMarker:
    """Registers a store with BetterDB Monitor and keeps its heartbeat alive.

    Args:
        client: an asyncio ``Valkey`` or cluster client (``decode_responses`` either way),
            or the owning store's ``Backend``.
        name: the store name.
        index_name: the store's search index.
        stats_key: the stats hash (``stats_key(name)`` by convention).
        capabilities: feature names published in the marker.
        heartbeat_interval: seconds between heartbeats; must stay well under the
            60 s heartbeat expiry, or the store would flap between alive and not.
        on_error: called with each background failure (after it is logged), e.g.
            to count it in a metric. Exceptions it raises are logged and ignored.

    Raises:
        ValidationError: an empty name or an interval outside (0, 30].
    """

    def __init__(
        self,
        client: ValkeyClient | Backend,
        name: str,
        *,
        index_name: str,
        stats_key: str,
        capabilities: Iterable[str] = (),
        heartbeat_interval: float = 30.0,
        on_error: ErrorCallback | None = None,
        spawn: Spawn | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError("name must be a non-empty string", details={"argument": "name"})
        # At most half the expiry: one late or failed beat must not mark the store dead.
        check_number(
            heartbeat_interval,
            "heartbeat_interval",
            positive=True,
            maximum=HEARTBEAT_TTL_SECONDS / 2,
            setting=True,
        )
        # A store passes its Backend (retries, error translation, closed state); a raw
        # client gets a Backend of its own.
        self._backend = as_backend(client)
        self.name = name
        self.index_name = index_name
        self.stats_key = stats_key
        self.capabilities = list(dict.fromkeys(capabilities))
        self.heartbeat_interval = float(heartbeat_interval)
        self._on_error = on_error
        self._spawn = spawn
        self.started_at = iso_now()
        self.field: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._warned: set[str] = set()  # fields already warned about ("" = no field at all)

    def __repr__(self) -> str:
        return f"DiscoveryMarker(name={self.name!r}, field={self.field!r})"

    def marker(self) -> dict[str, Any]:
        """The marker this store publishes."""
        return build_marker(
            name=self.name,
            index_name=self.index_name,
            stats_key=self.stats_key,
            capabilities=self.capabilities,
            started_at=self.started_at,
            pid=os.getpid(),
            hostname=socket.gethostname(),
        )

    async def register(self) -> str | None:
        """Write the registry marker, the protocol key and a first heartbeat.

        Follows the conflict rule in the module docstring.

        Returns:
            The registry field written, or ``None`` when both candidate fields hold
            other libraries' markers (nothing was written).

        Raises:
            BetterDBMemoryError: the server call failed (translated; for example
                ``StoreConnectionError``). The background heartbeat retries.
        """
        return await self._register()

    async def _register(self) -> str | None:
        payload = json.dumps(self.marker(), separators=(",", ":"))
        # The registry is one hash every tenant's ACL user may HGET / HSET (docs/operations/acl.md):
        # first make sure this user owns the store's heartbeat key, so that a client opened on
        # another tenant's store name reads and overwrites nothing there (PermissionDeniedError).
        await self._backend.command("discovery.register", "EXISTS", heartbeat_key(registry_field(self.name)))
        for field in (registry_field(self.name), fallback_registry_field(self.name)):
            existing = await self._backend.command("discovery.register", "HGET", REGISTRY_KEY, field)
            owner = classify_registry_value(existing)
            if owner == "foreign":
                # Warn once per field: the heartbeat retries registration every beat.
                level = logging.DEBUG if field in self._warned else logging.WARNING
                self._warned.add(field)
                log.log(
                    level,
                    "discovery: registry field %r already holds another library's marker; "
                    "not overwriting it (store %r)",
                    field,
                    self.name,
                )
                continue

            writes = [
                ("HSET", REGISTRY_KEY, field, payload),
                ("SET", PROTOCOL_KEY, str(PROTOCOL_VERSION), "NX"),
                ("SET", heartbeat_key(field), iso_now(), "EX", HEARTBEAT_TTL_SECONDS),
            ]
            await self._backend.pipeline("discovery.register", writes, details={"store": self.name})
            if field != registry_field(self.name) and self.field != field:
                log.warning("discovery: store %r registered under fallback field %r", self.name, field)
            self.field = field
            return field
        level = logging.DEBUG if "" in self._warned else logging.WARNING
        self._warned.add("")
        log.log(level, "discovery: no free registry field for store %r; Monitor will not list it", self.name)
        self.field = None
        return None

    async def heartbeat_once(self) -> bool:
        """Refresh the heartbeat (``SET ... EX 60``), registering first if needed.

        The registry entry is re-written when it has vanished (a server restarted
        without persistence, or someone deleted the hash), so Monitor finds the
        store again without a restart of the application.

        Returns:
            True when a heartbeat was written.

        Raises:
            BetterDBMemoryError: the server call failed (translated).
        """
        return await self._heartbeat()

    async def _heartbeat(self) -> bool:
        if self.field is None:
            return await self._register() is not None
        field = self.field

        beat = [
            ("SET", heartbeat_key(field), iso_now(), "EX", HEARTBEAT_TTL_SECONDS),
            ("HEXISTS", REGISTRY_KEY, field),
        ]
        _, present = await self._backend.pipeline("discovery.heartbeat", beat, details={"store": self.name})
        if not present:
            log.info("discovery: registry entry %r vanished; registering again", field)
            return await self._register() is not None
        return True

    def start(self) -> None:
        """Start the background heartbeat task (idempotent).

        Raises:
            ConfigurationError: called with no running event loop, or after ``close``.
        """
        if self._closed:
            raise ConfigurationError("DiscoveryMarker.start() after close()", code="configuration.closed")
        if self._task is not None and not self._task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError as exc:
            raise ConfigurationError(
                "DiscoveryMarker.start() needs a running event loop", code="configuration.no_loop"
            ) from exc
        if self._spawn is not None:  # under the owning store's supervisor
            self._task = self._spawn(self._run(), name=f"heartbeat:{self.name}", daemon=True)
            return
        self._task = loop.create_task(self._run(), name=f"betterdb-memory-heartbeat:{self.name}")

    async def _run(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await self.heartbeat_once()
            except Exception as exc:
                # Connection errors, timeouts, a read-only replica...: log, count, retry
                # next beat. Warn once per outage; every failure still reaches on_error.
                if not failing:
                    log.warning("discovery: heartbeat for store %r failed: %s", self.name, exc)
                else:
                    log.debug("discovery: heartbeat for store %r still failing: %s", self.name, exc)
                failing = True
                _report(self._on_error, exc)
            else:
                if failing:
                    log.info("discovery: heartbeat for store %r recovered", self.name)
                failing = False

    async def close(self) -> None:
        """Stop the heartbeat and delete the heartbeat key (the registry entry stays).

        Never raises for a server error: a failed delete is logged and reported, and
        the heartbeat key then expires by itself within 60 s.
        """
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.field is None:
            return
        try:
            await self._backend.command("discovery.close", "DEL", heartbeat_key(self.field))
        except Exception as exc:
            log.warning("discovery: could not delete heartbeat of store %r: %s", self.name, exc)
            _report(self._on_error, exc)
