"""The authenticated MCP server: a bearer token over real HTTP, and a fixed scope no call can leave.

``betterdb-memory mcp --http`` runs as a subprocess on the session's engine; raw requests
(urllib) check the 401s, the ``mcp`` SDK's client checks that the right token works. The
scope guard is checked in-process (``create_server(store, scope=...)``) against memories
of other scopes written straight through the store, then once through the CLI over HTTP.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (make test installs it)")

from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from betterdb_memory import MemoryStore
from betterdb_memory.adapters.mcp import FixedScope, create_server
from tests.integration.test_adapter_mcp import _cli, _round_trip, call, error, free_port, run_http_server

pytestmark = pytest.mark.integration

TOKEN = "test-token-9f8e7d6c5b4a39281706"
TOKEN_ENV = "BETTERDB_MEMORY_MCP_TOKEN"
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
).encode()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    return {**env, **extra}


def post(url: str, authorization: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One raw ``initialize`` POST: status, headers, body (a 4xx is an answer, not an exception)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    request = urllib.request.Request(url, data=INITIALIZE, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, dict(reply.headers), reply.read()
    except urllib.error.HTTPError as exc:
        with exc:  # an HTTPError holds the response (and its socket) open
            return exc.code, dict(exc.headers), exc.read()


@asynccontextmanager
async def client_with(url: str, token: str) -> AsyncIterator[Client]:
    """The SDK's client sending ``Authorization: Bearer <token>`` on every request."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def server_log() -> Iterator[Any]:
    with tempfile.TemporaryFile("w+") as log:
        yield log


@pytest.fixture(scope="module")
def token_server(valkey_url: str, server_log: Any) -> Iterator[str]:
    """The HTTP server with ``$BETTERDB_MEMORY_MCP_TOKEN`` set, on loopback.

    One for the module's token tests: starting the CLI costs seconds (much more on a loaded
    machine) and the tests share nothing but it (they send requests, and the one round trip
    forgets what it writes); the log then holds every test's requests, which only makes
    "the token never reaches the log" see more.
    """
    name = f"t{uuid.uuid4().hex[:12]}"
    yield from run_http_server(valkey_url, name, env=_env(**{TOKEN_ENV: TOKEN}), log=server_log)


# -- the token ------------------------------------------------------------------------------------


def test_no_token_and_wrong_tokens_get_401(token_server: str) -> None:
    status, headers, body = post(token_server)
    assert status == 401 and headers["www-authenticate"] == 'Bearer realm="betterdb-memory"'
    assert json.loads(body)["error"] == "unauthorized"
    for wrong in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer " + "a" * len(TOKEN), f"Basic {TOKEN}"):
        status, headers, body = post(token_server, wrong)
        assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"], wrong
    status, _, _ = post(token_server, f"Bearer {TOKEN}")
    assert status == 200


def test_every_path_and_method_needs_the_token(token_server: str) -> None:
    root = token_server.removesuffix("/mcp")
    for method, url in (
        ("GET", token_server),
        ("DELETE", token_server),
        ("GET", root + "/"),
        ("GET", root + "/x"),
    ):
        request = urllib.request.Request(url, method=method)
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=30)
        info.value.close()
        assert info.value.code == 401, (method, url)


async def test_the_sdk_client_works_with_the_token_and_not_without(token_server: str) -> None:
    async with client_with(token_server, TOKEN) as client:
        await _round_trip(client)
    with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises for a 401
        async with Client(token_server) as client:
            await client.list_tools()


def test_the_token_never_reaches_the_log(token_server: str, server_log: Any) -> None:
    post(token_server, f"Bearer {TOKEN}")
    post(token_server, f"Bearer {TOKEN}-wrong")
    server_log.seek(0)
    text = server_log.read()
    assert "bearer token from $BETTERDB_MEMORY_MCP_TOKEN" in text and TOKEN not in text


async def test_token_from_a_file_on_every_interface(
    valkey_url: str, unique_name: str, tmp_path: Path
) -> None:
    """``--host 0.0.0.0 --token-file``: listens (reached here through 127.0.0.1) and checks the file's token."""
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    servers = run_http_server(
        valkey_url, unique_name, "--host", "0.0.0.0", "--token-file", str(path), env=_env()
    )
    url = next(servers)
    try:
        assert post(url)[0] == 401 and post(url, "Bearer wrong-token-0123456789")[0] == 401
        async with client_with(url, TOKEN) as client:
            await _round_trip(client)
    finally:
        servers.close()


def _refused(
    valkey_url: str, name: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, str, bool]:
    """Run the CLI to its exit: its code, its standard error, whether anything listened."""
    port = free_port()
    done = subprocess.run(
        _cli(valkey_url, name, "--port", str(port), *extra),
        capture_output=True, text=True, timeout=60, check=False, env=env or _env(),
    )  # fmt: skip
    with socket.socket() as s:
        listened = s.connect_ex(("127.0.0.1", port)) == 0
    return done.returncode, done.stderr, listened


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_non_loopback_bind_without_a_token_refuses_to_start(
    valkey_url: str, unique_name: str, host: str
) -> None:
    code, err, listened = _refused(valkey_url, unique_name, "--http", "--host", host)
    assert code == 2 and not listened
    assert "configuration.mcp_token_required" in err and "--token-file" in err


def test_unfit_tokens_refuse_to_start(valkey_url: str, unique_name: str, tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("tooshort")
    for extra, env in (
        (("--token-file", str(short)), _env()),
        (("--token-file", str(tmp_path / "absent")), _env()),
        ((), _env(**{TOKEN_ENV: "has spaces in the token"})),
    ):
        code, err, listened = _refused(valkey_url, unique_name, "--http", *extra, env=env)
        assert code == 2 and "configuration.mcp_token_invalid" in err and not listened, err
        assert "tooshort" not in err and "has spaces" not in err
    code, err, _ = _refused(valkey_url, unique_name, "--token-file", str(short))  # stdio
    assert code == 2 and "validation.usage" in err


# -- the fixed scope ------------------------------------------------------------------------------


async def _others(store: MemoryStore) -> dict[str, str]:
    """Memories the confined client must never reach, each matching the probe query exactly."""
    return {
        "ns": await store.remember("The vault code is 4711.", namespace="other", agent_id="bot"),
        "agent": await store.remember("The vault code is 4711.", namespace="acme", agent_id="spy"),
        "none": await store.remember("The vault code is 4711."),
    }


async def test_scope_escape_attempts_are_refused(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    others = await _others(store)
    async with Client(create_server(store, scope=FixedScope(namespace="acme", agent_id="bot"))) as client:
        denied = {"code": "server.scope_denied"}
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("remember", {"content": "x", "namespace": "other"}),
            ("remember", {"content": "x", "agent_id": "spy"}),
            ("remember", {"content": "overwrite", "id": others["ns"]}),
            ("remember", {"content": "overwrite", "id": others["none"]}),
            ("recall", {"query": "vault code", "namespace": "other"}),
            ("recall", {"query": "vault code", "agent_id": "spy"}),
            ("list", {"namespace": "other"}),
            ("list", {"agent_id": "spy"}),
            ("fact_history", {"subject": "vault code", "namespace": "other"}),
            ("fact_history", {"subject": "vault code", "agent_id": "spy"}),
            ("forget", {"id": others["ns"]}),
            ("forget", {"id": others["agent"]}),
            ("forget", {"id": others["none"]}),
            (
                "store_turn",
                {"thread_id": "t", "user_message": "u", "assistant_message": "a", "agent_id": "spy"},
            ),
            ("retrieve_context", {"thread_id": "t", "query": "vault", "agent_id": "spy"}),
            ("retrieve_context", {"thread_id": "t", "query": "vault", "namespace": "other"}),
        ]
        for tool, arguments in attempts:
            err = await error(client, tool, **arguments)
            assert err["code"] == denied["code"], (tool, arguments, err)
        # Nothing of the others changed.
        for mid in others.values():
            got = await store.get(mid)
            assert got is not None and got.content == "The vault code is 4711."
        assert await store.count(namespace="acme", agent_id="bot") == 0


async def test_calls_without_a_scope_get_the_fixed_one(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    others = await _others(store)
    async with Client(create_server(store, scope=FixedScope(namespace="acme", agent_id="bot"))) as client:
        assert "confined to namespace='acme', agent_id='bot'" in (client.instructions or "")
        mine = (await call(client, "remember", content="The vault code is 4711.", thread_id="t"))["id"]
        item = await store.get(mine)
        assert item is not None and (item.namespace, item.agent_id, item.thread_id) == ("acme", "bot", "t")
        same = (await call(client, "remember", content="Mine again.", namespace="acme", agent_id="bot"))["id"]
        assert (await call(client, "remember", content="replaced", id=same))["id"] == same  # our own id: fine
        hits = (await call(client, "recall", query="The vault code is 4711."))["hits"]
        assert hits[0]["memory"]["id"] == mine and {h["memory"]["id"] for h in hits} <= {mine, same}
        page = await call(client, "list")
        assert {i["id"] for i in page["items"]} == {mine, same} and page["total"] == 2
        assert (await call(client, "stats"))["items"] == 2  # of this scope; the store holds 5
        await store.remember("The alarm code is 1234.", namespace="other", agent_id="bot", subject="alarm")
        await store.remember("The alarm code is 9999.", namespace="acme", agent_id="bot", subject="alarm")
        (version,) = (await call(client, "fact_history", subject="alarm"))["versions"]
        assert version["content"] == "The alarm code is 9999." and version["current"] is True
        await store.forget(version["id"])
        await call(client, "store_turn", thread_id="t", user_message="Code?", assistant_message="4711.")
        assert [t.user_message for t in await store.get_recent_turns("t", agent_id="bot")] == ["Code?"]
        assert await store.get_recent_turns("t") == []
        ctx = await call(client, "retrieve_context", thread_id="t", query="The vault code is 4711.")
        assert {h["memory"]["id"] for h in ctx["memories"]} <= {mine, same} and ctx["memories"]
        assert [t["user_message"] for t in ctx["turns"]] == ["Code?"]
        assert (await call(client, "forget", id=mine)) == {"deleted": True}
        assert (await call(client, "forget", id="f" * 32)) == {"deleted": False}  # none: nothing to refuse
    assert all([await store.get(mid) for mid in others.values()])


async def test_a_namespace_alone_keeps_sessions_closed(make_store: Callable[..., MemoryStore]) -> None:
    """L1 turns are keyed by (agent, thread): under --namespace alone the session tools are refused."""
    store = make_store()
    await store.store_turn("t", "someone else's question", "answer", agent_id="x")
    async with Client(create_server(store, scope=FixedScope(namespace="acme"))) as client:
        for tool, arguments in (
            (
                "store_turn",
                {"thread_id": "t", "user_message": "u", "assistant_message": "a", "agent_id": "x"},
            ),
            ("retrieve_context", {"thread_id": "t", "query": "q", "agent_id": "x"}),
            ("retrieve_context", {"thread_id": "t", "query": "q"}),
        ):
            err = await error(client, tool, **arguments)
            assert (
                err["code"] == "server.scope_denied" and err["details"]["reason"] == "sessions_need_agent_id"
            )
        assert (await call(client, "remember", content="fine", agent_id="anyone"))["id"]
    assert len(await store.get_recent_turns("t", agent_id="x")) == 1


async def test_the_cli_confines_http_clients_to_its_scope(valkey_url: str, unique_name: str) -> None:
    servers = run_http_server(
        valkey_url, unique_name, "--namespace", "acme", "--agent-id", "bot", env=_env(**{TOKEN_ENV: TOKEN})
    )
    url = next(servers)
    try:
        async with client_with(url, TOKEN) as client:
            assert (await error(client, "recall", query="x", namespace="other"))[
                "code"
            ] == "server.scope_denied"
            mid = (await call(client, "remember", content="Confined."))["id"]
            page = await call(client, "list", namespace="acme", agent_id="bot")
            assert [(i["id"], i["namespace"], i["agent_id"]) for i in page["items"]] == [(mid, "acme", "bot")]
    finally:
        servers.close()


def test_a_bad_fixed_scope_refuses_to_start(valkey_url: str, unique_name: str) -> None:
    code, err, _ = _refused(valkey_url, unique_name, "--namespace", "a,b")
    assert code == 2 and "validation.comma" in err


def test_help_names_the_options() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "betterdb_memory.cli", "mcp", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    for option in ("--token-file", TOKEN_ENV, "--namespace", "--agent-id"):
        assert option in done.stdout
