"""``MemoryStore``: the facade over a store's parts, and its lifecycle.

The store builds its parts with their dependencies and delegates to them; it holds
no logic of its own beyond ``connect`` / ``close`` and the state between them (its
constructor's arguments are checked by ``store_options`` and ``tiers.session_config``;
a part's method becomes the store's through ``_delegate._Delegate``)::

    MemoryStore ── connect / close / state (lifecycle.StoreState, Supervisor)
      ├─ StoreInfo        engine, index, settings, live config, stats  (store_info)
      ├─ LongTermMemory   remember, remember_many            (tiers.long_term)
      ├─ Recall           recall, recall_by_vector           (tiers.recall)
      ├─ Documents        get, get_many, forget              (tiers.documents)
      ├─ ScopeReader      count, list                        (tiers.scopes)
      ├─ Capacity         max_items_per_scope eviction       (tiers.capacity)
      ├─ Sessions         store_turn, retrieve_context, ...  (tiers.sessions)
      ├─ RollingSummaries summarize_session                  (tiers.summaries)
      ├─ Consolidation    consolidate (summary / facts)      (tiers.consolidation)
      ├─ FactLedger       fact_history, purge_fact_history   (tiers.fact_ledger)
      └─ Erasure          forget_by_scope, erase             (tiers.erasure)
    every part ── Runtime (tiers.runtime) ── Backend + IndexManager (backend) ── Valkey
    pure core (core.*): keys, escaping, query, record, replies, ranking, scoring, facts

The documents and the index are betterdb-agent-memory's (``<name>:mem:<id>``,
``<name>:mem:idx``; see ``core.query``), so that library, BetterDB Monitor and this
one share a store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ._delegate import _Delegate
from .backend.client import ValkeyBackend, ValkeyClient
from .backend.index import IndexManager
from .backend.retry import RetryPolicy
from .core.context import ContextBudget
from .core.filter_fields import MetadataFields, schema_args
from .core.keys import DEFAULT_NAME, KeySpace
from .core.options import (
    ConsolidationConfig,
    MemoryConfigRefreshConfig,
    MemoryDiscoveryConfig,
    MemoryTelemetryOptions,
    ReinforceMode,
)
from .core.ranking import Reranker
from .core.scoring import Weights
from .core.tokens import TokenCounter
from .embedders.base import Embedder, EmbeddingFunction
from .embedders.lazy import LazyFunctionEmbedder
from .errors import StoreClosedError
from .extraction import FactExtractor
from .lifecycle import StoreState, Supervisor, gated
from .observability.hub import StoreObservability
from .observability.telemetry import Telemetry
from .store_connect import open_owned
from .store_info import StoreInfo
from .store_options import DEFAULT_THRESHOLD, check_options
from .summarizers import Summarizer
from .tiers.capacity import Capacity
from .tiers.consolidation import Consolidation
from .tiers.documents import Documents
from .tiers.erasure import Erasure
from .tiers.fact_ledger import FactLedger
from .tiers.long_term import LongTermMemory
from .tiers.recall import Recall
from .tiers.runtime import Runtime
from .tiers.scopes import ScopeReader
from .tiers.session_config import SessionConfig
from .tiers.sessions import Sessions, session_ids
from .tiers.summaries import RollingSummaries

__all__ = ["DEFAULT_NAME", "DEFAULT_THRESHOLD", "MemoryStore"]


@gated  # every public coroutine method but close raises StoreClosedError once close() started
class MemoryStore(StoreInfo):
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
        metadata_fields: ``metadata`` keys indexed for ``where=`` (``{"priority": "numeric",
            "project": "tag"}``; a write whose value does not fit is refused).
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
        reranker: how the candidates of a text ``recall`` are re-ordered before scoring.
            ``True``: the embedder's re-ranker over the KNN and full-text candidates
            (``LearnedRanker()`` for the shipped ONNX MiniLM, ``HybridRanker()`` for any
            other embedder), its similarity entering the composite score while the
            threshold gates the recall (``relevance_margin``). ``False``: the dense order
            and the reference's score exactly. Or any ``Reranker``. Default (``None``):
            off with an ``embed_fn`` (scores as the reference documents), else ``True``.
        rerank_candidates: KNN candidates fetched when re-ranking (the full-text index adds
            up to 50 more on engines with TEXT fields).
        text_candidates: full-text hits of the query's words a re-ranked recall adds to its
            KNN candidates (50; 0: the KNN alone): memories the KNN misses, for one more query
            sent beside the KNN (its cost: the benchmark pages).
        text_timeout_ms: those full-text queries' budget (``TIMEOUT``, ms; 500). Past it, on a
            server error or a partial answer the recall ranks the KNN candidates alone
            (``explain.degraded``, ``agent_memory_recall_degraded_total``); a KNN failure raises.
        implicit_updates: same-slot supersession of statements without a subject, for questions
            about the present (docs/concepts/time.md, with its false supersession). ``False``:
            the composite order alone; subjects still supersede on write. Default ``True``.
        relevance_margin: with re-ranking, the threshold gates the recall as a whole: it
            answers when the nearest KNN candidate is within the threshold, or stands out
            from the median of the KNN candidates by at least this cosine distance; then
            the best hits by fused score come back, none cut by its own distance. Default:
            the shipped embedder's calibrated margin (ONNX 0.18, hashing 0.09), none for an
            ``embed_fn``; ``False``: the threshold alone.
        hnsw_m / hnsw_ef_construction / hnsw_ef_runtime: index parameters.
        reinforce_mode: ``"sync"`` (await the update) or ``"background"``.
        reinforce_write_interval: the most seconds a document's ``last_accessed_at`` /
            ``access_count`` (what Monitor and the reference read) lag behind its recalls: a
            background flush writes them, coalesced, once per interval and on ``close``
            (default: half-life / 200, 1 s..1 min). ``get`` is always exact. 0: each recall
            writes them itself (on RediSearch each write re-indexes the vector).
        retry: connection-fault retry policy for idempotent operations.
        wait_replicas / wait_timeout: replicas that must acknowledge each write (``WAIT``)
            within ``wait_timeout`` seconds, else ``server.replication_timeout`` (the write
            is applied on the primary). 0: none, Valkey's asynchronous replication.
        registry / tracer_provider: where metrics and spans go (also via ``telemetry``).
        heartbeat_interval: Monitor heartbeat period (<= 30 s).
        session_ttl ... summary_lock_ttl: the short-term tier's options; see
            ``tiers.session_config.SessionConfig.of``.
    """

    # What the constructor was given, as checked (``SyncMemoryStore`` forwards each one declared
    # here, read-only, with its docstring: scripts/gen_sync.py reads these lines).
    name: str
    """The store name: key prefix and index name."""
    embedder: Embedder | LazyFunctionEmbedder
    """The store's embedder."""
    default_threshold: float
    """The constructor's cosine-distance ceiling of a hit."""
    weights: Weights
    """The constructor's composite score weights."""
    half_life_seconds: float
    """The recency half-life."""
    max_items_per_scope: int | None
    """The constructor's capacity per scope (None: no cap)."""
    metadata_fields: MetadataFields
    """The declared metadata fields (``metadata_fields=``, checked): what ``where=`` may name."""

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
        metadata_fields: Mapping[str, Literal["numeric", "tag"]] | None = None,
        discovery: bool | MemoryDiscoveryConfig = True,
        config_refresh: bool | MemoryConfigRefreshConfig | None = None,
        consolidation: bool | ConsolidationConfig | None = None,
        telemetry: MemoryTelemetryOptions | None = None,
        analytics: bool | Telemetry = False,
        dedup: bool = False,
        candidate_factor: int = 1,
        reranker: Reranker | bool | None = None,
        rerank_candidates: int = 50,
        relevance_margin: float | bool | None = None,
        text_candidates: int = 50,
        text_timeout_ms: int = 500,
        implicit_updates: bool = True,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 200,
        hnsw_ef_runtime: int = 10,
        reinforce_mode: ReinforceMode = "sync",
        reinforce_write_interval: float | None = None,
        retry: RetryPolicy | None = None,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
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
        opts = check_options(
            embed_fn=embed_fn, embedder=embedder, dimensions=dimensions, default_threshold=default_threshold,
            weights=weights, half_life_seconds=half_life_seconds, max_items_per_scope=max_items_per_scope,
            discovery=discovery, config_refresh=config_refresh, consolidation=consolidation, telemetry=telemetry,
            dedup=dedup, candidate_factor=candidate_factor, reranker=reranker, rerank_candidates=rerank_candidates,
            relevance_margin=relevance_margin, text_candidates=text_candidates, reinforce_mode=reinforce_mode,
            reinforce_write_interval=reinforce_write_interval, retry=retry, heartbeat_interval=heartbeat_interval,
            metadata_fields=metadata_fields,
            wait_replicas=wait_replicas, wait_timeout=wait_timeout, text_timeout_ms=text_timeout_ms,
            implicit_updates=implicit_updates,
        )  # fmt: skip
        session_config = SessionConfig.of(
            session_ttl=session_ttl, max_session_turns=max_session_turns, summarizer=summarizer,
            fact_extractor=fact_extractor, token_counter=token_counter, summarize_batch=summarize_batch,
            max_unsummarized=max_unsummarized, budget=budget, redact=redact, shutdown_grace=shutdown_grace,
            summary_lock_ttl=summary_lock_ttl,
        )  # fmt: skip
        self.embedder = opts.embedder
        self.default_threshold = opts.threshold
        self.weights = opts.weights
        self.half_life_seconds = opts.defaults.half_life_seconds
        self.max_items_per_scope = opts.defaults.max_items_per_scope
        self.metadata_fields = opts.metadata_fields
        self.retry = opts.retry
        self._defaults = opts.defaults
        lazy, settings = opts.lazy, opts.settings

        # -- composition: the backend, then the parts, each given what it uses ----------------
        self._owned_client = False
        self._owned_server: Any = None
        self._closed = False  # set by the first line of close(); _closed_done once it returns
        self._closed_done = asyncio.Event()
        self.backend = ValkeyBackend(client, retry=self.retry, wait=opts.wait)
        self.supervisor = Supervisor()
        self._obs = StoreObservability(
            self.backend,
            self.keys,
            self._defaults,
            spawn=self.supervisor.spawn,
            registry=registry,
            tracer_provider=tracer_provider,
            discovery=opts.discovery,
            # Off: no periodic re-read (the hash is still read once when the store starts).
            config_refresh_seconds=opts.refresh_seconds if opts.refresh_seconds is not None else 1e9,
            heartbeat_interval=opts.heartbeat_interval,
            telemetry=telemetry,
            analytics=analytics,
        )
        self.supervisor.on_failure = lambda name: self._obs.metrics.observe_background_failure(name)
        self.index = IndexManager(
            self.backend,
            self.keys,
            self.embedder,
            hnsw=(hnsw_m, hnsw_ef_construction, hnsw_ef_runtime),
            resolve=lazy.resolve if lazy is not None else None,
            on_ready=self._obs.start,
            extra_schema=schema_args(opts.metadata_fields),
            extra_meta={"metadata_fields": opts.metadata_fields.to_json()},
            metadata_fields=opts.metadata_fields,  # an index switch backfills them
        )
        if opts.refresh_seconds is not None:
            self.index.settle_seconds = opts.refresh_seconds + 1.0  # one refresh, and its round trip
        self._obs.live.watch_index(self.keys.meta, self.index.observe_meta)
        rt = Runtime(
            keys=self.keys,
            backend=self.backend,
            index=self.index,
            embedder=self.embedder,
            obs=self._obs,
            supervisor=self.supervisor,
            settings=settings,
            metadata_fields=opts.metadata_fields,
        )
        self._rt = rt
        self._docs = Documents(rt)
        self._scopes = ScopeReader(rt)
        self._capacity = Capacity(rt, self._scopes, self._docs)
        self._recall = Recall(rt, self._docs)
        self._long_term = LongTermMemory(rt, self._capacity, self._recall, self._docs)
        self._summaries = RollingSummaries(rt, session_config, self._long_term)
        self._sessions = Sessions(
            rt, session_config, summaries=self._summaries, recall=self._recall, long_term=self._long_term
        )
        self._ledger = FactLedger(rt, self._scopes, self._long_term)
        self._consolidation = Consolidation(rt, self._scopes, self._long_term, self._docs, self._ledger)
        self._erasure = Erasure(
            rt,
            scopes=self._scopes,
            docs=self._docs,
            ledger=self._ledger,
            sessions=self._sessions,
            summaries=self._summaries,
        )

    # -- construction and lifecycle -------------------------------------------------------

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
        """Open a store on ``url``, or on the embedded server when there is none.

        The URL is ``url``, else ``BETTERDB_MEMORY_URL``, ``VALKEY_URL`` or
        ``REDIS_URL`` from the environment (the CLI reads the same). With none the
        embedded engine starts on the platform data dir (persistent, AOF), or is
        reused if another process already runs it there. The store owns the client
        (and the server it started) and closes them in ``close``; if building the
        store fails, both are closed before the error propagates. The pool blocks
        when all ``max_connections`` are busy instead of failing. ``options`` are
        the constructor's keyword arguments (an unknown one is a ``TypeError``).
        """
        store, server = await open_owned(
            lambda client: cls(client=client, name=name, embedder=embedder, **options),
            url,
            data_dir=data_dir,
            max_connections=max_connections,
            socket_timeout=socket_timeout,
        )
        store._owned_client = True
        store._owned_server = server
        return store

    @property
    def state(self) -> StoreState:
        """``NEW`` until the first call readies the index, then ``READY``; ``CLOSING`` from the
        first line of ``close`` while background work drains, ``CLOSED`` once it returned."""
        if self._closed:
            return StoreState.CLOSED if self._closed_done.is_set() else StoreState.CLOSING
        return StoreState.READY if self.index.ready else StoreState.NEW

    async def close(self) -> None:
        """Wait for background work, then close what this store opened (never the caller's client).

        Idempotent. Running rolling summaries get ``shutdown_grace`` seconds, other
        background work 5 s; the stats and the lagging access snapshots are flushed. From its first line every other
        operation raises ``StoreClosedError`` (``state`` is ``CLOSING``, then ``CLOSED``);
        a second call waits for the first to finish.
        """
        if self._closed:
            await self._closed_done.wait()
            return
        self._closed = True
        try:
            await self._summaries.close()
            await self.supervisor.close(grace=5.0)  # service loops stop at once; other work drains
            await self._docs.reinforcement.close()  # lagging access snapshots reach their documents
            await self._obs.close()  # the stats are flushed, the Monitor heartbeat key deleted
            self.backend.closed = True
            if self._owned_client:
                await self.backend.aclose()
            if self._owned_server is not None:
                await asyncio.to_thread(self._owned_server.stop)
        finally:
            self.backend.closed = True
            self._closed_done.set()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError("the store was closed; build a new one", code="state.closed")

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- what the store is made of: see StoreInfo (store_info.py) -----------------------------

    @property
    def client(self) -> ValkeyClient:
        """The Valkey client (the caller's, or the one ``connect`` opened)."""
        return self.backend.client

    # -- the parts' methods (each one the part's own: signature, docstring, behaviour) -------

    # Long-term memory (tiers.long_term, tiers.documents, tiers.recall).
    remember = _Delegate("_long_term", LongTermMemory.remember)
    remember_many = _Delegate("_long_term", LongTermMemory.remember_many)
    update = _Delegate("_long_term", LongTermMemory.update)
    get = _Delegate("_docs", Documents.get)
    get_many = _Delegate("_docs", Documents.get_many)
    forget = _Delegate("_docs", Documents.forget)
    history = _Delegate("_docs", Documents.history)
    effective_threshold = _Delegate("_recall", Recall.effective_threshold)
    recall = _Delegate("_recall", Recall.recall)
    recall_by_vector = _Delegate("_recall", Recall.recall_by_vector)
    search_candidates = _Delegate("_recall", Recall.search_candidates)

    # Scopes (tiers.scopes, tiers.erasure).
    count = _Delegate("_scopes", ScopeReader.count)
    list = _Delegate("_scopes", ScopeReader.list)
    forget_by_scope = _Delegate("_erasure", Erasure.forget_by_scope)
    erase = _Delegate("_erasure", Erasure.erase)

    # Sessions (tiers.sessions, tiers.summaries).
    store_turn = _Delegate("_sessions", Sessions.store_turn)
    get_recent_turns = _Delegate("_sessions", Sessions.get_recent_turns)
    get_session_metadata = _Delegate("_sessions", Sessions.get_session_metadata)
    clear_session = _Delegate("_sessions", Sessions.clear_session)
    retrieve_context = _Delegate("_sessions", Sessions.retrieve_context)
    extract_memories = _Delegate("_sessions", Sessions.extract_memories)

    async def summarize_session(self, thread_id: str, *, agent_id: str | None = None) -> int:
        """Fold every turn older than the window into summaries now, even a partial batch.

        For the end of a conversation, or tests. Waits for a summary of this session
        already running here. Returns the number of turns summarised.

        Raises:
            BetterDBMemoryError: the summariser or the write failed (also counted).
        """
        thread, agent = session_ids(thread_id, agent_id)
        return await self._summaries.summarize_session(agent, thread)

    # Consolidation (tiers.consolidation, tiers.fact_ledger).
    consolidate = _Delegate("_consolidation", Consolidation.consolidate)
    consolidate_facts = _Delegate("_consolidation", Consolidation.consolidate_facts)
    fact_history = _Delegate("_ledger", FactLedger.fact_history)
    purge_fact_history = _Delegate("_ledger", FactLedger.purge_fact_history)
