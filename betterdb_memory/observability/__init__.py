"""Observability and operations: metrics, tracing, Monitor discovery, live config, telemetry.

Each module is standalone (no store import) so the store composes them:

* ``metrics``: ``MemoryMetrics``, Prometheus ``agent_memory_*`` with a ``store_name`` label.
* ``tracing``: ``Tracing``, one ``agent_memory.<op>`` span per public operation
  (scope ``@betterdb/agent-memory``).
* ``discovery``: ``DiscoveryMarker`` (BetterDB Monitor registry + heartbeat) and ``StatsHash``.
* ``live_config``: ``LiveConfig`` (the pure half, ``apply_config_hash`` and the
  ``ConfigSnapshot`` it yields, is ``core.tunables``; re-exported here).
* ``telemetry``: ``Telemetry``, opt-in anonymous product events.
"""

from __future__ import annotations

from ..core.tunables import (
    ConfigSnapshot,
    MemoryConfigSnapshot,
    Rejection,
    apply_config_hash,
    config_key,
)
from .discovery import (
    DiscoveryMarker,
    StatsHash,
    fallback_registry_field,
    heartbeat_key,
    registry_field,
    stats_key,
)
from .live_config import LiveConfig
from .metrics import MemoryMetrics
from .telemetry import Telemetry
from .tracing import Tracing, add_attributes, mark_recall, operation_span

__all__ = [
    "ConfigSnapshot",
    "DiscoveryMarker",
    "LiveConfig",
    "MemoryConfigSnapshot",
    "MemoryMetrics",
    "Rejection",
    "StatsHash",
    "Telemetry",
    "Tracing",
    "add_attributes",
    "apply_config_hash",
    "config_key",
    "fallback_registry_field",
    "heartbeat_key",
    "mark_recall",
    "operation_span",
    "registry_field",
    "stats_key",
]
