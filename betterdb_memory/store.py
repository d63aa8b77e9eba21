"""``MemoryStore``: long-term memories as HASH documents in an HNSW index.

The I/O layer only: key names (``keys``), query strings (``query``), reply parsing
(``replies``), scoring (``scoring``) and argument checks (``validation``) are pure
modules this class calls. Every backend call goes through ``_io.call``, the one
place errors are translated and idempotent operations retried.

Write path: one Lua script per memory (``_scripts.WRITE``) does dedup, insert,
bookkeeping and capacity eviction atomically on the keys of one scope, so a cap
holds exactly under concurrent writers and the cost of a write does not grow with
the scope's size. Recall: one KNN query (hybrid when scoped), client-side composite
scoring, and reinforcement of the returned hits in one pipelined round trip.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import valkey.asyncio as avalkey
import valkey.exceptions as vexc

from . import _scripts
from ._io import RetryPolicy, call
from ._observe import StoreObservability
from .codec import as_text, encode_vector, join_list, to_int, validate_vector
from .consolidation import ConsolidationMixin
from .dialect import Capabilities, IndexInfo, parse_ft_info, probe
from .embedders.base import Embedder, EmbeddingFunction, as_embedder
from .errors import (
    ConfigurationError,
    IndexExistsError,
    IndexNotFoundError,
    ValidationError,
)
from .escaping import tag_token
from .keys import KeySpace, Scope
from .models import MemoryItem, StoreStats, item_from_fields
from .observability.live_config import ConfigSnapshot
from .observability.telemetry import Telemetry
from .observability.tracing import add_attributes
from .query import RETURN_FIELDS, IndexSpec, create_index_args
from .ranking import HybridRanker, Reranker
from .recall import RecallMixin
from .scopes import ScopeOpsMixin
from .scoring import DEFAULT_HALF_LIFE_SECONDS, Weights
from .short_term import ShortTermMixin
from .validation import (
    check_content,
    check_importance,
    check_metadata,
    check_sensitivity,
    check_tags,
    check_threshold,
    check_ttl,
)

__all__ = ["MemoryStore"]

log = logging.getLogger("betterdb_memory")

_ITEM_FIELDS: tuple[str, ...] = RETURN_FIELDS
_SCHEMA_VERSION = "1"


def _normalise_for_dedup(content: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", content).casefold().split())


def _dedup_hash(content: str, kind: str) -> str:
    import hashlib

    return hashlib.blake2b(f"{kind}\x00{_normalise_for_dedup(content)}".encode(), digest_size=16).hexdigest()


class MemoryStore(RecallMixin, ScopeOpsMixin, ShortTermMixin, ConsolidationMixin):
    """Long-term agent memory on Valkey Search.

    Args:
        client: a ``valkey.asyncio.Valkey`` owned by the caller (not closed by ``close``).
        name: store name: key prefix and index name (``<name>:mem:idx``).
        embedder: an ``Embedder`` (``dimensions``, ``model_id``, ``async embed``).
        embed_fn: alternatively a plain ``async fn(text) -> list[float]`` with ``dimensions``.
        dimensions: required with ``embed_fn``.
        threshold: minimum similarity (0..1) of a recalled hit; ``None`` uses the
            embedder's calibrated default.
        weights: composite score weights (similarity / recency / importance).
        half_life_seconds: recency half-life (7 days by default).
        max_items_per_scope: capacity of each exact scope; ``None`` for no cap.
        dedup: reinforce instead of writing a twin of the same content in a scope.
        candidate_factor: KNN candidates fetched per requested hit. 1 (default) re-ranks
            the k nearest by the composite score; 2-4 lets an important or recent memory
            from just past the k nearest in, at the cost of a larger reply to parse.
        reranker: how the KNN candidates of a text ``recall`` are re-ordered before
            scoring. ``True`` (default): ``HybridRanker()``, BM25-style evidence from
            the words query and memory share, fused with the dense similarity in the
            client (every engine, no TEXT field needed). ``False``: the dense order.
            Or any ``Reranker``. The hit's ``similarity`` is then the fused one (0..1,
            never below the dense similarity), and the threshold and the composite
            score apply to it; ``distance`` stays the KNN cosine distance.
            ``recall_by_vector`` re-ranks only when given ``query=``.
        rerank_candidates: KNN candidates fetched when re-ranking (at least
            ``k * candidate_factor``): lexical evidence can only lift what the KNN
            returned. LoCoMo hit@5 with MiniLM: dense 0.42; re-ranked 20 / 50 / 100 / 200
            candidates 0.52 / 0.57 / 0.59 / 0.61 (``bench/results/quality.md``).
        hnsw_m / hnsw_ef_construction / hnsw_ef_runtime: index parameters.
        reinforce_mode: ``"sync"`` (await the update) or ``"background"``.
        reinforce_write_interval: seconds a document's ``last_accessed_at`` snapshot may
            lag before a recall rewrites it (default: half-life / 200, 1 s..1 h). The
            exact ``access_count`` is always kept, outside the index.
        retry: connection-fault retry policy for idempotent operations.
        registry: Prometheus registry for the ``agent_memory_*`` metrics (default: global).
        tracer_provider: OpenTelemetry provider (default: the global one; no-op if unset).
        discovery: register with BetterDB Monitor (marker + heartbeat).
        config_refresh_seconds: how often the live config hash is re-read.
        heartbeat_interval: Monitor heartbeat period (<= 30 s).
        telemetry: opt-in anonymous product telemetry (``True`` or a ``Telemetry``);
            ``DO_NOT_TRACK`` always wins.
        **short_term: L1 options (``session_ttl``, ``max_session_turns``, ``summarizer``,
            ``fact_extractor``, ``token_counter``, ``summarize_batch``,
            ``max_unsummarized``, ``budget``, ``redact``, ``shutdown_grace``,
            ``summary_lock_ttl``); see ``short_term.ShortTermMixin._init_short_term``.
    """

    def __init__(
        self,
        *,
        client: Any,
        name: str = "betterdb",
        embedder: Embedder | None = None,
        embed_fn: EmbeddingFunction | None = None,
        dimensions: int | None = None,
        threshold: float | None = None,
        weights: Weights | Mapping[str, float] | None = None,
        half_life_seconds: float = DEFAULT_HALF_LIFE_SECONDS,
        max_items_per_scope: int | None = None,
        dedup: bool = True,
        candidate_factor: int = 1,
        reranker: Reranker | bool = True,
        rerank_candidates: int = 50,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 200,
        hnsw_ef_runtime: int = 10,
        reinforce_mode: str = "sync",
        reinforce_write_interval: float | None = None,
        retry: RetryPolicy | None = None,
        registry: Any = None,
        tracer_provider: Any = None,
        discovery: bool = True,
        config_refresh_seconds: float = 5.0,
        heartbeat_interval: float = 30.0,
        telemetry: bool | Telemetry = False,
        **short_term: Any,
    ) -> None:
        self.keys = KeySpace(name)
        self.name = name
        if embedder is None and embed_fn is None:
            from .embedders import default_embedder

            embedder = default_embedder()
        self.embedder: Embedder = as_embedder(
            embedder if embedder is not None else embed_fn, dimensions=dimensions
        )
        self._client = client
        self._owned_client = False
        self._owned_server: Any = None
        self.threshold = check_threshold(threshold)
        self.weights = Weights.of(dict(weights) if isinstance(weights, Mapping) else weights)
        if not isinstance(half_life_seconds, int | float) or not half_life_seconds > 0:
            raise ValidationError("half_life_seconds must be positive", code="validation.range")
        self.half_life_seconds = float(half_life_seconds)
        if max_items_per_scope is not None and (
            isinstance(max_items_per_scope, bool)
            or not isinstance(max_items_per_scope, int)
            or max_items_per_scope < 1
        ):
            raise ValidationError("max_items_per_scope must be a positive integer", code="validation.range")
        self.max_items_per_scope = max_items_per_scope
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
        if not isinstance(candidate_factor, int) or candidate_factor < 1:
            raise ValidationError("candidate_factor must be a positive integer", code="validation.range")
        self.candidate_factor = candidate_factor
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
        self.spec = IndexSpec(
            index=self.keys.index,
            prefix=self.keys.doc_prefix,
            dimensions=self.embedder.dimensions,
            m=hnsw_m,
            ef_construction=hnsw_ef_construction,
            ef_runtime=hnsw_ef_runtime,
        )
        self.retry = retry or RetryPolicy()
        self._defaults = ConfigSnapshot(
            threshold=self.threshold,
            weight_similarity=self.weights.similarity,
            weight_recency=self.weights.recency,
            weight_importance=self.weights.importance,
            half_life_seconds=self.half_life_seconds,
            max_items_per_scope=self.max_items_per_scope,
        )
        if isinstance(telemetry, bool):
            telemetry = Telemetry(enabled=telemetry)
        self._obs = StoreObservability(
            client,
            self.keys,
            self._defaults,
            registry=registry,
            tracer_provider=tracer_provider,
            discovery=discovery,
            config_refresh_seconds=config_refresh_seconds,
            heartbeat_interval=heartbeat_interval,
            telemetry=telemetry,
        )
        self.metrics = self._obs.metrics
        self._init_short_term(**short_term)
        self.capabilities: Capabilities | None = None
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._write_script = client.register_script(_scripts.WRITE)
        self._forget_script = client.register_script(_scripts.FORGET)
        self._forget_page_script = client.register_script(_scripts.FORGET_PAGE)
        self._reinforce_script = client.register_script(_scripts.REINFORCE)
        self._scripts_all = (
            self._write_script,
            self._forget_script,
            self._forget_page_script,
            self._reinforce_script,
        )
        self._background: set[asyncio.Task[Any]] = set()
        self._near_miss_warned = False
        self.near_misses = 0
        self._closed = False

    # -- construction ------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        url: str | None = None,
        *,
        name: str = "betterdb",
        embedder: Embedder | None = None,
        data_dir: str | None = None,
        max_connections: int = 64,
        socket_timeout: float = 10.0,
        **options: Any,
    ) -> MemoryStore:
        """Open a store on ``url``, or on the embedded server when ``url`` is None.

        With no URL the embedded engine starts on the platform data dir (persistent,
        AOF), or is reused if another process already runs it there. The store owns
        the client (and the server it started) and closes them in ``close``.
        The pool blocks when all ``max_connections`` are busy instead of failing.
        """
        server = None
        if url is None:
            from .server import EmbeddedServer, default_data_dir

            server = EmbeddedServer(data_dir=data_dir or default_data_dir())
            await asyncio.to_thread(server.start)
            url = server.url
        pool = avalkey.BlockingConnectionPool.from_url(
            url, max_connections=max_connections, timeout=socket_timeout, socket_timeout=socket_timeout
        )
        client = avalkey.Valkey.from_pool(pool)  # the client owns (and closes) the pool
        try:
            store = cls(client=client, name=name, embedder=embedder, **options)
        except BaseException:
            await client.aclose()
            raise
        store._owned_client = True
        store._owned_server = server if server is not None and server._proc is not None else None
        return store

    async def close(self) -> None:
        """Wait for background work, then close what this store opened (never the caller's client)."""
        if self._closed:
            return
        self._closed = True
        await self._close_short_term()
        if self._background:
            await asyncio.wait(self._background, timeout=5.0)
        await self._obs.close()
        if self._owned_client:
            await self._client.aclose()
        if self._owned_server is not None:
            await asyncio.to_thread(self._owned_server.stop)

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

    # -- index ------------------------------------------------------------------------

    async def ensure_index(self) -> None:
        """Create the index if absent; idempotent and safe to race ("exists" is success).

        Raises:
            ConfigurationError: the index (or its recorded metadata) was made for a
                different embedding dimension or model; vectors of two models must
                never share an index.
        """
        async with self._ready_lock:
            await self._ensure_index_locked(force=True)

    async def _ensure_ready(self) -> None:
        if self._ready:
            return
        async with self._ready_lock:
            if not self._ready:
                await self._ensure_index_locked(force=False)

    async def _ensure_index_locked(self, *, force: bool) -> None:
        client = self._client
        if self.capabilities is None:
            self.capabilities = await call("probe", lambda: probe(client), policy=self.retry)
        caps = self.capabilities
        meta_raw = await call("ensure_index", lambda: client.hgetall(self.keys.meta), policy=self.retry)
        meta = {as_text(k): as_text(v) for k, v in meta_raw.items()}
        self._check_meta(meta)
        try:
            await call(
                "ensure_index",
                lambda: client.execute_command(*create_index_args(self.spec, caps)),
                policy=self.retry,
            )
            # A new index over existing documents (a recreated one) backfills in the
            # background; wait, bounded, so the next query sees what was stored.
            await self._wait_index_ready(limit_seconds=30.0)
        except IndexExistsError:
            info = await self.index_info()
            if (
                info is not None
                and info.dimensions is not None
                and info.dimensions != self.embedder.dimensions
            ):
                raise ConfigurationError(
                    f"index {self.keys.index} holds {info.dimensions}-d vectors but the embedder "
                    f"{self.embedder.model_id!r} makes {self.embedder.dimensions}-d vectors",
                    code="configuration.dimension_mismatch",
                    details={
                        "index_dimensions": info.dimensions,
                        "embedder_dimensions": self.embedder.dimensions,
                    },
                ) from None
        fields = {
            "dimensions": str(self.embedder.dimensions),
            "model_id": self.embedder.model_id,
            "schema": _SCHEMA_VERSION,
            "index": self.keys.index,
        }

        async def record() -> None:
            pipe = client.pipeline(transaction=False)
            for k, v in fields.items():
                pipe.hsetnx(self.keys.meta, k, v)
            pipe.hgetall(self.keys.meta)
            out = await pipe.execute()
            self._check_meta({as_text(k): as_text(v) for k, v in out[-1].items()})

        await call("ensure_index", record, policy=self.retry)
        self._ready = True
        if not self._closed:
            await self._obs.start(caps.as_list())

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

    async def index_info(self) -> IndexInfo | None:
        """FT.INFO of this store's index, normalised across engines; None when absent."""
        try:
            reply = await call(
                "index_info",
                lambda: self._client.execute_command("FT.INFO", self.keys.index),
                policy=self.retry,
            )
        except IndexNotFoundError:
            return None
        return parse_ft_info(reply)

    async def _with_index(self, operation: str, fn: Any) -> Any:
        """Run ``fn``; if the index vanished under us, recreate it once and run again."""
        await self._ensure_ready()
        try:
            return await fn()
        except IndexNotFoundError:
            log.warning("%s: index %s is missing; recreating it", operation, self.keys.index)
            async with self._ready_lock:
                self._ready = False
                await self._ensure_index_locked(force=True)
            return await fn()

    # -- embedding ----------------------------------------------------------------------

    async def _embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        from .embedders.base import validate_embeddings

        out = await self.embedder.embed(list(texts))
        return validate_embeddings(
            out, count=len(texts), dimensions=self.embedder.dimensions, model_id=self.embedder.model_id
        )

    # -- remember -----------------------------------------------------------------------

    def _prepare(self, content: object, opts: Mapping[str, Any]) -> dict[str, Any]:
        """Validate one memory's arguments (the API boundary); no I/O."""
        allowed = {
            "importance", "tags", "source", "ttl", "thread_id", "agent_id", "namespace",
            "sensitivity", "metadata", "kind", "subject", "vector",
        }  # fmt: skip
        unknown = set(opts) - allowed
        if unknown:
            raise ValidationError(f"unknown arguments {sorted(unknown)}", code="validation.argument")
        text = check_content(content)
        scope = Scope.of(
            namespace=opts.get("namespace"), agent_id=opts.get("agent_id"), thread_id=opts.get("thread_id")
        )
        source = opts.get("source")
        if source is not None:
            check_tags([source], name="source")
        kind = opts.get("kind", "memory")
        if kind not in ("memory", "summary", "fact", "extracted"):
            raise ValidationError(f"unknown kind {kind!r}", code="validation.kind")
        vector = opts.get("vector")
        return {
            "content": text,
            "scope": scope,
            "importance": check_importance(opts.get("importance", 0.5)),
            "tags": check_tags(opts.get("tags")),
            "source": source,
            "ttl": check_ttl(opts.get("ttl")),
            "sensitivity": check_sensitivity(opts.get("sensitivity", "none")),
            "metadata": check_metadata(opts.get("metadata")),
            "kind": kind,
            "subject": opts.get("subject"),
            "vector": None
            if vector is None
            else validate_vector(vector, dimensions=self.embedder.dimensions),
        }

    def _write_args(
        self,
        prepared: Mapping[str, Any],
        vector: np.ndarray[Any, np.dtype[np.float32]],
        now: float,
        cfg: ConfigSnapshot,
    ) -> tuple[list[str], list[Any], str]:
        scope: Scope = prepared["scope"]
        memory_id = self.keys.new_memory_id(scope)
        ttl = prepared["ttl"]
        expires_at = now + ttl if ttl else 0.0
        dh = _dedup_hash(prepared["content"], prepared["kind"]) if self.dedup else ""
        fields: dict[str, Any] = {
            "content": prepared["content"],
            "embedding": encode_vector(vector),
            "importance": repr(prepared["importance"]),
            "created_at": repr(now),
            "last_accessed_at": repr(now),
            "access_count": "0",
            "sensitivity": prepared["sensitivity"],
            "kind": prepared["kind"],
            "dedup": dh,
            "metadata": json.dumps(prepared["metadata"], ensure_ascii=False),
            "tags": ",".join(tag_token(t) for t in prepared["tags"]),
            "tags_raw": join_list(prepared["tags"]),
        }
        if ttl:
            fields["expires_at"] = repr(expires_at)
        for dim, value in (
            ("thread_id", scope.thread_id),
            ("agent_id", scope.agent_id),
            ("namespace", scope.namespace),
            ("source", prepared["source"]),
        ):
            if value is not None:
                fields[dim] = tag_token(value)
                fields[f"{dim}_raw"] = value
        if prepared["subject"] is not None:
            fields["subject"] = prepared["subject"]
        keys = [self.keys.doc(memory_id), *self.keys.scope_keys(scope.tag)]
        cap = cfg.max_items_per_scope or 0
        args: list[Any] = [
            self.keys.doc_prefix,
            memory_id,
            dh,
            str(cap),
            repr(now),
            repr(cfg.half_life_seconds),
            repr(prepared["importance"]),
            str(int(ttl * 1000)) if ttl else "0",
            repr(expires_at),
            repr(self._access_interval(cfg.half_life_seconds)),
        ]
        for k, v in fields.items():
            args += [k, v]
        return keys, args, memory_id

    async def remember(self, content: str, **options: Any) -> str:
        """Store one memory; returns its id (the existing id when deduplicated).

        Keyword options: ``importance`` (0..1, default 0.5), ``tags``, ``source``,
        ``ttl`` (seconds), ``thread_id``, ``agent_id``, ``namespace``, ``sensitivity``
        (``none|low|pii|sensitive``), ``metadata`` (JSON-able mapping), ``vector``
        (a precomputed embedding; skips the embedder).

        Raises:
            ValidationError: any bad argument; nothing is written.
            StoreConnectionError: the server could not be reached (after retries).
        """
        return (await self.remember_many([{"content": content, **options}]))[0]

    async def remember_many(self, items: Iterable[str | Mapping[str, Any]]) -> list[str]:
        """Store many memories: one embedding batch and one pipelined round trip.

        Every item is validated before anything is embedded or written, so a bad
        item fails the whole call with nothing stored. Returns ids in input order.
        """
        with self._obs.span("remember") as span:
            ids, evicted, dedup_hits = await self._remember_many(items)
            add_attributes(span, lambda: {"gen_ai.memory.count": len(ids), "gen_ai.memory.evicted": evicted})
        self.metrics.observe_remember(len(ids), dedup_hits=dedup_hits)
        if evicted:
            self.metrics.observe_evictions(evicted)
        self._obs.count({"remembers": len(ids), "dedup_hits": dedup_hits, "evictions": evicted})
        return ids

    async def _remember_many(self, items: Iterable[str | Mapping[str, Any]]) -> tuple[list[str], int, int]:
        if isinstance(items, str | bytes | Mapping):
            raise ValidationError(
                "remember_many takes a list of items (str or mapping), not a single one; use remember()",
                code="validation.type",
                details={"argument": "items", "type": type(items).__name__},
            )
        prepared: list[dict[str, Any]] = []
        for i, item in enumerate(items):
            try:
                if isinstance(item, str):
                    prepared.append(self._prepare(item, {}))
                elif isinstance(item, Mapping):
                    opts = dict(item)
                    content = opts.pop("content", None)
                    prepared.append(self._prepare(content, opts))
                else:
                    raise ValidationError(
                        f"item {i} must be a str or a mapping with 'content'", code="validation.type"
                    )
            except ValidationError as exc:
                exc.details.setdefault("item", i)
                raise
        if not prepared:
            return [], 0, 0
        need = [i for i, p in enumerate(prepared) if p["vector"] is None]
        vectors: list[Any] = [p["vector"] for p in prepared]
        if need:
            embedded = await self._embed([prepared[i]["content"] for i in need])
            for j, i in enumerate(need):
                vectors[i] = embedded[j]
        for i in need:  # given vectors were checked in _prepare; check only the embedded ones
            validate_vector(vectors[i], dimensions=self.embedder.dimensions, name=f"embedding of item {i}")
        now = time.time()
        cfg = self.current_config()
        calls = [self._write_args(p, vectors[i], now, cfg) for i, p in enumerate(prepared)]

        def build(pipe: Any) -> None:
            # Registry first: a connection cut between the two must never leave a stored
            # memory that count / list / forget_by_scope cannot find (erasure relies on it).
            registered: set[str] = set()
            for p in prepared:
                scope: Scope = p["scope"]
                if scope.tag in registered:
                    continue
                registered.add(scope.tag)
                for key in self.keys.registry_sets(scope):
                    pipe.sadd(key, scope.tag)
                pipe.hsetnx(
                    self.keys.scope_info,
                    scope.tag,
                    json.dumps([scope.namespace, scope.agent_id, scope.thread_id], ensure_ascii=False),
                )
            for keys, args, _ in calls:
                pipe.evalsha(self._write_script.sha, len(keys), *keys, *args)

        async def run() -> list[Any]:
            return await self._run_scripted(build)

        # Ids are fixed client-side before the first attempt, so a retry after a
        # dropped connection rewrites the same documents: safe to retry.
        results = await self._with_index(
            "remember", lambda: call("remember", run, policy=self.retry, details={"count": len(calls)})
        )
        results = results[len(results) - len(calls) :]
        ids: list[str] = []
        evicted = 0
        for res in results:
            ids.append(as_text(res[0]))
            evicted += max(0, len(res) - 2)
        return ids, evicted, sum(int(r[1]) for r in results)

    def _access_interval(self, half_life: float) -> float:
        """How stale a document's access snapshot may get before a recall rewrites it.

        1/200 of the half-life (recency error under 0.35%), between 1 s and 1 h. Each
        rewrite re-indexes the whole document on RediSearch; see ``_scripts``.
        """
        if self.reinforce_write_interval is not None:
            return self.reinforce_write_interval
        return min(3600.0, max(1.0, half_life / 200.0))

    async def _run_scripted(self, build: Callable[[Any], None]) -> list[Any]:
        """Run a pipeline of EVALSHA calls; on NOSCRIPT (restart, SCRIPT FLUSH) load and rerun once.

        valkey-py's ``Script`` objects send ``SCRIPT EXISTS`` before every pipeline
        that holds one: a second round trip on every write. Sending EVALSHA directly
        and loading on demand keeps it to one. Every pipeline built here is safe to
        rerun after NOSCRIPT: no script in it ran, and the other commands are idempotent.
        """
        for attempt in (1, 2):
            pipe = self._client.pipeline(transaction=False)
            build(pipe)
            try:
                return list(await pipe.execute())
            except vexc.NoScriptError:
                if attempt == 2:
                    raise
                for script in self._scripts_all:
                    await self._client.script_load(script.script)
        raise AssertionError("unreachable")  # pragma: no cover

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._background.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("background task failed: %s", t.exception())

        task.add_done_callback(done)

    # -- read ---------------------------------------------------------------------------

    async def get(self, memory_id: str) -> MemoryItem | None:
        """The memory with this id, or None (never the raw vector)."""
        return (await self.get_many([memory_id]))[0]

    async def get_many(self, memory_ids: Sequence[str]) -> list[MemoryItem | None]:
        """``get`` for many ids in one pipelined round trip (exact access counts included)."""
        keys = [self.keys.doc(m) for m in memory_ids]

        async def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            for mid, key in zip(memory_ids, keys, strict=True):
                pipe.hmget(key, list(_ITEM_FIELDS))
                pipe.hget(self.keys.scope_access(self.keys.scope_tag_of(mid)), mid)
            return list(await pipe.execute())

        rows = await call("get", run, policy=self.retry) if keys else []
        out: list[MemoryItem | None] = []
        for n, mid in enumerate(memory_ids):
            fields = dict(zip(_ITEM_FIELDS, rows[2 * n], strict=True))
            if fields.get("content") is None:
                out.append(None)
                continue
            item = item_from_fields(mid, fields)
            exact = to_int(rows[2 * n + 1])
            out.append(dataclasses.replace(item, access_count=exact) if exact > item.access_count else item)
        return out

    # -- forget -------------------------------------------------------------------------

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory and its bookkeeping; True if it existed."""
        tag = self.keys.scope_tag_of(memory_id)
        keys = [self.keys.doc(memory_id), *self.keys.scope_keys(tag)]

        async def run() -> Any:
            return await self._forget_script(keys=keys, args=[self.keys.doc_prefix, memory_id])

        with self._obs.span("forget"):
            return bool(int(await call("forget", run, policy=self.retry)))

    # -- stats ----------------------------------------------------------------------------

    async def stats(self) -> StoreStats:
        """Counts, index health and settings (what ``stats`` in the CLI prints)."""
        await self._ensure_ready()
        assert self.capabilities is not None
        await self._obs.flush()
        info = await self.index_info()
        if info is not None:
            self.metrics.set_items(info.num_docs)

        async def run() -> list[Any]:
            pipe = self._client.pipeline(transaction=False)
            pipe.hgetall(self.keys.stats)
            pipe.scard(self.keys.scopes_all)
            return list(await pipe.execute())

        counters_raw, scopes = await call("stats", run, policy=self.retry)
        counters = {as_text(k): to_int(v) for k, v in counters_raw.items()}
        return StoreStats(
            name=self.name,
            index_name=self.keys.index,
            items=info.num_docs if info else 0,
            scopes=int(scopes),
            evictions=counters.get("evictions", 0),
            counters=counters,
            index=info,
            capabilities=self.capabilities,
            embedder_model=self.embedder.model_id,
            dimensions=self.embedder.dimensions,
            config={**self.current_config().as_hash(), "effective_threshold": self.effective_threshold()},
        )
