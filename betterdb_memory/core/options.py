"""Option objects of the seed contract (betterdb-agent-memory's names), as small dataclasses.

A user of betterdb-agent-memory passes these to ``MemoryStore`` and ``AgentMemory``
unchanged; every name, field and default here is the reference's. ``None`` fields
mean "the default" everywhere, as in the reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .scoring import Weights

__all__ = [
    "AgentMemoryConfig",
    "AgentMemoryRecallConfig",
    "ConsolidationConfig",
    "MemoryConfigRefreshConfig",
    "MemoryDiscoveryConfig",
    "MemoryListOptions",
    "MemoryScope",
    "MemoryTelemetryOptions",
    "RecallWeights",
    "ReinforceMode",
]

#: The reference's name for the composite-score weights (``similarity``, ``recency``,
#: ``importance``); the same class as ``Weights``.
RecallWeights = Weights


#: How a recall reinforces its hits: ``"sync"`` awaits the update, ``"background"`` spawns it.
ReinforceMode = Literal["sync", "background"]


@dataclass
class MemoryScope:
    """Where memories live: ``thread_id`` / ``agent_id`` / ``namespace`` (None = any)."""

    thread_id: str | None = None
    agent_id: str | None = None
    namespace: str | None = None


@dataclass
class MemoryDiscoveryConfig:
    """BetterDB Monitor discovery: the ``version`` the marker reports and the heartbeat period."""

    version: str | None = None
    heartbeat_interval_ms: int | None = None


@dataclass
class MemoryConfigRefreshConfig:
    """Re-reading the live config hash (``<name>:__mem_config``): on/off and the period in ms."""

    enabled: bool | None = None
    interval_ms: int | None = None


@dataclass
class ConsolidationConfig:
    """Facts-mode defaults: the ``source`` written on fact memories and their importance.

    ``enabled`` is accepted and ignored (the reference keeps it for compatibility).
    """

    enabled: bool | None = None
    fact_source: str | None = None
    fact_importance: float | None = None


@dataclass
class MemoryTelemetryOptions:
    """Where metrics and spans go (the reference's fields, then ``tracer_provider``).

    ``tracer_name``: the OpenTelemetry instrumentation scope (default
    ``@betterdb/agent-memory``, the prefix BetterDB Monitor keeps); ``metrics_prefix``:
    the metric-name prefix (default ``agent_memory``); ``registry``: a Prometheus
    registry (default: the global one); ``tracer_provider``: an OpenTelemetry provider
    (default: the global one).
    """

    tracer_name: str | None = None
    metrics_prefix: str | None = None
    registry: Any = None
    tracer_provider: Any = None


@dataclass
class AgentMemoryRecallConfig:
    weights: Weights | None = None
    half_life_seconds: float | None = None


@dataclass
class AgentMemoryConfig:
    """The memory tier's part of ``AgentMemoryOptions``."""

    default_threshold: float | None = None
    recall: AgentMemoryRecallConfig | None = None
    max_items_per_scope: int | None = None
    discovery: bool | MemoryDiscoveryConfig = True
    config_refresh: bool | MemoryConfigRefreshConfig | None = None


@dataclass
class MemoryListOptions:
    """Arguments of ``MemoryStore.list`` given as one object (the reference's form)."""

    thread_id: str | None = None
    agent_id: str | None = None
    namespace: str | None = None
    tags: list[str] | None = None
    limit: int | None = None
    offset: int | None = None
