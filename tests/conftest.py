"""Shared fixtures: one real Valkey + search module for the whole session.

``VALKEY_URL`` set: use that server and start nothing (asyncpg's running-server mode).
Otherwise an ``EmbeddedServer`` on a free port with a temporary data dir. Tests never
FLUSHALL: each test gets its own store name, so its keys and index are its own.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.backend.dialect import keyless_route
from betterdb_memory.core.dialect import parse_module_list
from betterdb_memory.server import EmbeddedServer, server_url_from_env
from tests.engines import session_engine


@pytest.fixture(scope="session")
def valkey_url() -> Iterator[str]:
    """URL of the session's real server (embedded unless VALKEY_URL is set)."""
    url = server_url_from_env()
    if url:
        yield url
        return
    server = EmbeddedServer(data_dir=None, appendfsync="everysec")
    server.start()
    os.environ["BETTERDB_TEST_SERVER_LOG"] = str(server.log_path)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def expected_engine(valkey_url: str) -> str:
    """The engine the session server runs: as the harness declared it, else the embedded one's, else asked.

    ``make test-valkey-search`` declares ``valkey-search``; without ``VALKEY_URL`` the
    session runs the embedded RediSearch; any other server is asked (``MODULE LIST``).
    """
    declared = session_engine()
    if declared:
        return declared
    if not server_url_from_env():
        return "redisearch"
    import valkey

    with valkey.Valkey.from_url(valkey_url) as c:
        found = parse_module_list(c.execute_command("MODULE", "LIST"))
    return found[0] if found else "unknown"


@pytest.fixture
async def client(valkey_url: str) -> AsyncIterator[avalkey.Valkey]:
    """A fresh async client (bytes replies) to the session server, closed after the test."""
    c = avalkey.Valkey.from_url(valkey_url, decode_responses=False)
    try:
        yield c
    finally:
        await c.aclose()


@pytest.fixture
async def text_client(valkey_url: str) -> AsyncIterator[avalkey.Valkey]:
    """A fresh async client with decode_responses=True."""
    c = avalkey.Valkey.from_url(valkey_url, decode_responses=True)
    try:
        yield c
    finally:
        await c.aclose()


@pytest.fixture
async def make_store(client: avalkey.Valkey, unique_name: str) -> AsyncIterator[Callable[..., MemoryStore]]:
    """Build stores on the session server (HashingEmbedder unless given); all closed after the test."""
    made: list[MemoryStore] = []

    def factory(**options: Any) -> MemoryStore:
        options.setdefault("client", client)
        options.setdefault("name", unique_name)
        options.setdefault("embedder", HashingEmbedder())
        store = MemoryStore(**options)
        made.append(store)
        return store

    try:
        yield factory
    finally:
        for store in made:
            await store.close()
        # Each store makes two indexes (memories, history) and valkey-search allows 1,000 per
        # server: drop this test's (its keys stay; no later test reads them).
        route = keyless_route(client)
        for name in {s.name for s in made}:
            for index in (f"{name}:mem:idx", f"{name}:hist:idx"):
                with contextlib.suppress(Exception):
                    await client.execute_command("FT.DROPINDEX", index, **route)


@pytest.fixture
def unique_name() -> str:
    """A store name no other test uses (so keys and index names never collide)."""
    return f"t{uuid.uuid4().hex[:12]}"
