"""The drain of a cluster's queued script writes (``backend.index_nudge``), over a fake cluster client.

The real engine's behaviour (5 of 9 retired versions missing from ``as_of`` without it) is
in tests/cluster/test_cluster_script_writes.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import valkey.exceptions as vexc

from betterdb_memory.backend import scripts, scripts_reinforce
from betterdb_memory.backend.index_nudge import ScriptWriteNudge, nudge_args, writes_documents
from betterdb_memory.core.dialect import capabilities_for


class Node:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeCluster:
    """Routes each command to the node named by its first key's first letter; records nudges."""

    def __init__(self, fail: dict[str, BaseException] | None = None) -> None:
        self._initialize = False
        self.nodes = {n: Node(n) for n in "abc"}
        self.fail = fail or {}
        self.sent: list[tuple[str, str]] = []  # (node, index)

    async def _determine_nodes(self, *args: Any) -> list[Node]:
        key = str(args[3] if args[0] == "EVALSHA" else args[1])
        return [self.nodes[key[0]]]

    async def execute_command(self, *args: Any, target_nodes: Node) -> Any:
        self.sent.append((target_nodes.name, str(args[1])))
        if str(args[1]) in self.fail:
            raise self.fail[str(args[1])]
        return [0]


RETIRE = scripts.RETIRE.call(["a:mem:1", "a:hist:{a:mem:1}", "a:acc:1"], ["1", "x", "0"])
FLUSH_B = scripts_reinforce.FLUSH.call(["b:mem:2", "b:acc:2"], ["604800.0", "1"])
FLUSH_B2 = scripts_reinforce.FLUSH.call(["b:mem:3", "b:acc:3"], ["604800.0", "1"])


def test_the_nudge_is_a_local_search_that_matches_nothing() -> None:
    assert nudge_args("n:mem:idx") == [
        "FT.SEARCH", "n:mem:idx", "@created_at:[0 0]", "LOCALONLY", "NOCONTENT", "LIMIT", "0", "0", "DIALECT", "2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("step", "writes"),
    [
        (RETIRE, True),
        (FLUSH_B, True),
        (scripts.REPLACE.call(["a:mem:1", "a:upd:1"], ["0", "", "5", "content", "x"]), True),
        (scripts.SUBJECT_TRIM.call(["a:hist:{a:mem:1}", "a:mem:1"], ["1", "y"]), True),
        (scripts.REEMBED_SWAP.call(["a:mem:1", "a:side:1"]), True),
        (scripts.INDEX_BACKFILL.call(["a:mem:1"], ["0"]), True),
        # ACCESS writes its document only in write-through mode (reinforce 1, interval 0).
        (scripts_reinforce.ACCESS.call(["a:mem:1", "a:acc:1"], ["1", "5", "60", "0"]), True),
        (scripts_reinforce.ACCESS.call(["a:mem:1", "a:acc:1"], ["1", "5", "60", "60000"]), False),
        (scripts_reinforce.ACCESS.call(["a:mem:1", "a:acc:1"], ["0", "5", "60", "0"]), False),
        (scripts_reinforce.PEND.call(["a:pending"], ["5", "a:mem:1"]), False),
        (scripts.SUBJECT_PUT.call(["a:subj", "a:subj:hist"], ["1", "2", "s", "{}", "k"]), False),
        (scripts.LOCK.call(["a:lock"], ["t", "1000"]), False),
        (("HSET", "a:mem:1", "content", "x"), False),  # plain commands are indexed at once
    ],
)
def test_which_steps_write_documents(step: Any, writes: bool) -> None:
    assert writes_documents(step) is writes


def test_only_valkey_search_defers_script_writes() -> None:
    assert capabilities_for("valkey-search", (1, 2, 1)).defers_script_writes
    assert not capabilities_for("redisearch", (2, 10, 5)).defers_script_writes


def test_index_names_are_learned_from_ft_commands_and_bounded() -> None:
    nudge = ScriptWriteNudge(FakeCluster())
    args = ["FT.SEARCH", "n:mem:idx", "*"]
    assert nudge.seen(args) is args
    nudge.seen(["FT.INFO", "n:hist:idx"])
    nudge.seen(["FT.CREATE", "n:hist:idx", "ON", "HASH"])
    nudge.seen(["FT.DROPINDEX", "old:idx"])  # a dropped index is not one to drain
    nudge.seen(["HGET", "k", "f"])
    assert list(nudge.indexes) == ["n:mem:idx", "n:hist:idx"]
    for n in range(20):
        nudge.seen(["FT.SEARCH", f"i{n}"])
    assert list(nudge.indexes) == [f"i{n}" for n in range(12, 20)]


async def test_each_node_a_writing_script_ran_on_is_nudged_for_each_index() -> None:
    client = FakeCluster()
    nudge = ScriptWriteNudge(client)
    nudge.seen(["FT.INFO", "n:mem:idx"])
    nudge.seen(["FT.INFO", "n:hist:idx"])
    lock = scripts.LOCK.call(["c:lock"], ["t", "1000"])
    await nudge.after([("HSET", "c:x", "f", "v"), RETIRE, lock, FLUSH_B, FLUSH_B2])
    assert sorted(client.sent) == [
        ("a", "n:hist:idx"), ("a", "n:mem:idx"), ("b", "n:hist:idx"), ("b", "n:mem:idx"),
    ]  # fmt: skip
    assert nudge.sent == 4


async def test_nothing_is_sent_without_a_writing_script_or_a_known_index() -> None:
    client = FakeCluster()
    nudge = ScriptWriteNudge(client)
    await nudge.after([RETIRE])  # no index named yet
    nudge.seen(["FT.INFO", "n:mem:idx"])
    await nudge.after([("HSET", "a:mem:1", "f", "v"), scripts.LOCK.call(["a:lock"], ["t", "1"])])
    assert client.sent == []


async def test_a_failed_nudge_is_never_raised_and_a_gone_index_is_forgotten(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeCluster(
        fail={
            "old:idx": vexc.ResponseError("Index with name 'old:idx' not found in database 0"),
            "n:hist:idx": vexc.ConnectionError("refused"),
        }
    )
    nudge = ScriptWriteNudge(client)
    for name in ("old:idx", "n:mem:idx", "n:hist:idx"):
        nudge.seen(["FT.INFO", name])
    await nudge.after([RETIRE])
    assert list(nudge.indexes) == ["n:mem:idx", "n:hist:idx"]  # the gone one forgotten, the other kept
    assert "n:hist:idx" in caplog.text and "refused" in caplog.text


class Recorder:
    """Stands in for the backend's nudge and client: one log of what happened, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def seen(self, args: Any) -> Any:
        return args

    async def after(self, commands: Any) -> None:
        self.log.append("nudge")

    def pipeline(self, transaction: bool = False) -> Any:
        log = self.log

        class Pipe:
            def __init__(self) -> None:
                self.queued: list[Any] = []

            def execute_command(self, *args: Any, **_: Any) -> None:
                self.queued.append(args)

            def __len__(self) -> int:
                return len(self.queued)

            async def execute(self) -> list[Any]:
                log.extend(str(a[0]) for a in self.queued)
                return [1 for _ in self.queued]

        return Pipe()

    async def execute_command(self, *args: Any, **_: Any) -> Any:
        self.log.append(str(args[0]))
        return [0]


@pytest.mark.parametrize(
    ("cluster", "defers", "nudged"), [(True, True, True), (True, False, False), (False, True, False)]
)
async def test_the_backend_nudges_after_the_writes_and_before_the_searches(
    cluster: bool, defers: bool, nudged: bool
) -> None:
    """Only on a cluster whose engine defers script writes; the searches that follow see the writes."""
    from betterdb_memory.backend.client import ValkeyBackend

    rec = Recorder()
    backend = ValkeyBackend(rec)  # type: ignore[arg-type]
    backend.cluster, backend.defers_script_writes, backend.rebuilds_after_restart = cluster, defers, False
    backend.nudge = rec  # type: ignore[assignment]
    await backend.pipeline("remember", [RETIRE], searches=[["FT.SEARCH", "idx", "*"]])
    assert rec.log == (["EVALSHA", "nudge", "FT.SEARCH"] if nudged else ["EVALSHA", "FT.SEARCH"])


async def test_the_probe_says_whether_the_engine_defers_script_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from betterdb_memory.backend import client as client_module

    async def redisearch(_: Any) -> Any:
        return capabilities_for("redisearch", (2, 10, 5))

    monkeypatch.setattr(client_module, "probe", redisearch)
    backend = client_module.ValkeyBackend(Recorder())  # type: ignore[arg-type]
    assert backend.defers_script_writes  # until probed: valkey-search assumed (the safe side)
    await backend.probe()
    assert not backend.defers_script_writes
