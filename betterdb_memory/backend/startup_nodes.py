"""Keep a cluster client able to find its cluster after a burst of connection errors.

valkey-py's asyncio ``ValkeyCluster`` drops a node from its startup nodes at every
connection error to it, and disconnects every node's connections to re-read the slots
map; requests in flight on healthy nodes then fail too, and drop those nodes in turn.
Under load, a killed primary can empty the list (seen in tests/cluster/
test_cluster_replicas.py), and from then on every call fails for good with "Valkey
Cluster cannot be connected. Please provide at least one reachable node: None" (the
same code in redis-py: redis/redis-py#3693, fix proposed in #3697). Before each attempt
the backend puts the nodes it last knew back, so the next attempt finds the cluster.
"""

from __future__ import annotations

from typing import Any

__all__ = ["restore_startup_nodes"]


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
