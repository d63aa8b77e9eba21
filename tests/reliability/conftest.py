"""Helpers and fixtures of the reliability suite (issue 8): real engine, real faults.

The session server of ``tests/conftest.py`` serves the isolation, load, input and
hygiene tests. Crash and connection-fault tests get a dedicated ``EmbeddedServer``
of their own (``own_server``), so killing it never disturbs another test; it runs
the session's engine (valkey-search under ``make test-valkey-search``, see
``tests/engines.py``), else the embedded one.
``FaultProxy`` is a TCP relay in front of a real server that drops the connection
at an exact command (the n-th request carrying a byte pattern), for faults that
must land between two round trips of one operation; with ``chaos(Chaos(...))`` it
injects random faults on every relayed chunk instead (latency, resets before and
after the server applied a command, torn and dropped replies, half-open
connections, slow reads), bounded in number, until ``heal()``; ``hold()`` freezes
every relayed connection (a partition: bytes wait in the proxy) until ``release()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
from collections import Counter
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


#: The faults ``Chaos`` injects: on a request chunk (client to server) and on a reply chunk.
REQUEST_FAULTS = ("latency", "reset_before_apply", "reset_after_apply", "half_open")
REPLY_FAULTS = ("latency", "torn_reply", "dropped_reply", "slow_read")


@dataclasses.dataclass
class Chaos:
    """Random faults for ``FaultProxy.chaos``: each relayed chunk meets one with probability ``rate``.

    ``max_faults`` bounds the total and ``max_silent`` the faults that leave a
    connection silent (half-open, dropped reply: the client's socket timeout ends them,
    and the proxy aborts the connection after ``silence`` seconds in any case), so a
    workload under chaos ends in bounded time. ``injected`` counts them by kind.
    """

    seed: int
    rate: float = 0.04
    max_faults: int = 400
    max_silent: int = 12
    silence: float = 2.0
    injected: Counter[str] = dataclasses.field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def draw(self, kinds: tuple[str, ...]) -> str | None:
        """The fault for the next chunk, if any (within the bounds)."""
        if sum(self.injected.values()) >= self.max_faults or self.rng.random() >= self.rate:
            return None
        kind = self.rng.choice(kinds)
        silent = self.injected["half_open"] + self.injected["dropped_reply"]
        if kind in ("half_open", "dropped_reply") and silent >= self.max_silent:
            kind = "latency"
        self.injected[kind] += 1
        return kind


class FaultProxy:
    """A TCP relay to a real server that can cut every connection on cue.

    ``arm(pattern, nth)``: the client's request chunk carrying the n-th ``pattern``
    (for example ``b"EVALSHA"``) is not forwarded; every relayed connection is
    aborted instead, and with ``stay_down`` new connections are refused until
    ``restore()``. With ``split`` the commands before the one carrying the pattern
    are forwarded (and given time to run) first: a pipeline torn in the middle. With
    ``after`` the chunk itself is forwarded and run before the cut: the server applied
    the command, its reply is lost.

    ``hold()`` stops relaying, both ways, on every connection, from the next chunk on:
    each is kept in the proxy (in order) until ``release()`` forwards it, or until the
    proxy closes and drops it. The proxy runs on the caller's event loop, so a chunk
    the server sends after ``hold()`` returns is never relayed before ``release()``: a
    partition with no race to lose.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.port = 0
        self.down = False
        self.cuts = 0
        self._armed: tuple[bytes, int, bool, bool] | None = None
        self._after = False
        self._chaos: Chaos | None = None
        self._seen = 0
        self._flowing = asyncio.Event()
        self._flowing.set()
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
        self._flowing.set()  # held chunks now meet aborted connections: dropped
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def arm(
        self,
        pattern: bytes,
        nth: int = 1,
        *,
        stay_down: bool = False,
        split: bool = False,
        after: bool = False,
    ) -> None:
        self._armed, self._seen, self._after = (pattern, nth, stay_down, split), 0, after

    def cut(self, *, stay_down: bool = False) -> None:
        self.cuts += 1
        self.down = stay_down
        for t in list(self._transports):
            t.abort()  # type: ignore[attr-defined]
        self._transports.clear()

    def restore(self) -> None:
        self.down = False

    def hold(self) -> None:
        """Relay nothing more, either way, until ``release()`` (see the class docstring)."""
        self._flowing.clear()

    def release(self) -> None:
        """Forward what ``hold()`` kept, in order, and relay again."""
        self._flowing.set()

    def chaos(self, chaos: Chaos) -> None:
        """Inject ``chaos``'s random faults on every relayed chunk from now on, until ``heal``."""
        self._chaos = chaos

    def heal(self) -> None:
        """Stop injecting faults (connections a fault left silent are aborted by their timer)."""
        self._chaos = None

    async def _chaotic(self, data: bytes, dst: asyncio.StreamWriter, upstream: bool, link: _Link) -> bool:
        """Relay ``data`` through a random fault, if one is drawn; False when the connection is done."""
        chaos = self._chaos
        kind = chaos.draw(REQUEST_FAULTS if upstream else REPLY_FAULTS) if chaos is not None else None
        if chaos is None or kind is None:
            dst.write(data)
            await dst.drain()
            return True
        rng = chaos.rng
        if kind == "latency":
            await asyncio.sleep(rng.uniform(0.005, 0.2))
            dst.write(data)
            await dst.drain()
            return True
        abort = link.abort
        if kind == "reset_before_apply":
            abort()
            return False
        if kind == "reset_after_apply":
            dst.write(data)
            await dst.drain()
            await asyncio.sleep(0.05)  # the server runs the commands; their replies are lost
            abort()
            return False
        if kind == "torn_reply":
            dst.write(data[: rng.randrange(len(data))])
            await dst.drain()
            abort()
            return False
        if kind == "slow_read":
            pos = 0
            while pos < len(data):
                step = rng.randint(1, 64)
                dst.write(data[pos : pos + step])
                await dst.drain()
                pos += step
                await asyncio.sleep(rng.uniform(0, 0.005))
            return True
        # half_open / dropped_reply: nothing more goes either way until the silence ends
        link.muted = True
        if upstream:
            dst.write(data)  # half-open after the request left: the server applies it
            await dst.drain()
        await asyncio.sleep(chaos.silence)
        abort()
        return False

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
        link = _Link(writer, up_writer)

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
                            link.muted = self._after  # the applied command's reply is lost
                            if split or self._after:  # forward whole commands up to (or with) it
                                dst.write(data if self._after else data[: data.rfind(b"*", 0, pos)])
                                await dst.drain()
                                await asyncio.sleep(0.1)
                            self.cut(stay_down=stay_down)
                            return
                    if not self._flowing.is_set():
                        await self._flowing.wait()  # hold(): this chunk waits, the next ones queue
                    if link.muted:
                        continue  # a silent fault holds the connection: swallow what comes
                    if self._chaos is None:
                        dst.write(data)
                        await dst.drain()
                    elif not await self._chaotic(data, dst, upstream, link):
                        return
            dst.transport.abort()

        try:
            await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))
        except asyncio.CancelledError:  # the proxy closed while a fault held this connection silent
            link.abort()  # (not re-raised: asyncio's start_server logs a cancelled handler as an error)
        self._transports -= {writer.transport, up_writer.transport}


@dataclasses.dataclass
class _Link:
    """One relayed connection's two sides, for the chaos faults that end or silence it."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    muted: bool = False

    def abort(self) -> None:
        self.muted = True
        self.client.transport.abort()
        self.server.transport.abort()


@pytest.fixture
async def fault_proxy(valkey_url: str) -> AsyncIterator[FaultProxy]:
    """A ``FaultProxy`` in front of the session server."""
    url = urlparse(valkey_url)
    proxy = await FaultProxy(url.hostname or "127.0.0.1", url.port or 6379).start()
    yield proxy
    await proxy.close()
