"""Helpers and fixtures of the reliability suite (issue 8): real engine, real faults.

The session server of ``tests/conftest.py`` serves the isolation, load, input and
hygiene tests. Crash and connection-fault tests get a dedicated ``EmbeddedServer``
of their own (``own_server``), so killing it never disturbs another test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betterdb_memory.server import AppendFsync, EmbeddedServer

DIM = 384  # HashingEmbedder() default


def unit(*hot: int, dim: int = DIM) -> list[float]:
    """A unit vector with equal weight on the ``hot`` coordinates."""
    v = np.zeros(dim, dtype=np.float32)
    for h in hot:
        v[h] = 1.0
    return [float(x) for x in v / np.linalg.norm(v)]


def random_unit(rng: np.random.Generator, dim: int = DIM) -> list[float]:
    """A random direction: nearest neighbour of itself by a wide margin among a few thousand."""
    v = rng.standard_normal(dim).astype(np.float32)
    return [float(x) for x in v / np.linalg.norm(v)]


async def scan_keys(client: Any, pattern: str) -> list[str]:
    """Every key matching ``pattern`` (SCAN, never KEYS), as text, sorted."""
    out = []
    async for k in client.scan_iter(match=pattern, count=1000):
        out.append(k.decode() if isinstance(k, bytes) else k)
    return sorted(out)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Callable[..., EmbeddedServer]]:
    """Start dedicated servers on ``tmp_path``; whatever state they end in, stop them after."""
    started: list[EmbeddedServer] = []

    def start(appendfsync: AppendFsync = "everysec", sub: str = "data") -> EmbeddedServer:
        server = EmbeddedServer(tmp_path / sub, appendfsync=appendfsync)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        with contextlib.suppress(Exception):
            server.kill()
