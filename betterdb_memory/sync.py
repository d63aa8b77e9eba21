# GENERATED FILE: written by scripts/gen_sync.py from MemoryStore and AgentMemory. Do not edit.
# Change the async class (or the generator, or betterdb_memory/_sync_bridge.py) and run
# `python scripts/gen_sync.py`; `make check` runs it with --check and fails while this file is stale.
# Generated, so exempt from the 450-line limit on modules.
"""Blocking ``SyncMemoryStore`` / ``SyncAgentMemory``: the async classes, run on a private loop thread.

For scripts, notebooks and the synchronous halves of LangChain and LangGraph. Nothing
here re-implements an operation: each sync object owns one event loop in a daemon
thread, the async object lives on that loop, and every method runs the async one there::

    caller thread(s)                          private loop thread ("betterdb-memory-...")
    store.recall(q, k=3) ── run_coroutine_threadsafe ──▶ await MemoryStore.recall(q, k=3)
         blocks on the concurrent future ◀── result / the same typed exception ──┘

This module is generated from ``MemoryStore`` / ``AgentMemory`` by ``scripts/gen_sync.py``
(``make check`` fails when it is stale), so each member below has the async member's
name, parameters, defaults, annotations and docstring:

* a coroutine method becomes a blocking method that runs the coroutine on the loop
  thread and returns its result or raises its exception (the same
  ``BetterDBMemoryError`` subclasses, ``code`` and ``details``);
* a plain method (``current_config``) runs on the loop thread too, so the async object
  is only ever touched from its own thread;
* a property is read (and, where the async one has a setter, written) through;
* a classmethod coroutine (``connect``) becomes a classmethod building the sync object.

What is not a translation (the loop, opening and closing, ``wrap``, ``async_store``, the
cache tiers' blocking views) is hand-written in ``betterdb_memory._sync_bridge``.

Why no ``SyncMemoryStore(client=...)``: a ``valkey.asyncio`` client belongs to the
event loop it is used on (its connections are that loop's streams, its pool's
waiters that loop's futures). A client handed in may already have been used on the
caller's loop, or be used there later, and then fails on one of the two ("attached to
a different loop") or hangs. So the client is built on the private loop and used
nowhere else: ``connect(url, ...)`` does it as ``MemoryStore.connect`` does, and
``wrap(factory)`` calls your factory there (your own pool, a cluster client, an
``AgentMemory`` with a custom client).

Threads and loops: any number of threads may call one sync object at once (the async
store is safe for concurrent tasks on its loop). Calling from a thread that runs its
own event loop (a Jupyter cell, inside ``asyncio.run``) works: that thread blocks
while the private loop does the work, so do not do it from latency-sensitive async
code (use the async class there). Calling from the private loop's own thread (an
embedder, summariser or callback of this store calling the sync API) would wait for
itself forever and raises ``SyncReentrancyError`` instead. The seams you pass in
(``embed_fn``, summarisers, extractors) run on the private loop: give them clients
they create lazily, not ones bound to your loop.

``close()`` (or leaving ``with``) refuses new calls, gives the calls still running in
other threads up to ``CLOSE_GRACE_SECONDS`` to finish, closes the async object on its
loop, then stops the loop (cancelling what is left) and joins its thread. Calls made
afterwards raise ``StoreClosedError`` (``AgentMemoryClosedError`` for the facade). A
sync object dropped without ``close()`` is closed the same way when garbage-collected
or at interpreter exit (where an embedded server it started may outlive the process,
as after a crash; the next ``connect`` attaches to it).
"""

import builtins
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Literal

import numpy as np

from ._loop_thread import CLOSE_GRACE_SECONDS, SyncReentrancyError
from ._sync_bridge import AgentMemoryBridge, MemoryStoreBridge
from .backend.index_switch import SwitchReport
from .core.context import RetrievedContext
from .core.dialect import Capabilities
from .core.facts import ConsolidateFactsResult, ExtractFactsFn, FactRecord, SummarizeFn
from .core.filter_fields import MetadataFields
from .core.ft_info import IndexInfo
from .core.keys import DEFAULT_NAME
from .core.models import MemoryHit, MemoryItem, MemoryKind, MemoryPage, MemoryVersion, Sensitivity, StoreStats
from .core.options import MemoryListOptions, ReinforceMode
from .core.query import ITEM_FIELDS, IndexLayout, IndexSpec, MemoryFilter
from .core.ranking import Reranker
from .core.requests import MemoryInput, TimeInput
from .core.scoring import Weights
from .core.tunables import ConfigSnapshot
from .core.turns import SessionMetadata, Turn
from .embedders.base import Embedder
from .embedders.lazy import LazyFunctionEmbedder
from .facade import AgentMemory
from .lifecycle import StoreState
from .observability.metrics import MemoryMetrics
from .progress import ProgressSink
from .store import MemoryStore
from .tiers.session_config import SessionConfig

__all__ = ["CLOSE_GRACE_SECONDS", "SyncAgentMemory", "SyncMemoryStore", "SyncReentrancyError"]


class SyncMemoryStore(MemoryStoreBridge):
    """``MemoryStore`` with blocking methods, run on a private event-loop thread.

    Every public method of ``MemoryStore`` is here with the same name, parameters,
    defaults, docstring and exceptions, returning what the coroutine returns::

        with SyncMemoryStore.connect(url, name="app") as store:
            store.remember("Ada lives in Lisbon.", thread_id="ada")
            hits = store.recall("Where does Ada live?", thread_id="ada")

    Build one with ``connect`` (the arguments of ``MemoryStore.connect``: a URL or the
    embedded server, and every constructor option) or ``wrap(factory)`` (your own
    client, made on the private loop); ``SyncMemoryStore(client=...)`` is refused,
    because an async client belongs to one event loop (see the module docstring).
    ``close()`` or ``with`` closes it. Safe to call from several threads at once and
    from a thread that runs its own event loop; see ``betterdb_memory.sync``.

    ``client`` is not forwarded (an async client bound to the private loop is of no
    use in the caller's thread); ``async_store`` is the ``MemoryStore`` itself, for
    code that runs on that loop.
    """

    @property
    def name(self) -> str:
        """The store name: key prefix and index name."""
        return self._target.name

    @property
    def embedder(self) -> Embedder | LazyFunctionEmbedder:
        """The store's embedder."""
        return self._target.embedder

    @property
    def default_threshold(self) -> float:
        """The constructor's cosine-distance ceiling of a hit."""
        return self._target.default_threshold

    @property
    def weights(self) -> Weights:
        """The constructor's composite score weights."""
        return self._target.weights

    @property
    def half_life_seconds(self) -> float:
        """The recency half-life."""
        return self._target.half_life_seconds

    @property
    def max_items_per_scope(self) -> int | None:
        """The constructor's capacity per scope (None: no cap)."""
        return self._target.max_items_per_scope

    @property
    def metadata_fields(self) -> MetadataFields:
        """The declared metadata fields (``metadata_fields=``, checked): what ``where=`` may name."""
        return self._target.metadata_fields

    @property
    def metrics(self) -> MemoryMetrics:
        return self._target.metrics

    @metrics.setter
    def metrics(self, value: MemoryMetrics) -> None:
        self._target.metrics = value

    @property
    def capabilities(self) -> Capabilities | None:
        """What the engine supports (probed on first use; None before)."""
        return self._target.capabilities

    @property
    def layout(self) -> IndexLayout:
        """Which optional fields the index in place has (this library's, or another's)."""
        return self._target.layout

    @property
    def spec(self) -> IndexSpec:
        return self._target.spec

    @property
    def near_misses(self) -> int:
        """Recalls that came back empty with the nearest memory just past the threshold."""
        return self._target.near_misses

    @property
    def fact_source(self) -> str:
        return self._target.fact_source

    @property
    def fact_importance(self) -> float:
        return self._target.fact_importance

    @property
    def dedup(self) -> bool:
        return self._target.dedup

    @property
    def reranker(self) -> Reranker | None:
        return self._target.reranker

    @property
    def rerank_candidates(self) -> int:
        return self._target.rerank_candidates

    @property
    def candidate_factor(self) -> int:
        return self._target.candidate_factor

    @property
    def reinforce_mode(self) -> ReinforceMode:
        return self._target.reinforce_mode

    @property
    def session_config(self) -> SessionConfig:
        """The L1 tier's validated settings."""
        return self._target.session_config

    @property
    def consolidation_lock_ttl(self) -> float:
        """Seconds a consolidation run's lock survives a crashed holder (30)."""
        return self._target.consolidation_lock_ttl

    @consolidation_lock_ttl.setter
    def consolidation_lock_ttl(self, value: float) -> None:
        self._target.consolidation_lock_ttl = value

    @property
    def consolidation_lock_wait(self) -> float:
        """Seconds a second consolidation of the same scope waits before ``ConsolidationBusyError`` (60)."""
        return self._target.consolidation_lock_wait

    @consolidation_lock_wait.setter
    def consolidation_lock_wait(self, value: float) -> None:
        self._target.consolidation_lock_wait = value

    def config_defaults(self) -> ConfigSnapshot:
        """The constructor's tunables (what a field removed from the config hash returns to)."""
        return self._apply(self._target.config_defaults)

    def current_config(self) -> ConfigSnapshot:
        """The tunables in force now: constructor values overlaid by the live config hash."""
        return self._apply(self._target.current_config)

    def refresh_config(self) -> ConfigSnapshot:
        """Re-read ``<name>:__mem_config`` now (it is also re-read every few seconds)."""
        return self._await(self._target.refresh_config)

    def ensure_discovery_ready(self) -> None:
        """Make sure the store is registered with BetterDB Monitor (and its index exists)."""
        return self._await(self._target.ensure_discovery_ready)

    def ensure_config_refresh_started(self) -> None:
        """Start the live-config refresher now (it starts with the store otherwise)."""
        return self._await(self._target.ensure_config_refresh_started)

    def ensure_index(self) -> None:
        """Create ``<name>:mem:idx`` if absent, or adopt the one there; idempotent, safe to race.

        An index another library created with the same name (betterdb-agent-memory)
        is used as it is: queries then avoid the fields it lacks and results are
        checked exactly in the client.

        Raises:
            ConfigurationError: the index (or its recorded metadata) was made for a
                different embedding dimension or model; vectors of two models must
                never share an index.
        """
        return self._await(self._target.ensure_index)

    def migrate_index(self, *, keep_reference: bool = False) -> SwitchReport:
        """Rebuild an outdated index with this version's full schema and switch to it; recall keeps working.

        An index created by an older betterdb-memory or by betterdb-agent-memory lacks the
        fields newer features need (time-aware ``valid_from`` / ``state_from`` /
        ``subject_key``, declared metadata fields); those features raise
        ``configuration.index_outdated`` until this runs. The new index is built beside the
        one in use (declared fields backfilled from each memory's metadata first), then
        every process switches to it at once; finally ``<name>:mem:idx``, the name
        betterdb-agent-memory and BetterDB Monitor know, is rebuilt with the new schema
        and the store switches back to it (``keep_reference=True`` keeps the old one as
        it is instead, both maintained). A no-op on a current index. CLI: ``reindex``.

        Raises:
            ConsolidationBusyError: another migration of this store held its lock for an hour.
        """
        return self._await(self._target.migrate_index, keep_reference=keep_reference)

    def index_info(self) -> IndexInfo | None:
        """FT.INFO of this store's index, normalised across engines; None when absent.

        On a cluster ``num_docs`` is the whole cluster's (the primaries' sum).
        """
        return self._await(self._target.index_info)

    def stats(self) -> StoreStats:
        """Counts, index health and settings (what ``stats`` in the CLI prints)."""
        return self._await(self._target.stats)

    @classmethod
    def connect(
        cls,
        url: str | None = None,
        *,
        name: str = DEFAULT_NAME,
        embedder: Embedder | None = None,
        data_dir: str | None = None,
        max_connections: int = 64,
        socket_timeout: float = 10.0,
        **options: Any,
    ) -> "SyncMemoryStore":
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
        return cls._start(
            lambda: MemoryStore.connect(
                url,
                name=name,
                embedder=embedder,
                data_dir=data_dir,
                max_connections=max_connections,
                socket_timeout=socket_timeout,
                **options,
            )
        )

    @property
    def state(self) -> StoreState:
        """``NEW`` until the first call readies the index, then ``READY``; ``CLOSING`` from the
        first line of ``close`` while background work drains, ``CLOSED`` once it returned."""
        return self._target.state

    def remember(
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
        sensitivity: Sensitivity | None = None,
        metadata: Mapping[str, Any] | None = None,
        vector: Sequence[float] | None = None,
        id: str | None = None,
        valid_from: datetime | date | int | str | None = None,
        subject: str | None = None,
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
            metadata: a JSON-able mapping kept with it. Its keys declared in the store's
                ``metadata_fields`` are also indexed (``where=``); a declared value of the
                wrong type is a ``ValidationError`` (``validation.metadata_field``).
            vector: a precomputed embedding (skips the embedder).
            id: your own id for it (letters, digits, ``_.:-``; up to 200), kept as given.
                A memory with this id already there is replaced (upsert): its creation
                time, last access and access count carry over, its content is embedded
                again only if it changed, and the replaced version is kept in its update
                history (``history``). Dedup does not apply to a write with an id.
            valid_from: when what it says became true (an aware or naive ``datetime``,
                naive being UTC; a ``date``; epoch ms; ISO 8601 text; years 1900-9999).
                Default: now. Recency counts from it until the memory is recalled, so
                "Ada moved to Berlin in May 2024" written today with
                ``valid_from="2024-05"`` ranks as old news. Read back as
                ``MemoryItem.valid_from``. An upsert without it keeps the replaced
                memory's.
            subject: what it states ("home city"; matched case- and
                whitespace-insensitively, at most 256 characters). Within its exact
                scope and kind a subject has one current memory: a write not older
                (by ``valid_from``) than the current one supersedes it (the old one
                leaves recall, list and count, kept with ``valid_until`` in
                ``fact_history``); an older-dated one enters the history as a past
                version. Costs the write one more round trip.

        Raises:
            ValidationError: any bad argument (an empty or over-long subject too);
                nothing is written.
            ConfigurationError: ``subject`` on an index created without ``subject_key``
                (``configuration.index_outdated``).
            StoreConnectionError: the server could not be reached (after retries).
        """
        return self._await(
            self._target.remember,
            content,
            importance=importance,
            tags=tags,
            source=source,
            ttl=ttl,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            sensitivity=sensitivity,
            metadata=metadata,
            vector=vector,
            id=id,
            valid_from=valid_from,
            subject=subject,
        )

    def remember_many(self, items: Iterable[str | MemoryInput]) -> builtins.list[str]:
        """Store many memories: one embedding batch and one pipelined round trip.

        Every item is validated before anything is embedded or written, so a bad
        item fails the whole call with nothing stored. Returns ids in input order.
        An item is the text alone, or a ``MemoryInput`` mapping: ``content`` and any
        of ``remember``'s keyword arguments.
        """
        return self._await(self._target.remember_many, items)

    def update(
        self,
        id: str,
        *,
        content: str | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> MemoryItem:
        """Change a memory in place; returns it as stored now.

        Arguments left ``None`` keep their value (``ttl=None`` keeps the remaining
        TTL, ``ttl=0`` removes it). The content is embedded again only if it changed;
        the scope, source, sensitivity and kind stay; creation time, last access and
        access count carry over; the version replaced goes to ``history(id)``.

        Raises:
            MemoryNotFoundError: no memory has this id (or it expired).
            ValidationError: a bad argument; nothing is written.
        """
        return self._await(
            self._target.update,
            id,
            content=content,
            importance=importance,
            tags=tags,
            metadata=metadata,
            ttl=ttl,
        )

    def get(self, id: str) -> MemoryItem | None:
        """The memory with this id, or None (never the raw vector).

        A superseded version (its history document) when the memory is no longer
        current: it carries ``valid_until``.
        """
        return self._await(self._target.get, id)

    def get_many(self, ids: Sequence[str]) -> builtins.list[MemoryItem | None]:
        """``get`` for many ids in one round trip (exact access counts included; superseded versions too)."""
        return self._await(self._target.get_many, ids)

    def forget(self, id: str) -> bool:
        """Delete one memory (with its access counter and update history); True if it existed.

        Forgetting the current version of a subject leaves the subject with no current
        memory: the previous version is not brought back (write it again to undo). A
        superseded version (its history document) is deleted the same way and leaves its
        subject's version list; the current version and the other versions' validity are
        untouched, so the instants it covered have no version any more.

        Retried on connection faults. A retry cannot know what the attempt it replaces
        did: when that attempt may have reached the server and the retry finds nothing
        left, the answer is True (the memory is gone, and this call may have deleted
        it), never a False that would say nothing happened. So True means "existed when
        the call began, or possibly so after a fault, and is gone now"; False means it
        did not exist (exact: the first attempt answered).
        """
        return self._await(self._target.forget, id)

    def history(self, id: str) -> builtins.list[MemoryVersion]:
        """The versions of a memory that updates replaced, newest first.

        Kept: the last ``HISTORY_MAX`` (20) versions' content, importance, tags and
        metadata, with when each was replaced; they expire with the memory and are
        deleted with it. Not kept: vectors, and writes by other libraries.
        """
        return self._await(self._target.history, id)

    def effective_threshold(self, threshold: float | None = None) -> float:
        """The cosine-distance ceiling a recall uses: the argument, else the live config's."""
        return self._apply(self._target.effective_threshold, threshold)

    def recall(
        self,
        query: str,
        *,
        k: int | None = None,
        threshold: float | None = None,
        tags: Sequence[str] | None = None,
        weights: Weights | Mapping[str, float] | None = None,
        reinforce: bool | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        exclude_sensitivity: Sequence[Sensitivity] | None = None,
        explain: bool = False,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
        tz: str | None = None,
    ) -> builtins.list[MemoryHit]:
        """Recall up to ``k`` memories by meaning, best composite score first.

        A time expression in the query ("last week") keeps the recall to its window; without
        one, the newest statement of a slot ranks first (``core.time_recall``).

        Args:
            query: text to embed and search by.
            k: hits wanted (1..1000, default 8).
            threshold: cosine-distance ceiling (0..2; a hit needs distance <= it);
                default: the store's ``default_threshold`` or the live config's.
            tags: only memories carrying ALL of these tags.
            weights: per-call composite weights (``RecallWeights``).
            reinforce: bump ``last_accessed_at`` / ``access_count`` of returned hits
                (default True).
            thread_id / agent_id / namespace: scope filter (None = any).
            exclude_sensitivity: leave out memories of these sensitivity classes.
            explain: attach the score's components (and ``time_window``, ``superseded_by``).
            as_of: what was valid at that instant (``valid_from <= as_of < valid_until``),
                superseded versions included when they were current then (they are not
                reinforced). Default: no time filter (future-dated memories included).
                A time expression in the query counts from it.
            since / until: only memories whose ``valid_from`` (their ``created_at`` when
                written without one) falls in ``[since, until)``.
                Times: a ``datetime`` (naive is UTC), epoch ms, or ISO 8601 text.
            where: a filter on metadata and built-in fields, ANDed with the scope and
                applied inside the KNN query (pre-filtered: the ``k`` nearest matching
                memories), e.g. ``{"priority": {"$gte": 2}, "source": {"$ne": "web"}}``.
                Operators (MongoDB's meaning): ``$eq $ne $gt $gte $lt $lte $in $nin
                $exists``, ``$and $or $not``; ``$ne`` / ``$nin`` match memories without
                the field, a comparison on a missing field is false. Fields: ``thread_id
                agent_id namespace tags source importance created_at valid_from`` and the
                store's ``metadata_fields``; the full table is in ``list``'s docstring.
                A bad filter is a ``ValidationError`` before any I/O.
            tz: the IANA time zone the query's days are counted in (default UTC); an
                unknown one is a ``ValidationError`` before any I/O.
        """
        return self._await(
            self._target.recall,
            query,
            k=k,
            threshold=threshold,
            tags=tags,
            weights=weights,
            reinforce=reinforce,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            exclude_sensitivity=exclude_sensitivity,
            explain=explain,
            as_of=as_of,
            since=since,
            until=until,
            where=where,
            tz=tz,
        )

    def recall_by_vector(
        self,
        vector: Sequence[float],
        *,
        k: int | None = None,
        threshold: float | None = None,
        tags: Sequence[str] | None = None,
        weights: Weights | Mapping[str, float] | None = None,
        reinforce: bool | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        exclude_sensitivity: Sequence[Sensitivity] | None = None,
        explain: bool = False,
        query: str | None = None,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
        tz: str | None = None,
    ) -> builtins.list[MemoryHit]:
        """``recall`` with a precomputed query vector (same options).

        ``query``: the text the vector was made from; given, the store's ``reranker``
        re-orders the candidates as in ``recall`` (without it: the dense order), and a
        time expression in it limits the recall to its window as in ``recall``.
        ``as_of`` / ``since`` / ``until`` / ``tz``: as in ``recall``.
        """
        return self._await(
            self._target.recall_by_vector,
            vector,
            k=k,
            threshold=threshold,
            tags=tags,
            weights=weights,
            reinforce=reinforce,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            exclude_sensitivity=exclude_sensitivity,
            explain=explain,
            query=query,
            as_of=as_of,
            since=since,
            until=until,
            where=where,
            tz=tz,
        )

    def search_candidates(
        self,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        k: int,
        *,
        return_fields: Sequence[str] = ITEM_FIELDS,
    ) -> builtins.list[tuple[MemoryItem, float]]:
        """One KNN query: (item, cosine distance) pairs, nearest first, exactly in ``flt``.

        With a reduced ``return_fields`` the items carry only those fields (the rest
        at their defaults): used to rank many candidates cheaply before fetching the
        few that are returned.
        """
        return self._await(self._target.search_candidates, vector, flt, k, return_fields=return_fields)

    def count(
        self,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> int:
        """Number of live memories matching a scope (None = any) and carrying all ``tags``.

        Current memories only, unless ``as_of``: then what was valid at that instant,
        superseded versions included. ``since`` / ``until``: ``valid_from`` in the window.
        ``where``: a metadata filter, as in ``list`` (one index query, counted by the engine).
        """
        return self._await(
            self._target.count,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            tags=tags,
            as_of=as_of,
            since=since,
            until=until,
            where=where,
        )

    def list(
        self,
        options: MemoryListOptions | None = None,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        limit: int | None = None,
        offset: int | None = None,
        cursor: str | None = None,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> MemoryPage:
        """Memories of a scope, newest first: ``items``, the ``total`` matching, ``next_cursor``.

        Takes the reference's ``MemoryListOptions`` or the same fields as keywords.
        ``limit`` defaults to 20 (1..1000); page on with ``offset`` or ``next_cursor``.
        ``as_of``: what was valid at that instant, superseded versions included (with
        ``valid_until``). ``since`` / ``until``: ``valid_from`` in ``[since, until)``.

        ``where``: a filter on the built-in fields (``thread_id``, ``agent_id``,
        ``namespace``, ``tags``, ``source``, ``importance``, ``created_at``,
        ``valid_from``) and the store's ``metadata_fields``, ANDed with the scope, e.g.
        ``{"priority": {"$gte": 2}, "project": {"$in": ["apollo", "gemini"]}}``.
        MongoDB's operators and meaning, answered by the index (never a scan):

        ===============================  ==============================================
        ``{"f": v}`` / ``$eq``           equal (a tag list field: any of its values)
        ``$ne``                          not equal; matches memories without ``f``
        ``$gt $gte $lt $lte``            numeric fields; false when ``f`` is missing
        ``$in`` / ``$nin``               any of / none of a non-empty list (``$nin``
                                         matches memories without ``f``)
        ``$exists``                      ``f`` present (numeric and declared fields)
        ``$and`` / ``$or``               a non-empty list of filters
        ``$not``                         one filter
        ===============================  ==============================================

        Times (``created_at``, ``valid_from``) take epoch ms or a ``datetime``. At most
        8 levels of ``$and``/``$or``/``$not`` and 128 terms. A mistake (an undeclared
        field, a wrong-typed value, an unknown operator, an empty list) is a
        ``ValidationError`` (``validation.filter_*``) before any I/O; an engine without
        filter-only queries (valkey-search 1.0) raises ``CommandNotSupportedError``.
        """
        return self._await(
            self._target.list,
            options,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            tags=tags,
            limit=limit,
            offset=offset,
            cursor=cursor,
            as_of=as_of,
            since=since,
            until=until,
            where=where,
        )

    def forget_by_scope(
        self,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        progress: ProgressSink | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> int:
        """Delete every memory matching a scope (None = any) and carrying ALL of ``tags``.

        ``where``: only the memories matching this filter too (the language of ``list``);
        a non-empty one is a selector by itself (``{}`` is not). Each page the index
        returns is checked again in the client before it is deleted, so an index made by
        another library can never widen a deletion. Needs filter-only queries
        (``CommandNotSupportedError`` on valkey-search 1.0). A ``where`` naming a declared
        metadata field leaves the superseded versions alone (their index lacks those fields).

        Refuses an empty selector (no scope field, no tags, no ``where``): deleting
        everything is not a default. Pages of 500, each one query and one pipelined delete; returns
        the number deleted. On a connection fault the error's ``details`` carry
        ``deleted`` (the count so far): calling again finishes the job. ``progress``: an
        object with ``begin(label, total)`` / ``advance(n)`` / ``end()``
        (``betterdb_memory.progress.Progress`` draws a bar) told of every page deleted.
        The scope's superseded versions (history documents) go too; they are not counted.
        ``since`` / ``until``: only memories (and versions) whose ``valid_from`` falls in
        ``[since, until)``; the consolidation state is then kept.
        """
        return self._await(
            self._target.forget_by_scope,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            tags=tags,
            progress=progress,
            since=since,
            until=until,
            where=where,
        )

    def erase(self, *, agent_id: str, thread_id: str | None = None) -> int:
        """Right to erasure: delete an agent's L2 memories and L1 turns (one thread, or all).

        Order matters: summaries running in this process for those sessions are
        cancelled first (so none writes after the erase), then L1 keys go, then L2
        memories (``forget_by_scope``, which also wipes their consolidation state and
        fact history).
        A summariser running in *another* process at that moment may still write one
        summary afterwards; erase again after ``summary_lock_ttl`` to be certain.

        Returns:
            L2 memories plus L1 turns deleted.
        """
        return self._await(self._target.erase, agent_id=agent_id, thread_id=thread_id)

    def store_turn(
        self,
        thread_id: str,
        user_message: str,
        assistant_message: str,
        *,
        agent_id: str | None = None,
        tool_results: Sequence[Any] | None = None,
    ) -> str:
        """Append one turn to a session in one round trip; returns the turn id (uuid4 hex).

        May start a background summary of turns that left the window; when that summary
        is a full backlog behind, waits for it to free room instead of letting the
        hard cap drop turns (see ``summaries``).

        Raises:
            ValidationError: empty ids or messages, bad ``tool_results``; nothing is written.
            StoreConnectionError: the server could not be reached (not retried: the
                append is not idempotent).
        """
        return self._await(
            self._target.store_turn,
            thread_id,
            user_message,
            assistant_message,
            agent_id=agent_id,
            tool_results=tool_results,
        )

    def get_recent_turns(
        self, thread_id: str, *, agent_id: str | None = None, n: int | None = None
    ) -> builtins.list[Turn]:
        """The session's turns, oldest first: the last ``n``, or all L1 holds when ``n`` is None.

        L1 holds the window plus turns older than it that no summary covers yet, so
        with ``n=None`` every stored turn is either here or in a summary.
        """
        return self._await(self._target.get_recent_turns, thread_id, agent_id=agent_id, n=n)

    def get_session_metadata(self, thread_id: str, *, agent_id: str | None = None) -> SessionMetadata | None:
        """Counters of the session, or None if it does not exist (never stored, cleared or expired)."""
        return self._await(self._target.get_session_metadata, thread_id, agent_id=agent_id)

    def clear_session(self, thread_id: str, *, agent_id: str | None = None) -> None:
        """Delete the session's L1 keys. Its L2 summaries and facts stay (use ``erase`` for those)."""
        return self._await(self._target.clear_session, thread_id, agent_id=agent_id)

    def retrieve_context(
        self,
        thread_id: str,
        query: str,
        *,
        token_budget: int,
        agent_id: str | None = None,
        namespace: str | None = None,
        redact: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> RetrievedContext:
        """Recent turns and relevant long-term memories that fit ``token_budget``.

        Turns of this session and L2 recall run concurrently. Recall is scoped like
        ``recall``: ``agent_id`` / ``namespace`` filter, None meaning any, across
        threads (long-term memory outlives a session); pass them to isolate tenants.
        Read-only: recalled memories are not reinforced (assembling a prompt should
        not reorder future recalls; ``recall`` reinforces when asked).

        Args:
            thread_id / agent_id: the session.
            query: the current user message; drives recall and costs the current-turn part.
            token_budget: total tokens of the prompt being built (an int > 0).
            namespace: recall filter.
            redact: sensitivity classes to leave out (default: the store's ``redact``).
            where: a filter on the recalled memories (``recall``'s ``where``); the turns
                are not filtered.

        Raises:
            ValidationError: bad ids, empty query, a budget that is not a positive int,
                an unknown sensitivity class; nothing is sent.
        """
        return self._await(
            self._target.retrieve_context,
            thread_id,
            query,
            token_budget=token_budget,
            agent_id=agent_id,
            namespace=namespace,
            redact=redact,
            where=where,
        )

    def extract_memories(
        self, thread_id: str, *, agent_id: str | None = None, n: int | None = None
    ) -> builtins.list[str]:
        """Mine the session's last ``n`` turns (default: the window) for facts and store them in L2.

        Each fact becomes a memory with ``kind="extracted"``, ``source="extracted"``,
        its classified sensitivity, its topic tags, and the source turn ids in
        ``metadata["source_turn_ids"]``. A fact that fails validation is skipped with a
        warning; the others are stored.

        Raises:
            ConfigurationError: the store has no ``fact_extractor``.
        """
        return self._await(self._target.extract_memories, thread_id, agent_id=agent_id, n=n)

    def summarize_session(self, thread_id: str, *, agent_id: str | None = None) -> int:
        """Fold every turn older than the window into summaries now, even a partial batch.

        For the end of a conversation, or tests. Waits for a summary of this session
        already running here. Returns the number of turns summarised.

        Raises:
            BetterDBMemoryError: the summariser or the write failed (also counted).
        """
        return self._await(self._target.summarize_session, thread_id, agent_id=agent_id)

    def consolidate(
        self,
        mode: Literal["summary", "facts"],
        summarize: SummarizeFn | None = None,
        *,
        extract_facts: ExtractFactsFn | None = None,
        older_than_seconds: float | None = None,
        max_importance: float | None = None,
        delete_sources: bool | None = None,
        summary_importance: float | None = None,
        fact_importance: float | None = None,
        tags: Sequence[str] | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        include_summaries: bool = False,
        where: Mapping[str, Any] | None = None,
    ) -> Any:
        """Fold a selection of memories into one digest, or into current facts.

        Candidates: memories matching the scope selectors (``None`` means "any"),
        carrying ALL of ``tags``, created more than ``older_than_seconds`` ago, of
        importance at most ``max_importance``; never facts, never digests in summary
        mode unless ``include_summaries``, never sources an earlier run of the same
        mode already consolidated into this target; matching ``where`` (``list``'s filter
        language; a non-empty one is a selector). At least one selector is required.
        Output goes to the exact scope the selectors name, with the selection's tags.

        Args:
            mode: ``"summary"`` (one digest; ``summarize(items) -> str``) or ``"facts"``
                (``extract_facts(items) -> list[Fact]``). Either seam may be sync or
                async; it receives items oldest first (at most 1,000 per facts call).
            delete_sources: summary mode: delete the folded memories (default True;
                ``False`` keeps them, marked consumed). Facts mode always keeps them.
            summary_importance / fact_importance: importance of what is written
                (defaults 0.7 and the store's ``ConsolidationConfig``).

        Returns:
            ``ConsolidateResult`` (summary) or ``ConsolidateFactsResult`` (facts).

        Raises:
            ValidationError (a ValueError): no selector, a bad argument (before any I/O),
                or a malformed model output (nothing of that page is applied).
            ConsolidationBusyError: another run of this target scope did not finish in time.
        """
        return self._await(
            self._target.consolidate,
            mode,
            summarize,
            extract_facts=extract_facts,
            older_than_seconds=older_than_seconds,
            max_importance=max_importance,
            delete_sources=delete_sources,
            summary_importance=summary_importance,
            fact_importance=fact_importance,
            tags=tags,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            include_summaries=include_summaries,
            where=where,
        )

    def consolidate_facts(
        self,
        *,
        extract_facts: ExtractFactsFn,
        older_than_seconds: float | None = None,
        max_importance: float | None = None,
        fact_importance: float | None = None,
        tags: Sequence[str] | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> ConsolidateFactsResult:
        """Deprecated: use ``consolidate(mode="facts", extract_facts=...)`` (same options)."""
        return self._await(
            self._target.consolidate_facts,
            extract_facts=extract_facts,
            older_than_seconds=older_than_seconds,
            max_importance=max_importance,
            fact_importance=fact_importance,
            tags=tags,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
        )

    def fact_history(
        self,
        subject: str,
        *,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        kind: MemoryKind | None = None,
    ) -> builtins.list[FactRecord]:
        """Every recorded version of ``subject`` in the exact scope named, newest first.

        The versions written with ``remember(subject=...)`` and the facts of
        ``consolidate(mode="facts")`` alike: the current one (``current=True``) and the
        ones it superseded, past-dated or retracted, each with ``valid_until`` and
        ``superseded_by``. ``kind``: only that kind's versions (``"fact"``,
        ``"memory"``...); None: every kind (a fact and a memory of one subject are two
        subjects, each with its own current version). Newest: by ``valid_from``.

        A version found still in the index though no longer current (a writer that
        crashed between its round trips) is retired on the way (``tiers.subjects``); a
        listed version whose document is gone (evicted, expired, deleted by tags) leaves
        the list, and the pointer when it named it (never listed as current).

        Raises:
            ValidationError: an empty or over-long subject, an unknown kind.
        """
        return self._await(
            self._target.fact_history,
            subject,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
            kind=kind,
        )

    def purge_fact_history(
        self,
        *,
        subject: str | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
    ) -> int:
        """Delete superseded and retracted facts of the exact target scope (current facts stay).

        ``subject=None`` purges every subject. Returns how many were deleted.
        """
        return self._await(
            self._target.purge_fact_history,
            subject=subject,
            thread_id=thread_id,
            agent_id=agent_id,
            namespace=namespace,
        )


class SyncAgentMemory(AgentMemoryBridge):
    """``AgentMemory`` with blocking methods, on a private event-loop thread.

    ``connect(url, ...)`` takes ``AgentMemory.connect``'s arguments; ``wrap(factory)``
    runs a factory of your own on the private loop (``AgentMemory(client=...)`` with a
    client made there). ``with`` calls ``initialize()`` first, as ``async with`` does.
    ``memory`` is a ``SyncMemoryStore`` on the same loop; ``llm``, ``tool``, ``session``
    and ``cache`` are blocking views of the cache tiers (``agent.llm.check(params)``
    returns the ``LlmCacheResult``). What ``SyncMemoryStore`` says about threads,
    event loops and ``close`` holds here.
    """

    @classmethod
    def connect(
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
    ) -> "SyncAgentMemory":
        """Open everything on ``url`` (or the embedded server); see ``MemoryStore.connect``."""
        return cls._start(
            lambda: AgentMemory.connect(
                url,
                name=name,
                embedder=embedder,
                default_ttl=default_ttl,
                tier_defaults=tier_defaults,
                cost_table=cost_table,
                use_default_cost_table=use_default_cost_table,
                analytics=analytics,
                cache_telemetry=cache_telemetry,
                cache_discovery=cache_discovery,
                cache_config_refresh=cache_config_refresh,
                **store_options,
            )
        )

    @property
    def memory(self) -> SyncMemoryStore:
        """The long-term memory tier."""
        return self._view(SyncMemoryStore, self._target.memory)

    @property
    def name(self) -> str:
        return self._target.name

    @property
    def closed(self) -> bool:
        return self._target.closed

    def initialize(self) -> None:
        """Create the memory index, then wait for both tiers' discovery and start config refresh.

        Raises what creating the index raises, and a discovery name collision of
        either tier, as the reference does. The cache tiers write their Monitor marker
        only once the memory index exists for this user (here, or at the memory tier's
        first operation), so a user never writes the marker of a name it cannot use.
        """
        return self._await(self._target.initialize)

    def erase(self, *, agent_id: str, thread_id: str | None = None) -> int:
        """Right to erasure across tiers: memories and turns (``MemoryStore.erase``) and session state.

        The session tier is keyed by thread alone (betterdb-agent-cache's layout): with
        ``thread_id`` that thread's session state is destroyed too; without it, session
        state is left alone (it does not record agents): erase each thread, or call
        ``agent.session.destroy_thread``. LLM and tool caches are keyed by request and
        are not touched: do not cache responses that carry personal data, or give them
        a short TTL. Returns what ``MemoryStore.erase`` returns plus the session-state
        keys removed.
        """
        return self._await(self._target.erase, agent_id=agent_id, thread_id=thread_id)


# `connect` returns the class it builds, a name its own body cannot use yet (the
# annotation is written quoted, for type checkers, and resolved here for inspect).
vars(SyncMemoryStore)["connect"].__func__.__annotations__["return"] = SyncMemoryStore
vars(SyncAgentMemory)["connect"].__func__.__annotations__["return"] = SyncAgentMemory
