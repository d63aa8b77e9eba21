"""The embedded engine: start, persist, restart, crash recovery, attach, errors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import valkey

from betterdb_memory.errors import ConfigurationError, StoreConnectionError
from betterdb_memory.server import EmbeddedServer, find_binaries

pytestmark = pytest.mark.integration


def _client(server: EmbeddedServer) -> valkey.Valkey:
    assert server.port is not None
    return valkey.Valkey(host="127.0.0.1", port=server.port)


def test_search_module_answers_hybrid_knn(tmp_path: Path) -> None:
    """The embedded pair runs KNN + TAG + NUMERIC hybrid queries."""
    with EmbeddedServer(tmp_path / "d") as server:
        c = _client(server)
        c.execute_command(
            "FT.CREATE", "i", "ON", "HASH", "PREFIX", "1", "d:", "SCHEMA",
            "v", "VECTOR", "HNSW", "6", "TYPE", "FLOAT32", "DIM", "2", "DISTANCE_METRIC", "COSINE",
            "t", "TAG", "n", "NUMERIC",
        )  # fmt: skip
        c.hset("d:1", mapping={"v": np.array([1, 0], np.float32).tobytes(), "t": "a", "n": 1})
        c.hset("d:2", mapping={"v": np.array([0, 1], np.float32).tobytes(), "t": "b", "n": 5})
        reply = c.execute_command(
            "FT.SEARCH", "i", "(@t:{b} @n:[2 +inf])=>[KNN 2 @v $q AS d]", "PARAMS", "2", "q",
            np.array([1, 0], np.float32).tobytes(), "RETURN", "1", "d", "DIALECT", "2",
        )  # fmt: skip
        assert reply[0] == 1 and reply[1] == b"d:2"
        c.close()


def test_data_survives_clean_restart(tmp_path: Path) -> None:
    """Write, stop, start again on the same data dir, read the data back."""
    data = tmp_path / "d"
    server = EmbeddedServer(data).start()
    c = _client(server)
    c.set("k", "v1")
    c.close()
    server.stop()
    assert not server.running
    server2 = EmbeddedServer(data).start()
    c = _client(server2)
    assert c.get("k") == b"v1"
    c.close()
    server2.stop()


def test_sigkill_recovers_from_aof(tmp_path: Path) -> None:
    """SIGKILL with appendfsync always: the next start replays the AOF and loses nothing."""
    data = tmp_path / "d"
    server = EmbeddedServer(data, appendfsync="always").start()
    c = _client(server)
    for i in range(200):
        c.set(f"k{i}", i)
    c.close()
    server.kill()
    assert not server.running
    server.restart()
    c = _client(server)
    assert [int(c.get(f"k{i}") or -1) for i in range(200)] == list(range(200))
    c.close()
    server.stop()


def test_second_server_on_same_dir_attaches(tmp_path: Path) -> None:
    """A second EmbeddedServer on a live data dir reuses the running process."""
    data = tmp_path / "d"
    first = EmbeddedServer(data).start()
    second = EmbeddedServer(data).start()
    assert second.port == first.port and second.pid == first.pid
    first.stop()


def test_stale_state_file_is_cleaned(tmp_path: Path) -> None:
    """A state file naming a dead process does not stop a new start."""
    data = tmp_path / "d"
    data.mkdir()
    (data / "betterdb-server.json").write_text('{"pid": 999999, "port": 1}')
    server = EmbeddedServer(data).start()
    assert server.running
    server.stop()


def test_startup_error_names_the_log(tmp_path: Path) -> None:
    """A server that cannot start raises StoreConnectionError with the log path."""
    server = EmbeddedServer(tmp_path / "d", extra_args=("--no-such-option", "x"))
    with pytest.raises(StoreConnectionError) as err:
        server.start()
    assert str(server.log_path) in str(err.value)
    assert err.value.details["log_path"] == str(server.log_path)


def test_bad_appendfsync_is_rejected() -> None:
    with pytest.raises(ConfigurationError):
        EmbeddedServer(appendfsync="sometimes")  # type: ignore[arg-type]


def test_persistence_on_by_default(tmp_path: Path) -> None:
    """The default server runs with AOF on and appendfsync everysec."""
    with EmbeddedServer(tmp_path / "d") as server:
        c = _client(server)
        assert c.config_get("appendonly")["appendonly"] == "yes"
        assert c.config_get("appendfsync")["appendfsync"] == "everysec"
        c.close()


def test_binaries_exist() -> None:
    b = find_binaries()
    assert os.access(b.server, os.X_OK) and b.search_module.exists()
