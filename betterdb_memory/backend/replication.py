"""Waiting for replicas: ``WAIT`` after a write, on the connection that took the write.

Valkey replicates asynchronously: a write is acknowledged once the primary applied it,
and a failover to a replica that had not received it yet loses it. ``WAIT numreplicas
timeout`` blocks until that many replicas acknowledged every write *the same client
connection* sent before it (the server keeps the replication offset per connection; a
WAIT on a connection that wrote nothing answers at once). So the WAIT travels in the
write's own pipeline: on a single server a pipeline is one connection; on a cluster
valkey-py sends each node's share of a pipeline on one connection of that node, so one
WAIT per node that took a write goes there, routed to that node.

A write the cluster redirects with ``ASK`` (its slot is being migrated and the key is
already on the importing node) is applied by the importing node, on a connection the
``WAIT`` queued for the migrating node never sees: that ``WAIT`` would confirm nothing
about it. valkey-py's cluster pipeline re-sends such a command on its own, so a waiting
pipeline runs without valkey-py's redirections (``run_waited``): each ``ASK``ed write
is sent again to the node that asked for it, as ``ASKING``, the write, then ``WAIT``,
all on one connection of that node, and that node's acknowledgement counts like the
others'. A ``MOVED`` write is re-sent the way valkey-py does it (its slot map changes, and
the backend then reports the write as unconfirmed: a connection fault); a ``TRYAGAIN``
(a multi-key write whose keys the migration split) is a connection fault at once.

A waiting pipeline is sent once, without valkey-py's own retries (``_execute_once``):
after a connection error or a socket timeout valkey-py sends the pipeline again, but only
the commands whose reply it lacks (or whose reply is falsy). A write whose reply had
arrived is not sent again, and the ``WAIT`` behind it goes alone, on a new connection and,
its ``target_nodes`` spent by the first attempt, to the default node: a ``WAIT`` on a
connection that wrote nothing answers at once with every replica, so a write no replica
had would count as confirmed (seen: two writes confirmed while their primary's replica
was frozen, ``tests/cluster/test_cluster_wait_retry.py``). The fault is raised instead,
and the backend's retry sends the whole round trip again: the writes and their ``WAIT``,
on one connection.

What is waited for: the round trips of the store's own writes (memories, turns,
summaries, config, import). Not the bookkeeping that may lag by design: recall's
reinforcement (``ACCESS``, and the snapshot flush), the scope locks, the index's set-up (``ensure_index``: its
markers are written again by any store that starts), Monitor's discovery and statistics.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import valkey.exceptions as vexc
from valkey.asyncio.cluster import PipelineCommand

from ..errors import ServerError
from .cluster_nodes import nodes_of
from .commands import ScriptCall, Step

__all__ = ["ReplicaWait", "check_acks", "check_waits", "queue_waits", "run_waited", "wait_fault", "waits_for"]

#: Commands that change nothing (a round trip of only these sends no WAIT).
_READS = frozenset(
    {
        "EXISTS", "GET", "MGET", "HGET", "HGETALL", "HMGET", "HKEYS", "HEXISTS", "HSTRLEN", "HLEN",
        "LRANGE", "LLEN", "SMEMBERS", "SCARD", "SISMEMBER", "ZRANGE", "ZSCORE", "ZMSCORE", "ZCARD",
        "PTTL", "TTL", "TYPE", "SCAN", "HSCAN", "PING",
    }
)  # fmt: skip
#: Scripts that read, or write only what may lag (reinforcement counters, locks).
_UNWAITED_SCRIPTS = frozenset(
    {"access", "pend", "flush", "settle", "lock", "unlock", "session_snapshot", "pending_turns"}
)
#: Operations (before any ``.``) of the index's set-up and of Monitor's bookkeeping: heartbeats,
#: and statistics (a flush that raised is counted again, so a WAIT there would count twice), and
#: the reinforcement's (its counts, and the flush of document snapshots that may lag by design).
_UNWAITED_OPERATIONS = frozenset({"ensure_index", "discovery", "stats", "reinforce"})


@dataclass(frozen=True, slots=True)
class ReplicaWait:
    """How many replicas must acknowledge each write, and how long to wait for them.

    Args:
        replicas: replicas that must have the write before the call returns (>= 1).
        timeout: seconds the server waits for them (sent to ``WAIT`` in milliseconds,
            at least 1: ``WAIT n 0`` would block for ever).
    """

    replicas: int
    timeout: float

    @property
    def timeout_ms(self) -> int:
        """The ``WAIT`` timeout argument."""
        return max(1, math.ceil(self.timeout * 1000))

    def command(self) -> tuple[str, int, int]:
        """The ``WAIT`` command, as sent."""
        return ("WAIT", self.replicas, self.timeout_ms)


def waits_for(operation: str, steps: Sequence[Step]) -> bool:
    """Whether a round trip of ``operation`` carrying ``steps`` writes what must be waited for."""
    if operation.split(".", 1)[0] in _UNWAITED_OPERATIONS:
        return False
    for step in steps:
        if isinstance(step, ScriptCall):
            if step.script.name not in _UNWAITED_SCRIPTS:
                return True
        elif step and str(step[0]).upper() not in _READS:
            return True
    return False


def check_acks(
    wait: ReplicaWait, operation: str, acks: Mapping[str, Any], asked: Mapping[str, Any] | None = None
) -> None:
    """Raise unless every node that took a write of ``operation`` had ``wait.replicas`` acknowledgements.

    ``acks`` maps a node (its ``host:port``; ``""`` on a single server) to its ``WAIT``
    reply: the number of replicas that acknowledged; ``asked``, the same for the
    ``WAIT`` s that followed ``ASK`` ed writes (a node in both counts its lower reply).

    Raises:
        ServerError: ``server.replication_timeout``: the write is applied on the
            primary (reads see it) but fewer replicas than asked confirmed it within
            the timeout; a failover before they receive it may lose it.
    """
    every = {node: int(n) for node, n in acks.items()}
    for node, n in (asked or {}).items():
        every[node] = min(int(n), every.get(node, int(n)))
    short = {node: n for node, n in every.items() if n < wait.replicas}
    if not short:
        return
    fewest = min(short.values())
    raise ServerError(
        f"{operation}: the write is applied on the primary but confirmed by only {fewest} of "
        f"{wait.replicas} replicas within {wait.timeout_ms} ms (a failover before they have it "
        "may lose it)",
        code="server.replication_timeout",
        details={
            "operation": operation,
            "replicas": wait.replicas,
            "acknowledged": fewest,
            "timeout_ms": wait.timeout_ms,
            "nodes": short,
        },
    )


async def queue_waits(client: Any, pipe: Any, commands: Sequence[Step], wait: ReplicaWait) -> list[str]:
    """Queue a ``WAIT`` after the writes on each node that takes one (a cluster pipeline sends
    a node's commands in order on one connection); those nodes' names (``[""]``: one server)."""
    if not _is_cluster(client):
        pipe.execute_command(*wait.command())
        return [""]
    nodes = {node.name: node for node in await nodes_of(client, commands)}
    for node in nodes.values():
        pipe.execute_command(*wait.command(), target_nodes=node)
    return list(nodes)


async def check_waits(
    client: Any,
    operation: str,
    commands: Sequence[Step],
    wait: ReplicaWait,
    nodes: list[str],
    replies: list[Any],
    asked: Mapping[str, Any],
) -> None:
    """Take the ``WAIT`` replies (``queue_waits``) out of ``replies``; raise when replicas fell short.

    A write redirected mid-pipeline (a failover moved its slot) went to a node no
    ``WAIT`` followed: a connection fault (retried when idempotent).
    """
    start = len(commands)
    acks = dict(zip(nodes, replies[start : start + len(nodes)], strict=True))
    del replies[start : start + len(nodes)]
    if _is_cluster(client) and {n.name for n in await nodes_of(client, commands)} != set(nodes):
        raise vexc.ConnectionError(f"a slot moved during {operation}: its WAIT did not follow the write")
    check_acks(wait, operation, acks, asked)


def _is_cluster(client: Any) -> bool:
    from valkey.asyncio.cluster import ValkeyCluster

    return isinstance(client, ValkeyCluster)


def wait_fault(exc: Exception, writes: int) -> Exception | None:
    """A connection fault standing for ``exc`` when a pipeline failed at one of its ``WAIT``s.

    The ``WAIT`` could not run where the write went: the node became a replica in a
    failover ("WAIT cannot be used with replica instances"), or the cluster client
    re-routed the pipeline and found the keyless ``WAIT`` without a node. Then nothing
    confirms the write, and a connection fault says so: an idempotent write is sent
    again, with its ``WAIT``, to the new primary. None for any other failure.
    """
    text = str(exc)
    found = re.match(r"Command # (\d+) \(WAIT ", text)  # valkey-py's wording of a pipeline error
    if text.startswith("Too many targets for command ('WAIT'") or (found and int(found.group(1)) > writes):
        return vexc.ConnectionError(f"a failover interrupted a write's WAIT ({exc})")
    return None


async def run_waited(client: Any, pipe: Any, wait: ReplicaWait | None) -> tuple[list[Any], dict[str, Any]]:
    """Execute ``pipe``; on a cluster pipeline carrying ``WAIT`` s (``wait`` set), follow ``ASK`` with a ``WAIT``.

    Returns the pipeline's replies (as ``pipe.execute()`` would) and, per node an
    ``ASK`` sent writes to, that node's ``WAIT`` reply. Errors are raised as valkey-py
    raises them (the first failed command, its position in the message). With
    ``wait`` None this is ``pipe.execute()``.

    Uses valkey-py's pipeline internals (``_command_stack``, ``_execute``,
    ``PipelineCommand``, ``ClusterNode.execute_pipeline``: one connection for a node's
    batch), pinned by tests/unit/test_backend_replication.py.
    """
    if wait is None:
        return (list(await pipe.execute()) if len(pipe) else []), {}
    stack: list[Any] = list(pipe._command_stack)  # sending empties the pipeline's own list
    try:
        # Raising (valkey-py's default) keeps its failover path as it is; every command's result
        # (the redirections too) is in the stack once it raised.
        await _execute_once(client, pipe)
    except vexc.ResponseError as exc:
        if not any(cmd.result is exc for cmd in stack):
            raise
    asked: dict[str, list[Any]] = {}
    for cmd in stack:
        result = cmd.result
        if isinstance(
            result, vexc.MovedError
        ):  # (a subclass of AskError) as valkey-py does: its slot map follows
            try:
                cmd.result = await client.execute_command(*cmd.args, **cmd.kwargs)
            except Exception as moved_exc:
                cmd.result = moved_exc
        elif isinstance(result, vexc.AskError):
            asked.setdefault(f"{result.host}:{result.port}", []).append(cmd)
        elif isinstance(result, vexc.TryAgainError):
            raise vexc.ConnectionError(f"a slot migration split a write's keys ({_command(cmd)}): try again")
    acks = {name: await _asked(client, name, cmds, wait) for name, cmds in asked.items()}
    for cmd in stack:
        failed = cmd.result
        if isinstance(failed, Exception):
            if not str(failed).startswith("Command # "):  # valkey-py worded the one it raised
                failed.args = (
                    f"Command # {cmd.position + 1} ({_command(cmd)}) of pipeline caused error: {failed.args}",
                )
            raise failed
    return [cmd.result for cmd in stack], acks


async def _execute_once(client: Any, pipe: Any) -> None:
    """valkey-py's ``ClusterPipeline.execute(allow_redirections=False)`` without its retries.

    One attempt: a connection error or socket timeout resets the client as valkey-py does
    (the next call re-reads the slot map) and is raised, never answered by a lone ``WAIT``
    on another connection (the module docstring says why).
    """
    try:
        if client._initialize:
            await client.initialize()
        await pipe._execute(client, pipe._command_stack, raise_on_error=True, allow_redirections=False)
    except BaseException as exc:
        if type(exc) in pipe.ERRORS_ALLOW_RETRY:
            await client._reset_for_reinitialize()
        raise
    finally:
        pipe._command_stack = []


async def _asked(client: Any, name: str, cmds: Sequence[Any], wait: ReplicaWait) -> Any:
    """Send ``cmds`` (``ASK``ed to node ``name``) there, each after ``ASKING``, then ``WAIT``, on one
    connection; set their results and answer the ``WAIT`` reply."""
    node = client.get_node(node_name=name)
    if node is None:  # a node the client does not know yet: nothing can be sent to it directly
        raise vexc.ConnectionError(f"ASK to an unknown node {name}: its WAIT cannot follow the write")
    batch: list[Any] = []
    for cmd in cmds:
        batch += [
            PipelineCommand(len(batch), "ASKING"),
            PipelineCommand(len(batch) + 1, *cmd.args, **cmd.kwargs),
        ]
    batch.append(PipelineCommand(len(batch), *wait.command()))
    await node.execute_pipeline(batch)
    for cmd, sent in zip(cmds, batch[1::2], strict=False):
        cmd.result = sent.result
        if isinstance(sent.result, vexc.AskError | vexc.MovedError | vexc.TryAgainError):
            raise vexc.ConnectionError(f"the slot of {_command(cmd)} moved again during its ASK: try again")
    reply = batch[-1].result
    if isinstance(reply, Exception):
        raise vexc.ConnectionError(f"the WAIT after an ASK to {name} failed ({reply})") from reply
    return reply


def _command(cmd: Any) -> str:
    return " ".join(a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in cmd.args)
