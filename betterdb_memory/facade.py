"""``AgentMemory``: the memory tier plus the cache tiers of ``betterdb-agent-cache``, on one client and name.

``.memory`` is this library's ``MemoryStore``; ``.llm``, ``.tool`` and ``.session``
are the tiers of ``betterdb_agent_cache.AgentCache`` (``check`` / ``store`` /
``store_multipart``, ``set_policy`` / ``invalidate_by_tool``, ``get`` / ``set`` /
``destroy_thread`` ...), the same objects betterdb-agent-memory's facade exposes,
writing the same keys; ``.cache`` is the ``AgentCache`` itself (what its LangChain
cache and LangGraph checkpointer take).

Two ways to build one:

* the reference's: ``AgentMemory(AgentMemoryOptions(client=..., embed_fn=..., memory=AgentMemoryConfig(...)))``;
* this library's: ``await AgentMemory.connect(url)``, ``AgentMemory(client=..., name=...)``
  with every ``MemoryStore`` option, or ``AgentMemory(store=...)``.

One difference from the reference, on purpose: the cache tiers' product analytics
(PostHog, on by default in betterdb-agent-cache) are off unless the caller passes
``analytics=AnalyticsOptions(disabled=False)``, and ``DO_NOT_TRACK`` turns them off
even then.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from betterdb_agent_cache import AgentCache, AgentCacheOptions  # type: ignore[import-untyped]
from betterdb_agent_cache.types import (  # type: ignore[import-untyped]
    AnalyticsOptions,
    ConfigRefreshOptions,
    DiscoveryOptions,
    TelemetryOptions,
)

from ._cache_monitor import CacheMonitor, discovery_off
from .core.options import AgentMemoryConfig, MemoryTelemetryOptions
from .embedders.base import Embedder, EmbeddingFunction
from .errors import ConfigurationError, StoreClosedError
from .lifecycle import gated
from .observability.telemetry import do_not_track
from .store import MemoryStore

__all__ = ["AgentMemory", "AgentMemoryClosedError", "AgentMemoryOptions"]


def _analytics_off() -> Any:
    return AnalyticsOptions(disabled=True)


@dataclass(kw_only=True)
class AgentMemoryOptions(AgentCacheOptions):  # type: ignore[misc]
    """Options of the ``AgentMemory`` facade: every ``AgentCacheOptions`` field plus the memory tier.

    ``client`` / ``name`` (default ``"betterdb_ac"``) / ``default_ttl`` / ``tier_defaults`` /
    ``cost_table`` / ``use_default_cost_table`` / ``telemetry`` / ``analytics`` /
    ``config_refresh`` / ``discovery`` configure the cache tiers exactly as in
    betterdb-agent-cache (``telemetry.registry`` is shared with the memory tier);
    ``embed_fn`` and ``memory`` (``AgentMemoryConfig``) configure the memory tier.

    Differences from betterdb-agent-memory, both additive: ``analytics`` defaults
    to *disabled*, and ``embedder=`` (an ``Embedder``) may stand in for ``embed_fn``.
    """

    embed_fn: EmbeddingFunction | None = None
    memory: AgentMemoryConfig = field(default_factory=AgentMemoryConfig)
    # Same position as in AgentCacheOptions (positional use keeps working); only the default differs.
    analytics: Any = field(default_factory=_analytics_off, kw_only=False)
    embedder: Embedder | None = None


class AgentMemoryClosedError(StoreClosedError, RuntimeError):
    """The facade was closed; build a new one."""

    default_code = "state.facade_closed"


def _resolve_analytics(analytics: Any) -> Any:
    """Off unless asked for; ``DO_NOT_TRACK`` wins over a request (this project's telemetry rule)."""
    if analytics is None:
        return _analytics_off()
    if do_not_track() and not analytics.disabled:
        return dataclasses.replace(analytics, disabled=True)
    return analytics


def _cache_options(
    client: Any,
    name: str,
    *,
    default_ttl: int | None = None,
    tier_defaults: Mapping[str, Any] | None = None,
    cost_table: Mapping[str, Any] | None = None,
    use_default_cost_table: bool = True,
    telemetry: Any = None,
    analytics: Any = None,
    config_refresh: Any = None,
    discovery: Any = None,
) -> Any:
    return AgentCacheOptions(
        client=client,
        name=name,
        default_ttl=default_ttl,
        tier_defaults=dict(tier_defaults or {}),
        cost_table=dict(cost_table or {}),
        use_default_cost_table=use_default_cost_table,
        telemetry=telemetry if telemetry is not None else TelemetryOptions(),
        analytics=_resolve_analytics(analytics),
        config_refresh=config_refresh if config_refresh is not None else ConfigRefreshOptions(),
        discovery=discovery if discovery is not None else DiscoveryOptions(),
    )


def _store_from_options(options: Any) -> MemoryStore:
    """The reference facade's ``MemoryStore`` construction, option for option."""
    embed_fn = getattr(options, "embed_fn", None)
    embedder = getattr(options, "embedder", None)
    if embedder is None and not callable(embed_fn):
        raise ConfigurationError(
            "AgentMemory requires an embed_fn to back the memory tier", code="configuration.embed_fn"
        )
    m = getattr(options, "memory", None) or AgentMemoryConfig()
    recall = m.recall
    telemetry = getattr(options, "telemetry", None)
    registry = getattr(telemetry, "registry", None)
    extra: dict[str, Any] = {} if embedder is None else {"embedder": embedder}
    return MemoryStore(
        client=options.client,
        name=options.name,
        embed_fn=embed_fn,
        default_threshold=m.default_threshold,
        weights=recall.weights if recall is not None else None,
        half_life_seconds=recall.half_life_seconds if recall is not None else None,
        max_items_per_scope=m.max_items_per_scope,
        discovery=m.discovery,
        config_refresh=m.config_refresh,
        telemetry=MemoryTelemetryOptions(registry=registry) if registry is not None else None,
        **extra,
    )


@gated  # every public coroutine method but close raises AgentMemoryClosedError once close() started
class AgentMemory:
    """The memory tier (``.memory``) plus the llm / tool / session cache tiers of betterdb-agent-cache.

    Build it with ``AgentMemory(AgentMemoryOptions(...))`` (betterdb-agent-memory's form),
    ``await AgentMemory.connect(url)`` (owns the client and, without a URL, the embedded
    server), ``AgentMemory(client=..., name=...)`` with your own client (never closed
    here), or ``AgentMemory(store=...)`` around a store you built. Call ``initialize()``
    (or use ``async with``), and ``close()`` at the end.

    Args:
        options: an ``AgentMemoryOptions`` (positional or ``options=``); nothing else may
            be given with it.
        client: a ``valkey.asyncio.Valkey``.
        name: key prefix and index name of every tier.
        embedder: the store's embedder.
        store: an existing ``MemoryStore`` instead of ``client`` / ``name`` / ``embedder``.
        default_ttl, tier_defaults, cost_table, use_default_cost_table, analytics: the
            ``AgentCacheOptions`` fields of the same names (analytics off by default).
        cache_telemetry, cache_discovery, cache_config_refresh: its ``telemetry``,
            ``discovery`` and ``config_refresh`` (renamed here: the store has options of
            those names).
        **store_options: every other ``MemoryStore`` option, passed on unchanged.

    Raises:
        ConfigurationError: no client, no embed function in ``options``, or two ways of
            building given at once.
    """

    def __init__(
        self,
        options: AgentMemoryOptions | None = None,
        *,
        client: Any = None,
        name: str = "betterdb",
        embedder: Embedder | None = None,
        store: MemoryStore | None = None,
        default_ttl: int | None = None,
        tier_defaults: Mapping[str, Any] | None = None,
        cost_table: Mapping[str, Any] | None = None,
        use_default_cost_table: bool = True,
        analytics: Any = None,
        cache_telemetry: Any = None,
        cache_discovery: Any = None,
        cache_config_refresh: Any = None,
        **store_options: Any,
    ) -> None:
        self._closed = False
        if options is not None:
            if client is not None or embedder is not None or store is not None or store_options:
                raise ConfigurationError(
                    "pass either AgentMemoryOptions or keyword options, not both",
                    code="configuration.ambiguous",
                    details={"options": sorted(store_options)},
                )
            if getattr(options, "client", None) is None:
                raise ConfigurationError("AgentMemoryOptions needs client=", code="configuration.client")
            cache_options = _cache_options(
                options.client,
                options.name,
                default_ttl=getattr(options, "default_ttl", None),
                tier_defaults=getattr(options, "tier_defaults", None),
                cost_table=getattr(options, "cost_table", None),
                use_default_cost_table=getattr(options, "use_default_cost_table", True),
                telemetry=getattr(options, "telemetry", None),
                analytics=getattr(options, "analytics", None),
                config_refresh=getattr(options, "config_refresh", None),
                discovery=getattr(options, "discovery", None),
            )
            store = _store_from_options(options)
        else:
            if store is None:
                if client is None:
                    raise ConfigurationError(
                        "AgentMemory needs AgentMemoryOptions, client= or store=", code="configuration.client"
                    )
                store = MemoryStore(client=client, name=name, embedder=embedder, **store_options)
            elif client is not None or embedder is not None or store_options:
                raise ConfigurationError(
                    "pass either store= or client=/embedder=/store options, not both",
                    code="configuration.ambiguous",
                    details={"options": sorted(store_options)},
                )
            cache_options = _cache_options(
                store.client,
                store.name,
                default_ttl=default_ttl,
                tier_defaults=tier_defaults,
                cost_table=cost_table,
                use_default_cost_table=use_default_cost_table,
                telemetry=cache_telemetry,
                analytics=analytics,
                config_refresh=cache_config_refresh,
                discovery=cache_discovery,
            )
        self._memory = store
        self._cache_options = cache_options
        # Discovery off: the cache tiers register with Monitor only once the memory index
        # has proved the name (_cache_monitor.py says why), in initialize() or when the
        # memory tier first readies its index.
        self._cache = AgentCache(discovery_off(cache_options))
        self._monitor = CacheMonitor(cache_options)
        # AgentCache starts its policy refresh only when built inside a running event
        # loop; built outside one, initialize() builds it again inside.
        self._cache_started = _loop_running()
        self._register_when_memory_ready()

    @classmethod
    async def connect(
        cls,
        url: str | None = None,
        *,
        name: str = "betterdb",
        embedder: Embedder | None = None,
        default_ttl: int | None = None,
        tier_defaults: Mapping[str, Any] | None = None,
        cost_table: Mapping[str, Any] | None = None,
        use_default_cost_table: bool = True,
        analytics: Any = None,
        cache_telemetry: Any = None,
        cache_discovery: Any = None,
        cache_config_refresh: Any = None,
        **store_options: Any,
    ) -> AgentMemory:
        """Open everything on ``url`` (or the embedded server); see ``MemoryStore.connect``."""
        store = await MemoryStore.connect(url, name=name, embedder=embedder, **store_options)
        try:
            return cls(
                store=store, default_ttl=default_ttl, tier_defaults=tier_defaults, cost_table=cost_table,
                use_default_cost_table=use_default_cost_table, analytics=analytics,
                cache_telemetry=cache_telemetry, cache_discovery=cache_discovery,
                cache_config_refresh=cache_config_refresh,
            )  # fmt: skip
        except BaseException:
            await store.close()
            raise

    # -- tiers ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise AgentMemoryClosedError(
                "this AgentMemory is closed; create a new one", details={"name": self._memory.name}
            )

    @property
    def memory(self) -> MemoryStore:
        """The long-term memory tier."""
        self._check_open()
        return self._memory

    @property
    def cache(self) -> Any:
        """The ``betterdb_agent_cache.AgentCache`` behind ``llm`` / ``tool`` / ``session``."""
        self._check_open()
        return self._cache

    @property
    def llm(self) -> Any:
        """LLM response cache tier (``check`` / ``store`` / ``store_multipart`` ...)."""
        return self.cache.llm

    @property
    def tool(self) -> Any:
        """Tool result cache tier (``check`` / ``store`` / ``set_policy`` ...)."""
        return self.cache.tool

    @property
    def session(self) -> Any:
        """Session state tier (``get`` / ``set`` / ``get_all`` / ``destroy_thread`` ...)."""
        return self.cache.session

    @property
    def name(self) -> str:
        return self._memory.name

    @property
    def closed(self) -> bool:
        return self._closed

    # -- lifecycle -----------------------------------------------------------------------

    async def initialize(self) -> None:
        """Create the memory index, then wait for both tiers' discovery and start config refresh.

        Raises what creating the index raises, and a discovery name collision of
        either tier, as the reference does. The cache tiers write their Monitor marker
        only once the memory index exists for this user (here, or at the memory tier's
        first operation), so a user never writes the marker of a name it cannot use.
        """
        if not self._cache_started:
            unstarted, self._cache = self._cache, AgentCache(discovery_off(self._cache_options))
            self._cache_started = True
            await unstarted.shutdown()
        await self._memory.ensure_index()
        self._register_cache()
        await asyncio.gather(
            self._cache.ensure_discovery_ready(),
            self._memory.ensure_discovery_ready(),
            self._memory.ensure_config_refresh_started(),
        )
        self._monitor.start_heartbeat()

    def _register_when_memory_ready(self) -> None:
        """Register the cache tiers when the memory tier's index is (or becomes) ready.

        The memory tier readies its index lazily, on its first operation; a facade that
        stores and recalls without calling ``initialize()`` still gets its cache marker
        then, as it got it at construction before. Chained onto the store's own
        on-ready callback (its Monitor marker and live config), which the index runs
        each time it has created or adopted the index.
        """
        index = self._memory.index
        first = index._on_ready

        async def on_ready(capabilities: list[str]) -> None:
            if first is not None:
                await first(capabilities)
            self._register_cache()

        index._on_ready = on_ready
        if index.ready:  # a store= that has already proved its name
            self._register_cache()

    def _register_cache(self) -> None:
        """Start the cache tiers' Monitor registration (once) on a started AgentCache.

        Built outside a loop, the AgentCache is not started: initialize() replaces it
        and registers the new one.
        """
        if not self._closed and self._cache_started:
            self._monitor.register(self._cache)

    async def close(self) -> None:
        """Stop the cache tiers (heartbeat, policy refresh) and close the store, even if one fails.

        Idempotent. Cache tiers first: the store closes the client when it owns it.
        """
        if self._closed:
            return
        self._closed = True
        await self._monitor.stop()
        try:
            # AgentCache.shutdown() neither cancels nor awaits its discovery registration:
            # let it finish, so nothing of the cache runs on the client after close().
            with contextlib.suppress(Exception):
                await self._cache.ensure_discovery_ready()
            await self._cache.shutdown()  # deletes the heartbeat key
            await asyncio.sleep(0)  # let the tasks it cancelled unwind before the client closes
        finally:
            await self._memory.close()

    async def erase(self, *, agent_id: str, thread_id: str | None = None) -> int:
        """Right to erasure across tiers: memories and turns (``MemoryStore.erase``) and session state.

        The session tier is keyed by thread alone (betterdb-agent-cache's layout): with
        ``thread_id`` that thread's session state is destroyed too; without it, session
        state is left alone (it does not record agents): erase each thread, or call
        ``agent.session.destroy_thread``. LLM and tool caches are keyed by request and
        are not touched: do not cache responses that carry personal data, or give them
        a short TTL. Returns what ``MemoryStore.erase`` returns plus the session-state
        keys removed.
        """
        n = int(await self._memory.erase(agent_id=agent_id, thread_id=thread_id))
        if thread_id is not None:
            n += int(await self._cache.session.destroy_thread(thread_id))
        return n

    async def __aenter__(self) -> AgentMemory:
        await self.initialize()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
