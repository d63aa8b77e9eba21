"""``MemoryStore``: long-term memories as HASH documents in an HNSW index.

The documents and the index are betterdb-agent-memory's (``<name>:mem:<id>``,
``<name>:mem:idx``; see ``query``), so that library, BetterDB Monitor and this one
share a store. The I/O layer only: key names (``keys``), query strings (``query``),
reply parsing (``replies``), scoring (``scoring``) and argument checks
(``validation``) are pure modules this class calls. Every backend call goes through
``_io.call``, the one place errors are translated and idempotent operations retried.

Write path: one pipelined round trip of plain ``HSET`` s (``PEXPIRE`` after each
memory with a TTL); with a capacity, the same round trip counts each written cap
scope, and only a scope found over its cap pays for eviction (``capacity``).
Recall: one KNN query (hybrid when scoped), client-side composite scoring, and
reinforcement of the returned hits in one pipelined round trip.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import math
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import valkey.asyncio as avalkey

from . import _scripts
from ._io import RetryPolicy
from ._observe import StoreObservability
from .backend import Backend, ValkeyClient
from .capacity import CapacityMixin
from .codec import as_text, encode_vector, to_int, validate_vector
from .consolidation import ConsolidationMixin
from .context import ContextBudget
from .dialect import Capabilities, IndexInfo, IndexSchema, parse_ft_info, parse_index_schema, probe
from .embedders.base import Embedder, EmbeddingFunction, as_embedder, default_threshold_of
from .errors import (
    ConfigurationError,
    IndexExistsError,
    IndexNotFoundError,
    StoreClosedError,
    ValidationError,
)
from .extraction import FactExtractor
from .keys import KeySpace, Scope
from .models import MemoryItem, StoreStats, item_from_fields
from .observability.live_config import ConfigSnapshot
from .observability.telemetry import Telemetry
from .observability.tracing import add_attributes
from .options import (
    ConsolidationConfig,
    MemoryConfigRefreshConfig,
    MemoryDiscoveryConfig,
    MemoryTelemetryOptions,
)
from .query import ITEM_FIELDS, IndexLayout, IndexSpec, MemoryFilter, create_index_args
from .ranking import HybridRanker, Reranker
from .recall import RecallMixin
from .record import NewMemory, encode_record
from .scopes import ScopeOpsMixin
from .scoring import DEFAULT_HALF_LIFE_SECONDS, Weights
from .short_term import ShortTermMixin
from .summarizers import Summarizer
from .supervisor import Supervisor
from .tokens import TokenCounter
from .validation import (
    check_content,
    check_distance_threshold,
    check_importance,
    check_metadata,
    check_sensitivity,
    check_tags,
    check_ttl,
)

__all__ = ["DEFAULT_NAME", "DEFAULT_THRESHOLD", "MemoryStore"]

log = logging.getLogger(__name__)

_SCHEMA_VERSION = "2"
#: The reference's default store name (``AgentMemoryOptions.name``).
DEFAULT_NAME = "betterdb_ac"
#: The reference's default cosine-distance ceiling for a caller's ``embed_fn``.
DEFAULT_THRESHOLD = 0.33
_DEFAULT_FACT_SOURCE = "fact"
_DEFAULT_FACT_IMPORTANCE = 0.7
_DEFAULT_REFRESH_SECONDS = 5.0
_MIN_REFRESH_SECONDS = 1.0
_KINDS = ("memory", "summary", "fact", "extracted")


def _nothing(pipe: Any) -> None:
    """A pipeline with no keyed commands (only searches)."""


def _normalise_for_dedup(content: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", content).casefold().split())


def _dedup_hash(content: str, kind: str) -> str:
    return hashlib.blake2b(f"{kind}\x00{_normalise_for_dedup(content)}".encode(), digest_size=16).hexdigest()


def _refresh_seconds(config: bool | MemoryConfigRefreshConfig | None) -> float | None:
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


class _LazyFunctionEmbedder:
    """An ``embed_fn`` whose vector length is learned from its first answer (the reference's way)."""

    def __init__(self, fn: EmbeddingFunction) -> None:
        self._fn = fn
        self._inner: Embedder | None = None
        self.model_id = f"function:{getattr(fn, '__qualname__', type(fn).__name__)}"

    @property
    def dimensions(self) -> int:
        if self._inner is None:
            return 0
        return self._inner.dimensions

    async def resolve(self) -> Embedder:
        if self._inner is None:
            probe_vector = await self._fn("probe")
            try:
                size = len(probe_vector)
            except TypeError:
                size = 0
            if size == 0:
                raise ConfigurationError(
                    "embed_fn returned an empty embedding; cannot learn the vector dimension",
                    code="configuration.dimensions",
                )
            self._inner = as_embedder(self._fn, dimensions=size, model_id=self.model_id)
        return self._inner

    async def embed(self, texts: list[str]) -> Any:
        return await (await self.resolve()).embed(texts)


class MemoryStore(RecallMixin, ScopeOpsMixin, CapacityMixin, ShortTermMixin, ConsolidationMixin):
    """Long-term agent memory on Valkey Search (betterdb-agent-memory's ``MemoryStore``, and more).

    Args:
        client: a ``valkey.asyncio.Valkey`` (or cluster client) owned by the caller
            (not closed by ``close``).
        name: store name: key prefix and index name (``<name>:mem:idx``).
        embed_fn: a plain ``async fn(text) -> list[float]``; its vector length is
            learned from its first answer unless ``dimensions`` is given.
        embedder: alternatively an ``Embedder`` (``dimensions``, ``model_id``,
            ``async embed``); neither: the shipped ONNX model.
        dimensions: the vector length of ``embed_fn`` (optional).
        default_threshold: the cosine-distance ceiling (0..2) of a recalled hit. Default:
            0.33 for an ``embed_fn`` (the reference's), the calibrated value of a
            shipped embedder otherwise.
        weights: composite score weights (``RecallWeights``: similarity / recency / importance).
        half_life_seconds: recency half-life (7 days by default).
        max_items_per_scope: capacity. A write with scope fields or tags counts every
            memory matching them as a filter (fields it leaves None match any value,
            all its tags must be present), the reference's meaning, and evicts the
            lowest keep-score ones beyond the cap; an unscoped write is never capped.
        discovery: register with BetterDB Monitor (marker + heartbeat), or a
            ``MemoryDiscoveryConfig``.
        config_refresh: re-read the live config hash (on by default every 5 s;
            ``False`` or ``MemoryConfigRefreshConfig(enabled=False)`` turns it off).
        consolidation: ``ConsolidationConfig(fact_source=..., fact_importance=...)``.
        telemetry: ``MemoryTelemetryOptions`` (Prometheus registry, tracer provider).
        analytics: opt in to anonymous product telemetry (off by default here;
            ``DO_NOT_TRACK`` always wins). A ``Telemetry`` instance also works.
        dedup: reinforce instead of writing a twin of the same content in the same
            exact scope (off by default, as in the reference).
        candidate_factor: KNN candidates fetched per requested hit (1 by default).
        reranker: how the KNN candidates of a text ``recall`` are re-ordered before
            scoring. ``True``: ``HybridRanker()`` (BM25-style lexical evidence fused
            with the dense similarity; the fused value enters the composite score, the
            threshold still applies to the KNN distance). ``False``: the dense order
            and the reference's score exactly. Or any ``Reranker``. Default (``None``):
            off with an ``embed_fn`` (a drop-in store scores exactly as the reference
            documents), on with this library's embedders (measured on LoCoMo).
        rerank_candidates: KNN candidates fetched when re-ranking.
        hnsw_m / hnsw_ef_construction / hnsw_ef_runtime: index parameters.
        reinforce_mode: ``"sync"`` (await the update) or ``"background"``.
        reinforce_write_interval: seconds a document's ``last_accessed_at`` snapshot may
            lag before a recall rewrites it (default: half-life / 200, 1 s..1 min). The
            exact ``access_count`` is always kept (``get`` returns it).
        retry: connection-fault retry policy for idempotent operations.
        registry / tracer_provider: where metrics and spans go (also via ``telemetry``).
        heartbeat_interval: Monitor heartbeat period (<= 30 s).
        session_ttl ... summary_lock_ttl: the short-term tier's options; see
            ``short_term.ShortTermMixin._init_short_term``.
    """

    def __init__(
        self,
        *,
        client: ValkeyClient,
        name: str = DEFAULT_NAME,
        embed_fn: EmbeddingFunction | None = None,
        embedder: Embedder | None = None,
        dimensions: int | None = None,
        default_threshold: float | None = None,
        weights: Weights | Mapping[str, float] | None = None,
        half_life_seconds: float | None = None,
        max_items_per_scope: int | None = None,
        discovery: bool | MemoryDiscoveryConfig = True,
        config_refresh: bool | MemoryConfigRefreshConfig | None = None,
        consolidation: bool | ConsolidationConfig | None = None,
        telemetry: MemoryTelemetryOptions | None = None,
        analytics: bool | Telemetry = False,
        dedup: bool = False,
        candidate_factor: int = 1,
        reranker: Reranker | bool | None = None,
        rerank_candidates: int = 50,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 200,
        hnsw_ef_runtime: int = 10,
        reinforce_mode: str = "sync",
        reinforce_write_interval: float | None = None,
        retry: RetryPolicy | None = None,
        registry: Any = None,
        tracer_provider: Any = None,
        heartbeat_interval: float = 30.0,
        session_ttl: float = 86400,
        max_session_turns: int = 50,
        summarizer: Summarizer | None = None,
        fact_extractor: FactExtractor | None = None,
        token_counter: TokenCounter | None = None,
        summarize_batch: int = 20,
        max_unsummarized: int | None = None,
        budget: ContextBudget | None = None,
        redact: Sequence[str] = (),
        shutdown_grace: float = 30.0,
        summary_lock_ttl: float = 120.0,
    ) -> None:
        self.keys = KeySpace(name)
        self.name = name
        if embedder is not None and embed_fn is not None:
            raise ConfigurationError("pass embed_fn= or embedder=, not both", code="configuration.embedder")
        self._lazy_embedder: _LazyFunctionEmbedder | None = None
        if embedder is None and embed_fn is None:
            from .embedders import default_embedder

            embedder = default_embedder()
        if embed_fn is not None and dimensions is None:
            if not callable(embed_fn):
                raise ConfigurationError("embed_fn must be an async callable", code="configuration.embedder")
            self._lazy_embedder = _LazyFunctionEmbedder(embed_fn)
            self.embedder: Embedder = self._lazy_embedder  # type: ignore[assignment]
        else:
            self.embedder = as_embedder(embedder if embedder is not None else embed_fn, dimensions=dimensions)
        self._client = client
        self._owned_client = False
        self._owned_server: Any = None
        if default_threshold is None:
            calibrated = None if embed_fn is not None else default_threshold_of(self.embedder)
            default_threshold = DEFAULT_THRESHOLD if calibrated is None else 2.0 * (1.0 - calibrated)
        threshold = check_distance_threshold(default_threshold, name="default_threshold")
        assert threshold is not None
        self.default_threshold: float = threshold
        self.weights = Weights.of(dict(weights) if isinstance(weights, Mapping) else weights)
        if half_life_seconds is None:
            half_life_seconds = DEFAULT_HALF_LIFE_SECONDS
        if (
            isinstance(half_life_seconds, bool)
            or not isinstance(half_life_seconds, int | float)
            or not half_life_seconds > 0
            or not math.isfinite(half_life_seconds)
        ):
            raise ValidationError(
                "half_life_seconds must be a positive number",
                code="validation.range",
                details={"argument": "half_life_seconds"},
            )
        self.half_life_seconds = float(half_life_seconds)
        if max_items_per_scope is not None and (
            isinstance(max_items_per_scope, bool)
            or not isinstance(max_items_per_scope, int)
            or max_items_per_scope < 1
        ):
            raise ValidationError(
                "max_items_per_scope must be a positive integer",
                code="validation.range",
                details={"argument": "max_items_per_scope"},
            )
        self.max_items_per_scope = max_items_per_scope
        if consolidation is not None and not isinstance(consolidation, bool | ConsolidationConfig):
            raise ConfigurationError(
                "consolidation must be a ConsolidationConfig", code="configuration.consolidation"
            )
        cc = consolidation if isinstance(consolidation, ConsolidationConfig) else ConsolidationConfig()
        if cc.fact_source is not None:
            check_tags([cc.fact_source], name="fact_source")
        self.fact_source = cc.fact_source or _DEFAULT_FACT_SOURCE
        self.fact_importance = check_importance(
            _DEFAULT_FACT_IMPORTANCE if cc.fact_importance is None else cc.fact_importance
        )
        if not isinstance(dedup, bool):
            raise ValidationError(
                "dedup must be a bool", code="validation.type", details={"argument": "dedup"}
            )
        self.dedup = dedup
        if reinforce_mode not in ("sync", "background"):
            raise ValidationError("reinforce_mode must be 'sync' or 'background'", code="validation.choice")
        self.reinforce_mode = reinforce_mode
        if reinforce_write_interval is not None and not (
            isinstance(reinforce_write_interval, int | float) and reinforce_write_interval >= 0
        ):
            raise ValidationError("reinforce_write_interval must be >= 0 seconds", code="validation.range")
        self.reinforce_write_interval = (
            None if reinforce_write_interval is None else float(reinforce_write_interval)
        )
        if (
            isinstance(candidate_factor, bool)
            or not isinstance(candidate_factor, int)
            or candidate_factor < 1
        ):
            raise ValidationError("candidate_factor must be a positive integer", code="validation.range")
        self.candidate_factor = candidate_factor
        if reranker is None:
            reranker = embed_fn is None
        if reranker is True:
            reranker = HybridRanker()
        if reranker is not False and not isinstance(reranker, Reranker):
            raise ConfigurationError(
                "reranker must be True, False or an object with rerank(query, candidates)",
                code="configuration.reranker",
                details={"type": type(reranker).__name__},
            )
        self.reranker: Reranker | None = None if reranker is False else reranker
        if (
            isinstance(rerank_candidates, bool)
            or not isinstance(rerank_candidates, int)
            or not (1 <= rerank_candidates <= 10_000)
        ):
            raise ValidationError("rerank_candidates must be an integer in 1..10000", code="validation.range")
        self.rerank_candidates = rerank_candidates
        self._hnsw = (hnsw_m, hnsw_ef_construction, hnsw_ef_runtime)
        self.retry = retry or RetryPolicy()
        self.backend = Backend(client, retry=self.retry)
        self._defaults = ConfigSnapshot(
            threshold=self.default_threshold,
            weight_similarity=self.weights.similarity,
            weight_recency=self.weights.recency,
            weight_importance=self.weights.importance,
            half_life_seconds=self.half_life_seconds,
            max_items_per_scope=self.max_items_per_scope,
        )
        if telemetry is not None and not isinstance(telemetry, MemoryTelemetryOptions):
            raise ConfigurationError(
                "telemetry must be a MemoryTelemetryOptions (product analytics: analytics=True)",
                code="configuration.telemetry",
                details={"type": type(telemetry).__name__},
            )
        if (
            discovery is not True
            and discovery is not False
            and not isinstance(discovery, MemoryDiscoveryConfig)
        ):
            raise ConfigurationError(
                "discovery must be a bool or MemoryDiscoveryConfig", code="configuration.discovery"
            )
        if isinstance(discovery, MemoryDiscoveryConfig) and discovery.heartbeat_interval_ms is not None:
            heartbeat_interval = discovery.heartbeat_interval_ms / 1000.0
        refresh = _refresh_seconds(config_refresh)
        self._obs = StoreObservability(
            client,
            self.keys,
            self._defaults,
            registry=registry,
            tracer_provider=tracer_provider,
            discovery=discovery is not False,
            # Off: no periodic re-read (the hash is still read once when the store starts).
            config_refresh_seconds=refresh if refresh is not None else 1e9,
            heartbeat_interval=heartbeat_interval,
            telemetry=telemetry,
            analytics=analytics,
        )
        self.metrics = self._obs.metrics
        self._init_short_term(
            session_ttl=session_ttl,
            max_session_turns=max_session_turns,
            summarizer=summarizer,
            fact_extractor=fact_extractor,
            token_counter=token_counter,
            summarize_batch=summarize_batch,
            max_unsummarized=max_unsummarized,
            budget=budget,
            redact=redact,
            shutdown_grace=shutdown_grace,
            summary_lock_ttl=summary_lock_ttl,
        )
        self.capabilities: Capabilities | None = None
        self.layout = IndexLayout()
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._reinforce_script = self.backend.register("reinforce", _scripts.REINFORCE)
        self._retire_script = self.backend.register("retire", _scripts.RETIRE)
        self.supervisor = Supervisor(on_failure=self.metrics.observe_background_failure)
        self._closed = False

    @property
    def near_misses(self) -> int:
        """Recalls that came back empty with the nearest memory just past the threshold."""
        return self._obs.near_misses

    @property
    def spec(self) -> IndexSpec:
        m, efc, efr = self._hnsw
        return IndexSpec(
            index=self.keys.index,
            prefix=self.keys.doc_prefix,
            dimensions=self.embedder.dimensions,
            m=m,
            ef_construction=efc,
            ef_runtime=efr,
        )

    # -- construction ------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        url: str | None = None,
        *,
        name: str = DEFAULT_NAME,
        embedder: Embedder | None = None,
        data_dir: str | None = None,
        max_connections: int = 64,
        socket_timeout: float = 10.0,
        **options: Any,
    ) -> MemoryStore:
        """Open a store on ``url``, or on the embedded server when ``url`` is None.

        With no URL the embedded engine starts on the platform data dir (persistent,
        AOF), or is reused if another process already runs it there. The store owns
        the client (and the server it started) and closes them in ``close``; if
        building the store fails, both are closed before the error propagates.
        The pool blocks when all ``max_connections`` are busy instead of failing.
        """
        server = None
        if url is None:
            from .server import EmbeddedServer, default_data_dir

            server = EmbeddedServer(data_dir=data_dir or default_data_dir())
            await asyncio.to_thread(server.start)
            url = server.url
        client: Any = None
        try:
            pool = avalkey.BlockingConnectionPool.from_url(
                url, max_connections=max_connections, timeout=socket_timeout, socket_timeout=socket_timeout
            )
            client = avalkey.Valkey.from_pool(pool)  # the client owns (and closes) the pool
            store = cls(client=client, name=name, embedder=embedder, **options)
        except BaseException:
            if client is not None:
                await client.aclose()
            if server is not None and server._proc is not None:
                await asyncio.to_thread(server.stop)
            raise
        store._owned_client = True
        store._owned_server = server if server is not None and server._proc is not None else None
        return store

    async def close(self) -> None:
        """Wait for background work, then close what this store opened (never the caller's client).

        Idempotent. Afterwards every operation raises ``StoreClosedError``.
        """
        if self._closed:
            return
        self._closed = True
        await self._close_short_term()
        await self.supervisor.close(grace=5.0)
        await self._obs.close()
        self.backend.closed = True
        if self._owned_client:
            await self._client.aclose()
        if self._owned_server is not None:
            await asyncio.to_thread(self._owned_server.stop)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store was closed; build a new one", code="state.closed")

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def client(self) -> Any:
        return self._client

    # -- live config ----------------------------------------------------------------------

    def config_defaults(self) -> ConfigSnapshot:
        """The constructor's tunables (what a field removed from the config hash returns to)."""
        return self._defaults

    def current_config(self) -> ConfigSnapshot:
        """The tunables in force now: constructor values overlaid by the live config hash."""
        return self._obs.config()

    async def refresh_config(self) -> ConfigSnapshot:
        """Re-read ``<name>:__mem_config`` now (it is also re-read every few seconds)."""
        return await self._obs.live.refresh()

    async def ensure_discovery_ready(self) -> None:
        """Make sure the store is registered with BetterDB Monitor (and its index exists)."""
        await self._ensure_ready()

    async def ensure_config_refresh_started(self) -> None:
        """Start the live-config refresher now (it starts with the store otherwise)."""
        await self._ensure_ready()

    # -- index ------------------------------------------------------------------------

    async def ensure_index(self) -> None:
        """Create ``<name>:mem:idx`` if absent, or adopt the one there; idempotent, safe to race.

        An index another library created with the same name (betterdb-agent-memory)
        is used as it is: queries then avoid the fields it lacks and results are
        checked exactly in the client.

        Raises:
            ConfigurationError: the index (or its recorded metadata) was made for a
                different embedding dimension or model; vectors of two models must
                never share an index.
        """
        async with self._ready_lock:
            await self._ensure_index_locked()

    async def _ensure_ready(self) -> None:
        self._check_open()
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready:
                await self._ensure_index_locked()

    async def _ensure_index_locked(self) -> None:
        client = self._client
        if self.capabilities is None:
            self.capabilities = await self.backend.call("probe", lambda: probe(client))
        caps = self.capabilities
        if self._lazy_embedder is not None:
            await self._lazy_embedder.resolve()
        meta_raw = await self.backend.call("ensure_index", lambda: client.hgetall(self.keys.meta))
        meta = {as_text(k): as_text(v) for k, v in meta_raw.items()}
        self._check_meta(meta)
        reply = await self._index_reply()
        if reply is None:
            try:
                await self.backend.search("ensure_index", create_index_args(self.spec, caps))
                # A new index over existing documents (a recreated one) backfills in the
                # background; wait, bounded, so the next query sees what was stored.
                await self._wait_index_ready(limit_seconds=30.0)
            except IndexExistsError:
                pass
            reply = await self._index_reply()
        if reply is not None:
            self._adopt(parse_ft_info(reply), parse_index_schema(reply))
        fields = {
            "dimensions": str(self.embedder.dimensions),
            "model_id": self.embedder.model_id,
            "schema": _SCHEMA_VERSION,
            "index": self.keys.index,
        }

        def record(pipe: Any) -> None:
            for k, v in fields.items():
                pipe.hsetnx(self.keys.meta, k, v)
            pipe.hgetall(self.keys.meta)

        out = await self.backend.pipeline("ensure_index", record)
        self._check_meta({as_text(k): as_text(v) for k, v in out[-1].items()})
        self._ready = True
        if not self._closed:
            await self._obs.start(caps.as_list())

    def _adopt(self, info: IndexInfo, schema: IndexSchema) -> None:
        """Check the index in place fits this store, and note which optional fields it has."""
        if info.dimensions is not None and info.dimensions != self.embedder.dimensions:
            raise ConfigurationError(
                f"index {self.keys.index} holds {info.dimensions}-d vectors but the embedder "
                f"{self.embedder.model_id!r} makes {self.embedder.dimensions}-d vectors",
                code="configuration.dimension_mismatch",
                details={
                    "index_dimensions": info.dimensions,
                    "embedder_dimensions": self.embedder.dimensions,
                },
            )
        vector = schema.field("vector")
        if schema.fields and (vector is None or vector.type != "VECTOR"):
            raise ConfigurationError(
                f"index {self.keys.index} has no 'vector' field (fields: {[f.alias for f in schema.fields]}); "
                "it was not made by betterdb-memory or betterdb-agent-memory. Use another store name.",
                code="configuration.foreign_index",
                details={"fields": [f.alias for f in schema.fields]},
            )
        # Counts are exact without a client-side check only when every scope TAG is
        # case-sensitive and split on "," alone (the index this library creates).
        scope_tags = [schema.field(n) for n in ("threadId", "agentId", "namespace", "tags", "source")]
        exact = all(
            f is not None and f.type == "TAG" and f.case_sensitive is True and f.separator in (None, ",")
            for f in scope_tags
        )
        self.layout = IndexLayout.from_fields([f.alias for f in schema.fields], case_sensitive=exact)

    def _check_meta(self, meta: Mapping[str, str]) -> None:
        dims, model = meta.get("dimensions"), meta.get("model_id")
        if (dims and dims != str(self.embedder.dimensions)) or (model and model != self.embedder.model_id):
            raise ConfigurationError(
                f"store {self.name!r} was created with model {model!r} ({dims}-d); this store's embedder is "
                f"{self.embedder.model_id!r} ({self.embedder.dimensions}-d). Use another store name, or "
                "re-embed (CLI: export / import)",
                code="configuration.model_mismatch",
                details={
                    "stored_model": model,
                    "stored_dimensions": dims,
                    "embedder_model": self.embedder.model_id,
                    "embedder_dimensions": self.embedder.dimensions,
                },
            )

    async def _wait_index_ready(self, *, limit_seconds: float) -> None:
        deadline = time.monotonic() + limit_seconds
        while True:
            info = await self.index_info()
            if info is None or info.ready or time.monotonic() > deadline:
                return
            await asyncio.sleep(0.05)

    async def _index_reply(self) -> Any:
        return await self.backend.index_info(self.keys.index)

    async def index_info(self) -> IndexInfo | None:
        """FT.INFO of this store's index, normalised across engines; None when absent.

        On a cluster ``num_docs`` is the whole cluster's (the primaries' sum).
        """
        reply = await self._index_reply()
        if reply is None:
            return None
        info = parse_ft_info(reply)
        if self.backend.cluster:
            totals = await self.backend.index_info(self.keys.index, cluster_counts=True)
            if totals is not None:
                info = dataclasses.replace(info, num_docs=parse_ft_info(totals).num_docs)
        return info

    async def _with_index(self, operation: str, fn: Any) -> Any:
        """Run ``fn``; if the index vanished under us, recreate it once and run again."""
        await self._ensure_ready()
        try:
            return await fn()
        except IndexNotFoundError:
            log.warning("%s: index %s is missing; recreating it", operation, self.keys.index)
            async with self._ready_lock:
                self._ready = False
                await self._ensure_index_locked()
            return await fn()

    # -- embedding ----------------------------------------------------------------------

    async def _embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        from .embedders.base import validate_embeddings

        if self._lazy_embedder is not None:
            await self._lazy_embedder.resolve()
        out = await self.embedder.embed(list(texts))
        self.metrics.observe_embedding_calls(len(texts))
        return validate_embeddings(
            out, count=len(texts), dimensions=self.embedder.dimensions, model_id=self.embedder.model_id
        )

    # -- remember -----------------------------------------------------------------------

    def _prepare(
        self,
        content: object,
        *,
        importance: object = None,
        tags: object = None,
        source: object = None,
        ttl: object = None,
        thread_id: object = None,
        agent_id: object = None,
        namespace: object = None,
        sensitivity: object = None,
        metadata: object = None,
        kind: object = None,
        subject: object = None,
        date: object = None,
        vector: object = None,
    ) -> dict[str, Any]:
        """Validate one memory's arguments (the API boundary); no I/O."""
        text = check_content(content)
        scope = Scope.of(namespace=namespace, agent_id=agent_id, thread_id=thread_id)
        if source is not None:
            check_tags([source], name="source")
        kind = "memory" if kind is None else kind
        if kind not in _KINDS:
            raise ValidationError(
                f"unknown kind {kind!r}", code="validation.kind", details={"argument": "kind"}
            )
        if subject is not None and not isinstance(subject, str):
            raise ValidationError(
                "subject must be a string", code="validation.type", details={"argument": "subject"}
            )
        if date is not None and not isinstance(date, str):
            raise ValidationError(
                "date must be a string", code="validation.type", details={"argument": "date"}
            )
        dims = self.embedder.dimensions
        return {
            "content": text,
            "scope": scope,
            "importance": check_importance(0.5 if importance is None else importance),
            "tags": check_tags(tags),
            "source": source,
            "ttl": check_ttl(ttl),
            "sensitivity": check_sensitivity("none" if sensitivity is None else sensitivity),
            "metadata": check_metadata(metadata),
            "kind": kind,
            "subject": subject,
            "date": date or None,
            "vector": None
            if vector is None
            else validate_vector(vector, dimensions=dims)
            if dims
            else validate_vector(vector, dimensions=len(vector)),  # type: ignore[arg-type]
        }

    def _record(
        self,
        prepared: Mapping[str, Any],
        vector: np.ndarray[Any, np.dtype[np.float32]],
        now_ms: int,
        half_life: float,
    ) -> tuple[str, list[Any], int]:
        """(memory id, HSET field/value list, ttl in ms or 0) of one memory: the stored record.

        The reference's fields first, in its order, then this library's own (written
        only when they differ from the default a reader assumes).
        """
        memory = NewMemory(
            content=prepared["content"],
            scope=prepared["scope"],
            importance=prepared["importance"],
            tags=tuple(prepared["tags"]),
            source=prepared["source"],
            ttl=prepared["ttl"],
            sensitivity=prepared["sensitivity"],
            metadata=prepared["metadata"],
            kind=prepared["kind"],
            subject=prepared["subject"],
            date=prepared["date"],
            dedup_hash=prepared.get("dedup_hash") or None,
        )
        memory_id = prepared.get("id") or self.keys.new_memory_id()
        fields, ttl_ms = encode_record(
            memory, vector, now_ms=now_ms, half_life_seconds=half_life, fact_source=self.fact_source
        )
        return memory_id, fields, ttl_ms

    async def remember(
        self,
        content: str,
        *,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        ttl: float | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        sensitivity: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        vector: Sequence[float] | None = None,
    ) -> str:
        """Store one memory; returns its id (the existing id when deduplicated).

        Args:
            content: the text to remember.
            importance: 0..1 (default 0.5).
            tags: labels (no commas); recall/forget/consolidate ``tags=`` need all of theirs.
            source: where it came from (``summary`` and the fact source are reserved
                for consolidation output).
            ttl: seconds until it expires; ``None`` or ``0``: never.
            thread_id / agent_id / namespace: its scope.
            sensitivity: ``none|low|pii|sensitive`` (``recall(exclude_sensitivity=)``).
            metadata: a JSON-able mapping kept with it.
            vector: a precomputed embedding (skips the embedder).

        Raises:
            ValidationError: any bad argument; nothing is written.
            StoreConnectionError: the server could not be reached (after retries).
        """
        item: dict[str, Any] = {
            "content": content,
            "importance": importance,
            "tags": tags,
            "source": source,
            "ttl": ttl,
            "thread_id": thread_id,
            "agent_id": agent_id,
            "namespace": namespace,
            "sensitivity": sensitivity,
            "metadata": metadata,
            "vector": vector,
        }
        return (await self.remember_many([item]))[0]

    async def remember_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Store many memories: one embedding batch and one pipelined round trip.

        Every item is validated before anything is embedded or written, so a bad
        item fails the whole call with nothing stored. Returns ids in input order.
        """
        with self._obs.span("remember") as span:
            ids, evicted, dedup_hits = await self._remember_many(items, capped=True)
            add_attributes(span, lambda: {"gen_ai.memory.count": len(ids), "gen_ai.memory.evicted": evicted})
            if len(ids) == 1 and isinstance(items, list | tuple):
                opts = items[0] if isinstance(items[0], Mapping) else {}
                importance = opts.get("importance")
                self._obs.mark_remember(
                    span,
                    importance=0.5 if importance is None else importance,
                    ttl=opts.get("ttl"),
                    key=self.keys.doc(ids[0]),
                )
        self.metrics.observe_remember(len(ids), dedup_hits=dedup_hits)
        self._obs.count({"remembers": len(ids), "dedup_hits": dedup_hits})
        return ids

    def _prepare_all(self, items: Iterable[str | Mapping[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(items, str | bytes | Mapping):
            raise ValidationError(
                "remember_many takes a list of items (str or mapping), not a single one; use remember()",
                code="validation.type",
                details={"argument": "items", "type": type(items).__name__},
            )
        allowed = {
            "content", "importance", "tags", "source", "ttl", "thread_id", "agent_id", "namespace",
            "sensitivity", "metadata", "kind", "subject", "date", "vector",
        }  # fmt: skip
        prepared: list[dict[str, Any]] = []
        for i, item in enumerate(items):
            try:
                if isinstance(item, str):
                    prepared.append(self._prepare(item))
                elif isinstance(item, Mapping):
                    unknown = set(item) - allowed
                    if unknown:
                        raise ValidationError(
                            f"unknown arguments {sorted(unknown)}",
                            code="validation.argument",
                            details={"unknown": sorted(unknown)},
                        )
                    opts = dict(item)
                    content = opts.pop("content", None)
                    prepared.append(self._prepare(content, **opts))
                else:
                    raise ValidationError(
                        f"item {i} must be a str or a mapping with 'content'", code="validation.type"
                    )
            except ValidationError as exc:
                exc.details.setdefault("item", i)
                raise
        return prepared

    async def _remember_many(
        self, items: Iterable[str | Mapping[str, Any]], *, capped: bool, dedup: bool | None = None
    ) -> tuple[list[str], int, int]:
        """Validate, embed, dedup, write, then hold each written scope to its cap (if ``capped``).

        ``dedup=None`` follows the store's setting (consolidation output passes False).
        """
        prepared = self._prepare_all(items)
        if not prepared:
            return [], 0, 0
        await self._ensure_ready()
        need = [i for i, p in enumerate(prepared) if p["vector"] is None]
        vectors: list[Any] = [p["vector"] for p in prepared]
        if need:
            embedded = await self._embed([prepared[i]["content"] for i in need])
            for j, i in enumerate(need):
                vectors[i] = embedded[j]
        for i, p in enumerate(prepared):
            # Given vectors were fully checked in _prepare; only their length can still be
            # wrong, when an embed_fn's dimension was learned after that check.
            if p["vector"] is not None and len(vectors[i]) != self.embedder.dimensions:
                validate_vector(vectors[i], dimensions=self.embedder.dimensions, name=f"vector of item {i}")
        now = time.time()
        now_ms = int(now * 1000)
        cfg = self.current_config()
        ids: list[str | None] = [None] * len(prepared)
        dedup_hits = 0
        twin_of: dict[int, int] = {}  # a later item of the batch -> the first one with its content
        if self.dedup if dedup is None else dedup:
            first: dict[tuple[Scope, str], int] = {}
            for i, p in enumerate(prepared):
                p["dedup_hash"] = _dedup_hash(p["content"], p["kind"])
                twin_of[i] = first.setdefault((p["scope"], p["dedup_hash"]), i)
            twin_of = {i: j for i, j in twin_of.items() if i != j}
            leaders = [i for i in range(len(prepared)) if i not in twin_of]
            found = await self._find_twins([prepared[i] for i in leaders], [vectors[i] for i in leaders])
            for n, twin in found.items():
                ids[leaders[n]] = twin
            dedup_hits = len(found) + len(twin_of)
            if found:
                await self._reinforce(list(found.values()), now, cfg.half_life_seconds)
        records: list[tuple[int, str, list[Any], int]] = []
        for i, p in enumerate(prepared):
            if ids[i] is None and i not in twin_of:
                mid, fields, ttl_ms = self._record(p, vectors[i], now_ms, cfg.half_life_seconds)
                ids[i] = mid
                records.append((i, mid, fields, ttl_ms))
        for i, j in twin_of.items():
            ids[i] = ids[j]
        cap = cfg.max_items_per_scope if capped else None
        cap_filters = self._cap_filters([prepared[i] for i, *_ in records]) if cap else []

        def build(pipe: Any) -> None:
            for _, mid, fields, ttl_ms in records:
                key = self.keys.doc(mid)
                pipe.execute_command("HSET", key, *fields)
                if ttl_ms:
                    pipe.execute_command("PEXPIRE", key, ttl_ms)

        # Ids are fixed client-side before the first attempt, so a retry after a
        # dropped connection rewrites the same documents: safe to retry.
        results = await self._with_index(
            "remember",
            lambda: self.backend.pipeline(
                "remember",
                build,
                details={"count": len(records)},
                searches=[self._count_args(flt) for flt in cap_filters],
            ),
        )
        self.metrics.add_items(len(records))
        evicted = 0
        if cap_filters and cap is not None:
            counts = results[len(results) - len(cap_filters) :]
            written = {mid for _, mid, _, _ in records}
            for flt, reply in zip(cap_filters, counts, strict=True):
                evicted += await self._hold_cap(flt, reply, cap, protect=written, now=now)
        return [str(m) for m in ids], evicted, dedup_hits

    async def _find_twins(self, prepared: list[dict[str, Any]], vectors: list[Any]) -> dict[int, str]:
        """Items whose normalised content already exists in their exact scope: index -> that id."""
        from .query import knn_search_args
        from .replies import parse_search_reply

        if not self.layout.dedup:
            return {}
        check = ("threadId", "agentId", "namespace", "dedup")

        searches = [
            knn_search_args(
                self.keys.index, encode_vector(vectors[i]), k=10, layout=self.layout, return_fields=check,
                flt=MemoryFilter(scope=p["scope"], dedup=p["dedup_hash"]),
            )
            for i, p in enumerate(prepared)
        ]  # fmt: skip
        replies = await self.backend.pipeline("remember", _nothing, searches=searches)
        out: dict[int, str] = {}
        for i, (p, reply) in enumerate(zip(prepared, replies, strict=True)):
            scope: Scope = p["scope"]
            for hit in parse_search_reply(reply).hits:
                f = hit.fields
                if (
                    (as_text(f.get("threadId")) or None) == scope.thread_id
                    and (as_text(f.get("agentId")) or None) == scope.agent_id
                    and (as_text(f.get("namespace")) or None) == scope.namespace
                    and as_text(f.get("dedup")) == p["dedup_hash"]
                ):
                    out[i] = self.keys.memory_id_of(hit.key)
                    break
        return out

    def _access_interval(self, half_life: float) -> float:
        """How stale a document's access snapshot may get before a recall rewrites it.

        1/200 of the half-life, between 1 s and 1 min, so BetterDB Monitor and the
        reference library (which read the document) see fresh values. Each rewrite
        re-indexes the whole document on RediSearch; see ``_scripts``.
        """
        if self.reinforce_write_interval is not None:
            return self.reinforce_write_interval
        return min(60.0, max(1.0, half_life / 200.0))

    def _spawn(self, coro: Any) -> None:
        """Start background work under the store's supervisor (drained by ``close``)."""
        self.supervisor.spawn(coro, name=getattr(coro, "__name__", "background"))

    # -- read ---------------------------------------------------------------------------

    async def get(self, id: str) -> MemoryItem | None:
        """The memory with this id, or None (never the raw vector)."""
        return (await self.get_many([id]))[0]

    async def get_many(self, ids: Sequence[str]) -> list[MemoryItem | None]:
        """``get`` for many ids in one pipelined round trip (exact access counts included)."""
        if isinstance(ids, str):
            raise ValidationError(
                "get_many takes a list of ids", code="validation.type", details={"argument": "ids"}
            )
        keys = [self.keys.doc(m) for m in ids]

        def build(pipe: Any) -> None:
            for mid, key in zip(ids, keys, strict=True):
                pipe.hmget(key, list(ITEM_FIELDS))
                pipe.get(self.keys.access(mid))

        rows = await self.backend.pipeline("get", build) if keys else []
        now_ms = time.time() * 1000
        out: list[MemoryItem | None] = []
        expired: list[str] = []
        for n, mid in enumerate(ids):
            fields = dict(zip(ITEM_FIELDS, rows[2 * n], strict=True))
            if fields.get("content") is None:
                out.append(None)
                continue
            expires = as_text(fields.get("expires_at"))
            if expires and float(expires) <= now_ms:
                out.append(None)  # past its TTL
                expired.append(mid)
                continue
            item = item_from_fields(mid, fields, fact_source=self.fact_source)
            exact = to_int(rows[2 * n + 1])
            out.append(dataclasses.replace(item, access_count=exact) if exact > item.access_count else item)
        if expired:
            self._drop_expired(expired)
        return out

    def _drop_expired(self, ids: Sequence[str]) -> None:
        """Delete memories found past their ``expires_at`` (in the background).

        The server expires them itself; this only catches one whose ``PEXPIRE`` was lost
        (a connection cut between the ``HSET`` and it), which would otherwise stay
        stored, hidden from every read, until its scope is forgotten.
        """
        if not self._closed:
            self._spawn(self._delete_ids(list(ids)))

    # -- forget -------------------------------------------------------------------------

    async def forget(self, id: str) -> bool:
        """Delete one memory (and its access counter); True if it existed."""
        key = self.keys.doc(id)
        counter = self.keys.access(id)

        def build(pipe: Any) -> None:
            pipe.delete(key)
            pipe.delete(counter)

        with self._obs.span("forget"):
            existed = bool(int((await self.backend.pipeline("forget", build))[0]))
        if existed:
            self.metrics.add_items(-1)
        return existed

    async def _delete_ids(self, ids: Sequence[str]) -> int:
        """Delete memories by id in one pipelined round trip; the number that existed."""
        if not ids:
            return 0

        def build(pipe: Any) -> None:
            for mid in ids:
                pipe.delete(self.keys.doc(mid))
                pipe.delete(self.keys.access(mid))

        replies = await self.backend.pipeline("forget", build)
        removed = sum(int(r) for r in replies[0::2])
        if removed:
            self.metrics.add_items(-removed)
        return removed

    # -- stats ----------------------------------------------------------------------------

    async def stats(self) -> StoreStats:
        """Counts, index health and settings (what ``stats`` in the CLI prints)."""
        await self._ensure_ready()
        assert self.capabilities is not None
        await self._obs.flush()
        info = await self.index_info()
        if info is not None:
            self.metrics.set_items(info.num_docs)
        counters_raw = await self.backend.call("stats", lambda: self._client.hgetall(self.keys.stats))
        counters = {as_text(k): to_int(v) for k, v in counters_raw.items()}
        return StoreStats(
            name=self.name,
            index_name=self.keys.index,
            items=info.num_docs if info else 0,
            evictions=counters.get("evictions", 0),
            counters=counters,
            index=info,
            capabilities=self.capabilities,
            embedder_model=self.embedder.model_id,
            dimensions=self.embedder.dimensions,
            config=self.current_config().as_hash(),
        )
