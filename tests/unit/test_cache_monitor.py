"""``_cache_monitor``: the cache tiers register with Monitor only when asked, through
betterdb-agent-cache's own registration (whose private entry points this pins).

A recording client stands in for Valkey: the point is which writes happen and when.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
from betterdb_agent_cache import AgentCache, AgentCacheOptions
from betterdb_agent_cache.errors import AgentCacheUsageError
from betterdb_agent_cache.types import AnalyticsOptions, ConfigRefreshOptions, DiscoveryOptions

from betterdb_memory._cache_monitor import CacheMonitor, discovery_off

REGISTRY = "__betterdb:caches"


class RecordingClient:
    """Every awaited call is recorded as (method, args); HGET answers from ``registry``."""

    def __init__(self, registry: dict[str, str] | None = None) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.registry = dict(registry or {})

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((method, args))
            if method == "hget" and args[0] == REGISTRY:
                return self.registry.get(args[1])
            if method == "hset" and args[0] == REGISTRY:
                self.registry[args[1]] = args[2]
            return None

        return call

    def registry_writes(self) -> list[tuple[str, tuple[Any, ...]]]:
        return [c for c in self.calls if c[0] in ("hset", "hdel") and c[1][:1] == (REGISTRY,)]


def _options(client: Any, *, enabled: bool = True) -> Any:
    return AgentCacheOptions(
        client=client,
        name="tenant_b",
        analytics=AnalyticsOptions(disabled=True),
        config_refresh=ConfigRefreshOptions(enabled=False),
        discovery=DiscoveryOptions(enabled=enabled, heartbeat_interval_ms=3_600_000),
    )


def test_discovery_off_changes_only_the_discovery_switch() -> None:
    options = _options(object())
    off = discovery_off(options)
    assert off.discovery.enabled is False and options.discovery.enabled is True
    assert off.discovery.heartbeat_interval_ms == options.discovery.heartbeat_interval_ms
    assert (off.name, off.client, off.analytics) == (options.name, options.client, options.analytics)


def test_the_agent_cache_internals_register_relies_on_are_there() -> None:
    """``register`` runs ``AgentCache._register_discovery(options)`` and hands its task over as
    ``_discovery_task`` (what ``ensure_discovery_ready`` awaits): an upgrade that renames them
    fails here, not silently in production."""
    assert list(inspect.signature(AgentCache._register_discovery).parameters) == ["self", "options"]
    assert inspect.iscoroutinefunction(AgentCache._register_discovery)
    assert "self._discovery_task" in inspect.getsource(AgentCache.ensure_discovery_ready)


async def test_nothing_is_written_until_register_then_the_marker_is() -> None:
    client = RecordingClient()
    options = _options(client)
    cache = AgentCache(discovery_off(options))
    monitor = CacheMonitor(options)
    try:
        await cache.ensure_discovery_ready()
        for _ in range(5):
            await asyncio.sleep(0)  # let every task the constructor started run
        assert client.registry_writes() == [], "the cache tiers registered before being asked to"
        monitor.register(cache)
        monitor.register(cache)  # once only
        assert monitor.registered
        await cache.ensure_discovery_ready()
        writes = client.registry_writes()
        assert [(m, a[1]) for m, a in writes] == [("hset", "tenant_b")]
        assert json.loads(writes[0][1][2])["type"] == "agent_cache"
    finally:
        await cache.shutdown()


async def test_a_name_collision_surfaces_through_ensure_discovery_ready() -> None:
    taken = {"tenant_b": json.dumps({"type": "semantic_cache", "prefix": "tenant_b"})}
    client = RecordingClient(taken)
    options = _options(client)
    cache = AgentCache(discovery_off(options))
    try:
        CacheMonitor(options).register(cache)
        with pytest.raises(AgentCacheUsageError, match="collision"):
            await cache.ensure_discovery_ready()
        assert client.registry_writes() == []
    finally:
        await cache.shutdown()


async def test_with_discovery_off_register_and_the_heartbeat_do_nothing() -> None:
    client = RecordingClient()
    options = _options(client, enabled=False)
    cache = AgentCache(discovery_off(options))
    monitor = CacheMonitor(options)
    try:
        monitor.register(cache)
        monitor.start_heartbeat()
        await cache.ensure_discovery_ready()
        await monitor.stop()
        assert not monitor.registered and client.calls == []
    finally:
        await cache.shutdown()


async def test_the_heartbeat_writes_until_stopped() -> None:
    client = RecordingClient()
    monitor = CacheMonitor(_options(client))
    monitor.start_heartbeat()
    monitor.start_heartbeat()  # once only
    for _ in range(20):
        if len(client.calls) >= 2:
            break
        await asyncio.sleep(0.01)
    await monitor.stop()
    await monitor.stop()  # idempotent
    assert [m for m, _ in client.calls] == ["set", "set"]
    assert client.calls[0][1][0] == "__betterdb:heartbeat:tenant_b"
