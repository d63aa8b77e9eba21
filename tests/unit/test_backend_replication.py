"""``backend.replication``: which round trips wait for replicas, the WAIT they send, what a short count raises."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import valkey.exceptions as vexc
from valkey.asyncio.cluster import ClusterNode, ClusterPipeline, PipelineCommand, ValkeyCluster

from betterdb_memory import HashingEmbedder
from betterdb_memory.backend import scripts, scripts_reinforce
from betterdb_memory.backend.replication import ReplicaWait, check_acks, run_waited, wait_fault, waits_for
from betterdb_memory.errors import ConfigurationError, ServerError
from betterdb_memory.store_options import check_options

WAIT = ReplicaWait(1, 0.25)


@pytest.mark.parametrize(
    ("operation", "steps"),
    [
        ("remember", [("HSET", "k", "content", "x"), ("PEXPIRE", "k", 10)]),
        ("forget", [("DEL", "k")]),
        ("store_turn", [scripts.APPEND_TURN.call(["a", "b"], ["x"])]),
        ("get", [("HGETALL", "k"), ("DEL", "k")]),  # a read that deletes what it found expired
        ("config.set", [("HSET", "cfg", "threshold", "0.3")]),
    ],
)
def test_a_round_trip_with_a_write_waits(operation: str, steps: list[object]) -> None:
    assert waits_for(operation, steps)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("operation", "steps"),
    [
        ("get", [("HGETALL", "k"), ("EXISTS", "k"), ("hmget", "k", "f")]),
        ("recall", [scripts_reinforce.ACCESS.call(["d", "c"], ["1"])]),  # reinforcement may lag
        ("consolidate", [scripts.LOCK.call(["lock"], ["t", 1000])]),
        ("discovery.heartbeat", [("HSET", "registry", "x", "y")]),
        ("stats.incr", [("HINCRBY", "stats", "x", 1)]),
        ("stats", [("HINCRBY", "stats", "x", 1)]),  # a failed flush is re-counted: never raise after it
        ("ensure_index", [("HSET", "marker", "v", "1")]),
        ("remember", []),
    ],
)
def test_reads_and_bookkeeping_do_not_wait(operation: str, steps: list[object]) -> None:
    assert not waits_for(operation, steps)  # type: ignore[arg-type]


def test_the_wait_command_rounds_its_timeout_up_and_never_sends_zero() -> None:
    assert ReplicaWait(2, 0.25).command() == ("WAIT", 2, 250)
    assert ReplicaWait(1, 0.0001).command() == ("WAIT", 1, 1)  # WAIT n 0 would block for ever
    assert ReplicaWait(1, 0.0015).timeout_ms == 2


def test_enough_acknowledgements_on_every_node_pass() -> None:
    check_acks(ReplicaWait(1, 1.0), "remember", {"a:1": 1, "b:2": 2})
    check_acks(ReplicaWait(1, 1.0), "remember", {})


def test_a_node_short_of_replicas_raises_replication_timeout_with_what_is_known() -> None:
    with pytest.raises(ServerError) as info:
        check_acks(ReplicaWait(2, 0.5), "remember_many", {"a:1": 2, "b:2": 1, "c:3": 0})
    err = info.value
    assert err.code == "server.replication_timeout"
    assert err.details == {
        "operation": "remember_many",
        "replicas": 2,
        "acknowledged": 0,
        "timeout_ms": 500,
        "nodes": {"b:2": 1, "c:3": 0},
    }
    assert "applied on the primary" in err.message


def test_a_pipeline_that_failed_at_its_wait_is_a_connection_fault() -> None:
    """The node became a replica (or the cluster client re-routed): the write is unconfirmed, retry it."""
    demoted = vexc.ResponseError(
        "Command # 3 (WAIT 1 250) of pipeline caused error: WAIT cannot be used with replica instances."
    )
    fault = wait_fault(demoted, writes=2)
    assert isinstance(fault, vexc.ConnectionError)
    rerouted = vexc.ValkeyClusterException("Too many targets for command ('WAIT', 1, 250)")
    assert isinstance(wait_fault(rerouted, writes=1), vexc.ConnectionError)


def test_a_failed_write_is_not_mistaken_for_a_failed_wait() -> None:
    """A write whose own content says "(WAIT " fails as itself."""
    own = vexc.ResponseError("Command # 1 (WAIT 1 2) of pipeline caused error: WRONGTYPE")
    assert wait_fault(own, writes=1) is None
    assert wait_fault(vexc.ResponseError("WRONGTYPE Operation against a key"), writes=1) is None


def _options(**given: object) -> object:
    base: dict[str, object] = dict(
        embed_fn=None, embedder=HashingEmbedder(), dimensions=None, default_threshold=None, weights=None,
        half_life_seconds=None, max_items_per_scope=None, discovery=False, config_refresh=False,
        consolidation=None, telemetry=None, dedup=False, candidate_factor=1, reranker=None,
        rerank_candidates=50, relevance_margin=None, text_candidates=50, reinforce_mode="sync",
        reinforce_write_interval=None, retry=None, heartbeat_interval=30.0,
    )  # fmt: skip
    base.update(given)
    return check_options(**base)  # type: ignore[arg-type]


def test_no_replica_is_waited_for_by_default() -> None:
    assert _options().wait is None  # type: ignore[attr-defined]
    assert _options(wait_replicas=0, wait_timeout=5).wait is None  # type: ignore[attr-defined]


def test_wait_replicas_builds_the_wait() -> None:
    assert _options(wait_replicas=2, wait_timeout=0.5).wait == ReplicaWait(2, 0.5)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("given", "code", "argument"),
    [
        ({"wait_replicas": -1}, "configuration.range", "wait_replicas"),
        ({"wait_replicas": "1"}, "configuration.type", "wait_replicas"),
        ({"wait_replicas": True}, "configuration.type", "wait_replicas"),
        ({"wait_replicas": 1, "wait_timeout": 0}, "configuration.range", "wait_timeout"),
        ({"wait_replicas": 1, "wait_timeout": float("nan")}, "configuration.nonfinite", "wait_timeout"),
        ({"wait_timeout": "1s"}, "configuration.type", "wait_timeout"),
    ],
)
def test_bad_wait_options_raise_configuration_errors(
    given: dict[str, object], code: str, argument: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        _options(**given)
    assert info.value.code == code
    assert info.value.details["argument"] == argument


# -- run_waited: a write redirected by ASK gets its WAIT on the node that applied it -------------


class _Node:
    def __init__(self, name: str, replies: dict[str, Any]) -> None:
        self.name, self.replies, self.batches = name, replies, []  # type: list[list[tuple[Any, ...]]]

    async def execute_pipeline(self, commands: list[PipelineCommand]) -> bool:
        self.batches.append([c.args for c in commands])
        for c in commands:
            c.result = self.replies.get(str(c.args[0]), "OK")
        return False


class _Pipe:
    """valkey-py's cluster pipeline as ``run_waited`` uses it: ``_command_stack``, ``_execute``
    (one attempt) and ``ERRORS_ALLOW_RETRY``; ``execute`` (which retries) must not be called."""

    ERRORS_ALLOW_RETRY = ClusterPipeline.ERRORS_ALLOW_RETRY

    def __init__(self, results: list[Any]) -> None:
        self._command_stack = [PipelineCommand(i, f"C{i}") for i in range(len(results))]
        self.results = results
        self.options: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self._command_stack)

    async def execute(self, **options: Any) -> list[Any]:
        raise AssertionError("a waiting pipeline went through valkey-py's retrying execute()")

    async def _execute(self, client: Any, stack: list[PipelineCommand], **options: Any) -> list[Any]:
        self.options = options
        for cmd, result in zip(stack, self.results, strict=True):
            if isinstance(result, vexc.ConnectionError | vexc.TimeoutError):
                raise result  # as valkey-py raises a lost connection (its execute() would retry)
            cmd.result = result
        for cmd, result in enumerate(self.results):  # raise_on_error (the default): the first error
            if isinstance(result, Exception):
                result.args = (f"Command # {cmd + 1} (C{cmd}) of pipeline caused error: {result.args}",)
                raise result
        return self.results


class _Client:
    def __init__(self, *nodes: _Node) -> None:
        self.nodes = {n.name: n for n in nodes}
        self._initialize = False
        self.resets = 0

    def get_node(self, node_name: str) -> _Node | None:
        return self.nodes.get(node_name)

    async def _reset_for_reinitialize(self) -> None:
        self.resets += 1


async def test_an_asked_write_is_sent_again_with_asking_and_its_own_wait_on_one_connection() -> None:
    dst = _Node("127.0.0.1:7001", {"WAIT": 0})
    pipe = _Pipe(["ok", vexc.AskError("3999 127.0.0.1:7001"), 1])  # write, ASKed write, the source's WAIT
    replies, asked = await run_waited(_Client(dst), pipe, WAIT)
    assert pipe.options == {"raise_on_error": True, "allow_redirections": False}
    assert pipe._command_stack == []
    assert dst.batches == [[("ASKING",), ("C1",), ("WAIT", 1, 250)]]
    assert replies == ["ok", "OK", 1]
    assert asked == {"127.0.0.1:7001": 0}
    with pytest.raises(ServerError) as info:  # the node that applied it has no replica: unconfirmed
        check_acks(WAIT, "remember", {"127.0.0.1:7000": 1}, asked)
    assert info.value.details["nodes"] == {"127.0.0.1:7001": 0}


async def test_without_a_redirect_nothing_more_is_sent() -> None:
    replies, asked = await run_waited(_Client(), _Pipe(["ok", 1]), WAIT)
    assert (replies, asked) == (["ok", 1], {})


async def test_a_split_multikey_write_or_a_second_redirect_is_a_connection_fault() -> None:
    with pytest.raises(vexc.ConnectionError):
        await run_waited(_Client(), _Pipe([vexc.TryAgainError("TRYAGAIN"), 1]), WAIT)
    dst = _Node("127.0.0.1:7001", {"C0": vexc.MovedError("3999 127.0.0.1:7000")})
    with pytest.raises(vexc.ConnectionError):
        await run_waited(_Client(dst), _Pipe([vexc.AskError("3999 127.0.0.1:7001"), 1]), WAIT)
    with pytest.raises(vexc.ConnectionError):  # ASK to a node the client does not know
        await run_waited(_Client(), _Pipe([vexc.AskError("3999 127.0.0.1:7009"), 1]), WAIT)


class _Redirecting(_Client):
    """A client whose ``execute_command`` answers a re-sent command (valkey-py follows MOVED there)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[Any, ...]] = []

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        self.sent.append(args)
        return "moved-ok"


async def test_a_moved_write_is_followed_as_valkey_py_does_not_as_an_ask() -> None:
    """MovedError subclasses AskError: a failover's MOVED must not be taken for a migration's ASK."""
    client = _Redirecting()
    replies, asked = await run_waited(client, _Pipe([vexc.MovedError("3999 127.0.0.1:7001"), 1]), WAIT)
    assert client.sent == [("C0",)]
    assert (replies, asked) == (["moved-ok", 1], {})


@pytest.mark.parametrize(
    "fault", [vexc.TimeoutError("Timeout reading from socket"), vexc.ConnectionError("reset")]
)
async def test_a_fault_during_the_wait_is_raised_not_answered_by_a_lone_wait(fault: Exception) -> None:
    """valkey-py's execute() would send again only the WAIT (the write's reply had arrived), on a
    new connection to the default node, which answers with every replica: a false confirmation.
    One attempt instead; the client is reset as valkey-py resets it, and the fault raised."""
    client, pipe = _Client(), _Pipe([1, fault])
    with pytest.raises(type(fault)):
        await run_waited(client, pipe, WAIT)
    assert client.resets == 1 and pipe._command_stack == []


async def test_other_errors_are_raised_as_valkey_py_raises_them() -> None:
    with pytest.raises(vexc.NoScriptError, match=r"^Command # 1 \(C0\) of pipeline caused error"):
        await run_waited(_Client(), _Pipe([vexc.NoScriptError("NOSCRIPT"), 1]), WAIT)


def test_the_valkey_py_internals_it_relies_on_exist() -> None:
    """A valkey-py upgrade that renames them fails here, not in a migration."""
    assert "_command_stack" in inspect.getsource(ClusterPipeline.__init__)
    params = inspect.signature(ClusterPipeline.execute).parameters
    assert {"raise_on_error", "allow_redirections"} <= set(params)
    assert list(inspect.signature(ClusterPipeline._execute).parameters)[:5] == [
        "self",
        "client",
        "stack",
        "raise_on_error",
        "allow_redirections",
    ]
    assert {vexc.ConnectionError, vexc.TimeoutError} <= set(ClusterPipeline.ERRORS_ALLOW_RETRY)
    assert callable(ValkeyCluster._reset_for_reinitialize) and "_initialize" in inspect.getsource(
        ValkeyCluster.__init__
    )
    # The retry this module avoids: valkey-py sends again only what lacks a (truthy) reply.
    assert "if not cmd.result or isinstance(cmd.result, Exception)" in inspect.getsource(
        ClusterPipeline._execute
    )
    assert (
        callable(ClusterNode.execute_pipeline)
        and "node_name" in inspect.signature(ValkeyCluster.get_node).parameters
    )
    assert PipelineCommand(0, "WAIT", 1, 2).args == ("WAIT", 1, 2)
