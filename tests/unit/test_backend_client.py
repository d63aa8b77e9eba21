"""The backend's post-fault readiness check, over a scripted client (no server).

After a connection fault a restarted valkey-search answers queries from a
half-rebuilt index; the backend asks FT.INFO first and waits until the index is
ready. The integration side (a real restart) is in tests/reliability/test_faults.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import valkey.exceptions as vexc

from betterdb_memory import RetryPolicy, ServerError, StoreClosedError, StoreConnectionError
from betterdb_memory.backend.client import ValkeyBackend
from tests.unit.test_core_dialect import _replace_pair
from tests.unit.test_core_fixtures import reply

BACKFILLING = reply("valkey-search-1.2.1-dev/resp2", "info", text=True)  # captured mid-backfill
READY = _replace_pair(_replace_pair(BACKFILLING, "state", "ready"), "backfill_in_progress", "0")
FAST = RetryPolicy(attempts=5, base_delay=0.001, max_delay=0.002, budget=0.3)


class ScriptedClient:
    """Answers each command from a queue per command name; records what was sent."""

    def __init__(self, answers: dict[str, list[Any]]) -> None:
        self.answers = answers
        self.sent: list[tuple[Any, ...]] = []

    async def execute_command(self, *args: Any, **_: Any) -> Any:
        self.sent.append(args)
        queue = self.answers[str(args[0])]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _names(sent: Sequence[tuple[Any, ...]]) -> list[str]:
    return [str(a[0]) for a in sent]


async def test_no_fault_sends_no_ft_info() -> None:
    client = ScriptedClient({"FT.SEARCH": [[3]]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    assert await backend.search("count", ["FT.SEARCH", "idx", "*", "LIMIT", "0", "0"]) == [3]
    assert _names(client.sent) == ["FT.SEARCH"]


async def test_a_retried_query_waits_until_its_index_is_ready() -> None:
    """Fault, then two FT.INFO answers mid-backfill, then ready: only then the query is sent again."""
    client = ScriptedClient(
        {"FT.SEARCH": [vexc.ConnectionError("refused"), [7]], "FT.INFO": [BACKFILLING, BACKFILLING, READY]}
    )
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    assert await backend.search("count", ["FT.SEARCH", "idx", "*", "LIMIT", "0", "0"]) == [7]
    assert _names(client.sent) == ["FT.SEARCH", "FT.INFO", "FT.INFO", "FT.INFO", "FT.SEARCH"]
    assert client.sent[1] == ("FT.INFO", "idx")
    # Ready once: the next query goes straight through.
    assert await backend.search("count", ["FT.SEARCH", "idx", "*", "LIMIT", "0", "0"]) == [7]
    assert _names(client.sent)[-1:] == ["FT.SEARCH"] and len(client.sent) == 6


async def test_a_fault_on_another_command_makes_the_next_query_check() -> None:
    """A write saw the fault; the following pipeline's searches wait for the index too."""

    class Pipe:
        def __init__(self, owner: ScriptedClient) -> None:
            self.owner, self.queued = owner, []  # type: list[tuple[Any, ...]]

        def execute_command(self, *args: Any) -> None:
            self.queued.append(args)

        def __len__(self) -> int:
            return len(self.queued)

        async def execute(self) -> list[Any]:
            self.owner.sent.extend(self.queued)
            return [1 for _ in self.queued]

    client = ScriptedClient({"HSET": [vexc.ConnectionError("reset"), 1], "FT.INFO": [BACKFILLING, READY]})
    client.pipeline = lambda transaction=False: Pipe(client)  # type: ignore[attr-defined]
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    assert await backend.command("write", "HSET", "k", "f", "v") == 1
    out = await backend.pipeline("recall", [("HGET", "k", "f")],
                                 searches=[["FT.SEARCH", "idx", "*"]])  # fmt: skip
    assert out == [1, 1]
    assert _names(client.sent) == ["HSET", "HSET", "FT.INFO", "FT.INFO", "HGET", "FT.SEARCH"]


async def test_an_index_still_rebuilding_past_the_budget_is_a_typed_error() -> None:
    client = ScriptedClient({"FT.SEARCH": [vexc.ConnectionError("refused"), [1]], "FT.INFO": [BACKFILLING]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    with pytest.raises(StoreConnectionError) as caught:
        await backend.search("count", ["FT.SEARCH", "idx", "*"])
    assert caught.value.code == "connection.index_rebuilding"
    assert caught.value.details["index"] == "idx"
    assert _names(client.sent).count("FT.SEARCH") == 1  # never answered from the partial index


async def test_an_absent_index_does_not_block_the_query() -> None:
    """FT.INFO says no such index: the query is sent (and fails as usual, for the index manager)."""
    missing = vexc.ResponseError("Index with name 'idx' not found in database 0")
    client = ScriptedClient({"FT.SEARCH": [vexc.ConnectionError("refused"), [0]], "FT.INFO": [missing]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    assert await backend.search("count", ["FT.SEARCH", "idx", "*"]) == [0]
    assert _names(client.sent) == ["FT.SEARCH", "FT.INFO", "FT.SEARCH"]


async def test_ft_info_itself_is_not_held_back() -> None:
    client = ScriptedClient({"FT.INFO": [vexc.ConnectionError("refused"), READY]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    assert await backend.index_info("idx") == READY
    assert _names(client.sent) == ["FT.INFO", "FT.INFO"]


async def test_a_query_sent_on_a_newly_opened_connection_is_sent_again_once_ready() -> None:
    """valkey-py's pool reopens a closed connection without an error: the query that rode on it
    may have been answered by a server that restarted a moment ago, mid-rebuild."""
    client = ScriptedClient({"FT.SEARCH": [[2], [5]], "FT.INFO": [BACKFILLING, READY]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    original = client.execute_command

    async def reopening(*args: Any, **kw: Any) -> Any:
        if len(client.sent) == 0:
            backend._note_open()  # what the connection hook does as the pool reconnects
        return await original(*args, **kw)

    client.execute_command = reopening  # type: ignore[method-assign]
    assert await backend.search("count", ["FT.SEARCH", "idx", "*", "LIMIT", "0", "0"]) == [5]
    assert _names(client.sent) == ["FT.SEARCH", "FT.INFO", "FT.INFO", "FT.SEARCH"]


async def test_redisearch_skips_every_check() -> None:
    """RediSearch indexes while loading: no FT.INFO after a fault or a new connection."""
    client = ScriptedClient({"FT.SEARCH": [vexc.ConnectionError("refused"), [4]], "FT.INFO": [BACKFILLING]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    backend.rebuilds_after_restart = False
    backend._note_open()
    assert await backend.search("count", ["FT.SEARCH", "idx", "*"]) == [4]
    assert _names(client.sent) == ["FT.SEARCH", "FT.SEARCH"]


async def test_a_query_for_an_index_name_switched_away_from_goes_to_the_one_in_use() -> None:
    client = ScriptedClient({"FT.SEARCH": [[1]], "FT.DROPINDEX": ["OK"]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    backend.redirects["s:mem:idx"] = "s:mem:idx:g1"
    await backend.search("recall", ["FT.SEARCH", "s:mem:idx", "*", "LIMIT", "0", "1"])
    await backend.search("recall", ["FT.SEARCH", "other", "*", "LIMIT", "0", "1"])
    await backend.search("drop", ["FT.DROPINDEX", "s:mem:idx"])  # only queries are redirected
    assert [a[1] for a in client.sent] == ["s:mem:idx:g1", "other", "s:mem:idx"]


# -- one command, one search: their first attempt is written out, the rest is ``retry.call``'s ------


@pytest.mark.parametrize("faults", [1, 2, 4])
async def test_a_command_is_sent_again_after_each_connection_fault(faults: int) -> None:
    client = ScriptedClient({"HSET": [*(vexc.ConnectionError("reset") for _ in range(faults)), 1]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    assert await backend.command("write", "HSET", "k", "f", "v") == 1
    assert _names(client.sent) == ["HSET"] * (faults + 1)


@pytest.mark.parametrize("kind", ["command", "search"])
async def test_out_of_attempts_is_a_connection_error_that_says_how_many(kind: str) -> None:
    client = ScriptedClient(
        {"HGET": [vexc.ConnectionError("refused")], "FT.SEARCH": [vexc.ConnectionError("refused")]}
    )
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    backend.rebuilds_after_restart = False  # no FT.INFO between the attempts
    send = (
        backend.command("get", "HGET", "k", "f")
        if kind == "command"
        else backend.search("count", ["FT.SEARCH", "idx", "*"])
    )
    with pytest.raises(StoreConnectionError) as caught:
        await send
    assert caught.value.details["attempts"] == FAST.attempts
    assert caught.value.details["operation"] == ("get" if kind == "command" else "count")
    assert len(client.sent) == FAST.attempts


async def test_a_write_that_may_not_run_twice_fails_at_its_first_fault() -> None:
    client = ScriptedClient({"INCR": [vexc.ConnectionError("reset"), 1]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    with pytest.raises(StoreConnectionError) as caught:
        await backend.command("bump", "INCR", "k", idempotent=False)
    assert caught.value.details["attempts"] == 1
    assert _names(client.sent) == ["INCR"]


async def test_a_server_error_is_translated_at_once() -> None:
    client = ScriptedClient({"HGET": [vexc.ResponseError("WRONGTYPE Operation against a key"), 1]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    with pytest.raises(ServerError) as caught:
        await backend.command("get", "HGET", "k", "f")
    assert caught.value.details["attempts"] == 1
    assert isinstance(caught.value.__cause__, vexc.ResponseError)
    assert _names(client.sent) == ["HGET"]


async def test_a_closed_backend_sends_nothing() -> None:
    client = ScriptedClient({"HGET": [1], "FT.SEARCH": [[0]]})
    backend = ValkeyBackend(client, retry=FAST)  # type: ignore[arg-type]
    backend.closed = True
    with pytest.raises(StoreClosedError):
        await backend.command("get", "HGET", "k", "f")
    with pytest.raises(StoreClosedError):
        await backend.search("count", ["FT.SEARCH", "idx", "*"])
    assert client.sent == []
