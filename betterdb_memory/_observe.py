"""What a store holds for observability, composed in one object.

Metrics, spans, the live config, the BetterDB Monitor marker, the stats hash and
opt-in telemetry (modules in ``observability/``) are wired here so ``MemoryStore``
makes one call per concern. Stats-hash counters are batched in process and flushed
about once a second by a short background task: Monitor polls every 15 s, and an
extra HINCRBY round trip on every recall would cost more than the recall itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.trace import Span

from .errors import BetterDBMemoryError, translate
from .keys import KeySpace
from .observability.discovery import DiscoveryMarker
from .observability.live_config import ConfigSnapshot, LiveConfig
from .observability.metrics import MemoryMetrics
from .observability.telemetry import Telemetry
from .observability.tracing import Tracing

__all__ = ["StoreObservability"]

log = logging.getLogger("betterdb_memory")


class StoreObservability:
    """Per-store metrics, tracing, live config, discovery and counters."""

    def __init__(
        self,
        client: Any,
        keys: KeySpace,
        defaults: ConfigSnapshot,
        *,
        registry: Any = None,
        tracer_provider: Any = None,
        discovery: bool = True,
        config_refresh_seconds: float = 5.0,
        heartbeat_interval: float = 30.0,
        telemetry: Telemetry | None = None,
    ) -> None:
        self._client = client
        self.keys = keys
        self.metrics = MemoryMetrics(keys.name, registry)
        self.tracing = Tracing(keys.name, keys.index, tracer_provider=tracer_provider)
        self.live = LiveConfig(
            client,
            keys.config,
            defaults,
            refresh_interval=config_refresh_seconds,
            on_reject=lambda rejected: self.metrics.observe_config_rejections(len(rejected)),
            on_error=lambda exc: self.metrics.observe_background_failure("config_refresh"),
        )
        self._discovery_enabled = discovery
        self._heartbeat_interval = heartbeat_interval
        self.discovery: DiscoveryMarker | None = None
        self.telemetry = telemetry or Telemetry(enabled=False)
        self._pending: Counter[str] = Counter()
        self._flush_task: asyncio.Task[None] | None = None
        self._started = False

    def span(self, operation: str, attributes: Any = None) -> AbstractContextManager[Span]:
        return self.tracing.span(operation, attributes)

    def config(self) -> ConfigSnapshot:
        return self.live.current()

    async def start(self, capabilities: list[str]) -> None:
        """Start background work once the store is ready: config refresh, Monitor marker."""
        if self._started:
            return
        self._started = True
        with contextlib.suppress(BetterDBMemoryError):
            await self.live.refresh()
        self.live.start()
        if self._discovery_enabled:
            self.discovery = DiscoveryMarker(
                self._client,
                self.keys.name,
                index_name=self.keys.index,
                stats_key=self.keys.stats,
                capabilities=capabilities,
                heartbeat_interval=self._heartbeat_interval,
                on_error=lambda exc: self.metrics.observe_background_failure("heartbeat"),
            )
            try:
                await self.discovery.register()
                await self.discovery.heartbeat_once()
            except BetterDBMemoryError as exc:
                log.warning("could not register with BetterDB Monitor: %s", exc)
            self.discovery.start()
        self.telemetry.capture("store_opened", {"capabilities": len(capabilities)})

    def count(self, counts: Mapping[str, int]) -> None:
        """Add to the stats hash counters (written within about a second)."""
        for k, v in counts.items():
            if v:
                self._pending[k] += v
        if self._pending and self._flush_task is None:
            with contextlib.suppress(RuntimeError):  # no running loop: flushed at close
                self._flush_task = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        try:
            await asyncio.sleep(1.0)
        finally:
            self._flush_task = None
        await self.flush()

    async def flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, Counter()
        try:
            pipe = self._client.pipeline(transaction=False)
            for k, v in pending.items():
                pipe.hincrby(self.keys.stats, k, v)
            await pipe.execute()
        except Exception as exc:
            self._pending.update(pending)
            self.metrics.observe_background_failure("stats_flush")
            log.warning(
                "could not update stats hash %s: %s", self.keys.stats, translate(exc, operation="stats")
            )

    async def close(self) -> None:
        if self._flush_task is not None:
            self._flush_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flush_task
            self._flush_task = None
        await self.flush()
        await self.live.close()
        if self.discovery is not None:
            await self.discovery.close()
        self.telemetry.close()
