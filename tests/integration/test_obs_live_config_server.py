"""LiveConfig against a real server: updates apply without restart, bad values keep the last good."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory.core.tunables import ConfigSnapshot, Rejection, config_key
from betterdb_memory.errors import ServerError, StoreConnectionError, ValidationError
from betterdb_memory.observability.live_config import LiveConfig

pytestmark = pytest.mark.integration

DEFAULTS = ConfigSnapshot()


@pytest.fixture(params=["client", "text_client"])
def any_client(request: pytest.FixtureRequest) -> avalkey.Valkey:
    """The same tests with bytes replies and with decode_responses=True."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


@pytest.fixture
async def key(client: avalkey.Valkey, unique_name: str) -> AsyncIterator[str]:
    k = config_key(unique_name)
    yield k
    await client.delete(k)


async def wait_for(predicate: Callable[[], bool], within: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while asyncio.get_running_loop().time() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def test_valid_update_applies_on_refresh(any_client: avalkey.Valkey, key: str) -> None:
    """An HSET by an operator (or Monitor) is in force after the next refresh, no restart."""
    changes: list[ConfigSnapshot] = []
    live = LiveConfig(any_client, key, DEFAULTS, on_change=changes.append)
    assert await live.refresh() == DEFAULTS
    await any_client.hset(key, mapping={"recall.threshold": "0.2", "maxItemsPerScope": "50"})
    snap = await live.refresh()
    assert snap.threshold == 0.2
    assert snap.max_items_per_scope == 50
    assert live.current() is snap
    assert changes == [snap]
    await live.refresh()
    assert len(changes) == 1  # no change, no callback


async def test_invalid_value_keeps_last_good_and_logs_once(
    any_client: avalkey.Valkey, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    """threshold=5 after 0.9 keeps 0.9; the rejection is logged and reported once, not per refresh."""
    reported: list[Sequence[Rejection]] = []
    live = LiveConfig(any_client, key, DEFAULTS, on_reject=reported.append)
    await any_client.hset(key, "recall.threshold", "0.9")
    await live.refresh()
    await any_client.hset(key, "recall.threshold", "5")
    with caplog.at_level(logging.WARNING, logger="betterdb_memory"):
        snap = await live.refresh()
        await live.refresh()
    assert snap.threshold == 0.9
    assert live.current().threshold == 0.9
    assert [r.field for r in live.rejections] == ["recall.threshold"]
    assert len([r for r in caplog.records if "rejected recall.threshold" in r.getMessage()]) == 1
    assert len(reported) == 1


async def test_removed_field_restores_default(any_client: avalkey.Valkey, key: str) -> None:
    """HDEL of a field returns it to the constructor default."""
    live = LiveConfig(any_client, key, DEFAULTS)
    await any_client.hset(key, "recall.weights.recency", "0.9")
    assert (await live.refresh()).weight_recency == 0.9
    await any_client.hdel(key, "recall.weights.recency")
    assert (await live.refresh()).weight_recency == DEFAULTS.weight_recency


async def test_background_refresher_picks_up_a_change(any_client: avalkey.Valkey, key: str) -> None:
    """With start(), a change in the hash is in force within about one interval."""
    live = LiveConfig(any_client, key, DEFAULTS, refresh_interval=0.05)
    live.start()
    try:
        await any_client.hset(key, "recall.halfLifeSeconds", "60")
        loop = asyncio.get_running_loop()
        started = loop.time()
        await wait_for(lambda: live.current().half_life_seconds == 60.0)
        assert loop.time() - started < 1.0
    finally:
        await live.close()


async def test_set_validates_then_writes(any_client: avalkey.Valkey, key: str) -> None:
    """set() refuses bad values before writing and applies good ones at once; unset() restores."""
    live = LiveConfig(any_client, key, DEFAULTS)
    with pytest.raises(ValidationError):
        await live.set("recall.threshold", 5)
    with pytest.raises(ValidationError):
        await live.set("recall.nope", 1)
    with pytest.raises(ValidationError):
        await live.set("maxItemsPerScope", 0.5)
    assert await any_client.hgetall(key) == {}
    assert (
        await live.set("maxItemsPerScope", 2.5)
    ).max_items_per_scope == 2  # floored, as the reference does
    assert (await live.set("recall.threshold", 1.5)).threshold == 1.5  # a distance: 1.5 is valid
    await live.unset("maxItemsPerScope")

    snap = await live.set("recall.threshold", 0.5)
    assert snap.threshold == 0.5
    assert await any_client.hget(key, "recall.threshold") in (b"0.5", "0.5")

    await live.set("recall.weights.similarity", 0)
    await live.set("recall.weights.recency", "0")
    with pytest.raises(ValidationError):
        await live.set("recall.weights.importance", 0)  # all three would be zero

    assert (await live.unset("recall.threshold")).threshold == DEFAULTS.threshold


async def test_wrong_key_type_is_a_server_error(any_client: avalkey.Valkey, key: str) -> None:
    """A key of the wrong type surfaces as a translated ServerError; the snapshot is unchanged."""
    await any_client.set(key, "oops")
    live = LiveConfig(any_client, key, DEFAULTS)
    with pytest.raises(ServerError):
        await live.refresh()
    assert live.current() == DEFAULTS


async def test_refresher_survives_connection_errors(unique_name: str) -> None:
    """Unreachable server: refresh raises StoreConnectionError; the task reports and keeps running."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    dead = avalkey.Valkey(host="127.0.0.1", port=dead_port, socket_connect_timeout=0.2)
    failures: list[BaseException] = []
    live = LiveConfig(
        dead, config_key(unique_name), DEFAULTS, refresh_interval=0.02, on_error=failures.append
    )
    try:
        with pytest.raises(StoreConnectionError):
            await live.refresh()
        live.start()
        await wait_for(lambda: len(failures) >= 2)
        task: Any = live._task
        assert task is not None
        assert not task.done()
        assert live.current() == DEFAULTS
        await live.close()
        assert live._task is None
    finally:
        await dead.aclose()
