"""Helpers and fixtures of the reliability suite (issue 8): real engine, real faults.

The session server of ``tests/conftest.py`` serves the isolation, load, input and
hygiene tests. Crash and connection-fault tests get a dedicated ``EmbeddedServer``
of their own (``own_server``), so killing it never disturbs another test; it runs
the session's engine (valkey-search under ``make test-valkey-search``, see
``tests/engines.py``), else the embedded one.
``FaultProxy`` is a TCP relay in front of a real server that drops the connection
at an exact command (the n-th request carrying a byte pattern), for faults that
must land between two round trips of one operation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pytest

from betterdb_memory.server import AppendFsync, EmbeddedServer
from tests.engines import own_server_binaries

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
    binaries = own_server_binaries(tmp_path)

    def start(appendfsync: AppendFsync = "everysec", sub: str = "data") -> EmbeddedServer:
        server = EmbeddedServer(tmp_path / sub, appendfsync=appendfsync, binaries=binaries)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        with contextlib.suppress(Exception):
            server.kill()


class FaultProxy:
    """A TCP relay to a real server that can cut every connection on cue.

    ``arm(pattern, nth)``: the client's request chunk carrying the n-th ``pattern``
    (for example ``b"EVALSHA"``) is not forwarded; every relayed connection is
    aborted instead, and with ``stay_down`` new connections are refused until
    ``restore()``. With ``split`` the commands before the one carrying the pattern
    are forwarded (and given time to run) first: a pipeline torn in the middle.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.port = 0
        self.down = False
        self.cuts = 0
        self._armed: tuple[bytes, int, bool, bool] | None = None
        self._seen = 0
        self._transports: set[asyncio.BaseTransport] = set()
        self._server: asyncio.AbstractServer | None = None

    @property
    def url(self) -> str:
        return f"valkey://127.0.0.1:{self.port}"

    async def start(self) -> FaultProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self.cut(stay_down=True)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def arm(self, pattern: bytes, nth: int = 1, *, stay_down: bool = False, split: bool = False) -> None:
        self._armed, self._seen = (pattern, nth, stay_down, split), 0

    def cut(self, *, stay_down: bool = False) -> None:
        self.cuts += 1
        self.down = stay_down
        for t in list(self._transports):
            t.abort()  # type: ignore[attr-defined]
        self._transports.clear()

    def restore(self) -> None:
        self.down = False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._transports |= {writer.transport, up_writer.transport}

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, upstream: bool) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(1 << 16):
                    if upstream and self._armed is not None:
                        pattern, nth, stay_down, split = self._armed
                        pos = -1
                        while self._seen < nth and (pos := data.find(pattern, pos + 1)) >= 0:
                            self._seen += 1
                        if self._seen >= nth:
                            self._armed = None
                            if split:  # forward whole commands up to the RESP array carrying it
                                dst.write(data[: data.rfind(b"*", 0, pos)])
                                await dst.drain()
                                await asyncio.sleep(0.1)
                            self.cut(stay_down=stay_down)
                            return
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))
        self._transports -= {writer.transport, up_writer.transport}


@pytest.fixture
async def fault_proxy(valkey_url: str) -> AsyncIterator[FaultProxy]:
    """A ``FaultProxy`` in front of the session server."""
    url = urlparse(valkey_url)
    proxy = await FaultProxy(url.hostname or "127.0.0.1", url.port or 6379).start()
    yield proxy
    await proxy.close()
