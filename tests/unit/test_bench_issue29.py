"""Issue 29's benchmark helpers, without a server: the no-I/O replay, the raw KNN 50 check, the goal tables.

The figures these helpers produce are only as good as what they replay and compare, so
the tests pin that: a replayed call sends nothing to the client (and what its recording
lacks does go out, counted), the raw KNN is matched against the library's argument for
argument (but for float rounding of the query vector), and a goal cell says "no" past
the goal.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _harness import Pair, Row, Samples
from _noio import Replay, Scenario, command_key, measure_noio, measure_noio_all
from bench_store import KNN50, SizeResult, knn_return_fields, same_knn
from store_goals29 import DEFAULTS_SCOPED, DEFAULTS_UNSCOPED, goals29_table

from betterdb_memory.core.codec import encode_vector
from betterdb_memory.core.query import MemoryFilter, knn_search_args

SEARCH = ("FT.SEARCH", "idx", "*=>[KNN 50 @vector $vec AS __dist]", "PARAMS", "2", "vec", b"\x00" * 8)
SCRIPT = ("EVALSHA", "abc123", "1", "doc:1", "1700000000000")


class Client:
    """A stand-in valkey-py client: counts what reaches it, answers by command name."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(args)
        return [1, b"doc:1", [b"content", b"hello"]] if args[0] == "FT.SEARCH" else 7

    def pipeline(self, transaction: bool = True) -> Pipe:
        return Pipe(self)


class Pipe:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.command_stack: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def execute_command(self, *args: Any, **options: Any) -> Pipe:
        self.command_stack.append((args, options))
        return self

    def __len__(self) -> int:
        return len(self.command_stack)

    async def execute(self) -> list[Any]:
        self.client.sent.extend(c for c, _ in self.command_stack)
        return [f"reply {c[0]}" for c, _ in self.command_stack]


async def one_call(client: Any, extra: tuple[Any, ...] | None = None) -> list[Any]:
    """What a library call does: one search, then one pipeline (a script and a write)."""
    first = await client.execute_command(*SEARCH)
    pipe = client.pipeline(transaction=False)
    pipe.execute_command(*SCRIPT)
    pipe.execute_command("HSET", "doc:1", "f", "v")
    out = [first, await pipe.execute()]
    if extra is not None:
        out.append(await client.execute_command(*extra))
    return out


def test_command_key_names_the_query_and_the_script() -> None:
    assert command_key(SEARCH) == ("FT.SEARCH", "*=>[KNN 50 @vector $vec AS __dist]")
    assert command_key(SCRIPT) == ("EVALSHA", "abc123")
    assert command_key(("HSET", "doc:1", "f", "v")) == ("HSET",)


def test_a_replayed_call_gets_its_recorded_replies_and_sends_nothing() -> None:
    async def scenario() -> None:
        client = Client()
        replay = Replay(client)
        recorded: list[Any] = []

        async def call(i: int) -> None:
            recorded.append(await one_call(client))

        await replay.record(call, 0)
        assert len(client.sent) == 3 and "execute_command" not in vars(client)  # patches undone
        with replay.replaying():
            replay.begin(0)
            again = await one_call(client)
        assert again == recorded[0]
        assert len(client.sent) == 3  # nothing more reached the client
        assert replay.leaked == 0 and "pipeline" not in vars(client)

    asyncio.run(scenario())


def test_what_the_recording_lacks_goes_to_the_server_and_is_counted() -> None:
    async def scenario() -> None:
        client = Client()
        replay = Replay(client)

        async def call(i: int) -> None:
            await one_call(client)

        await replay.record(call, 0)
        probe = ("FT.SEARCH", "idx", "@content:word", "LIMIT", "0", "0")
        background = ("HGETALL", "mem:__mem_config")
        with replay.replaying():
            replay.begin(0)
            await one_call(client, extra=probe)
            await client.execute_command(*background)
        assert client.sent[3:] == [probe, background]
        assert (replay.leaked, replay.background) == (1, 1)

    asyncio.run(scenario())


def test_measure_noio_replays_each_recorded_call_repeat_times() -> None:
    async def scenario() -> None:
        client = Client()

        async def call(i: int) -> None:
            await one_call(client)

        out = await measure_noio(
            client, "call", call, range(4), goal_us=1e9, repeat=3, categorize=lambda stats: {"library": 1.0}
        )
        assert not out.error
        assert len(out.samples) == len(out.stand_in) == 12 and out.trips == 2
        assert len(out.cpu) == len(out.cpu_stand_in) == 12 and out.library_cpu_us is not None
        assert len(client.sent) == 4 * 3 * 2  # each call once for real, once recorded; no replay sent
        assert out.where == {"library": 1.0}

    asyncio.run(scenario())


def test_each_row_carries_its_reference_timing_and_the_server_is_probed() -> None:
    """A row timed on a slower machine must show it: reference work after each replayed call."""

    async def scenario() -> None:
        client = Client()

        async def call(i: int) -> None:
            await one_call(client)

        reads = iter([0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.5])  # idle at once each time; 0.01 / 0.5 s busy

        async def server_cpu() -> float:
            return next(reads)

        results, cond = await measure_noio_all(
            client,
            [Scenario("a", 90.0, call), Scenario("b", None, call)],
            range(3),
            repeat=2,
            categorize=lambda stats: {"library": 1.0},
            server_cpu=server_cpu,
        )
        assert [len(m.samples) for m in results] == [6, 6] and not any(m.error for m in results)
        assert [len(m.reference) for m in results] == [6, 6] and all(m.reference_us > 0 for m in results)
        assert all(m.server_busy is not None and m.server_busy > 0 for m in results)
        assert len(cond.reference) == 12 and cond.server_busy_before == 0.0
        # 3 commands a call, each call once for real and once recorded; none replayed
        assert len(client.sent) == 2 * 3 * 2 * 3

    asyncio.run(scenario())


def knn(vector: np.ndarray[Any, np.dtype[np.float32]], fields: tuple[str, ...] = ("content",)) -> list[Any]:
    return knn_search_args("idx", encode_vector(vector), k=KNN50, flt=MemoryFilter(), return_fields=fields)


def test_same_knn_allows_float_rounding_of_the_query_vector_only() -> None:
    v = np.linspace(-1, 1, 8, dtype=np.float32)
    nudged = np.nextafter(v, np.float32(2))  # one unit in the last place
    assert same_knn(knn(nudged), knn(v))
    assert not same_knn(knn(v + np.float32(0.01)), knn(v))
    assert not same_knn(knn(v, ("content", "vector")), knn(v))
    text = ["FT.SEARCH", "idx", "@content:word", "LIMIT", "0", "0"]
    assert same_knn(text, list(text)) and not same_knn(text, [*text[:2], "@content:other", *text[3:]])


def test_knn_return_fields_reads_the_librarys_candidate_query() -> None:
    v = np.ones(8, dtype=np.float32)
    searches = [tuple(["FT.SEARCH", "idx", "@content:x"]), tuple(knn(v, ("content", "vector")))]
    assert knn_return_fields(searches, KNN50, "row") == ("content", "vector")
    with pytest.raises(AssertionError):
        knn_return_fields(searches[:1], KNN50, "row")


def row(label: str, ours_ms: float, raw_ms: float) -> Row:
    return Row(label, Pair(Samples([ours_ms / 1e3]), Samples([raw_ms / 1e3])))


def test_goals29_table_says_no_past_five_times_the_raw_knn() -> None:
    result = SizeResult(
        10_000, [row(DEFAULTS_UNSCOPED, 4.0, 1.0), row(DEFAULTS_SCOPED, 6.0, 1.0)], Pair(), 0, 0.0
    )
    table = goals29_table("engine 1.0", [result], None)
    assert "| goal (issue 29), engine 1.0 | 10,000 (synthetic) |" in table
    assert "| default recall, unscoped ≤ 5x raw KNN 50 | 4.00x yes (4.00 / 1.00 ms) |" in table
    assert "| default recall, scoped ≤ 5x raw KNN 50 | 6.00x **no** (6.00 / 1.00 ms) |" in table
