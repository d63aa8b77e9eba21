"""Discovery on a real server, read back exactly as BetterDB Monitor reads it.

Monitor: ``HGETALL __betterdb:caches``, JSON-parse each field, skip entries without
string ``type``/``prefix``; ``GET __betterdb:heartbeat:<field>`` for liveness;
``HGETALL <stats_key>`` for counters. FT.INFO is covered by the store's tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory._version import __version__
from betterdb_memory.errors import StoreConnectionError, ValidationError
from betterdb_memory.observability.discovery import (
    PROTOCOL_KEY,
    REGISTRY_KEY,
    DiscoveryMarker,
    StatsHash,
    fallback_registry_field,
    heartbeat_key,
    registry_field,
    stats_key,
)

pytestmark = pytest.mark.integration

KNOWN_KINDS = {"agent_cache", "semantic_cache", "agent_memory", "retrieval"}


def _s(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


async def monitor_discover(client: avalkey.Valkey) -> dict[str, dict[str, Any]]:
    """What Monitor's discovery reader would list: field -> instance view."""
    raw = await client.hgetall(REGISTRY_KEY)
    out: dict[str, dict[str, Any]] = {}
    for field, value in raw.items():
        try:
            marker = json.loads(_s(value))
        except ValueError:
            continue
        if not isinstance(marker, dict):
            continue
        if not isinstance(marker.get("prefix"), str) or not isinstance(marker.get("type"), str):
            continue
        if marker["type"] not in KNOWN_KINDS:
            continue
        heartbeat = await client.get(heartbeat_key(_s(field)))
        out[_s(field)] = {
            "kind": marker["type"],
            "name": marker["prefix"],
            "version": marker.get("version"),
            "capabilities": marker.get("capabilities", []),
            "statsKey": marker.get("stats_key"),
            "indexName": marker.get("index_name"),
            "startedAt": marker.get("started_at"),
            "hostname": marker.get("hostname"),
            "pid": marker.get("pid"),
            "protocol_version": marker.get("protocol_version"),
            "alive": heartbeat is not None,
            "lastHeartbeat": _s(heartbeat),
        }
    return out


@pytest.fixture(params=["client", "text_client"])
def any_client(request: pytest.FixtureRequest) -> avalkey.Valkey:
    """The same tests with bytes replies and with decode_responses=True."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


@pytest.fixture
async def cleanup(client: avalkey.Valkey, unique_name: str) -> AsyncIterator[None]:
    """Remove this test's registry fields from the shared registry (never FLUSHALL)."""
    yield
    fields = [registry_field(unique_name), fallback_registry_field(unique_name)]
    await client.hdel(REGISTRY_KEY, *fields)
    await client.delete(*(heartbeat_key(f) for f in fields), stats_key(unique_name))


async def wait_for(predicate: Callable[[], Any], within: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


def _marker(client: avalkey.Valkey, name: str, **kwargs: Any) -> DiscoveryMarker:
    return DiscoveryMarker(
        client,
        name,
        index_name=f"{name}:mem:idx",
        stats_key=stats_key(name),
        capabilities=["recall", "threshold_adjust"],
        **kwargs,
    )


@pytest.mark.usefixtures("cleanup")
async def test_monitor_sees_the_store_alive_with_its_stats(
    any_client: avalkey.Valkey, unique_name: str
) -> None:
    """After register, Monitor lists the store (kind, name, index, stats key) as alive and reads its counters."""
    marker = _marker(any_client, unique_name)
    assert await marker.register() == f"{unique_name}:mem"
    stats = StatsHash(any_client, stats_key(unique_name))
    await stats.incr("evictions", 3)
    await stats.incr_many({"recalls": 2, "recall_hits": 5, "remembers": 0})

    seen = (await monitor_discover(any_client))[f"{unique_name}:mem"]
    assert seen["kind"] == "agent_memory"
    assert seen["name"] == unique_name
    assert seen["version"] == __version__
    assert seen["protocol_version"] == 1
    assert seen["capabilities"] == ["recall", "threshold_adjust"]
    assert seen["indexName"] == f"{unique_name}:mem:idx"
    assert seen["statsKey"] == f"{unique_name}:__mem_stats"
    assert seen["pid"] == os.getpid()
    assert seen["hostname"] == socket.gethostname()
    assert seen["alive"] is True
    datetime.fromisoformat(seen["startedAt"].replace("Z", "+00:00"))
    datetime.fromisoformat(seen["lastHeartbeat"].replace("Z", "+00:00"))
    assert _s(await any_client.get(PROTOCOL_KEY)) == "1"
    assert 0 < await any_client.ttl(heartbeat_key(f"{unique_name}:mem")) <= 60

    monitor_stats = {_s(k): _s(v) for k, v in (await any_client.hgetall(seen["statsKey"])).items()}
    assert monitor_stats == {"evictions": "3", "recalls": "2", "recall_hits": "5"}
    assert await stats.read() == {"evictions": 3, "recalls": 2, "recall_hits": 5}

    await marker.close()
    after = (await monitor_discover(any_client))[f"{unique_name}:mem"]
    assert after["alive"] is False  # heartbeat removed on close
    assert after["name"] == unique_name  # registry entry kept


@pytest.mark.usefixtures("cleanup")
async def test_foreign_marker_is_not_overwritten(
    client: avalkey.Valkey, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A different library's marker under <name>:mem stays; ours goes under <name>:mem:agent_memory."""
    field = registry_field(unique_name)
    foreign = json.dumps({"type": "semantic_cache", "prefix": unique_name})
    await client.hset(REGISTRY_KEY, field, foreign)

    marker = _marker(client, unique_name)
    with caplog.at_level(logging.WARNING, logger="betterdb_memory"):
        used = await marker.register()
    assert used == fallback_registry_field(unique_name)
    assert any("not overwriting" in r.getMessage() for r in caplog.records)
    assert _s(await client.hget(REGISTRY_KEY, field)) == foreign
    seen = await monitor_discover(client)
    assert seen[used]["kind"] == "agent_memory"
    assert seen[used]["name"] == unique_name
    assert seen[used]["alive"] is True
    assert await client.get(heartbeat_key(field)) is None
    await marker.close()
    assert await client.get(heartbeat_key(used)) is None


@pytest.mark.usefixtures("cleanup")
async def test_both_fields_taken_skips_discovery(
    client: avalkey.Valkey, unique_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With both candidate fields held by others nothing is written and the store carries on."""
    taken = json.dumps({"type": "retrieval", "prefix": "x"})
    await client.hset(REGISTRY_KEY, registry_field(unique_name), taken)
    await client.hset(REGISTRY_KEY, fallback_registry_field(unique_name), "not json at all")

    marker = _marker(client, unique_name)
    with caplog.at_level(logging.WARNING, logger="betterdb_memory"):
        assert await marker.register() is None
        assert await marker.heartbeat_once() is False  # retries, but warns only once
    assert len([r for r in caplog.records if "not overwriting" in r.getMessage()]) == 2
    assert _s(await client.hget(REGISTRY_KEY, registry_field(unique_name))) == taken
    assert _s(await client.hget(REGISTRY_KEY, fallback_registry_field(unique_name))) == "not json at all"
    await marker.close()


@pytest.mark.usefixtures("cleanup")
async def test_own_stale_marker_is_replaced(client: avalkey.Valkey, unique_name: str) -> None:
    """A marker of our type from an earlier process is overwritten in place (same store, new start)."""
    field = registry_field(unique_name)
    await client.hset(
        REGISTRY_KEY, field, json.dumps({"type": "agent_memory", "prefix": unique_name, "pid": 1})
    )
    marker = _marker(client, unique_name)
    assert await marker.register() == field
    assert json.loads(_s(await client.hget(REGISTRY_KEY, field)))["pid"] == os.getpid()
    await marker.close()


@pytest.mark.usefixtures("cleanup")
async def test_background_heartbeat_refreshes_and_reregisters(
    client: avalkey.Valkey, unique_name: str
) -> None:
    """The heartbeat task rewrites an expired heartbeat and a vanished registry entry."""
    marker = _marker(client, unique_name, heartbeat_interval=0.05)
    field = await marker.register()
    assert field is not None
    marker.start()
    marker.start()  # idempotent
    await client.delete(heartbeat_key(field))
    await client.hdel(REGISTRY_KEY, field)

    async def back() -> bool:
        return await client.get(heartbeat_key(field)) is not None and await client.hexists(
            REGISTRY_KEY, field
        )

    await wait_for(back)
    await marker.close()
    assert await client.get(heartbeat_key(field)) is None


async def test_heartbeat_survives_connection_errors(unique_name: str) -> None:
    """With the server unreachable the task logs, reports each failure, and keeps running until close."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    dead = avalkey.Valkey(host="127.0.0.1", port=dead_port, socket_connect_timeout=0.2)
    failures: list[BaseException] = []
    marker = _marker(dead, unique_name, heartbeat_interval=0.02, on_error=failures.append)
    try:
        with pytest.raises(StoreConnectionError):
            await marker.register()
        marker.start()

        async def two_failures() -> bool:
            return len(failures) >= 2

        await wait_for(two_failures)
        assert all(isinstance(f, StoreConnectionError) for f in failures)
        assert marker._task is not None
        assert not marker._task.done()
        await marker.close()  # must not raise although DEL cannot reach the server
        assert marker._task is None
    finally:
        await dead.aclose()


@pytest.mark.usefixtures("cleanup")
async def test_stats_pipeline_and_validation(client: avalkey.Valkey, unique_name: str) -> None:
    """Counters can ride in the caller's pipeline; unknown fields and negative increments are refused."""
    stats = StatsHash(client, stats_key(unique_name))
    async with client.pipeline(transaction=False) as pipe:
        pipe.set(f"{unique_name}:probe", "x")
        stats.add_to_pipeline(pipe, "remembers", 2)
        stats.add_to_pipeline(pipe, "dedup_hits", 0)
        replies = await pipe.execute()
    assert replies[1:] == [2, 0]
    assert (await stats.read())["remembers"] == 2
    with pytest.raises(ValidationError):
        await stats.incr("evictionz")
    with pytest.raises(ValidationError):
        await stats.incr("evictions", -1)
    await client.delete(f"{unique_name}:probe")
