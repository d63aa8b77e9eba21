"""Least privilege: the whole public API works as an ACL user limited to its own keys and commands.

The user below may touch only the key patterns the library uses and run only the
commands listed (the Lua scripts' own commands included: ACLs apply inside
scripts). It has no FLUSHALL, FLUSHDB, KEYS or CONFIG, and no key outside its
patterns (not even another key under the store name). The scenario drives every
operation of the store (long-term memories, capacity, dedup, L1 turns, rolling
summaries, fact extraction, context assembly, consolidation and fact history,
erasure, stats, live config, ids / upserts / updates / history) and of Monitor
discovery. After it, the server's ``ACL LOG`` must hold no denial for this
user: the library never even tried a command or key outside the list.

The rules are the minimum: each one removed breaks an operation or leaves an ACL
LOG denial (``test_every_rule_is_needed``, slow).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlparse, urlunparse

import pytest
import valkey.asyncio as avalkey
import valkey.exceptions as vexc

from betterdb_memory import ExtractedFact, Fact, HashingEmbedder, MemoryStore, Turn

from .conftest import unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

# The store: every key it writes (documents and their index, access counters, capacity
# locks, consolidation state and fact history, subjects, L1 sessions, the store-wide hashes) and
# every command, the scripts' included. ``module|list`` is the engine probe;
# ``client|setinfo`` only keeps valkey-py's connect handshake out of the ACL log.
STORE_RULES = (
    "~{name}:mem:* ~{name}:acc:* ~{name}:upd:* ~{name}:caplock:* ~{name}:cons:* ~{name}:hist:* ~{name}:l1:* "
    "~{name}:subj:* ~{name}:__mem_* "
    "+hset +hsetnx +hget +hmget +hgetall +hincrby +hkeys +hdel +hscan +get +set +incr +del +unlink +exists "
    "+rename +pexpire +pttl +persist +rpush +lpush +lindex +lrange +llen +ltrim +sadd +srem +smembers "
    "+zadd +zrange +zrem +zmscore "
    "+evalsha +script|load +ft.search +ft.create +ft.info +module|list +client|setinfo"
)
# Added for AgentMemory's cache tiers (betterdb-agent-cache: llm / tool / session, its stats
# hash and tool policies); ``scan`` for ``invalidate_by_tool`` / ``destroy_thread``.
AGENT_CACHE_RULES = (
    "~{name}:llm:* ~{name}:tool:* ~{name}:session:* ~{name}:__stats ~{name}:__tool_policies +scan"
)
# Added for BetterDB Monitor discovery (on by default): the shared registry, protocol and
# heartbeat keys (HSET / HEXISTS the registry, SET / DEL the heartbeat, SET NX the protocol).
DISCOVERY_RULES = "~__betterdb:* +hexists"


def _rules(name: str, discovery: bool) -> list[str]:
    text = STORE_RULES + (f" {DISCOVERY_RULES}" if discovery else "")
    return list(dict.fromkeys(text.format(name=name).split()))


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


class _Extractor:
    """A ``FactExtractor`` without a model: one fact per call."""

    async def extract(self, turns: Sequence[Turn]) -> list[ExtractedFact]:
        return [ExtractedFact(f"the user asked {len(turns)} things", topic_tags=("asked",), importance=0.4)]


async def _exercise(url: str, name: str, *, discovery: bool) -> None:
    """Every public operation of the store and discovery, with its result checked."""
    store = await MemoryStore.connect(
        url,
        name=name,
        embedder=HashingEmbedder(),
        max_items_per_scope=3,
        dedup=True,
        discovery=discovery,
        max_session_turns=2,
        summarize_batch=2,
        fact_extractor=_Extractor(),
    )
    try:
        # -- long-term memories, capacity, dedup -----------------------------------------
        await store.ensure_index()
        await store.ensure_index()  # the "already exists" path (FT.INFO)
        await store.ensure_discovery_ready()
        await store.ensure_config_refresh_started()
        a = await store.remember("alpha fact", vector=unit(1), thread_id="t", tags=["x"], ttl=60)
        assert await store.remember("Alpha  FACT", thread_id="t", tags=["x"], vector=unit(1), ttl=60) == a
        vectors = {i: unit(i + 2) for i in range(4)}
        ids = [await store.remember("beta fact", vector=unit(40))]
        for i, v in vectors.items():  # one at a time into "t" (capped at 3): two evictions
            ids.append(await store.remember(f"fact {i}", thread_id="t", vector=v, importance=0.2 + i / 10))
        ids += await store.remember_many([{"content": "gamma fact", "vector": unit(41), "thread_id": "u"}])
        in_t = [a, *ids[1:5]]
        alive = [m for m, item in zip(in_t, await store.get_many(in_t), strict=True) if item is not None]
        assert len(alive) == 3
        probe = next(m for m in alive if m != a)
        hits = await store.recall_by_vector(vectors[ids.index(probe) - 1], k=1, threshold=2.0, thread_id="t")
        assert [h.item.id for h in hits] == [probe]
        assert await store.recall("beta fact", k=3, threshold=2.0)
        assert await store.recall("beta fact this week", k=3, threshold=2.0)  # reads the history mark
        assert (await store.get(ids[0])).content == "beta fact"  # type: ignore[union-attr]
        assert (await store.get(probe)).access_count == 1  # type: ignore[union-attr]
        assert len((await store.list(thread_id="t", limit=10)).items) == 3
        assert await store.count(thread_id="t") == 3 and await store.count() == 5
        assert await store.forget(ids[0]) is True
        assert await store.forget_by_scope(tags=["x"]) == int(a in alive)
        # -- caller ids: upsert, update, history ---------------------------------------------
        own = await store.remember("own v1", id="own-1", vector=unit(42), namespace="ids", ttl=60)
        await store.remember("own v2", id=own, vector=unit(43), namespace="ids", ttl=60)
        assert (await store.update(own, importance=0.8, ttl=0)).content == "own v2"  # no TTL now
        assert [v.content for v in await store.history(own)] == ["own v2", "own v1"]
        assert await store.forget(own) is True
        await store.refresh_config()
        assert store.current_config() is not None
        # -- L1: turns, rolling summaries, extraction, context, erasure ----------------------
        for i in range(5):
            await store.store_turn("s1", f"question {i} about tea", f"answer {i}", agent_id="ag")
        assert await store.summarize_session("s1", agent_id="ag") >= 0
        assert len(await store.get_recent_turns("s1", agent_id="ag")) >= 2
        meta = await store.get_session_metadata("s1", agent_id="ag")
        assert meta is not None and meta.turn_count == 5
        assert len(await store.extract_memories("s1", agent_id="ag")) == 1
        context = await store.retrieve_context("s1", "what about tea?", token_budget=2000, agent_id="ag")
        assert context.turns
        await store.store_turn("s2", "another thread", "ok", agent_id="ag")
        await store.clear_session("s2", agent_id="ag")
        assert await store.get_session_metadata("s2", agent_id="ag") is None
        # -- consolidation: summary, facts (supersession, tombstone), history -------------------
        for i in range(3):
            await store.remember(f"note {i}", vector=unit(50 + i), agent_id="c", thread_id="ct")
        digest = await store.consolidate(
            "summary", lambda items: "a digest", agent_id="c", delete_sources=False
        )
        assert digest.consolidated == 3 and len(digest.created) == 1
        # Undated facts: a dated one has an old keep-score (recency from valid_from), and the
        # agent's scope is at its cap (3), so the next write there would evict it.
        await store.remember("lives in Paris", vector=unit(60), agent_id="c")
        done = await store.consolidate(
            "facts", extract_facts=lambda items: [Fact("city", "lives in Paris")], agent_id="c"
        )
        assert len(done.created) == 1
        await store.remember("moved to Berlin", vector=unit(61), agent_id="c")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            moved = await store.consolidate_facts(
                extract_facts=lambda items: [Fact("city", "lives in Berlin")], agent_id="c"
            )
        assert moved.superseded == 1
        assert await store.recall("city this week", k=3, threshold=2.0, agent_id="c")  # asks history now
        await store.remember("forget the job", vector=unit(62), agent_id="c")
        await store.consolidate(
            "facts", extract_facts=lambda items: [Fact("job", "", tombstone=True)], agent_id="c"
        )  # an unmatched tombstone
        assert len(await store.fact_history("city", agent_id="c")) == 2
        assert await store.purge_fact_history(subject="city", agent_id="c") == 1
        summary = await store.consolidate("summary", lambda items: "all of it", thread_id="ct")
        assert summary.deleted == summary.consolidated
        # -- erasure (L1 and L2 of an agent, consolidation state included) ---------------------
        assert await store.erase(agent_id="ag") > 0
        assert await store.erase(agent_id="c", thread_id="ct") >= 0
        assert await store.erase(agent_id="c") > 0
        assert await store.forget_by_scope(thread_id="t") == 3 - int(a in alive)
        # -- what is left -----------------------------------------------------------------------
        stats = await store.stats()
        assert stats.items == 1 and stats.evictions >= 2  # "gamma fact" in "u"
        assert await store.forget_by_scope(thread_id="u") == 1
        assert (await store.index_info()) is not None
    finally:
        await store.close()


@pytest.mark.parametrize("discovery", [False, True], ids=["no-discovery", "discovery"])
async def test_every_operation_runs_as_a_least_privilege_user(
    admin: avalkey.Valkey, valkey_url: str, unique_name: str, discovery: bool
) -> None:
    user, password = f"u{unique_name}", "reliability-pw"
    rules = _rules(unique_name, discovery)
    await admin.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
    print(f"\n[acl] ACL SETUSER {user} reset on >{password} {' '.join(rules)}")
    url = _user_url(valkey_url, user, password)
    try:
        await admin.script_flush()  # so the user loads every script itself (NOSCRIPT, SCRIPT LOAD)
        await _exercise(url, unique_name, discovery=discovery)
        denied = await _denials(admin, user)
        assert denied == [], f"the library tried commands or keys outside its ACL: {denied}"
        # ... although the user really lacks the dangerous commands and other keys.
        raw = avalkey.Valkey.from_url(url)
        try:
            for command in (("FLUSHALL",), ("FLUSHDB",), ("KEYS", "*"), ("CONFIG", "GET", "*")):
                with pytest.raises(vexc.NoPermissionError):
                    await raw.execute_command(*command)
            for key in ("not-my-prefix:key", f"{unique_name}:other", f"{unique_name}:llm:x"):
                with pytest.raises(vexc.NoPermissionError):
                    await raw.get(key)
        finally:
            await raw.aclose()
    finally:
        await admin.execute_command("ACL", "DELUSER", user)


@pytest.mark.slow
async def test_every_rule_is_needed(admin: avalkey.Valkey, valkey_url: str, unique_name: str) -> None:
    """Remove one rule at a time: the scenario then fails or the ACL LOG records a denial."""
    full = _rules(unique_name, True)
    unneeded = []
    for n, rule in enumerate(full):
        if rule == "+client|setinfo":
            continue  # only keeps the connect handshake's refused CLIENT SETINFO out of the log
        name = f"{unique_name}r{n}"
        rules = [r.replace(unique_name, name) for r in full if r != rule]
        user = f"u{name}"
        await admin.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", *rules)
        try:
            try:
                await admin.script_flush()
                await _exercise(_user_url(valkey_url, user, "pw"), name, discovery=True)
                failed = False
            except Exception:
                failed = True
            if not failed and not await _denials(admin, user):
                unneeded.append(rule)
        finally:
            await admin.execute_command("ACL", "DELUSER", user)
            with contextlib.suppress(vexc.ResponseError):
                await admin.execute_command("FT.DROPINDEX", f"{name}:mem:idx")
    assert unneeded == [], f"rules nothing needs: {unneeded}"


async def test_the_agent_memory_facade_runs_as_a_least_privilege_user(
    admin: avalkey.Valkey, valkey_url: str, unique_name: str
) -> None:
    """``AgentMemory`` (memory tier + betterdb-agent-cache's llm / tool / session tiers, Monitor
    discovery of both) runs its whole surface as a user with the store's, the cache tiers' and
    discovery's rules, and nothing else."""
    from betterdb_memory import AgentMemory, AgentMemoryOptions, ToolPolicy

    user, password = f"f{unique_name}", "reliability-pw"
    text = f"{STORE_RULES} {AGENT_CACHE_RULES} {DISCOVERY_RULES}".format(name=unique_name)
    rules = list(dict.fromkeys(text.split()))
    await admin.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
    client = avalkey.Valkey.from_url(_user_url(valkey_url, user, password))
    embedder = HashingEmbedder(64)

    async def embed(text: str) -> list[float]:
        return [float(x) for x in (await embedder.embed([text]))[0]]

    agent = AgentMemory(AgentMemoryOptions(client=client, name=unique_name, embed_fn=embed))
    try:
        await admin.script_flush()
        await agent.initialize()
        mid = await agent.memory.remember("the user likes tea", thread_id="t", agent_id="a")
        assert [h.item.id for h in await agent.memory.recall("likes tea", thread_id="t", threshold=2.0)] == [
            mid
        ]
        request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        await agent.llm.store(request, "hello")
        assert (await agent.llm.check(request)).hit
        await agent.tool.set_policy("weather", ToolPolicy(ttl=5))
        await agent.tool.store("weather", {"city": "Oslo"}, "-3")
        assert (await agent.tool.check("weather", {"city": "Oslo"})).hit
        assert await agent.tool.invalidate_by_tool("weather") == 1
        await agent.session.set("t", "step", "1")
        assert await agent.session.get("t", "step") == "1"
        await agent.session.destroy_thread("t")
        await agent.erase(agent_id="a", thread_id="t")
        assert await agent.memory.get(mid) is None
    finally:
        await agent.close()
        await client.aclose()
    try:
        denied = await _denials(admin, user)
        assert denied == [], f"the facade tried commands or keys outside its ACL: {denied}"
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
