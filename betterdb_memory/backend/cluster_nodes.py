"""Where a cluster client sends things, and two failover gaps of valkey-py's cluster client.

* ``nodes_of``: the node each command of a pipeline goes to, as valkey-py routes it.
* ``load_scripts_on``: after a failover valkey-py may still count the promoted replica as a
  replica (its node list is refreshed less often than its slot map), so a ``SCRIPT LOAD``
  sent to "every primary" misses the node that answered ``NOSCRIPT``: scripts are loaded
  on the nodes the failing commands go to as well.
* ``restore_startup_nodes``: valkey-py's asyncio ``ValkeyCluster`` drops a node from its startup nodes at every
connection error to it, and disconnects every node's connections to re-read the slots
map; requests in flight on healthy nodes then fail too, and drop those nodes in turn.
Under load, a killed primary can empty the list (seen in tests/cluster/
test_cluster_replicas.py), and from then on every call fails for good with "Valkey
Cluster cannot be connected. Please provide at least one reachable node: None" (the
same code in redis-py: redis/redis-py#3693, fix proposed in #3697). Before each attempt
the backend puts the nodes it last knew back, so the next attempt finds the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import valkey.exceptions as vexc

from .commands import Script, Step, wire

__all__ = ["load_scripts_on", "nodes_of", "restore_startup_nodes"]


def restore_startup_nodes(client: Any) -> bool:
    """Refill ``client``'s emptied startup nodes from the nodes it last knew; whether it did.

    A no-op for a client that is not a cluster client or still has a startup node.
    """
    manager = getattr(client, "nodes_manager", None)
    startup = getattr(manager, "startup_nodes", None)
    if not isinstance(startup, dict) or startup:
        return False
    known = dict(getattr(manager, "nodes_cache", None) or {})
    startup.update(known)
    return bool(known)


async def nodes_of(client: Any, commands: Sequence[Step]) -> list[Any]:
    """The node each of ``commands`` goes to, as valkey-py's cluster pipeline routes it."""
    if client._initialize:
        await client.initialize()
    try:
        return [(await client._determine_nodes(*wire(step)))[0] for step in commands]
    except vexc.SlotNotCoveredError as exc:  # a failover under way: a connection fault
        raise vexc.ConnectionError(str(exc)) from exc


async def load_scripts_on(client: Any, commands: Sequence[Step], scripts: Sequence[Script]) -> None:
    """``SCRIPT LOAD`` each of ``scripts`` on every node ``commands`` go to."""
    for node in {n.name: n for n in await nodes_of(client, commands)}.values():
        for script in scripts:
            await client.execute_command("SCRIPT LOAD", script.source, target_nodes=node)
