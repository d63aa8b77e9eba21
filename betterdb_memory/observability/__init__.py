"""Observability and operations: metrics, tracing, Monitor discovery, live config, telemetry.

Each module is standalone (no store import) so the store composes them:

* ``metrics``: ``MemoryMetrics``, Prometheus ``agent_memory_*`` with a ``store_name`` label.
* ``tracing``: ``Tracing``, one ``memory.<op>`` span per public operation.
* ``discovery``: ``DiscoveryMarker`` (BetterDB Monitor registry + heartbeat) and ``StatsHash``.
* ``live_config``: ``LiveConfig`` and the pure ``apply_config_hash``.
* ``telemetry``: ``Telemetry``, opt-in anonymous product events.
"""

from __future__ import annotations

from .discovery import (
    DiscoveryMarker,
    StatsHash,
    fallback_registry_field,
    heartbeat_key,
    registry_field,
    stats_key,
)
from .live_config import ConfigSnapshot, LiveConfig, Rejection, apply_config_hash, config_key
from .metrics import MemoryMetrics
from .telemetry import Telemetry
from .tracing import Tracing, add_attributes, operation_span

__all__ = [
    "ConfigSnapshot",
    "DiscoveryMarker",
    "LiveConfig",
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
    "operation_span",
    "registry_field",
    "stats_key",
]
