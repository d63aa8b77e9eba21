"""The store's parts, each built alone over a fake backend: what they send, and what they make of replies.

The parts take their dependencies (``Runtime``, each other) in their constructors, so
a part can be exercised without a server: ``FakeBackend`` records every command a
pipeline, script, search or command carries and answers from a queue of replies.
Storage behaviour itself is tested against the real engine in tests/integration.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder
from betterdb_memory.backend import Backend, scripts
from betterdb_memory.backend.index import IndexManager
from betterdb_memory.core.dialect import capabilities_for
from betterdb_memory.core.keys import KeySpace, Scope
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.record import NewMemory
from betterdb_memory.core.tunables import ConfigSnapshot
from betterdb_memory.core.turns import APPEND_TURN, decode_turn
from betterdb_memory.errors import StoreClosedError
from betterdb_memory.lifecycle import StoreState, Supervisor
from betterdb_memory.observability.hub import StoreObservability
from betterdb_memory.store import MemoryStore
from betterdb_memory.summarizers import ExtractiveSummarizer
from betterdb_memory.tiers.capacity import Capacity
from betterdb_memory.tiers.documents import Documents
from betterdb_memory.tiers.long_term import LongTermMemory
from betterdb_memory.tiers.recall import Recall
from betterdb_memory.tiers.runtime import Runtime, Settings
from betterdb_memory.tiers.scopes import ScopeReader
from betterdb_memory.tiers.session_config import SessionConfig
from betterdb_memory.tiers.sessions import Sessions
from betterdb_memory.tiers.summaries import RollingSummaries


class _Pipe:
    """Records queued commands as (name, args) tuples."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any) -> None:
        self.commands.append(tuple(args))

    def __getattr__(self, name: str) -> Callable[..., None]:
        def queue(*args: Any, **kwargs: Any) -> None:
            self.commands.append((name.upper(), *args))

        return queue


class FakeBackend(Backend):
    """A ``Backend`` with no client: each round trip is recorded and answered from ``replies``."""

    def __init__(self) -> None:
        super().__init__(client=None)  # type: ignore[arg-type]
        self.sent: list[tuple[str, list[tuple[Any, ...]], bool]] = []
        self.replies: deque[list[Any]] = deque()

    async def pipeline(
        self,
        operation: str,
        build: Callable[[Any], None],
        *,
        idempotent: bool = True,
        details: Any = None,
        searches: Sequence[Sequence[Any]] = (),
    ) -> list[Any]:
        if self.closed:
            raise StoreClosedError("closed")
        pipe = _Pipe()
        build(pipe)
        pipe.commands.extend(tuple(s) for s in searches)
        self.sent.append((operation, pipe.commands, idempotent))
        return self.replies.popleft() if self.replies else [0] * len(pipe.commands)

    async def command(self, operation: str, *args: Any, idempotent: bool = True) -> Any:
        return (await self.pipeline(operation, lambda p: p.execute_command(*args), idempotent=idempotent))[0]

    async def search(self, operation: str, args: Sequence[Any]) -> Any:
        return await self.command(operation, *args)


def _runtime(backend: FakeBackend | None = None, **settings: Any) -> Runtime:
    backend = backend or FakeBackend()
    keys = KeySpace("parts")
    embedder = HashingEmbedder(dimensions=8)
    index = IndexManager(backend, keys, embedder)
    index.capabilities = capabilities_for("redisearch", (2, 10, 0))
    index.ready = True  # no probe: the fake has no engine
    return Runtime(
        keys=keys,
        backend=backend,
        index=index,
        embedder=embedder,
        obs=StoreObservability(None, keys, ConfigSnapshot(), discovery=False),
        supervisor=Supervisor(),
        settings=Settings(default_threshold=0.33, **settings),
    )


def _fake(rt: Runtime) -> FakeBackend:
    assert isinstance(rt.backend, FakeBackend)
    return rt.backend


async def test_documents_forget_deletes_document_and_counter_in_one_round_trip() -> None:
    rt = _runtime()
    _fake(rt).replies.append([1, 1])
    assert await Documents(rt).forget("abc") is True
    [(operation, commands, _)] = _fake(rt).sent
    assert operation == "forget"
    assert commands == [
        ("DELETE", "parts:mem:abc"),
        ("DELETE", "parts:acc:{parts:mem:abc}", "parts:upd:{parts:mem:abc}"),
    ]


async def test_scope_reader_count_is_one_filter_query_with_limit_zero() -> None:
    rt = _runtime()
    _fake(rt).replies.append([[7]])  # RESP2 FT.SEARCH reply: total only
    assert await ScopeReader(rt).count(thread_id="t-1") == 7
    [(_, [args], _)] = _fake(rt).sent
    assert args[:2] == ("FT.SEARCH", "parts:mem:idx")
    assert "@threadId:{t\\-1}" in args[2] and "-@expires_at:" in args[2]  # escaped; live memories only
    assert args[args.index("LIMIT") :][:3] == ("LIMIT", "0", "0")


async def test_capacity_cap_filters_are_the_distinct_scoped_writes() -> None:
    rt = _runtime()
    scopes, docs = ScopeReader(rt), Documents(rt)
    cap = Capacity(rt, scopes, docs)
    a = NewMemory("a", scope=Scope(thread_id="a"), tags=("x", "y"))
    b = NewMemory("b", scope=Scope(thread_id="a"), tags=("y", "x"))  # same filter, tags in another order
    unscoped = NewMemory("c")
    assert cap.cap_filters([a, b, unscoped]) == [MemoryFilter(scope=Scope(thread_id="a"), tags=("x", "y"))]


async def test_remember_many_writes_one_pipeline_of_hset_with_the_reference_fields() -> None:
    rt = _runtime()
    docs = Documents(rt)
    recall = Recall(rt, docs)
    long_term = LongTermMemory(rt, Capacity(rt, ScopeReader(rt), docs), recall, docs)
    ids = await long_term.remember_many(["Ada lives in Lisbon.", {"content": "Bo", "ttl": 60}])
    [(operation, commands, idempotent)] = _fake(rt).sent
    assert operation == "remember" and idempotent  # ids fixed client-side: a retry rewrites the same docs
    assert [c[0] for c in commands] == ["HSET", "HSET", "PEXPIRE"]
    assert commands[0][1] == f"parts:mem:{ids[0]}"
    fields = dict(zip(commands[0][2::2], commands[0][3::2], strict=True))
    assert fields["content"] == "Ada lives in Lisbon." and "vector" in fields and "created_at" in fields
    assert commands[2] == ("PEXPIRE", f"parts:mem:{ids[1]}", 60_000)


async def test_store_turn_is_one_round_trip_of_evalsha_and_sadd_not_retried() -> None:
    rt = _runtime()
    cfg = SessionConfig.of(summarize_batch=0)
    docs = Documents(rt)
    recall = Recall(rt, docs)
    long_term = LongTermMemory(rt, Capacity(rt, ScopeReader(rt), docs), recall, docs)
    summaries = RollingSummaries(rt, cfg, long_term)
    sessions = Sessions(rt, cfg, summaries=summaries, recall=recall, long_term=long_term)
    _fake(rt).replies.append([[1, 0], 1, 1])
    turn_id = await sessions.store_turn("t", "hello", "hi", agent_id="a")
    [(operation, commands, idempotent)] = _fake(rt).sent
    assert operation == "store_turn" and not idempotent  # a replayed append would store the turn twice
    evalsha, sadd, pexpire = commands
    sk = rt.keys.session("a", "t")
    append = rt.backend.register("append_turn", APPEND_TURN)
    assert evalsha[:6] == ("EVALSHA", append.sha, 3, sk.turns, sk.meta, sk.summary_cursor)
    turn = decode_turn(evalsha[6], "t")
    assert turn is not None and turn.id == turn_id and turn.user_message == "hello"
    assert sadd == ("SADD", rt.keys.agent_sessions("a"), "t") and pexpire[0] == "PEXPIRE"


async def test_summary_job_takes_the_backends_replay_safe_lock_not_a_bare_set_nx() -> None:
    rt = _runtime()
    cfg = SessionConfig.of(summarizer=ExtractiveSummarizer())
    docs = Documents(rt)
    long_term = LongTermMemory(rt, Capacity(rt, ScopeReader(rt), docs), Recall(rt, docs), docs)
    summaries = RollingSummaries(rt, cfg, long_term)
    backend = _fake(rt)
    backend.replies.extend([[1], [[None, []]], [1]])  # lock taken; nothing pending; unlocked
    assert await summaries.summarize_session("a", "t") == 0
    ops = [(op, cmds[0][:2]) for op, cmds, _ in backend.sent]
    lock = rt.backend.register("lock", scripts.LOCK)
    unlock = rt.backend.register("unlock", scripts.UNLOCK)
    assert ops[0] == ("lock", ("EVALSHA", lock.sha))
    assert ops[-1] == ("unlock", ("EVALSHA", unlock.sha))
    assert all(c[0][0] != "SET" for _, c, _ in backend.sent)


async def test_index_manager_refuses_after_close() -> None:
    rt = _runtime()
    rt.backend.closed = True
    with pytest.raises(StoreClosedError) as caught:
        await rt.index.ensure_ready()
    assert caught.value.code == "state.closed"


async def test_store_state_goes_new_then_closed_and_calls_raise_after_close() -> None:
    store = MemoryStore(client=None, name="state", embedder=HashingEmbedder(), discovery=False)  # type: ignore[arg-type]
    assert store.state is StoreState.NEW
    await store.close()
    assert store.state is StoreState.CLOSED
    for call in (store.count(), store.recall("q"), store.get_recent_turns("t"), store.remember("x")):
        with pytest.raises(StoreClosedError):
            await call


def test_unknown_keyword_is_pythons_own_type_error() -> None:
    store = MemoryStore(client=None, name="kw", embedder=HashingEmbedder(), discovery=False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        store.remember("x", colour="red")  # type: ignore[call-arg, unused-coroutine]
    asyncio.run(store.close())


async def test_recall_clamps_a_distance_a_hair_below_zero() -> None:
    """valkey-search can answer -1.19e-07 for an exact match: the similarity must stay within 0..1."""
    rt = _runtime()
    docs = Documents(rt)
    reply = [1, b"parts:mem:m1", [b"__dist", b"-1.1920929e-07", b"content", b"x", b"importance", b"0.5"]]
    _fake(rt).replies.append([reply])
    [(item, distance)] = await Recall(rt, docs).search_candidates(
        np.ones(8, dtype=np.float32), MemoryFilter(), 1
    )
    assert item.id == "m1" and distance == 0.0


@pytest.mark.parametrize(
    ("option", "bad", "code"),
    [
        ("relevance_margin", -1, "configuration.range"),
        ("relevance_margin", "x", "configuration.type"),
        ("relevance_margin", float("nan"), "configuration.nonfinite"),
        ("relevance_margin", 3.0, "configuration.range"),
        ("text_candidates", -1, "configuration.range"),
        ("text_candidates", 1001, "configuration.range"),
        ("text_candidates", True, "configuration.type"),
    ],
)
def test_new_store_options_refuse_bad_values_with_a_typed_error(option: str, bad: object, code: str) -> None:
    """A constructor argument is a setting: its mistakes are ConfigurationErrors (core.arguments' rule)."""
    from betterdb_memory import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        MemoryStore(client=None, name="opts", embedder=HashingEmbedder(), discovery=False, **{option: bad})  # type: ignore[arg-type]
    assert caught.value.code == code


def test_relevance_margin_defaults_to_the_embedders_and_can_be_turned_off() -> None:
    on = MemoryStore(client=None, name="m1", embedder=HashingEmbedder(), discovery=False)  # type: ignore[arg-type]
    off = MemoryStore(
        client=None, name="m2", embedder=HashingEmbedder(), discovery=False, relevance_margin=False
    )  # type: ignore[arg-type]
    mine = MemoryStore(
        client=None, name="m3", embedder=HashingEmbedder(), discovery=False, relevance_margin=0.25
    )  # type: ignore[arg-type]
    assert (on._rt.settings.margin, off._rt.settings.margin, mine._rt.settings.margin) == (0.09, None, 0.25)
    for store in (on, off, mine):
        asyncio.run(store.close())
