"""The embedded server's port: a free one below the kernel's ephemeral range (``free_port``)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

__all__ = ["bindable", "ephemeral_low", "free_port"]


def ephemeral_low(default: int = 32768) -> int:
    """The first port the kernel hands to outgoing connections (Linux ``ip_local_port_range``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(low: int = 20000, tries: int = 64) -> int:
    """A free port below the kernel's ephemeral range, so ``restart`` can have it back.

    ``restart`` starts the server on the port it had. A port from the ephemeral range
    (``bind(0)``) can meanwhile be handed to any outgoing connection on the machine, a
    client's own included, and the restart then fails with "Address already in use" (the
    cluster tests met it in CI). Only when the range leaves no room below it, or every try is
    taken, is the port the kernel's choice.
    """
    top = ephemeral_low()
    if top - low >= 1000:
        start = low + (os.getpid() * 7919 + time.monotonic_ns()) % (top - low)
        for i in range(tries):
            port = low + (start - low + i * 97) % (top - low)
            if bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
