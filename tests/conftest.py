"""Shared fixtures: one real Valkey + search module for the whole session.

``VALKEY_URL`` set: use that server and start nothing (asyncpg's running-server mode).
Otherwise an ``EmbeddedServer`` on a free port with a temporary data dir. Tests never
FLUSHALL: each test gets its own store name, so its keys and index are its own.

Under ``make test-valkey-search`` (``BETTERDB_TEST_ENGINE=valkey-search``) the tests that
cannot reach a server are left out (``engine_independent``): they already ran, identically,
in ``make test``, and would only add minutes to CI.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.backend.dialect import keyless_route
from betterdb_memory.core.dialect import parse_module_list
from betterdb_memory.server import EmbeddedServer, server_url_from_env
from tests.engines import session_engine

#: The fixtures that reach a server: the session server (``client``, ``make_store`` and every
#: store fixture depend on it, so it is in their closure) and the reliability suite's own
#: servers (``own_server``: they run the session's engine, see ``tests/engines.py``).
SERVER_FIXTURES = frozenset({"valkey_url", "own_server"})
UNIT_DIR = Path(__file__).resolve().parent / "unit"
#: A unit module mentioning one of these may reach a server without a fixture: it is kept.
SERVER_HINTS = ("tests.engines", "VALKEY_URL", "BETTERDB_TEST_ENGINE", "EmbeddedServer(")
_DESELECTED = pytest.StashKey[int]()


def engine_independent(path: Path, fixturenames: Iterable[str], module_source: str) -> bool:
    """True for a test whose outcome cannot depend on the session's engine.

    That is a test of ``tests/unit`` (no server by the project's rule) with no server
    fixture in its fixture closure, in a module that names no way to a server of its
    own. Any other test is kept: a storage test always has ``valkey_url`` in its closure,
    and a test that starts a server of its own lives outside ``tests/unit`` or names it.
    """
    return (
        path.resolve().is_relative_to(UNIT_DIR)
        and SERVER_FIXTURES.isdisjoint(fixturenames)
        and not any(hint in module_source for hint in SERVER_HINTS)
    )


def _module_source(module: ModuleType | None, cache: dict[str, str]) -> str:
    """The source text of a test's module (read once per module); empty when it has no file."""
    path = getattr(module, "__file__", None)
    if path is None:
        return ""
    if path not in cache:
        cache[path] = Path(path).read_text(encoding="utf-8")
    return cache[path]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On valkey-search, deselect the tests ``engine_independent`` says ran identically in ``make test``."""
    if session_engine() != "valkey-search":
        return
    sources: dict[str, str] = {}
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        names = getattr(item, "fixturenames", None)
        module = getattr(item, "module", None)
        independent = names is not None and engine_independent(
            item.path, names, _module_source(module, sources)
        )
        (drop if independent else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    config.stash[_DESELECTED] = len(drop)


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    """The one line saying how many tests the valkey-search run left out, and why."""
    dropped = config.stash.get(_DESELECTED, None)
    if dropped is None:
        return None
    return (
        f"valkey-search run: {dropped} tests of tests/unit deselected (no server fixture in their "
        "closure; they ran identically on the embedded engine in make test)"
    )


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
