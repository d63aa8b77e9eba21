"""The long-term options of ``MemoryStore(...)``, checked: what its parts are built from.

Every argument is checked here before the store creates anything (no backend, no
task, no key), so a bad one raises ``ConfigurationError`` with the argument's name
(``core.validation``: a constructor argument is a setting) and nothing is left half-built. The session options are checked
by ``tiers.session_config.SessionConfig.of``; the HNSW parameters by the index.

Defaults follow the reference (betterdb-agent-memory): a caller's ``embed_fn`` gets
its threshold 0.33 and KNN-only ranking; an embedder of this package brings its
calibrated threshold and margin, and re-ranks text recall: with ``LearnedRanker``
for the shipped ONNX MiniLM (its weights are fitted on that model's distances),
with ``HybridRanker`` for any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .backend.replication import ReplicaWait
from .backend.retry import RetryPolicy
from .core.filter_fields import MetadataFields
from .core.learned_rank import FITTED_MODEL_ID, LearnedRanker
from .core.options import (
    ConsolidationConfig,
    MemoryConfigRefreshConfig,
    MemoryDiscoveryConfig,
    MemoryTelemetryOptions,
    ReinforceMode,
)
from .core.ranking import HybridRanker, Reranker
from .core.scoring import DEFAULT_HALF_LIFE_SECONDS, Weights
from .core.tunables import ConfigSnapshot
from .core.validation import check_distance_threshold, check_importance, check_int, check_number, check_tags
from .embedders.base import (
    Embedder,
    EmbeddingFunction,
    as_embedder,
    default_margin_of,
    default_threshold_of,
)
from .embedders.lazy import LazyFunctionEmbedder
from .errors import ConfigurationError, ValidationError
from .tiers.runtime import Settings

__all__ = ["DEFAULT_THRESHOLD", "StoreOptions", "check_options", "default_reranker"]

#: The reference's default cosine-distance ceiling for a caller's ``embed_fn``.
DEFAULT_THRESHOLD = 0.33
_DEFAULT_FACT_SOURCE = "fact"
_DEFAULT_FACT_IMPORTANCE = 0.7
_DEFAULT_REFRESH_SECONDS = 5.0
_MIN_REFRESH_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """The checked options: the embedder, the live-config defaults and the fixed settings.

    ``lazy`` is the embedder when it is an ``embed_fn`` whose dimension is learned
    from its first answer. ``refresh_seconds``: None when the live config is not
    re-read. ``heartbeat_interval``: seconds, from ``MemoryDiscoveryConfig`` when it
    sets one. ``wait``: the replicas each write waits for (None: ``wait_replicas=0``).
    """

    embedder: Embedder | LazyFunctionEmbedder
    lazy: LazyFunctionEmbedder | None
    threshold: float
    defaults: ConfigSnapshot
    weights: Weights
    settings: Settings
    retry: RetryPolicy
    discovery: bool
    refresh_seconds: float | None
    heartbeat_interval: float
    metadata_fields: MetadataFields = field(default_factory=MetadataFields)
    wait: ReplicaWait | None = None


def check_options(
    *,
    embed_fn: EmbeddingFunction | None,
    embedder: Embedder | None,
    dimensions: int | None,
    default_threshold: float | None,
    weights: Weights | Mapping[str, float] | None,
    half_life_seconds: float | None,
    max_items_per_scope: int | None,
    discovery: object,
    config_refresh: object,
    consolidation: object,
    telemetry: object,
    dedup: object,
    candidate_factor: object,
    reranker: object,
    rerank_candidates: object,
    relevance_margin: object,
    text_candidates: object,
    reinforce_mode: object,
    reinforce_write_interval: object,
    retry: RetryPolicy | None,
    heartbeat_interval: float,
    metadata_fields: object = None,
    wait_replicas: object = 0,
    wait_timeout: object = 1.0,
    text_timeout_ms: object = 500,
    implicit_updates: object = True,
) -> StoreOptions:
    """Check ``MemoryStore``'s long-term arguments (see its docstring for their meanings).

    Raises:
        ConfigurationError: an object of the wrong kind (embedder, reranker, options), or
            a value of the wrong type or out of its range.
    """
    fields = MetadataFields.of(metadata_fields)
    if embedder is not None and embed_fn is not None:
        raise ConfigurationError("pass embed_fn= or embedder=, not both", code="configuration.embedder")
    lazy: LazyFunctionEmbedder | None = None
    if embedder is None and embed_fn is None:
        from .embedders import default_embedder

        embedder = default_embedder()
    chosen: Embedder | LazyFunctionEmbedder
    if embed_fn is not None and dimensions is None:
        if not callable(embed_fn):
            raise ConfigurationError("embed_fn must be an async callable", code="configuration.embedder")
        chosen = lazy = LazyFunctionEmbedder(embed_fn)
    else:
        chosen = as_embedder(embedder if embedder is not None else embed_fn, dimensions=dimensions)
    with_embed_fn = embed_fn is not None
    if default_threshold is None:
        calibrated = None if with_embed_fn else default_threshold_of(chosen)
        default_threshold = DEFAULT_THRESHOLD if calibrated is None else 2.0 * (1.0 - calibrated)
    threshold = check_distance_threshold(default_threshold, name="default_threshold", setting=True)
    assert threshold is not None
    w = Weights.of(dict(weights) if isinstance(weights, Mapping) else weights, setting=True)
    if half_life_seconds is None:
        half_life_seconds = DEFAULT_HALF_LIFE_SECONDS
    half_life_seconds = check_number(half_life_seconds, "half_life_seconds", positive=True, setting=True)
    defaults = ConfigSnapshot(
        threshold=threshold,
        weight_similarity=w.similarity,
        weight_recency=w.recency,
        weight_importance=w.importance,
        half_life_seconds=float(half_life_seconds),
        max_items_per_scope=_positive_int_or_none("max_items_per_scope", max_items_per_scope),
    )
    if relevance_margin is None or relevance_margin is True:
        margin = None if with_embed_fn else default_margin_of(chosen)
    elif relevance_margin is False:
        margin = None
    else:
        margin = check_distance_threshold(relevance_margin, name="relevance_margin", setting=True)
    settings = _settings(
        threshold, with_embed_fn, consolidation, dedup, reinforce_mode, reinforce_write_interval,
        candidate_factor, reranker, rerank_candidates, margin, text_candidates, chosen.model_id,
    )  # fmt: skip
    budget = check_int(text_timeout_ms, "text_timeout_ms", minimum=1, maximum=60_000, setting=True)
    if not isinstance(implicit_updates, bool):
        raise ConfigurationError(
            "implicit_updates must be a bool",
            code="configuration.type",
            details={"argument": "implicit_updates", "type": type(implicit_updates).__name__},
        )
    settings = replace(settings, text_timeout_ms=budget, implicit_updates=implicit_updates)
    if telemetry is not None and not isinstance(telemetry, MemoryTelemetryOptions):
        raise ConfigurationError(
            "telemetry must be a MemoryTelemetryOptions (product analytics: analytics=True)",
            code="configuration.telemetry",
            details={"type": type(telemetry).__name__},
        )
    if discovery is not True and discovery is not False and not isinstance(discovery, MemoryDiscoveryConfig):
        raise ConfigurationError(
            "discovery must be a bool or MemoryDiscoveryConfig", code="configuration.discovery"
        )
    if isinstance(discovery, MemoryDiscoveryConfig) and discovery.heartbeat_interval_ms is not None:
        heartbeat_interval = discovery.heartbeat_interval_ms / 1000.0
    return StoreOptions(
        embedder=chosen,
        lazy=lazy,
        threshold=threshold,
        defaults=defaults,
        weights=w,
        settings=settings,
        retry=retry or RetryPolicy(),
        discovery=discovery is not False,
        refresh_seconds=_refresh_seconds(config_refresh),
        heartbeat_interval=heartbeat_interval,
        metadata_fields=fields,
        wait=_replica_wait(wait_replicas, wait_timeout),
    )


def _replica_wait(replicas: object, timeout: object) -> ReplicaWait | None:
    """What ``wait_replicas`` / ``wait_timeout`` ask for: None when no replica is waited for.

    The timeout is checked even when unused, so a typo fails where it is written.
    """
    seconds = check_number(timeout, "wait_timeout", positive=True, maximum=3600.0, setting=True)
    count = check_int(replicas, "wait_replicas", minimum=0, maximum=1000, setting=True)
    return ReplicaWait(count, seconds) if count else None


def _settings(
    threshold: float,
    with_embed_fn: bool,
    consolidation: object,
    dedup: object,
    reinforce_mode: object,
    reinforce_write_interval: object,
    candidate_factor: object,
    reranker: object,
    rerank_candidates: object,
    margin: float | None,
    text_candidates: object,
    model_id: str,
) -> Settings:
    """The long-term settings that are not live-config tunables."""
    if consolidation is not None and not isinstance(consolidation, bool | ConsolidationConfig):
        raise ConfigurationError(
            "consolidation must be a ConsolidationConfig", code="configuration.consolidation"
        )
    cc = consolidation if isinstance(consolidation, ConsolidationConfig) else ConsolidationConfig()
    if cc.fact_source is not None:
        try:
            check_tags([cc.fact_source], name="fact_source")
        except ConfigurationError:
            raise
        except ValidationError as exc:  # a tag value's own check; given here, it is a setting
            raise ConfigurationError(
                exc.message, code="configuration.fact_source", details=exc.details
            ) from exc
    if not isinstance(dedup, bool):
        raise ConfigurationError(
            "dedup must be a bool", code="configuration.type", details={"argument": "dedup"}
        )
    mode: ReinforceMode | None = (
        "sync" if reinforce_mode == "sync" else "background" if reinforce_mode == "background" else None
    )
    if mode is None:
        raise ConfigurationError(
            "reinforce_mode must be 'sync' or 'background'",
            code="configuration.choice",
            details={"argument": "reinforce_mode"},
        )
    if reinforce_write_interval is not None:
        reinforce_write_interval = check_number(
            reinforce_write_interval, "reinforce_write_interval", minimum=0.0, setting=True
        )
    factor = _positive_int_or_none("candidate_factor", candidate_factor)
    if reranker is None:
        reranker = not with_embed_fn
    if reranker is True:
        reranker = default_reranker(model_id)
    if reranker is not False and not isinstance(reranker, Reranker):
        raise ConfigurationError(
            "reranker must be True, False or an object with rerank(query, candidates)",
            code="configuration.reranker",
            details={"type": type(reranker).__name__},
        )
    rerank_candidates = check_int(
        rerank_candidates, "rerank_candidates", minimum=1, maximum=10_000, setting=True
    )
    text_candidates = check_int(text_candidates, "text_candidates", minimum=0, maximum=1000, setting=True)
    return Settings(
        default_threshold=threshold,
        fact_source=cc.fact_source or _DEFAULT_FACT_SOURCE,
        fact_importance=check_importance(
            _DEFAULT_FACT_IMPORTANCE if cc.fact_importance is None else cc.fact_importance,
            name="fact_importance",
            setting=True,
        ),
        dedup=dedup,
        reinforce_mode=mode,
        reinforce_write_interval=None
        if reinforce_write_interval is None
        else float(reinforce_write_interval),
        candidate_factor=factor or 1,
        reranker=None if reranker is False else reranker,
        rerank_candidates=rerank_candidates,
        margin=margin,
        text_candidates=text_candidates,
    )


def default_reranker(model_id: str) -> Reranker:
    """The re-ranker ``reranker=None`` / ``True`` means for an embedder of ``model_id``.

    ``LearnedRanker`` for the shipped ONNX MiniLM (the better ranking on LoCoMo, held out
    by conversation: bench/results/quality.md); its weights read that model's distances,
    so any other embedder keeps ``HybridRanker``.
    """
    return LearnedRanker() if model_id == FITTED_MODEL_ID else HybridRanker()


def _refresh_seconds(config: object) -> float | None:
    """Seconds between live-config reads; None for off. On by default (5 s)."""
    if config is False:
        return None
    if config is None or config is True:
        return _DEFAULT_REFRESH_SECONDS
    if isinstance(config, MemoryConfigRefreshConfig):
        if config.enabled is False:
            return None
        if config.interval_ms is None:
            return _DEFAULT_REFRESH_SECONDS
        return max(_MIN_REFRESH_SECONDS, config.interval_ms / 1000.0)
    raise ConfigurationError(
        "config_refresh must be a bool, None or MemoryConfigRefreshConfig",
        code="configuration.config_refresh",
        details={"type": type(config).__name__},
    )


def _positive_int_or_none(argument: str, value: object) -> int | None:
    return None if value is None else check_int(value, argument, minimum=1, setting=True)
