"""What valkey-py's async ``ValkeyCluster`` does with the commands this library sends (valkey-search cluster).

These pin the client behaviour the library's cluster support is built on, on the real
3-primary cluster (coordinator on): how FT.* commands are routed, EVALSHA with keys,
SCRIPT LOAD, NOSCRIPT, and non-transactional pipelines. If valkey-py changes any of it,
a test here says which assumption broke.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest
import valkey.exceptions as vexc
from valkey.asyncio.cluster import ValkeyCluster
from valkey.exceptions import ValkeyClusterException

from betterdb_memory.backend.dialect import keyless_route, probe
from betterdb_memory.core.ft_info import parse_ft_info

from .conftest import Cluster

pytestmark = pytest.mark.integration


def _vec(x: float, y: float) -> bytes:
    return struct.pack("<2f", x, y)


async def _create(client: ValkeyCluster, name: str) -> None:
    await client.execute_command(
        "FT.CREATE", f"{name}:idx", "ON", "HASH", "PREFIX", "1", f"{name}:",
        "SCHEMA", "v", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM", "2", "DISTANCE_METRIC", "COSINE",
        "t", "TAG", "CASESENSITIVE",
        **keyless_route(client),
    )  # fmt: skip


async def _node_of(client: ValkeyCluster, key: str) -> str:
    return str(client.get_node_from_key(key).name)


async def test_ft_commands_need_target_nodes(cluster_client: ValkeyCluster, unique_name: str) -> None:
    """valkey-search declares no keys for FT.*: without target_nodes the async client refuses to send them."""
    with pytest.raises(ValkeyClusterException, match="No way to dispatch"):
        await cluster_client.execute_command("FT._LIST")
    with pytest.raises(ValkeyClusterException, match="No way to dispatch"):
        await cluster_client.execute_command("FT.INFO", f"{unique_name}:idx")
    assert keyless_route(cluster_client) == {"target_nodes": ValkeyCluster.DEFAULT_NODE}
    assert isinstance(await cluster_client.execute_command("FT._LIST", **keyless_route(cluster_client)), list)


async def test_ft_create_reaches_every_shard_and_search_fans_out(
    cluster_client: ValkeyCluster, valkey_cluster: Cluster, unique_name: str
) -> None:
    """FT.CREATE sent to one node exists on all three; a KNN query to any node sees documents of every shard."""
    await _create(cluster_client, unique_name)
    keys = [f"{unique_name}:{i}" for i in range(30)]
    for i, key in enumerate(keys):
        await cluster_client.hset(key, mapping={"v": _vec(1.0, i / 30), "t": "a"})
    assert len({await _node_of(cluster_client, k) for k in keys}) == 3  # spread over the shards
    for node in cluster_client.get_nodes():
        listed = await cluster_client.execute_command("FT._LIST", target_nodes=node)
        assert f"{unique_name}:idx".encode() in listed
    for node in cluster_client.get_nodes():
        got = await cluster_client.execute_command(
            "FT.SEARCH", f"{unique_name}:idx", "*=>[KNN 30 @v $q]", "PARAMS", "2", "q", _vec(1, 0),
            "NOCONTENT", "LIMIT", "0", "30", "DIALECT", "2", target_nodes=node,
        )  # fmt: skip
        assert got[0] == 30 and {x.decode() for x in got[1:]} == set(keys)
    await cluster_client.execute_command(
        "FT.DROPINDEX", f"{unique_name}:idx", **keyless_route(cluster_client)
    )


async def test_ft_info_counts_one_shard_unless_asked_for_primary(
    cluster_client: ValkeyCluster, unique_name: str
) -> None:
    """FT.INFO (LOCAL) counts the node's own documents; FT.INFO idx PRIMARY counts the cluster's."""
    await _create(cluster_client, unique_name)
    for i in range(24):
        await cluster_client.hset(f"{unique_name}:{i}", mapping={"v": _vec(1.0, i / 24), "t": "a"})
    local = [
        parse_ft_info(await cluster_client.execute_command("FT.INFO", f"{unique_name}:idx", target_nodes=n))
        for n in cluster_client.get_nodes()
    ]
    assert sum(i.num_docs for i in local) == 24 and all(i.num_docs < 24 for i in local)
    for _ in range(50):  # PRIMARY sums the shards' counts, which each reach 24 once indexed
        primary = parse_ft_info(
            await cluster_client.execute_command(
                "FT.INFO", f"{unique_name}:idx", "PRIMARY", **keyless_route(cluster_client)
            )
        )
        if primary.num_docs == 24:
            break
        await asyncio.sleep(0.05)
    assert primary.num_docs == 24
    await cluster_client.execute_command(
        "FT.DROPINDEX", f"{unique_name}:idx", **keyless_route(cluster_client)
    )


async def test_probe_identifies_valkey_search_through_a_cluster_client(cluster_client: ValkeyCluster) -> None:
    """MODULE LIST needs target_nodes on the async cluster client too; the probe passes it."""
    with pytest.raises(ValueError):  # valkey-py 6.2 fails to find MODULE LIST's keys
        await cluster_client.execute_command("MODULE", "LIST")
    caps = await probe(cluster_client)
    assert (caps.engine, caps.version) == ("valkey-search", (1, 2, 1))


async def test_evalsha_routes_by_its_keys_and_refuses_cross_slot(cluster_client: ValkeyCluster) -> None:
    """A script's keys pick its node; keys of two slots are refused before anything is sent."""
    script = cluster_client.register_script("return redis.call('INCR', KEYS[1])")
    assert await script(keys=["{s1}:counter"]) == 1  # first call: NOSCRIPT, SCRIPT LOAD, again
    with pytest.raises(ValkeyClusterException, match="same key slot"):
        await cluster_client.evalsha(script.sha, 2, "{s1}:a", "{s2}:b")


async def test_script_load_reaches_every_primary(cluster_client: ValkeyCluster) -> None:
    """SCRIPT LOAD goes to every primary (one sha back); SCRIPT EXISTS is true only if all have it."""
    body = "return 'loaded everywhere'"
    await cluster_client.script_flush()
    sha = await cluster_client.script_load(body)
    assert await cluster_client.script_exists(sha) == [True]
    for node in cluster_client.get_nodes():
        assert await cluster_client.execute_command("SCRIPT", "EXISTS", sha, target_nodes=node) == [1]


async def test_pipelines_are_non_transactional_and_refuse_script_objects(
    cluster_client: ValkeyCluster,
) -> None:
    """No MULTI/EXEC; ``pipe.evalsha`` is blocked; a plain EVALSHA command works; NOSCRIPT raises NoScriptError."""
    with pytest.raises(ValkeyClusterException, match="transaction"):
        cluster_client.pipeline(transaction=True)
    script = cluster_client.register_script("return redis.call('INCR', KEYS[1])")
    pipe = cluster_client.pipeline(transaction=False)
    with pytest.raises(ValkeyClusterException, match="blocked"):
        await script(keys=["{p}:n"], client=pipe)  # AsyncScript calls pipe.evalsha

    await cluster_client.script_flush()
    pipe = cluster_client.pipeline(transaction=False)
    pipe.execute_command("EVALSHA", script.sha, 1, "{p}:n")
    pipe.set("{q}:other", "1")  # another slot, another node: the pipeline splits by node
    with pytest.raises(vexc.NoScriptError):
        await pipe.execute()
    assert await cluster_client.get("{q}:other") == b"1"  # the rest of the pipeline ran

    await cluster_client.script_load(script.script)
    pipe = cluster_client.pipeline(transaction=False)
    pipe.execute_command("EVALSHA", script.sha, 1, "{p}:n")
    pipe.hset("{p}:h", "f", "v")
    pipe.pexpire("{p}:h", 60_000)  # several keys of one slot: one node, in order
    pipe.execute_command("EVALSHA", script.sha, 1, "{r}:n")
    replies: list[Any] = await pipe.execute()
    assert replies == [1, 1, True, 1]
