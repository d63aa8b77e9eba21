"""The embedded server's port (``_ports``): pure socket checks, no server."""

from __future__ import annotations

import socket

import pytest

from betterdb_memory import _ports
from betterdb_memory._ports import ephemeral_low, free_port


def test_a_port_below_the_ephemeral_range_that_binds() -> None:
    """``restart`` wants its port back: one from the ephemeral range may go to a client's outgoing
    connection meanwhile ("Address already in use"), so the port is chosen below that range.

    Bound as the server binds (Valkey sets SO_REUSEADDR on its listening socket): without it, a
    port an earlier test's server left in TIME_WAIT fails to bind, though the server could."""
    low = ephemeral_low()
    for _ in range(20):
        port = free_port()
        assert 20000 <= port < low
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))


def test_a_port_taken_is_skipped() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert not _ports.bindable(port)
        assert free_port() != port


def test_no_room_below_the_range_falls_back_to_the_kernels_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ports, "ephemeral_low", lambda: 20500)  # under 1,000 ports of room
    port = free_port()
    assert 0 < port < 65536
    monkeypatch.setattr(_ports, "bindable", lambda port: False)  # every try taken
    monkeypatch.setattr(_ports, "ephemeral_low", lambda: 32768)
    assert 0 < free_port() < 65536
