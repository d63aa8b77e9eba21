"""Least privilege: the whole store API works as an ACL user limited to its own keys and commands.

The user below may touch only ``<name>:*`` keys and run only the commands listed
(the Lua scripts' own commands included: ACLs apply inside scripts). It has no
FLUSHALL, FLUSHDB, KEYS, SCAN or CONFIG. After driving every store operation, the
server's ``ACL LOG`` must hold no denial for this user: the store never even tried
a command or key outside the list. (No MONITOR needed.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlparse, urlunparse

import pytest
import valkey.asyncio as avalkey
import valkey.exceptions as vexc

from betterdb_memory import HashingEmbedder, MemoryStore

from .conftest import unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

# The minimum found by removing one rule at a time (each removal breaks an operation
# or leaves an ACL LOG denial). ``client|setinfo`` only keeps valkey-py's connect
# handshake out of the ACL log; ``module|list`` is the engine probe.
STORE_RULES = (
    "~{name}:* +hgetall +hsetnx +hmget +hget +hincrby +hset +hdel +hkeys +scard +smembers +sadd "
    "+zrange +zcard +zcount +zadd +zrem +zrangebyscore +exists +unlink +pexpire +pexpireat +persist +pttl "
    "+evalsha +script|load "
    "+ft.search +ft.create +ft.info +module|list +client|setinfo"
)
# BetterDB Monitor discovery (on by default) also writes the shared registry keys.
DISCOVERY_RULES = "~__betterdb:* +set +del +hexists"


def _user_url(url: str, user: str, password: str) -> str:
    parts = urlparse(url)
    netloc = f"{user}:{password}@{parts.hostname}:{parts.port}"
    return urlunparse(parts._replace(netloc=netloc))


@pytest.fixture
async def admin(valkey_url: str) -> AsyncIterator[avalkey.Valkey]:
    c = avalkey.Valkey.from_url(valkey_url, decode_responses=True)
    yield c
    await c.aclose()


async def _denials(admin: avalkey.Valkey, user: str) -> list[dict[str, Any]]:
    out = []
    for entry in await admin.execute_command("ACL", "LOG"):
        e = dict(zip(entry[::2], entry[1::2], strict=True)) if isinstance(entry, list) else dict(entry)
        if e.get("username") == user:
            out.append(e)
    return out


@pytest.mark.parametrize("discovery", [False, True], ids=["no-discovery", "discovery"])
async def test_every_operation_runs_as_a_least_privilege_user(
    admin: avalkey.Valkey, valkey_url: str, unique_name: str, discovery: bool
) -> None:
    user, password = f"u{unique_name}", "reliability-pw"
    rules = STORE_RULES.format(name=unique_name) + (f" {DISCOVERY_RULES}" if discovery else "")
    await admin.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules.split())
    print(f"\n[acl] ACL SETUSER {user} reset on >{password} {rules}")
    url = _user_url(valkey_url, user, password)
    try:
        store = await MemoryStore.connect(
            url, name=unique_name, embedder=HashingEmbedder(), max_items_per_scope=3, discovery=discovery
        )
        try:
            await store.ensure_index()
            await store.ensure_index()  # the "already exists" path (FT.INFO)
            a = await store.remember("alpha fact", vector=unit(1), thread_id="t", tags=["x"], ttl=60)
            assert await store.remember("Alpha  FACT", thread_id="t", vector=unit(1)) == a  # dedup
            vectors = {i: unit(i + 2) for i in range(4)}
            ids = await store.remember_many(
                [
                    "beta fact",
                    *({"content": f"fact {i}", "thread_id": "t", "vector": v} for i, v in vectors.items()),
                ]
            )  # the scope "t" is capped at 3: two evictions
            in_t = [a, *ids[1:]]
            alive = [m for m, item in zip(in_t, await store.get_many(in_t), strict=True) if item is not None]
            assert len(alive) == 3
            probe = next(m for m in alive if m != a)
            hits = await store.recall_by_vector(
                vectors[ids.index(probe) - 1], k=1, threshold=2.0, thread_id="t"
            )
            assert [h.item.id for h in hits] == [probe]
            assert await store.recall("beta fact", k=3, threshold=2.0)
            assert (await store.get(ids[0])).content == "beta fact"  # type: ignore[union-attr]
            assert len(await store.get_many(ids)) == 5
            assert len((await store.list(thread_id="t", limit=10)).items) == 3
            assert await store.count(thread_id="t") == 3 and await store.count() == 4
            assert await store.forget(ids[0]) is True
            assert await store.forget_by_scope(tags=["x"]) == int(a in alive)
            assert await store.forget_by_scope(thread_id="t") == 3 - int(a in alive)
            stats = await store.stats()
            assert stats.items == 0 and stats.evictions >= 2
            assert (await store.index_info()) is not None
        finally:
            await store.close()
        denied = await _denials(admin, user)
        assert denied == [], f"the store tried commands or keys outside its ACL: {denied}"
        # ... although the user really lacks the dangerous commands.
        raw = avalkey.Valkey.from_url(url)
        try:
            for command in (
                ("FLUSHALL",),
                ("FLUSHDB",),
                ("KEYS", "*"),
                ("SCAN", "0"),
                ("CONFIG", "GET", "*"),
            ):
                with pytest.raises(vexc.NoPermissionError):
                    await raw.execute_command(*command)
            with pytest.raises(vexc.NoPermissionError):
                await raw.get("not-my-prefix:key")
        finally:
            await raw.aclose()
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
