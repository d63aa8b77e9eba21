"""What a store holds for observability, composed in one object.

Metrics, spans, the live config, the BetterDB Monitor marker, the stats hash and
opt-in telemetry (modules in ``observability/``) are wired here so ``MemoryStore``
makes one call per concern. Stats-hash counters are batched in process and flushed
about once a second by a short background task: Monitor polls every 15 s, and an
extra HINCRBY round trip on every recall would cost more than the recall itself.

The recall near miss (nothing returned, but the nearest candidate sat just past
the threshold) is decided and warned about here too: ``is_near_miss`` is the
reference's rule, ``warn_near_miss`` its one warning, ``StoreObservability.near_miss``
both, once per store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import warnings
from collections import Counter
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Final

from opentelemetry.trace import Span

from ..backend.client import Backend
from ..core.keys import KeySpace
from ..core.tunables import ConfigSnapshot
from ..errors import BetterDBMemoryError, ConfigurationError, StoreClosedError
from ..lifecycle import Spawn
from .discovery import DiscoveryMarker
from .live_config import LiveConfig
from .metrics import MemoryMetrics
from .telemetry import Telemetry
from .tracing import Tracing, mark_recall, mark_remember

__all__ = ["MARKER_FEATURES", "NEAR_MISS_FACTOR", "StoreObservability", "is_near_miss", "warn_near_miss"]

log = logging.getLogger(__name__)

#: The feature names betterdb-agent-memory publishes in its discovery marker; the
#: engine capabilities a store probed follow them.
MARKER_FEATURES: Final = ("recall", "consolidate", "reinforce")

#: An empty recall is a near miss when its nearest candidate's distance is past the
#: threshold but within this multiple of it (the reference's "within 2x").
NEAR_MISS_FACTOR: Final = 2.0

_PACKAGE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_near_miss(nearest_distance: float, threshold: float, *, factor: float = NEAR_MISS_FACTOR) -> bool:
    """Whether an empty recall's nearest candidate sat just past the distance ceiling.

    The reference's rule: strictly outside the threshold (a candidate within it was
    admitted, so an empty result there is not the threshold's doing) and within
    ``factor`` times it.
    """
    return math.isfinite(nearest_distance) and threshold < nearest_distance <= threshold * factor


def _stacklevel_outside_package() -> int:
    """The ``warnings.warn`` stacklevel of the first frame outside this package.

    A fixed stacklevel breaks whenever the call chain inside the store changes; this
    points the warning at the caller's ``await store.recall(...)`` line wherever the
    check runs (coroutine frames chain through ``f_back`` while they run).
    """
    frame = sys._getframe(2)  # the caller of warn_near_miss
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def warn_near_miss(
    store_name: str, nearest_distance: float, threshold: float, *, config_key: str | None = None
) -> None:
    """Warn (``UserWarning``) that a recall came back empty just past its threshold.

    The message gives the nearest cosine distance, the threshold, and the ways to
    raise it; the warning points at the caller's line, outside this package.
    Whether to warn (once per store) is the caller's decision: see
    ``StoreObservability.near_miss``.
    """
    where = f", or the live recall.threshold field of {config_key}" if config_key else ""
    warnings.warn(
        f"recall on {store_name!r} returned 0 hits, but the nearest candidate was at cosine distance "
        f"{nearest_distance:.3f}, just past the threshold {threshold:g}. If your embedding model places "
        f"correct matches that far apart, raise the threshold: recall(threshold=...), the store's "
        f"default_threshold{where}. (Warned once per store.)",
        UserWarning,
        stacklevel=_stacklevel_outside_package(),
    )


def _telemetry_options(telemetry: object) -> dict[str, Any]:
    """The fields of a ``MemoryTelemetryOptions``-like object (read by name, all optional)."""
    prefix = getattr(telemetry, "metrics_prefix", None)
    if prefix is None:
        prefix = getattr(telemetry, "prefix", None)
    return {
        "registry": getattr(telemetry, "registry", None),
        "tracer_provider": getattr(telemetry, "tracer_provider", None),
        "metrics_prefix": prefix,
        "tracer_name": getattr(telemetry, "tracer_name", None),
    }


def _product_analytics(telemetry: object, analytics: object) -> Telemetry:
    """The product-analytics ``Telemetry``: off unless turned on; ``analytics=False`` wins.

    ``analytics`` is the reference's option (``True`` opts in here; there it was on
    by default). A ``Telemetry`` given as ``telemetry=`` (this library's earlier
    spelling) is used as is. ``DO_NOT_TRACK`` and ``BETTERDB_TELEMETRY=false`` still
    win at every event (``Telemetry.active``).
    """
    if analytics is False:
        return Telemetry(enabled=False)
    if isinstance(analytics, Telemetry):
        return analytics
    if analytics is True:
        return Telemetry.opt_in()
    if analytics is not None:
        raise ConfigurationError(
            f"analytics must be a bool or a Telemetry, got {type(analytics).__name__}",
            code="configuration.analytics",
            details={"argument": "analytics"},
        )
    if isinstance(telemetry, Telemetry):
        return telemetry
    if telemetry is True:
        return Telemetry.opt_in()
    return Telemetry(enabled=False)


class StoreObservability:
    """Per-store metrics, tracing, live config, discovery and counters.

    Args:
        backend / keys / defaults: the store's backend, key space and constructor tunables.
        spawn: starts the background loops (live config, heartbeat, stats flush) under
            the store's supervisor; None: plain tasks of the running loop.
        registry / tracer_provider: where metrics and spans go (default: the globals).
        discovery / config_refresh_seconds / heartbeat_interval: Monitor and live config.
        telemetry: either the reference's ``MemoryTelemetryOptions`` (``registry``,
            ``tracer_provider``, ``metrics_prefix``, ``tracer_name``; its fields
            override the arguments of the same meaning), or this library's product
            analytics ``Telemetry`` / ``bool`` (earlier spelling of ``analytics``).
        analytics: anonymous product analytics. ``True`` opts in (key and host from
            ``BETTERDB_TELEMETRY_KEY`` / ``_HOST``), ``False`` or ``None``: off, or a
            ``Telemetry``. Off by default, unlike the reference; ``DO_NOT_TRACK``
            always wins.
        metrics_prefix / tracer_name: metric-name prefix and instrumentation scope.
    """

    def __init__(
        self,
        backend: Backend | None,
        keys: KeySpace,
        defaults: ConfigSnapshot,
        *,
        spawn: Spawn | None = None,
        registry: Any = None,
        tracer_provider: Any = None,
        discovery: bool = True,
        config_refresh_seconds: float = 5.0,
        heartbeat_interval: float = 30.0,
        telemetry: object = None,
        analytics: bool | Telemetry | None = None,
        metrics_prefix: str | None = None,
        tracer_name: str | None = None,
    ) -> None:
        if telemetry is not None and not isinstance(telemetry, Telemetry | bool):
            opts = _telemetry_options(telemetry)
            registry = opts["registry"] if opts["registry"] is not None else registry
            tracer_provider = (
                opts["tracer_provider"] if opts["tracer_provider"] is not None else tracer_provider
            )
            metrics_prefix = opts["metrics_prefix"] if opts["metrics_prefix"] is not None else metrics_prefix
            tracer_name = opts["tracer_name"] if opts["tracer_name"] is not None else tracer_name
        self._backend = backend
        self._spawn = spawn
        self.keys = keys
        self.metrics = MemoryMetrics(keys.name, registry, prefix=metrics_prefix)
        self.tracing = Tracing(
            keys.name, keys.index, tracer_provider=tracer_provider, tracer_name=tracer_name
        )
        self.live = LiveConfig(
            backend if backend is not None else Backend(None),  # type: ignore[arg-type]  # unit tests: no server
            keys.config,
            defaults,
            refresh_interval=config_refresh_seconds,
            on_reject=lambda rejected: self.metrics.observe_config_rejections(len(rejected)),
            on_error=lambda exc: self.metrics.observe_background_failure("config_refresh"),
            spawn=spawn,
        )
        self._discovery_enabled = discovery
        self._heartbeat_interval = heartbeat_interval
        self.discovery: DiscoveryMarker | None = None
        self.telemetry = _product_analytics(telemetry, analytics)
        self._near_miss_warned = False
        self.near_misses = 0
        self._pending: Counter[str] = Counter()
        self._flush_task: asyncio.Task[None] | None = None
        self._started = False

    def span(self, operation: str, attributes: Any = None) -> AbstractContextManager[Span]:
        return self.tracing.span(operation, attributes)

    def config(self) -> ConfigSnapshot:
        return self.live.current()

    def mark_recall(
        self,
        span: Span,
        hits: int,
        *,
        k: int | None = None,
        candidates: int | None = None,
        matched_key: str | None = None,
        nearest_distance: float | None = None,
    ) -> None:
        """Set ``cache.hit`` (``hits > 0``) and the recall counts on a recall span.

        See ``observability.tracing.mark_recall``; ``nearest_distance`` only for a
        near miss (as returned by ``near_miss``'s check).
        """
        mark_recall(
            span, hits, k=k, candidates=candidates, matched_key=matched_key, nearest_distance=nearest_distance
        )

    def mark_remember(
        self, span: Span, *, importance: float | None = None, ttl: float | None = None, key: str | None = None
    ) -> None:
        """Set ``memory.importance`` / ``memory.ttl`` / ``cache.key`` on a remember span."""
        mark_remember(span, importance=importance, ttl=ttl, key=key)

    def near_miss(self, nearest_distance: float, threshold: float, *, checked: bool | None = None) -> bool:
        """Check an empty recall for a near miss; on the first one of this store, warn.

        Call it only when a recall returned nothing. Returns whether it was a near
        miss (pass that to ``metrics.observe_recall(near_miss=...)``, which counts
        ``agent_memory_recall_near_miss_total``); ``near_misses`` counts them too.
        ``checked``: the caller already decided (a re-ranked recall's gate); None: the
        nearest distance within ``NEAR_MISS_FACTOR`` times the threshold decides.
        """
        if not (is_near_miss(nearest_distance, threshold) if checked is None else checked):
            return False
        self.near_misses += 1
        if not self._near_miss_warned:
            self._near_miss_warned = True
            warn_near_miss(self.keys.name, nearest_distance, threshold, config_key=self.keys.config)
        return True

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
                self._backend if self._backend is not None else Backend(None),  # type: ignore[arg-type]
                self.keys.name,
                index_name=self.keys.index,
                stats_key=self.keys.stats,
                capabilities=[*MARKER_FEATURES, *capabilities],
                heartbeat_interval=self._heartbeat_interval,
                on_error=lambda exc: self.metrics.observe_background_failure("heartbeat"),
                spawn=self._spawn,
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
            # No running loop, or a closed store: flushed at close.
            with contextlib.suppress(RuntimeError, StoreClosedError):
                coro = self._flush_later()
                try:
                    self._flush_task = (
                        self._spawn(coro, name="stats_flush", daemon=True)
                        if self._spawn is not None
                        else asyncio.get_running_loop().create_task(coro)
                    )
                except BaseException:
                    coro.close()
                    raise

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
        if self._backend is None or self._backend.closed:
            self._pending.update(pending)
            return

        def build(pipe: Any) -> None:
            for k, v in pending.items():
                pipe.hincrby(self.keys.stats, k, v)

        try:
            # Not retried: a replayed increment would count twice.
            await self._backend.pipeline("stats", build, idempotent=False)
        except BetterDBMemoryError as exc:
            self._pending.update(pending)
            self.metrics.observe_background_failure("stats_flush")
            log.warning("could not update stats hash %s: %s", self.keys.stats, exc)

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
