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
