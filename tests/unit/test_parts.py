"""The store's parts, each built alone over a recording backend: what they send, and what they make of replies.

The parts take their dependencies (``Runtime``, each other) in their constructors, so
a part can be exercised without a server: ``testing.RecordingBackend`` records every
round trip by its real command names and arguments and answers from scripted replies.
Storage behaviour itself is tested against the real engine in tests/integration.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder
from betterdb_memory.backend import scripts
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.record import NewMemory
from betterdb_memory.core.turns import decode_turn
from betterdb_memory.errors import StoreClosedError
from betterdb_memory.lifecycle import StoreState
from betterdb_memory.store import MemoryStore
from betterdb_memory.summarizers import ExtractiveSummarizer
from betterdb_memory.tiers.session_config import SessionConfig
from tests.unit.parts import build, runtime


async def test_documents_forget_deletes_document_and_counter_in_one_round_trip() -> None:
    p = build()
    p.backend.reply(None, None, 1, 1, 0)  # no subject: nothing more to do
    assert await p.docs.forget("abc") is True
    [trip] = p.backend.sent
    assert trip.operation == "forget"
    assert trip.commands == (
        ("HGET", "parts:mem:abc", "subject_key"),
        ("HGET", "parts:hist:{parts:mem:abc}", "subject_key"),
        ("DEL", "parts:mem:abc"),
        ("DEL", "parts:acc:{parts:mem:abc}", "parts:upd:{parts:mem:abc}"),
        ("DEL", "parts:hist:{parts:mem:abc}"),
    )


async def test_scope_reader_count_is_one_filter_query_with_limit_zero() -> None:
    p = build()
    p.backend.reply([7])  # RESP2 FT.SEARCH reply: total only
    assert await p.scopes.count(thread_id="t-1") == 7
    [trip] = p.backend.sent
    [args] = trip.searches
    assert trip.commands == ()
    assert args[:2] == ("FT.SEARCH", "parts:mem:idx")
    assert "@threadId:{t\\-1}" in args[2] and "-@expires_at:" in args[2]  # escaped; live memories only
    assert args[args.index("LIMIT") :][:3] == ("LIMIT", "0", "0")


async def test_capacity_cap_filters_are_the_distinct_scoped_writes() -> None:
    cap = build().capacity
    a = NewMemory("a", scope=Scope(thread_id="a"), tags=("x", "y"))
    b = NewMemory("b", scope=Scope(thread_id="a"), tags=("y", "x"))  # same filter, tags in another order
    unscoped = NewMemory("c")
    assert cap.cap_filters([a, b, unscoped]) == [MemoryFilter(scope=Scope(thread_id="a"), tags=("x", "y"))]


async def test_remember_many_writes_one_pipeline_of_hset_with_the_reference_fields() -> None:
    p = build()
    ids = await p.long_term.remember_many(["Ada lives in Lisbon.", {"content": "Bo", "ttl": 60}])
    [trip] = p.backend.sent
    commands = trip.commands
    assert (
        trip.operation == "remember" and trip.idempotent
    )  # ids fixed client-side: a retry rewrites the same docs
    assert trip.names == ["HSET", "HSET", "PEXPIRE"]
    assert commands[0][1] == f"parts:mem:{ids[0]}"
    fields = dict(zip(commands[0][2::2], commands[0][3::2], strict=True))
    assert fields["content"] == "Ada lives in Lisbon." and "vector" in fields and "created_at" in fields
    assert commands[2] == ("PEXPIRE", f"parts:mem:{ids[1]}", 60_000)


async def test_store_turn_is_one_round_trip_of_evalsha_and_sadd_not_retried() -> None:
    p = build()
    p.backend.reply([1, 0], 1, 1)
    turn_id = await p.sessions.store_turn("t", "hello", "hi", agent_id="a")
    [trip] = p.backend.sent
    assert (
        trip.operation == "store_turn" and not trip.idempotent
    )  # a replayed append would store the turn twice
    evalsha, sadd, pexpire = trip.commands
    sk = p.rt.keys.session("a", "t")
    assert evalsha[:6] == ("EVALSHA", scripts.APPEND_TURN.sha, 3, sk.turns, sk.meta, sk.summary_cursor)
    turn = decode_turn(evalsha[6], "t")
    assert turn is not None and turn.id == turn_id and turn.user_message == "hello"
    assert sadd == ("SADD", p.rt.keys.agent_sessions("a"), "t") and pexpire[0] == "PEXPIRE"


async def test_summary_job_takes_the_backends_replay_safe_lock_not_a_bare_set_nx() -> None:
    p = build(session=SessionConfig.of(summarizer=ExtractiveSummarizer()))
    for reply in (1, [None, []], 1):  # lock taken; nothing pending; unlocked
        p.backend.reply(reply)
    assert await p.summaries.summarize_session("a", "t") == 0
    ops = [(trip.operation, trip.commands[0][:2]) for trip in p.backend.sent]
    assert ops[0] == ("lock", ("EVALSHA", scripts.LOCK.sha))
    assert ops[-1] == ("unlock", ("EVALSHA", scripts.UNLOCK.sha))
    assert all(trip.commands[0][0] != "SET" for trip in p.backend.sent)


async def test_index_manager_refuses_after_close() -> None:
    rt = runtime()
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
    p = build()
    reply = [1, b"parts:mem:m1", [b"__dist", b"-1.1920929e-07", b"content", b"x", b"importance", b"0.5"]]
    p.backend.reply(reply)
    [(item, distance)] = await p.recall.search_candidates(np.ones(8, dtype=np.float32), MemoryFilter(), 1)
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
        ("text_timeout_ms", 0, "configuration.range"),
        ("text_timeout_ms", 60_001, "configuration.range"),
        ("text_timeout_ms", "500", "configuration.type"),
        ("implicit_updates", "no", "configuration.type"),
        ("implicit_updates", 0, "configuration.type"),
        ("implicit_updates", None, "configuration.type"),
    ],
)
def test_new_store_options_refuse_bad_values_with_a_typed_error(option: str, bad: object, code: str) -> None:
    """A constructor argument is a setting: its mistakes are ConfigurationErrors (core.arguments' rule)."""
    from betterdb_memory import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        MemoryStore(client=None, name="opts", embedder=HashingEmbedder(), discovery=False, **{option: bad})  # type: ignore[arg-type]
    assert caught.value.code == code


def test_text_timeout_ms_reaches_the_settings() -> None:
    default = MemoryStore(client=None, name="t1", embedder=HashingEmbedder(), discovery=False)  # type: ignore[arg-type]
    mine = MemoryStore(
        client=None, name="t2", embedder=HashingEmbedder(), discovery=False, text_timeout_ms=120
    )  # type: ignore[arg-type]
    assert (default._rt.settings.text_timeout_ms, mine._rt.settings.text_timeout_ms) == (500, 120)
    for store in (default, mine):
        asyncio.run(store.close())


def test_implicit_updates_reaches_the_settings() -> None:
    default = MemoryStore(client=None, name="i1", embedder=HashingEmbedder(), discovery=False)  # type: ignore[arg-type]
    off = MemoryStore(
        client=None, name="i2", embedder=HashingEmbedder(), discovery=False, implicit_updates=False
    )  # type: ignore[arg-type]
    assert (default._rt.settings.implicit_updates, off._rt.settings.implicit_updates) == (True, False)
    for store in (default, off):
        asyncio.run(store.close())


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
