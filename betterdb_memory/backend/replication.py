"""Waiting for replicas: ``WAIT`` after a write, on the connection that took the write.

Valkey replicates asynchronously: a write is acknowledged once the primary applied it,
and a failover to a replica that had not received it yet loses it. ``WAIT numreplicas
timeout`` blocks until that many replicas acknowledged every write *the same client
connection* sent before it (the server keeps the replication offset per connection; a
WAIT on a connection that wrote nothing answers at once). So the WAIT travels in the
write's own pipeline: on a single server a pipeline is one connection; on a cluster
valkey-py sends each node's share of a pipeline on one connection of that node, so one
WAIT per node that took a write goes there, routed to that node.

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

from ..errors import ServerError
from .commands import ScriptCall, Step

__all__ = ["ReplicaWait", "check_acks", "wait_fault", "waits_for"]

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


def check_acks(wait: ReplicaWait, operation: str, acks: Mapping[str, Any]) -> None:
    """Raise unless every node that took a write of ``operation`` had ``wait.replicas`` acknowledgements.

    ``acks`` maps a node (its ``host:port``; ``""`` on a single server) to its ``WAIT``
    reply: the number of replicas that acknowledged.

    Raises:
        ServerError: ``server.replication_timeout``: the write is applied on the
            primary (reads see it) but fewer replicas than asked confirmed it within
            the timeout; a failover before they receive it may lose it.
    """
    short = {node: int(n) for node, n in acks.items() if int(n) < wait.replicas}
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
