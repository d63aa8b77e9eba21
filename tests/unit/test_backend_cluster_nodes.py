"""``backend.cluster_nodes``: a cluster client whose startup nodes were emptied gets its known nodes back."""

from __future__ import annotations

from types import SimpleNamespace

from valkey.asyncio.cluster import ValkeyCluster

from betterdb_memory.backend.cluster_nodes import restore_startup_nodes


def _client(startup: dict[str, object], cache: dict[str, object]) -> object:
    return SimpleNamespace(nodes_manager=SimpleNamespace(startup_nodes=startup, nodes_cache=cache))


def test_emptied_startup_nodes_are_refilled_from_the_known_nodes() -> None:
    startup: dict[str, object] = {}
    client = _client(startup, {"a:1": "A", "b:2": "B"})
    assert restore_startup_nodes(client) is True
    assert startup == {"a:1": "A", "b:2": "B"}


def test_startup_nodes_left_alone_while_one_remains() -> None:
    startup: dict[str, object] = {"a:1": "A"}
    assert restore_startup_nodes(_client(startup, {"a:1": "A", "b:2": "B"})) is False
    assert startup == {"a:1": "A"}


def test_a_client_that_is_not_a_cluster_client_is_left_alone() -> None:
    assert restore_startup_nodes(object()) is False
    assert restore_startup_nodes(_client({}, {})) is False


def test_the_attributes_exist_on_valkey_py_s_cluster_client() -> None:
    """The names this relies on (private to valkey-py): a valkey upgrade that renames them fails here."""
    client = ValkeyCluster(host="127.0.0.1", port=7000)
    manager = client.nodes_manager
    assert isinstance(manager.startup_nodes, dict) and isinstance(manager.nodes_cache, dict)
    assert list(manager.startup_nodes) == ["127.0.0.1:7000"]
    manager.startup_nodes.clear()
    manager.nodes_cache["127.0.0.1:7001"] = "known"
    assert restore_startup_nodes(client) is True
    assert list(manager.startup_nodes) == ["127.0.0.1:7001"]


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name


class _Cluster:
    """The parts of valkey-py's cluster client ``nodes_of`` and ``load_scripts_on`` use."""

    def __init__(self, route: dict[str, _Node]) -> None:
        self._initialize = False
        self.route = route
        self.sent: list[tuple[object, ...]] = []

    async def _determine_nodes(self, *args: object) -> list[_Node]:
        return [self.route[str(args[1] if args[0] != "EVALSHA" else args[3])]]

    async def execute_command(self, *args: object, target_nodes: _Node) -> str:
        self.sent.append((*args, target_nodes.name))
        return "sha"


async def test_scripts_are_loaded_on_each_node_the_failing_commands_go_to() -> None:
    """After a failover the promoted replica answers NOSCRIPT; valkey-py may not list it among the
    primaries, so the scripts go to the nodes the commands are routed to, each once."""
    from betterdb_memory.backend import scripts
    from betterdb_memory.backend.cluster_nodes import load_scripts_on, nodes_of

    a, b = _Node("a:1"), _Node("b:2")
    client = _Cluster({"k1": a, "k2": b, "k3": a})
    commands = [scripts.RETIRE.call(["k1", "c1"]), ("HGETALL", "k2"), scripts.RETIRE.call(["k3", "c3"])]
    assert [n.name for n in await nodes_of(client, commands)] == ["a:1", "b:2", "a:1"]
    await load_scripts_on(client, commands, [scripts.RETIRE, scripts.LOCK])
    assert client.sent == [
        ("SCRIPT LOAD", scripts.RETIRE.source, "a:1"),
        ("SCRIPT LOAD", scripts.LOCK.source, "a:1"),
        ("SCRIPT LOAD", scripts.RETIRE.source, "b:2"),
        ("SCRIPT LOAD", scripts.LOCK.source, "b:2"),
    ]
