"""``wait_replicas`` on a server without replicas: every write is applied, then refused as unconfirmed.

The session server has no replica, so ``WAIT 1`` answers 0 once its timeout passes: the
write is on the primary (readable) and the call raises ``server.replication_timeout``.
Reads send no WAIT and answer as usual. The replica cluster (tests/cluster/
test_cluster_replicas.py) checks the confirmed path and failovers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from betterdb_memory import MemoryStore
from betterdb_memory.errors import ServerError

pytestmark = pytest.mark.integration

LIMIT_S = 30.0  # generous: a hang fails the test, a duration is never asserted


def _unconfirmed(err: ServerError, operation: str) -> None:
    assert err.code == "server.replication_timeout"
    assert err.details["operation"] == operation
    assert err.details["replicas"] == 1 and err.details["acknowledged"] == 0


async def test_a_write_no_replica_confirms_raises_and_is_applied(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store(wait_replicas=1, wait_timeout=0.05, discovery=False)
    async with asyncio.timeout(LIMIT_S):
        await store.ensure_index()
        with pytest.raises(ServerError) as info:
            await store.remember("applied but unconfirmed", id="m1", thread_id="t")
        _unconfirmed(info.value, "remember")
        got = await store.get("m1")  # a read: no WAIT, no error
        assert got is not None and got.content == "applied but unconfirmed"
        with pytest.raises(ServerError) as info:
            await store.forget("m1")
        _unconfirmed(info.value, "forget")
        assert await store.get("m1") is None


async def test_every_kind_of_write_waits(make_store: Callable[..., MemoryStore]) -> None:
    """remember_many, update, store_turn: each raises once it is applied."""
    store = make_store(wait_replicas=1, wait_timeout=0.05, discovery=False)
    calls: list[tuple[str, Any]] = [
        ("remember_many", lambda: store.remember_many([{"content": "a", "id": "a"}, {"content": "b"}])),
        ("update", lambda: store.update("a", content="a2")),
        ("store_turn", lambda: store.store_turn("s1", "hello", "hi")),
    ]
    async with asyncio.timeout(LIMIT_S):
        await store.ensure_index()
        for operation, call in calls:
            with pytest.raises(ServerError) as info:
                await call()
            assert info.value.code == "server.replication_timeout", operation
        got = await store.get("a")
        assert got is not None and got.content == "a2"
        assert [t.user_message for t in await store.get_recent_turns("s1")] == ["hello"]


async def test_without_wait_replicas_nothing_waits(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(discovery=False)
    async with asyncio.timeout(LIMIT_S):
        mid = await store.remember("plain")
        assert (await store.get(mid)) is not None
