"""Getting a cluster's valkey-search to index what a Lua script wrote, before anyone reads it.

valkey-search (1.2.1 read: ``IndexSchema::ProcessMutation``, ``ProcessMultiQueue`` in
src/index_schema.cc) does not index a document written inside a Lua script or a
MULTI/EXEC when the write happens: it queues the key, per index, and drains the queue
when the next ``FT.SEARCH`` / ``FT.AGGREGATE`` *command* for that index reaches the node
(or once the queue holds as many keys as the node has writer threads,
``search.writer-threads``, 2 here). On one server every search is such a command, so
read-after-write holds. On a cluster a search goes to one node and reaches the other
shards as coordinator fan-out (gRPC), which drains nothing there: a document a script
wrote on another shard stays out of the index (or in it with its old values, or still
in it after a ``RENAME`` took it away) until a search happens to be sent to that node
itself. Measured on the 3-primary test cluster (tests/cluster/test_cluster_script_writes.py):
5 of 9 superseded versions missing from ``as_of`` right after the write that retired
them, flushed ``access_count`` snapshots missing from a filtered search; and, under a
stream of recalls, fan-out queries that meet a queue being drained stalled up to the
query timeout (25 of 600 recalls, none with a drain after each write).

So after a round trip that ran a script writing indexed documents (``writes_documents``),
the backend sends ``FT.SEARCH <index> @created_at:[0 0] LOCALONLY NOCONTENT LIMIT 0 0``
to each node those scripts ran on, for each index the store uses (``ScriptWriteNudge``):
the command drains that node's queue for that index before it answers (it matches
nothing, and a numeric range of one value is the cheapest query there is). Only on a
cluster, only on an engine that defers these writes (``Capabilities.defers_script_writes``),
only for the scripts that write documents. A nudge that fails is logged, never raised:
the write itself succeeded, and the engine indexes the keys at its next drain anyway.

Plain commands instead of the scripts would not need this, but each script is there for
its atomicity (``RETIRE`` never leaves a stub of a gone document, ``FLUSH`` never
resurrects one, ``REPLACE`` is never seen half-done); MULTI/EXEC is queued the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import valkey.exceptions as vexc

from ..errors import IndexNotFoundError, classify_server_error
from . import scripts as _scripts
from . import scripts_reinforce as _reinforce
from .cluster_nodes import nodes_of
from .commands import Script, ScriptCall, Step

__all__ = ["DOCUMENT_WRITERS", "ScriptWriteNudge", "nudge_args", "writes_documents"]

log = logging.getLogger(__name__)

#: The scripts that write (or rename, or delete) documents under an index's prefix.
#: ``ACCESS`` only in write-through mode (``writes_documents``); the subjects' pointer
#: scripts write no document, ``SUBJECT_TRIM`` stamps one.
DOCUMENT_WRITERS: frozenset[Script] = frozenset(
    {
        _scripts.RETIRE,
        _scripts.REPLACE,
        _scripts.SUBJECT_TRIM,
        _scripts.REEMBED_SWAP,
        _scripts.INDEX_BACKFILL,
        _reinforce.FLUSH,
    }
)
#: The FT.* commands whose second argument names an index the store uses.
_NAMING = frozenset({"FT.SEARCH", "FT.AGGREGATE", "FT.INFO", "FT.CREATE"})
#: At most this many index names are kept (a store uses two; an index switch adds one).
_MAX_INDEXES = 8


def writes_documents(step: Step) -> bool:
    """Whether ``step`` is a script call that writes indexed documents.

    ``ACCESS`` writes its document only in write-through mode: reinforcing (ARGV[1] "1")
    with an interval (ARGV[4]) of 0 (``tiers.reinforce``); otherwise it writes keys no
    index watches.
    """
    if not isinstance(step, ScriptCall):
        return False
    if step.script in DOCUMENT_WRITERS:
        return True
    args = step.args
    return step.script == _reinforce.ACCESS and len(args) > 3 and str(args[0]) == "1" and str(args[3]) == "0"


def nudge_args(index: str) -> list[str]:
    """The search that drains ``index``'s queue of script writes on the node it is sent to.

    ``LOCALONLY``: answered by that node alone (no fan-out); every index of the
    library has the NUMERIC ``created_at`` (``core.query.MATCH_ALL``), and no memory
    was created at epoch 0 ms, so it matches nothing.
    """
    return [
        "FT.SEARCH",
        index,
        "@created_at:[0 0]",
        "LOCALONLY",
        "NOCONTENT",
        "LIMIT",
        "0",
        "0",
        "DIALECT",
        "2",
    ]


class ScriptWriteNudge:
    """Sends ``nudge_args`` after script writes, for the indexes the backend's own FT.* traffic named.

    The index names are learned from the commands the backend sends (``seen``): a store
    asks for its indexes (``FT.INFO``, ``FT.CREATE``) before it writes, and index
    switches are followed through the backend's redirects. An index that is gone is
    forgotten at its first failed nudge.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.indexes: dict[str, None] = {}  # an ordered set, newest last
        self.sent = 0  # nudges sent (for tests and benchmarks)

    def seen(self, args: Sequence[Any]) -> Sequence[Any]:
        """Note the index ``args`` (an FT.* command) names; returns ``args``."""
        if len(args) > 1 and args[0] in _NAMING:
            name = str(args[1])
            if name not in self.indexes:
                self.indexes[name] = None
                while len(self.indexes) > _MAX_INDEXES:
                    del self.indexes[next(iter(self.indexes))]
        return args

    async def after(self, commands: Sequence[Step]) -> None:
        """Drain, on each node a document-writing script of ``commands`` ran on, every known index's queue."""
        writes = [step for step in commands if writes_documents(step)]
        indexes = list(self.indexes)
        if not writes or not indexes:
            return
        try:
            nodes = list({node.name: node for node in await nodes_of(self.client, writes)}.values())
        except (vexc.ValkeyError, vexc.ValkeyClusterException, OSError) as exc:
            log.warning("could not route the index nudge after a script write: %s", exc)
            return
        pairs = [(node, index) for node in nodes for index in indexes]
        self.sent += len(pairs)
        replies = await asyncio.gather(
            *(self.client.execute_command(*nudge_args(index), target_nodes=node) for node, index in pairs),
            return_exceptions=True,
        )
        for (node, index), reply in zip(pairs, replies, strict=True):
            if not isinstance(reply, Exception):
                continue
            if (
                isinstance(reply, vexc.ResponseError)
                and classify_server_error(str(reply)) is IndexNotFoundError
            ):
                self.indexes.pop(index, None)  # dropped (an index switch's old one): nothing to drain
                continue
            log.warning(
                "index nudge of %s on %s failed (indexed at its next drain): %s", index, node.name, reply
            )
