"""One interface over betterdb-memory, the two reference libraries and raw commands, for ``bench_compare.py``.

* ``VectorBook`` is the one embedder all three libraries use: a table from text to a
  precomputed 384-d unit vector (texts it was not given get a vector seeded from their
  hash), wrapped in each library's own embedder seam. No model runs, so the figures
  measure the libraries.
* ``Adapter`` is what the benchmark calls: ``remember``, ``remember_batch``, ``recall``,
  ``forget_agent``, ``store_turn``, ``retrieve_context``, ``count_scope``. A library
  without a workload raises ``Unsupported`` with the reason, which the report prints as
  "n/a". Each subclass calls only the library's public API, as read from its installed
  source (betterdb-agent-memory 0.7, actrone-memory 0.3).

betterdb-agent-memory sends product analytics to PostHog unless ``BETTERDB_TELEMETRY``
is false; importing this module switches it (and ``DO_NOT_TRACK``) off before the
library is imported, and the store is also built with ``analytics=False``.
"""

from __future__ import annotations

import os

os.environ["BETTERDB_TELEMETRY"] = "false"  # betterdb-agent-memory phones home by default
os.environ["DO_NOT_TRACK"] = "1"

import asyncio
import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import betterdb_agent_memory
import numpy as np
import numpy.typing as npt
from bench_store import Command, Doc, RawIndex
from betterdb_agent_memory.telemetry import MemoryTelemetryOptions
from prometheus_client import CollectorRegistry

from betterdb_memory import MemoryStore, Scope
from betterdb_memory.core.codec import encode_vector
from betterdb_memory.core.query import MemoryFilter, knn_search_args

try:  # reference 2 is optional: without it the comparison runs without its column
    import actrone_memory
    from actrone_memory.l2.embedder import Embedder as ActroneEmbedderBase

    ACTRONE_MISSING = ""
except ImportError as exc:  # pragma: no cover - depends on the environment
    actrone_memory = None
    ActroneEmbedderBase = object
    ACTRONE_MISSING = f"not installed ({exc}; `pip install -e '.[bench]'` installs it)"

__all__ = [
    "ACTRONE_MISSING",
    "ActroneAdapter",
    "Adapter",
    "AgentMemoryAdapter",
    "Context",
    "OursAdapter",
    "RawAdapter",
    "Unsupported",
    "VectorBook",
]

FloatMatrix = npt.NDArray[np.float32]
K = 10


class Unsupported(Exception):
    """The library has no such operation (the report shows "n/a" and this reason)."""


# -- the shared embedder ----------------------------------------------------------------


class VectorBook:
    """Text -> precomputed unit vector; unknown texts get a vector seeded from their hash."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self._vectors: dict[str, FloatMatrix] = {}
        self.misses = 0

    def add(self, text: str, vector: FloatMatrix) -> None:
        self._vectors[text] = vector

    def vector(self, text: str) -> FloatMatrix:
        found = self._vectors.get(text)
        if found is not None:
            return found
        # Texts the benchmark never registered (betterdb-agent-memory embeds "probe" to
        # learn the dimension): still deterministic, still a unit vector.
        self.misses += 1
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        v = np.random.default_rng(seed).standard_normal(self.dimensions).astype(np.float32)
        return v / np.linalg.norm(v)


class BookEmbedder:
    """betterdb-memory's ``Embedder`` protocol over the book."""

    model_id = "bench-shared-384"

    def __init__(self, book: VectorBook) -> None:
        self.book = book
        self.dimensions = book.dimensions

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return np.stack([self.book.vector(t) for t in texts])


class BookActroneEmbedder(ActroneEmbedderBase):
    """actrone-memory's ``Embedder`` ABC over the book, with a declared admission threshold."""

    def __init__(self, book: VectorBook, relevance_threshold: float) -> None:
        self.book = book
        self._threshold = relevance_threshold

    @property
    def dimensions(self) -> int:
        return self.book.dimensions

    @property
    def relevance_threshold(self) -> float | None:
        return self._threshold

    async def embed(self, text: str) -> list[float]:
        return self.book.vector(text).tolist()  # type: ignore[no-any-return]

    async def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [self.book.vector(t).tolist() for t in texts]


def book_embed_fn(book: VectorBook) -> Any:
    """betterdb-agent-memory's ``EmbedFn``: ``async (text) -> list[float]``."""

    async def embed(text: str) -> list[float]:
        return book.vector(text).tolist()  # type: ignore[no-any-return]

    return embed


# -- the interface ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Context:
    """What a ``retrieve_context`` call assembled (to check both libraries filled the budget)."""

    memories: int
    turns: int
    tokens: int


class Adapter:
    """The operations the benchmark times; every one raises ``Unsupported`` unless overridden."""

    key = "?"  # short column name
    label = "?"  # library name in the report
    valkey = True  # stores its data in Valkey (memory per memory is measured)

    async def remember(self, doc: Doc) -> None:
        raise Unsupported("no single write")

    async def remember_batch(self, docs: Sequence[Doc]) -> None:
        raise Unsupported("no batch write")

    async def recall(self, query: str, *, thread: str | None, reinforce: bool) -> int:
        raise Unsupported("no recall")

    async def forget_agent(self, agent: str) -> int:
        raise Unsupported("no forget by scope")

    async def store_turn(self, agent: str, thread: str, user: str, assistant: str) -> None:
        raise Unsupported("no session turns")

    async def retrieve_context(self, agent: str, thread: str, query: str, budget: int) -> Context:
        raise Unsupported("no context assembly")

    async def count_scope(self, agent: str, thread: str) -> int:
        raise Unsupported("cannot count a scope")

    def prepare(self, docs: Sequence[Doc] = (), queries: Sequence[tuple[str, str | None]] = ()) -> None:
        """Untimed set-up of payloads (only the raw side precomputes anything)."""

    async def close(self) -> None:
        return None


class OursAdapter(Adapter):
    key, label = "ours", "betterdb-memory"

    def __init__(self, client: Any, name: str, book: VectorBook, *, threshold: float, **options: Any):
        # threshold: the store's cosine-distance ceiling (used by retrieve_context); recall
        # rows pass 2.0 so every call returns exactly k hits, as in bench_store.py. The
        # embedder is this library's Embedder protocol (not an embed_fn), so text recall
        # re-ranks with the default HybridRanker, as it ships.
        self.store = MemoryStore(
            client=client,
            name=name,
            embedder=BookEmbedder(book),
            default_threshold=threshold,
            registry=CollectorRegistry(),
            **options,
        )

    async def start(self) -> None:
        await self.store.ensure_index()

    async def remember(self, doc: Doc) -> None:
        await self.store.remember(doc.content, thread_id=doc.thread, agent_id=doc.agent)

    async def remember_batch(self, docs: Sequence[Doc]) -> None:
        await self.store.remember_many(
            [{"content": d.content, "thread_id": d.thread, "agent_id": d.agent} for d in docs]
        )

    async def recall(self, query: str, *, thread: str | None, reinforce: bool) -> int:
        hits = await self.store.recall(query, k=K, threshold=2.0, thread_id=thread, reinforce=reinforce)
        return len(hits)

    def knn_only(self) -> Adapter:
        """The same store read with ``reranker=False``: the reference's ranking (KNN alone)."""
        return _OursKnnOnly(self)

    async def forget_agent(self, agent: str) -> int:
        return await self.store.forget_by_scope(agent_id=agent)

    # Context: the calls, ``store_turn(thread_id, ...)`` and
    # ``retrieve_context(thread_id, query, token_budget=...)``, with no agent: recall then
    # spans the store, whose memories all belong to the one agent actrone-memory searches.
    async def store_turn(self, agent: str, thread: str, user: str, assistant: str) -> None:
        await self.store.store_turn(thread, user, assistant)

    async def retrieve_context(self, agent: str, thread: str, query: str, budget: int) -> Context:
        ctx = await self.store.retrieve_context(thread, query, token_budget=budget)
        return Context(len(ctx.memories), len(ctx.turns), ctx.tokens_used.total)

    async def count_scope(self, agent: str, thread: str) -> int:
        return await self.store.count(thread_id=thread, agent_id=agent)

    async def close(self) -> None:
        await self.store.close()


class _OursKnnOnly(Adapter):
    """Recall of an ``OursAdapter``'s memories with ``reranker=False`` (one KNN, no text query)."""

    key, label = "ours", "betterdb-memory (reranker=False)"

    def __init__(self, ours: OursAdapter) -> None:
        self.ours = ours
        self.store = MemoryStore(
            client=ours.store.client,
            name=ours.store.name,
            embedder=ours.store.embedder,
            registry=CollectorRegistry(),
            reranker=False,
        )

    async def recall(self, query: str, *, thread: str | None, reinforce: bool) -> int:
        hits = await self.store.recall(query, k=K, threshold=2.0, thread_id=thread, reinforce=reinforce)
        return len(hits)

    async def close(self) -> None:
        await self.store.close()


class AgentMemoryAdapter(Adapter):
    """betterdb-agent-memory (reference 1): ``MemoryStore`` on the same Valkey client.

    No batch API: a batch is ``asyncio.gather`` of ``remember`` calls. No session
    turns and no context assembly.
    """

    key, label = "bam", "betterdb-agent-memory"

    def __init__(self, client: Any, name: str, book: VectorBook, *, threshold: float, **options: Any):
        # default_threshold is a cosine *distance* ceiling here (0..2); recall rows pass
        # 2.0 so every call returns k hits, like the other two.
        self.client = client
        self.name = name
        self.store = betterdb_agent_memory.MemoryStore(
            client=client,
            name=name,
            embed_fn=book_embed_fn(book),
            default_threshold=threshold,
            telemetry=MemoryTelemetryOptions(registry=CollectorRegistry()),
            analytics=False,
            **options,
        )

    async def start(self) -> None:
        await self.store.ensure_index()

    async def remember(self, doc: Doc) -> None:
        await self.store.remember(doc.content, thread_id=doc.thread, agent_id=doc.agent)

    async def remember_batch(self, docs: Sequence[Doc]) -> None:
        await asyncio.gather(*(self.remember(d) for d in docs))

    async def recall(self, query: str, *, thread: str | None, reinforce: bool) -> int:
        hits = await self.store.recall(query, k=K, threshold=2.0, thread_id=thread, reinforce=reinforce)
        return len(hits)

    def knn_only(self) -> Adapter:
        """The same store read with ``reranker=False``: the reference's ranking (KNN alone)."""
        return _OursKnnOnly(self)

    async def forget_agent(self, agent: str) -> int:
        return await self.store.forget_by_scope(agent_id=agent)

    async def store_turn(self, agent: str, thread: str, user: str, assistant: str) -> None:
        raise Unsupported("no session turns (long-term tier only)")

    async def retrieve_context(self, agent: str, thread: str, query: str, budget: int) -> Context:
        raise Unsupported("no context assembly")

    async def count_scope(self, agent: str, thread: str) -> int:
        # Its own scope filter syntax (the one _enforce_capacity counts with).
        from betterdb_agent_memory.build_recall_query import build_scope_filter
        from betterdb_agent_memory.types import MemoryScope

        flt = build_scope_filter(MemoryScope(thread_id=thread, agent_id=agent), [])
        reply = await self.client.execute_command(
            "FT.SEARCH", f"{self.name}:mem:idx", flt, "LIMIT", "0", "0", "DIALECT", "2"
        )
        return int(reply[0])

    async def get(self, memory_id: str) -> Any:
        return await self.store.get(memory_id)

    async def close(self) -> None:
        await self.store.close()


class ActroneAdapter(Adapter):
    """actrone-memory (reference 2): ``MemoryManager`` on its in-process backend.

    Its L2 search always names an agent and has no session/thread filter and no
    reinforcement; with every populated memory in one agent, searching that agent is
    the unscoped recall. Writes are ``inject_memory`` (no batch API: gather). It keeps
    each agent's memories in a Python list and scans it on every insert, so writes go
    to the populated agent (``write_agent``) to pay for the store's size, as writes to
    the Valkey-backed libraries do whatever their scope.
    """

    key, label = "actrone", "actrone-memory"
    valkey = False

    def __init__(self, mm: actrone_memory.MemoryManager, *, agent: str, write_agent: str) -> None:
        self.mm = mm
        self.agent = agent
        self.write_agent = write_agent

    @classmethod
    async def create(
        cls, book: VectorBook, *, relevance_threshold: float, agent: str, write_agent: str
    ) -> ActroneAdapter:
        config = actrone_memory.MemoryConfig(
            backend="memory",
            # Summaries would add memories to L2 behind the benchmark's back; betterdb-memory
            # summarises only turns leaving its 50-turn window, which the benchmark never reaches.
            auto_summarise=False,
            _env_file=None,  # type: ignore[call-arg]
        )
        mm = await actrone_memory.MemoryManager.create(
            config, embedder=BookActroneEmbedder(book, relevance_threshold)
        )
        return cls(mm, agent=agent, write_agent=write_agent)

    async def remember(self, doc: Doc) -> None:
        await self.mm.inject_memory(self.write_agent, doc.content, importance=0.5, session_id=doc.thread)

    async def remember_into(self, agent: str, doc: Doc) -> None:
        await self.mm.inject_memory(agent, doc.content, importance=0.5, session_id=doc.thread)

    async def remember_batch(self, docs: Sequence[Doc]) -> None:
        await asyncio.gather(*(self.remember_into(self.agent, d) for d in docs))

    async def recall(self, query: str, *, thread: str | None, reinforce: bool) -> int:
        if thread is not None:
            raise Unsupported("L2 search filters by agent only (no session/thread scope)")
        if reinforce:
            raise Unsupported("no reinforcement")
        return len(await self.mm.search_memories(self.agent, query, limit=K))

    async def forget_agent(self, agent: str) -> int:
        # erase_agent_memories returns nothing; it drops the agent's list (a dict pop).
        await self.mm.erase_agent_memories(agent)
        return -1

    async def store_turn(self, agent: str, thread: str, user: str, assistant: str) -> None:
        await self.mm.store_turn(agent, thread, user, assistant)

    async def retrieve_context(self, agent: str, thread: str, query: str, budget: int) -> Context:
        ctx = await self.mm.retrieve_context(agent, thread, query, token_budget=budget)
        return Context(len(ctx.episodic_memories), len(ctx.recent_turns), ctx.total_tokens_used)

    async def close(self) -> None:
        await self.mm.close()


class RawAdapter(Adapter):
    """The raw commands of ``bench_store.py``: HSET of the records betterdb-memory writes
    (``LongTermMemory._record``) into an index made with its own FT.CREATE arguments, and
    the FT.SEARCH KNN k=10 of ``knn_search_args`` (the fields a hit carries) on its index.

    Payloads (keys, fields, query argument lists) are computed in ``prepare``, before
    timing, so a ratio to raw is a library's whole overhead.
    """

    key, label = "raw", "raw commands"

    def __init__(self, client: Any, raw: RawIndex, *, ours: MemoryStore):
        self.client = client
        self.raw = raw
        self.ours = ours  # builds the records and the query (its index, layout, fields)
        self.book: VectorBook | None = None
        self._entries: dict[str, Command] = {}
        self._queries: dict[tuple[str, str | None], list[str | bytes]] = {}
        self._batch_keys: dict[str, list[str]] = {}  # agent -> keys written by remember_batch

    def bind(self, book: VectorBook) -> None:
        self.book = book

    def prepare(self, docs: Sequence[Doc] = (), queries: Sequence[tuple[str, str | None]] = ()) -> None:
        assert self.book is not None
        now_ms = int(time.time() * 1000)
        for d in docs:
            self._entries[d.content] = self.raw.hset(self.ours, d, now_ms)
        for text, thread in queries:
            self._queries[(text, thread)] = knn_search_args(
                self.ours.keys.index,
                encode_vector(self.book.vector(text)),
                k=K,
                flt=MemoryFilter(scope=Scope.of(thread_id=thread)),
                layout=self.ours.layout,
            )

    async def remember(self, doc: Doc) -> None:
        await self.client.execute_command(*self._entries[doc.content])

    async def remember_batch(self, docs: Sequence[Doc]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for d in docs:
            cmd = self._entries[d.content]
            pipe.execute_command(*cmd)
            self._batch_keys.setdefault(d.agent, []).append(str(cmd[1]))
        await pipe.execute()

    async def recall(self, query: str, *, thread: str | None, reinforce: bool) -> int:
        reply = await self.client.execute_command(*self._queries[(query, thread)])
        return int(reply[0])

    async def forget_agent(self, agent: str) -> int:
        """UNLINK of the agent's keys written by ``remember_batch``, 500 per pipeline (bench_store's)."""
        keys = self._batch_keys.pop(agent, [])
        for i in range(0, len(keys), 500):
            pipe = self.client.pipeline(transaction=False)
            for key in keys[i : i + 500]:
                pipe.unlink(key)
            await pipe.execute()
        return len(keys)
