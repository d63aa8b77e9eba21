"""Tenants: a store's ACL user reaches nothing of another tenant's store (issue 30).

Two tenants share the session's server. Each has an ACL user with the rules
``core.acl.acl_rules`` gives (its own key patterns, no FT.CREATE: an administrator
created both indexes, Monitor discovery on), and builds its store with its own
credentials. Then tenant A opens a store under tenant B's *name* and calls every
public coroutine method of ``MemoryStore`` (read from the class, so a new method
cannot be forgotten: ``test_every_public_method_has_an_attack``), the ``AgentMemory``
facade's calls, export and import, and raw commands on B's keys and index (FT.SEARCH,
FT.INFO, FT.CREATE over B's prefix, the config and stats hashes, L1 keys, discovery
keys). Every attempt is refused with ``PermissionDeniedError`` (code
``server.no_permission``), and afterwards B is as it was: the same keys with the same
values (``DUMP``) and index size, and not one of B's keys read (``OBJECT IDLETIME``
kept growing: a read resets it; the snapshots run with ``CLIENT NO-TOUCH``).

The attacks run twice: on a fresh store, whose first command (readying the index) is
refused, and on a store whose index an administrator readied, so that each method's
own commands reach the server and are refused there.

Engines differ in *how* they refuse FT.* (``bench/probe_ft_acl.py``): RediSearch 2.10
checks the index name against the key patterns, valkey-search 1.2 the index's key
prefixes; both refuse every FT.* call on B's index here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any
from urllib.parse import urlparse, urlunparse

import numpy as np
import pytest
import valkey.asyncio as avalkey
import valkey.exceptions as vexc

from betterdb_memory import AgentMemory, Fact, HashingEmbedder, MemoryStore, PermissionDeniedError, acl_rules
from tests.tenant_attacks import (
    CALL_TIMEOUT,
    Extractor,
    Summarizer,
    attack_store,
    export_tampered,
    public_coroutines,
    raw_refused,
    refused,
    store_attacks,
)

pytestmark = [pytest.mark.integration]

REGISTRY = "__betterdb:caches"
PROTOCOL = "__betterdb:protocol"
HEARTBEAT = "__betterdb:heartbeat:"


def _user_url(url: str, user: str, password: str) -> str:
    parts = urlparse(url)
    return urlunparse(parts._replace(netloc=f"{user}:{password}@{parts.hostname}:{parts.port}"))


def _store(client: Any, name: str, **options: Any) -> MemoryStore:
    options.setdefault("discovery", True)
    return MemoryStore(
        client=client,
        name=name,
        embedder=HashingEmbedder(),
        fact_extractor=Extractor(),
        summarizer=Summarizer(),
        max_session_turns=2,
        summarize_batch=2,
        **options,
    )


class Tenants:
    """Two tenants' users, clients and store names, and what B stored."""

    def __init__(
        self, url: str, a: str, b: str, rules: Callable[[str], Sequence[str]], *, discovery: bool = True
    ) -> None:
        self.url, self.a, self.b, self.rules = url, a, b, rules
        self.discovery = discovery  # the tenants' stores register with Monitor (their rules allow it)
        self.user_a, self.user_b = f"u{a}", f"u{b}"
        self.b_ids: list[str] = []
        self.b_own = f"own-{b}"
        self.b_export: list[str] = []
        self.b_marker: bytes | None = None  # B's Monitor marker as B wrote it
        self.b_fields: list[bytes] = []  # the registry fields under B's name, as B left them

    def client(self, tenant: str) -> avalkey.Valkey:
        user = self.user_a if tenant == "a" else self.user_b
        return avalkey.Valkey.from_url(_user_url(self.url, user, "tenant-pw"))


async def _provision(admin: avalkey.Valkey, t: Tenants) -> None:
    """The operator: one ACL user per tenant, each tenant's index created once as admin."""
    for user, name in ((t.user_a, t.a), (t.user_b, t.b)):
        await admin.execute_command("ACL", "SETUSER", user, "reset", "on", ">tenant-pw", *t.rules(name))
        store = _store(admin, name, discovery=False, config_refresh=False)
        try:
            await store.ensure_index()
        finally:
            await store.close()


async def _populate_b(admin: avalkey.Valkey, t: Tenants) -> None:
    """Tenant B, with its own credentials: memories, an id'd memory with history, L1, facts, stats."""
    await admin.hset(f"{t.b}:__mem_config", "recall.threshold", "1.5")  # Monitor's live config
    client = t.client("b")
    store = _store(client, t.b, discovery=t.discovery)
    try:
        rng = np.random.default_rng(7)
        for i in range(4):
            v = rng.standard_normal(384)
            t.b_ids.append(
                await store.remember(
                    f"b secret {i} about tea",
                    vector=[float(x) for x in v / np.linalg.norm(v)],
                    agent_id="ag",
                    thread_id="th",
                    tags=["private"],
                )
            )
        await store.remember("b own v1", id=t.b_own, namespace="ns")
        await store.remember("b own v2", id=t.b_own, namespace="ns")
        for i in range(3):
            await store.store_turn("s1", f"question {i}", f"answer {i}", agent_id="ag")
        await store.summarize_session("s1", agent_id="ag")
        await store.remember("lives in Paris", agent_id="c")
        await store.consolidate(
            "facts", extract_facts=lambda items: [Fact("city", "lives in Paris", "2020-01-01")], agent_id="c"
        )
        await store.remember("moved to Berlin", agent_id="c")
        await store.consolidate(
            "facts", extract_facts=lambda items: [Fact("city", "lives in Berlin", "2021-01-01")], agent_id="c"
        )
        assert await store.recall("tea", k=2, threshold=2.0, agent_id="ag")
        await store.stats()
        registered = await admin.hget(REGISTRY, f"{t.b}:mem")
        assert (registered is not None) == t.discovery  # B is registered with Monitor, if it asked
    finally:
        await store.close()
        await client.aclose()


async def _keys_of(admin: avalkey.Valkey, name: str) -> list[bytes]:
    out = [k async for k in admin.scan_iter(match=f"{name}:*", count=1000)]
    return sorted(out)


async def _snapshot(admin: avalkey.Valkey, t: Tenants) -> dict[str, Any]:
    """Everything of B on the server: every key's type, value (DUMP) and TTL-or-not, the index size,
    its registry marker and heartbeat. ``admin`` runs with CLIENT NO-TOUCH (reads leave idle times)."""
    keys = await _keys_of(admin, t.b)
    state: dict[str, Any] = {}
    for key in keys:
        state[key.decode()] = (
            await admin.type(key),
            await admin.dump(key),
            await admin.pttl(key) > 0,
        )
    info = await admin.execute_command("FT.INFO", f"{t.b}:mem:idx")
    flat = dict(zip(info[::2], info[1::2], strict=False)) if isinstance(info, list) else info
    state["<index num_docs>"] = flat.get(b"num_docs")
    state["<registry>"] = await admin.hget(REGISTRY, f"{t.b}:mem")
    state["<registry fields>"] = sorted(f for f in await admin.hkeys(REGISTRY) if f.startswith(t.b.encode()))
    state["<heartbeat>"] = [k async for k in admin.scan_iter(match=f"{HEARTBEAT}{t.b}*")]
    return state


async def _idle_times(admin: avalkey.Valkey, keys: Sequence[str]) -> dict[str, int]:
    return {k: int(await admin.object("idletime", k)) for k in keys}


def _attacks(t: Tenants) -> dict[str, Any]:
    """One call per public coroutine method of MemoryStore (and export, import), aimed at B's data."""
    return store_attacks(t.b_ids, t.b_own, t.b_export)


async def _export_tampered(admin: avalkey.Valkey, t: Tenants) -> list[str]:
    store = _store(admin, t.b, discovery=False, config_refresh=False)
    try:
        return await export_tampered(store)
    finally:
        await store.close()


def test_every_public_method_has_an_attack() -> None:
    """A new coroutine method of MemoryStore must be added to the attacks (and so be checked)."""
    t = Tenants("valkey://x:1", "ta", "tb", lambda n: ())
    t.b_ids = ["x"]
    attacks = set(_attacks(t)) - {"export_store", "import_store"}
    assert public_coroutines() == attacks, (
        f"missing: {public_coroutines() - attacks}, stale: {attacks - public_coroutines()}"
    )


async def _raw_attacks(t: Tenants) -> dict[str, str]:
    """Tenant A's own connection, commands written by hand against B's keys and index."""
    a = t.client("a")
    b, mid = t.b, t.b_ids[0]
    try:
        calls: list[tuple[str, ...]] = [
            ("FT.SEARCH", f"{b}:mem:idx", "@tags:{private}", "DIALECT", "2"),
            (
                "FT.SEARCH",
                f"{b}:mem:idx",
                "*=>[KNN 3 @vector $v]",
                "PARAMS",
                "2",
                "v",
                "x" * 1536,
                "DIALECT",
                "2",
            ),
            ("FT.INFO", f"{b}:mem:idx"),
            (
                "FT.CREATE",
                f"{t.a}:mem:evil",
                "ON",
                "HASH",
                "PREFIX",
                "1",
                f"{b}:mem:",
                "SCHEMA",
                "content",
                "TAG",
            ),
            (
                "FT.CREATE",
                f"{b}:mem:idx2",
                "ON",
                "HASH",
                "PREFIX",
                "1",
                f"{t.a}:mem:",
                "SCHEMA",
                "content",
                "TAG",
            ),
            ("FT.DROPINDEX", f"{b}:mem:idx"),
            ("FT.AGGREGATE", f"{b}:mem:idx", "*"),
            ("FT._LIST",),
            ("HGETALL", f"{b}:mem:{mid}"),
            ("HSET", f"{b}:mem:{mid}", "content", "planted"),
            ("HGETALL", f"{b}:__mem_config"),
            ("HSET", f"{b}:__mem_config", "recall.threshold", "0"),
            ("HGETALL", f"{b}:__mem_stats"),
            ("HGETALL", f"{b}:__mem_meta"),
            ("LRANGE", f"{b}:l1:*", "0", "-1"),
            ("GET", f"{HEARTBEAT}{b}:mem"),
            ("SET", f"{HEARTBEAT}{b}:mem", "alive"),
            ("HGETALL", REGISTRY),
            ("HKEYS", REGISTRY),
            ("HSCAN", REGISTRY, "0"),
            ("HDEL", REGISTRY, f"{b}:mem"),
            ("DEL", REGISTRY),
            ("DEL", PROTOCOL),
            ("SCAN", "0", "MATCH", f"{b}:*"),
            ("KEYS", f"{b}:*"),
        ]
        l1 = [k async for k in _admin_scan(t.url, f"{b}:l1:*")]
        calls += [("LRANGE", k, "0", "-1") for k in l1[:1]] + [("DEL", k) for k in l1[:1]]
        refusals: dict[str, str] = {}
        for cmd in calls:
            # RediSearch / valkey-search refuse commands they lack (FT._LIST, FT.AGGREGATE): a refusal.
            await raw_refused(" ".join(cmd[:2]), a.execute_command(*cmd), refusals, unknown_command=True)
        return refusals
    finally:
        await a.aclose()


async def _admin_scan(url: str, pattern: str) -> AsyncIterator[str]:
    c = avalkey.Valkey.from_url(url, decode_responses=True)
    try:
        await c.execute_command("CLIENT", "NO-TOUCH", "on")
        async for k in c.scan_iter(match=pattern, count=1000):
            yield k
    finally:
        await c.aclose()


@pytest.fixture
async def admin(valkey_url: str) -> AsyncIterator[avalkey.Valkey]:
    c = avalkey.Valkey.from_url(valkey_url)
    await c.execute_command("CLIENT", "NO-TOUCH", "on")  # the snapshots must not reset idle times
    yield c
    await c.aclose()


async def _cleanup(admin: avalkey.Valkey, t: Tenants) -> None:
    for user in (t.user_a, t.user_b):
        await admin.execute_command("ACL", "DELUSER", user)
    for name in (t.a, t.b):
        for index in (f"{name}:mem:idx", f"{name}:mem:evil", f"{name}:mem:idx2"):
            with contextlib.suppress(vexc.ResponseError):
                await admin.execute_command("FT.DROPINDEX", index)
        for key in await _keys_of(admin, name):
            await admin.delete(key)
        await admin.hdel(REGISTRY, f"{name}:mem", f"{name}:mem:agent_memory", name)


async def _prime(store: MemoryStore, admin: avalkey.Valkey) -> None:
    """Ready ``store``'s index as the administrator (the index exists and fits), then hand the
    store back its own (tenant A's) connection: each method's own commands then reach the server."""
    admin_store = _store(admin, store.name, discovery=False, config_refresh=False)
    # The index manager and what it ensures beside the main index (the history index).
    parts: list[Any] = [store.index, store.index.history]
    own = [part.backend for part in parts]
    for part in parts:
        part.backend = admin_store.backend
    try:
        await store.index.ensure_ready()
    finally:
        for part, backend in zip(parts, own, strict=True):
            part.backend = backend
        await admin_store.close()


@pytest.fixture
async def tenants(
    request: pytest.FixtureRequest, admin: avalkey.Valkey, valkey_url: str, unique_name: str
) -> AsyncIterator[Tenants]:
    """Tenants A and B provisioned, B's store populated; ``discovery`` (param, default True): their
    stores register with Monitor and their rules allow it, or neither."""
    discovery = bool(getattr(request, "param", True))
    t = Tenants(
        valkey_url,
        f"{unique_name}a",
        f"{unique_name}b",
        lambda n: acl_rules(n, create_index=False, discovery=discovery),
        discovery=discovery,
    )
    try:
        await _provision(admin, t)
        await _populate_b(admin, t)
        t.b_export = await _export_tampered(admin, t)
        t.b_marker = await admin.hget(REGISTRY, f"{t.b}:mem")
        t.b_fields = (await _snapshot(admin, t))["<registry fields>"]
        yield t
    finally:
        await _cleanup(admin, t)


async def _check_isolation(admin: avalkey.Valkey, t: Tenants) -> int:
    """Tenant A attacks B through every public call; AssertionError at the first one not refused,
    or when B changed or was read. Returns the number of refused attempts."""
    a_client = t.client("a")
    fresh = _store(a_client, t.b)
    primed = _store(a_client, t.b)
    # Both tiers' Monitor registration on: neither may write a marker under B's name.
    facade = AgentMemory(client=a_client, name=t.b, embedder=HashingEmbedder(), discovery=True)
    try:
        # Tenant A's own store works under its rules (the rules are enough, not just restrictive).
        own = _store(a_client, t.a, discovery=t.discovery)
        try:
            assert await own.remember("a's own memory", agent_id="ag")
            assert await own.count(agent_id="ag") == 1
        finally:
            await own.close()
        await _prime(primed, admin)  # before the baseline: priming reads B's meta and index as admin
        await asyncio.sleep(0.2)  # let the primed store's start-up work (refused) settle

        before = await _snapshot(admin, t)
        b_keys = [k for k in before if not k.startswith("<")]
        assert len(b_keys) >= 15 and (before["<registry>"] is not None) == t.discovery
        await asyncio.sleep(3.0)  # idle times now >= 3 s; a read during the attacks would reset one
        started = time.monotonic()

        refusals = await attack_store(fresh, _attacks(t), "fresh")
        refusals |= await attack_store(primed, _attacks(t), "primed")
        for label, call in {
            "facade initialize": facade.initialize,
            "facade erase": lambda: facade.erase(agent_id="ag", thread_id="s1"),
            "facade store_turn": lambda: facade.memory.store_turn("s1", "q", "a", agent_id="ag"),
            "facade get_recent_turns": lambda: facade.memory.get_recent_turns("s1", agent_id="ag"),
            "facade retrieve_context": lambda: facade.memory.retrieve_context("s1", "tea", token_budget=500),
        }.items():
            await refused(label, call(), refusals)
        refusals |= await _raw_attacks(t)

        waited = time.monotonic() - started + 3.0
        idle = await _idle_times(admin, b_keys)
        after = await _snapshot(admin, t)
    finally:
        await facade.close()
        await fresh.close()
        await primed.close()
        await a_client.aclose()

    assert after == before, "tenant A changed tenant B's data"
    # Priming (before the baseline) started the primed store's Monitor registration: it too
    # must have left B's marker as B wrote it.
    assert after["<registry>"] == t.b_marker, "tenant A overwrote tenant B's Monitor marker"
    assert after["<registry fields>"] == t.b_fields, "tenant A registered Monitor markers under B's name"
    # Not read either: every key of B sat untouched through the attacks (idle time in whole
    # seconds, so some slack).
    touched = {k: s for k, s in idle.items() if s < waited - 1.5}
    assert not touched, f"tenant A's attacks read B's keys {touched} (attacks lasted {waited:.1f}s)"
    for label, text in refusals.items():
        print(f"  {label}: {text[:150]}")
    return len(refusals)


@pytest.mark.parametrize("tenants", [True, False], ids=["discovery", "no-discovery"], indirect=True)
async def test_tenant_a_reaches_nothing_of_tenant_b(admin: avalkey.Valkey, tenants: Tenants) -> None:
    """Every public call of a store (and the facade, export, import, raw FT.* and key commands) that
    tenant A points at tenant B's store is refused with PermissionDeniedError; B is unchanged and unread."""
    refused = await _check_isolation(admin, tenants)
    print(f"\n[tenants] {refused} attempts by tenant A refused; tenant B unchanged and unread")
    denied = await admin.execute_command("ACL", "LOG")
    assert not [e for e in denied if tenants.user_b.encode() in e], "tenant B's own work was refused"


@pytest.mark.parametrize("leak", ["l1", "__mem_config"])
async def test_a_wider_acl_is_caught(admin: avalkey.Valkey, tenants: Tenants, leak: str) -> None:
    """The check can fail: give tenant A one more pattern, covering part of B, and it does."""
    t = tenants
    await admin.execute_command("ACL", "SETUSER", t.user_a, f"~{t.b}:{leak}*")
    with pytest.raises(AssertionError, match=r"NOT refused|changed|read B's keys") as caught:
        await _check_isolation(admin, t)
    print(f"\n[tenants] with ~{t.b}:{leak}* granted to A: {str(caught.value)[:300]}")


async def test_what_a_tenant_sees_of_another_in_the_monitor_registry(
    admin: avalkey.Valkey, tenants: Tenants
) -> None:
    """With discovery on, the registry is one shared hash: a tenant can read (HGET) and overwrite
    (HSET) the marker of a store whose name it knows, never list, scan or delete the registry. A
    marker holds names and markers only: no memory, config or statistic."""
    t = tenants
    a = t.client("a")
    try:
        raw = await a.hget(REGISTRY, f"{t.b}:mem")
        assert raw is not None
        marker = json.loads(raw)
        assert set(marker) == {
            "type",
            "prefix",
            "version",
            "protocol_version",
            "capabilities",
            "stats_key",
            "index_name",
            "started_at",
            "pid",
            "hostname",
        }
        assert marker["prefix"] == t.b and marker["index_name"] == f"{t.b}:mem:idx"
        assert await a.hexists(REGISTRY, f"{t.b}:mem")
        for cmd in (("HGETALL", REGISTRY), ("HKEYS", REGISTRY), ("HVALS", REGISTRY), ("HLEN", REGISTRY)):
            with pytest.raises(vexc.NoPermissionError):
                await a.execute_command(*cmd)
        for cmd in (("HSCAN", REGISTRY, "0"), ("HDEL", REGISTRY, f"{t.b}:mem"), ("DEL", REGISTRY)):
            with pytest.raises(vexc.NoPermissionError):
                await a.execute_command(*cmd)
        # The limit of a shared hash: the marker can be overwritten (Monitor then shows what A wrote;
        # B's own heartbeat re-registers it only when the field is gone).
        assert await a.hset(REGISTRY, f"{t.b}:mem", raw) == 0
    finally:
        await a.aclose()


async def test_the_facade_runs_as_a_tenant_with_its_cache_tiers(
    admin: avalkey.Valkey, valkey_url: str, unique_name: str
) -> None:
    """``acl_rules(name, agent_cache=True, create_index=False)`` is enough for AgentMemory (memory
    tier, llm / tool / session tiers, both tiers' Monitor discovery) once the index exists."""
    from betterdb_memory import ToolPolicy

    user = f"f{unique_name}"
    rules = acl_rules(unique_name, agent_cache=True, create_index=False)
    await admin.execute_command("ACL", "SETUSER", user, "reset", "on", ">tenant-pw", *rules)
    store = _store(admin, unique_name, discovery=False, config_refresh=False)
    try:
        await store.ensure_index()
    finally:
        await store.close()
    client = avalkey.Valkey.from_url(_user_url(valkey_url, user, "tenant-pw"))
    agent = AgentMemory(client=client, name=unique_name, embedder=HashingEmbedder(), discovery=True)
    try:
        await admin.script_flush()  # the user loads every script itself
        await agent.initialize()
        mid = await agent.memory.remember("the user likes tea", thread_id="t", agent_id="a")
        await agent.memory.store_turn("t", "hi", "hello", agent_id="a")
        assert await agent.memory.get_recent_turns("t", agent_id="a")
        request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        await agent.llm.store(request, "hello")
        assert (await agent.llm.check(request)).hit
        await agent.tool.set_policy("weather", ToolPolicy(ttl=5))
        await agent.tool.store("weather", {"city": "Oslo"}, "-3")
        assert await agent.tool.invalidate_by_tool("weather") == 1
        await agent.session.set("t", "step", "1")
        assert await agent.session.get("t", "step") == "1"
        await agent.erase(agent_id="a", thread_id="t")
        assert await agent.memory.get(mid) is None
    finally:
        await agent.close()
        await client.aclose()
    try:
        log = await admin.execute_command("ACL", "LOG")
        denied = [e for e in log if user.encode() in e]
        assert denied == [], f"the facade needed more than acl_rules(agent_cache=True): {denied}"
    finally:
        await admin.execute_command("ACL", "DELUSER", user)
        with contextlib.suppress(vexc.ResponseError):
            await admin.execute_command("FT.DROPINDEX", f"{unique_name}:mem:idx")
        async for key in admin.scan_iter(match=f"{unique_name}:*"):
            await admin.delete(key)
        await admin.hdel(REGISTRY, f"{unique_name}:mem", unique_name)


async def test_an_index_under_the_store_name_over_other_keys_is_refused(
    admin: avalkey.Valkey, unique_name: str
) -> None:
    """A tenant allowed FT.CREATE on valkey-search can take the index name of a store not created
    yet, over its own keys: the store then refuses that index instead of serving the other
    tenant's documents as its own (``configuration.foreign_index``)."""
    from betterdb_memory import ConfigurationError
    from betterdb_memory.core.query import IndexSpec, create_index_args

    victim, squatter = f"{unique_name}v", f"{unique_name}s"
    probe = _store(admin, squatter, discovery=False, config_refresh=False)
    caps = await probe.backend.probe()
    await probe.close()
    # The squatter's index: this library's own schema, under the victim's index name.
    spec = IndexSpec(index=f"{victim}:mem:idx", prefix=f"{squatter}:mem:", dimensions=384)
    await admin.execute_command(*create_index_args(spec, caps))
    store = _store(admin, victim, discovery=False, config_refresh=False)
    try:
        with pytest.raises(ConfigurationError) as caught:
            await store.remember("my first memory")
        assert caught.value.code == "configuration.foreign_index"
        assert caught.value.details["prefixes"] == [f"{squatter}:mem:"]
    finally:
        await store.close()
        await admin.execute_command("FT.DROPINDEX", f"{victim}:mem:idx")
        async for key in admin.scan_iter(match=f"{victim}:*"):
            await admin.delete(key)


async def test_the_facades_cache_tiers_register_only_a_name_the_user_owns(
    admin: avalkey.Valkey, tenants: Tenants
) -> None:
    """An AgentMemory built with tenant A's user and tenant B's name writes no cache-tier marker
    ``<B>`` into the shared registry (HSET there is allowed on any field): its cache tiers register
    only once the memory index has proved the name, in ``initialize()`` or at the memory tier's first
    operation, and A's user cannot ready B's index. betterdb-agent-cache 0.12 alone registers from
    its constructor (facade.py builds it with discovery off). The same facade on A's own name
    registers, so the check can fail."""
    t = tenants
    a_client = t.client("a")
    facade = AgentMemory(client=a_client, name=t.b, embedder=HashingEmbedder(), discovery=True)
    own = AgentMemory(client=a_client, name=t.a, embedder=HashingEmbedder(), discovery=True)
    try:
        with pytest.raises(PermissionDeniedError):
            await asyncio.wait_for(facade.memory.remember("mine now", agent_id="ag"), CALL_TIMEOUT)
        with pytest.raises(PermissionDeniedError):
            await asyncio.wait_for(facade.initialize(), CALL_TIMEOUT)
        await asyncio.wait_for(facade.cache.ensure_discovery_ready(), CALL_TIMEOUT)
        await asyncio.wait_for(own.initialize(), CALL_TIMEOUT)
        owned = await admin.hget(REGISTRY, t.a)
    finally:
        await facade.close()
        await own.close()
        await a_client.aclose()
    assert await admin.hget(REGISTRY, t.b) is None, "tenant A's facade wrote a cache marker under B's name"
    assert owned is not None and json.loads(owned)["type"] == "agent_cache", "the control did not register"
