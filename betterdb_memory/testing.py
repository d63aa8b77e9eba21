"""Helpers for testing code that uses betterdb-memory, shipped so users need not write them.

The embedder makes real vectors (deterministic, no model), the summarizer and fact
extractor return what you scripted and record what they were given, and
``temporary_store`` runs the real embedded engine on a free port with a throw-away
data directory. ``RecordingBackend`` is the one stand-in, and it stands in for the
transport, not for a client (as httpx's ``MockTransport`` does): it records the
commands a part sends, by their real names and arguments, and answers from a script
of replies; storage behaviour is the real engine's to test.

    from betterdb_memory.testing import temporary_store

    async def test_my_agent() -> None:
        async with temporary_store() as store:
            await store.remember("Ada lives in Lisbon", thread_id="ada")
            assert (await store.recall("Lisbon", thread_id="ada", threshold=2.0))[0].item.content
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from .backend.commands import Attempts, Command, ScriptCall, Step, wire
from .backend.locks import ScopedLock
from .backend.retry import RetryPolicy
from .core.dialect import Capabilities, capabilities_for
from .core.facts import Fact
from .core.models import MemoryItem
from .core.turns import Turn
from .embedders.hashing import HashingEmbedder
from .errors import StoreClosedError

if TYPE_CHECKING:
    from .core.context import ContextBudget
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
    from .extraction import FactExtractor
    from .observability.telemetry import Telemetry
    from .store import MemoryStore
    from .summarizers import Summarizer

__all__ = [
    "HashingEmbedder",
    "RecordingBackend",
    "RoundTrip",
    "ScriptedFactExtractor",
    "ScriptedSummarizer",
    "StoreOptions",
    "temporary_store",
]


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """One round trip a ``RecordingBackend`` received.

    Attributes:
        operation: the public operation it served (``"remember"``, ``"forget"``, ...).
        commands: its keyed commands as sent, in order (a script call as its
            ``EVALSHA sha numkeys keys... args...``).
        searches: its FT.* commands (sent after the keyed ones).
        idempotent: whether the transport may send it again after a connection fault.
    """

    operation: str
    commands: tuple[Command, ...]
    searches: tuple[Command, ...] = ()
    idempotent: bool = True

    @property
    def names(self) -> list[str]:
        """The command names, keyed then searches (``["DEL", "DEL", "HINCRBY"]``)."""
        return [str(c[0]) for c in (*self.commands, *self.searches)]


class RecordingBackend:
    """The store's transport (``backend.Backend``), recorded instead of sent: for unit tests of parts.

    Every round trip is appended to ``sent`` as a ``RoundTrip`` holding the real
    command names and arguments. Replies come from a script: each ``reply(...)``
    queues the replies of one round trip, one value per command (keyed commands
    first, then searches); a round trip with none queued answers ``default`` for
    each command. A reply that is an exception instance is raised instead. After
    ``closed = True`` every round trip raises ``StoreClosedError``, as the real one
    does once its store is closed.

        backend = RecordingBackend()
        backend.reply(1, 1)
        await Documents(runtime_over(backend)).forget("m1")
        assert backend.sent[0].commands == (("DEL", "s:mem:m1"), ("DEL", "s:acc:{s:mem:m1}", "s:upd:{s:mem:m1}"))

    Args:
        cluster: answer as a cluster would be addressed (searches beside the pipeline,
            script calls one per slot: the parts send what they send to a cluster).
        capabilities: what ``probe`` answers (default: the embedded RediSearch 2.10).
        default: the reply of each command of a round trip with no scripted reply.
    """

    def __init__(
        self, *, cluster: bool = False, capabilities: Capabilities | None = None, default: Any = 0
    ) -> None:
        self.retry = RetryPolicy()
        self.cluster = cluster
        self.closed = False
        self.rebuilds_after_restart = False
        self.capabilities = capabilities or capabilities_for("redisearch", (2, 10, 0))
        self.default = default
        self.sent: list[RoundTrip] = []
        #: Extra sends the next pipeline that counts its attempts (``attempts=``) is told
        #: of: a retry after a fault, whose earlier attempt may have run.
        self.resends = 0
        self._replies: deque[list[Any]] = deque()

    @property
    def decodes(self) -> bool:
        """Replies are ``bytes``, as from the store's own client."""
        return False

    def reply(self, *values: Any) -> None:
        """Queue the replies of the next round trip (one per command it carries)."""
        self._replies.append(list(values))

    @property
    def commands(self) -> list[Command]:
        """Every command sent so far, round trips flattened (keyed commands, then searches, of each)."""
        return [c for trip in self.sent for c in (*trip.commands, *trip.searches)]

    async def _send(self, trip: RoundTrip) -> list[Any]:
        if self.closed:
            raise StoreClosedError(
                f"the store was closed; {trip.operation} cannot run", details={"operation": trip.operation}
            )
        self.sent.append(trip)
        await asyncio.sleep(0)  # a real round trip yields to the loop
        n = len(trip.commands) + len(trip.searches)
        values = self._replies.popleft() if self._replies else [self.default] * n
        if len(values) != n:
            raise AssertionError(
                f"{trip.operation}: {n} commands sent, {len(values)} replies scripted: {trip}"
            )
        for value in values:
            if isinstance(value, BaseException):
                raise value
        return values

    async def command(self, operation: str, *args: Any, idempotent: bool = True) -> Any:
        return (await self._send(RoundTrip(operation, (tuple(args),), idempotent=idempotent)))[0]

    async def search(self, operation: str, args: Sequence[Any]) -> Any:
        return (await self._send(RoundTrip(operation, (), (tuple(args),))))[0]

    async def script(self, operation: str, call: ScriptCall, *, idempotent: bool = True) -> Any:
        return (await self._send(RoundTrip(operation, (wire(call),), idempotent=idempotent)))[0]

    async def pipeline(
        self,
        operation: str,
        commands: Sequence[Step],
        *,
        idempotent: bool = True,
        details: Mapping[str, Any] | None = None,
        searches: Sequence[Sequence[Any]] = (),
        attempts: Attempts | None = None,
    ) -> list[Any]:
        if attempts is not None:
            attempts.count += 1 + self.resends
            self.resends = 0
        trip = RoundTrip(
            operation, tuple(wire(c) for c in commands), tuple(tuple(s) for s in searches), idempotent
        )
        return await self._send(trip)

    async def index_info(self, index: str, *, cluster_counts: bool = False) -> Any:
        args = ("FT.INFO", index, "PRIMARY") if cluster_counts and self.cluster else ("FT.INFO", index)
        return await self.search("index_info", args)

    async def scan(self, operation: str, pattern: str, *, count: int = 1000) -> AsyncIterator[list[str]]:
        """One SCAN pass in one batch: its scripted reply is the list of names found."""
        names = await self.command(operation, "SCAN", 0, "MATCH", pattern, "COUNT", count)
        if names:
            yield list(names)

    async def probe(self) -> Capabilities:
        """``capabilities`` (nothing is recorded: the real probe's commands depend on the server)."""
        return self.capabilities

    def lock(self, key: str, *, ttl: float, wait: float, heartbeat: bool = True) -> ScopedLock:
        return ScopedLock(self, key, ttl=ttl, wait=wait, heartbeat=heartbeat)


class ScriptedSummarizer:
    """Returns the scripted summaries in order (the last one repeats) and records its inputs.

    Works both as an L1 ``Summarizer`` (``await summarize(turns)``) and as the
    ``summarize`` seam of ``consolidate(mode="summary")`` (called with memories).
    """

    def __init__(self, *summaries: str) -> None:
        if not summaries:
            raise ValueError("ScriptedSummarizer needs at least one summary")
        self._summaries = list(summaries)
        self.calls: list[list[Any]] = []

    def _next(self, items: Sequence[Any]) -> str:
        self.calls.append(list(items))
        index = min(len(self.calls) - 1, len(self._summaries) - 1)
        return self._summaries[index]

    async def summarize(self, turns: Sequence[Turn]) -> str:
        return self._next(turns)

    async def __call__(self, items: list[MemoryItem]) -> str:
        return self._next(items)


class ScriptedFactExtractor:
    """The ``extract_facts`` seam of ``consolidate(mode="facts")``: one scripted list per call."""

    def __init__(self, *batches: Iterable[Fact]) -> None:
        self._batches = [list(b) for b in batches]
        self.calls: list[list[MemoryItem]] = []

    async def __call__(self, items: list[MemoryItem]) -> list[Fact]:
        self.calls.append(list(items))
        if not self._batches:
            return []
        return self._batches[min(len(self.calls) - 1, len(self._batches) - 1)]


class StoreOptions(TypedDict, total=False):
    """The keyword arguments of ``MemoryStore`` that ``temporary_store`` passes on (all optional;
    ``name`` and ``dimensions`` are its own, the client is the temporary server's).

    Kept equal to the constructor's by a unit test (tests/unit/test_testing.py).
    """

    embed_fn: EmbeddingFunction | None
    embedder: Embedder | None
    default_threshold: float | None
    weights: Weights | Mapping[str, float] | None
    half_life_seconds: float | None
    max_items_per_scope: int | None
    metadata_fields: Mapping[str, Literal["numeric", "tag"]] | None
    discovery: bool | MemoryDiscoveryConfig
    config_refresh: bool | MemoryConfigRefreshConfig | None
    consolidation: bool | ConsolidationConfig | None
    telemetry: MemoryTelemetryOptions | None
    analytics: bool | Telemetry
    dedup: bool
    candidate_factor: int
    reranker: Reranker | bool | None
    rerank_candidates: int
    relevance_margin: float | bool | None
    text_candidates: int
    text_timeout_ms: int
    implicit_updates: bool
    hnsw_m: int
    hnsw_ef_construction: int
    hnsw_ef_runtime: int
    reinforce_mode: ReinforceMode
    reinforce_write_interval: float | None
    retry: RetryPolicy | None
    wait_replicas: int
    wait_timeout: float
    registry: Any
    tracer_provider: Any
    heartbeat_interval: float
    session_ttl: float
    max_session_turns: int
    summarizer: Summarizer | None
    fact_extractor: FactExtractor | None
    token_counter: TokenCounter | None
    summarize_batch: int
    max_unsummarized: int | None
    budget: ContextBudget | None
    redact: Sequence[str]
    shutdown_grace: float
    summary_lock_ttl: float


@contextlib.asynccontextmanager
async def temporary_store(
    *, name: str | None = None, dimensions: int = 384, **options: Unpack[StoreOptions]
) -> AsyncIterator[MemoryStore]:
    """A ``MemoryStore`` on a fresh embedded server (free port, temporary data dir), torn down after.

    Needs the ``embedded`` extra. ``options`` go to ``MemoryStore`` (default embedder:
    ``HashingEmbedder(dimensions)``, so no model is loaded).
    """
    from .backend import connect
    from .server import EmbeddedServer
    from .store import MemoryStore

    server = EmbeddedServer(data_dir=None)
    await asyncio.to_thread(server.start)
    client = connect(server.url)
    try:
        options.setdefault("embedder", HashingEmbedder(dimensions))
        store = MemoryStore(client=client, name=name or f"test_{uuid.uuid4().hex[:10]}", **options)
        try:
            yield store
        finally:
            await store.close()
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
