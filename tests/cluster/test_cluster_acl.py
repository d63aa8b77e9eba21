"""Tenants on the valkey-search cluster: tenant A's user reaches nothing of tenant B's store.

The standalone check (tests/integration/test_tenants.py) and this cluster twin make the same
attempts (tests/tenant_attacks.py: every public call of a store, export and import), judged
alike; this one for what a cluster adds: ACLs are per node
(``ACL SETUSER`` runs on every node here: a user missing on one node is refused there),
a search sent to one node is fanned out to every shard by valkey-search's coordinator,
and the store's multi-key scripts run on the node of their keys' slot.

Each tenant's user has ``acl_rules(name, create_index=False)`` plus what a cluster client
needs to start (``CLUSTER_RULES``: the slot map and the commands' key positions;
``acl_rules`` does not grant them, and without them the cluster client cannot start,
checked below). An administrator creates both
indexes. B stores memories (spread over the shards), L1 turns and facts with B's own
credentials; A's own store answers a fanned-out recall with all of A's memories (the
coordinator serves a tenant user). Then A, under B's store name, makes every call
and runs raw FT.SEARCH / FT.INFO / FT.AGGREGATE on B's index on *every* node, and the
store's scripts (EVALSHA) over B's keys: every attempt is refused with a permission error
(``PermissionDeniedError`` ``server.no_permission`` for library calls). Afterwards B is
as it was: every key's value (``DUMP``) and TTL-or-not, the index size on every shard,
and no key of B read (``OBJECT IDLETIME`` kept growing; admin reads use ``CLIENT NO-TOUCH``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
import valkey.asyncio as avalkey
import valkey.exceptions as vexc
from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory import Fact, HashingEmbedder, MemoryStore, acl_rules
from betterdb_memory.backend import scripts_reinforce
from betterdb_memory.backend.dialect import keyless_route
from tests.tenant_attacks import (
    CALL_TIMEOUT,
    SILENT_WHEN_READY,
    Extractor,
    Summarizer,
    attack_store,
    export_tampered,
    raw_refused,
    store_attacks,
)

pytestmark = [pytest.mark.integration]

PASSWORD = "tenant-pw"
#: What a cluster client needs beyond ``acl_rules``: the slot map (CLUSTER SLOTS) and the
#: commands' key positions (COMMAND), which valkey-py's cluster client reads when it starts.
CLUSTER_RULES = ("+cluster|slots", "+command")


class Tenants:
    def __init__(self, cluster: Any, a: str, b: str) -> None:
        self.cluster, self.a, self.b = cluster, a, b
        self.user = {a: f"u{a}", b: f"u{b}"}
        self.b_ids: list[str] = []
        self.b_fact: str = ""
        self.b_export: list[str] = []
        self.clients: list[ValkeyCluster] = []

    def client(self, name: str, **options: Any) -> ValkeyCluster:
        c = ValkeyCluster(
            host="127.0.0.1", port=self.cluster.base, username=self.user[name], password=PASSWORD, **options
        )
        self.clients.append(c)
        return c

    def nodes(self) -> list[avalkey.Valkey]:
        return [self.cluster.node_client(p) for p in self.cluster.ports]


def _store(client: Any, name: str) -> MemoryStore:
    return MemoryStore(
        client=client, name=name, embedder=HashingEmbedder(), discovery=False, config_refresh=False,
        summarize_batch=0, fact_extractor=Extractor(), summarizer=Summarizer(),
    )  # fmt: skip


async def _each_node(t: Tenants, *args: Any) -> list[Any]:
    out = []
    for node in t.nodes():
        try:
            out.append(await node.execute_command(*args))
        finally:
            await node.aclose()
    return out


@pytest.fixture
async def tenants(
    cluster_client: ValkeyCluster, valkey_cluster: Any, unique_name: str
) -> AsyncIterator[Tenants]:
    t = Tenants(valkey_cluster, f"{unique_name}a", f"{unique_name}b")
    for name in (t.a, t.b):  # ACLs are per node: the user goes to every node
        rules = acl_rules(name, create_index=False, cluster=True)
        assert set(CLUSTER_RULES) <= set(rules)  # acl_rules(cluster=True) grants the start-up
        await _each_node(t, "ACL", "SETUSER", t.user[name], "reset", "on", f">{PASSWORD}", *rules)
        admin_store = _store(cluster_client, name)
        try:
            await admin_store.ensure_index()
        finally:
            await admin_store.close()
    try:
        yield t
    finally:
        for c in t.clients:
            await c.aclose()
        for name in (t.a, t.b):
            await _each_node(t, "ACL", "DELUSER", t.user[name])
            for index in (f"{name}:mem:idx", f"{name}:hist:idx"):
                with contextlib.suppress(vexc.ResponseError):
                    await cluster_client.execute_command(
                        "FT.DROPINDEX", index, **keyless_route(cluster_client)
                    )
            for port in t.cluster.ports:
                direct = t.cluster.node_client(port)
                try:
                    for key in await _scan(direct, f"{name}:*"):
                        await direct.delete(key)
                finally:
                    await direct.aclose()


async def _scan(direct: avalkey.Valkey, pattern: str) -> list[bytes]:
    """One node's keys matching ``pattern`` (a plain client to that node)."""
    return [key async for key in direct.scan_iter(match=pattern, count=1000)]


def _unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(384)
    return [float(x) for x in v / np.linalg.norm(v)]


async def _populate(t: Tenants, name: str, n: int) -> list[str]:
    store = _store(t.client(name), name)
    try:
        ids = [
            await store.remember(f"{name} secret {i}", vector=_unit(i), agent_id="ag", thread_id=f"th{i}")
            for i in range(n)
        ]
        for i in range(2):
            await store.store_turn("s1", f"question {i}", f"answer {i}", agent_id="ag")
        await store.remember("lives in Paris", agent_id="c")
        res = await store.consolidate(
            "facts", extract_facts=lambda items: [Fact("city", "lives in Paris", "2020-01-01")], agent_id="c"
        )
        t.b_fact = res.created[0]
        return ids
    finally:
        await store.close()


async def _snapshot(t: Tenants, client: ValkeyCluster) -> dict[str, Any]:
    """B's keys (value, TTL-or-not) from every primary, and its index size on every shard."""
    state: dict[str, Any] = {}
    for node in client.get_primaries():
        direct = t.cluster.node_client(node.port)
        try:
            await direct.execute_command("CLIENT", "NO-TOUCH", "on")
            for key in await _scan(direct, f"{t.b}:*"):
                state[key.decode()] = (await direct.dump(key), await direct.pttl(key) > 0)
            info = await direct.execute_command("FT.INFO", f"{t.b}:mem:idx", "LOCAL")
            flat = dict(zip(info[::2], info[1::2], strict=False))
            state[f"<num_docs on {node.name}>"] = flat.get(b"num_docs")
        finally:
            await direct.aclose()
    return state


async def _idle(t: Tenants, client: ValkeyCluster, keys: list[str]) -> dict[str, int]:
    out = {}
    for key in keys:
        direct = t.cluster.node_client(client.get_node_from_key(key).port)
        try:
            await direct.execute_command("CLIENT", "NO-TOUCH", "on")
            out[key] = int(await direct.object("idletime", key))
        finally:
            await direct.aclose()
    return out


async def _raw(t: Tenants, refusals: dict[str, str]) -> None:
    """A's own connection to each node: FT.* on B's index, and the store's scripts over B's keys."""
    b, mid = t.b, t.b_ids[0]
    doc, acc = f"{b}:mem:{mid}", f"{b}:acc:{{{b}:mem:{mid}}}"
    knn, vec = "*=>[KNN 3 @vector $v]", np.asarray(_unit(0), dtype=np.float32).tobytes()
    per_node: list[tuple[Any, ...]] = [
        ("FT.SEARCH", f"{b}:mem:idx", knn, "PARAMS", "2", "v", vec, "DIALECT", "2"),
        ("FT.SEARCH", f"{b}:mem:idx", "@tags:{private}", "LOCALONLY", "DIALECT", "2"),
        ("FT.INFO", f"{b}:mem:idx"),
        ("FT.AGGREGATE", f"{b}:mem:idx", "*"),
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
        ("FT.DROPINDEX", f"{b}:mem:idx"),
    ]
    for port in t.cluster.ports:
        node = avalkey.Valkey(host="127.0.0.1", port=port, username=t.user[t.a], password=PASSWORD)
        try:
            for i, cmd in enumerate(per_node):
                await raw_refused(f"{port} #{i} {cmd[0]}", node.execute_command(*cmd), refusals)
        finally:
            await node.aclose()
    a = t.client(t.a)
    fetch = scripts_reinforce.ACCESS.call([doc, acc], ["0", "0", "1e9", "0", "content"])
    calls: list[tuple[Any, ...]] = [
        fetch.command(),  # get()'s script
        ("HGETALL", doc),
        ("HSET", doc, "content", "planted"),
    ]
    # A script of A's own (A may SCRIPT LOAD): it declares a key of A's in the slot of B's memory
    # (hash tag), so it runs on B's node, and reads B's memory inside: ACLs apply inside scripts.
    sha = await a.script_load("return redis.call('HGETALL', ARGV[1])")
    calls.append(("EVALSHA", sha, 1, f"{t.a}:mem:x{{{doc}}}", doc))
    for i, cmd in enumerate(calls):
        await raw_refused(f"cluster #{i} {cmd[0]}", a.execute_command(*cmd), refusals)


async def test_a_tenant_user_without_cluster_slots_cannot_start_a_cluster_client(tenants: Tenants) -> None:
    """``acl_rules`` alone is not enough on a cluster: the client learns the slot map with CLUSTER SLOTS
    (and the key positions with COMMAND)."""
    t = tenants
    user = f"{t.user[t.a]}x"
    await _each_node(
        t, "ACL", "SETUSER", user, "reset", "on", f">{PASSWORD}", *acl_rules(t.a, create_index=False)
    )
    try:
        client = ValkeyCluster(host="127.0.0.1", port=t.cluster.base, username=user, password=PASSWORD)
        # valkey-py words the refused CLUSTER SLOTS as "Cluster mode is not enabled on this node".
        with pytest.raises(vexc.ValkeyClusterException, match="Cluster mode is not enabled"):
            await asyncio.wait_for(client.initialize(), CALL_TIMEOUT)
        with contextlib.suppress(Exception):
            await client.aclose()
    finally:
        await _each_node(t, "ACL", "DELUSER", user)


async def test_tenant_a_reaches_nothing_of_tenant_b_on_a_cluster(
    tenants: Tenants, cluster_client: ValkeyCluster
) -> None:
    t = tenants
    t.b_ids = await _populate(t, t.b, 9)
    own = await _populate(t, t.a, 9)
    # A tenant's user is served by the coordinator's fan-out: A's recall finds A's memories on every shard.
    a_store = _store(t.client(t.a), t.a)
    try:
        hits = await a_store.recall_by_vector(_unit(0), k=20, threshold=2.0, agent_id="ag")
        assert {h.item.id for h in hits} == set(own)
        spread = {cluster_client.get_node_from_key(a_store.keys.doc(i)).name for i in own}
        assert len(spread) > 1, ([a_store.keys.doc(i) for i in own], spread)
    finally:
        await a_store.close()
    admin_b = _store(cluster_client, t.b)
    try:
        t.b_export = await export_tampered(admin_b)  # what A would import over B's store
    finally:
        await admin_b.close()
    fresh, ready = _store(t.client(t.a), t.b), _store(t.client(t.a), t.b)
    # The index readied by the admin: each call's own commands then reach the server. Done
    # before the snapshot: the admin's readiness check reads B's index metadata.
    admin_backend = _store(cluster_client, t.b).backend
    ready.index.backend, own_backend = admin_backend, ready.index.backend
    ready.index.history.backend = admin_backend
    await ready.index.ensure_ready()
    ready.index.backend = ready.index.history.backend = own_backend
    before = await _snapshot(t, cluster_client)
    b_keys = [k for k in before if not k.startswith("<")]
    await asyncio.sleep(2.5)  # OBJECT IDLETIME counts seconds: let every key of B age before the attacks
    idle_before = await _idle(t, cluster_client, b_keys)
    assert min(idle_before.values()) >= 1, "B's keys must have aged for the 'unread' check to mean anything"
    attacks = store_attacks(t.b_ids, t.b_ids[0], t.b_export)
    refusals: dict[str, str] = {}
    for label, store in (("fresh", fresh), ("ready", ready)):
        try:
            refusals |= await attack_store(store, attacks, label)
        finally:
            await store.close()
    await _raw(t, refusals)
    after = await _snapshot(t, cluster_client)
    assert after == before, "tenant B's keys or index changed"
    idle_after = await _idle(t, cluster_client, b_keys)
    read = [k for k in b_keys if idle_after[k] < idle_before[k]]
    assert not read, f"tenant A's attempts read B's keys: {read}"
    print(f"cluster tenants: {len(refusals)} attempts refused:")
    for label, text in refusals.items():
        print(f"  {label}: {text[:150]}")
    assert len(refusals) == 2 * len(attacks) - len(SILENT_WHEN_READY) + 6 * len(t.cluster.ports) + 4
    typed = [
        k for k, v in refusals.items() if k.startswith(("fresh", "ready")) and "server.no_permission" not in v
    ]
    assert not typed, f"library calls refused without server.no_permission: {typed}"
