"""The embedded engine: start, persist, restart, crash recovery, attach, errors."""

from __future__ import annotations

import os
import time
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


#: About 1 ms per key loaded, and LOADING answers every KB read (the default is every 2 MB,
#: so a small test store would load without a single answer in between).
SLOW_LOAD = ("--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024")


def _slow_loading_store(data: Path, keys: int = 5000) -> None:
    """A data dir whose AOF's RDB base holds ``keys`` keys (``key-load-delay`` slows RDB loads only)."""
    server = EmbeddedServer(data).start()
    c = _client(server)
    pipe = c.pipeline(transaction=False)
    for i in range(keys):
        pipe.set(f"k{i}", i)
    pipe.execute()
    c.execute_command("BGREWRITEAOF")
    while True:
        info = c.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            break
        time.sleep(0.05)
    c.close()
    server.stop()


def test_start_waits_for_a_server_loading_its_data(tmp_path: Path) -> None:
    """A large store loads for longer than ``startup_timeout``: start waits, never kills it.

    ``key-load-delay`` (a server test setting, microseconds per key) makes loading 5,000
    keys take about 5 s, longer than the 2 s ``startup_timeout``; the server answers ``LOADING`` meanwhile. Before, that answer
    counted as no answer: start killed the server after ``startup_timeout`` and raised
    ``connection.startup_timeout``, so a store of a million memories could not start.
    """
    data = tmp_path / "d"
    _slow_loading_store(data)
    server = EmbeddedServer(data, startup_timeout=2, extra_args=SLOW_LOAD).start()
    try:
        c = _client(server)
        assert c.dbsize() == 5000
        assert c.get("k4999") == b"4999"
        c.close()
        # A second process on the same data dir attaches (the state file was written while loading).
        again = EmbeddedServer(data, startup_timeout=2).start()
        assert again.pid == server.pid
    finally:
        server.stop()


def test_attach_waits_for_a_loading_server_instead_of_killing_it(tmp_path: Path) -> None:
    """A second ``EmbeddedServer`` meeting the first one's server mid-load attaches and waits."""
    import threading

    data = tmp_path / "d"
    _slow_loading_store(data)
    first = EmbeddedServer(data, startup_timeout=2, extra_args=SLOW_LOAD)
    started = threading.Thread(target=first.start)
    started.start()
    try:
        state = data / "betterdb-server.json"
        for _ in range(200):  # the state file appears once the server answers LOADING
            if state.exists():
                break
            time.sleep(0.02)
        second = EmbeddedServer(data, startup_timeout=2).start()
        c = _client(second)
        assert c.dbsize() == 5000  # it waited for the load instead of killing the server
        c.close()
        started.join(30)
        assert first.pid == second.pid
    finally:
        started.join(30)
        first.stop()
