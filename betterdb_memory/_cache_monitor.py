"""The cache tiers' presence in BetterDB Monitor: their registry marker and their heartbeat.

Kept out of ``facade`` because it works around two things betterdb-agent-cache 0.12 does
on its own, and both need this project to decide *when* they happen:

* ``AgentCache`` writes its marker (the registry field ``<name>``) from its constructor,
  before anything has checked that the user owns the name: a tenant's ``AgentMemory``
  pointed at another tenant's name overwrote that tenant's marker (HSET on the shared
  registry is allowed on any field). The facade therefore builds the cache tiers with
  discovery off (``discovery_off``) and calls ``register`` once the memory index has
  proved the name: that user can read and create ``<name>:mem:idx``.
* Its heartbeat never reaches the server through valkey-py (see ``_beat``), so Monitor
  sees a marker but never a live instance; ``start_heartbeat`` writes it instead.

``register`` runs AgentCache's own registration coroutine (collision check, marker,
protocol key, its heartbeat task), a private method pinned by
``tests/unit/test_cache_monitor.py``, and hands the task to the cache as its discovery
task, so ``cache.ensure_discovery_ready()`` and ``cache.shutdown()`` treat it as theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from datetime import UTC, datetime
from typing import Any

from betterdb_agent_cache.discovery import (  # type: ignore[import-untyped]
    HEARTBEAT_KEY_PREFIX,
    HEARTBEAT_TTL_SECONDS,
    PROTOCOL_KEY,
    PROTOCOL_VERSION,
)

__all__ = ["CacheMonitor", "discovery_off"]

log = logging.getLogger(__name__)


def discovery_off(options: Any) -> Any:
    """The same ``AgentCacheOptions`` with Monitor discovery off (``CacheMonitor`` registers later)."""
    return dataclasses.replace(options, discovery=dataclasses.replace(options.discovery, enabled=False))


class CacheMonitor:
    """Registers the cache tiers with Monitor once asked to, and keeps their heartbeat.

    Args:
        options: the facade's ``AgentCacheOptions`` as the caller gave them (discovery
            on or off); the ``AgentCache`` itself is built from ``discovery_off(options)``.
    """

    def __init__(self, options: Any) -> None:
        self._options = options
        self._registration: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @property
    def enabled(self) -> bool:
        return bool(self._options.discovery.enabled)

    @property
    def registered(self) -> bool:
        """Whether ``register`` has started the registration (it may still be running)."""
        return self._registration is not None

    def register(self, cache: Any) -> None:
        """Start ``cache``'s Monitor registration, once; a no-op with discovery off.

        Call it only once this user has proved it owns the name. Needs a running loop.
        """
        if self._registration is not None or not self.enabled:
            return
        task = asyncio.get_running_loop().create_task(cache._register_discovery(self._options))
        self._registration = cache._discovery_task = task

    def start_heartbeat(self) -> None:
        """Start writing the heartbeat (once; a no-op with discovery off) until ``stop``."""
        if self._heartbeat is None and self.enabled:
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())

    async def stop(self) -> None:
        """Stop the heartbeat, after its write in flight if any. Idempotent."""
        if self._heartbeat is not None:
            self._stop.set()
            await self._heartbeat
            self._heartbeat = None

    async def _beat(self) -> None:
        """Keep the heartbeat alive (betterdb-agent-cache 0.12 never writes it).

        Its ``DiscoveryManager`` sends ``SET key value 'EX' 60`` and ``SET key 1 'NX'``
        positionally, which valkey-py reads as ``ex='EX', px=60`` / ``ex='NX'`` and refuses
        client-side; the error is swallowed, so Monitor sees the cache marker but never a
        live instance. This writes ``__betterdb:heartbeat:<name>`` (``EX 60``) and
        ``__betterdb:protocol`` (``NX``) every heartbeat interval until ``stop()``;
        harmless (same values) once the upstream writes work. Stopped by an event, not by
        cancellation: a cancel landing inside a valkey-py call can be swallowed on 3.11.
        """
        key = f"{HEARTBEAT_KEY_PREFIX}{self._options.name}"
        interval = max(1.0, self._options.discovery.heartbeat_interval_ms / 1000)
        client = self._options.client
        while not self._stop.is_set():
            try:
                await client.set(key, datetime.now(UTC).isoformat(), ex=HEARTBEAT_TTL_SECONDS)
                await client.set(PROTOCOL_KEY, str(PROTOCOL_VERSION), nx=True)
            except Exception as exc:  # advisory: never take the agent down
                log.debug("cache tiers' Monitor heartbeat failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)
